func.func @gelu_folds(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %w = kiln.param "w" : tensor<16x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %g = kiln.gelu %h {approximate = #kiln.gelu<tanh>} : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}
