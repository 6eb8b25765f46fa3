func.func @lsh(%qk: tensor<4x?x64xf32>, %v: tensor<4x?x64xf32>) -> tensor<4x?x64xf32> {
  %r = kiln.param "rot" : tensor<2x64x8xf32>
  %o = kiln.lsh_attention %qk, %v, %r {buckets = 16 : i64, hashes = 2 : i64, chunk = 32 : i64, causal, scale = 0.125 : f32} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<2x64x8xf32>) -> tensor<4x?x64xf32>
  %a = kiln.attention %o, %o, %o {scale = 0.125 : f32} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  return %a : tensor<4x?x64xf32>
}
