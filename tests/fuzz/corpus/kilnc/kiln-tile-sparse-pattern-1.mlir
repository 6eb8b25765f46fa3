func.func @fixed_and_window(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<fixed>, pattern_size = 32 : i64, summary = 4 : i64, part = #kiln.part<global>, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  %b = kiln.attention %a, %a, %a {mask = #kiln.mask<window>, pattern_size = 5 : i64, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %b : tensor<8x?x32xf32>
}
