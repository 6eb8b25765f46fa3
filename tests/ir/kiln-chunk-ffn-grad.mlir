// RUN: kiln-opt %s --kiln-phase-fused=recompute-ffn=all --kiln-chunk-ffn --kiln-chunk-ffn-grad=chunk-cols=4 | FileCheck %s
// RUN: kiln-opt %s --kiln-phase-fused=recompute-ffn=all --kiln-chunk-ffn --kiln-chunk-ffn-grad | FileCheck %s --check-prefix=BOUND
// RUN: kiln-opt %s --kiln-phase-fused=recompute-ffn=all --kiln-chunk-ffn --kiln-chunk-ffn-grad=chunk-cols=4 --kiln-tile-ops --kiln-assign-schedule --kiln-fold-views | FileCheck %s --check-prefix=VIEWS

// The FFN of kiln-checkpoint-ffn.mlir with d_ff = 6, its weights [out, in] in @out_in and
// [in, out] in @in_out. Its backward, recomputed (--recompute-ffn all), runs as two chunks of
// d_ff: columns [0, 4) and [4, 6). Per chunk: slices of w1 and b1 (the recomputed linear), of w2
// (d_act = dy·w2) and of w1 again (dx = dh·w1); the eight ops on [rows, 4] and [rows, 2]
// values. dw1, dw2 and db1 are concats of the chunks' parts along d_ff; dx the sum of the two
// products.
// CHECK-LABEL: func.func @out_in
// CHECK: kiln.ffn
// CHECK: kiln.fill {kiln.grad_seed
// CHECK: %[[W1A:.*]] = kiln.slice %[[W1:.*]] {axis = 0 : i64, offset = 0 : i64} : (tensor<6x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[B1A:.*]] = kiln.slice %[[B1:.*]] {axis = 0 : i64, offset = 0 : i64} : (tensor<6xf32>) -> tensor<4xf32>
// CHECK: %[[W2A:.*]] = kiln.slice %[[W2:.*]] {axis = 1 : i64, offset = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x4xf32>
// CHECK: %[[W1TA:.*]] = kiln.slice %[[W1]] {axis = 0 : i64, offset = 0 : i64} : (tensor<6x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[HA:.*]] = kiln.linear %[[X:.*]], %[[W1A]], %[[B1A]] {kiln.recomputed = {{[0-9]+}} : i64} : {{.*}} -> tensor<?x4xf32>
// CHECK: %[[AA:.*]] = kiln.gelu %[[HA]]
// CHECK: %[[DW2A:.*]] = kiln.weight_grad %[[AA]], %[[DY:.*]] : {{.*}} -> tensor<4x4xf32>
// CHECK: %[[DAA:.*]] = kiln.matmul %[[DY]], %[[W2A]] : {{.*}} -> tensor<?x4xf32>
// CHECK: %[[DHA:.*]] = kiln.activation_grad %[[HA]], %[[DAA]]
// CHECK: %[[DXA:.*]] = kiln.matmul %[[DHA]], %[[W1TA]] : {{.*}} -> tensor<?x4xf32>
// CHECK: %[[DW1A:.*]] = kiln.weight_grad %[[X]], %[[DHA]] : {{.*}} -> tensor<4x4xf32>
// CHECK: %[[DB1A:.*]] = kiln.reduce_rows %[[DHA]] : {{.*}} -> tensor<4xf32>
// CHECK: kiln.slice %[[W1]] {axis = 0 : i64, offset = 4 : i64} : (tensor<6x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[HB:.*]] = kiln.linear %[[X]], {{.*}} -> tensor<?x2xf32>
// CHECK: %[[DW2B:.*]] = kiln.weight_grad {{.*}} -> tensor<4x2xf32>
// CHECK: %[[DXB:.*]] = kiln.matmul {{.*}} -> tensor<?x4xf32>
// CHECK: %[[DW1B:.*]] = kiln.weight_grad %[[X]], {{.*}} -> tensor<2x4xf32>
// CHECK: %[[DB1B:.*]] = kiln.reduce_rows {{.*}} -> tensor<2xf32>
// CHECK: %[[DX:.*]] = kiln.add %[[DXA]], %[[DXB]]
// CHECK: %[[DW2:.*]] = kiln.concat %[[DW2A]], %[[DW2B]] {axis = 1 : i64} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>
// CHECK: %[[DW1:.*]] = kiln.concat %[[DW1A]], %[[DW1B]] {axis = 0 : i64} : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[DB1:.*]] = kiln.concat %[[DB1A]], %[[DB1B]] {axis = 0 : i64}
// CHECK-NOT: tensor<?x6xf32>
// CHECK: return {{.*}}%[[DW1]], %[[DB1]], %[[DW2]]
// [in, out] weights: w1 [4, 6] sliced along its columns (axis 1), w2 [6, 4] along its rows,
// read transposed by the matmuls; dw1 [4, 6] a concat along axis 1, dw2 [6, 4] along axis 0.
// CHECK-LABEL: func.func @in_out
// CHECK: kiln.slice %{{.*}} {axis = 1 : i64, offset = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x4xf32>
// CHECK: kiln.slice %{{.*}} {axis = 0 : i64, offset = 0 : i64} : (tensor<6x4xf32>) -> tensor<4x4xf32>
// CHECK: kiln.matmul {{.*}}transpose_b = true{{.*}} -> tensor<?x4xf32>
// CHECK: kiln.concat {{.*}} {axis = 0 : i64} : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
// CHECK: kiln.concat {{.*}} {axis = 1 : i64} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>

