// RUN: gpt2-compile --layers 2 --d-model 32 --heads 2 --vocab 64 --ctx 32 --train --train-aux-layers --train-ahead 2 --compile-to input --emit mlir -o - --quiet | FileCheck %s
// RUN: gpt2-compile --layers 2 --d-model 32 --heads 2 --vocab 64 --ctx 32 --train --train-aux-layers --train-ahead 2 --compile-to kernels --emit mlir -o - --quiet | FileCheck %s --check-prefix=KERNELS

// Auxiliary losses as the DSL states them (this file's own text is not read: the model is the
// example's). Block 1 of 2 predicts through the shared head until a quarter of the steps: its
// term is multiplied by kiln.loss_weight over the step counter and the run's total; the head
// two ahead reads the input targets.2, which --train fills (kiln.ahead = 2).
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME: kiln.ahead = 2 : i64, kiln.ignore_id = -1 : i64, kiln.name = "targets.2"
// CHECK: %[[S:.*]] = kiln.state "optimizer.step" : tensor<1xf32>
// CHECK: %[[T:.*]] = kiln.state "optimizer.steps" : tensor<1xf32>
// CHECK: %[[W:.*]] = kiln.loss_weight %[[S]], %[[T]] {until = 2.500000e-01 : f32, weight = 1.000000e+00 : f32}
// CHECK: kiln.mul %{{.*}}, %[[W]]
// CHECK: kiln.scale %{{.*}} {factor = 5.000000e-01 : f32}
// The evaluation entry is the next-token loss alone.
// CHECK-LABEL: func.func @eval(
// CHECK-NOT: kiln.loss_weight
// CHECK-LABEL: func.func @train_step(
// CHECK: kiln.loss_weight

// The training step reads the counter in its forward, before the optimizer increments it.
// KERNELS-LABEL: func.func @train_step(
// KERNELS: kiln.loss_weight {{.*}}kiln.kernel_spec = "loss_weight;{{.*}};until=0.25;weight=1|1:f32,1:f32->1:f32"
// KERNELS: kiln.step_count
// KERNELS: kiln.adamw_step
