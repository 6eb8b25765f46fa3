// RUN: kiln-opt %s --split-input-file --verify-diagnostics
// Op variants and gradient selectors are typed enums (KilnEnums.td): a value outside an enum is
// a parse error naming the enum and its values, and a string where an enum belongs (the IR of
// before the enums) fails the attribute's constraint.

func.func @linear_layout(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %w = kiln.param "w" : tensor<16x8xf32>
  // expected-error @+2 {{expected ::kiln::WeightLayoutKind to be one of: out_in, in_out, panels}}
  // expected-error @+1 {{failed to parse Kiln_WeightLayoutAttr parameter 'value' which is to be a `::kiln::WeightLayoutKind`}}
  %h = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<sideways>} : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}

// -----

func.func @linear_layout_string(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %w = kiln.param "w" : tensor<16x8xf32>
  // expected-error @+1 {{attribute 'weight_layout' failed to satisfy constraint: how a GEMM weight is stored}}
  %h = kiln.linear %x, %w {weight_layout = "in_out"} : (tensor<?x8xf32>, tensor<8x16xf32>) -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}

// -----

func.func @attention_mask(%q: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> {
  // expected-error @+2 {{expected ::kiln::MaskKind to be one of: none, causal, window, strided, fixed, layout}}
  // expected-error @+1 {{failed to parse Kiln_MaskAttr parameter 'value' which is to be a `::kiln::MaskKind`}}
  %o = kiln.attention %q, %q, %q {mask = #kiln.mask<diagonal>, scale = 1.0 : f32} : (tensor<4x?x8xf32>, tensor<4x?x8xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  return %o : tensor<4x?x8xf32>
}

// -----

func.func @attention_part(%q: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> {
  // expected-error @+2 {{expected ::kiln::PatternPart to be one of: union, local, global}}
  // expected-error @+1 {{failed to parse Kiln_PatternPartAttr parameter 'value' which is to be a `::kiln::PatternPart`}}
  %o = kiln.attention %q, %q, %q {mask = #kiln.mask<strided>, pattern_size = 8 : i64, part = #kiln.part<both>, scale = 1.0 : f32} : (tensor<4x?x8xf32>, tensor<4x?x8xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  return %o : tensor<4x?x8xf32>
}

// -----

func.func @act_output_field(%c: tensor<?x36xf32>) -> tensor<?xf32> {
  // expected-error @+2 {{expected ::kiln::ActField to be one of: hidden, ponder, steps, iterations}}
  // expected-error @+1 {{failed to parse Kiln_ActFieldAttr parameter 'value' which is to be a `::kiln::ActField`}}
  %p = kiln.act_output %c {field = #kiln.act_field<halting>} : (tensor<?x36xf32>) -> tensor<?xf32>
  return %p : tensor<?xf32>
}

// -----

func.func @act_update_grad_wrt(%c: tensor<?x36xf32>, %x: tensor<?x16xf32>, %w: tensor<16xf32>, %b: tensor<1xf32>) -> tensor<?x16xf32> {
  // expected-error @+2 {{expected ::kiln::ActGradWrt to be one of: carry, x, y, halt_weight, halt_bias}}
  // expected-error @+1 {{failed to parse Kiln_ActGradWrtAttr parameter 'value' which is to be a `::kiln::ActGradWrt`}}
  %g = kiln.act_update_grad %c, %c, %x, %x, %w, %b, %c {wrt = #kiln.act_wrt<halt>} : (tensor<?x36xf32>, tensor<?x36xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>, tensor<?x36xf32>) -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}

// -----

func.func @depthwise_conv_grad_wrt(%x: tensor<?x16xf32>, %w: tensor<3x16xf32>) -> tensor<16xf32> {
  // expected-error @+2 {{expected ::kiln::ConvGradWrt to be one of: x, weight}}
  // expected-error @+1 {{failed to parse Kiln_ConvGradWrtAttr parameter 'value' which is to be a `::kiln::ConvGradWrt`}}
  %g = kiln.depthwise_conv_grad %x, %w, %x {wrt = #kiln.conv_wrt<bias>} : (tensor<?x16xf32>, tensor<3x16xf32>, tensor<?x16xf32>) -> tensor<16xf32>
  return %g : tensor<16xf32>
}

// -----

// A string where the module's precision belongs.
// expected-error @+1 {{expected kiln.precision to be a #kiln.precision<f32> or #kiln.precision<bf16>, got "bf16"}}
module attributes {kiln.precision = "bf16"} {
}
