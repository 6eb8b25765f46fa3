// RUN: kiln-opt %s --split-input-file --kiln-assign-precision=precision=bf16 | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-assign-precision | FileCheck %s --check-prefix=MODULE
// RUN: kiln-opt %s --split-input-file --kiln-assign-precision=precision=f32 | FileCheck %s --check-prefix=F32
// RUN: not kiln-opt %s --split-input-file --kiln-assign-precision=precision=fp8 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: kiln-assign-precision: unknown precision 'fp8' (f32 or bf16)

// bf16: the GEMMs' schedules say so, a decision already there is kept, other ops and weight
// gradients are left alone.
// CHECK-LABEL: func.func @gemms
// CHECK: kiln.linear {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// CHECK: kiln.matmul {{.*}}kiln.schedule = #kiln.schedule<tile_n = 64, precision = f32>
// CHECK: kiln.relu
// CHECK-NOT: precision
// CHECK: kiln.weight_grad
// CHECK-NOT: precision
// CHECK: return
// MODULE-LABEL: func.func @gemms
// MODULE-NOT: precision = bf16
// F32-NOT: precision = bf16
func.func @gemms(%x: tensor<?x16xf32>, %w: tensor<16x16xf32>, %g: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<16x16xf32>) {
  %y = kiln.linear %x, %w : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
  %z = kiln.matmul %y, %w {kiln.schedule = #kiln.schedule<tile_n = 64, precision = f32>} : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
  %r = kiln.relu %z : (tensor<?x16xf32>) -> tensor<?x16xf32>
  %dw = kiln.weight_grad %x, %g : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<16x16xf32>
  return %r, %dw : tensor<?x16xf32>, tensor<16x16xf32>
}

// -----

// The module's kiln.precision (the DSL's Model::set_precision) when the option is not given;
// the option overrides it.
// CHECK-LABEL: func.func @from_module
// CHECK: precision = bf16
// MODULE-LABEL: func.func @from_module
// MODULE: kiln.linear {{.*}}kiln.schedule = #kiln.schedule<precision = bf16>
// F32-LABEL: func.func @from_module
// F32-NOT: precision
module attributes {kiln.precision = "bf16"} {
  func.func @from_module(%x: tensor<?x16xf32>, %w: tensor<16x16xf32>) -> tensor<?x16xf32> {
    %y = kiln.linear %x, %w : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
    return %y : tensor<?x16xf32>
  }
}
