module attributes {kiln.seq_names = ["L"], kiln.seq_bounds = array<i64: 64>} {
  func.func @ut(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "hidden"}, tensor<?xf32> {kiln.name = "ponder"}, tensor<?xi32> {kiln.name = "steps"}) {
    %w = kiln.param "halt.weight" : tensor<16xf32>
    %b = kiln.param "halt.bias" {init = #kiln.init<ones>} : tensor<1xf32>
    %h, %p, %n, %it = kiln.recurrent %x, %w, %b {max_steps = 4 : i64, threshold = 0.99 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
    ^bb0(%s: tensor<?x16xf32>):
      %w1 = kiln.param "w1" : tensor<16x16xf32>
      %y = kiln.linear %s, %w1 : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
      %r = kiln.relu %y : (tensor<?x16xf32>) -> tensor<?x16xf32>
      kiln.yield %r : tensor<?x16xf32>
    }
    return %h, %p, %n : tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>
  }
}
