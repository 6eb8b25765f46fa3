// RUN: kiln-opt %s --kiln-differentiate | FileCheck %s

// LSH attention's gradient rule: the buckets are constants, and the backward must read the
// forward's. The rule lowers the forward kiln.lsh_attention itself (as kiln-lower-lsh-attention
// would) into lsh_hash, lsh_sort and lsh_chunk_attention, and the gradients with respect to the
// shared qk and to v read that hash, that order and that output. The rotations are fixed: a zero
// gradient. No kiln.lsh_attention is left.
// CHECK-LABEL: func.func @lsh
// CHECK-NOT: kiln.lsh_attention
// CHECK: %[[B:.*]] = kiln.lsh_hash %[[QK:[^,]*]], %[[R:[^ ]*]] :
// CHECK: %[[S:.*]] = kiln.lsh_sort %[[B]] :
// CHECK: %[[O:.*]] = kiln.lsh_chunk_attention %[[QK]], %[[V:[^,]*]], %[[B]], %[[S]] {causal, chunk = 4 : i64, scale = 5.000000e-01 : f32}
// CHECK: kiln.fill {kiln.grad_seed
// CHECK-DAG: kiln.lsh_chunk_attention_grad %[[QK]], %[[V]], %[[B]], %[[S]], %[[O]], %{{.*}} {causal, chunk = 4 : i64, scale = 5.000000e-01 : f32, wrt = #kiln.lsh_wrt<qk>}
// CHECK-DAG: kiln.lsh_chunk_attention_grad %[[QK]], %[[V]], %[[B]], %[[S]], %[[O]], %{{.*}} {causal, chunk = 4 : i64, scale = 5.000000e-01 : f32, wrt = #kiln.lsh_wrt<value>}
// CHECK-DAG: %[[Z:.*]] = kiln.fill {value = 0.000000e+00 : f32} : tensor<2x4x2xf32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[Z]], %{{.*}} :
module attributes {kiln.seq_bounds = array<i64: 16>, kiln.seq_names = ["L"]} {
  func.func @lsh(%t: tensor<16xi32> {kiln.name = "t"}) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
    %qk = kiln.param "qk" : tensor<1x16x4xf32>
    %v = kiln.param "v" : tensor<1x16x4xf32>
    %r = kiln.param "rot" : tensor<2x4x2xf32>
    %a = kiln.lsh_attention %qk, %v, %r {buckets = 4 : i64, hashes = 2 : i64, chunk = 4 : i64, causal, scale = 0.5 : f32} : (tensor<1x16x4xf32>, tensor<1x16x4xf32>, tensor<2x4x2xf32>) -> tensor<1x16x4xf32>
    %o = kiln.reshape %a : (tensor<1x16x4xf32>) -> tensor<16x4xf32>
    %wo = kiln.param "wo" : tensor<5x4xf32>
    %logits = kiln.linear %o, %wo : (tensor<16x4xf32>, tensor<5x4xf32>) -> tensor<16x5xf32>
    %loss = kiln.cross_entropy %logits, %t : (tensor<16x5xf32>, tensor<16xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }
}
