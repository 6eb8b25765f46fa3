func.func @packing(%x: tensor<1x64xf32>, %y: tensor<?x1024xf32>) -> (tensor<1x2048xf32>, tensor<?x2048xf32>) {
  %w = kiln.param "w" : tensor<64x2048xf32>
  %a = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<in_out>} : (tensor<1x64xf32>, tensor<64x2048xf32>) -> tensor<1x2048xf32>
  %w2 = kiln.param "w2" : tensor<1024x2048xf32>
  %b = kiln.linear %y, %w2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x1024xf32>, tensor<1024x2048xf32>) -> tensor<?x2048xf32>
  return %a, %b : tensor<1x2048xf32>, tensor<?x2048xf32>
}
