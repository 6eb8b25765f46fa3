func.func @not_attention(%a: tensor<?x8xf32>, %b: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %s = kiln.matmul %a, %b : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %p = kiln.softmax %s : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %o = kiln.matmul %p, %b : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  return %o : tensor<?x8xf32>
}
