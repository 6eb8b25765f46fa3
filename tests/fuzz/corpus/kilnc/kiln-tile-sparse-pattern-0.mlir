func.func @strided_union(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %o = kiln.attention %q, %q, %q {mask = #kiln.mask<strided>, pattern_size = 128 : i64, part = #kiln.part<union>, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %o : tensor<8x?x32xf32>
}
