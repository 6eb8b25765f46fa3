func.func @single_head(%q: tensor<?x32xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %s = kiln.matmul %q, %k {transpose_b = true} : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x?xf32>
  %p = kiln.softmax %s : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %o = kiln.matmul %p, %v : (tensor<?x?xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %o : tensor<?x32xf32>
}
