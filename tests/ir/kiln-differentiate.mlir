// RUN: kiln-opt %s --kiln-differentiate --split-input-file --verify-diagnostics | FileCheck %s

// A linear and a loss: the seed, the loss's gradient, the linear's three gradients (the input's
// is not needed: %x is an input, not a parameter), each parameter's as a new result. The
// forward is unchanged.
// CHECK-LABEL: func.func @linear_loss
// CHECK-SAME: -> (tensor<1xf32> {kiln.name = "loss"}, tensor<5x4xf32> {kiln.name = "grad.w"}, tensor<5xf32> {kiln.name = "grad.b"})
// CHECK-NOT: kiln.differentiate
// CHECK: %[[L:.*]] = kiln.linear
// CHECK: %[[LOSS:.*]] = kiln.cross_entropy %[[L]]
// CHECK: %[[ONE:.*]] = kiln.fill {kiln.grad_seed, value = 1.000000e+00 : f32}
// CHECK: %[[DL:.*]] = kiln.cross_entropy_grad %[[L]], %{{.*}}, %[[ONE]]
// CHECK-NOT: kiln.matmul
// CHECK-DAG: %[[DW:.*]] = kiln.weight_grad %{{.*}}, %[[DL]] :
// CHECK-DAG: %[[DB:.*]] = kiln.reduce_rows %[[DL]]
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]]
func.func @linear_loss(%x: tensor<?x4xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %w = kiln.param "w" : tensor<5x4xf32>
  %b = kiln.param "b" : tensor<5xf32>
  %l = kiln.linear %x, %w, %b : (tensor<?x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<?x5xf32>
  %loss = kiln.cross_entropy %l, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// A value used twice (the residual) sums its gradients; a parameter the loss does not reach
// gets zeros; a tied table's gradient is the embedding's rows scatter-added into the head's
// weight gradient (`into`), with no zero table and no add of the two.
// CHECK-LABEL: func.func @residual_and_tied
// CHECK: %[[DH:.*]] = kiln.weight_grad
// CHECK: kiln.add
// CHECK-NOT: kiln.embedding_grad
// CHECK: %[[DE:.*]] = kiln.embedding_grad %{{.*}}, %{{.*}}, %[[DH]] :
// CHECK-NOT: kiln.add
// CHECK: %[[Z:.*]] = kiln.fill {value = 0.000000e+00 : f32} : tensor<3xf32>
// CHECK: return {{.*}}, %[[DE]], %[[Z]]
func.func @residual_and_tied(%ids: tensor<?xi32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %e = kiln.param "e" : tensor<7x4xf32>
  %u = kiln.param "unused" : tensor<3xf32>
  %x = kiln.embedding %e, %ids : (tensor<7x4xf32>, tensor<?xi32>) -> tensor<?x4xf32>
  %r = kiln.relu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = kiln.add %x, %r : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %l = kiln.linear %y, %e : (tensor<?x4xf32>, tensor<7x4xf32>) -> tensor<?x7xf32>
  %loss = kiln.cross_entropy %l, %t : (tensor<?x7xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// Attention's rule: each query row's log-sum-exp once, then dq, dk and dv, each from that lse.
// The lse is the forward attention's second result: the rule rebuilds the attention with it.
// CHECK-LABEL: func.func @attention
// CHECK: %[[O:[^,]*]], %[[LSE:[^ ]*]] = kiln.attention %[[Q:[^,]*]], %[[Q]], %[[Q]] {mask = #kiln.mask<causal>, scale = 5.000000e-01 : f32} : (tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> (tensor<2x?x4xf32>, tensor<2x?xf32>)
// CHECK: kiln.transpose %[[O]] 
// CHECK: kiln.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[O]], %{{.*}}, %[[LSE]] {mask = #kiln.mask<causal>, {{.*}}wrt = #kiln.attention_wrt<query>}
// CHECK: kiln.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[O]], %{{.*}}, %[[LSE]] {mask = #kiln.mask<causal>, {{.*}}wrt = #kiln.attention_wrt<key>}
// CHECK: kiln.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[O]], %{{.*}}, %[[LSE]] {mask = #kiln.mask<causal>, {{.*}}wrt = #kiln.attention_wrt<value>}
// CHECK-NOT: kiln.attention_lse
func.func @attention(%x: tensor<?x8xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %w = kiln.param "w" : tensor<8x8xf32>
  %l = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %s = kiln.reshape %l : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %q = kiln.transpose %s {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x4xf32>) -> tensor<2x?x4xf32>
  %o = kiln.attention %q, %q, %q {mask = #kiln.mask<causal>, scale = 0.5 : f32} : (tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  %p = kiln.transpose %o {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x4xf32>) -> tensor<?x2x4xf32>
  %r = kiln.reshape %p : (tensor<?x2x4xf32>) -> tensor<?x8xf32>
  %loss = kiln.cross_entropy %r, %t : (tensor<?x8xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// The slices of a split that tile their axis: one kiln.concat of their gradients, in offset
// order whatever order the slices appear in; no zero padding, no sums.
// CHECK-LABEL: func.func @split_concat
// CHECK: %[[A:.*]] = kiln.slice %{{.*}} {axis = 1 : i64, offset = 0 : i64}
// CHECK: %[[C:.*]] = kiln.slice %{{.*}} {axis = 1 : i64, offset = 5 : i64}
// CHECK: %[[B:.*]] = kiln.slice %{{.*}} {axis = 1 : i64, offset = 2 : i64}
// CHECK: kiln.fill {kiln.grad_seed
// CHECK-DAG: %[[DA:.*]] = kiln.cross_entropy_grad %[[A]]
// CHECK-DAG: %[[DB:.*]] = kiln.cross_entropy_grad %[[B]]
// CHECK-DAG: %[[DC:.*]] = kiln.cross_entropy_grad %[[C]]
// CHECK: kiln.concat %[[DA]], %[[DB]], %[[DC]] {axis = 1 : i64} : (tensor<?x2xf32>, tensor<?x3xf32>, tensor<?x4xf32>) -> tensor<?x9xf32>
// CHECK-NOT: kiln.pad
// CHECK-NOT: kiln.add
func.func @split_concat(%x: tensor<?x9xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %w = kiln.param "w" : tensor<9x9xf32>
  %l = kiln.linear %x, %w : (tensor<?x9xf32>, tensor<9x9xf32>) -> tensor<?x9xf32>
  %a = kiln.slice %l {axis = 1 : i64, offset = 0 : i64} : (tensor<?x9xf32>) -> tensor<?x2xf32>
  %c = kiln.slice %l {axis = 1 : i64, offset = 5 : i64} : (tensor<?x9xf32>) -> tensor<?x4xf32>
  %b = kiln.slice %l {axis = 1 : i64, offset = 2 : i64} : (tensor<?x9xf32>) -> tensor<?x3xf32>
  %la = kiln.cross_entropy %a, %t : (tensor<?x2xf32>, tensor<?xi32>) -> tensor<1xf32>
  %lb = kiln.cross_entropy %b, %t : (tensor<?x3xf32>, tensor<?xi32>) -> tensor<1xf32>
  %lc = kiln.cross_entropy %c, %t : (tensor<?x4xf32>, tensor<?xi32>) -> tensor<1xf32>
  %lab = kiln.add %la, %lb : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %loss = kiln.add %lab, %lc : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// Slices that leave part of the axis out: their padded gradients are summed.
// CHECK-LABEL: func.func @split_partial
// CHECK: kiln.pad
// CHECK: kiln.pad
// CHECK: kiln.add
// CHECK-NOT: kiln.concat
func.func @split_partial(%x: tensor<?x9xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %w = kiln.param "w" : tensor<9x9xf32>
  %l = kiln.linear %x, %w : (tensor<?x9xf32>, tensor<9x9xf32>) -> tensor<?x9xf32>
  %a = kiln.slice %l {axis = 1 : i64, offset = 0 : i64} : (tensor<?x9xf32>) -> tensor<?x4xf32>
  %c = kiln.slice %l {axis = 1 : i64, offset = 5 : i64} : (tensor<?x9xf32>) -> tensor<?x4xf32>
  %s = kiln.add %a, %c : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %loss = kiln.cross_entropy %s, %t : (tensor<?x4xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// An entry without the attribute is left alone.
// CHECK-LABEL: func.func @inference
// CHECK-NOT: kiln.fill
func.func @inference(%x: tensor<?x4xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) {
  %w = kiln.param "w" : tensor<5x4xf32>
  %l = kiln.linear %x, %w : (tensor<?x4xf32>, tensor<5x4xf32>) -> tensor<?x5xf32>
  %loss = kiln.cross_entropy %l, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

func.func @no_rule(%x: tensor<?x4xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %w = kiln.param "w" : tensor<4x4xf32>
  %l = kiln.linear %x, %w : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  // expected-error @+1 {{kiln-differentiate: 'kiln.softmax_grad' has no gradient rule, and the loss depends on it}}
  %c = "kiln.softmax_grad"(%l, %l) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %loss = kiln.cross_entropy %c, %t : (tensor<?x4xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// A (causal) depthwise convolution: its input's and weight's gradients (kiln.depthwise_conv_grad,
// causal as well) and its bias's (a reduce_rows).
// CHECK-LABEL: func.func @depthwise
// CHECK-SAME: -> (tensor<1xf32> {kiln.name = "loss"}, tensor<3x4xf32> {kiln.name = "grad.w"}, tensor<4xf32> {kiln.name = "grad.b"})
// CHECK: %[[DL:.*]] = kiln.cross_entropy_grad
// CHECK-DAG: %[[DW:.*]] = kiln.depthwise_conv_grad %arg0, %{{.*}}, %[[DL]] {causal, wrt = #kiln.conv_wrt<weight>} : {{.*}} -> tensor<3x4xf32>
// CHECK-DAG: %[[DB:.*]] = kiln.reduce_rows %[[DL]]
// CHECK-NOT: wrt = #kiln.conv_wrt<x>
// CHECK: return %{{.*}}, %[[DW]], %[[DB]]
func.func @depthwise(%x: tensor<?x4xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %w = kiln.param "w" : tensor<3x4xf32>
  %b = kiln.param "b" : tensor<4xf32>
  %c = kiln.depthwise_conv %x, %w, %b {causal} : (tensor<?x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %loss = kiln.cross_entropy %c, %t : (tensor<?x4xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// expected-error @+1 {{kiln-differentiate: entry 'no_loss' has no result named "loss"}}
func.func @no_loss(%x: tensor<?x4xf32>) -> (tensor<?x4xf32> {kiln.name = "y"}) attributes {kiln.differentiate} {
  return %x : tensor<?x4xf32>
}

// -----

// One parameter read through two kiln.param ops (kiln-unroll-act's copies, say): one gradient
// result, the sum of both.
// CHECK-LABEL: func.func @param_twice
// CHECK-SAME: -> (tensor<1xf32> {kiln.name = "loss"}, tensor<4x4xf32> {kiln.name = "grad.w"})
// CHECK: %[[D1:.*]] = kiln.weight_grad
// CHECK: %[[D2:.*]] = kiln.weight_grad
// CHECK: %[[S:.*]] = kiln.add
// CHECK: return %{{.*}}, %[[S]] :
func.func @param_twice(%x: tensor<?x4xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %w1 = kiln.param "w" : tensor<4x4xf32>
  %y = kiln.linear %x, %w1 : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %w2 = kiln.param "w" : tensor<4x4xf32>
  %z = kiln.linear %y, %w2 : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %loss = kiln.cross_entropy %z, %t : (tensor<?x4xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

func.func @param_two_types(%x: tensor<?x4xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %w1 = kiln.param "w" : tensor<4x4xf32>
  %y = kiln.linear %x, %w1 : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  // expected-error @+1 {{kiln-differentiate: parameter "w" is read as 'tensor<4x4xf32>' and as 'tensor<5x4xf32>'}}
  %w2 = kiln.param "w" : tensor<5x4xf32>
  %z = kiln.linear %y, %w2 : (tensor<?x4xf32>, tensor<5x4xf32>) -> tensor<?x5xf32>
  %loss = kiln.cross_entropy %z, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// RMSNorm: the input's gradient is kiln.rms_norm_grad (each row's scale recomputed from the
// saved input); the weight's is the sum over rows of the gradient times x̂, x̂ a unit-weight
// kiln.rms_norm of the input (the same epsilon).
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: -> (tensor<1xf32> {kiln.name = "loss"}, tensor<7x4xf32> {kiln.name = "grad.e"}, tensor<4xf32> {kiln.name = "grad.g"}, tensor<5x4xf32> {kiln.name = "grad.w"})
// CHECK: %[[X:.*]] = kiln.embedding
// CHECK: %[[DY:.*]] = kiln.matmul
// CHECK-DAG: %[[DX:.*]] = kiln.rms_norm_grad %[[X]], %{{.*}}, %[[DY]] {epsilon = 9.99999974E-6 : f32}
// CHECK-DAG: %[[ONES:.*]] = kiln.fill {value = 1.000000e+00 : f32} : tensor<4xf32>
// CHECK-DAG: %[[XH:.*]] = kiln.rms_norm %[[X]], %[[ONES]] {epsilon = 9.99999974E-6 : f32}
// CHECK-DAG: %[[P:.*]] = kiln.mul %[[DY]], %[[XH]]
// CHECK-DAG: %[[DG:.*]] = kiln.reduce_rows %[[P]] : (tensor<?x4xf32>) -> tensor<4xf32>
// CHECK-DAG: %[[DE:.*]] = kiln.embedding_grad %{{.*}}, %[[DX]]
// CHECK: return %{{.*}}, %[[DE]], %[[DG]], %{{.*}}
func.func @rms_norm(%ids: tensor<?xi32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %e = kiln.param "e" : tensor<7x4xf32>
  %g = kiln.param "g" : tensor<4xf32>
  %w = kiln.param "w" : tensor<5x4xf32>
  %x = kiln.embedding %e, %ids : (tensor<7x4xf32>, tensor<?xi32>) -> tensor<?x4xf32>
  %n = kiln.rms_norm %x, %g {epsilon = 1.0e-5 : f32} : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %l = kiln.linear %n, %w : (tensor<?x4xf32>, tensor<5x4xf32>) -> tensor<?x5xf32>
  %loss = kiln.cross_entropy %l, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

// Rotary positions: the gradient of kiln.rope is the same rotation by minus the angle (inverse).
// CHECK-LABEL: func.func @rope
// CHECK: kiln.rope %{{.*}} {style = #kiln.rope_style<interleaved>, theta = 5.000000e+02 : f32}
// CHECK: kiln.rope %{{.*}} {inverse, style = #kiln.rope_style<interleaved>, theta = 5.000000e+02 : f32}
func.func @rope(%ids: tensor<?xi32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
  %e = kiln.param "e" : tensor<7x8xf32>
  %w = kiln.param "w" : tensor<5x8xf32>
  %x = kiln.embedding %e, %ids : (tensor<7x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  %h = kiln.reshape %x : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %ht = kiln.transpose %h {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x4xf32>) -> tensor<2x?x4xf32>
  %r = kiln.rope %ht {style = #kiln.rope_style<interleaved>, theta = 500.0 : f32} : (tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  %m = kiln.transpose %r {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x4xf32>) -> tensor<?x2x4xf32>
  %f = kiln.reshape %m : (tensor<?x2x4xf32>) -> tensor<?x8xf32>
  %l = kiln.linear %f, %w : (tensor<?x8xf32>, tensor<5x8xf32>) -> tensor<?x5xf32>
  %loss = kiln.cross_entropy %l, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}
