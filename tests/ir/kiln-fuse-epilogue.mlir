// RUN: kiln-opt %s --kiln-fuse-epilogue --split-input-file | FileCheck %s

// An activation that is a linear's only user is folded into the linear and disappears.
// CHECK-LABEL: func.func @gelu_folds
// CHECK: kiln.linear {{.*}}activation = #kiln.activation<gelu_tanh>
// CHECK-NOT: kiln.gelu
func.func @gelu_folds(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %w = kiln.param "w" : tensor<16x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %g = kiln.gelu %h {approximate = #kiln.gelu<tanh>} : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}

// -----

// ReLU folds too, and the exact GELU keeps its form.
// CHECK-LABEL: func.func @relu_and_erf
// CHECK: kiln.linear {{.*}}activation = #kiln.activation<relu>
// CHECK: kiln.linear {{.*}}activation = #kiln.activation<gelu_erf>
// CHECK-NOT: kiln.relu
func.func @relu_and_erf(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = kiln.param "w" : tensor<8x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r = kiln.relu %h : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %h2 = kiln.linear %r, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %g = kiln.gelu %h2 : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %g : tensor<?x8xf32>
}

// -----

// A linear whose result is also used elsewhere must stay unfused: the raw value is needed.
// CHECK-LABEL: func.func @shared_result_stays
// CHECK: kiln.linear
// CHECK-NOT: activation
// CHECK: kiln.relu
func.func @shared_result_stays(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = kiln.param "w" : tensor<8x8xf32>
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r = kiln.relu %h : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %s = kiln.add %r, %h : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %s : tensor<?x8xf32>
}
