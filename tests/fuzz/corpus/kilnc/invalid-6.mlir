func.func @layer_norm_gamma(%x: tensor<?x8xf32>, %g: tensor<7xf32>, %b: tensor<8xf32>) -> tensor<?x8xf32> {
  %y = kiln.layer_norm %x, %g, %b : (tensor<?x8xf32>, tensor<7xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
