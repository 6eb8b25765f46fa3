// RUN: kiln-opt %s --split-input-file --kiln-fold-views | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-fold-views --kiln-outline-kernels --kiln-plan-buffers | FileCheck %s --check-prefix=PLAN
// RUN: kiln-opt %s --split-input-file --kiln-fold-views="gpu=1" | FileCheck %s --check-prefix=GPU

// A GPT-2 block's attention: the packed projection's output is split into q, k and v
// (slices), each split into heads (reshape + transpose): all read views of %qkv, with the row
// stride 3d = 48. merge_heads' transpose is written in place by the attention kernel (a write
// view with strides [head_dim, d, 1]) and the reshape after it is the plain [L, d] buffer.
// CHECK-LABEL: func.func @block
// CHECK: %[[QKV:.*]] = kiln.linear
// CHECK-NOT: kiln.view
// CHECK: kiln.slice %[[QKV]] {axis = 1 : i64, kiln.view = #kiln.view<kind = read, offset = 0, strides = [48, 1]>, offset = 0 : i64}
// CHECK: kiln.slice %[[QKV]] {axis = 1 : i64, kiln.view = #kiln.view<kind = read, offset = 16, strides = [48, 1]>, offset = 16 : i64}
// CHECK: kiln.slice %[[QKV]] {axis = 1 : i64, kiln.view = #kiln.view<kind = read, offset = 32, strides = [48, 1]>, offset = 32 : i64}
// CHECK: kiln.reshape {{.*}}kiln.view = #kiln.view<kind = read, offset = 0, strides = [48, 4, 1]>
// CHECK: kiln.transpose {{.*}}kiln.view = #kiln.view<kind = read, offset = 0, strides = [4, 48, 1]>
// CHECK: kiln.reshape {{.*}}kiln.view = #kiln.view<kind = read, offset = 16, strides = [48, 4, 1]>
// CHECK: kiln.transpose {{.*}}kiln.view = #kiln.view<kind = read, offset = 16, strides = [4, 48, 1]>
// CHECK: kiln.reshape {{.*}}kiln.view = #kiln.view<kind = read, offset = 32, strides = [48, 4, 1]>
// CHECK: kiln.transpose {{.*}}kiln.view = #kiln.view<kind = read, offset = 32, strides = [4, 48, 1]>
// CHECK: kiln.attention {{.*}}kiln.view = #kiln.view<kind = write, offset = 0, strides = [4, 16, 1]>
// CHECK: kiln.transpose {{.*}}kiln.view = #kiln.view<kind = placed, offset = 0, strides = [16, 4, 1]>
// CHECK: kiln.reshape
// CHECK-NOT: kiln.view
// CHECK: kiln.linear
// GPU-NOT: kiln.view
//
// One buffer for %qkv and its views (4), one for the attention's output and the merged heads
// (5), live from the attention kernel (index 1) to c_proj (2); only three kernels remain.
// PLAN-LABEL: func.func @block
// PLAN-SAME: kiln.arena = [#kiln.arena_slot<bytes = 192, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 0, last = 1>, #kiln.arena_slot<bytes = 64, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 1, last = 2>]
// PLAN: kiln.linear {{.*}}kiln.buffer = 4 : i64, kiln.kernel = "kiln_linear_
// PLAN-COUNT-9: kiln.buffer = 4 : i64
// PLAN-NOT: kiln.kernel =
// PLAN: kiln.attention {{.*}}kiln.buffer = 5 : i64, kiln.kernel = "kiln_attention_{{.*}}kiln.kernel_spec = "attention;{{.*}}|4x?x4:f32/4,48,1,4x?x4:f32/4,48,1,4x?x4:f32/4,48,1->4x?x4:f32/4,16,1"
// PLAN: kiln.transpose {{.*}}kiln.buffer = 5 : i64
// PLAN-NOT: kiln.kernel =
// PLAN: kiln.reshape {{.*}}kiln.buffer = 5 : i64
// PLAN: kiln.linear {{.*}}kiln.buffer = 3 : i64, kiln.kernel = "kiln_linear_{{.*}}kiln.kernel_spec = "linear;{{.*}}|?x16:f32,16x16:f32->?x16:f32"
module {
  func.func @block(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "y"}) {
    %w = kiln.param "c_attn" : tensor<16x48xf32>
    %wo = kiln.param "c_proj" : tensor<16x16xf32>
    %qkv = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x16xf32>, tensor<16x48xf32>) -> tensor<?x48xf32>
    %q = kiln.slice %qkv {axis = 1 : i64, offset = 0 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %k = kiln.slice %qkv {axis = 1 : i64, offset = 16 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %v = kiln.slice %qkv {axis = 1 : i64, offset = 32 : i64} : (tensor<?x48xf32>) -> tensor<?x16xf32>
    %qr = kiln.reshape %q : (tensor<?x16xf32>) -> tensor<?x4x4xf32>
    %qh = kiln.transpose %qr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x4xf32>) -> tensor<4x?x4xf32>
    %kr = kiln.reshape %k : (tensor<?x16xf32>) -> tensor<?x4x4xf32>
    %kh = kiln.transpose %kr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x4xf32>) -> tensor<4x?x4xf32>
    %vr = kiln.reshape %v : (tensor<?x16xf32>) -> tensor<?x4x4xf32>
    %vh = kiln.transpose %vr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x4xf32>) -> tensor<4x?x4xf32>
    %a = kiln.attention %qh, %kh, %vh {mask = #kiln.mask<causal>, scale = 0.5 : f32} : (tensor<4x?x4xf32>, tensor<4x?x4xf32>, tensor<4x?x4xf32>) -> tensor<4x?x4xf32>
    %at = kiln.transpose %a {permutation = array<i64: 1, 0, 2>} : (tensor<4x?x4xf32>) -> tensor<?x4x4xf32>
    %m = kiln.reshape %at : (tensor<?x4x4xf32>) -> tensor<?x16xf32>
    %y = kiln.linear %m, %wo {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x16xf32>, tensor<16x16xf32>) -> tensor<?x16xf32>
    return %y : tensor<?x16xf32>
  }
}

