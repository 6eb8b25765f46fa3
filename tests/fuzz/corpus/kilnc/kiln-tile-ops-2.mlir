func.func @ffn(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w1 = kiln.param "w1" : tensor<64x256xf32>
  %b1 = kiln.param "b1" : tensor<256xf32>
  %w2 = kiln.param "w2" : tensor<256x64xf32>
  %b2 = kiln.param "b2" : tensor<64xf32>
  %y = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<in_out>, layout2 = #kiln.weight_layout<in_out>, activation = #kiln.activation<relu>, kiln.schedule = #kiln.schedule<chunk = 32>}
      : (tensor<?x64xf32>, tensor<64x256xf32>, tensor<256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
