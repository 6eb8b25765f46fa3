// RUN: kiln-opt %s --kiln-tile-ops=vector-width=16 --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-tile-ops=vector-width=8 --split-input-file | FileCheck %s --check-prefix=AVX2
// RUN: kiln-opt %s --kiln-tile-ops="vector-width=16 gpu=true" --split-input-file | FileCheck %s --check-prefix=GPU

// Linears get a 6-row register block (4 rows with AVX2's 16 registers), 4 vectors wide, in task
// tiles of 8 blocks; narrow outputs get narrower blocks of whole vectors of their lanes (10
// columns: 8-lane vectors, a block of 8).
// With 8 or more column tiles the tasks are column tiles (256 columns in 8 tiles of 32 with
// 8-lane vectors). A weight read transposed ([out, in], x·Wᵀ) is packed per task. On GPUs,
// block tiles of up to 64 columns (halved down to the columns, at least 16) x 32 rows, each K
// staged through shared memory in the largest of 32, 16, 8, 4 that divides it.
// CHECK-LABEL: func.func @linear_tiles
// CHECK: kiln.linear {{.*}}kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 64, tile_rows = 48, column_tasks = 0, pack = per_task, gemm = register_block>
// CHECK: kiln.linear {{.*}}kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 8, tile_rows = 48, column_tasks = 0, pack = per_task, gemm = register_block>
// AVX2-LABEL: func.func @linear_tiles
// AVX2: kiln.schedule = #kiln.schedule<tile_m = 4, tile_n = 32, tile_rows = 4, column_tasks = 1, pack = per_task, gemm = register_block>
// AVX2: kiln.schedule = #kiln.schedule<tile_m = 4, tile_n = 8, tile_rows = 32, column_tasks = 0, pack = per_task, gemm = register_block>
// GPU-LABEL: func.func @linear_tiles
// GPU: kiln.schedule = #kiln.schedule<pack = per_call, gpu_tile_n = 64, gpu_tile_m = 32, gpu_k_chunk = 8>
// GPU: kiln.schedule = #kiln.schedule<pack = per_call, gpu_tile_n = 16, gpu_tile_m = 32, gpu_k_chunk = 32>
func.func @linear_tiles(%x: tensor<?x8xf32>) -> tensor<?x10xf32> {
  %w = kiln.param "w" : tensor<256x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<256x8xf32>) -> tensor<?x256xf32>
  %w2 = kiln.param "w2" : tensor<10x256xf32>
  %y = kiln.linear %h, %w2 : (tensor<?x256xf32>, tensor<10x256xf32>) -> tensor<?x10xf32>
  return %y : tensor<?x10xf32>
}

// -----

// One static row (a decode step) streams the weight in place: column tiles of 128 as tasks, no
// packing. Over many rows, a weight stored [in, out] (x·W) with a long K (>= 1024) is packed,
// as is one with rows of 1024 or more columns (GPT-2's c_attn, [768, 2304]: in place, each K
// step of a panel would be on its own page); [768, 768] is read in place.
// A decode step (one static row) on a GPU stages nothing: whole 32-row tiles would be padding.
// CHECK-LABEL: func.func @packing
// CHECK: kiln.linear {{.*}}#kiln.schedule<tile_m = 1, tile_n = 128, pack = none, gemm = stream>
// CHECK: kiln.linear {{.*}}column_tasks = 1, pack = per_task, gemm = register_block>
// CHECK: kiln.linear {{.*}}column_tasks = 1, pack = per_task, gemm = register_block>
// CHECK: kiln.linear {{.*}}column_tasks = 1, pack = none, gemm = register_block>
// GPU-LABEL: func.func @packing
// GPU: kiln.linear {{.*}}#kiln.schedule<pack = none, gpu_tile_n = 64, gpu_tile_m = 32, gpu_k_chunk = 0>
func.func @packing(%x: tensor<1x64xf32>, %y: tensor<?x1024xf32>, %z: tensor<?x768xf32>) -> (tensor<1x2048xf32>, tensor<?x2048xf32>, tensor<?x2304xf32>, tensor<?x768xf32>) {
  %w = kiln.param "w" : tensor<64x2048xf32>
  %a = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<in_out>} : (tensor<1x64xf32>, tensor<64x2048xf32>) -> tensor<1x2048xf32>
  %w2 = kiln.param "w2" : tensor<1024x2048xf32>
  %b = kiln.linear %y, %w2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x1024xf32>, tensor<1024x2048xf32>) -> tensor<?x2048xf32>
  %w3 = kiln.param "w3" : tensor<768x2304xf32>
  %c = kiln.linear %z, %w3 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x768xf32>, tensor<768x2304xf32>) -> tensor<?x2304xf32>
  %w4 = kiln.param "w4" : tensor<768x768xf32>
  %d = kiln.linear %z, %w4 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x768xf32>, tensor<768x768xf32>) -> tensor<?x768xf32>
  return %a, %b, %c, %d : tensor<1x2048xf32>, tensor<?x2048xf32>, tensor<?x2304xf32>, tensor<?x768xf32>
}

