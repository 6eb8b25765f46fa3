// kilnc input without kiln.seq_names / kiln.seq_bounds: rejected with a message, exit 1.
module {
  func.func @forward(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "y"}) {
    %r = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    return %r : tensor<?x16xf32>
  }
}
