func.func @left_alone(%x: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x16xf32>, tensor<?x8xf32>) {
  %w1 = kiln.param "w1" : tensor<16x8xf32>
  %b1 = kiln.param "b1" : tensor<16xf32>
  %w2 = kiln.param "w2" : tensor<8x16xf32>
  %b2 = kiln.param "b2" : tensor<8xf32>
  %h = kiln.linear %x, %w1, %b1 {activation = #kiln.activation<relu>} : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %y = kiln.linear %h, %w2, %b2 : (tensor<?x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %g = kiln.linear %x, %w1, %b1 : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %z = kiln.linear %g, %w2, %b2 : (tensor<?x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %y, %h, %z : tensor<?x8xf32>, tensor<?x16xf32>, tensor<?x8xf32>
}
