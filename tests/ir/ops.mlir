// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// Round trip: every kiln op parses, verifies, prints and parses again unchanged.

// CHECK-LABEL: func.func @forward
func.func @forward(%tokens: tensor<?xi32>, %x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // CHECK: kiln.param "emb" : tensor<100x64xf32>
  %emb = kiln.param "emb" : tensor<100x64xf32>
  %pos = kiln.param "pos" : tensor<32x64xf32>
  %w = kiln.param "w" : tensor<64x192xf32>
  %b = kiln.param "b" {init = #kiln.init<zeros>} : tensor<192xf32>
  %g = kiln.param "g" {init = #kiln.init<ones>} : tensor<64xf32>
  %z = kiln.param "z" {init = #kiln.init<zeros>} : tensor<64xf32>
  // CHECK: kiln.embedding
  %e = kiln.embedding %emb, %tokens : (tensor<100x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  // CHECK: kiln.position_embedding
  %p = kiln.position_embedding %pos, %tokens : (tensor<32x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  // CHECK: kiln.add
  %s = kiln.add %e, %p : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: kiln.mul
  %m = kiln.mul %s, %g : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  // CHECK: kiln.layer_norm
  %n = kiln.layer_norm %m, %g, %z {epsilon = 1.0e-5 : f32} : (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  // CHECK: kiln.linear {{.*}}weight_layout = #kiln.weight_layout<in_out>
  %qkv = kiln.linear %n, %w, %b {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<?x192xf32>
  // CHECK: kiln.slice
  %q = kiln.slice %qkv {axis = 1 : i64, offset = 0 : i64} : (tensor<?x192xf32>) -> tensor<?x64xf32>
  %k = kiln.slice %qkv {axis = 1 : i64, offset = 64 : i64} : (tensor<?x192xf32>) -> tensor<?x64xf32>
  %v = kiln.slice %qkv {axis = 1 : i64, offset = 128 : i64} : (tensor<?x192xf32>) -> tensor<?x64xf32>
  // CHECK: kiln.reshape
  %qr = kiln.reshape %q : (tensor<?x64xf32>) -> tensor<?x4x16xf32>
  %kr = kiln.reshape %k : (tensor<?x64xf32>) -> tensor<?x4x16xf32>
  %vr = kiln.reshape %v : (tensor<?x64xf32>) -> tensor<?x4x16xf32>
  // CHECK: kiln.transpose {{.*}}permutation = array<i64: 1, 0, 2>
  %qh = kiln.transpose %qr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %kh = kiln.transpose %kr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %vh = kiln.transpose %vr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  // CHECK: kiln.attention {{.*}}mask = #kiln.mask<causal>
  %a = kiln.attention %qh, %kh, %vh {mask = #kiln.mask<causal>, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  // Cross-attention over a cache another entry filled: the operand is the number of valid keys.
  // CHECK: kiln.attention {{.*}}key_count
  %cnt = kiln.param "cnt" : tensor<1xi32>
  %xa = kiln.attention %qh, %kh, %vh, %cnt {key_count, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<1xi32>) -> tensor<4x?x16xf32>
  // CHECK: kiln.sinusoidal_positions {{.*}}%{{.*}} : (tensor<?xi32>, tensor<1xi32>)
  %sp = kiln.sinusoidal_positions %tokens, %cnt : (tensor<?xi32>, tensor<1xi32>) -> tensor<?x64xf32>
  // CHECK: kiln.position_embedding {{.*}}%{{.*}} : (tensor<32x64xf32>, tensor<?xi32>, tensor<1xi32>)
  %pp = kiln.position_embedding %pos, %tokens, %cnt : (tensor<32x64xf32>, tensor<?xi32>, tensor<1xi32>) -> tensor<?x64xf32>
  // CHECK: kiln.batch_matmul
  %sc = kiln.batch_matmul %qh, %kh {transpose_b = true} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x?xf32>
  // CHECK: kiln.softmax
  %sm = kiln.softmax %sc : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %g2 = kiln.param "g2" : tensor<64x64xf32>
  // CHECK: kiln.matmul
  %mm = kiln.matmul %x, %g2 : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  // CHECK: kiln.scale
  %sx = kiln.scale %mm {factor = 0.5 : f32} : (tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: kiln.gelu {{.*}}approximate = #kiln.gelu<tanh>
  %ge = kiln.gelu %sx {approximate = #kiln.gelu<tanh>} : (tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: kiln.relu
  %re = kiln.relu %ge : (tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: kiln.concat
  %c = kiln.concat %re, %re {axis = 1 : i64} : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x128xf32>
  %h = kiln.slice %c {axis = 1 : i64, offset = 64 : i64} : (tensor<?x128xf32>) -> tensor<?x64xf32>
  return %h : tensor<?x64xf32>
}

// The training ops (kiln-differentiate's backward).
// CHECK-LABEL: func.func @training
// CHECK: kiln.fill {value = 1.000000e+00 : f32} : tensor<1xf32>
// CHECK: kiln.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64}
// CHECK: kiln.cross_entropy_grad
// CHECK: kiln.reduce_rows
// CHECK: kiln.weight_grad %{{.*}}, %{{.*}} {weight_layout = #kiln.weight_layout<in_out>}
// CHECK: kiln.activation_grad %{{.*}}, %{{.*}} {activation = #kiln.activation<gelu_tanh>}
// CHECK: kiln.layer_norm_gamma_grad %{{.*}}, %{{.*}}, %{{.*}} 
// CHECK: kiln.softmax_grad
// CHECK: kiln.embedding_grad
// CHECK: kiln.pad %{{.*}}, %{{.*}} {axis = 1 : i64, offset = 64 : i64}
// CHECK: %{{.*}}, %[[LSE:.*]] = kiln.attention {{.*}} -> (tensor<4x?x16xf32>, tensor<4x?xf32>)
// CHECK: kiln.attention_grad %{{.*}}, %[[LSE]] {mask = #kiln.mask<causal>, scale = 1.250000e-01 : f32, wrt = #kiln.attention_wrt<key>}
func.func @training(%tokens: tensor<?xi32>, %x: tensor<?x64xf32>, %l: tensor<?x100xf32>, %h: tensor<4x?x16xf32>)
    -> (tensor<1xf32>, tensor<?x100xf32>, tensor<100xf32>, tensor<64x100xf32>, tensor<?x64xf32>, tensor<64xf32>,
        tensor<?x100xf32>, tensor<100x64xf32>, tensor<?x192xf32>, tensor<4x?x16xf32>) {
  %g = kiln.param "g" {init = #kiln.init<ones>} : tensor<64xf32>
  %one = kiln.fill {value = 1.0 : f32} : tensor<1xf32>
  %ce = kiln.cross_entropy %l, %tokens {ignore_index = -100 : i64} : (tensor<?x100xf32>, tensor<?xi32>) -> tensor<1xf32>
  %dl = kiln.cross_entropy_grad %l, %tokens, %one : (tensor<?x100xf32>, tensor<?xi32>, tensor<1xf32>) -> tensor<?x100xf32>
  %db = kiln.reduce_rows %dl : (tensor<?x100xf32>) -> tensor<100xf32>
  %dw = kiln.weight_grad %x, %dl {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x64xf32>, tensor<?x100xf32>) -> tensor<64x100xf32>
  %da = kiln.activation_grad %x, %x {activation = #kiln.activation<gelu_tanh>} : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %dg = kiln.layer_norm_gamma_grad %x, %g, %x {epsilon = 1.0e-5 : f32} : (tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>) -> tensor<64xf32>
  %ds = kiln.softmax_grad %l, %dl : (tensor<?x100xf32>, tensor<?x100xf32>) -> tensor<?x100xf32>
  %de = kiln.embedding_grad %tokens, %x : (tensor<?xi32>, tensor<?x64xf32>) -> tensor<100x64xf32>
  %wide = kiln.reshape %ds : (tensor<?x100xf32>) -> tensor<?x100xf32>
  %sl = kiln.slice %dl {axis = 1 : i64, offset = 0 : i64} : (tensor<?x100xf32>) -> tensor<?x64xf32>
  %qkv = kiln.concat %sl, %sl, %sl {axis = 1 : i64} : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x192xf32>
  %dp = kiln.pad %x, %qkv {axis = 1 : i64, offset = 64 : i64} : (tensor<?x64xf32>, tensor<?x192xf32>) -> tensor<?x192xf32>
  %o, %lse = kiln.attention %h, %h, %h {mask = #kiln.mask<causal>, scale = 0.125 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> (tensor<4x?x16xf32>, tensor<4x?xf32>)
  %dk = kiln.attention_grad %h, %h, %h, %o, %h, %lse {mask = #kiln.mask<causal>, scale = 0.125 : f32, wrt = #kiln.attention_wrt<key>}
      : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?xf32>) -> tensor<4x?x16xf32>
  return %ce, %dl, %db, %dw, %da, %dg, %wide, %de, %dp, %dk
      : tensor<1xf32>, tensor<?x100xf32>, tensor<100xf32>, tensor<64x100xf32>, tensor<?x64xf32>, tensor<64xf32>,
        tensor<?x100xf32>, tensor<100x64xf32>, tensor<?x192xf32>, tensor<4x?x16xf32>
}

// The optimizer's ops (kiln-apply-optimizer): the in-place ones return their first operand.
// CHECK-LABEL: func.func @optimizer
// CHECK: %[[P:.*]] = kiln.all_reduce %{{.*}} : (tensor<64xf32>) -> tensor<64xf32>
// CHECK: kiln.all_reduce_wait %[[P]] : (tensor<64xf32>) -> tensor<64xf32>
// CHECK: kiln.sum_squares
// CHECK: kiln.step_count
// CHECK: kiln.learning_rate %{{.*}}, %{{.*}} {decay_steps = 100 : i64, lr = 1.000000e-03 : f32, min_ratio = 1.000000e-01 : f32, warmup = 10 : i64}
// CHECK: kiln.loss_weight %{{.*}}, %{{.*}} {until = 2.500000e-01 : f32, weight = 5.000000e-01 : f32}
// CHECK: kiln.adamw_step %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, clip_norm = 1.000000e+00 : f32, eps = 9.99999993E-9 : f32, weight_decay = 0.00999999977 : f32}
func.func @optimizer(%g: tensor<64xf32>) -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
  %p = kiln.param "p" : tensor<64xf32>
  %s = kiln.state "optimizer.step" : tensor<1xf32>
  %m = kiln.state "optimizer.m.p" : tensor<64xf32>
  %v = kiln.state "optimizer.v.p" : tensor<64xf32>
  %g0 = kiln.all_reduce %g : (tensor<64xf32>) -> tensor<64xf32>
  %g1 = kiln.all_reduce_wait %g0 : (tensor<64xf32>) -> tensor<64xf32>
  %sq = kiln.sum_squares %g1 : (tensor<64xf32>) -> tensor<1xf32>
  %t = kiln.step_count %s : (tensor<1xf32>) -> tensor<1xf32>
  %peak = kiln.state "optimizer.lr" : tensor<1xf32>
  %lr = kiln.learning_rate %t, %peak {lr = 1.0e-3 : f32, warmup = 10 : i64, decay_steps = 100 : i64, min_ratio = 0.1 : f32} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %total = kiln.state "optimizer.steps" : tensor<1xf32>
  %w = kiln.loss_weight %s, %total {weight = 0.5 : f32, until = 0.25 : f32} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %p1 = kiln.adamw_step %p, %m, %v, %g1, %sq, %t, %lr {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.01 : f32, clip_norm = 1.0 : f32} : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<64xf32>
  return %sq, %lr, %w : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}
