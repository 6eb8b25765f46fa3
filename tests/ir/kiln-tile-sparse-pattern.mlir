// RUN: kiln-opt %s --kiln-tile-sparse-pattern --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-tile-sparse-pattern=block=32 --split-input-file | FileCheck %s --check-prefix=B32

// A merged strided head: two parts; the global part runs in stride-transpose order and drops
// the keys the local part already counts. The block is the largest power of two <= the stride
// (16..64), unless the option sets it.
// CHECK-LABEL: func.func @strided_union
// CHECK: kiln.attention {{.*}}kiln.schedule = {block = 64 : i64}
// CHECK-SAME: part0 = "queries: sequence, keys: sequence, blocks: window_to_diagonal"
// CHECK-SAME: part1 = "queries: stride_transpose, keys: stride_transpose, blocks: residue_class_to_diagonal, minus part0's keys"
// B32: kiln.schedule = {block = 32 : i64}
func.func @strided_union(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %o = kiln.attention %q, %q, %q {mask = "strided", pattern_size = 128 : i64, part = "union", scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %o : tensor<8x?x32xf32>
}

// -----

// The fixed pattern's summary part gathers the summary keys; a small window gets small blocks.
// CHECK-LABEL: func.func @fixed_and_window
// CHECK: kiln.attention {{.*}}kiln.schedule = {block = 32 : i64}, kiln.sparse = {part0 = "queries: sequence, keys: summary_gather, blocks: summaries_before_last_row"}
// CHECK: kiln.attention {{.*}}kiln.schedule = {block = 16 : i64}, kiln.sparse = {part0 = "queries: sequence, keys: sequence, blocks: window_to_diagonal"}
func.func @fixed_and_window(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %a = kiln.attention %q, %q, %q {mask = "fixed", pattern_size = 32 : i64, summary = 4 : i64, part = "global", scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  %b = kiln.attention %a, %a, %a {mask = "window", pattern_size = 5 : i64, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %b : tensor<8x?x32xf32>
}

// -----

// A user layout keeps its own block; dense and causal attention are left alone.
// CHECK-LABEL: func.func @layout
// CHECK: kiln.attention {{.*}}kiln.schedule = {block = 8 : i64}, kiln.sparse = {part0 = "queries: sequence, keys: sequence, blocks: layout_table"}
// CHECK: kiln.attention
// CHECK-NOT: kiln.sparse
// CHECK: return
func.func @layout(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %a = kiln.attention %q, %q, %q {mask = "layout", pattern_size = 8 : i64, layout = ["#..", "##.", ".##"], scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  %b = kiln.attention %a, %a, %a {mask = "causal", scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %b : tensor<8x?x32xf32>
}
