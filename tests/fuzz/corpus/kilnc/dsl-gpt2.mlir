module @gpt2 attributes {kiln.ignored_weights = ["transformer.h.*.attn.bias", "transformer.h.*.attn.masked_bias", "lm_head.weight"], kiln.seq_bounds = array<i64: 16>, kiln.seq_names = ["L"], kiln.weights_prefix = "transformer."} {
  func.func @forward(%arg0: tensor<?xi32> {kiln.name = "tokens", kiln.syms = array<i64: 0>, kiln.vocab = 32 : i64}) -> (tensor<?x32xf32> {kiln.name = "logits"}) {
    %0 = kiln.param "transformer.wte.weight" : tensor<32x16xf32>
    %1 = kiln.param "transformer.wpe.weight" {init_scale = 0.00999999977 : f32} : tensor<16x16xf32>
    %2 = kiln.position_embedding %1, %arg0 : (tensor<16x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %3 = kiln.embedding %0, %arg0 : (tensor<32x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %4 = kiln.add %3, %2 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %5 = kiln.param "transformer.h.0.ln_1.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %6 = kiln.param "transformer.h.0.ln_1.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %7 = kiln.layer_norm %4, %6, %5 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %8 = kiln.param "transformer.h.0.attn.c_attn.bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %9 = kiln.param "transformer.h.0.attn.c_attn.weight" : tensor<16x48xf32>
    %10 = kiln.linear %7, %9, %8 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<?x48xf32>
    %11 = kiln.slice %10 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %12 = kiln.slice %10 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %13 = kiln.slice %10 {axis = 1 : i64, offset = 32 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %14 = kiln.reshape %11 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %15 = kiln.transpose %14 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %16 = kiln.reshape %12 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %17 = kiln.transpose %16 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %18 = kiln.reshape %13 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %19 = kiln.transpose %18 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %20 = kiln.state "cache.k.0" : tensor<2x16x8xf32>
    %21 = kiln.cache_write %20, %17 : (tensor<2x16x8xf32>, tensor<2x?x8xf32>) -> tensor<2x16x8xf32>
    %22 = kiln.state "cache.v.0" : tensor<2x16x8xf32>
    %23 = kiln.cache_write %22, %19 : (tensor<2x16x8xf32>, tensor<2x?x8xf32>) -> tensor<2x16x8xf32>
    %24 = kiln.attention %15, %17, %19 {mask = #kiln.mask<causal>, scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
    %25 = kiln.transpose %24 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
    %26 = kiln.reshape %25 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
    %27 = kiln.param "transformer.h.0.attn.c_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %28 = kiln.param "transformer.h.0.attn.c_proj.weight" : tensor<16x16xf32>
    %29 = kiln.linear %26, %28, %27 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %30 = kiln.add %4, %29 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %31 = kiln.param "transformer.h.0.ln_2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %32 = kiln.param "transformer.h.0.ln_2.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %33 = kiln.layer_norm %30, %32, %31 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %34 = kiln.param "transformer.h.0.mlp.c_fc.bias" {init = #kiln.init<zeros>} : tensor<64xf32>
    %35 = kiln.param "transformer.h.0.mlp.c_fc.weight" : tensor<16x64xf32>
    %36 = kiln.linear %33, %35, %34 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    %37 = kiln.gelu %36 {approximate = #kiln.gelu<tanh>} : (tensor<?x64xf32>) -> tensor<?x64xf32>
    %38 = kiln.param "transformer.h.0.mlp.c_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %39 = kiln.param "transformer.h.0.mlp.c_proj.weight" : tensor<64x16xf32>
    %40 = kiln.linear %37, %39, %38 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %41 = kiln.add %30, %40 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %42 = kiln.param "transformer.ln_f.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %43 = kiln.param "transformer.ln_f.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %44 = kiln.layer_norm %41, %43, %42 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %45 = kiln.linear %44, %0 : (tensor<?x16xf32>, tensor<32x16xf32>) -> tensor<?x32xf32>
    return %45 : tensor<?x32xf32>
  }
  func.func @decode(%arg0: tensor<1xi32> {kiln.name = "token", kiln.syms = array<i64: -1>, kiln.vocab = 32 : i64}, %arg1: tensor<1xi32> {kiln.name = "past", kiln.syms = array<i64: -1>, kiln.vocab = 16 : i64}) -> (tensor<1x32xf32> {kiln.name = "next_logits"}) {
    %0 = kiln.param "transformer.wte.weight" : tensor<32x16xf32>
    %1 = kiln.param "transformer.wpe.weight" {init_scale = 0.00999999977 : f32} : tensor<16x16xf32>
    %2 = kiln.embedding %1, %arg1 : (tensor<16x16xf32>, tensor<1xi32>) -> tensor<1x16xf32>
    %3 = kiln.embedding %0, %arg0 : (tensor<32x16xf32>, tensor<1xi32>) -> tensor<1x16xf32>
    %4 = kiln.add %3, %2 : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %5 = kiln.param "transformer.h.0.ln_1.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %6 = kiln.param "transformer.h.0.ln_1.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %7 = kiln.layer_norm %4, %6, %5 : (tensor<1x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %8 = kiln.param "transformer.h.0.attn.c_attn.bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %9 = kiln.param "transformer.h.0.attn.c_attn.weight" : tensor<16x48xf32>
    %10 = kiln.linear %7, %9, %8 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<1x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<1x48xf32>
    %11 = kiln.slice %10 {axis = 1 : i64, offset = 0 : i64} : (tensor<1x48xf32>) -> tensor<1x16xf32>
    %12 = kiln.slice %10 {axis = 1 : i64, offset = 16 : i64} : (tensor<1x48xf32>) -> tensor<1x16xf32>
    %13 = kiln.slice %10 {axis = 1 : i64, offset = 32 : i64} : (tensor<1x48xf32>) -> tensor<1x16xf32>
    %14 = kiln.reshape %11 : (tensor<1x16xf32>) -> tensor<1x2x8xf32>
    %15 = kiln.transpose %14 {permutation = array<i64: 1, 0, 2>} : (tensor<1x2x8xf32>) -> tensor<2x1x8xf32>
    %16 = kiln.reshape %12 : (tensor<1x16xf32>) -> tensor<1x2x8xf32>
    %17 = kiln.transpose %16 {permutation = array<i64: 1, 0, 2>} : (tensor<1x2x8xf32>) -> tensor<2x1x8xf32>
    %18 = kiln.reshape %13 : (tensor<1x16xf32>) -> tensor<1x2x8xf32>
    %19 = kiln.transpose %18 {permutation = array<i64: 1, 0, 2>} : (tensor<1x2x8xf32>) -> tensor<2x1x8xf32>
    %20 = kiln.state "cache.k.0" : tensor<2x16x8xf32>
    %21 = kiln.cache_write %20, %17, %arg1 : (tensor<2x16x8xf32>, tensor<2x1x8xf32>, tensor<1xi32>) -> tensor<2x16x8xf32>
    %22 = kiln.state "cache.v.0" : tensor<2x16x8xf32>
    %23 = kiln.cache_write %22, %19, %arg1 : (tensor<2x16x8xf32>, tensor<2x1x8xf32>, tensor<1xi32>) -> tensor<2x16x8xf32>
    %24 = kiln.attention %15, %21, %23, %arg1 {mask = #kiln.mask<causal>, scale = 0.353553385 : f32} : (tensor<2x1x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<1xi32>) -> tensor<2x1x8xf32>
    %25 = kiln.transpose %24 {permutation = array<i64: 1, 0, 2>} : (tensor<2x1x8xf32>) -> tensor<1x2x8xf32>
    %26 = kiln.reshape %25 : (tensor<1x2x8xf32>) -> tensor<1x16xf32>
    %27 = kiln.param "transformer.h.0.attn.c_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %28 = kiln.param "transformer.h.0.attn.c_proj.weight" : tensor<16x16xf32>
    %29 = kiln.linear %26, %28, %27 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<1x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %30 = kiln.add %4, %29 : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %31 = kiln.param "transformer.h.0.ln_2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %32 = kiln.param "transformer.h.0.ln_2.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %33 = kiln.layer_norm %30, %32, %31 : (tensor<1x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %34 = kiln.param "transformer.h.0.mlp.c_fc.bias" {init = #kiln.init<zeros>} : tensor<64xf32>
    %35 = kiln.param "transformer.h.0.mlp.c_fc.weight" : tensor<16x64xf32>
    %36 = kiln.linear %33, %35, %34 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<1x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
    %37 = kiln.gelu %36 {approximate = #kiln.gelu<tanh>} : (tensor<1x64xf32>) -> tensor<1x64xf32>
    %38 = kiln.param "transformer.h.0.mlp.c_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %39 = kiln.param "transformer.h.0.mlp.c_proj.weight" : tensor<64x16xf32>
    %40 = kiln.linear %37, %39, %38 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<1x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %41 = kiln.add %30, %40 : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %42 = kiln.param "transformer.ln_f.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %43 = kiln.param "transformer.ln_f.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %44 = kiln.layer_norm %41, %43, %42 : (tensor<1x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %45 = kiln.linear %44, %0 : (tensor<1x16xf32>, tensor<32x16xf32>) -> tensor<1x32xf32>
    return %45 : tensor<1x32xf32>
  }
}
