// RUN: kiln-opt %s --kiln-prepack-weights | FileCheck %s
// RUN: kiln-opt %s --kiln-prepack-weights="vector-width=8" | FileCheck %s --check-prefix=AVX2
// RUN: kiln-opt %s --kiln-prepack-weights="gpu=true" | FileCheck %s --check-prefix=GPU

// An [out, in] weight read only by linears (in two entries) and by an FFN is kept transposed,
// then, on a CPU target, in panels of the register block's columns (16 in, 32 out: one panel of
// 32 columns; w1's 64 columns: one panel with 16-lane vectors, two of 32 with 8-lane ones), its
// users switched to the panels layout; one already in_out is kept in panels too (not
// transposed). A table also read by an embedding (an output head tied to the input embedding,
// [64, 16]) becomes the head's [16, 64] weight in panels, its embedding reading the panels. A
// GPU target keeps the transposes only, and the tied table as it is.
// CHECK-LABEL: func.func @a
// CHECK: %[[W:.*]] = kiln.param "fc.weight" {panel_cols = 32 : i64, transposed} : tensor<1x16x32xf32>
// CHECK: kiln.linear %arg0, %[[W]] {weight_layout = #kiln.weight_layout<panels>} : (tensor<?x16xf32>, tensor<1x16x32xf32>) -> tensor<?x32xf32>
// CHECK: %[[E:.*]] = kiln.param "wte" {panel_cols = 64 : i64, transposed} : tensor<1x16x64xf32>
// CHECK: kiln.embedding %[[E]], %arg1 {table_layout = #kiln.table_layout<panels>} : (tensor<1x16x64xf32>, tensor<?xi32>) -> tensor<?x16xf32>
// CHECK: kiln.linear %{{.*}}, %[[E]] {weight_layout = #kiln.weight_layout<panels>} : (tensor<?x16xf32>, tensor<1x16x64xf32>) -> tensor<?x64xf32>
// CHECK: kiln.param "w1" {panel_cols = 64 : i64, transposed} : tensor<1x16x64xf32>
// CHECK: kiln.param "w2" {panel_cols = 16 : i64, transposed} : tensor<1x64x16xf32>
// CHECK: kiln.ffn {{.*}}layout1 = #kiln.weight_layout<panels>, layout2 = #kiln.weight_layout<panels>
// CHECK: kiln.param "io" {panel_cols = 16 : i64} : tensor<1x16x16xf32>
// CHECK-LABEL: func.func @b
// CHECK: kiln.param "fc.weight" {panel_cols = 32 : i64, transposed} : tensor<1x16x32xf32>
// AVX2: kiln.param "fc.weight" {panel_cols = 32 : i64, transposed} : tensor<1x16x32xf32>
// AVX2: kiln.param "w1" {panel_cols = 64 : i64, transposed} : tensor<2x16x32xf32>
// GPU-LABEL: func.func @a
// GPU: %[[W:.*]] = kiln.param "fc.weight" {transposed} : tensor<16x32xf32>
// GPU: kiln.linear %arg0, %[[W]] {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32>
// GPU: kiln.param "wte" : tensor<64x16xf32>
// GPU: kiln.param "w1" {transposed} : tensor<16x64xf32>
// GPU: kiln.ffn {{.*}}layout1 = #kiln.weight_layout<in_out>, layout2 = #kiln.weight_layout<in_out>
// GPU: kiln.param "io" : tensor<16x16xf32>
func.func @a(%x: tensor<?x16xf32>, %ids: tensor<?xi32>) -> (tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %w = kiln.param "fc.weight" : tensor<32x16xf32>
  %y = kiln.linear %x, %w : (tensor<?x16xf32>, tensor<32x16xf32>) -> tensor<?x32xf32>
  %e = kiln.param "wte" : tensor<64x16xf32>
  %h = kiln.embedding %e, %ids : (tensor<64x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  %logits = kiln.linear %h, %e : (tensor<?x16xf32>, tensor<64x16xf32>) -> tensor<?x64xf32>
  %w1 = kiln.param "w1" : tensor<64x16xf32>
  %b1 = kiln.param "b1" : tensor<64xf32>
  %w2 = kiln.param "w2" : tensor<16x64xf32>
  %b2 = kiln.param "b2" : tensor<16xf32>
  %f = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<out_in>, layout2 = #kiln.weight_layout<out_in>, activation = #kiln.activation<relu>, chunk = 32 : i64} : (tensor<?x16xf32>, tensor<64x16xf32>, tensor<64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %wi = kiln.param "io" : tensor<16x16xf32>
  %z = kiln.linear %x, %wi {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
  return %y, %logits, %f, %z : tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}
func.func @b(%x: tensor<?x16xf32>) -> tensor<?x32xf32> {
  %w = kiln.param "fc.weight" : tensor<32x16xf32>
  %y = kiln.linear %x, %w : (tensor<?x16xf32>, tensor<32x16xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
