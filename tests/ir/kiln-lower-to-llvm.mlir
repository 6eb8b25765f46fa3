// RUN: kiln-opt %s --kiln-phase-kernels --kiln-lower-to-llvm | FileCheck %s

// The entry calls each kernel with halide_buffer_t views, returns the first failure with the
// kernel's index, and no kiln or func op is left.
// CHECK: llvm.func @kiln_entry_forward(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32
// CHECK: llvm.call @kiln_relu_
// CHECK: llvm.icmp "ne"
// CHECK: llvm.cond_br
// CHECK: llvm.call @kiln_linear_
// CHECK: llvm.return
// CHECK-NOT: kiln.
// CHECK-NOT: func.func
// CHECK: llvm.func @kiln_relu_{{[0-9a-f]+}}(!llvm.ptr, !llvm.ptr) -> i32
// CHECK: llvm.func @kiln_linear_{{[0-9a-f]+}}(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
module {
  func.func @forward(%x: tensor<?x8xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "y"}) {
    %w = kiln.param "w" : tensor<16x8xf32>
    %a = kiln.relu %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %h = kiln.linear %a, %w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
    return %h : tensor<?x16xf32>
  }
}
