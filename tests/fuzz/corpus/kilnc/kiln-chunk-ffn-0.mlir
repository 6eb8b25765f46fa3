func.func @with_residual(%x: tensor<?x128xf32>) -> tensor<?x128xf32> {
  %w1 = kiln.param "w1" : tensor<128x512xf32>
  %b1 = kiln.param "b1" : tensor<512xf32>
  %w2 = kiln.param "w2" : tensor<512x128xf32>
  %b2 = kiln.param "b2" : tensor<128xf32>
  %h = kiln.linear %x, %w1, %b1 {weight_layout = #kiln.weight_layout<in_out>, activation = #kiln.activation<gelu_tanh>} : (tensor<?x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
  %y = kiln.linear %h, %w2, %b2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x512xf32>, tensor<512x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %r = kiln.add %x, %y : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  return %r : tensor<?x128xf32>
}
