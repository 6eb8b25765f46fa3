// RUN: kiln-opt %s --split-input-file --verify-diagnostics
// What the verifiers reject, one case each.

func.func @linear_features(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %w = kiln.param "w" : tensor<16x4xf32>
  // expected-error @+1 {{expected input features (8) to equal weight in-features (4)}}
  %h = kiln.linear %x, %w : (tensor<?x8xf32>, tensor<16x4xf32>) -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}

// -----

func.func @param_dynamic() -> tensor<?x4xf32> {
  // expected-error @+1 {{expected a static shape for a parameter}}
  %w = kiln.param "w" : tensor<?x4xf32>
  return %w : tensor<?x4xf32>
}

// -----

func.func @matmul_inner(%a: tensor<?x8xf32>, %b: tensor<4x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expected lhs columns (8) to equal rhs contraction dim (4)}}
  %c = kiln.matmul %a, %b : (tensor<?x8xf32>, tensor<4x16xf32>) -> tensor<?x16xf32>
  return %c : tensor<?x16xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<4x?x16xf32>, %k: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> {
  // expected-error @+1 {{expected query head dim (16) to equal key head dim (8)}}
  %o = kiln.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<4x?x16xf32>, tensor<4x?x8xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  return %o : tensor<4x?x8xf32>
}

// -----

