// RUN: kiln-opt %s --kiln-differentiate --kiln-checkpoint-ffn --kiln-recompute-checkpoints | FileCheck %s
// RUN: kiln-opt %s --kiln-phase-fused=recompute-ffn=all --kiln-chunk-ffn | FileCheck %s --check-prefix=FUSED
// RUN: kiln-opt %s --kiln-differentiate --kiln-checkpoint-ffn=activation-only=1 --kiln-recompute-checkpoints | FileCheck %s --check-prefix=ACT

// An FFN y = x + linear(gelu(linear(x, w1, b1)), w2, b2) under a loss. The backward reads the
// first linear's output (the gelu's gradient) and the gelu's (w2's gradient): kiln-checkpoint-ffn
// marks the FFN's three ops as a block of their own (id 1, after the DSL's block 0), and
// kiln-recompute-checkpoints recomputes both intermediates from x just before the backward's
// first read. The head's linear has no activation after it and stays as it is. What the backward
// keeps at L = 8: x (read by both weight gradients), y and the logits, 8·4·4·2 + 8·5·4 = 416 bytes.
// CHECK-LABEL: func.func @ffn
// CHECK-SAME: kiln.backward = {recomputed_flops = {{.*}}, recomputed_ops = 2 : i64, saved_bytes = 416 : i64}
// CHECK: %[[A:.*]] = kiln.linear %[[X:.*]], %{{.*}}, %{{.*}} {kiln.checkpoint = 1 : i64}
// CHECK: %[[H:.*]] = kiln.gelu %[[A]] {{.*}}kiln.checkpoint = 1
// CHECK: kiln.linear %[[H]], %{{.*}}, %{{.*}} {kiln.checkpoint = 1 : i64}
// CHECK: %[[LOGITS:.*]] = kiln.linear
// CHECK-NOT: kiln.checkpoint
// CHECK: kiln.fill {kiln.grad_seed, value = 1.000000e+00 : f32}
// CHECK: %[[AR:.*]] = kiln.linear %[[X]], %{{.*}}, %{{.*}} {kiln.recomputed = 1 : i64}
// CHECK: %[[HR:.*]] = kiln.gelu %[[AR]] {{.*}}kiln.recomputed = 1
// CHECK: kiln.weight_grad %[[HR]]
// CHECK: kiln.activation_grad %[[AR]]
// CHECK-NOT: kiln.weight_grad %[[H]],

// The forward's FFN has one reader per value left: kiln-fuse-epilogue and kiln-chunk-ffn make it
// one kiln.ffn with the residual; the backward's recomputed linear keeps its gelu apart (the
// gelu's gradient reads the linear's output too).
// FUSED-LABEL: func.func @ffn
// FUSED: kiln.ffn %{{.*}} {activation = #kiln.activation<gelu_tanh>
// FUSED: kiln.fill {kiln.grad_seed
// FUSED: kiln.linear %{{.*}} {kiln.recomputed = 1 : i64}
// FUSED: kiln.gelu
// activation-only: the activation and the second linear form the block; the first linear's output
// is its input, kept (the gelu's gradient reads it), and the gelu is recomputed from it. Kept at
// L = 8: x, the first linear's output, y and the logits, 416 + 8·6·4 = 608 bytes.
// ACT-LABEL: func.func @ffn
// ACT-SAME: kiln.backward = {recomputed_flops = {{.*}}, recomputed_ops = 1 : i64, saved_bytes = 608 : i64}
// ACT: %[[A:.*]] = kiln.linear %{{.*}}, %{{.*}}, %{{.*}} : (
// ACT: %[[H:.*]] = kiln.gelu %[[A]] {{.*}}kiln.checkpoint = 1
// ACT: kiln.linear %[[H]], %{{.*}}, %{{.*}} {kiln.checkpoint = 1 : i64}
// ACT: kiln.fill {kiln.grad_seed
// ACT: %[[HR:.*]] = kiln.gelu %[[A]] {{.*}}kiln.recomputed = 1
// ACT: kiln.weight_grad %[[HR]]
// ACT: kiln.activation_grad %[[A]]
module attributes {kiln.seq_bounds = array<i64: 8>, kiln.seq_names = ["L"]} {
  func.func @ffn(%x0: tensor<?x4xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>},
                 %t: tensor<?xi32> {kiln.name = "t", kiln.syms = array<i64: 0>}) -> (tensor<1xf32> {kiln.name = "loss"})
      attributes {kiln.differentiate} {
    %g = kiln.param "g" : tensor<4xf32>
    %x = kiln.mul %x0, %g {kiln.checkpoint = 0 : i64} : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
    %w1 = kiln.param "w1" : tensor<6x4xf32>
    %b1 = kiln.param "b1" : tensor<6xf32>
    %w2 = kiln.param "w2" : tensor<4x6xf32>
    %b2 = kiln.param "b2" : tensor<4xf32>
    %a = kiln.linear %x, %w1, %b1 : (tensor<?x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<?x6xf32>
    %h = kiln.gelu %a {approximate = #kiln.gelu<tanh>} : (tensor<?x6xf32>) -> tensor<?x6xf32>
    %l = kiln.linear %h, %w2, %b2 : (tensor<?x6xf32>, tensor<4x6xf32>, tensor<4xf32>) -> tensor<?x4xf32>
    %y = kiln.add %x, %l : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    %wo = kiln.param "wo" : tensor<5x4xf32>
    %logits = kiln.linear %y, %wo : (tensor<?x4xf32>, tensor<5x4xf32>) -> tensor<?x5xf32>
    %loss = kiln.cross_entropy %logits, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }
}
