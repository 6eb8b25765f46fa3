// RUN: kiln-opt %s --kiln-differentiate --kiln-reverse-layers --verify-diagnostics

// A layer whose glue has no concat of its halves: an error at its first op.
module attributes {kiln.seq_bounds = array<i64: 8>, kiln.seq_names = ["L"]} {
  func.func @broken(%x: tensor<?x4xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>},
                    %t: tensor<?xi32> {kiln.name = "t", kiln.syms = array<i64: 0>}) -> (tensor<1xf32> {kiln.name = "loss"})
      attributes {kiln.differentiate} {
    // expected-error @+1 {{kiln-reverse-layers: reversible layer 0 has no concat of its two halves}}
    %x1 = kiln.slice %x {axis = 1 : i64, offset = 0 : i64, kiln.reversible = array<i64: 0, 0>} : (tensor<?x4xf32>) -> tensor<?x2xf32>
    %x2 = kiln.slice %x {axis = 1 : i64, offset = 2 : i64, kiln.reversible = array<i64: 0, 0>} : (tensor<?x4xf32>) -> tensor<?x2xf32>
    %wf = kiln.param "f0" {kiln.reversible = array<i64: 0, 1>} : tensor<2x2xf32>
    %af = kiln.linear %x2, %wf {kiln.reversible = array<i64: 0, 1>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %y1 = kiln.add %x1, %af {kiln.reversible = array<i64: 0, 0>} : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %wo = kiln.param "wo" : tensor<5x2xf32>
    %logits = kiln.linear %y1, %wo : (tensor<?x2xf32>, tensor<5x2xf32>) -> tensor<?x5xf32>
    %loss = kiln.cross_entropy %logits, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
    return %loss : tensor<1xf32>
  }
}
