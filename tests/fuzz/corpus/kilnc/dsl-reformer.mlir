module @reformer attributes {kiln.seq_bounds = array<i64: 128>, kiln.seq_names = ["L"]} {
  func.func @forward(%arg0: tensor<?xi32> {kiln.name = "tokens", kiln.syms = array<i64: 0>, kiln.vocab = 32 : i64}) -> (tensor<?x16xf32> {kiln.name = "hidden"}) {
    %0 = kiln.sinusoidal_positions %arg0 : (tensor<?xi32>) -> tensor<?x16xf32>
    %1 = kiln.param "tok_embed.weight" {init_scale = 2.500000e-01 : f32} : tensor<32x16xf32>
    %2 = kiln.embedding %1, %arg0 : (tensor<32x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %3 = kiln.scale %2 {factor = 4.000000e+00 : f32} : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %4 = kiln.add %3, %0 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %5 = kiln.concat %4, %4 {axis = 1 : i64} : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
    %6 = kiln.param "layers.0.attn.rotations" {init_scale = 1.000000e+00 : f32} : tensor<2x8x2xf32>
    %7 = kiln.slice %5 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
    %8 = kiln.slice %5 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
    %9 = kiln.param "layers.0.attn.norm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %10 = kiln.param "layers.0.attn.norm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %11 = kiln.layer_norm %8, %9, %10 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %12 = kiln.param "layers.0.attn.qk.weight" : tensor<16x16xf32>
    %13 = kiln.param "layers.0.attn.qk.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %14 = kiln.linear %11, %12, %13 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %15 = kiln.reshape %14 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %16 = kiln.transpose %15 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %17 = kiln.param "layers.0.attn.v.weight" : tensor<16x16xf32>
    %18 = kiln.param "layers.0.attn.v.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %19 = kiln.linear %11, %17, %18 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %20 = kiln.reshape %19 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %21 = kiln.transpose %20 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %22 = kiln.lsh_attention %16, %21, %6 {buckets = 4 : i64, chunk = 16 : i64, hashes = 2 : i64, scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x8x2xf32>) -> tensor<2x?x8xf32>
    %23 = kiln.transpose %22 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
    %24 = kiln.reshape %23 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
    %25 = kiln.param "layers.0.attn.out.weight" : tensor<16x16xf32>
    %26 = kiln.param "layers.0.attn.out.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %27 = kiln.linear %24, %25, %26 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %28 = kiln.add %7, %27 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %29 = kiln.param "layers.0.ffn.norm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %30 = kiln.param "layers.0.ffn.norm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %31 = kiln.layer_norm %28, %29, %30 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %32 = kiln.param "layers.0.ffn.fc1.weight" : tensor<64x16xf32>
    %33 = kiln.param "layers.0.ffn.fc1.bias" {init = #kiln.init<zeros>} : tensor<64xf32>
    %34 = kiln.linear %31, %32, %33 : (tensor<?x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    %35 = kiln.gelu %34 : (tensor<?x64xf32>) -> tensor<?x64xf32>
    %36 = kiln.param "layers.0.ffn.fc2.weight" : tensor<16x64xf32>
    %37 = kiln.param "layers.0.ffn.fc2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %38 = kiln.linear %35, %36, %37 : (tensor<?x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %39 = kiln.add %8, %38 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %40 = kiln.concat %28, %39 {axis = 1 : i64} : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
    %41 = kiln.slice %40 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
    %42 = kiln.slice %40 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
    %43 = kiln.add %41, %42 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %44 = kiln.scale %43 {factor = 5.000000e-01 : f32} : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %45 = kiln.param "norm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %46 = kiln.param "norm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %47 = kiln.layer_norm %44, %45, %46 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    return %47 : tensor<?x16xf32>
  }
}
