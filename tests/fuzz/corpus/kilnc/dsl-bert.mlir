module @bert attributes {kiln.ignored_weights = ["bert.embeddings.position_ids", "bert.pooler.*", "cls.*"], kiln.seq_bounds = array<i64: 16>, kiln.seq_names = ["L"], kiln.weights_prefix = "bert."} {
  func.func @forward(%arg0: tensor<?xi32> {kiln.name = "tokens", kiln.syms = array<i64: 0>, kiln.vocab = 32 : i64}, %arg1: tensor<?xi32> {kiln.name = "token_type_ids", kiln.optional, kiln.syms = array<i64: 0>, kiln.vocab = 2 : i64}) -> (tensor<?x16xf32> {kiln.name = "hidden"}) {
    %0 = kiln.param "bert.embeddings.token_type_embeddings.weight" : tensor<2x16xf32>
    %1 = kiln.embedding %0, %arg1 : (tensor<2x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %2 = kiln.param "bert.embeddings.position_embeddings.weight" : tensor<16x16xf32>
    %3 = kiln.position_embedding %2, %arg0 : (tensor<16x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %4 = kiln.param "bert.embeddings.word_embeddings.weight" : tensor<32x16xf32>
    %5 = kiln.embedding %4, %arg0 : (tensor<32x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %6 = kiln.add %5, %3 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %7 = kiln.add %6, %1 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %8 = kiln.param "bert.embeddings.LayerNorm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %9 = kiln.param "bert.embeddings.LayerNorm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %10 = kiln.layer_norm %7, %9, %8 {epsilon = 9.99999996E-13 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %11 = kiln.param "bert.encoder.layer.0.attention.self.value.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %12 = kiln.param "bert.encoder.layer.0.attention.self.value.weight" : tensor<16x16xf32>
    %13 = kiln.linear %10, %12, %11 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %14 = kiln.reshape %13 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %15 = kiln.transpose %14 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %16 = kiln.param "bert.encoder.layer.0.attention.self.key.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %17 = kiln.param "bert.encoder.layer.0.attention.self.key.weight" : tensor<16x16xf32>
    %18 = kiln.linear %10, %17, %16 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %19 = kiln.reshape %18 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %20 = kiln.transpose %19 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %21 = kiln.param "bert.encoder.layer.0.attention.self.query.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %22 = kiln.param "bert.encoder.layer.0.attention.self.query.weight" : tensor<16x16xf32>
    %23 = kiln.linear %10, %22, %21 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %24 = kiln.reshape %23 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %25 = kiln.transpose %24 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %26 = kiln.attention %25, %20, %15 {scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
    %27 = kiln.transpose %26 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
    %28 = kiln.reshape %27 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
    %29 = kiln.param "bert.encoder.layer.0.attention.output.dense.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %30 = kiln.param "bert.encoder.layer.0.attention.output.dense.weight" : tensor<16x16xf32>
    %31 = kiln.linear %28, %30, %29 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %32 = kiln.add %10, %31 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %33 = kiln.param "bert.encoder.layer.0.attention.output.LayerNorm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %34 = kiln.param "bert.encoder.layer.0.attention.output.LayerNorm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %35 = kiln.layer_norm %32, %34, %33 {epsilon = 9.99999996E-13 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %36 = kiln.param "bert.encoder.layer.0.intermediate.dense.bias" {init = #kiln.init<zeros>} : tensor<64xf32>
    %37 = kiln.param "bert.encoder.layer.0.intermediate.dense.weight" : tensor<64x16xf32>
    %38 = kiln.linear %35, %37, %36 : (tensor<?x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    %39 = kiln.gelu %38 : (tensor<?x64xf32>) -> tensor<?x64xf32>
    %40 = kiln.param "bert.encoder.layer.0.output.dense.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %41 = kiln.param "bert.encoder.layer.0.output.dense.weight" : tensor<16x64xf32>
    %42 = kiln.linear %39, %41, %40 : (tensor<?x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %43 = kiln.add %35, %42 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %44 = kiln.param "bert.encoder.layer.0.output.LayerNorm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %45 = kiln.param "bert.encoder.layer.0.output.LayerNorm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %46 = kiln.layer_norm %43, %45, %44 {epsilon = 9.99999996E-13 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    return %46 : tensor<?x16xf32>
  }
}
