func.func @attention_head_dim(%q: tensor<4x?x16xf32>, %k: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> {
  %o = kiln.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<4x?x16xf32>, tensor<4x?x8xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  return %o : tensor<4x?x8xf32>
}
