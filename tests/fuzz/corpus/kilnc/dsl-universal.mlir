module @universal attributes {kiln.seq_bounds = array<i64: 16>, kiln.seq_names = ["L"]} {
  func.func @forward(%arg0: tensor<?xi32> {kiln.name = "tokens", kiln.syms = array<i64: 0>, kiln.vocab = 32 : i64}) -> (tensor<?x16xf32> {kiln.name = "hidden"}, tensor<?xf32> {kiln.name = "ponder"}, tensor<?xi32> {kiln.name = "steps"}) {
    %0 = kiln.param "tok_embed.weight" {init_scale = 2.500000e-01 : f32} : tensor<32x16xf32>
    %1 = kiln.embedding %0, %arg0 : (tensor<32x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %2 = kiln.scale %1 {factor = 4.000000e+00 : f32} : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %3 = kiln.param "ut.halt.weight" : tensor<16xf32>
    %4 = kiln.param "ut.halt.bias" {init = #kiln.init<ones>} : tensor<1xf32>
    %hidden, %ponder, %steps, %iterations = kiln.recurrent %2, %3, %4 {max_steps = 3 : i64, threshold = 9.900000e-01 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
    ^bb0(%arg1: tensor<?x16xf32>):
      %5 = kiln.param "ut.block.attn.q.weight" : tensor<16x16xf32>
      %6 = kiln.param "ut.block.attn.q.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
      %7 = kiln.linear %arg1, %5, %6 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
      %8 = kiln.param "ut.block.attn.k.weight" : tensor<16x16xf32>
      %9 = kiln.param "ut.block.attn.k.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
      %10 = kiln.linear %arg1, %8, %9 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
      %11 = kiln.param "ut.block.attn.v.weight" : tensor<16x16xf32>
      %12 = kiln.param "ut.block.attn.v.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
      %13 = kiln.linear %arg1, %11, %12 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
      %14 = kiln.reshape %13 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
      %15 = kiln.transpose %14 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
      %16 = kiln.reshape %10 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
      %17 = kiln.transpose %16 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
      %18 = kiln.reshape %7 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
      %19 = kiln.transpose %18 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
      %20 = kiln.attention %19, %17, %15 {scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
      %21 = kiln.transpose %20 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
      %22 = kiln.reshape %21 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
      %23 = kiln.param "ut.block.attn.out.weight" : tensor<16x16xf32>
      %24 = kiln.param "ut.block.attn.out.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
      %25 = kiln.linear %22, %23, %24 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
      %26 = kiln.add %arg1, %25 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
      %27 = kiln.param "ut.block.ln_1.weight" {init = #kiln.init<ones>} : tensor<16xf32>
      %28 = kiln.param "ut.block.ln_1.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
      %29 = kiln.layer_norm %26, %27, %28 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
      %30 = kiln.param "ut.block.ffn.fc1.weight" : tensor<64x16xf32>
      %31 = kiln.param "ut.block.ffn.fc1.bias" {init = #kiln.init<zeros>} : tensor<64xf32>
      %32 = kiln.linear %29, %30, %31 : (tensor<?x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<?x64xf32>
      %33 = kiln.relu %32 : (tensor<?x64xf32>) -> tensor<?x64xf32>
      %34 = kiln.param "ut.block.ffn.fc2.weight" : tensor<16x64xf32>
      %35 = kiln.param "ut.block.ffn.fc2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
      %36 = kiln.linear %33, %34, %35 : (tensor<?x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<?x16xf32>
      %37 = kiln.add %29, %36 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
      %38 = kiln.param "ut.block.ln_2.weight" {init = #kiln.init<ones>} : tensor<16xf32>
      %39 = kiln.param "ut.block.ln_2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
      %40 = kiln.layer_norm %37, %38, %39 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
      kiln.yield %40 : tensor<?x16xf32>
    }
    return %hidden, %ponder, %steps : tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>
  }
}
