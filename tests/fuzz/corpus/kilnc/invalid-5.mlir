func.func @attention_mask(%q: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> {
  %o = kiln.attention %q, %q, %q {mask = #kiln.mask<diagonal>, scale = 1.0 : f32} : (tensor<4x?x8xf32>, tensor<4x?x8xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  return %o : tensor<4x?x8xf32>
}
