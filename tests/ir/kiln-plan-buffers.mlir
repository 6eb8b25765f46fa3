// RUN: kiln-opt %s --kiln-outline-kernels --kiln-plan-buffers | FileCheck %s

// Parameters are buffers 0.., then inputs/outputs, then arena slots. The returned value is
// computed in its output buffer (2); the intermediate gets arena slot 3, live over kernels
// 0..1, sized 4*8 bytes per L. The reshape is a view of its input's buffer.
// CHECK-LABEL: module attributes {kiln.io = ["x", "y"], kiln.params = ["w"], kiln.states = []}
// CHECK: func.func @forward(%arg0: tensor<?x8xf32> {kiln.buffer = 1 : i64
// CHECK-SAME: kiln.arena = [#kiln.arena_slot<bytes = 32, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 0, last = 1>]
// CHECK: kiln.param "w" {kiln.buffer = 0 : i64
// CHECK: kiln.relu {{.*}}kiln.buffer = 3 : i64{{.*}}kiln.syms = array<i64: 0, -1>
// CHECK: kiln.linear {{.*}}kiln.buffer = 2 : i64
// CHECK: kiln.reshape {{.*}}kiln.buffer = 2 : i64{{.*}}kiln.syms = array<i64: 0, -1, -1>
module {
  func.func @forward(%x: tensor<?x8xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x4x4xf32> {kiln.name = "y"}) {
    %w = kiln.param "w" : tensor<16x8xf32>
    %a = kiln.relu %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %h = kiln.linear %a, %w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
    %r = kiln.reshape %h : (tensor<?x16xf32>) -> tensor<?x4x4xf32>
    return %r : tensor<?x4x4xf32>
  }
}
