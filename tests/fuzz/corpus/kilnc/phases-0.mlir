module attributes {kiln.seq_bounds = array<i64: 64>, kiln.seq_names = ["L"]} {
func.func @attention_from_ops(%q: tensor<2x?x32xf32> {kiln.name = "q", kiln.syms = array<i64: -1, 0, -1>},
                              %k: tensor<2x?x32xf32> {kiln.name = "k", kiln.syms = array<i64: -1, 0, -1>},
                              %v: tensor<2x?x32xf32> {kiln.name = "v", kiln.syms = array<i64: -1, 0, -1>}) -> (tensor<2x?x32xf32> {kiln.name = "o"}) {
  %s = kiln.batch_matmul %q, %k {transpose_b = true} : (tensor<2x?x32xf32>, tensor<2x?x32xf32>) -> tensor<2x?x?xf32>
  %t = kiln.scale %s {factor = 0.176776692 : f32} : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %m = kiln.mask %t  : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %u = kiln.add %t, %m : (tensor<2x?x?xf32>, tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %p = kiln.softmax %u : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %o = kiln.batch_matmul %p, %v : (tensor<2x?x?xf32>, tensor<2x?x32xf32>) -> tensor<2x?x32xf32>
  return %o : tensor<2x?x32xf32>
}
}
