// RUN: kiln-opt %s --kiln-tile-ops=vector-width=16 --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-tile-ops=vector-width=8 --split-input-file | FileCheck %s --check-prefix=AVX2

// Linears get a 4-row register tile, 4 vectors wide; narrow outputs get a narrower tile.
// CHECK-LABEL: func.func @linear_tiles
// CHECK: kiln.linear {{.*}}kiln.schedule = {tile_m = 4 : i64, tile_n = 64 : i64}
// CHECK: kiln.linear {{.*}}kiln.schedule = {tile_m = 4 : i64, tile_n = 16 : i64}
// AVX2-LABEL: func.func @linear_tiles
// AVX2: kiln.schedule = {tile_m = 4 : i64, tile_n = 32 : i64}
// AVX2: kiln.schedule = {tile_m = 4 : i64, tile_n = 16 : i64}
func.func @linear_tiles(%x: tensor<?x8xf32>) -> tensor<?x10xf32> {
  %w = kiln.param "w" : tensor<256x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<256x8xf32>) -> tensor<?x256xf32>
  %w2 = kiln.param "w2" : tensor<10x256xf32>
  %y = kiln.linear %h, %w2 : (tensor<?x256xf32>, tensor<10x256xf32>) -> tensor<?x10xf32>
  return %y : tensor<?x10xf32>
}

// -----

// Attention gets a query block; row-wise ops get rows per task; parameters get nothing.
// CHECK-LABEL: func.func @others
// CHECK-NOT: kiln.param {{.*}}kiln.schedule
// CHECK: kiln.attention {{.*}}kiln.schedule = {q_block = 8 : i64}
// CHECK: kiln.softmax {{.*}}kiln.schedule = {rows_per_task = 128 : i64}
func.func @others(%q: tensor<4x?x32xf32>) -> tensor<4x?x32xf32> {
  %a = kiln.attention %q, %q, %q {mask = "causal", scale = 0.17677 : f32} : (tensor<4x?x32xf32>, tensor<4x?x32xf32>, tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  %s = kiln.softmax %a : (tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  return %s : tensor<4x?x32xf32>
}
