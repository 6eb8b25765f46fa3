// A two-layer MLP written directly in the kiln dialect, compiled end to end by kilnc.
module attributes {kiln.seq_names = ["L"], kiln.seq_bounds = array<i64: 32>} {
  func.func @forward(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>})
      -> (tensor<?x8xf32> {kiln.name = "y"}) {
    %w1 = kiln.param "fc1.w" : tensor<32x16xf32>
    %b1 = kiln.param "fc1.b" : tensor<32xf32>
    %w2 = kiln.param "fc2.w" : tensor<32x8xf32>
    %h = kiln.linear %x, %w1, %b1 : (tensor<?x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x32xf32>
    %r = kiln.relu %h : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %y = kiln.linear %r, %w2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
    return %y : tensor<?x8xf32>
  }
}