// -----

// A vocabulary-wide product against a table stored [V, d] (the training step's LM head: no
// panels) packs per task and does not unroll its K loop (k_unroll = 1, as the inference head
// in panels above); a 3072-wide one keeps the default (2, unset).
// CHECK-LABEL: func.func @wide_head
// CHECK: kiln.linear {{.*}}column_tasks = 1, pack = per_task, k_unroll = 1, gemm = register_block>
// CHECK: kiln.linear {{.*}}column_tasks = 1, pack = per_task, gemm = register_block>
func.func @wide_head(%h: tensor<?x64xf32>) -> (tensor<?x50257xf32>, tensor<?x3072xf32>) {
  %e = kiln.param "wte" : tensor<50257x64xf32>
  %l = kiln.linear %h, %e : (tensor<?x64xf32>, tensor<50257x64xf32>) -> tensor<?x50257xf32>
  %w = kiln.param "w" : tensor<3072x64xf32>
  %m = kiln.linear %h, %w : (tensor<?x64xf32>, tensor<3072x64xf32>) -> tensor<?x3072xf32>
  return %l, %m : tensor<?x50257xf32>, tensor<?x3072xf32>
}

// -----

// The FFN's two GEMMs: the output's block over d_out (64 columns: one 64-wide block), the
// intermediate's over d_ff (256: 64); both weights packed once per call.
// CHECK-LABEL: func.func @ffn
// CHECK: kiln.ffn {{.*}}kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 64, pack = per_call, hidden_vec = 16, hidden_tile_n = 64, chunk = 32, gemm = register_block>
// GPU-LABEL: func.func @ffn
// GPU: kiln.ffn {{.*}}kiln.schedule = #kiln.schedule<pack = per_call, chunk = 32, gpu_tile_n = 64, gpu_tile_m = 32, gpu_k_chunk = 32, gpu_hidden_tile_n = 64, gpu_hidden_k_chunk = 32>
func.func @ffn(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w1 = kiln.param "w1" : tensor<64x256xf32>
  %b1 = kiln.param "b1" : tensor<256xf32>
  %w2 = kiln.param "w2" : tensor<256x64xf32>
  %b2 = kiln.param "b2" : tensor<64xf32>
  %y = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<in_out>, layout2 = #kiln.weight_layout<in_out>, activation = #kiln.activation<relu>, kiln.schedule = #kiln.schedule<chunk = 32>}
      : (tensor<?x64xf32>, tensor<64x256xf32>, tensor<256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Attention over a whole sequence runs on the online block engine with blocks of 64 queries
// and keys; a decode step over a cache on row strips of its one query (32 x 4 tiles per pass on a
// GPU target). Row-wise ops get rows per task (16 KiB per task; threads across a row on GPUs). A decision
// already made (the softmax's rows) is kept; parameters get nothing.
// CHECK-LABEL: func.func @others
// CHECK-NOT: kiln.param {{.*}}kiln.schedule
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = online_block, q_block = 64, k_block = 128>
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = row_strip, q_block = 1>
// CHECK: kiln.softmax {{.*}}kiln.schedule = #kiln.schedule<rows_per_task = 7>
// CHECK: kiln.relu {{.*}}kiln.schedule = #kiln.schedule<rows_per_task = 128>
// GPU-LABEL: func.func @others
// GPU: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = online_block, q_block = 64, gpu_threads = 32>
// GPU: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = row_strip, q_block = 1, gpu_tile_n = 32, gpu_tile_m = 4>
// GPU: kiln.relu {{.*}}kiln.schedule = #kiln.schedule<gpu_threads = 32>
func.func @others(%q: tensor<4x?x32xf32>, %q1: tensor<4x1x32xf32>, %c: tensor<4x64x32xf32>, %past: tensor<1xi32>) -> (tensor<4x?x32xf32>, tensor<4x1x32xf32>) {
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<causal>, scale = 0.17677 : f32} : (tensor<4x?x32xf32>, tensor<4x?x32xf32>, tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  %d = kiln.attention %q1, %c, %c, %past {mask = #kiln.mask<causal>, scale = 0.17677 : f32} : (tensor<4x1x32xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>, tensor<1xi32>) -> tensor<4x1x32xf32>
  %s = kiln.softmax %a {kiln.schedule = #kiln.schedule<rows_per_task = 7>} : (tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  %r = kiln.relu %s : (tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  return %r, %d : tensor<4x?x32xf32>, tensor<4x1x32xf32>
}

// -----

// A sliding window (mask window) over grouped key heads or over a cache has no block schedule:
// row strips, the window a predicate on the keys (a prompt in blocks of 8 queries, a decode
// step of its one row). With as many key heads as query heads it is the sparse pattern,
// kiln-tile-sparse-pattern's (nothing decided here).
// CHECK-LABEL: func.func @sliding_windows
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = row_strip, q_block = 8>
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<engine = row_strip, q_block = 1>
// CHECK: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<>
func.func @sliding_windows(%q: tensor<4x?x32xf32>, %k: tensor<2x?x32xf32>, %q1: tensor<4x1x32xf32>, %c: tensor<2x64x32xf32>, %past: tensor<1xi32>) -> (tensor<4x?x32xf32>, tensor<4x1x32xf32>, tensor<4x?x32xf32>) {
  %a = kiln.attention %q, %k, %k {mask = #kiln.mask<window>, pattern_size = 8 : i64, scale = 0.17677 : f32} : (tensor<4x?x32xf32>, tensor<2x?x32xf32>, tensor<2x?x32xf32>) -> tensor<4x?x32xf32>
  %d = kiln.attention %q1, %c, %c, %past {mask = #kiln.mask<window>, pattern_size = 8 : i64, scale = 0.17677 : f32} : (tensor<4x1x32xf32>, tensor<2x64x32xf32>, tensor<2x64x32xf32>, tensor<1xi32>) -> tensor<4x1x32xf32>
  %s = kiln.attention %q, %q, %q {mask = #kiln.mask<window>, pattern_size = 8 : i64, scale = 0.17677 : f32} : (tensor<4x?x32xf32>, tensor<4x?x32xf32>, tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  return %a, %d, %s : tensor<4x?x32xf32>, tensor<4x1x32xf32>, tensor<4x?x32xf32>
}

// -----

// A decode step's GEMMs stream their weights (gemm = stream, no packing): an [out, in] weight
// (a tied LM head) in tasks of columns read along K (vec = the lanes over K: 16 for K = 64), 32
// columns here since 64 would leave 15 tasks (under 16), the FFN's two [in, out] weights in
// tasks of 128 columns.
// CHECK-LABEL: func.func @decode_stream
// CHECK: kiln.linear {{.*}}#kiln.schedule<vec = 16, tile_m = 1, tile_n = 32, pack = none, gemm = stream>
// CHECK: kiln.ffn {{.*}}#kiln.schedule<tile_m = 1, tile_n = 64, pack = none, hidden_vec = 16, hidden_tile_n = 128, chunk = 32, gemm = stream>
func.func @decode_stream(%x: tensor<1x64xf32>) -> (tensor<1x1000xf32>, tensor<1x64xf32>) {
  %e = kiln.param "e" : tensor<1000x64xf32>
  %l = kiln.linear %x, %e : (tensor<1x64xf32>, tensor<1000x64xf32>) -> tensor<1x1000xf32>
  %w1 = kiln.param "w1" : tensor<64x256xf32>
  %b1 = kiln.param "b1" : tensor<256xf32>
  %w2 = kiln.param "w2" : tensor<256x64xf32>
  %b2 = kiln.param "b2" : tensor<64xf32>
  %y = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<in_out>, layout2 = #kiln.weight_layout<in_out>, activation = #kiln.activation<relu>, kiln.schedule = #kiln.schedule<chunk = 32>}
      : (tensor<1x64xf32>, tensor<64x256xf32>, tensor<256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
  return %l, %y : tensor<1x1000xf32>, tensor<1x64xf32>
}

// The column tiles of an [out, in] weight streamed along K: 64 where that makes 16 tasks or
// more, else 32, else 16 (N = 192: 12 tasks, which two threads split evenly; 3 of 64 did not).
// CHECK-LABEL: func.func @stream_tiles
// CHECK: kiln.linear {{.*}}tile_n = 64,{{.*}}gemm = stream>{{.*}}tensor<1x1024xf32>
// CHECK: kiln.linear {{.*}}tile_n = 32,{{.*}}gemm = stream>{{.*}}tensor<1x576xf32>
// CHECK: kiln.linear {{.*}}tile_n = 16,{{.*}}gemm = stream>{{.*}}tensor<1x192xf32>
// CHECK: kiln.linear {{.*}}tile_n = 8,{{.*}}gemm = stream>{{.*}}tensor<1x8xf32>
func.func @stream_tiles(%x: tensor<1x64xf32>) -> (tensor<1x1024xf32>, tensor<1x576xf32>, tensor<1x192xf32>, tensor<1x8xf32>) {
  %a = kiln.param "a" : tensor<1024x64xf32>
  %la = kiln.linear %x, %a : (tensor<1x64xf32>, tensor<1024x64xf32>) -> tensor<1x1024xf32>
  %b = kiln.param "b" : tensor<576x64xf32>
  %lb = kiln.linear %x, %b : (tensor<1x64xf32>, tensor<576x64xf32>) -> tensor<1x576xf32>
  %c = kiln.param "c" : tensor<192x64xf32>
  %lc = kiln.linear %x, %c : (tensor<1x64xf32>, tensor<192x64xf32>) -> tensor<1x192xf32>
  %d = kiln.param "d" : tensor<8x64xf32>
  %ld = kiln.linear %x, %d : (tensor<1x64xf32>, tensor<8x64xf32>) -> tensor<1x8xf32>
  return %la, %lb, %lc, %ld : tensor<1x1024xf32>, tensor<1x576xf32>, tensor<1x192xf32>, tensor<1x8xf32>
}

// -----

// Quantized weights stream as stored, their columns 4 at a time (col_group: four chains of sums
// in flight, each group's block scales decoded just before its blocks); f32 weights have no
// groups, nor does a tile of columns that 4 does not divide.
// CHECK-LABEL: func.func @quantized_stream
// CHECK: kiln.linear {{.*}}tile_n = 32, pack = none, col_group = 4, gemm = stream>{{.*}}tensor<576x18x20xi8>
// CHECK: kiln.linear {{.*}}tile_n = 16, pack = none, col_group = 4, gemm = stream>{{.*}}tensor<192x18x34xi8>
// CHECK: kiln.linear {{.*}}tile_n = 2, pack = none, gemm = stream>{{.*}}tensor<2x18x20xi8>
// CHECK: kiln.linear {{.*}}tile_n = 32, pack = none, gemm = stream>{{.*}}tensor<576x576xf32>
func.func @quantized_stream(%x: tensor<1x576xf32>) -> (tensor<1x576xf32>, tensor<1x192xf32>, tensor<1x2xf32>, tensor<1x576xf32>) {
  %a = kiln.param "a" {format = #kiln.weight_format<q4_1>} : tensor<576x18x20xi8>
  %la = kiln.linear %x, %a {weight_format = #kiln.weight_format<q4_1>} : (tensor<1x576xf32>, tensor<576x18x20xi8>) -> tensor<1x576xf32>
  %b = kiln.param "b" {format = #kiln.weight_format<q8_0>} : tensor<192x18x34xi8>
  %lb = kiln.linear %x, %b {weight_format = #kiln.weight_format<q8_0>} : (tensor<1x576xf32>, tensor<192x18x34xi8>) -> tensor<1x192xf32>
  %c = kiln.param "c" {format = #kiln.weight_format<q4_1>} : tensor<2x18x20xi8>
  %lc = kiln.linear %x, %c {weight_format = #kiln.weight_format<q4_1>} : (tensor<1x576xf32>, tensor<2x18x20xi8>) -> tensor<1x2xf32>
  %d = kiln.param "d" : tensor<576x576xf32>
  %ld = kiln.linear %x, %d : (tensor<1x576xf32>, tensor<576x576xf32>) -> tensor<1x576xf32>
  return %la, %lb, %lc, %ld : tensor<1x576xf32>, tensor<1x192xf32>, tensor<1x2xf32>, tensor<1x576xf32>
}

// -----

// Weights kept in panels since load (kiln-prepack-weights) are read in place (pack = at_load):
// a register block is one panel wide (the last of 50257 columns' 786 panels holds 17); a decode
// step streams whole panels (tiles of 128 columns: two panels of 64; 48 columns in panels of 16:
// tiles of 48); the FFN reads both weights' panels, its blocks one panel wide each. On a GPU,
// panels are read in place too.
// CHECK-LABEL: func.func @panels
// CHECK: kiln.linear {{.*}}#kiln.schedule<tile_m = 6, tile_n = 64, tile_rows = 6, column_tasks = 1, pack = at_load, k_unroll = 1, gemm = register_block>
// CHECK: kiln.linear {{.*}}#kiln.schedule<tile_m = 1, tile_n = 128, pack = at_load, gemm = stream>
// CHECK: kiln.linear {{.*}}#kiln.schedule<tile_m = 1, tile_n = 48, pack = at_load, gemm = stream>
// CHECK: kiln.ffn {{.*}}#kiln.schedule<tile_m = 6, tile_n = 64, pack = at_load, hidden_vec = 16, hidden_tile_n = 64, chunk = 32, gemm = register_block>
// CHECK: kiln.ffn {{.*}}#kiln.schedule<tile_m = 1, tile_n = 64, pack = at_load, hidden_vec = 16, hidden_tile_n = 128, chunk = 32, gemm = stream>
// GPU-LABEL: func.func @panels
// GPU: kiln.linear {{.*}}#kiln.schedule<pack = at_load, gpu_tile_n = 64, gpu_tile_m = 32, gpu_k_chunk = 32>
func.func @panels(%x: tensor<?x64xf32>, %x1: tensor<1x64xf32>) -> (tensor<?x50257xf32>, tensor<1x50257xf32>, tensor<1x48xf32>, tensor<?x64xf32>, tensor<1x64xf32>) {
  %w = kiln.param "head" {panel_cols = 50257 : i64} : tensor<786x64x64xf32>
  %a = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<panels>} : (tensor<?x64xf32>, tensor<786x64x64xf32>) -> tensor<?x50257xf32>
  %b = kiln.linear %x1, %w {weight_layout = #kiln.weight_layout<panels>} : (tensor<1x64xf32>, tensor<786x64x64xf32>) -> tensor<1x50257xf32>
  %n = kiln.param "narrow" {panel_cols = 48 : i64} : tensor<3x64x16xf32>
  %c = kiln.linear %x1, %n {weight_layout = #kiln.weight_layout<panels>} : (tensor<1x64xf32>, tensor<3x64x16xf32>) -> tensor<1x48xf32>
  %w1 = kiln.param "w1" {panel_cols = 256 : i64} : tensor<4x64x64xf32>
  %b1 = kiln.param "b1" : tensor<256xf32>
  %w2 = kiln.param "w2" {panel_cols = 64 : i64} : tensor<1x256x64xf32>
  %b2 = kiln.param "b2" : tensor<64xf32>
  %y = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<panels>, layout2 = #kiln.weight_layout<panels>, activation = #kiln.activation<relu>, kiln.schedule = #kiln.schedule<chunk = 32>}
      : (tensor<?x64xf32>, tensor<4x64x64xf32>, tensor<256xf32>, tensor<1x256x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %y1 = kiln.ffn %x1, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<panels>, layout2 = #kiln.weight_layout<panels>, activation = #kiln.activation<relu>, kiln.schedule = #kiln.schedule<chunk = 32>}
      : (tensor<1x64xf32>, tensor<4x64x64xf32>, tensor<256xf32>, tensor<1x256x64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
  return %a, %b, %c, %y, %y1 : tensor<?x50257xf32>, tensor<1x50257xf32>, tensor<1x48xf32>, tensor<?x64xf32>, tensor<1x64xf32>
}

// -----

// weight_grad: a register block of 4 vectors x 6 result rows (3 x 4 with 16 registers), blocks of 384
// result rows, in both layouts; a contiguous side that is no whole number of vectors (50257
// columns) keeps the plain column-strip schedule, as does the GPU for now.
// CHECK-LABEL: func.func @weight_grad
// CHECK: kiln.weight_grad {{.*}}#kiln.schedule<tile_m = 6, tile_n = 64, tile_rows = 384, rows_per_task = 64>
// CHECK: kiln.weight_grad {{.*}}#kiln.schedule<tile_m = 6, tile_n = 64, tile_rows = 384, rows_per_task = 64>
// CHECK: kiln.weight_grad {{.*}}#kiln.schedule<>
// AVX2-LABEL: func.func @weight_grad
// AVX2: kiln.weight_grad {{.*}}#kiln.schedule<tile_m = 4, tile_n = 24, tile_rows = 384, rows_per_task = 64>
// GPU-LABEL: func.func @weight_grad
// GPU-COUNT-3: kiln.weight_grad {{.*}}#kiln.schedule<>
func.func @weight_grad(%x: tensor<?x768xf32>, %dy: tensor<?x50257xf32>, %g: tensor<?x3072xf32>)
    -> (tensor<50257x768xf32>, tensor<768x3072xf32>, tensor<768x50257xf32>) {
  %a = kiln.weight_grad %x, %dy : (tensor<?x768xf32>, tensor<?x50257xf32>) -> tensor<50257x768xf32>
  %b = kiln.weight_grad %x, %g {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x768xf32>, tensor<?x3072xf32>) -> tensor<768x3072xf32>
  %c = kiln.weight_grad %x, %dy {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x768xf32>, tensor<?x50257xf32>) -> tensor<768x50257xf32>
  return %a, %b, %c : tensor<50257x768xf32>, tensor<768x3072xf32>, tensor<768x50257xf32>
}

// -----

// A batched decode step's rows are B itself (one row per sequence): with B's bound at most 4 its
// GEMMs stream too, each column tile computing tile_m = 4 rows (a run's rows past B are clamped
// copies, not stored); the rows of a prompt batch (B*L, bound 64) get register blocks.
// CHECK-LABEL: func.func @batched_decode
// CHECK: kiln.linear {{.*}}#kiln.schedule<tile_m = 4, tile_n = 64, pack = none, gemm = stream>
// CHECK: kiln.linear {{.*}}gemm = register_block>
// Its attention over a cache sees one query row per call (per sequence): a block of 1.
// CHECK: kiln.attention {{.*}}#kiln.schedule<engine = row_strip, q_block = 1>
module attributes {kiln.seq_names = ["L", "B", "B*L"], kiln.seq_bounds = array<i64: 16, 4, 64>,
                   kiln.seq_factors = array<i64: -1, -1, -1, -1, 1, 0>} {
  func.func @batched_decode(%x: tensor<?x64xf32> {kiln.name = "x", kiln.syms = array<i64: 1, -1>},
                            %p: tensor<?x64xf32> {kiln.name = "p", kiln.syms = array<i64: 2, -1>},
                            %past: tensor<1xi32> {kiln.name = "past", kiln.syms = array<i64: -1>})
      -> (tensor<?x256xf32>, tensor<?x256xf32>, tensor<1x?x64xf32>) {
    %w = kiln.param "w" : tensor<64x256xf32>
    %y = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x64xf32>, tensor<64x256xf32>) -> tensor<?x256xf32>
    %z = kiln.linear %p, %w {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x64xf32>, tensor<64x256xf32>) -> tensor<?x256xf32>
    %q = kiln.reshape %x : (tensor<?x64xf32>) -> tensor<1x?x64xf32>
    %c = kiln.state "cache" {batch = 1 : i64} : tensor<1x16x64xf32>
    %o = kiln.attention %q, %c, %c, %past {mask = #kiln.mask<causal>, scale = 0.125 : f32} : (tensor<1x?x64xf32>, tensor<1x16x64xf32>, tensor<1x16x64xf32>, tensor<1xi32>) -> tensor<1x?x64xf32>
    return %y, %z, %o : tensor<?x256xf32>, tensor<?x256xf32>, tensor<1x?x64xf32>
  }
}

// -----

// The backward's and the optimizer's tasks are decisions too (rule 7), printed by
// --emit=schedule: attention_grad over a sequence in tasks of 16 result rows, register blocks of
// 4; over a sparse pattern, tasks of 256 rows; lsh_chunk_attention_grad, 16 sorted slots per
// task; cross_entropy, 16 rows of losses per task; sum_squares of a 1-D gradient, 4096 elements
// per partial sum (a 2-D one sums per row: no decision). On the GPU the attention gradients get
// a block per row.
// CHECK-LABEL: func.func @backward_tasks
// CHECK: kiln.attention_grad {{.*}}kiln.schedule = #kiln.schedule<tile_m = 4, tile_rows = 16>
// CHECK: kiln.attention_grad {{.*}}kiln.schedule = #kiln.schedule<rows_per_task = 256>
// CHECK: kiln.lsh_chunk_attention_grad {{.*}}kiln.schedule = #kiln.schedule<rows_per_task = 16>
// CHECK: kiln.cross_entropy {{.*}}kiln.schedule = #kiln.schedule<rows_per_task = 16>
// CHECK: kiln.sum_squares {{.*}}kiln.schedule = #kiln.schedule<rows_per_task = 4096>
// CHECK: kiln.sum_squares {{.*}}kiln.schedule = #kiln.schedule<>
// GPU-LABEL: func.func @backward_tasks
// GPU: kiln.attention_grad {{.*}}kiln.schedule = #kiln.schedule<gpu_threads = 64>
// GPU: kiln.attention_grad {{.*}}kiln.schedule = #kiln.schedule<gpu_threads = 64>
// GPU: kiln.lsh_chunk_attention_grad {{.*}}kiln.schedule = #kiln.schedule<gpu_threads = 64>
// GPU: kiln.cross_entropy {{.*}}kiln.schedule = #kiln.schedule<>
func.func @backward_tasks(%q: tensor<4x?x64xf32>, %lse: tensor<4x?xf32>, %b: tensor<4x2x?xi32>, %s: tensor<4x2x2x?xi32>,
                          %logits: tensor<?x256xf32>, %t: tensor<?xi32>, %g1: tensor<4096xf32>, %g2: tensor<64x64xf32>)
    -> (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
  %dq = kiln.attention_grad %q, %q, %q, %q, %q, %lse {mask = #kiln.mask<causal>, scale = 0.125 : f32, wrt = #kiln.attention_wrt<query>} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?xf32>) -> tensor<4x?x64xf32>
  %dk = kiln.attention_grad %q, %q, %q, %q, %q, %lse {mask = #kiln.mask<window>, pattern_size = 64 : i64, scale = 0.125 : f32, wrt = #kiln.attention_wrt<key>} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?xf32>) -> tensor<4x?x64xf32>
  %dqk = kiln.lsh_chunk_attention_grad %q, %q, %b, %s, %q, %q {chunk = 64 : i64, scale = 0.125 : f32, wrt = #kiln.lsh_wrt<qk>} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x2x?xi32>, tensor<4x2x2x?xi32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  %l = kiln.cross_entropy %logits, %t : (tensor<?x256xf32>, tensor<?xi32>) -> tensor<1xf32>
  %s1 = kiln.sum_squares %g1 : (tensor<4096xf32>) -> tensor<1xf32>
  %s2 = kiln.sum_squares %g2 : (tensor<64x64xf32>) -> tensor<1xf32>
  return %dq, %dk, %dqk, %l, %s1, %s2 : tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}

// -----

// Kernels without tiles get an empty schedule: a cache_write of a 2-D state and an act_running
// used to fall through to weight_grad's rule, which would have given this 2-D write a register
// block (tile_m = 6, tile_n = 64, tile_rows = 384).
// CHECK-LABEL: func.func @no_tiles
// CHECK: kiln.cache_write {{.*}}{kiln.schedule = #kiln.schedule<>}
// CHECK: kiln.act_running {{.*}}{kiln.schedule = #kiln.schedule<>}
func.func @no_tiles(%v: tensor<?x64xf32>, %p: tensor<1xi32>, %c: tensor<?x36xf32>) -> (tensor<128x64xf32>, tensor<1xi32>) {
  %cache = kiln.state "cache" : tensor<128x64xf32>
  %w = kiln.cache_write %cache, %v, %p : (tensor<128x64xf32>, tensor<?x64xf32>, tensor<1xi32>) -> tensor<128x64xf32>
  %f = kiln.act_running %c : (tensor<?x36xf32>) -> tensor<1xi32>
  return %w, %f : tensor<128x64xf32>, tensor<1xi32>
}
