// RUN: kiln-opt %s --kiln-differentiate --kiln-reverse-layers --kiln-recompute-checkpoints | FileCheck %s
// RUN: kiln-opt %s --kiln-differentiate --kiln-recompute-checkpoints | FileCheck %s --check-prefix=STORE

// Two reversible layers (x [L, 4] in halves of 2; F = gelu(linear(x2)), G = gelu(linear(y1)))
// and a head. The backward of layer 1 starts from the stack's output %z, kept for the head's
// weight gradient: y1' y2' are its halves, G runs again on y1' (the backward of G reads that
// clone), x2' = y2' - G', F runs again on x2', x1' = y1' - F'. Layer 0 then starts from layer
// 1's x1' and x2', not from the forward's %y. What the backward keeps (at L = 8): %z and the
// logits, 8·4·4 + 8·5·4 = 288 bytes; stored instead, every layer's activations: 800 bytes.
// The first layer's x1' (the stack's input, which no gradient reads) is not computed.
// CHECK-LABEL: func.func @stack
// CHECK-SAME: recomputed_ops = 15 : i64, saved_bytes = 288 : i64
// STORE-LABEL: func.func @stack
// STORE-SAME: recomputed_ops = 0 : i64, saved_bytes = 800 : i64
// CHECK: %[[Z:.*]] = kiln.concat %{{.*}}, %{{.*}} {axis = 1 : i64, kiln.reversible = array<i64: 1, 0>}
// CHECK: kiln.fill {kiln.grad_seed
// CHECK: %[[Y1:.*]] = kiln.slice %[[Z]] {axis = 1 : i64, kiln.reconstructed = 1 : i64, offset = 0 : i64}
// CHECK: %[[Y2:.*]] = kiln.slice %[[Z]] {axis = 1 : i64, kiln.reconstructed = 1 : i64, offset = 2 : i64}
// CHECK: %[[GA:.*]] = kiln.linear %[[Y1]], %[[G1:[^ ]*]] {kiln.reconstructed = 1 : i64}
// CHECK: %[[G:.*]] = kiln.gelu %[[GA]] {kiln.reconstructed = 1 : i64}
// CHECK: %[[NG:.*]] = kiln.scale %[[G]] {factor = -1.000000e+00 : f32, kiln.reconstructed = 1 : i64}
// CHECK: %[[X2:.*]] = kiln.add %[[Y2]], %[[NG]] {kiln.reconstructed = 1 : i64}
// CHECK: %[[FA:.*]] = kiln.linear %[[X2]], %[[F1:[^ ]*]] {kiln.reconstructed = 1 : i64}
// CHECK: %[[F:.*]] = kiln.gelu %[[FA]] {kiln.reconstructed = 1 : i64}
// CHECK: %[[NF:.*]] = kiln.scale %[[F]]
// CHECK: %[[X1:.*]] = kiln.add %[[Y1]], %[[NF]] {kiln.reconstructed = 1 : i64}
// CHECK: kiln.activation_grad %[[GA]]
// CHECK: kiln.weight_grad %[[Y1]]
// CHECK: kiln.activation_grad %[[FA]]
// CHECK: kiln.weight_grad %[[X2]]
// CHECK: %[[HA:.*]] = kiln.linear %[[X1]], %{{.*}} {kiln.reconstructed = 0 : i64}
// CHECK: %[[H:.*]] = kiln.gelu %[[HA]] {kiln.reconstructed = 0 : i64}
// CHECK: %[[NH:.*]] = kiln.scale %[[H]]
// CHECK: %[[W2:.*]] = kiln.add %[[X2]], %[[NH]] {kiln.reconstructed = 0 : i64}
// CHECK: %[[EA:.*]] = kiln.linear %[[W2]], %{{.*}} {kiln.reconstructed = 0 : i64}
// CHECK-NOT: kiln.reconstructed
// CHECK: kiln.activation_grad %[[HA]]
// CHECK: kiln.weight_grad %[[X1]]
// CHECK: kiln.activation_grad %[[EA]]
// CHECK: kiln.weight_grad %[[W2]]
// CHECK: return
// CHECK-LABEL: func.func @lsh
// CHECK: %[[LB:.*]] = kiln.lsh_hash %{{.*}} {kiln.reversible = array<i64: 0, 1>}
// CHECK: %[[LS:.*]] = kiln.lsh_sort %[[LB]] {kiln.reversible = array<i64: 0, 1>}
// CHECK: kiln.fill {kiln.grad_seed
// CHECK-NOT: kiln.lsh_hash
// CHECK-NOT: kiln.lsh_sort
// CHECK: %[[QR:.*]] = kiln.reshape %{{.*}} {kiln.reconstructed = 0 : i64}
// CHECK: %[[OR:.*]] = kiln.lsh_chunk_attention %[[QR]], %[[QR]], %[[LB]], %[[LS]] {{{.*}}kiln.reconstructed = 0 : i64
// CHECK: kiln.lsh_chunk_attention_grad %[[QR]], %[[QR]], %[[LB]], %[[LS]], %[[OR]]
// STORE-LABEL: func.func @lsh
module attributes {kiln.seq_bounds = array<i64: 8>, kiln.seq_names = ["L"]} {
  func.func @stack(%x: tensor<?x4xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>},
                   %t: tensor<?xi32> {kiln.name = "t", kiln.syms = array<i64: 0>}) -> (tensor<1xf32> {kiln.name = "loss"})
      attributes {kiln.differentiate} {
    %x1 = kiln.slice %x {axis = 1 : i64, offset = 0 : i64, kiln.reversible = array<i64: 0, 0>} : (tensor<?x4xf32>) -> tensor<?x2xf32>
    %x2 = kiln.slice %x {axis = 1 : i64, offset = 2 : i64, kiln.reversible = array<i64: 0, 0>} : (tensor<?x4xf32>) -> tensor<?x2xf32>
    %wf = kiln.param "f0" {kiln.reversible = array<i64: 0, 1>} : tensor<2x2xf32>
    %af = kiln.linear %x2, %wf {kiln.reversible = array<i64: 0, 1>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %f = kiln.gelu %af {kiln.reversible = array<i64: 0, 1>} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %y1 = kiln.add %x1, %f {kiln.reversible = array<i64: 0, 0>} : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %wg = kiln.param "g0" {kiln.reversible = array<i64: 0, 2>} : tensor<2x2xf32>
    %ag = kiln.linear %y1, %wg {kiln.reversible = array<i64: 0, 2>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %g = kiln.gelu %ag {kiln.reversible = array<i64: 0, 2>} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %y2 = kiln.add %x2, %g {kiln.reversible = array<i64: 0, 0>} : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %y = kiln.concat %y1, %y2 {axis = 1 : i64, kiln.reversible = array<i64: 0, 0>} : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x4xf32>
    %u1 = kiln.slice %y {axis = 1 : i64, offset = 0 : i64, kiln.reversible = array<i64: 1, 0>} : (tensor<?x4xf32>) -> tensor<?x2xf32>
    %u2 = kiln.slice %y {axis = 1 : i64, offset = 2 : i64, kiln.reversible = array<i64: 1, 0>} : (tensor<?x4xf32>) -> tensor<?x2xf32>
    %vf = kiln.param "f1" {kiln.reversible = array<i64: 1, 1>} : tensor<2x2xf32>
    %bf = kiln.linear %u2, %vf {kiln.reversible = array<i64: 1, 1>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %ff = kiln.gelu %bf {kiln.reversible = array<i64: 1, 1>} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %z1 = kiln.add %u1, %ff {kiln.reversible = array<i64: 1, 0>} : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %vg = kiln.param "g1" {kiln.reversible = array<i64: 1, 2>} : tensor<2x2xf32>
    %bg = kiln.linear %z1, %vg {kiln.reversible = array<i64: 1, 2>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %gg = kiln.gelu %bg {kiln.reversible = array<i64: 1, 2>} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %z2 = kiln.add %u2, %gg {kiln.reversible = array<i64: 1, 0>} : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %z = kiln.concat %z1, %z2 {axis = 1 : i64, kiln.reversible = array<i64: 1, 0>} : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x4xf32>
    %wo = kiln.param "wo" : tensor<5x4xf32>
    %logits = kiln.linear %z, %wo : (tensor<?x4xf32>, tensor<5x4xf32>) -> tensor<?x5xf32>
    %loss = kiln.cross_entropy %logits, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }

  // F = LSH attention over x2 (its own qk and v). The backward's F runs on x2' but reads the
  // forward's buckets and order: no lsh_hash or lsh_sort is cloned.
  func.func @lsh(%x: tensor<16x4xf32> {kiln.name = "x", kiln.syms = array<i64: -1, -1>}, %t: tensor<16xi32> {kiln.name = "t", kiln.syms = array<i64: -1>}) -> (tensor<1xf32> {kiln.name = "loss"})
      attributes {kiln.differentiate} {
    %x1 = kiln.slice %x {axis = 1 : i64, offset = 0 : i64, kiln.reversible = array<i64: 0, 0>} : (tensor<16x4xf32>) -> tensor<16x2xf32>
    %x2 = kiln.slice %x {axis = 1 : i64, offset = 2 : i64, kiln.reversible = array<i64: 0, 0>} : (tensor<16x4xf32>) -> tensor<16x2xf32>
    %wf = kiln.param "f0" {kiln.reversible = array<i64: 0, 1>} : tensor<2x2xf32>
    %af = kiln.linear %x2, %wf {kiln.reversible = array<i64: 0, 1>} : (tensor<16x2xf32>, tensor<2x2xf32>) -> tensor<16x2xf32>
    %qk = kiln.reshape %af {kiln.reversible = array<i64: 0, 1>} : (tensor<16x2xf32>) -> tensor<1x16x2xf32>
    %rot = kiln.param "rot" {kiln.reversible = array<i64: 0, 1>} : tensor<2x2x2xf32>
    %la = kiln.lsh_attention %qk, %qk, %rot {buckets = 4 : i64, hashes = 2 : i64, chunk = 4 : i64, causal, scale = 0.5 : f32, kiln.reversible = array<i64: 0, 1>} : (tensor<1x16x2xf32>, tensor<1x16x2xf32>, tensor<2x2x2xf32>) -> tensor<1x16x2xf32>
    %f = kiln.reshape %la {kiln.reversible = array<i64: 0, 1>} : (tensor<1x16x2xf32>) -> tensor<16x2xf32>
    %y1 = kiln.add %x1, %f {kiln.reversible = array<i64: 0, 0>} : (tensor<16x2xf32>, tensor<16x2xf32>) -> tensor<16x2xf32>
    %wg = kiln.param "g0" {kiln.reversible = array<i64: 0, 2>} : tensor<2x2xf32>
    %g = kiln.linear %y1, %wg {kiln.reversible = array<i64: 0, 2>} : (tensor<16x2xf32>, tensor<2x2xf32>) -> tensor<16x2xf32>
    %y2 = kiln.add %x2, %g {kiln.reversible = array<i64: 0, 0>} : (tensor<16x2xf32>, tensor<16x2xf32>) -> tensor<16x2xf32>
    %y = kiln.concat %y1, %y2 {axis = 1 : i64, kiln.reversible = array<i64: 0, 0>} : (tensor<16x2xf32>, tensor<16x2xf32>) -> tensor<16x4xf32>
    %wo = kiln.param "wo" : tensor<5x4xf32>
    %logits = kiln.linear %y, %wo : (tensor<16x4xf32>, tensor<5x4xf32>) -> tensor<16x5xf32>
    %loss = kiln.cross_entropy %logits, %t : (tensor<16x5xf32>, tensor<16xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }
}
