func.func @relu_and_erf(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = kiln.param "w" : tensor<8x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r = kiln.relu %h : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %h2 = kiln.linear %r, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %g = kiln.gelu %h2 : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %g : tensor<?x8xf32>
}
