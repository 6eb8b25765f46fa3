module @universal attributes {kiln.seq_bounds = array<i64: 16>, kiln.seq_names = ["L"]} {
  func.func @forward(%arg0: tensor<?xi32> {kiln.name = "tokens", kiln.syms = array<i64: 0>, kiln.vocab = 32 : i64}) -> (tensor<?x16xf32> {kiln.name = "hidden"}, tensor<?xf32> {kiln.name = "ponder"}, tensor<?xi32> {kiln.name = "steps"}) {
    %0 = kiln.param "tok_embed.weight" {init_scale = 2.500000e-01 : f32} : tensor<32x16xf32>
    %1 = kiln.embedding %0, %arg0 : (tensor<32x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %2 = kiln.scale %1 {factor = 4.000000e+00 : f32} : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %3 = kiln.param "ut.halt.weight" : tensor<16xf32>
    %4 = kiln.param "ut.halt.bias" {init = #kiln.init<ones>} : tensor<1xf32>
    %hidden, %ponder, %steps, %iterations = kiln.recurrent %2, %3, %4 {max_steps = 3 : i64, threshold = 9.900000e-01 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
    ^bb0(%arg1: tensor<?x16xf32>):

    }
    return %hidden, %ponder, %steps : tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>
  }
}
