func.func @no_residual(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w1 = kiln.param "w1" : tensor<3072x64xf32>
  %b1 = kiln.param "b1" : tensor<3072xf32>
  %w2 = kiln.param "w2" : tensor<64x3072xf32>
  %b2 = kiln.param "b2" : tensor<64xf32>
  %h = kiln.linear %x, %w1, %b1 {activation = #kiln.activation<relu>} : (tensor<?x64xf32>, tensor<3072x64xf32>, tensor<3072xf32>) -> tensor<?x3072xf32>
  %y = kiln.linear %h, %w2, %b2 : (tensor<?x3072xf32>, tensor<64x3072xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
