func.func @scores_needed(%q: tensor<2x?x8xf32>, %v: tensor<2x?x8xf32>) -> (tensor<2x?x8xf32>, tensor<2x?x?xf32>) {
  %s = kiln.batch_matmul %q, %q {transpose_b = true} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x?xf32>
  %p = kiln.softmax %s : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %o = kiln.batch_matmul %p, %v : (tensor<2x?x?xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  return %o, %s : tensor<2x?x8xf32>, tensor<2x?x?xf32>
}
