func.func @matmul_inner(%a: tensor<?x8xf32>, %b: tensor<4x16xf32>) -> tensor<?x16xf32> {
  %c = kiln.matmul %a, %b : (tensor<?x8xf32>, tensor<4x16xf32>) -> tensor<?x16xf32>
  return %c : tensor<?x16xf32>
}
