// RUN: kiln-opt %s --kiln-loop-sequences --split-input-file --verify-diagnostics

// A state kept per sequence names a symbol that is no batch (L, a length).
module attributes {kiln.seq_names = ["L", "B", "B*L"], kiln.seq_bounds = array<i64: 8, 4, 32>,
                   kiln.seq_factors = array<i64: -1, -1, -1, -1, 1, 0>} {
  func.func @f() {
    // expected-error @+1 {{batch = 0 names no batch of the module's kiln.seq_factors}}
    %s = kiln.state "cache" {batch = 0 : i64} : tensor<1x8x8xf32>
    return
  }
}

// -----

// A model without a batch.
module attributes {kiln.seq_names = ["L"], kiln.seq_bounds = array<i64: 8>} {
  func.func @f() {
    // expected-error @+1 {{batch = 1 names no batch}}
    %s = kiln.state "cache" {batch = 1 : i64} : tensor<1x8x8xf32>
    return
  }
}
