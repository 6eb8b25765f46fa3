func.func @forward(%tokens: tensor<?xi32>, %x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %emb = kiln.param "emb" : tensor<100x64xf32>
  %pos = kiln.param "pos" : tensor<32x64xf32>
  %w = kiln.param "w" : tensor<64x192xf32>
  %b = kiln.param "b" {init = #kiln.init<zeros>} : tensor<192xf32>
  %g = kiln.param "g" {init = #kiln.init<ones>} : tensor<64xf32>
  %z = kiln.param "z" {init = #kiln.init<zeros>} : tensor<64xf32>
  %e = kiln.embedding %emb, %tokens : (tensor<100x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  %p = kiln.position_embedding %pos, %tokens : (tensor<32x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  %s = kiln.add %e, %p : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %m = kiln.mul %s, %g : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %n = kiln.layer_norm %m, %g, %z {epsilon = 1.0e-5 : f32} : (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %qkv = kiln.linear %n, %w, %b {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<?x192xf32>
  %q = kiln.slice %qkv {axis = 1 : i64, offset = 0 : i64} : (tensor<?x192xf32>) -> tensor<?x64xf32>
  %k = kiln.slice %qkv {axis = 1 : i64, offset = 64 : i64} : (tensor<?x192xf32>) -> tensor<?x64xf32>
  %v = kiln.slice %qkv {axis = 1 : i64, offset = 128 : i64} : (tensor<?x192xf32>) -> tensor<?x64xf32>
  %qr = kiln.reshape %q : (tensor<?x64xf32>) -> tensor<?x4x16xf32>
  %kr = kiln.reshape %k : (tensor<?x64xf32>) -> tensor<?x4x16xf32>
  %vr = kiln.reshape %v : (tensor<?x64xf32>) -> tensor<?x4x16xf32>
  %qh = kiln.transpose %qr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %kh = kiln.transpose %kr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %vh = kiln.transpose %vr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %a = kiln.attention %qh, %kh, %vh {mask = #kiln.mask<causal>, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  %cnt = kiln.param "cnt" : tensor<1xi32>
  %xa = kiln.attention %qh, %kh, %vh, %cnt {key_count, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<1xi32>) -> tensor<4x?x16xf32>
  %sp = kiln.sinusoidal_positions %tokens, %cnt : (tensor<?xi32>, tensor<1xi32>) -> tensor<?x64xf32>
  %sc = kiln.batch_matmul %qh, %kh {transpose_b = true} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x?xf32>
  %sm = kiln.softmax %sc : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %g2 = kiln.param "g2" : tensor<64x64xf32>
  %mm = kiln.matmul %x, %g2 : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %sx = kiln.scale %mm {factor = 0.5 : f32} : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %ge = kiln.gelu %sx {approximate = #kiln.gelu<tanh>} : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %re = kiln.relu %ge : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %c = kiln.concat %re, %re {axis = 1 : i64} : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x128xf32>
  %h = kiln.slice %c {axis = 1 : i64, offset = 64 : i64} : (tensor<?x128xf32>) -> tensor<?x64xf32>
  return %h : tensor<?x64xf32>
}
