// RUN: kiln-opt %s --kiln-tile-sparse-pattern --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-tile-sparse-pattern=block=32 --split-input-file | FileCheck %s --check-prefix=B32

// A merged strided head: two parts; the global part runs in stride-transpose order and drops
// the keys the local part already counts. The block is the largest power of two <= the stride
// (16..64), unless the option sets it.
// CHECK-LABEL: func.func @strided_union
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = block_sparse, block = 64>
// CHECK-SAME: kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, keys = sequence, blocks = window_to_diagonal, mask = strided_local>,
// CHECK-SAME: <queries = stride_transpose, keys = stride_transpose, blocks = residue_class_to_diagonal, mask = strided_global, exclude = strided_local>]>
// B32: kiln.schedule = #kiln.schedule<engine = block_sparse, block = 32>
func.func @strided_union(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %o = kiln.attention %q, %q, %q {mask = #kiln.mask<strided>, pattern_size = 128 : i64, part = #kiln.part<union>, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %o : tensor<8x?x32xf32>
}

// -----

// The fixed pattern's summary part gathers the summary keys; a small window gets small blocks.
// CHECK-LABEL: func.func @fixed_and_window
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = block_sparse, block = 32>, kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, keys = summary_gather, blocks = summaries_before_last_row, mask = fixed_global>]>
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = block_sparse, block = 16>, kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, keys = sequence, blocks = window_to_diagonal, mask = window>]>
func.func @fixed_and_window(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<fixed>, pattern_size = 32 : i64, summary = 4 : i64, part = #kiln.part<global>, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  %b = kiln.attention %a, %a, %a {mask = #kiln.mask<window>, pattern_size = 5 : i64, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %b : tensor<8x?x32xf32>
}

// -----

// A user layout keeps its own block; dense and causal attention are left alone.
// CHECK-LABEL: func.func @layout
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = block_sparse, block = 8>, kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, keys = sequence, blocks = layout_table, mask = layout>]>
// CHECK: kiln.attention
// CHECK-NOT: kiln.sparse
// CHECK: return
func.func @layout(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<layout>, pattern_size = 8 : i64, layout = ["#..", "##.", ".##"], scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  %b = kiln.attention %a, %a, %a {mask = #kiln.mask<causal>, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %b : tensor<8x?x32xf32>
}

// -----

// A block schedule already in the IR (edited by hand: only the local part of a merged strided
// head, blocks of 16) is kept as it stands, not rederived from the pattern.
// CHECK-LABEL: func.func @edited
// CHECK: kiln.schedule = #kiln.schedule<engine = block_sparse, block = 16>, kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, keys = sequence, blocks = window_to_diagonal, mask = strided_local>]>
// B32: kiln.schedule = #kiln.schedule<engine = block_sparse, block = 16>
func.func @edited(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %o = kiln.attention %q, %q, %q {mask = #kiln.mask<strided>, pattern_size = 128 : i64, part = #kiln.part<union>, scale = 0.125 : f32,
                                  kiln.schedule = #kiln.schedule<block = 16>,
                                  kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, keys = sequence, blocks = window_to_diagonal, mask = strided_local>]>}
      : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %o : tensor<8x?x32xf32>
}
