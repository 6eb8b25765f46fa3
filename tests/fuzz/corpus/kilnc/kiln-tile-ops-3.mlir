func.func @others(%q: tensor<4x?x32xf32>, %q1: tensor<4x1x32xf32>, %c: tensor<4x64x32xf32>, %past: tensor<1xi32>) -> (tensor<4x?x32xf32>, tensor<4x1x32xf32>) {
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<causal>, scale = 0.17677 : f32} : (tensor<4x?x32xf32>, tensor<4x?x32xf32>, tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  %d = kiln.attention %q1, %c, %c, %past {mask = #kiln.mask<causal>, scale = 0.17677 : f32} : (tensor<4x1x32xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>, tensor<1xi32>) -> tensor<4x1x32xf32>
  %s = kiln.softmax %a {kiln.schedule = #kiln.schedule<rows_per_task = 7>} : (tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  %r = kiln.relu %s : (tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  return %r, %d : tensor<4x?x32xf32>, tensor<4x1x32xf32>
}