// -----

// Kept as copy kernels: a head split whose result is returned (an output is dense), a slice
// whose result is returned, a transpose that moves the innermost dim (a view would
// gather along rows), and one whose operand has another user.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: kiln.view
// CHECK: return
module {
  func.func @kept(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<4x?x4xf32> {kiln.name = "h"}, tensor<1x16xf32> {kiln.name = "l"}, tensor<16x?xf32> {kiln.name = "t"}, tensor<4x?x4xf32> {kiln.name = "u"}) {
    %r = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %rr = kiln.reshape %r : (tensor<?x16xf32>) -> tensor<?x4x4xf32>
    %h = kiln.transpose %rr {permutation = array<i64: 1, 0, 2>} : (tensor<?x4x4xf32>) -> tensor<4x?x4xf32>
    %l = kiln.slice %r {axis = 0 : i64, offset = -1 : i64} : (tensor<?x16xf32>) -> tensor<1x16xf32>
    %t = kiln.transpose %r {permutation = array<i64: 1, 0>} : (tensor<?x16xf32>) -> tensor<16x?xf32>
    %a = kiln.relu %h : (tensor<4x?x4xf32>) -> tensor<4x?x4xf32>
    %at = kiln.transpose %a {permutation = array<i64: 1, 0, 2>} : (tensor<4x?x4xf32>) -> tensor<?x4x4xf32>
    %u = kiln.add %a, %a : (tensor<4x?x4xf32>, tensor<4x?x4xf32>) -> tensor<4x?x4xf32>
    %m = kiln.reshape %at : (tensor<?x4x4xf32>) -> tensor<?x16xf32>
    %s = kiln.relu %m : (tensor<?x16xf32>) -> tensor<?x16xf32>
    return %h, %l, %t, %u : tensor<4x?x4xf32>, tensor<1x16xf32>, tensor<16x?xf32>, tensor<4x?x4xf32>
  }
}

// -----

// The last row of a sequence (GPT-2's prefill head): a view whose offset grows with the
// length, (L0 - 1) * 16 elements past the buffer's start, set at run time.
// CHECK-LABEL: func.func @last_row
// CHECK: kiln.slice {{.*}}kiln.view = #kiln.view<kind = read, offset = 0, strides = [16, 1], last_sym = 0, last_stride = 16>
// PLAN-LABEL: func.func @last_row
// PLAN: kiln.slice
// PLAN-NOT: kiln.kernel =
// PLAN-SAME: -> tensor<1x16xf32>
module {
  func.func @last_row(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<1x16xf32> {kiln.name = "y"}) {
    %r = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %l = kiln.slice %r {axis = 0 : i64, offset = -1 : i64} : (tensor<?x16xf32>) -> tensor<1x16xf32>
    %y = kiln.relu %l : (tensor<1x16xf32>) -> tensor<1x16xf32>
    return %y : tensor<1x16xf32>
  }
}

// -----

