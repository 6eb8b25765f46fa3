func.func @param_dynamic() -> tensor<?x4xf32> {
  %w = kiln.param "w" : tensor<?x4xf32>
  return %w : tensor<?x4xf32>
}
