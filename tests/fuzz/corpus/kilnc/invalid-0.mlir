func.func @linear_features(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %w = kiln.param "w" : tensor<16x4xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<16x4xf32>) -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}
