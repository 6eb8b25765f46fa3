module attributes {kiln.seq_bounds = array<i64: 128>, kiln.seq_names = ["L"]} {
  func.func @forward(%x: tensor<?x48xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x48xf32> {kiln.name = "y"}) {
    %s = kiln.silu %x : (tensor<?x48xf32>) -> tensor<?x48xf32>
    %r = kiln.relu %s : (tensor<?x48xf32>) -> tensor<?x48xf32>
    return %r : tensor<?x48xf32>
  }
}
