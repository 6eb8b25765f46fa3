func.func @shared_result_stays(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = kiln.param "w" : tensor<8x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r = kiln.relu %h : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %s = kiln.add %r, %h : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %s : tensor<?x8xf32>
}
