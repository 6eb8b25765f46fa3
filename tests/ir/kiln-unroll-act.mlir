// RUN: kiln-opt %s --kiln-unroll-act | FileCheck %s
// RUN: kiln-opt %s --kiln-unroll-act --kiln-differentiate | FileCheck %s --check-prefix=GRAD

// In an entry to differentiate, a recurrent step with ACT becomes max_steps copies of its step
// in straight code, each between act_input and act_update with its step number (a kiln.fill of
// i32), its parameters read once for all; the results read the last carry. Other entries keep kiln.recurrent (kiln-lower-act's).
// CHECK-LABEL: func.func @train
// CHECK: %[[POS:.*]] = kiln.sinusoidal_positions %arg0
// CHECK: %[[C0:.*]] = kiln.act_init %arg0 : (tensor<?x16xf32>) -> tensor<?x36xf32>
// CHECK: %[[W1:.*]] = kiln.param "w1"
// CHECK-NOT: kiln.param
// CHECK: %[[T0:.*]] = kiln.fill {value = 0.000000e+00 : f32} : tensor<1xi32>
// CHECK-NEXT: %[[X0:.*]] = kiln.act_input %[[C0]], %[[POS]], %[[T0]]
// CHECK: kiln.linear %[[X0]], %[[W1]]
// CHECK: %[[Y0:.*]] = kiln.relu
// CHECK-NEXT: %[[C1:.*]] = kiln.act_update %[[C0]], %[[X0]], %[[Y0]], %{{.*}}, %{{.*}}, %[[T0]] {max_steps = 3 : i64, threshold = 9.900000e-01 : f32}
// CHECK: %[[T1:.*]] = kiln.fill {value = 1.000000e+00 : f32} : tensor<1xi32>
// CHECK-NEXT: %[[X1:.*]] = kiln.act_input %[[C1]], %[[POS]], %[[T1]]
// CHECK: kiln.linear %[[X1]], %[[W1]]
// CHECK: %[[Y1:.*]] = kiln.relu
// CHECK-NEXT: %[[C2:.*]] = kiln.act_update %[[C1]], %[[X1]], %[[Y1]], %{{.*}}, %{{.*}}, %[[T1]]
// CHECK: %[[T2:.*]] = kiln.fill {value = 2.000000e+00 : f32} : tensor<1xi32>
// CHECK-NEXT: %[[X2:.*]] = kiln.act_input %[[C2]], %[[POS]], %[[T2]]
// CHECK: %[[Y2:.*]] = kiln.relu
// CHECK-NEXT: %[[C3:.*]] = kiln.act_update %[[C2]], %[[X2]], %[[Y2]], %{{.*}}, %{{.*}}, %[[T2]]
// CHECK-NOT: kiln.act_update
// CHECK: kiln.act_output %[[C3]] {field = #kiln.act_field<hidden>}
// CHECK: %[[P:.*]] = kiln.act_output %[[C3]] {field = #kiln.act_field<ponder>}
// CHECK: kiln.act_output %[[C3]] {field = #kiln.act_field<steps>}
// CHECK: kiln.act_output %[[C3]] {field = #kiln.act_field<iterations>}
// CHECK-NOT: kiln.recurrent
// CHECK: kiln.mean %[[P]]
// CHECK-LABEL: func.func @infer
// CHECK: kiln.recurrent
// CHECK-NOT: kiln.act_update

// The backward: one act_update_grad per step and operand, last step first; the mean's gradient.
// GRAD-LABEL: func.func @train
// GRAD: kiln.mean_grad
// GRAD-COUNT-3: kiln.act_update_grad {{.*}} {wrt = #kiln.act_wrt<halt_bias>}
// GRAD-NOT: kiln.act_update_grad
module attributes {kiln.seq_names = ["L"], kiln.seq_bounds = array<i64: 64>} {
  func.func @train(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<1xf32> {kiln.name = "loss"})
      attributes {kiln.differentiate} {
    %w = kiln.param "halt.weight" : tensor<16xf32>
    %b = kiln.param "halt.bias" {init = #kiln.init<ones>} : tensor<1xf32>
    %h, %p, %n, %it = kiln.recurrent %x, %w, %b {max_steps = 3 : i64, threshold = 0.99 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
    ^bb0(%s: tensor<?x16xf32>):
      %w1 = kiln.param "w1" : tensor<16x16xf32>
      %y = kiln.linear %s, %w1 : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
      %r = kiln.relu %y : (tensor<?x16xf32>) -> tensor<?x16xf32>
      kiln.yield %r : tensor<?x16xf32>
    }
    %m = kiln.mean %p : (tensor<?xf32>) -> tensor<1xf32>
    return %m : tensor<1xf32>
  }
  func.func @infer(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "hidden"}) {
    %w = kiln.param "halt.weight" : tensor<16xf32>
    %b = kiln.param "halt.bias" {init = #kiln.init<ones>} : tensor<1xf32>
    %h, %p, %n, %it = kiln.recurrent %x, %w, %b {max_steps = 3 : i64, threshold = 0.99 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
    ^bb0(%s: tensor<?x16xf32>):
      %r = kiln.relu %s : (tensor<?x16xf32>) -> tensor<?x16xf32>
      kiln.yield %r : tensor<?x16xf32>
    }
    return %h : tensor<?x16xf32>
  }
}
