// RUN: gpt2-compile --layers 2 --d-model 64 --heads 4 --vocab 100 --ctx 64 --compile-to kernels --emit mlir -o - --quiet | FileCheck %s
// RUN: gpt2-compile --layers 2 --d-model 64 --heads 4 --vocab 100 --ctx 64 --emit cost -o - --quiet | FileCheck %s --check-prefix=COST

// GPT-2's kernels phase has no copy kernel: c_attn's output is split into q, k and v and their
// heads by strided views (kiln-fold-views), attention writes its heads straight into the rows
// c_proj reads, and prefill's last row is a view too. (This file's own text is not read: the
// model is the example's.)
// CHECK-LABEL: func.func @forward
// CHECK-NOT: kiln.kernel = "kiln_{{(slice|transpose|concat)}}_
// CHECK: kiln.attention {{.*}}kiln.kernel_spec = "attention;{{.*}}|4x?x16:f32/16,192,1,4x?x16:f32/16,192,1,4x?x16:f32/16,192,1->4x?x16:f32/16,64,1"
// CHECK-NOT: kiln.kernel = "kiln_{{(slice|transpose|concat)}}_
// CHECK-LABEL: func.func @prefill
// CHECK-NOT: kiln.kernel = "kiln_{{(slice|transpose|concat)}}_
// CHECK: kiln.slice {{.*}}last_sym = 2, last_stride = 64>
// CHECK-NOT: kiln.kernel = "kiln_{{(slice|transpose|concat)}}_
// CHECK-LABEL: func.func @decode
// CHECK-NOT: kiln.kernel = "kiln_{{(slice|transpose|concat)}}_
// CHECK: return

// The cost report lists no slice or transpose.
// COST: == entry forward
// COST-NOT: {{^[0-9]+ +(slice|transpose)}}
// COST: == entry decode
// COST-NOT: {{^[0-9]+ +(slice|transpose)}}
// COST: total:
