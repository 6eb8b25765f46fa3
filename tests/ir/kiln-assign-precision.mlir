// RUN: kiln-opt %s --split-input-file --kiln-assign-precision=precision=bf16 | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-assign-precision | FileCheck %s --check-prefix=MODULE
// RUN: kiln-opt %s --split-input-file --kiln-assign-precision=precision=f32 | FileCheck %s --check-prefix=F32
// RUN: kiln-opt %s --split-input-file --kiln-assign-precision="precision=bf16 dot=true" | FileCheck %s --check-prefix=DOT
// RUN: kiln-opt %s --split-input-file --kiln-assign-precision="precision=bf16 cpu=true" | FileCheck %s --check-prefix=WEIGHTS
// RUN: not kiln-opt %s --split-input-file --kiln-assign-precision=precision=fp8 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: for the --precision option: Cannot find option named 'fp8'!

// bf16: the GEMMs' schedules say so, a decision already there is kept, other ops and weight
// gradients are left alone.
// CHECK-LABEL: func.func @gemms
// CHECK: kiln.linear {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// CHECK: kiln.matmul {{.*}}kiln.schedule = #kiln.schedule<tile_n = 64, precision = f32>
// CHECK: kiln.relu
// CHECK-NOT: precision
// CHECK: kiln.weight_grad
// CHECK-NOT: precision
// CHECK: return
// MODULE-LABEL: func.func @gemms
// MODULE-NOT: precision = bf16
// F32-NOT: precision = bf16
func.func @gemms(%x: tensor<?x16xf32>, %w: tensor<16x16xf32>, %g: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<16x16xf32>) {
  %y = kiln.linear %x, %w : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
  %z = kiln.matmul %y, %w {kiln.schedule = #kiln.schedule<tile_n = 64, precision = f32>} : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
  %r = kiln.relu %z : (tensor<?x16xf32>) -> tensor<?x16xf32>
  %dw = kiln.weight_grad %x, %g : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<16x16xf32>
  return %r, %dw : tensor<?x16xf32>, tensor<16x16xf32>
}

// -----

// The module's kiln.precision (the DSL's Model::set_precision) when the option is not given;
// the option overrides it.
// CHECK-LABEL: func.func @from_module
// CHECK: precision = bf16
// MODULE-LABEL: func.func @from_module
// MODULE: kiln.linear {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// F32-LABEL: func.func @from_module
// F32-NOT: precision
module attributes {kiln.precision = #kiln.precision<bf16>} {
  func.func @from_module(%x: tensor<?x16xf32>, %w: tensor<16x16xf32>) -> tensor<?x16xf32> {
    %y = kiln.linear %x, %w : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
    return %y : tensor<?x16xf32>
  }
}

// -----

// With dot (AVX-512 BF16): a register-block linear or matmul whose tile_n is whole 16-lane
// vectors and that sums K in one piece uses vdpbf16ps (bf16_dot); a streaming one (decode), one
// with K chunks, a 24-column tile and a batched product keep the rounding (bf16); so does an FFN
// whose hidden tile is 24 columns, not one whose tiles are 64.
// Without dot, all of them are bf16.
// DOT-LABEL: func.func @dot
// DOT: kiln.linear {{.*}}gemm = register_block, precision = bf16_dot>
// DOT: kiln.linear {{.*}}gemm = stream, precision = bf16>
// DOT: kiln.matmul {{.*}}k_chunk = 2048, gemm = register_block, precision = bf16>
// DOT: kiln.matmul {{.*}}tile_n = 24, {{.*}}gemm = register_block, precision = bf16>
// DOT: kiln.matmul {{.*}}tile_n = 64, {{.*}}gemm = register_block, precision = bf16_dot>
// DOT: kiln.batch_matmul {{.*}}precision = bf16>
// CHECK-LABEL: func.func @dot
// CHECK-NOT: bf16_dot
// CHECK: return
func.func @dot(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>, %b: tensor<2x?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<2x?x?xf32>) {
  %a = kiln.linear %x, %w {kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 64, tile_rows = 48, gemm = register_block>} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %s = kiln.linear %x, %w {kiln.schedule = #kiln.schedule<tile_m = 1, tile_n = 64, gemm = stream>} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %c = kiln.matmul %x, %w {kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 64, tile_rows = 48, k_chunk = 2048, gemm = register_block>} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %n = kiln.matmul %x, %w {kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 24, tile_rows = 48, gemm = register_block>} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %m = kiln.matmul %x, %w {kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 64, tile_rows = 48, gemm = register_block>} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %bb = kiln.batch_matmul %b, %b {transpose_b = true, kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 64, tile_rows = 48, gemm = register_block>} : (tensor<2x?x64xf32>, tensor<2x?x64xf32>) -> tensor<2x?x?xf32>
  return %a, %s, %c, %n, %m, %bb : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<2x?x?xf32>
}

// -----

// DOT-LABEL: func.func @ffns
// DOT: kiln.ffn {{.*}}hidden_tile_n = 64, {{.*}}precision = bf16_dot>
// DOT: kiln.ffn {{.*}}hidden_tile_n = 24, {{.*}}precision = bf16>
func.func @ffns(%x: tensor<?x64xf32>, %w1: tensor<64x256xf32>, %b1: tensor<256xf32>, %w2: tensor<256x64xf32>, %b2: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %y = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<in_out>, layout2 = #kiln.weight_layout<in_out>, activation = #kiln.activation<relu>, kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 64, pack = per_call, hidden_vec = 16, hidden_tile_n = 64, chunk = 32, gemm = register_block>}
      : (tensor<?x64xf32>, tensor<64x256xf32>, tensor<256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %z = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<in_out>, layout2 = #kiln.weight_layout<in_out>, activation = #kiln.activation<relu>, kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 64, pack = per_call, hidden_vec = 8, hidden_tile_n = 24, chunk = 32, gemm = register_block>}
      : (tensor<?x64xf32>, tensor<64x256xf32>, tensor<256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  return %y, %z : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// With cpu (CPU targets), a parameter read only in panels by bf16 GEMMs (a linear's weight,
// an FFN's W1 and W2) or as an embedding's table tied to such a head is kept in bf16; one also
// read another way (%other feeds a relu) and one not in panels stay f32. Without weights,
// nothing changes type, and attention keeps f32.
// WEIGHTS-LABEL: func.func @weights
// WEIGHTS: kiln.param "fc.weight" {panel_cols = 32 : i64, transposed} : tensor<1x16x32xbf16>
// WEIGHTS: kiln.param "wte" {panel_cols = 64 : i64, transposed} : tensor<1x16x64xbf16>
// WEIGHTS: kiln.embedding {{.*}} : (tensor<1x16x64xbf16>, tensor<?xi32>) -> tensor<?x16xf32>
// WEIGHTS: kiln.param "w1" {panel_cols = 32 : i64} : tensor<1x16x32xbf16>
// WEIGHTS: kiln.param "w2" {panel_cols = 16 : i64} : tensor<1x32x16xbf16>
// WEIGHTS: kiln.param "other" {panel_cols = 16 : i64} : tensor<1x16x16xf32>
// WEIGHTS: kiln.param "plain" : tensor<16x16xf32>
// WEIGHTS: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// CHECK-LABEL: func.func @weights
// CHECK-NOT: xbf16>
// CHECK: return
func.func @weights(%x: tensor<?x16xf32>, %ids: tensor<?xi32>) -> (tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %w = kiln.param "fc.weight" {panel_cols = 32 : i64, transposed} : tensor<1x16x32xf32>
  %y = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<panels>} : (tensor<?x16xf32>, tensor<1x16x32xf32>) -> tensor<?x32xf32>
  %e = kiln.param "wte" {panel_cols = 64 : i64, transposed} : tensor<1x16x64xf32>
  %h = kiln.embedding %e, %ids {table_layout = #kiln.table_layout<panels>} : (tensor<1x16x64xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  %l = kiln.linear %h, %e {weight_layout = #kiln.weight_layout<panels>} : (tensor<?x16xf32>, tensor<1x16x64xf32>) -> tensor<?x64xf32>
  %w1 = kiln.param "w1" {panel_cols = 32 : i64} : tensor<1x16x32xf32>
  %b1 = kiln.param "b1" : tensor<32xf32>
  %w2 = kiln.param "w2" {panel_cols = 16 : i64} : tensor<1x32x16xf32>
  %b2 = kiln.param "b2" : tensor<16xf32>
  %f = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<panels>, layout2 = #kiln.weight_layout<panels>, activation = #kiln.activation<relu>} : (tensor<?x16xf32>, tensor<1x16x32xf32>, tensor<32xf32>, tensor<1x32x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %o = kiln.param "other" {panel_cols = 16 : i64} : tensor<1x16x16xf32>
  %g = kiln.linear %x, %o {weight_layout = #kiln.weight_layout<panels>} : (tensor<?x16xf32>, tensor<1x16x16xf32>) -> tensor<?x16xf32>
  %os = kiln.relu %o : (tensor<1x16x16xf32>) -> tensor<1x16x16xf32>
  %p = kiln.param "plain" : tensor<16x16xf32>
  %q = kiln.linear %x, %p : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
  %h3 = kiln.reshape %q : (tensor<?x16xf32>) -> tensor<1x?x16xf32>
  %att = kiln.attention %h3, %h3, %h3 {mask = #kiln.mask<causal>, scale = 2.500000e-01 : f32} : (tensor<1x?x16xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>) -> tensor<1x?x16xf32>
  return %y, %l, %f, %g, %q : tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// A model with a training step (kiln.adamw_step) keeps f32 parameters (the optimizer's master
// weights); its attention rounds q, k and v like any on a CPU.
// WEIGHTS-LABEL: func.func @training
// WEIGHTS: kiln.param "fc.weight" {panel_cols = 32 : i64, transposed} : tensor<1x16x32xf32>
// WEIGHTS-NOT: xbf16>
// WEIGHTS: kiln.attention {{.*}}precision = bf16
func.func @training(%x: tensor<?x16xf32>, %dw: tensor<1x16x32xf32>) -> (tensor<?x32xf32>, tensor<1x?x16xf32>) {
  %w = kiln.param "fc.weight" {panel_cols = 32 : i64, transposed} : tensor<1x16x32xf32>
  %y = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<panels>} : (tensor<?x16xf32>, tensor<1x16x32xf32>) -> tensor<?x32xf32>
  %h3 = kiln.reshape %x : (tensor<?x16xf32>) -> tensor<1x?x16xf32>
  %att = kiln.attention %h3, %h3, %h3 {mask = #kiln.mask<causal>, scale = 2.500000e-01 : f32} : (tensor<1x?x16xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>) -> tensor<1x?x16xf32>
  %p4 = kiln.param "v" : tensor<4xf32>
  %s1 = kiln.param "s" : tensor<1xf32>
  %m4 = kiln.state "optimizer.m.v" : tensor<4xf32>
  %v4 = kiln.state "optimizer.v.v" : tensor<4xf32>
  %r = kiln.adamw_step %p4, %m4, %v4, %p4, %s1, %s1, %s1 {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32, clip_norm = 0.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4xf32>
  return %y, %att : tensor<?x32xf32>, tensor<1x?x16xf32>
}

// -----

// On a CPU, every attention engine rounds its operands: a block-sparse attention and its
// gradient, LSH's hashing, chunked attention and its gradient (the sort has no operands to
// round). Without cpu (a GPU target) none of them changes.
// WEIGHTS-LABEL: func.func @sparse_and_lsh
// WEIGHTS: kiln.attention {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>, mask = #kiln.mask<strided>
// WEIGHTS: kiln.attention_grad {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// WEIGHTS: kiln.lsh_hash {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// WEIGHTS: kiln.lsh_sort
// WEIGHTS-NOT: precision
// WEIGHTS: kiln.lsh_chunk_attention {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// WEIGHTS: kiln.lsh_chunk_attention_grad {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// CHECK-LABEL: func.func @sparse_and_lsh
// CHECK-NOT: precision
// CHECK: return
func.func @sparse_and_lsh(%q: tensor<2x?x16xf32>, %g: tensor<2x?x16xf32>, %rot: tensor<2x16x4xf32>) -> (tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>) {
  %o, %lse = kiln.attention %q, %q, %q {mask = #kiln.mask<strided>, pattern_size = 8 : i64, part = #kiln.part<union>, scale = 2.500000e-01 : f32} : (tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>) -> (tensor<2x?x16xf32>, tensor<2x?xf32>)
  %dq = kiln.attention_grad %q, %q, %q, %o, %g, %lse {mask = #kiln.mask<strided>, pattern_size = 8 : i64, part = #kiln.part<union>, scale = 2.500000e-01 : f32, wrt = #kiln.attention_wrt<query>} : (tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?xf32>) -> tensor<2x?x16xf32>
  %b = kiln.lsh_hash %q, %rot : (tensor<2x?x16xf32>, tensor<2x16x4xf32>) -> tensor<2x2x?xi32>
  %s = kiln.lsh_sort %b : (tensor<2x2x?xi32>) -> tensor<2x2x2x?xi32>
  %a = kiln.lsh_chunk_attention %q, %q, %b, %s {causal, chunk = 8 : i64, scale = 2.500000e-01 : f32} : (tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x2x?xi32>, tensor<2x2x2x?xi32>) -> tensor<2x?x16xf32>
  %da = kiln.lsh_chunk_attention_grad %q, %q, %b, %s, %a, %g {causal, chunk = 8 : i64, scale = 2.500000e-01 : f32, wrt = #kiln.lsh_wrt<qk>} : (tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x2x?xi32>, tensor<2x2x2x?xi32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>) -> tensor<2x?x16xf32>
  return %dq, %a, %da : tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>
}
