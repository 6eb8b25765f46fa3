// RUN: kiln-opt %s --kiln-lower-act | FileCheck %s
// RUN: kiln-opt %s --kiln-lower-act --kiln-phase-tiled --kiln-phase-scheduled --kiln-phase-kernels | FileCheck %s --check-prefix=PLAN

// A recurrent step with ACT becomes one loop: the position signal and the carry before it, the
// step's ops once inside it between act_input and act_update, the results read after it.
// CHECK-LABEL: func.func @ut
// CHECK: %[[POS:.*]] = kiln.sinusoidal_positions %arg0
// CHECK: %[[C0:.*]] = kiln.act_init %arg0 : (tensor<?x16xf32>) -> tensor<?x36xf32>
// CHECK: %[[L:.*]] = kiln.loop %[[C0]] {max_steps = 4 : i64}
// CHECK-NEXT: ^bb0(%[[C:.*]]: tensor<?x36xf32>, %[[T:.*]]: tensor<1xi32>):
// CHECK-NEXT: %[[X:.*]] = kiln.act_input %[[C]], %[[POS]], %[[T]]
// CHECK: %[[Y:.*]] = kiln.relu
// CHECK-NEXT: %[[N:.*]] = kiln.act_update %[[C]], %[[X]], %[[Y]], %{{.*}}, %{{.*}}, %[[T]] {max_steps = 4 : i64, threshold = 9.900000e-01 : f32}
// CHECK-NEXT: %[[F:.*]] = kiln.act_running %[[N]]
// CHECK-NEXT: kiln.yield %[[F]], %[[N]] : tensor<1xi32>, tensor<?x36xf32>
// CHECK: kiln.act_output %[[L]] {field = #kiln.act_field<hidden>}
// CHECK: kiln.act_output %[[L]] {field = #kiln.act_field<ponder>}
// CHECK: kiln.act_output %[[L]] {field = #kiln.act_field<steps>}
// CHECK: kiln.act_output %[[L]] {field = #kiln.act_field<iterations>} : (tensor<?x36xf32>) -> tensor<1xi32>
// CHECK-NOT: kiln.recurrent

// The carry, the loop and its result share one buffer; the step number gets its own 4-byte slot.
// Kernels: 0 positions, 1 act_init, 2 act_input, 3 linear, 4 relu, 5 act_update, 6 act_running,
// 7-10 act_output. The position signal (made before the loop, read inside) lives to the loop's
// last kernel, 6; the carry ([L, 2d + 4]: 144 bytes a row) from 1 to the last act_output, 10; the yielded carry and flag to 6;
// the step from the loop's first kernel to its last.
// PLAN: kiln.arena = [#kiln.arena_slot<bytes = 64, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 0, last = 6>, #kiln.arena_slot<bytes = 144, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 1, last = 10>, #kiln.arena_slot<bytes = 64, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 2, last = 5>, #kiln.arena_slot<bytes = 64, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 3, last = 4>, #kiln.arena_slot<bytes = 64, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 4, last = 5>, #kiln.arena_slot<bytes = 144, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 5, last = 6>, #kiln.arena_slot<bytes = 4, powers = [0, 0, 0, 0, 0, 0, 0, 0], first = 6, last = 6>, #kiln.arena_slot<bytes = 4, powers = [0, 0, 0, 0, 0, 0, 0, 0], first = 2, last = 6>]
// PLAN: %[[C0:.*]] = kiln.act_init {{.*}}kiln.buffer = [[CB:[0-9]+]] : i64
// PLAN: kiln.loop %[[C0]] {kiln.buffer = [[CB]] : i64, kiln.step_buffer = {{[0-9]+}} : i64
module attributes {kiln.seq_names = ["L"], kiln.seq_bounds = array<i64: 64>} {
  func.func @ut(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "hidden"}, tensor<?xf32> {kiln.name = "ponder"}, tensor<?xi32> {kiln.name = "steps"}, tensor<1xi32> {kiln.name = "iterations"}) {
    %w = kiln.param "halt.weight" : tensor<16xf32>
    %b = kiln.param "halt.bias" {init = #kiln.init<ones>} : tensor<1xf32>
    %h, %p, %n, %it = kiln.recurrent %x, %w, %b {max_steps = 4 : i64, threshold = 0.99 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
    ^bb0(%s: tensor<?x16xf32>):
      %w1 = kiln.param "w1" : tensor<16x16xf32>
      %y = kiln.linear %s, %w1 : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
      %r = kiln.relu %y : (tensor<?x16xf32>) -> tensor<?x16xf32>
      kiln.yield %r : tensor<?x16xf32>
    }
    return %h, %p, %n, %it : tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>
  }
}
