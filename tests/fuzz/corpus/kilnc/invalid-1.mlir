func.func @linear_layout(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %w = kiln.param "w" : tensor<16x8xf32>
  %h = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<sideways>} : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}
