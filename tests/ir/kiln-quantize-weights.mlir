// RUN: kiln-opt %s --kiln-quantize-weights="format=q4_1" | FileCheck %s
// RUN: kiln-opt %s --kiln-quantize-weights="tensor-formats=wte=q8_0" | FileCheck %s --check-prefix=NAMED
// RUN: kiln-opt %s --kiln-quantize-weights="format=q8_0" --kiln-prepack-weights | FileCheck %s --check-prefix=PREPACK
// RUN: not kiln-opt %s --kiln-quantize-weights="tensor-formats=w1=q4_0" 2>&1 | FileCheck %s --check-prefix=FFN
// RUN: not kiln-opt %s --kiln-quantize-weights="tensor-formats=odd=q8_0" 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: not kiln-opt %s --kiln-quantize-weights="tensor-formats=wte=q9" 2>&1 | FileCheck %s --check-prefix=BADFMT
// RUN: not kiln-opt %s --kiln-quantize-weights="format=q8_0 gpu=true" 2>&1 | FileCheck %s --check-prefix=GPU
// RUN: not kiln-opt %s --kiln-quantize-weights="gpu=true tensor-formats=wte=q8_0" 2>&1 | FileCheck %s --check-prefix=GPU

// format: every eligible parameter (an [out, in] linear weight, an embedding's rows table, the
// head tied to it) becomes bytes [rows, in / 32, block bytes] with its users reading the
// format; the FFN's weights, a vector and a row of 48 (no whole blocks) stay f32.
// CHECK: %[[W:.*]] = kiln.param "fc.weight" {format = #kiln.weight_format<q4_1>} : tensor<32x2x20xi8>
// CHECK: kiln.linear %arg0, %[[W]] {weight_format = #kiln.weight_format<q4_1>} : (tensor<?x64xf32>, tensor<32x2x20xi8>) -> tensor<?x32xf32>
// CHECK: %[[E:.*]] = kiln.param "wte" {format = #kiln.weight_format<q4_1>} : tensor<100x2x20xi8>
// CHECK: kiln.embedding %[[E]], %arg1 {table_format = #kiln.weight_format<q4_1>} : (tensor<100x2x20xi8>, tensor<?xi32>) -> tensor<?x64xf32>
// CHECK: kiln.linear %{{.*}}, %[[E]] {weight_format = #kiln.weight_format<q4_1>} : (tensor<?x64xf32>, tensor<100x2x20xi8>) -> tensor<?x100xf32>
// CHECK: kiln.param "w1" : tensor<128x64xf32>
// CHECK: kiln.param "odd" : tensor<16x48xf32>
// NAMED: kiln.param "fc.weight" : tensor<32x64xf32>
// NAMED: kiln.param "wte" {format = #kiln.weight_format<q8_0>} : tensor<100x2x34xi8>
// The quantized parameters stay as they are when kiln-prepack-weights runs after; the others
// go to panels.
// PREPACK: kiln.param "fc.weight" {format = #kiln.weight_format<q8_0>} : tensor<32x2x34xi8>
// PREPACK: kiln.param "w1" {panel_cols = 128 : i64, transposed}
// FFN: error: parameter 'w1' is stored as q4_0 but cannot be kept so: it is used by kiln.ffn (quantized weights are read by linears and embeddings only)
// ODD: error: parameter 'odd' is stored as q8_0 but cannot be kept so: its rows of 48 are no whole number of blocks of 32
// BADFMT: error: kiln-quantize-weights: expected tensor-formats entries name=f32|q8_0|q4_0|q4_1, got 'wte=q9'
// GPU: error: quantized weights (--quantize, or a GGUF file's quantized tensors) run on CPU targets only (for now)
func.func @a(%x: tensor<?x64xf32>, %ids: tensor<?xi32>) -> (tensor<?x32xf32>, tensor<?x100xf32>, tensor<?x64xf32>, tensor<?x16xf32>) {
  %w = kiln.param "fc.weight" : tensor<32x64xf32>
  %y = kiln.linear %x, %w : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %e = kiln.param "wte" : tensor<100x64xf32>
  %h = kiln.embedding %e, %ids : (tensor<100x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  %logits = kiln.linear %h, %e : (tensor<?x64xf32>, tensor<100x64xf32>) -> tensor<?x100xf32>
  %w1 = kiln.param "w1" : tensor<128x64xf32>
  %b1 = kiln.param "b1" : tensor<128xf32>
  %w2 = kiln.param "w2" : tensor<64x128xf32>
  %b2 = kiln.param "b2" : tensor<64xf32>
  %f = kiln.ffn %x, %w1, %b1, %w2, %b2 {activation = #kiln.activation<relu>, layout1 = #kiln.weight_layout<out_in>, layout2 = #kiln.weight_layout<out_in>} : (tensor<?x64xf32>, tensor<128x64xf32>, tensor<128xf32>, tensor<64x128xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %o = kiln.param "odd" : tensor<16x48xf32>
  %z = kiln.slice %x {axis = 1 : i64, offset = 0 : i64} : (tensor<?x64xf32>) -> tensor<?x48xf32>
  %q = kiln.linear %z, %o : (tensor<?x48xf32>, tensor<16x48xf32>) -> tensor<?x16xf32>
  return %y, %logits, %f, %q : tensor<?x32xf32>, tensor<?x100xf32>, tensor<?x64xf32>, tensor<?x16xf32>
}