// By default the chunk is the widest multiple of 64 columns whose [rows, chunk] intermediate
// fits in 16 MiB at the row bound (L = 8 here): all of d_ff, so nothing changes.
// BOUND-LABEL: func.func @out_in
// BOUND-NOT: kiln.slice
// BOUND: kiln.activation_grad {{.*}} -> tensor<?x6xf32>

// kiln-fold-views makes every slice a strided view of its weight (no copy) and places each
// chunk's gradient parts in their concat's buffer.
// VIEWS-LABEL: func.func @out_in
// VIEWS-COUNT-8: kiln.slice {{.*}}kiln.view = #kiln.view<kind = read
// VIEWS: kiln.concat {{.*}}kiln.view = #kiln.view<kind = placed
module attributes {kiln.seq_bounds = array<i64: 8>, kiln.seq_names = ["L"]} {
  func.func @out_in(%x0: tensor<?x4xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>},
                    %t: tensor<?xi32> {kiln.name = "t", kiln.syms = array<i64: 0>}) -> (tensor<1xf32> {kiln.name = "loss"})
      attributes {kiln.differentiate} {
    %g = kiln.param "g" : tensor<4xf32>
    %x = kiln.mul %x0, %g : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
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
  func.func @in_out(%x0: tensor<?x4xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>},
                    %t: tensor<?xi32> {kiln.name = "t", kiln.syms = array<i64: 0>}) -> (tensor<1xf32> {kiln.name = "loss"})
      attributes {kiln.differentiate} {
    %g = kiln.param "g" : tensor<4xf32>
    %x = kiln.mul %x0, %g : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
    %w1 = kiln.param "v1" : tensor<4x6xf32>
    %b1 = kiln.param "c1" : tensor<6xf32>
    %w2 = kiln.param "v2" : tensor<6x4xf32>
    %b2 = kiln.param "c2" : tensor<4xf32>
    %a = kiln.linear %x, %w1, %b1 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x4xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<?x6xf32>
    %h = kiln.gelu %a {approximate = #kiln.gelu<tanh>} : (tensor<?x6xf32>) -> tensor<?x6xf32>
    %l = kiln.linear %h, %w2, %b2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x6xf32>, tensor<6x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
    %y = kiln.add %x, %l : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    %wo = kiln.param "wo" : tensor<5x4xf32>
    %logits = kiln.linear %y, %wo : (tensor<?x4xf32>, tensor<5x4xf32>) -> tensor<?x5xf32>
    %loss = kiln.cross_entropy %logits, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }
}
