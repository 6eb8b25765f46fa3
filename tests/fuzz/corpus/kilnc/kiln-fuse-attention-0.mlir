func.func @heads_causal(%q: tensor<4x?x64xf32>, %k: tensor<4x?x64xf32>, %v: tensor<4x?x64xf32>) -> tensor<4x?x64xf32> {
  %s = kiln.batch_matmul %q, %k {transpose_b = true} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>) -> tensor<4x?x?xf32>
  %t = kiln.scale %s {factor = 0.125 : f32} : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %m = kiln.mask %t  : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %u = kiln.add %t, %m : (tensor<4x?x?xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %p = kiln.softmax %u : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %o = kiln.batch_matmul %p, %v : (tensor<4x?x?xf32>, tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  return %o : tensor<4x?x64xf32>
}
