// RUN: kiln-opt %s --kiln-outline-kernels --kiln-plan-buffers | FileCheck %s
// RUN: kiln-opt %s --kiln-outline-kernels --kiln-plan-buffers --kiln-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// An attention with an lse result (kiln-differentiate's, for the backward): one kernel with two
// outputs. Its spec lists both results; the lse gets an arena slot of its own ([2, L] f32: 8
// bytes per L, live until the gradient reads it), named by kiln.more_buffers; the kernel call
// passes the three operands' views, then the output's and the lse's.
// CHECK: kiln.arena = [#kiln.arena_slot<bytes = 8, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 0, last = 1>]
// CHECK: %[[O:[^,]*]], %[[LSE:[^ ]*]] = kiln.attention {{.*}}kiln.buffer = 1 : i64
// CHECK-SAME: kiln.kernel_spec = "attention;mask=causal;scale=0.5|2x?x4:f32,2x?x4:f32,2x?x4:f32->2x?x4:f32,2x?:f32"
// CHECK-SAME: kiln.more_buffers = array<i64: 3>
// CHECK: kiln.attention_grad {{.*}}, %[[O]], %{{.*}}, %[[LSE]] {kiln.buffer = 2 : i64
// LLVM: llvm.call @kiln_attention_{{[0-9a-f]+}}(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
module {
  func.func @forward(%q: tensor<2x?x4xf32> {kiln.name = "q", kiln.syms = array<i64: -1, 0, -1>}) -> (tensor<2x?x4xf32> {kiln.name = "o"}, tensor<2x?x4xf32> {kiln.name = "y"}) {
    %o, %lse = kiln.attention %q, %q, %q {mask = #kiln.mask<causal>, scale = 5.000000e-01 : f32} : (tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> (tensor<2x?x4xf32>, tensor<2x?xf32>)
    %g = kiln.attention_grad %q, %q, %q, %o, %q, %lse {mask = #kiln.mask<causal>, scale = 5.000000e-01 : f32, wrt = #kiln.attention_wrt<query>} : (tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?xf32>) -> tensor<2x?x4xf32>
    return %o, %g : tensor<2x?x4xf32>, tensor<2x?x4xf32>
  }
}
