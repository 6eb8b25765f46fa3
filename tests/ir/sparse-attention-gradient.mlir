// RUN: kiln-opt %s --kiln-differentiate | FileCheck %s
// RUN: kiln-opt %s --kiln-differentiate --kiln-tile-sparse-pattern | FileCheck %s --check-prefix=TILED

// A sparse pattern's gradient rule: the forward is rebuilt with its lse result (for a union,
// the two parts' merged lse), and each of the three gradients states the pattern as the
// attention does. kiln-tile-sparse-pattern then gives the gradients the forward's block
// schedule: the same block and parts (the backward visits only the forward's blocks).
// CHECK-LABEL: func.func @strided
// CHECK: %[[O:[^,]*]], %[[LSE:[^ ]*]] = kiln.attention %[[Q:[^,]*]], %[[K:[^,]*]], %[[V:[^ ]*]] {mask = #kiln.mask<strided>, part = #kiln.part<union>, pattern_size = 8 : i64, scale = 5.000000e-01 : f32}
// CHECK-DAG: kiln.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %{{.*}}, %[[LSE]] {mask = #kiln.mask<strided>, part = #kiln.part<union>, pattern_size = 8 : i64, scale = 5.000000e-01 : f32, wrt = #kiln.attention_wrt<query>}
// CHECK-DAG: kiln.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %{{.*}}, %[[LSE]] {mask = #kiln.mask<strided>, part = #kiln.part<union>, pattern_size = 8 : i64, scale = 5.000000e-01 : f32, wrt = #kiln.attention_wrt<key>}
// CHECK-DAG: kiln.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %{{.*}}, %[[LSE]] {mask = #kiln.mask<strided>, part = #kiln.part<union>, pattern_size = 8 : i64, scale = 5.000000e-01 : f32, wrt = #kiln.attention_wrt<value>}
// TILED-LABEL: func.func @strided
// TILED: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = block_sparse, block = 16>, kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, keys = sequence, blocks = window_to_diagonal, mask = strided_local>, <queries = stride_transpose, keys = stride_transpose, blocks = residue_class_to_diagonal, mask = strided_global, exclude = strided_local>]>
// TILED-COUNT-3: kiln.attention_grad {{.*}}kiln.schedule = #kiln.schedule<engine = block_sparse, block = 16>, kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, keys = sequence, blocks = window_to_diagonal, mask = strided_local>, <queries = stride_transpose, keys = stride_transpose, blocks = residue_class_to_diagonal, mask = strided_global, exclude = strided_local>]>
// A layout keeps its rows and its causality on the gradients.
// CHECK-LABEL: func.func @layout
// CHECK-COUNT-3: kiln.attention_grad {{.*}}{layout = ["#.", "##"], mask = #kiln.mask<layout>, noncausal, pattern_size = 16 : i64
module attributes {kiln.seq_bounds = array<i64: 32>, kiln.seq_names = ["L"]} {
  func.func @strided(%t: tensor<32xi32> {kiln.name = "t"}) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
    %q = kiln.param "q" : tensor<1x32x4xf32>
    %k = kiln.param "k" : tensor<1x32x4xf32>
    %v = kiln.param "v" : tensor<1x32x4xf32>
    %a = kiln.attention %q, %k, %v {mask = #kiln.mask<strided>, part = #kiln.part<union>, pattern_size = 8 : i64, scale = 0.5 : f32} : (tensor<1x32x4xf32>, tensor<1x32x4xf32>, tensor<1x32x4xf32>) -> tensor<1x32x4xf32>
    %o = kiln.reshape %a : (tensor<1x32x4xf32>) -> tensor<32x4xf32>
    %loss = kiln.cross_entropy %o, %t : (tensor<32x4xf32>, tensor<32xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }
  func.func @layout(%t: tensor<32xi32> {kiln.name = "t"}) -> (tensor<1xf32> {kiln.name = "loss"}) attributes {kiln.differentiate} {
    %q = kiln.param "q" : tensor<1x32x4xf32>
    %a = kiln.attention %q, %q, %q {mask = #kiln.mask<layout>, layout = ["#.", "##"], noncausal, pattern_size = 16 : i64, scale = 0.5 : f32} : (tensor<1x32x4xf32>, tensor<1x32x4xf32>, tensor<1x32x4xf32>) -> tensor<1x32x4xf32>
    %o = kiln.reshape %a : (tensor<1x32x4xf32>) -> tensor<32x4xf32>
    %loss = kiln.cross_entropy %o, %t : (tensor<32x4xf32>, tensor<32xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }
}
