module @transformer attributes {kiln.seq_bounds = array<i64: 16, 16>, kiln.seq_names = ["S", "T"]} {
  func.func @forward(%arg0: tensor<?xi32> {kiln.name = "src_tokens", kiln.syms = array<i64: 0>, kiln.vocab = 30 : i64}, %arg1: tensor<?xi32> {kiln.name = "tgt_tokens", kiln.syms = array<i64: 1>, kiln.vocab = 31 : i64}) -> (tensor<?x31xf32> {kiln.name = "logits"}) {
    %0 = kiln.param "src_embed.weight" {init_scale = 2.500000e-01 : f32} : tensor<30x16xf32>
    %1 = kiln.embedding %0, %arg0 : (tensor<30x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %2 = kiln.scale %1 {factor = 4.000000e+00 : f32} : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %3 = kiln.sinusoidal_positions %arg0 : (tensor<?xi32>) -> tensor<?x16xf32>
    %4 = kiln.add %2, %3 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %5 = kiln.param "encoder.layers.0.self_attn.in_proj_weight" : tensor<48x16xf32>
    %6 = kiln.param "encoder.layers.0.self_attn.in_proj_bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %7 = kiln.linear %4, %5, %6 : (tensor<?x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<?x48xf32>
    %8 = kiln.slice %7 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %9 = kiln.slice %7 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %10 = kiln.slice %7 {axis = 1 : i64, offset = 32 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %11 = kiln.reshape %10 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %12 = kiln.transpose %11 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %13 = kiln.reshape %9 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %14 = kiln.transpose %13 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %15 = kiln.reshape %8 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %16 = kiln.transpose %15 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %17 = kiln.attention %16, %14, %12 {scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
    %18 = kiln.transpose %17 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
    %19 = kiln.reshape %18 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
    %20 = kiln.param "encoder.layers.0.self_attn.out_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %21 = kiln.param "encoder.layers.0.self_attn.out_proj.weight" : tensor<16x16xf32>
    %22 = kiln.linear %19, %21, %20 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %23 = kiln.add %4, %22 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %24 = kiln.param "encoder.layers.0.norm1.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %25 = kiln.param "encoder.layers.0.norm1.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %26 = kiln.layer_norm %23, %25, %24 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %27 = kiln.param "encoder.layers.0.linear1.bias" {init = #kiln.init<zeros>} : tensor<32xf32>
    %28 = kiln.param "encoder.layers.0.linear1.weight" : tensor<32x16xf32>
    %29 = kiln.linear %26, %28, %27 : (tensor<?x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x32xf32>
    %30 = kiln.relu %29 : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %31 = kiln.param "encoder.layers.0.linear2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %32 = kiln.param "encoder.layers.0.linear2.weight" : tensor<16x32xf32>
    %33 = kiln.linear %30, %32, %31 : (tensor<?x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %34 = kiln.add %26, %33 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %35 = kiln.param "encoder.layers.0.norm2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %36 = kiln.param "encoder.layers.0.norm2.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %37 = kiln.layer_norm %34, %36, %35 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %38 = kiln.param "encoder.norm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %39 = kiln.param "encoder.norm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %40 = kiln.layer_norm %37, %39, %38 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %41 = kiln.param "tgt_embed.weight" {init_scale = 2.500000e-01 : f32} : tensor<31x16xf32>
    %42 = kiln.embedding %41, %arg1 : (tensor<31x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %43 = kiln.scale %42 {factor = 4.000000e+00 : f32} : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %44 = kiln.sinusoidal_positions %arg1 : (tensor<?xi32>) -> tensor<?x16xf32>
    %45 = kiln.add %43, %44 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %46 = kiln.param "decoder.layers.0.self_attn.in_proj_weight" : tensor<48x16xf32>
    %47 = kiln.param "decoder.layers.0.self_attn.in_proj_bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %48 = kiln.linear %45, %46, %47 : (tensor<?x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<?x48xf32>
    %49 = kiln.slice %48 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %50 = kiln.slice %48 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %51 = kiln.slice %48 {axis = 1 : i64, offset = 32 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %52 = kiln.reshape %51 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %53 = kiln.transpose %52 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %54 = kiln.reshape %50 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %55 = kiln.transpose %54 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %56 = kiln.reshape %49 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %57 = kiln.transpose %56 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %58 = kiln.attention %57, %55, %53 {mask = #kiln.mask<causal>, scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
    %59 = kiln.transpose %58 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
    %60 = kiln.reshape %59 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
    %61 = kiln.param "decoder.layers.0.self_attn.out_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %62 = kiln.param "decoder.layers.0.self_attn.out_proj.weight" : tensor<16x16xf32>
    %63 = kiln.linear %60, %62, %61 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %64 = kiln.add %45, %63 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %65 = kiln.param "decoder.layers.0.norm1.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %66 = kiln.param "decoder.layers.0.norm1.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %67 = kiln.layer_norm %64, %66, %65 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %68 = kiln.param "decoder.layers.0.multihead_attn.in_proj_weight" : tensor<48x16xf32>
    %69 = kiln.param "decoder.layers.0.multihead_attn.in_proj_bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %70 = kiln.slice %69 {axis = 0 : i64, offset = 0 : i64} : (tensor<48xf32>) -> tensor<16xf32>
    %71 = kiln.slice %68 {axis = 0 : i64, offset = 0 : i64} : (tensor<48x16xf32>) -> tensor<16x16xf32>
    %72 = kiln.linear %67, %71, %70 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %73 = kiln.slice %72 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %74 = kiln.slice %69 {axis = 0 : i64, offset = 16 : i64} : (tensor<48xf32>) -> tensor<32xf32>
    %75 = kiln.slice %68 {axis = 0 : i64, offset = 16 : i64} : (tensor<48x16xf32>) -> tensor<32x16xf32>
    %76 = kiln.linear %40, %75, %74 : (tensor<?x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x32xf32>
    %77 = kiln.slice %76 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
    %78 = kiln.slice %76 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
    %79 = kiln.reshape %78 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %80 = kiln.transpose %79 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %81 = kiln.reshape %77 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %82 = kiln.transpose %81 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %83 = kiln.reshape %73 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %84 = kiln.transpose %83 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %85 = kiln.attention %84, %82, %80 {scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
    %86 = kiln.transpose %85 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
    %87 = kiln.reshape %86 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
    %88 = kiln.param "decoder.layers.0.multihead_attn.out_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %89 = kiln.param "decoder.layers.0.multihead_attn.out_proj.weight" : tensor<16x16xf32>
    %90 = kiln.linear %87, %89, %88 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %91 = kiln.add %67, %90 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %92 = kiln.param "decoder.layers.0.norm2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %93 = kiln.param "decoder.layers.0.norm2.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %94 = kiln.layer_norm %91, %93, %92 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %95 = kiln.param "decoder.layers.0.linear1.bias" {init = #kiln.init<zeros>} : tensor<32xf32>
    %96 = kiln.param "decoder.layers.0.linear1.weight" : tensor<32x16xf32>
    %97 = kiln.linear %94, %96, %95 : (tensor<?x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x32xf32>
    %98 = kiln.relu %97 : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %99 = kiln.param "decoder.layers.0.linear2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %100 = kiln.param "decoder.layers.0.linear2.weight" : tensor<16x32xf32>
    %101 = kiln.linear %98, %100, %99 : (tensor<?x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %102 = kiln.add %94, %101 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %103 = kiln.param "decoder.layers.0.norm3.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %104 = kiln.param "decoder.layers.0.norm3.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %105 = kiln.layer_norm %102, %104, %103 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %106 = kiln.param "decoder.norm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %107 = kiln.param "decoder.norm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %108 = kiln.layer_norm %105, %107, %106 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %109 = kiln.param "generator.bias" {init = #kiln.init<zeros>} : tensor<31xf32>
    %110 = kiln.param "generator.weight" : tensor<31x16xf32>
    %111 = kiln.linear %108, %110, %109 : (tensor<?x16xf32>, tensor<31x16xf32>, tensor<31xf32>) -> tensor<?x31xf32>
    return %111 : tensor<?x31xf32>
  }
  func.func @encode(%arg0: tensor<?xi32> {kiln.name = "src_tokens", kiln.syms = array<i64: 0>, kiln.vocab = 30 : i64}) -> (tensor<?x16xf32> {kiln.name = "memory"}) {
    %0 = kiln.param "src_embed.weight" {init_scale = 2.500000e-01 : f32} : tensor<30x16xf32>
    %1 = kiln.embedding %0, %arg0 : (tensor<30x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %2 = kiln.scale %1 {factor = 4.000000e+00 : f32} : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %3 = kiln.sinusoidal_positions %arg0 : (tensor<?xi32>) -> tensor<?x16xf32>
    %4 = kiln.add %2, %3 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %5 = kiln.param "encoder.layers.0.self_attn.in_proj_weight" : tensor<48x16xf32>
    %6 = kiln.param "encoder.layers.0.self_attn.in_proj_bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %7 = kiln.linear %4, %5, %6 : (tensor<?x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<?x48xf32>
    %8 = kiln.slice %7 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %9 = kiln.slice %7 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %10 = kiln.slice %7 {axis = 1 : i64, offset = 32 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %11 = kiln.reshape %10 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %12 = kiln.transpose %11 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %13 = kiln.reshape %9 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %14 = kiln.transpose %13 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %15 = kiln.reshape %8 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %16 = kiln.transpose %15 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %17 = kiln.attention %16, %14, %12 {scale = 0.353553385 : f32} : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
    %18 = kiln.transpose %17 {permutation = array<i64: 1, 0, 2>} : (tensor<2x?x8xf32>) -> tensor<?x2x8xf32>
    %19 = kiln.reshape %18 : (tensor<?x2x8xf32>) -> tensor<?x16xf32>
    %20 = kiln.param "encoder.layers.0.self_attn.out_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %21 = kiln.param "encoder.layers.0.self_attn.out_proj.weight" : tensor<16x16xf32>
    %22 = kiln.linear %19, %21, %20 : (tensor<?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %23 = kiln.add %4, %22 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %24 = kiln.param "encoder.layers.0.norm1.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %25 = kiln.param "encoder.layers.0.norm1.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %26 = kiln.layer_norm %23, %25, %24 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %27 = kiln.param "encoder.layers.0.linear1.bias" {init = #kiln.init<zeros>} : tensor<32xf32>
    %28 = kiln.param "encoder.layers.0.linear1.weight" : tensor<32x16xf32>
    %29 = kiln.linear %26, %28, %27 : (tensor<?x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x32xf32>
    %30 = kiln.relu %29 : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %31 = kiln.param "encoder.layers.0.linear2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %32 = kiln.param "encoder.layers.0.linear2.weight" : tensor<16x32xf32>
    %33 = kiln.linear %30, %32, %31 : (tensor<?x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %34 = kiln.add %26, %33 : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %35 = kiln.param "encoder.layers.0.norm2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %36 = kiln.param "encoder.layers.0.norm2.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %37 = kiln.layer_norm %34, %36, %35 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %38 = kiln.param "encoder.norm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %39 = kiln.param "encoder.norm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %40 = kiln.layer_norm %37, %39, %38 : (tensor<?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
    %41 = kiln.param "decoder.layers.0.multihead_attn.in_proj_weight" : tensor<48x16xf32>
    %42 = kiln.param "decoder.layers.0.multihead_attn.in_proj_bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %43 = kiln.slice %42 {axis = 0 : i64, offset = 16 : i64} : (tensor<48xf32>) -> tensor<32xf32>
    %44 = kiln.slice %41 {axis = 0 : i64, offset = 16 : i64} : (tensor<48x16xf32>) -> tensor<32x16xf32>
    %45 = kiln.linear %40, %44, %43 : (tensor<?x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x32xf32>
    %46 = kiln.slice %45 {axis = 1 : i64, offset = 0 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
    %47 = kiln.slice %45 {axis = 1 : i64, offset = 16 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
    %48 = kiln.reshape %46 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %49 = kiln.transpose %48 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %50 = kiln.state "cross.k.0" : tensor<2x16x8xf32>
    %51 = kiln.cache_write %50, %49 : (tensor<2x16x8xf32>, tensor<2x?x8xf32>) -> tensor<2x16x8xf32>
    %52 = kiln.reshape %47 : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
    %53 = kiln.transpose %52 {permutation = array<i64: 1, 0, 2>} : (tensor<?x2x8xf32>) -> tensor<2x?x8xf32>
    %54 = kiln.state "cross.v.0" : tensor<2x16x8xf32>
    %55 = kiln.cache_write %54, %53 : (tensor<2x16x8xf32>, tensor<2x?x8xf32>) -> tensor<2x16x8xf32>
    return %40 : tensor<?x16xf32>
  }
  func.func @decode(%arg0: tensor<1xi32> {kiln.name = "token", kiln.syms = array<i64: -1>, kiln.vocab = 31 : i64}, %arg1: tensor<1xi32> {kiln.name = "past", kiln.syms = array<i64: -1>, kiln.vocab = 16 : i64}, %arg2: tensor<1xi32> {kiln.name = "memory_len", kiln.syms = array<i64: -1>, kiln.vocab = 17 : i64}) -> (tensor<1x31xf32> {kiln.name = "next_logits"}) {
    %0 = kiln.param "tgt_embed.weight" {init_scale = 2.500000e-01 : f32} : tensor<31x16xf32>
    %1 = kiln.embedding %0, %arg0 : (tensor<31x16xf32>, tensor<1xi32>) -> tensor<1x16xf32>
    %2 = kiln.scale %1 {factor = 4.000000e+00 : f32} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %3 = kiln.sinusoidal_positions %arg0, %arg1 : (tensor<1xi32>, tensor<1xi32>) -> tensor<1x16xf32>
    %4 = kiln.add %2, %3 : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %5 = kiln.param "decoder.layers.0.self_attn.in_proj_weight" : tensor<48x16xf32>
    %6 = kiln.param "decoder.layers.0.self_attn.in_proj_bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %7 = kiln.linear %4, %5, %6 : (tensor<1x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<1x48xf32>
    %8 = kiln.slice %7 {axis = 1 : i64, offset = 0 : i64} : (tensor<1x48xf32>) -> tensor<1x16xf32>
    %9 = kiln.slice %7 {axis = 1 : i64, offset = 16 : i64} : (tensor<1x48xf32>) -> tensor<1x16xf32>
    %10 = kiln.slice %7 {axis = 1 : i64, offset = 32 : i64} : (tensor<1x48xf32>) -> tensor<1x16xf32>
    %11 = kiln.reshape %9 : (tensor<1x16xf32>) -> tensor<1x2x8xf32>
    %12 = kiln.transpose %11 {permutation = array<i64: 1, 0, 2>} : (tensor<1x2x8xf32>) -> tensor<2x1x8xf32>
    %13 = kiln.state "self.k.0" : tensor<2x16x8xf32>
    %14 = kiln.cache_write %13, %12, %arg1 : (tensor<2x16x8xf32>, tensor<2x1x8xf32>, tensor<1xi32>) -> tensor<2x16x8xf32>
    %15 = kiln.reshape %10 : (tensor<1x16xf32>) -> tensor<1x2x8xf32>
    %16 = kiln.transpose %15 {permutation = array<i64: 1, 0, 2>} : (tensor<1x2x8xf32>) -> tensor<2x1x8xf32>
    %17 = kiln.state "self.v.0" : tensor<2x16x8xf32>
    %18 = kiln.cache_write %17, %16, %arg1 : (tensor<2x16x8xf32>, tensor<2x1x8xf32>, tensor<1xi32>) -> tensor<2x16x8xf32>
    %19 = kiln.reshape %8 : (tensor<1x16xf32>) -> tensor<1x2x8xf32>
    %20 = kiln.transpose %19 {permutation = array<i64: 1, 0, 2>} : (tensor<1x2x8xf32>) -> tensor<2x1x8xf32>
    %21 = kiln.attention %20, %14, %18, %arg1 {mask = #kiln.mask<causal>, scale = 0.353553385 : f32} : (tensor<2x1x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<1xi32>) -> tensor<2x1x8xf32>
    %22 = kiln.transpose %21 {permutation = array<i64: 1, 0, 2>} : (tensor<2x1x8xf32>) -> tensor<1x2x8xf32>
    %23 = kiln.reshape %22 : (tensor<1x2x8xf32>) -> tensor<1x16xf32>
    %24 = kiln.param "decoder.layers.0.self_attn.out_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %25 = kiln.param "decoder.layers.0.self_attn.out_proj.weight" : tensor<16x16xf32>
    %26 = kiln.linear %23, %25, %24 : (tensor<1x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %27 = kiln.add %4, %26 : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %28 = kiln.param "decoder.layers.0.norm1.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %29 = kiln.param "decoder.layers.0.norm1.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %30 = kiln.layer_norm %27, %29, %28 : (tensor<1x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %31 = kiln.param "decoder.layers.0.multihead_attn.in_proj_weight" : tensor<48x16xf32>
    %32 = kiln.param "decoder.layers.0.multihead_attn.in_proj_bias" {init = #kiln.init<zeros>} : tensor<48xf32>
    %33 = kiln.slice %32 {axis = 0 : i64, offset = 0 : i64} : (tensor<48xf32>) -> tensor<16xf32>
    %34 = kiln.slice %31 {axis = 0 : i64, offset = 0 : i64} : (tensor<48x16xf32>) -> tensor<16x16xf32>
    %35 = kiln.linear %30, %34, %33 : (tensor<1x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %36 = kiln.slice %35 {axis = 1 : i64, offset = 0 : i64} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %37 = kiln.reshape %36 : (tensor<1x16xf32>) -> tensor<1x2x8xf32>
    %38 = kiln.transpose %37 {permutation = array<i64: 1, 0, 2>} : (tensor<1x2x8xf32>) -> tensor<2x1x8xf32>
    %39 = kiln.state "cross.v.0" : tensor<2x16x8xf32>
    %40 = kiln.state "cross.k.0" : tensor<2x16x8xf32>
    %41 = kiln.attention %38, %40, %39, %arg2 {key_count, scale = 0.353553385 : f32} : (tensor<2x1x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<1xi32>) -> tensor<2x1x8xf32>
    %42 = kiln.transpose %41 {permutation = array<i64: 1, 0, 2>} : (tensor<2x1x8xf32>) -> tensor<1x2x8xf32>
    %43 = kiln.reshape %42 : (tensor<1x2x8xf32>) -> tensor<1x16xf32>
    %44 = kiln.param "decoder.layers.0.multihead_attn.out_proj.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %45 = kiln.param "decoder.layers.0.multihead_attn.out_proj.weight" : tensor<16x16xf32>
    %46 = kiln.linear %43, %45, %44 : (tensor<1x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %47 = kiln.add %30, %46 : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %48 = kiln.param "decoder.layers.0.norm2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %49 = kiln.param "decoder.layers.0.norm2.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %50 = kiln.layer_norm %47, %49, %48 : (tensor<1x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %51 = kiln.param "decoder.layers.0.linear1.bias" {init = #kiln.init<zeros>} : tensor<32xf32>
    %52 = kiln.param "decoder.layers.0.linear1.weight" : tensor<32x16xf32>
    %53 = kiln.linear %50, %52, %51 : (tensor<1x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<1x32xf32>
    %54 = kiln.relu %53 : (tensor<1x32xf32>) -> tensor<1x32xf32>
    %55 = kiln.param "decoder.layers.0.linear2.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %56 = kiln.param "decoder.layers.0.linear2.weight" : tensor<16x32xf32>
    %57 = kiln.linear %54, %56, %55 : (tensor<1x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %58 = kiln.add %50, %57 : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %59 = kiln.param "decoder.layers.0.norm3.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %60 = kiln.param "decoder.layers.0.norm3.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %61 = kiln.layer_norm %58, %60, %59 : (tensor<1x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %62 = kiln.param "decoder.norm.bias" {init = #kiln.init<zeros>} : tensor<16xf32>
    %63 = kiln.param "decoder.norm.weight" {init = #kiln.init<ones>} : tensor<16xf32>
    %64 = kiln.layer_norm %61, %63, %62 : (tensor<1x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    %65 = kiln.param "generator.bias" {init = #kiln.init<zeros>} : tensor<31xf32>
    %66 = kiln.param "generator.weight" : tensor<31x16xf32>
    %67 = kiln.linear %64, %66, %65 : (tensor<1x16xf32>, tensor<31x16xf32>, tensor<31xf32>) -> tensor<1x31xf32>
    return %67 : tensor<1x31xf32>
  }
}