func.func @layer_norm_gamma(%x: tensor<?x8xf32>, %g: tensor<7xf32>, %b: tensor<8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{expected gamma length (7) to equal input width (8)}}
  %y = kiln.layer_norm %x, %g, %b : (tensor<?x8xf32>, tensor<7xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @reshape_count(%x: tensor<?x8xf32>) -> tensor<?x3x3xf32> {
  // expected-error @+1 {{expected the same number of elements}}
  %y = kiln.reshape %x : (tensor<?x8xf32>) -> tensor<?x3x3xf32>
  return %y : tensor<?x3x3xf32>
}

// -----

func.func @transpose_perm(%x: tensor<?x8xf32>) -> tensor<8x?xf32> {
  // expected-error @+1 {{expected a permutation}}
  %y = kiln.transpose %x {permutation = array<i64: 0, 0>} : (tensor<?x8xf32>) -> tensor<8x?xf32>
  return %y : tensor<8x?xf32>
}

// -----

func.func @slice_range(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{expected the slice [6, 10) to lie within 8}}
  %y = kiln.slice %x {axis = 1 : i64, offset = 6 : i64} : (tensor<?x8xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @embedding_ids(%t: tensor<10x4xf32>, %ids: tensor<?xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{expected i32 token ids}}
  %y = kiln.embedding %t, %ids : (tensor<10x4xf32>, tensor<?xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @add_broadcast(%a: tensor<?x8xf32>, %b: tensor<4xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{expected broadcast-compatible operands}}
  %y = kiln.add %a, %b : (tensor<?x8xf32>, tensor<4xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @unknown_op(%a: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{custom op 'kiln.flash' is unknown}}
  %y = kiln.flash %a : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @key_count_without_operand(%q: tensor<4x?x16xf32>) -> tensor<4x?x16xf32> {
  // expected-error @+1 {{expected a key count operand with key_count}}
  %a = kiln.attention %q, %q, %q {key_count, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  return %a : tensor<4x?x16xf32>
}

// -----

func.func @pattern_without_size(%q: tensor<4x?x16xf32>) -> tensor<4x?x16xf32> {
  // expected-error @+1 {{expected a positive pattern_size with mask strided}}
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<strided>, part = #kiln.part<union>, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  return %a : tensor<4x?x16xf32>
}

// -----

func.func @bad_summary(%q: tensor<4x?x16xf32>) -> tensor<4x?x16xf32> {
  // expected-error @+1 {{expected summary in [1, pattern_size] with mask fixed}}
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<fixed>, pattern_size = 8 : i64, summary = 9 : i64, part = #kiln.part<union>, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  return %a : tensor<4x?x16xf32>
}

// -----

func.func @ragged_layout(%q: tensor<4x?x16xf32>) -> tensor<4x?x16xf32> {
  // expected-error @+1 {{expected every layout row to have 2 characters '#' or '.', got "#x"}}
  %a = kiln.attention %q, %q, %q {mask = #kiln.mask<layout>, pattern_size = 8 : i64, layout = ["#.", "#x"], scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  return %a : tensor<4x?x16xf32>
}

// -----

func.func @pattern_cross_lengths(%q: tensor<4x8x16xf32>, %k: tensor<4x9x16xf32>) -> tensor<4x8x16xf32> {
  // expected-error @+1 {{query length}}
  %a = kiln.attention %q, %k, %k {mask = #kiln.mask<window>, pattern_size = 4 : i64, scale = 0.25 : f32} : (tensor<4x8x16xf32>, tensor<4x9x16xf32>, tensor<4x9x16xf32>) -> tensor<4x8x16xf32>
  return %a : tensor<4x8x16xf32>
}

// -----

func.func @lsh_odd_buckets(%q: tensor<4x?x16xf32>) -> tensor<4x?x16xf32> {
  %r = kiln.param "rot" : tensor<2x16x3xf32>
  // expected-error @+1 {{expected an even number of buckets, at least 2, got 7}}
  %a = kiln.lsh_attention %q, %q, %r {buckets = 7 : i64, hashes = 2 : i64, chunk = 8 : i64, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<2x16x3xf32>) -> tensor<4x?x16xf32>
  return %a : tensor<4x?x16xf32>
}

// -----

func.func @lsh_rotation_shape(%q: tensor<4x?x16xf32>) -> tensor<4x?x16xf32> {
  %r = kiln.param "rot" : tensor<2x16x5xf32>
  // expected-error @+1 {{expected rotation columns (5) to equal buckets / 2 (4)}}
  %a = kiln.lsh_attention %q, %q, %r {buckets = 8 : i64, hashes = 2 : i64, chunk = 8 : i64, scale = 0.25 : f32} : (tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<2x16x5xf32>) -> tensor<4x?x16xf32>
  return %a : tensor<4x?x16xf32>
}

// -----

func.func @recurrent_body_type(%x: tensor<?x16xf32>, %w: tensor<16xf32>, %b: tensor<1xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expected the body to yield one value of the state's type}}
  %h, %p, %n, %it = kiln.recurrent %x, %w, %b {max_steps = 4 : i64, threshold = 0.99 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
  ^bb0(%s: tensor<?x16xf32>):
    %y = kiln.slice %s {axis = 1 : i64, offset = 0 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
    kiln.yield %y : tensor<?x8xf32>
  }
  return %h : tensor<?x16xf32>
}

// -----

func.func @recurrent_threshold(%x: tensor<?x16xf32>, %w: tensor<16xf32>, %b: tensor<1xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expected the threshold in (0, 1)}}
  %h, %p, %n, %it = kiln.recurrent %x, %w, %b {max_steps = 4 : i64, threshold = 1.5 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
  ^bb0(%s: tensor<?x16xf32>):
    kiln.yield %s : tensor<?x16xf32>
  }
  return %h : tensor<?x16xf32>
}

// -----

func.func @recurrent_iterations_type(%x: tensor<?x16xf32>, %w: tensor<16xf32>, %b: tensor<1xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expected results hidden [L, d], ponder [L] f32, steps [L] i32 and iterations [1] i32}}
  %h, %p, %n, %it = kiln.recurrent %x, %w, %b {max_steps = 4 : i64, threshold = 0.99 : f32} : (tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>) -> (tensor<?x16xf32>, tensor<?xf32>, tensor<?xi32>, tensor<?xi32>) {
  ^bb0(%s: tensor<?x16xf32>):
    kiln.yield %s : tensor<?x16xf32>
  }
  return %h : tensor<?x16xf32>
}

// -----

func.func @act_output_iterations(%c: tensor<?x36xf32>) -> tensor<?xi32> {
  // expected-error @+1 {{expected the iterations result to be 'tensor<1xi32>', got 'tensor<?xi32>'}}
  %n = kiln.act_output %c {field = #kiln.act_field<iterations>} : (tensor<?x36xf32>) -> tensor<?xi32>
  return %n : tensor<?xi32>
}

// -----

func.func @act_carry_width(%c: tensor<?x35xf32>) -> tensor<1xi32> {
  // expected-error @+1 {{expected an ACT carry [L, 2d + 4]}}
  %f = kiln.act_running %c : (tensor<?x35xf32>) -> tensor<1xi32>
  return %f : tensor<1xi32>
}

// -----

func.func @loop_flag(%c: tensor<?x36xf32>) -> tensor<?x36xf32> {
  // expected-error @+1 {{expected the body to yield a flag (tensor<1xi32>) and the next carried value}}
  %r = kiln.loop %c {max_steps = 4 : i64} : (tensor<?x36xf32>) -> tensor<?x36xf32> {
  ^bb0(%a: tensor<?x36xf32>, %t: tensor<1xi32>):
    kiln.yield %a, %a : tensor<?x36xf32>, tensor<?x36xf32>
  }
  return %r : tensor<?x36xf32>
}

// -----

func.func @depthwise_even(%x: tensor<?x16xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expected an odd kernel size (weight dim 0), got 4}}
  %y = kiln.depthwise_conv %x, %w, %b : (tensor<?x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @param_panels() -> tensor<2x4x16xf32> {
  // expected-error @+1 {{expected 2 panels of 16 columns to hold panel_cols = 40 columns}}
  %w = kiln.param "w" {panel_cols = 40 : i64} : tensor<2x4x16xf32>
  return %w : tensor<2x4x16xf32>
}

// -----

func.func @linear_panels(%x: tensor<?x4xf32>) -> tensor<?x40xf32> {
  %w = kiln.param "w" {panel_cols = 32 : i64} : tensor<2x4x16xf32>
  // expected-error @+1 {{expected the weight's 2 panels of 16 columns to hold its 40 out-features}}
  %h = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<panels>} : (tensor<?x4xf32>, tensor<2x4x16xf32>) -> tensor<?x40xf32>
  return %h : tensor<?x40xf32>
}

// -----

func.func @ffn_panels_rank(%x: tensor<?x4xf32>, %w1: tensor<4x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x4xf32>, %b2: tensor<4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{expected the W1 in panels to have rank 3, got 'tensor<4x16xf32>'}}
  %y = kiln.ffn %x, %w1, %b1, %w2, %b2 {layout1 = #kiln.weight_layout<panels>, layout2 = #kiln.weight_layout<in_out>, activation = #kiln.activation<relu>}
      : (tensor<?x4xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @embedding_panels(%t: tensor<10x4xf32>, %ids: tensor<?xi32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{expected the table to have rank 3, got 'tensor<10x4xf32>'}}
  %y = kiln.embedding %t, %ids {table_layout = #kiln.table_layout<panels>} : (tensor<10x4xf32>, tensor<?xi32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @cross_entropy_targets(%l: tensor<?x10xf32>, %t: tensor<?xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{expected i32 targets}}
  %c = kiln.cross_entropy %l, %t : (tensor<?x10xf32>, tensor<?xf32>) -> tensor<1xf32>
  return %c : tensor<1xf32>
}

// -----

func.func @cross_entropy_rows(%l: tensor<4x10xf32>, %t: tensor<5xi32>) -> tensor<1xf32> {
  // expected-error @+1 {{expected targets length (5) to equal logits rows (4)}}
  %c = kiln.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<5xi32>) -> tensor<1xf32>
  return %c : tensor<1xf32>
}

// -----

func.func @weight_grad_shape(%x: tensor<?x4xf32>, %g: tensor<?x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{expected result dim 0 (4) to equal grad width (6)}}
  %w = kiln.weight_grad %x, %g : (tensor<?x4xf32>, tensor<?x6xf32>) -> tensor<4x6xf32>
  return %w : tensor<4x6xf32>
}

// -----

func.func @pad_fit(%x: tensor<3x4xf32>, %like: tensor<3x6xf32>) -> tensor<3x6xf32> {
  // expected-error @+1 {{expected the input's 4 rows at offset 4 to fit in 6}}
  %d = kiln.pad %x, %like {axis = 1 : i64, offset = 4 : i64} : (tensor<3x4xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  return %d : tensor<3x6xf32>
}

// -----

func.func @attention_grad_mask(%q: tensor<2x?x4xf32>, %lse: tensor<2x?xf32>) -> tensor<2x?x4xf32> {
  // expected-error @+1 {{expected a positive pattern_size with mask window}}
  %d = kiln.attention_grad %q, %q, %q, %q, %q, %lse {mask = #kiln.mask<window>, scale = 0.5 : f32, wrt = #kiln.attention_wrt<query>}
      : (tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?xf32>) -> tensor<2x?x4xf32>
  return %d : tensor<2x?x4xf32>
}

// -----

func.func @attention_grad_lse_heads(%q: tensor<2x?x4xf32>, %lse: tensor<3x?xf32>) -> tensor<2x?x4xf32> {
  // expected-error @+1 {{expected lse heads (3) to equal query heads (2)}}
  %d = kiln.attention_grad %q, %q, %q, %q, %q, %lse {scale = 0.5 : f32, wrt = #kiln.attention_wrt<key>}
      : (tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<3x?xf32>) -> tensor<2x?x4xf32>
  return %d : tensor<2x?x4xf32>
}

// -----

func.func @attention_lse_result_rows(%q: tensor<2x5x4xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{expected lse rows (6) to equal query rows (5)}}
  %o:2 = kiln.attention %q, %q, %q {scale = 0.5 : f32} : (tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> (tensor<2x5x4xf32>, tensor<2x6xf32>)
  return %o#1 : tensor<2x6xf32>
}

// -----

func.func @attention_pattern_without_sparse_mask(%q: tensor<2x8x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{expected pattern_size, summary, part and layout only with a sparse mask}}
  %o:2 = kiln.attention %q, %q, %q {mask = #kiln.mask<causal>, pattern_size = 2 : i64, scale = 0.5 : f32} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8xf32>)
  return %o#1 : tensor<2x8xf32>
}

// -----

func.func @fill_dynamic() -> tensor<?xf32> {
  // expected-error @+1 {{expected a static result shape, got 'tensor<?xf32>'}}
  %f = kiln.fill {value = 0.0 : f32} : tensor<?xf32>
  return %f : tensor<?xf32>
}

// -----

func.func @adamw_step_moment_not_a_state(%p: tensor<4xf32>, %s: tensor<1xf32>) -> tensor<4xf32> {
  %v = kiln.state "optimizer.v.p" : tensor<4xf32>
  // expected-error @+1 {{expected the moments m and v to be kiln.state values (they are updated in place)}}
  %r = kiln.adamw_step %p, %p, %v, %p, %s, %s, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32, clip_norm = 0.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @loss_weight_until(%s: tensor<1xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{expected until in [0, 1] (a fraction of the training steps), got 1.5}}
  %w = kiln.loss_weight %s, %s {weight = 1.0 : f32, until = 1.5 : f32} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  return %w : tensor<1xf32>
}

// -----

func.func @loss_weight_total(%s: tensor<1xf32>, %t: tensor<2xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{expected the total to be a [1] f32 scalar, got 'tensor<2xf32>'}}
  %w = kiln.loss_weight %s, %t {weight = 1.0 : f32, until = 0.5 : f32} : (tensor<1xf32>, tensor<2xf32>) -> tensor<1xf32>
  return %w : tensor<1xf32>
}

// -----

func.func @all_reduce_type(%g: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{expected the result to have the input's type 'tensor<4xf32>', got 'tensor<5xf32>'}}
  %r = kiln.all_reduce %g : (tensor<4xf32>) -> tensor<5xf32>
  return %r : tensor<5xf32>
}

// -----

func.func @all_reduce_ids(%g: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{expected f32 values, got 'tensor<4xi32>'}}
  %r = kiln.all_reduce %g : (tensor<4xi32>) -> tensor<4xi32>
  return %r : tensor<4xi32>
}

// -----

func.func @all_reduce_wait_of(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected the result of a kiln.all_reduce}}
  %r = kiln.all_reduce_wait %g : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @adamw_step_scalar(%p: tensor<4xf32>, %t: tensor<2xf32>, %s: tensor<1xf32>) -> tensor<4xf32> {
  %m = kiln.state "optimizer.m.p" : tensor<4xf32>
  %v = kiln.state "optimizer.v.p" : tensor<4xf32>
  // expected-error @+1 {{expected the step to be a [1] f32 scalar, got 'tensor<2xf32>'}}
  %r = kiln.adamw_step %p, %m, %v, %p, %s, %t, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32, clip_norm = 0.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<2xf32>, tensor<1xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @embedding_grad_into(%ids: tensor<?xi32>, %g: tensor<?x4xf32>, %into: tensor<6x4xf32>) -> tensor<7x4xf32> {
  // expected-error @+1 {{expected `into` of the result's type 'tensor<7x4xf32>', got 'tensor<6x4xf32>'}}
  %0 = kiln.embedding_grad %ids, %g, %into : (tensor<?xi32>, tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<7x4xf32>
  return %0 : tensor<7x4xf32>
}

// -----

func.func @act_update_grad_result(%c: tensor<?x36xf32>, %x: tensor<?x16xf32>, %w: tensor<16xf32>, %b: tensor<1xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expected the result to be 'tensor<1xf32>', got 'tensor<?x16xf32>'}}
  %g = kiln.act_update_grad %c, %c, %x, %x, %w, %b, %c {wrt = #kiln.act_wrt<halt_bias>} : (tensor<?x36xf32>, tensor<?x36xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<16xf32>, tensor<1xf32>, tensor<?x36xf32>) -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}

// -----

func.func @act_update_grad_halting(%c: tensor<?x36xf32>, %x: tensor<?x16xf32>, %w: tensor<8xf32>, %b: tensor<1xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expected the halting weight [d] and bias [1]}}
  %g = kiln.act_update_grad %c, %c, %x, %x, %w, %b, %c {wrt = #kiln.act_wrt<x>} : (tensor<?x36xf32>, tensor<?x36xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<8xf32>, tensor<1xf32>, tensor<?x36xf32>) -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}

// -----

func.func @mean_result(%p: tensor<?xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{expected a [1] result, got 'tensor<2xf32>'}}
  %m = kiln.mean %p : (tensor<?xf32>) -> tensor<2xf32>
  return %m : tensor<2xf32>
}

// -----

func.func @mean_grad_like(%g: tensor<1xf32>, %p: tensor<?xf32>) -> tensor<?x2xf32> {
  // expected-error @+1 {{expected the result to have like's type 'tensor<?xf32>'}}
  %d = kiln.mean_grad %g, %p : (tensor<1xf32>, tensor<?xf32>) -> tensor<?x2xf32>
  return %d : tensor<?x2xf32>
}

// -----

func.func @depthwise_conv_grad_result(%x: tensor<?x16xf32>, %w: tensor<3x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expected the result to be 'tensor<3x16xf32>', got 'tensor<?x16xf32>'}}
  %g = kiln.depthwise_conv_grad %x, %w, %x {wrt = #kiln.conv_wrt<weight>} : (tensor<?x16xf32>, tensor<3x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}

// -----

func.func @layer_norm_gamma_grad_result(%x: tensor<?x4xf32>, %g: tensor<4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{expected the result ('tensor<?x4xf32>') and the gamma ('tensor<4xf32>') to have one shape}}
  %d = kiln.layer_norm_gamma_grad %x, %g, %x : (tensor<?x4xf32>, tensor<4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %d : tensor<?x4xf32>
}

// -----

func.func @rms_norm_weight(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = kiln.param "w" : tensor<6xf32>
  // expected-error @+1 {{expected weight length (6) to equal input width (8)}}
  %y = kiln.rms_norm %x, %w : (tensor<?x8xf32>, tensor<6xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @rms_norm_epsilon(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = kiln.param "w" : tensor<8xf32>
  // expected-error @+1 {{expected a positive epsilon}}
  %y = kiln.rms_norm %x, %w {epsilon = 0.0 : f32} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @l2_normalize_epsilon(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{expected a positive epsilon}}
  %y = kiln.l2_normalize %x {epsilon = 0.0 : f32} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @mean_pool_rows(%x: tensor<?x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{expected one result row without a batch}}
  %y = kiln.mean_pool %x {batch = -1 : i64} : (tensor<?x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @mean_pool_mask(%x: tensor<6x8xf32>, %m: tensor<5xi32>) -> tensor<1x8xf32> {
  // expected-error @+1 {{expected mask length (5) to equal input rows (6)}}
  %y = kiln.mean_pool %x, %m {batch = -1 : i64} : (tensor<6x8xf32>, tensor<5xi32>) -> tensor<1x8xf32>
  return %y : tensor<1x8xf32>
}

// -----

func.func @attention_key_mask_causal(%q: tensor<2x6x4xf32>, %m: tensor<6xi32>) -> tensor<2x6x4xf32> {
  // expected-error @+1 {{expected no causal mask with a key mask}}
  %o = kiln.attention %q, %q, %q, %m {key_mask, mask = #kiln.mask<causal>, scale = 0.5 : f32} : (tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<6xi32>) -> tensor<2x6x4xf32>
  return %o : tensor<2x6x4xf32>
}

// -----

func.func @attention_key_mask_length(%q: tensor<2x6x4xf32>, %m: tensor<5xi32>) -> tensor<2x6x4xf32> {
  // expected-error @+1 {{expected key mask length (5) to equal key length (6)}}
  %o = kiln.attention %q, %q, %q, %m {key_mask, scale = 0.5 : f32} : (tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<5xi32>) -> tensor<2x6x4xf32>
  return %o : tensor<2x6x4xf32>
}

// -----

func.func @learning_rate_negative_warmup(%t: tensor<1xf32>, %peak: tensor<1xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{expected non-negative warmup and decay_steps}}
  %lr = kiln.learning_rate %t, %peak {lr = 1.0e-3 : f32, warmup = -1 : i64, decay_steps = 100 : i64, min_ratio = 0.1 : f32} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  return %lr : tensor<1xf32>
}

// -----

func.func @rope_odd_head_dim(%x: tensor<4x?x7xf32>) -> tensor<4x?x7xf32> {
  // expected-error @+1 {{expected a static even head dim, got 7}}
  %y = kiln.rope %x : (tensor<4x?x7xf32>) -> tensor<4x?x7xf32>
  return %y : tensor<4x?x7xf32>
}

// -----

func.func @rope_theta(%x: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> {
  // expected-error @+1 {{expected theta > 1, got 1}}
  %y = kiln.rope %x {theta = 1.0 : f32} : (tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  return %y : tensor<4x?x8xf32>
}

// -----

func.func @rope_llama3_factors(%x: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> {
  // expected-error @+1 {{expected 0 < low_freq_factor < high_freq_factor with an original_context, got 4.000000e+00 and 1.000000e+00}}
  %y = kiln.rope %x {scaling = 8.0 : f32, original_context = 8192 : i64, low_freq_factor = 4.0 : f32, high_freq_factor = 1.0 : f32} : (tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  return %y : tensor<4x?x8xf32>
}

// -----

func.func @gqa_heads_do_not_divide(%q: tensor<6x?x8xf32>, %k: tensor<4x?x8xf32>) -> tensor<6x?x8xf32> {
  // expected-error @+1 {{expected the key heads (4) to divide the query heads (6)}}
  %o = kiln.attention %q, %k, %k {mask = #kiln.mask<causal>, scale = 0.35 : f32} : (tensor<6x?x8xf32>, tensor<4x?x8xf32>, tensor<4x?x8xf32>) -> tensor<6x?x8xf32>
  return %o : tensor<6x?x8xf32>
}

// -----

func.func @gqa_sparse(%q: tensor<4x?x8xf32>, %k: tensor<2x?x8xf32>) -> tensor<4x?x8xf32> {
  // expected-error @+1 {{grouped-query attention (4 query heads, 2 key heads) supports masks none, causal and window, not strided}}
  %o = kiln.attention %q, %k, %k {mask = #kiln.mask<strided>, pattern_size = 4 : i64, part = #kiln.part<union>, scale = 0.35 : f32} : (tensor<4x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> tensor<4x?x8xf32>
  return %o : tensor<4x?x8xf32>
}

// -----

func.func @gqa_window_grad(%q: tensor<4x?x8xf32>, %k: tensor<2x?x8xf32>, %l: tensor<4x?xf32>) -> tensor<4x?x8xf32> {
  // expected-error @+1 {{expected the key heads to equal the query heads with mask window (the backward has no grouped window)}}
  %g = kiln.attention_grad %q, %k, %k, %q, %q, %l {mask = #kiln.mask<window>, pattern_size = 4 : i64, scale = 0.35 : f32, wrt = #kiln.attention_wrt<query>} : (tensor<4x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<4x?x8xf32>, tensor<4x?x8xf32>, tensor<4x?xf32>) -> tensor<4x?x8xf32>
  return %g : tensor<4x?x8xf32>
}

// -----

func.func @position_embedding_start(%t: tensor<?xi32>, %s: tensor<2xi32>) -> tensor<?x64xf32> {
  %pos = kiln.param "pos" : tensor<32x64xf32>
  // expected-error @+1 {{start must be a [1] i32 tensor (the first position)}}
  %p = kiln.position_embedding %pos, %t, %s : (tensor<32x64xf32>, tensor<?xi32>, tensor<2xi32>) -> tensor<?x64xf32>
  return %p : tensor<?x64xf32>
}
