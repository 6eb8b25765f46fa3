module @sparse attributes {kiln.seq_bounds = array<i64: 64>, kiln.seq_names = ["L"]} {
  func.func @forward(%arg0: tensor<?xi32> {kiln.name = "tokens", kiln.syms = array<i64: 0>, kiln.vocab = 32 : i64}) -> (tensor<?x32xf32> {kiln.name = "logits"}) {
    %0 = kiln.param "pos_embed.weight" {init_scale = 0.00999999977 : f32} : tensor<64x16xf32>
    %1 = kiln.position_embedding %0, %arg0 : (tensor<64x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %2 = kiln.param "tok_embed.weight" : tensor<32x16xf32>
    %3 = kiln.embedding %2, %arg0 : (tensor<32x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %4 = kiln.add %3, %1 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %5 = kiln.param "layers.0.ln1.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %6 = kiln.param "layers.0.ln1.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %7 = kiln.layer_norm %4, %5, %6 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %8 = kiln.param "layers.0.attn.qkv.weight" : tensor<48x16xf32>
    %9 = kiln.param "layers.0.attn.qkv.bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %10 = kiln.linear %7, %8, %9 : (tensor<?x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<?x48xf32>
    %11 = kiln.slice %10 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %12 = kiln.slice %10 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %13 = kiln.slice %10 {axis = 1 : i64, offset = 32 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %14 = kiln.reshape %13 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %15 = kiln.transpose %14 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %16 = kiln.reshape %12 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %17 = kiln.transpose %16 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %18 = kiln.reshape %11 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %19 = kiln.transpose %18 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %20 = kiln.attention %19, %17, %15 {mask = #kiln.mask<strided>, part = #kiln.part<union>, pattern_size = 8 : i64, scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
    %21 = kiln.transpose %20 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
    %22 = kiln.reshape %21 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
    %23 = kiln.param "layers.0.attn.proj.weight" : tensor<16x16xf32>
    %24 = kiln.param "layers.0.attn.proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %25 = kiln.linear %22, %23, %24 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %26 = kiln.add %4, %25 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %27 = kiln.param "layers.0.ln2.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %28 = kiln.param "layers.0.ln2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %29 = kiln.layer_norm %26, %27, %28 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %30 = kiln.param "layers.0.mlp.fc1.weight" : tensor<64x16xf32>
    %31 = kiln.param "layers.0.mlp.fc1.bias" {init = #kiln.init<zeros>} : tensor<64xf32>
    %32 = kiln.linear %29, %30, %31 : (tensor<?x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    %33 = kiln.gelu %32 {approximate = #kiln.gelu<tanh>} : (tensor<?x64xf32>) -> tensor<?x64xf32>
    %34 = kiln.param "layers.0.mlp.fc2.weight" : tensor<16x64xf32>
    %35 = kiln.param "layers.0.mlp.fc2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %36 = kiln.linear %33, %34, %35 : (tensor<?x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %37 = kiln.add %26, %36 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %38 = kiln.param "head.weight" : tensor<32x16xf32>
    %39 = kiln.param "ln_f.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %40 = kiln.param "ln_f.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %41 = kiln.layer_norm %37, %39, %40 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %42 = kiln.linear %41, %38 : (tensor<?x16xf32>, tensor<32x16xf32>) -> tensor<?x32xf32>
    return %42 : tensor<?x32xf32>
  }
}
