// RUN: kiln-opt %s --kiln-plan-buffers --split-input-file --verify-diagnostics

// Halide's extents and strides are 32-bit: a tensor of 2^31 or more elements at the bounds is
// rejected at its op (1048576 x 4096 = 2^32), not truncated when the views are built.
module attributes {kiln.seq_bounds = array<i64: 1048576>, kiln.seq_names = ["L"]} {
  func.func @forward(%x: tensor<?x64xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x4096xf32> {kiln.name = "y"}) {
    %w = kiln.param "w" : tensor<4096x64xf32>
    // expected-error @+1 {{expected fewer than 2^31 elements per tensor (Halide's 32-bit extents and strides), but 'tensor<?x4096xf32>' has 4.295e+09 at the sequence-length bounds}}
    %h = kiln.linear %x, %w : (tensor<?x64xf32>, tensor<4096x64xf32>) -> tensor<?x4096xf32>
    return %h : tensor<?x4096xf32>
  }
}

// -----

// An input is checked too.
module attributes {kiln.seq_bounds = array<i64: 16777216>, kiln.seq_names = ["L"]} {
  // expected-error @+1 {{'tensor<?x256xf32>' has 4.295e+09 at the sequence-length bounds}}
  func.func @forward(%x: tensor<?x256xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x4xf32> {kiln.name = "y"}) {
    %w = kiln.param "w" : tensor<4x256xf32>
    %h = kiln.linear %x, %w : (tensor<?x256xf32>, tensor<4x256xf32>) -> tensor<?x4xf32>
    return %h : tensor<?x4xf32>
  }
}
