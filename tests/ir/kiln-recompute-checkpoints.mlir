// RUN: kiln-opt %s --kiln-differentiate --kiln-recompute-checkpoints | FileCheck %s

// Two checkpointed blocks y = x + linear(gelu(linear(x, w1)), w2). The backward reads each
// block's gelu input and output (its weight gradients and the gelu's): those are recomputed
// from the block's input just before the backward's first read of them, the last block first;
// the forward's copies are no longer read after the forward. Block 0's output is block 1's input
// and stays. What the backward keeps (at L = 8): block 0's and block 1's outputs (the head's
// weight gradient reads the latter) and the logits, 8·4·4 + 8·4·4 + 8·5·4 = 416 bytes.
// CHECK-LABEL: func.func @blocks
// CHECK-SAME: kiln.backward = {recomputed_flops = {{.*}}, recomputed_ops = 4 : i64, saved_bytes = 416 : i64}
// CHECK: %[[A0:.*]] = kiln.linear %arg0, %{{.*}} {kiln.checkpoint = 0 : i64}
// CHECK: %[[H0:.*]] = kiln.gelu %[[A0]] {{.*}}kiln.checkpoint = 0
// CHECK: %[[Y0:.*]] = kiln.add %arg0, %{{.*}} {kiln.checkpoint = 0 : i64}
// CHECK: %[[A1:.*]] = kiln.linear %[[Y0]], %{{.*}} {kiln.checkpoint = 1 : i64}
// CHECK: kiln.fill {kiln.grad_seed, value = 1.000000e+00 : f32}
// CHECK: %[[A1R:.*]] = kiln.linear %[[Y0]], %{{.*}} {kiln.recomputed = 1 : i64}
// CHECK: %[[H1R:.*]] = kiln.gelu %[[A1R]] {{.*}}kiln.recomputed = 1
// CHECK: kiln.weight_grad %[[H1R]]
// CHECK: kiln.activation_grad %[[A1R]]
// CHECK: %[[A0R:.*]] = kiln.linear %arg0, %{{.*}} {kiln.recomputed = 0 : i64}
// CHECK: %[[H0R:.*]] = kiln.gelu %[[A0R]] {{.*}}kiln.recomputed = 0
// CHECK: kiln.weight_grad %[[H0R]]
// CHECK: kiln.activation_grad %[[A0R]]
module attributes {kiln.seq_bounds = array<i64: 8>, kiln.seq_names = ["L"]} {
  func.func @blocks(%x: tensor<?x4xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>},
                    %t: tensor<?xi32> {kiln.name = "t", kiln.syms = array<i64: 0>}) -> (tensor<1xf32> {kiln.name = "loss"})
      attributes {kiln.differentiate} {
    %w1 = kiln.param "w1" {kiln.checkpoint = 0 : i64} : tensor<6x4xf32>
    %w2 = kiln.param "w2" {kiln.checkpoint = 0 : i64} : tensor<4x6xf32>
    %a0 = kiln.linear %x, %w1 {kiln.checkpoint = 0 : i64} : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
    %h0 = kiln.gelu %a0 {kiln.checkpoint = 0 : i64} : (tensor<?x6xf32>) -> tensor<?x6xf32>
    %l0 = kiln.linear %h0, %w2 {kiln.checkpoint = 0 : i64} : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
    %y0 = kiln.add %x, %l0 {kiln.checkpoint = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    %v1 = kiln.param "v1" {kiln.checkpoint = 1 : i64} : tensor<6x4xf32>
    %v2 = kiln.param "v2" {kiln.checkpoint = 1 : i64} : tensor<4x6xf32>
    %a1 = kiln.linear %y0, %v1 {kiln.checkpoint = 1 : i64} : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
    %h1 = kiln.gelu %a1 {kiln.checkpoint = 1 : i64} : (tensor<?x6xf32>) -> tensor<?x6xf32>
    %l1 = kiln.linear %h1, %v2 {kiln.checkpoint = 1 : i64} : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
    %y1 = kiln.add %y0, %l1 {kiln.checkpoint = 1 : i64} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    %wo = kiln.param "wo" : tensor<5x4xf32>
    %logits = kiln.linear %y1, %wo : (tensor<?x4xf32>, tensor<5x4xf32>) -> tensor<?x5xf32>
    %loss = kiln.cross_entropy %logits, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }
}
