// RUN: kiln-opt %s --kiln-lower-lsh-attention | FileCheck %s

// LSH attention becomes hashing (i32 buckets per head and round), the counting sort (order and
// inverse) and the chunked attention with the op's chunk, causal flag and scale. Other
// attention is left alone.
// CHECK-LABEL: func.func @lsh
// CHECK: %[[B:.*]] = kiln.lsh_hash %arg0, %{{.*}} : (tensor<4x?x64xf32>, tensor<2x64x8xf32>) -> tensor<4x2x?xi32>
// CHECK: %[[S:.*]] = kiln.lsh_sort %[[B]] : (tensor<4x2x?xi32>) -> tensor<4x2x2x?xi32>
// CHECK: kiln.lsh_chunk_attention %arg0, %arg1, %[[B]], %[[S]] {causal, chunk = 32 : i64, scale = 1.250000e-01 : f32}
// CHECK-NOT: kiln.lsh_attention
// CHECK: kiln.attention
func.func @lsh(%qk: tensor<4x?x64xf32>, %v: tensor<4x?x64xf32>) -> tensor<4x?x64xf32> {
  %r = kiln.param "rot" : tensor<2x64x8xf32>
  %o = kiln.lsh_attention %qk, %v, %r {buckets = 16 : i64, hashes = 2 : i64, chunk = 32 : i64, causal, scale = 0.125 : f32} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<2x64x8xf32>) -> tensor<4x?x64xf32>
  %a = kiln.attention %o, %o, %o {scale = 0.125 : f32} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  return %a : tensor<4x?x64xf32>
}

// The op's kiln.* marks go to all three (the gradient rule lowers it the same way).
// CHECK-LABEL: func.func @marked
// CHECK: kiln.lsh_hash {{.*}}{kiln.reversible = array<i64: 0, 1>}
// CHECK: kiln.lsh_sort {{.*}}{kiln.reversible = array<i64: 0, 1>}
// CHECK: kiln.lsh_chunk_attention {{.*}}kiln.reversible = array<i64: 0, 1>
func.func @marked(%qk: tensor<4x?x64xf32>, %v: tensor<4x?x64xf32>) -> tensor<4x?x64xf32> {
  %r = kiln.param "rot" : tensor<2x64x8xf32>
  %o = kiln.lsh_attention %qk, %v, %r {buckets = 16 : i64, hashes = 2 : i64, chunk = 32 : i64, scale = 0.125 : f32, kiln.reversible = array<i64: 0, 1>} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<2x64x8xf32>) -> tensor<4x?x64xf32>
  return %o : tensor<4x?x64xf32>
}