// A state is written in place by cache writes: a slice of it taken before the write is read
// only when its user runs, after the write, so it keeps its copy kernel.
// CHECK-LABEL: func.func @state
// CHECK-NOT: kiln.view
// CHECK: return
module {
  func.func @state(%v: tensor<4x?x16xf32> {kiln.name = "v", kiln.syms = array<i64: -1, 0, -1>}) -> (tensor<4x8x16xf32> {kiln.name = "y"}) {
    %s = kiln.state "cache" : tensor<4x8x16xf32>
    %t = kiln.slice %s {axis = 2 : i64, offset = 0 : i64} : (tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
    %w = kiln.cache_write %s, %v : (tensor<4x8x16xf32>, tensor<4x?x16xf32>) -> tensor<4x8x16xf32>
    %y = kiln.add %t, %w : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
    return %y : tensor<4x8x16xf32>
  }
}

// -----

// A concat of parts each written by its own kernel (GPT-2's backward: dq, dk and dv, head-major,
// concatenated into the gradient of c_attn's [L, 3d] output): every part's kernel writes its
// columns of the concat's buffer, through the head merge (a transpose) and the reshape; the
// concat runs no kernel. One arena slot holds the whole [L, 32].
// CHECK-LABEL: func.func @concat
// CHECK: kiln.relu {{.*}}kiln.view = #kiln.view<kind = write, offset = 0, strides = [4, 32, 1]>
// CHECK: kiln.transpose {{.*}}kiln.view = #kiln.view<kind = placed, offset = 0, strides = [32, 4, 1]>
// CHECK: kiln.reshape {{.*}}kiln.view = #kiln.view<kind = placed, offset = 0, strides = [32, 1]>
// CHECK: kiln.relu {{.*}}kiln.view = #kiln.view<kind = write, offset = 16, strides = [32, 1]>
// CHECK: kiln.concat {{.*}}kiln.view = #kiln.view<kind = placed, offset = 0, strides = [32, 1]>
// PLAN-LABEL: func.func @concat
// PLAN-SAME: kiln.arena = [#kiln.arena_slot<bytes = 128, powers = [1, 0, 0, 0, 0, 0, 0, 0], first = 0, last = 2>]
// PLAN: kiln.relu {{.*}}kiln.buffer = 4 : i64, kiln.kernel = "kiln_relu_{{.*}}kiln.kernel_spec = "relu|4x?x4:f32->4x?x4:f32/4,32,1"
// PLAN: kiln.transpose {{.*}}kiln.buffer = 4 : i64
// PLAN: kiln.reshape {{.*}}kiln.buffer = 4 : i64
// PLAN: kiln.relu {{.*}}kiln.buffer = 4 : i64, kiln.kernel = "kiln_relu_{{.*}}kiln.kernel_spec = "relu|?x16:f32->?x16:f32/32,1"
// PLAN-NOT: kiln.kernel =
// PLAN: kiln.concat {{.*}}kiln.buffer = 4 : i64
// PLAN: kiln.linear {{.*}}kiln.kernel =
module {
  func.func @concat(%x: tensor<4x?x4xf32> {kiln.name = "x", kiln.syms = array<i64: -1, 0, -1>}, %y: tensor<?x16xf32> {kiln.name = "y", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x8xf32> {kiln.name = "z"}) {
    %w = kiln.param "w" : tensor<32x8xf32>
    %a = kiln.relu %x : (tensor<4x?x4xf32>) -> tensor<4x?x4xf32>
    %at = kiln.transpose %a {permutation = array<i64: 1, 0, 2>} : (tensor<4x?x4xf32>) -> tensor<?x4x4xf32>
    %am = kiln.reshape %at : (tensor<?x4x4xf32>) -> tensor<?x16xf32>
    %b = kiln.relu %y : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %c = kiln.concat %am, %b {axis = 1 : i64} : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
    %z = kiln.linear %c, %w {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
    return %z : tensor<?x8xf32>
  }
}

// -----

// Concats that keep their kernel: a part with another user (a part's kernel cannot write two
// buffers), and a part that no kernel of its own computes (an input here).
// CHECK-LABEL: func.func @concat_kept
// CHECK-NOT: kiln.view
// CHECK: return
module {
  func.func @concat_kept(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x32xf32> {kiln.name = "a"}, tensor<?x16xf32> {kiln.name = "b"}, tensor<?x32xf32> {kiln.name = "c"}) {
    %r = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %s = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %a = kiln.concat %r, %s {axis = 1 : i64} : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
    %b = kiln.add %r, %x : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %t = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %c = kiln.concat %x, %t {axis = 1 : i64} : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
    return %a, %b, %c : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x32xf32>
  }
}
