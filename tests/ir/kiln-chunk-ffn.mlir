// RUN: kiln-opt %s --kiln-chunk-ffn --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-chunk-ffn=chunk-rows=40 --split-input-file | FileCheck %s --check-prefix=ROWS

// linear(+gelu) -> linear -> residual add becomes one kiln.ffn with the residual; for d_ff 512
// the default chunk (the longest whose intermediate fits in 4 MiB, in multiples of 48 rows, at
// most 384) is 384 rows.
// CHECK-LABEL: func.func @with_residual
// CHECK: %[[F:.*]] = kiln.ffn %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %arg0 {activation = #kiln.activation<gelu_tanh>, kiln.schedule = #kiln.schedule<chunk = 384>, layout1 = #kiln.weight_layout<in_out>, layout2 = #kiln.weight_layout<in_out>}
// CHECK-NOT: kiln.linear
// CHECK-NOT: kiln.add
// CHECK: return %[[F]]
// ROWS-LABEL: func.func @with_residual
// ROWS: kiln.ffn {{.*}}kiln.schedule = #kiln.schedule<chunk = 40>
func.func @with_residual(%x: tensor<?x128xf32>) -> tensor<?x128xf32> {
  %w1 = kiln.param "w1" : tensor<128x512xf32>
  %b1 = kiln.param "b1" : tensor<512xf32>
  %w2 = kiln.param "w2" : tensor<512x128xf32>
  %b2 = kiln.param "b2" : tensor<128xf32>
  %h = kiln.linear %x, %w1, %b1 {weight_layout = #kiln.weight_layout<in_out>, activation = #kiln.activation<gelu_tanh>} : (tensor<?x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
  %y = kiln.linear %h, %w2, %b2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x512xf32>, tensor<512x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %r = kiln.add %x, %y : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  return %r : tensor<?x128xf32>
}

// -----

// Without a residual add, the FFN alone is fused; a wide d_ff (3072) gets chunks of 336 rows
// (7 x 48: 4 MiB / (4 B x 3072) is 341).
// CHECK-LABEL: func.func @no_residual
// CHECK: kiln.ffn {{.*}}activation = #kiln.activation<relu>, kiln.schedule = #kiln.schedule<chunk = 336>, layout1 = #kiln.weight_layout<out_in>, layout2 = #kiln.weight_layout<out_in>} : (tensor<?x64xf32>, tensor<3072x64xf32>, tensor<3072xf32>, tensor<64x3072xf32>, tensor<64xf32>) -> tensor<?x64xf32>
func.func @no_residual(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w1 = kiln.param "w1" : tensor<3072x64xf32>
  %b1 = kiln.param "b1" : tensor<3072xf32>
  %w2 = kiln.param "w2" : tensor<64x3072xf32>
  %b2 = kiln.param "b2" : tensor<64xf32>
  %h = kiln.linear %x, %w1, %b1 {activation = #kiln.activation<relu>} : (tensor<?x64xf32>, tensor<3072x64xf32>, tensor<3072xf32>) -> tensor<?x3072xf32>
  %y = kiln.linear %h, %w2, %b2 : (tensor<?x3072xf32>, tensor<64x3072xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// The intermediate is also returned, or the first linear has no activation: left alone.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: kiln.ffn
func.func @left_alone(%x: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x16xf32>, tensor<?x8xf32>) {
  %w1 = kiln.param "w1" : tensor<16x8xf32>
  %b1 = kiln.param "b1" : tensor<16xf32>
  %w2 = kiln.param "w2" : tensor<8x16xf32>
  %b2 = kiln.param "b2" : tensor<8xf32>
  %h = kiln.linear %x, %w1, %b1 {activation = #kiln.activation<relu>} : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %y = kiln.linear %h, %w2, %b2 : (tensor<?x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %g = kiln.linear %x, %w1, %b1 : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %z = kiln.linear %g, %w2, %b2 : (tensor<?x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %y, %h, %z : tensor<?x8xf32>, tensor<?x16xf32>, tensor<?x8xf32>
}
