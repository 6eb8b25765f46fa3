// RUN: kiln-opt %s --kiln-differentiate --kiln-apply-optimizer | FileCheck %s

// A training step: each gradient's kiln.all_reduce (the sum over the ranks of a data parallel run, weighted by
// their shares of the batch) started as soon as the backward has it, and waited for before the optimizer; then the step counter, the learning rate (its peak a state, which --lr sets) and the gradients' sum of squares, then
// per parameter one kiln.adamw_step (the parameter and its two moments, in place); the bias (in no_decay) gets
// weight_decay 0. The results are the loss, lr and grad_sumsq: no gradient leaves the entry.
// CHECK-LABEL: func.func @step
// CHECK-SAME: -> (tensor<1xf32> {kiln.name = "loss"}, tensor<1xf32> {kiln.name = "lr"}, tensor<1xf32> {kiln.name = "grad_sumsq"})
// CHECK-NOT: kiln.train
// CHECK: %[[GW:.*]] = kiln.weight_grad
// CHECK-NEXT: %[[SW0:.*]] = kiln.all_reduce %[[GW]] : (tensor<5x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[GB:.*]] = kiln.reduce_rows
// CHECK-NEXT: %[[SB0:.*]] = kiln.all_reduce %[[GB]] : (tensor<5xf32>) -> tensor<5xf32>
// CHECK-NEXT: %[[RW:.*]] = kiln.all_reduce_wait %[[SW0]]
// CHECK-NEXT: %[[RB:.*]] = kiln.all_reduce_wait %[[SB0]]
// CHECK-NOT: kiln.all_reduce
// CHECK: %[[S:.*]] = kiln.state "optimizer.step" : tensor<1xf32>
// CHECK: %[[T:.*]] = kiln.step_count %[[S]]
// CHECK: %[[PEAK:.*]] = kiln.state "optimizer.lr" : tensor<1xf32>
// CHECK: %[[LR:.*]] = kiln.learning_rate %[[T]], %[[PEAK]] {decay_steps = 100 : i64, lr = 1.000000e-03 : f32, min_ratio = 1.000000e-01 : f32, warmup = 10 : i64}
// CHECK: %[[SW:.*]] = kiln.sum_squares %[[RW]]
// CHECK: %[[SB:.*]] = kiln.sum_squares %[[RB]]
// CHECK: %[[SUM:.*]] = kiln.add %[[SW]], %[[SB]]
// CHECK: %[[MW:.*]] = kiln.state "optimizer.m.w" : tensor<5x4xf32>
// CHECK: %[[VW:.*]] = kiln.state "optimizer.v.w" : tensor<5x4xf32>
// CHECK: kiln.adamw_step %{{.*}}, %[[MW]], %[[VW]], %[[RW]], %[[SUM]], %[[T]], %[[LR]] {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, clip_norm = 1.000000e+00 : f32, eps = 9.99999993E-9 : f32, weight_decay = 0.00999999977 : f32}
// CHECK: kiln.adamw_step %{{.*}}, %{{.*}}, %{{.*}}, %[[RB]], {{.*}}weight_decay = 0.000000e+00 : f32}
// CHECK: return %{{.*}}, %[[LR]], %[[SUM]]
func.func @step(%x: tensor<?x4xf32>, %t: tensor<?xi32>) -> (tensor<1xf32> {kiln.name = "loss"})
    attributes {kiln.differentiate, kiln.train = {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.999 : f32,
                eps = 1.0e-8 : f32, weight_decay = 0.01 : f32, clip_norm = 1.0 : f32, warmup = 10 : i64,
                decay_steps = 100 : i64, min_ratio = 0.1 : f32, no_decay = ["b"]}} {
  %w = kiln.param "w" : tensor<5x4xf32>
  %b = kiln.param "b" : tensor<5xf32>
  %l = kiln.linear %x, %w, %b : (tensor<?x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<?x5xf32>
  %loss = kiln.cross_entropy %l, %t : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}
