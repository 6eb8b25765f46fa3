func.func @linear_tiles(%x: tensor<?x8xf32>) -> tensor<?x10xf32> {
  %w = kiln.param "w" : tensor<256x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<256x8xf32>) -> tensor<?x256xf32>
  %w2 = kiln.param "w2" : tensor<10x256xf32>
  %y = kiln.linear %h, %w2 : (tensor<?x256xf32>, tensor<10x256xf32>) -> tensor<?x10xf32>
  return %y : tensor<?x10xf32>
}
