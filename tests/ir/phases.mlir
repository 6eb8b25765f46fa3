// The phases as kiln-opt runs them (kiln-opt --kiln-phase-<phase>, the pass lists kilnc runs).
// RUN: kiln-opt %s --split-input-file --kiln-phase-fused | FileCheck %s --check-prefix=FUSED
// RUN: kiln-opt %s --split-input-file --kiln-phase-fused --kiln-phase-tiled | FileCheck %s --check-prefix=TILED
// RUN: kiln-opt %s --split-input-file --kiln-phase-fused --kiln-phase-tiled="ffn-chunk=-1" | FileCheck %s --check-prefix=NOCHUNK
// RUN: kiln-opt %s --split-input-file --kiln-phase-fused --kiln-phase-tiled --kiln-phase-scheduled --kiln-phase-kernels | FileCheck %s --check-prefix=KERNELS

// Attention as the DSL writes it from separate ops (heads split by reshape and transpose, the
// scaled scores, the additive causal mask, softmax, P·V) fuses into one kiln.attention.
// FUSED-LABEL: func.func @attention_from_ops
// FUSED: kiln.attention {{.*}}{mask = #kiln.mask<causal>, scale = 0.176776692 : f32}
// FUSED-NOT: kiln.softmax
// FUSED-NOT: kiln.batch_matmul
// KERNELS-LABEL: func.func @attention_from_ops
// KERNELS: kiln.attention {{.*}}kiln.kernel = "kiln_attention_{{[0-9a-f]+}}"
// KERNELS-SAME: kiln.schedule = #kiln.schedule<vec = 16, parallel = 1, engine = online_block, q_block = 64, k_block = 128>
module attributes {kiln.seq_bounds = array<i64: 64>, kiln.seq_names = ["L"]} {
func.func @attention_from_ops(%q: tensor<2x?x32xf32> {kiln.name = "q", kiln.syms = array<i64: -1, 0, -1>},
                              %k: tensor<2x?x32xf32> {kiln.name = "k", kiln.syms = array<i64: -1, 0, -1>},
                              %v: tensor<2x?x32xf32> {kiln.name = "v", kiln.syms = array<i64: -1, 0, -1>}) -> (tensor<2x?x32xf32> {kiln.name = "o"}) {
  %s = kiln.batch_matmul %q, %k {transpose_b = true} : (tensor<2x?x32xf32>, tensor<2x?x32xf32>) -> tensor<2x?x?xf32>
  %t = kiln.scale %s {factor = 0.176776692 : f32} : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %m = kiln.mask %t  : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %u = kiln.add %t, %m : (tensor<2x?x?xf32>, tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %p = kiln.softmax %u : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %o = kiln.batch_matmul %p, %v : (tensor<2x?x?xf32>, tensor<2x?x32xf32>) -> tensor<2x?x32xf32>
  return %o : tensor<2x?x32xf32>
}
}

// -----

// linear, GELU, linear, residual add as the DSL writes them: GELU folds into the first linear
// (fused), the chain becomes one kiln.ffn (tiled) with its chunk, its weights kept in panels
// (W1's 200 columns in 4 panels of 64, the last holding 8), unless chunking is off
// (--ffn-chunk off).
// FUSED-LABEL: func.func @ffn
// FUSED: kiln.linear {{.*}}activation = #kiln.activation<gelu_tanh>
// FUSED-NOT: kiln.gelu
// TILED-LABEL: func.func @ffn
// TILED: kiln.param "w1" {panel_cols = 200 : i64} : tensor<4x48x64xf32>
// TILED: kiln.ffn {{.*}}activation = #kiln.activation<gelu_tanh>, kiln.schedule = #kiln.schedule<tile_m = 6, tile_n = 48, pack = at_load, hidden_vec = 16, hidden_tile_n = 64, chunk = 384, gemm = register_block>, layout1 = #kiln.weight_layout<panels>, layout2 = #kiln.weight_layout<panels>
// TILED-NOT: kiln.linear
// NOCHUNK-LABEL: func.func @ffn
// NOCHUNK-NOT: kiln.ffn
// NOCHUNK: kiln.linear {{.*}}activation = #kiln.activation<gelu_tanh>
// NOCHUNK: kiln.linear
// KERNELS-LABEL: func.func @ffn
// KERNELS: kiln.ffn {{.*}}kiln.kernel_spec = "ffn;act=gelu_tanh;layout1=panels;layout2=panels;s.chunk=384;
module attributes {kiln.seq_bounds = array<i64: 128>, kiln.seq_names = ["L"]} {
func.func @ffn(%x: tensor<?x48xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x48xf32> {kiln.name = "y"}) {
  %w1 = kiln.param "w1" : tensor<48x200xf32>
  %b1 = kiln.param "b1" : tensor<200xf32>
  %w2 = kiln.param "w2" : tensor<200x48xf32>
  %b2 = kiln.param "b2" : tensor<48xf32>
  %h = kiln.linear %x, %w1, %b1 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x48xf32>, tensor<48x200xf32>, tensor<200xf32>) -> tensor<?x200xf32>
  %a = kiln.gelu %h {approximate = #kiln.gelu<tanh>} : (tensor<?x200xf32>) -> tensor<?x200xf32>
  %y = kiln.linear %a, %w2, %b2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x200xf32>, tensor<200x48xf32>, tensor<48xf32>) -> tensor<?x48xf32>
  %r = kiln.add %x, %y : (tensor<?x48xf32>, tensor<?x48xf32>) -> tensor<?x48xf32>
  return %r : tensor<?x48xf32>
}
}

// -----

// SiLU: a standalone op's kernel (one of the activation kernels), folded into a linear's
// epilogue and into a chunked FFN's first GEMM, as GELU is.
// FUSED-LABEL: func.func @silu
// FUSED: kiln.silu %arg0
// FUSED: kiln.linear {{.*}}activation = #kiln.activation<silu>
// FUSED-NOT: kiln.silu
// TILED-LABEL: func.func @silu
// TILED: kiln.ffn {{.*}}activation = #kiln.activation<silu>
// KERNELS-LABEL: func.func @silu
// KERNELS: kiln.silu {{.*}}kiln.kernel_spec = "silu;s.parallel=1;s.rows_per_task=85;s.vec=16|?x48:f32->?x48:f32"
// KERNELS: kiln.ffn {{.*}}kiln.kernel_spec = "ffn;act=silu;
module attributes {kiln.seq_bounds = array<i64: 128>, kiln.seq_names = ["L"]} {
func.func @silu(%x: tensor<?x48xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x48xf32> {kiln.name = "s"}, tensor<?x48xf32> {kiln.name = "y"}) {
  %s = kiln.silu %x : (tensor<?x48xf32>) -> tensor<?x48xf32>
  %w1 = kiln.param "w1" : tensor<48x200xf32>
  %b1 = kiln.param "b1" : tensor<200xf32>
  %w2 = kiln.param "w2" : tensor<200x48xf32>
  %b2 = kiln.param "b2" : tensor<48xf32>
  %h = kiln.linear %x, %w1, %b1 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x48xf32>, tensor<48x200xf32>, tensor<200xf32>) -> tensor<?x200xf32>
  %a = kiln.silu %h : (tensor<?x200xf32>) -> tensor<?x200xf32>
  %y = kiln.linear %a, %w2, %b2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x200xf32>, tensor<200x48xf32>, tensor<48xf32>) -> tensor<?x48xf32>
  %r = kiln.add %x, %y : (tensor<?x48xf32>, tensor<?x48xf32>) -> tensor<?x48xf32>
  return %s, %r : tensor<?x48xf32>, tensor<?x48xf32>
}
}
