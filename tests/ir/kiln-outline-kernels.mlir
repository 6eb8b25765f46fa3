// RUN: kiln-opt %s --kiln-outline-kernels=target=x86-64-avx512 | FileCheck %s

// Equal ops get one kernel name (same spec, same hash); a different shape gets another;
// reshapes and parameters are not kernels.
// CHECK-LABEL: func.func @kernels
// CHECK-NOT: kiln.param {{.*}}kiln.kernel
// CHECK: kiln.relu %{{.*}}kiln.kernel = "[[RELU:kiln_relu_[0-9a-f]+]]", kiln.kernel_spec = "relu|?x8:f32->?x8:f32"
// CHECK: kiln.relu %{{.*}}kiln.kernel = "[[RELU]]"
// CHECK: kiln.linear {{.*}}kiln.kernel_spec = "linear;act=none;layout=out_in|?x8:f32,16x8:f32->?x16:f32"
// CHECK-NOT: kiln.reshape {{.*}}kiln.kernel
func.func @kernels(%x: tensor<?x8xf32>) -> tensor<?x4x4xf32> {
  %a = kiln.relu %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %b = kiln.relu %a : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %w = kiln.param "w" : tensor<16x8xf32>
  %h = kiln.linear %b, %w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %r = kiln.reshape %h : (tensor<?x16xf32>) -> tensor<?x4x4xf32>
  return %r : tensor<?x4x4xf32>
}
