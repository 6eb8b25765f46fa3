func.func @layout(%q: tensor<8x?x32xf32>) -> tensor<8x?x32xf32> {
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<layout>, pattern_size = 8 : i64, layout = ["#..", "##.", ".##"], scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  %b = kiln.attention %a, %a, %a {mask = #kiln.mask<causal>, scale = 0.125 : f32} : (tensor<8x?x32xf32>, tensor<8x?x32xf32>, tensor<8x?x32xf32>) -> tensor<8x?x32xf32>
  return %b : tensor<8x?x32xf32>
}
