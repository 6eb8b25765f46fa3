// RUN: kiln-opt %s --kiln-fuse-attention --split-input-file | FileCheck %s

// The full chain, per head: scores, scale, causal mask, softmax, values. One kiln.attention
// remains and no softmax, mask or matmul.
// CHECK-LABEL: func.func @heads_causal
// CHECK: %[[A:.*]] = kiln.attention %arg0, %arg1, %arg2 {mask = #kiln.mask<causal>, scale = 1.250000e-01 : f32}
// CHECK-NOT: kiln.softmax
// CHECK-NOT: kiln.mask
// CHECK-NOT: kiln.batch_matmul
// CHECK: return %[[A]]
func.func @heads_causal(%q: tensor<4x?x64xf32>, %k: tensor<4x?x64xf32>, %v: tensor<4x?x64xf32>) -> tensor<4x?x64xf32> {
  %s = kiln.batch_matmul %q, %k {transpose_b = true} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>) -> tensor<4x?x?xf32>
  %t = kiln.scale %s {factor = 0.125 : f32} : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %m = kiln.mask %t  : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %u = kiln.add %t, %m : (tensor<4x?x?xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %p = kiln.softmax %u : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %o = kiln.batch_matmul %p, %v : (tensor<4x?x?xf32>, tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  return %o : tensor<4x?x64xf32>
}

// -----

// A single-head 2-D chain without mask or scale: fused through [1, L, d] views.
// CHECK-LABEL: func.func @single_head
// CHECK: kiln.reshape %arg0 {{.*}} -> tensor<1x?x32xf32>
// CHECK: kiln.attention %{{.*}} {scale = 1.000000e+00 : f32}
// CHECK: kiln.reshape {{.*}} -> tensor<?x32xf32>
// CHECK-NOT: kiln.softmax
func.func @single_head(%q: tensor<?x32xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %s = kiln.matmul %q, %k {transpose_b = true} : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x?xf32>
  %p = kiln.softmax %s : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %o = kiln.matmul %p, %v : (tensor<?x?xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %o : tensor<?x32xf32>
}

// -----

// The scores are also returned: they must be computed anyway, so nothing is fused.
// CHECK-LABEL: func.func @scores_needed
// CHECK: kiln.batch_matmul
// CHECK: kiln.softmax
// CHECK-NOT: kiln.attention
func.func @scores_needed(%q: tensor<2x?x8xf32>, %v: tensor<2x?x8xf32>) -> (tensor<2x?x8xf32>, tensor<2x?x?xf32>) {
  %s = kiln.batch_matmul %q, %q {transpose_b = true} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x?xf32>
  %p = kiln.softmax %s : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %o = kiln.batch_matmul %p, %v : (tensor<2x?x?xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  return %o, %s : tensor<2x?x8xf32>, tensor<2x?x?xf32>
}

// -----

// A softmax over something that is not q·kᵀ (no transpose) is left alone.
// CHECK-LABEL: func.func @not_attention
// CHECK: kiln.softmax
// CHECK-NOT: kiln.attention
func.func @not_attention(%a: tensor<?x8xf32>, %b: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %s = kiln.matmul %a, %b : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %p = kiln.softmax %s : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %o = kiln.matmul %p, %b : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  return %o : tensor<?x8xf32>
}
