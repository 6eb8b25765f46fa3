module attributes {kiln.seq_bounds = array<i64: 128>, kiln.seq_names = ["L"]} {
func.func @ffn(%x: tensor<?x48xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x48xf32> {kiln.name = "y"}) {
  %w1 = kiln.param "w1" : tensor<48x200xf32>
  %b1 = kiln.param "b1" : tensor<200xf32>
  %w2 = kiln.param "w2" : tensor<200x48xf32>
  %b2 = kiln.param "b2" : tensor<48xf32>
  %h = kiln.linear %x, %w1, %b1 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x48xf32>, tensor<48x200xf32>, tensor<200xf32>) -> tensor<?x200xf32>
  %a = kiln.gelu %h {approximate = #kiln.gelu<tanh>} : (tensor<?x200xf32>) -> tensor<?x200xf32>
  %y = kiln.linear %a, %w2, %b2 {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x200xf32>, tensor<200x48xf32>, tensor<48xf32>) -> tensor<?x48xf32>
  %r = kiln.add %x, %y : (tensor<?x48xf32>, tensor<?x48xf32>) -> tensor<?x48xf32>
  return %r : tensor<?x48xf32>
}
}
