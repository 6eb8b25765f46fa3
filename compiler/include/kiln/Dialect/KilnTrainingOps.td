// KilnTrainingOps.td - training: the loss, constants, and the ops of the backward computation kiln-differentiate
// builds (each forward op's gradient rule, its buildGradient hook, is made of these and of the
// forward ops of KilnOps.td). Their C++ hooks are in compiler/lib/Dialect's TrainingOps.cpp, and
// beside the forward op whose gradient they are (NormOps.cpp, AttentionOps.cpp, ...).
#ifndef KILN_TRAINING_OPS
#define KILN_TRAINING_OPS

def Kiln_FillOp : Kiln_Op<"fill", [Pure], "Elementwise", ["getKernelAttrs"]> {
  let summary = "a static tensor holding one value everywhere";
  let description = [{
    The seed of the backward (d loss / d loss = 1) and the gradient of a parameter the loss
    does not depend on (0).

    ```mlir
    %one = kiln.fill {value = 1.0 : f32} : tensor<1xf32>
    ```
  }];
  let arguments = (ins F32Attr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_CrossEntropyOp : Kiln_Op<"cross_entropy", [Pure], "Loss",
                                  ["getKernelAttrs", "inferSeqLengths", "getCost", "buildGradient"]> {
  let tiling = "Loss";
  let summary = "the mean over valid positions of -log softmax(logits)[target]";
  let description = [{
    logits [N, V], targets i32 [N] -> [1]. A position whose target is `ignore_index` does not
    count (neither in the sum nor in the mean); with none valid the loss is 0. Fused: each row's
    log-sum-exp and its target's logit are reduced in place, the probabilities never stored.

    ```mlir
    %l = kiln.cross_entropy %logits, %targets {ignore_index = -1 : i64} : (tensor<?x256xf32>, tensor<?xi32>) -> tensor<1xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$targets,
                   DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_CrossEntropyGradOp : Kiln_Op<"cross_entropy_grad", [Pure], "Loss", ["getKernelAttrs", "getCost"]> {
  let summary = "d cross_entropy / d logits: (softmax(logits) - onehot(target)) · grad / valid";
  let description = [{
    logits [N, V], targets i32 [N], grad [1] (d loss / d cross_entropy) -> [N, V]; rows whose
    target is `ignore_index` are 0, `valid` is the number of the others.

    ```mlir
    %d = kiln.cross_entropy_grad %logits, %targets, %g {ignore_index = -1 : i64} : (tensor<?x256xf32>, tensor<?xi32>, tensor<1xf32>) -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$targets, AnyRankedTensor:$grad,
                   DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_MeanOp : Kiln_Op<"mean", [Pure], "Mean", ["inferSeqLengths", "getCost", "buildGradient"]> {
  let tiling = "None";
  let summary = "the mean of every element: [...] -> [1] (ACT's ponder cost over positions)";
  let description = [{
    Summed in order, then divided by the element count (a sequence length is the run's).

    ```mlir
    %m = kiln.mean %ponder : (tensor<?xf32>) -> tensor<1xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_MeanGradOp : Kiln_Op<"mean_grad", [Pure], "Mean", ["inferSeqLengths"]> {
  let summary = "kiln.mean's gradient: grad [1] / the element count, everywhere in `like`'s shape";
  let description = [{
    ```mlir
    %d = kiln.mean_grad %g, %ponder : (tensor<1xf32>, tensor<?xf32>) -> tensor<?xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$like);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_ActUpdateGradOp : Kiln_Op<"act_update_grad", [Pure], "Act", ["getKernelAttrs", "getCost", "inferSeqLengths"]> {
  let summary = "kiln.act_update's gradient with respect to its carry, x, y or halting logit";
  let description = [{
    carry and next [L, 2d+4] (the step's carry and its result: which positions were running,
    halted or went on are read from them, never decided again), x, y [L, d], halt weight [d],
    bias [1], grad [L, 2d+4] (of `next`) -> `wrt` carry [L, 2d+4], x or y [L, d],
    halt_weight [d] or halt_bias [1] (sums over the positions of d loss / d (x·w + b),
    in row order).
    Per position, with p = sigmoid(x·w + b) recomputed, the update count n and the halting
    decisions are constants (Graves 2016): a step that went on (w = p) passes its state's
    gradient to y and p, h' = h + p; the halting step (w = 1 - h, the remainder r' = 1 - h)
    sends the output's and the state's gradients (its state is its output) to y by w and to
    h by -(grad_r + grad_w); a halted position passes every gradient through.

    ```mlir
    %dc = kiln.act_update_grad %c, %n, %x, %y, %w, %b, %g {wrt = #kiln.act_wrt<carry>} : (tensor<?x132xf32>, tensor<?x132xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>, tensor<1xf32>, tensor<?x132xf32>) -> tensor<?x132xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$carry, AnyRankedTensor:$next, AnyRankedTensor:$x, AnyRankedTensor:$y,
                   AnyRankedTensor:$halt_weight, AnyRankedTensor:$halt_bias, AnyRankedTensor:$grad, Kiln_ActGradWrtAttr:$wrt);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_ReduceRowsOp : Kiln_Op<"reduce_rows", [Pure], "Backward", ["inferSeqLengths", "getCost"]> {
  let tiling = "None";
  let summary = "the sum over every dim but the last: [..., d] -> [d]";
  let description = [{
    A bias's gradient, and that of any operand broadcast over leading dims.

    ```mlir
    %db = kiln.reduce_rows %dy : (tensor<?x128xf32>) -> tensor<128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_WeightGradOp : Kiln_Op<"weight_grad", [Pure], "Backward", ["getKernelAttrs", "inferSeqLengths", "getCost"]> {
  let tiling = "WeightGrad";
  let summary = "a GEMM weight's gradient: the sum over rows of the outer products of dy and x";
  let description = [{
    x [M, K], dy [M, N] -> out_in: dyᵀ·x [N, K]; in_out: xᵀ·dy [K, N] (the weight's own layout).
    Also the right operand's gradient of kiln.matmul (M, N or K may be sequence lengths).

    ```mlir
    %dw = kiln.weight_grad %x, %dy {weight_layout = #kiln.weight_layout<in_out>} : (tensor<?x128xf32>, tensor<?x512xf32>) -> tensor<128x512xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$grad, DefaultValuedAttr<Kiln_WeightLayoutAttr, "::kiln::WeightLayoutKind::out_in">:$weight_layout);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_ActivationGradOp : Kiln_Op<"activation_grad", [Pure], "Elementwise", ["getKernelAttrs", "getCost"]> {
  let summary = "an activation's input gradient: act'(x) · grad";
  let description = [{
    ```mlir
    %dx = kiln.activation_grad %x, %dy {activation = #kiln.activation<gelu_tanh>} : (tensor<?x512xf32>, tensor<?x512xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$grad, Kiln_ActivationAttr:$activation);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_LayerNormGradOp : Kiln_Op<"layer_norm_grad", [Pure], "RowReduce", ["getKernelAttrs", "inferSeqLengths", "getCost"]> {
  let summary = "layer norm's gradient with respect to its input";
  let description = [{
    x [..., d], gamma [d], grad [..., d] -> [..., d]. With x̂ the normalized rows and
    g = grad · gamma: (g - mean(g) - x̂ · mean(g · x̂)) / σ per row (a row reduction).

    ```mlir
    %dx = kiln.layer_norm_grad %x, %g, %dy {epsilon = 9.99999974E-6 : f32} : (tensor<?x128xf32>, tensor<128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$gamma, AnyRankedTensor:$grad,
                   DefaultValuedAttr<F32Attr, "1e-5f">:$epsilon);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_LayerNormGammaGradOp : Kiln_Op<"layer_norm_gamma_grad", [Pure], "Backward", ["getKernelAttrs", "inferSeqLengths", "getCost"]> {
  let summary = "layer norm's gradient with respect to gamma";
  let description = [{
    x [..., d], gamma [d], grad [..., d] -> [d]: the sum over rows of grad · x̂, x̂ the
    normalized rows (a column reduction). Beta's gradient is kiln.reduce_rows of grad.

    ```mlir
    %dg = kiln.layer_norm_gamma_grad %x, %g, %dy {epsilon = 9.99999974E-6 : f32} : (tensor<?x128xf32>, tensor<128xf32>, tensor<?x128xf32>) -> tensor<128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$gamma, AnyRankedTensor:$grad,
                   DefaultValuedAttr<F32Attr, "1e-5f">:$epsilon);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_SoftmaxGradOp : Kiln_Op<"softmax_grad", [Pure, SameOperandsAndResultType], "RowReduce", ["getCost"]> {
  let summary = "softmax's input gradient from its output y: y · (grad - rowsum(grad · y))";
  let description = [{
    ```mlir
    %dx = kiln.softmax_grad %y, %dy : (tensor<4x?x?xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$output, AnyRankedTensor:$grad);
  let results = (outs AnyRankedTensor:$result);
}

def Kiln_EmbeddingGradOp : Kiln_Op<"embedding_grad", [Pure], "Backward", ["inferSeqLengths", "getCost"]> {
  let tiling = "None";
  let summary = "an embedding table's gradient: grad's rows added into the rows of their ids";
  let description = [{
    ids i32 [L], grad [L, d] -> [V, d] (V from the result). Deterministic: the rows of each
    column strip are added in position order. With `into` ([V, d]: the table's other gradient
    contributions, a tied head's), the rows are added into it instead of into zeros.

    ```mlir
    %dt = kiln.embedding_grad %tokens, %dy : (tensor<?xi32>, tensor<?x128xf32>) -> tensor<256x128xf32>
    %de = kiln.embedding_grad %tokens, %dy, %dhead : (tensor<?xi32>, tensor<?x128xf32>, tensor<256x128xf32>) -> tensor<256x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$ids, AnyRankedTensor:$grad, Optional<AnyRankedTensor>:$into);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_PositionIdsOp : Kiln_Op<"position_ids", [Pure], "DataMovement", ["inferSeqLengths"]> {
  let summary = "each row's position in its sequence, [0, L), as i32 ids";
  let description = [{
    like [N] (token ids) -> i32 [N]: row i holds i, or, over a batch's rows, its position in its
    own sequence (the kernel runs once per sequence: kiln-loop-sequences). The gradient of a
    learned position table adds each row's gradient into the table row of its position
    (kiln.embedding_grad over these ids), summing a batch's sequences.

    ```mlir
    %pos = kiln.position_ids %tokens : (tensor<?xi32>) -> tensor<?xi32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$like);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_PadOp : Kiln_Op<"pad", [Pure], "DataMovement", ["getKernelAttrs", "inferSeqLengths", "buildGradient"]> {
  let summary = "input placed at `offset` along `axis` in zeros shaped like `like`";
  let description = [{
    The gradient of kiln.slice (like: the sliced tensor) and of a learned position table
    (axis 0, like: the table): result = 0 except result[.., offset + i, ..] = input[.., i, ..].

    ```mlir
    %dqkv = kiln.pad %dq, %qkv {axis = 1 : i64, offset = 0 : i64} : (tensor<?x128xf32>, tensor<?x384xf32>) -> tensor<?x384xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$like, I64Attr:$axis, I64Attr:$offset);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_AttentionGradOp : Kiln_Op<"attention_grad", [Pure], "AttentionGrad", ["getKernelAttrs", "inferSeqLengths", "getCost"]> {
  let tiling = "AttentionGrad";
  let summary = "kiln.attention's gradient with respect to its query, key or value";
  let description = [{
    q [H, Lq, d], k [H, Lk, d], v [H, Lk, dv], out and grad [H, Lq, dv] -> like q, k or v
    (`wrt`). The probabilities are recomputed a row at a time from each query row's
    log-sum-exp, never stored whole: with P = softmax(q·kᵀ·scale + mask), dP = grad·vᵀ and
    D = rowsum(grad · out), dS = P · (dP - D); dq = dS·k·scale, dk = dSᵀ·q·scale, dv = Pᵀ·grad.
    Masks "none" and "causal", and the sparse patterns with kiln.attention's attributes
    (pattern_size, summary, part, layout, noncausal): kiln-tile-sparse-pattern gives the op the
    forward's block schedule, and the kernel visits only its blocks (dq over each query block's
    key blocks; dk and dv over the query blocks that visit each key block). `lse` [H, Lq]: every
    query row's log-sum-exp, computed once for the three gradients (the forward kiln.attention's
    second result; for a pattern of two parts, the merged one).

    ```mlir
    %dq = kiln.attention_grad %q, %k, %v, %o, %do, %lse {mask = #kiln.mask<causal>, scale = 0.125 : f32, wrt = #kiln.attention_wrt<query>} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?xf32>) -> tensor<4x?x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key, AnyRankedTensor:$value, AnyRankedTensor:$out,
                   AnyRankedTensor:$grad, AnyRankedTensor:$lse,
                   DefaultValuedAttr<Kiln_MaskAttr, "::kiln::MaskKind::none">:$mask, F32Attr:$scale, Kiln_AttentionGradWrtAttr:$wrt,
                   OptionalAttr<I64Attr>:$pattern_size, OptionalAttr<I64Attr>:$summary, OptionalAttr<Kiln_PatternPartAttr>:$part,
                   OptionalAttr<StrArrayAttr>:$layout, UnitAttr:$noncausal);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_LshChunkAttentionGradOp : Kiln_Op<"lsh_chunk_attention_grad", [Pure], "LshChunkAttentionGrad",
                                           ["getKernelAttrs", "inferSeqLengths", "getCost"]> {
  let tiling = "LshChunkAttentionGrad";
  let summary = "kiln.lsh_chunk_attention's gradient with respect to its shared qk or its value";
  let description = [{
    qk [H, L, d], v [H, L, dv], buckets i32 [H, R, L], sorted i32 [H, R, 2, L] (the forward's:
    the buckets are constants), out and grad [H, L, dv] -> like qk or v (`wrt`). The rounds'
    merge makes one softmax over every (round, key) pair a query visits, so with P = exp(score
    - LSE) over those pairs (LSE over all rounds, recomputed), dP = grad·v and D = rowsum(grad ·
    out), dS = P · (dP - D): dv = Σ P·grad, and qk gets both its query's part dS·k̂·scale and
    its key's, dk̂ = Σ dS·q·scale through the normalization k̂ = qk / |qk|:
    (dk̂ - k̂ (k̂·dk̂)) / |qk|.

    ```mlir
    %dqk = kiln.lsh_chunk_attention_grad %qk, %v, %b, %s, %o, %do {chunk = 64 : i64, scale = 0.125 : f32, wrt = #kiln.lsh_wrt<qk>} : (tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x2x?xi32>, tensor<4x2x2x?xi32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$qk, AnyRankedTensor:$value, AnyRankedTensor:$buckets, AnyRankedTensor:$sorted,
                   AnyRankedTensor:$out, AnyRankedTensor:$grad, I64Attr:$chunk, UnitAttr:$causal, F32Attr:$scale,
                   Kiln_LshGradWrtAttr:$wrt);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

// The optimizer (kiln-apply-optimizer): AdamW with global-norm clipping and a learning-rate
// schedule. The ops marked "in place" write their first operand's buffer (a parameter or a
// state) and return it, as kiln.cache_write does.

def Kiln_SumSquaresOp : Kiln_Op<"sum_squares", [Pure], "Optimizer", ["inferSeqLengths"]> {
  let tiling = "SumSquares";
  let summary = "the sum of the squares of every element: [...] -> [1]";
  let description = [{
    ```mlir
    %s = kiln.sum_squares %g : (tensor<128x512xf32>) -> tensor<1xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_StepCountOp : Kiln_Op<"step_count", [], "Optimizer"> {
  let summary = "in place: the step counter state + 1 (the optimizer's step t, from 1)";
  let description = [{
    ```mlir
    %t = kiln.step_count %step : (tensor<1xf32>) -> tensor<1xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$step);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_LearningRateOp : Kiln_Op<"learning_rate", [Pure], "Optimizer", ["getKernelAttrs"]> {
  let summary = "the learning rate of step t: linear warmup, then constant or cosine decay";
  let description = [{
    The peak: `peak` where it is positive (the state optimizer.lr, which `--lr` sets), else
    the attribute lr. t ≤ warmup (> 0): peak · t / warmup. Otherwise, with decay_steps >
    warmup: with p = min(1, (t - warmup) / (decay_steps - warmup)), peak · (min_ratio +
    (1 - min_ratio) · (1 + cos(π p)) / 2); else peak.

    ```mlir
    %lr = kiln.learning_rate %t, %peak {lr = 1.0e-3 : f32, warmup = 100 : i64, decay_steps = 1000 : i64, min_ratio = 0.1 : f32} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$step, AnyRankedTensor:$peak, F32Attr:$lr, I64Attr:$warmup, I64Attr:$decay_steps, F32Attr:$min_ratio);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_LossWeightOp : Kiln_Op<"loss_weight", [Pure], "Optimizer", ["getKernelAttrs"]> {
  let summary = "a loss term's weight at this step: `weight` while the term counts, then 0";
  let description = [{
    An auxiliary loss term that counts for the first part of training only (Model::loss with
    LossOptions::until). `step` is the state optimizer.step as the forward reads it: the steps
    already taken, s, so this step is t = s + 1; `total` is the state optimizer.steps, the run's
    total T (`./model --train --steps T` writes it; 0 outside such a run). The result is
    `weight` when T <= 0, or until = 0, or t <= until · T; else 0. The term is multiplied by it
    (kiln.mul), so a dropped term adds exactly 0 to the loss and to every gradient.

    ```mlir
    %w = kiln.loss_weight %step, %total {weight = 1.0 : f32, until = 0.25 : f32} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$step, AnyRankedTensor:$total, F32Attr:$weight, F32Attr:$until);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_AdamWStepOp : Kiln_Op<"adamw_step", [], "Optimizer", ["getKernelAttrs", "getCost"]> {
  let summary = "in place: a parameter's AdamW step with its two moments, as torch.optim.AdamW, in one pass";
  let description = [{
    One kernel reads each element of the parameter, its moments and its gradient once and
    writes the parameter and both moments in place (m and v must be kiln.state values):

      g' = c · g, c = min(1, clip_norm / (sqrt(sumsq) + 1e-6)) with clip_norm > 0, else 1
      (sumsq: the sum of every gradient's squares, as torch.nn.utils.clip_grad_norm_)
      m = beta1 · m + (1 - beta1) · g'
      v = beta2 · v + (1 - beta2) · g'²
      p = p · (1 - lr · weight_decay) - lr / (1 - beta1^t) · m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    The result is the updated parameter (its buffer).

    ```mlir
    %p1 = kiln.adamw_step %p, %m, %v, %g, %sumsq, %t, %lr {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.01 : f32, clip_norm = 1.0 : f32} : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$param, AnyRankedTensor:$m, AnyRankedTensor:$v, AnyRankedTensor:$grad,
                   AnyRankedTensor:$sumsq, AnyRankedTensor:$step, AnyRankedTensor:$lr, F32Attr:$beta1,
                   F32Attr:$beta2, F32Attr:$eps, F32Attr:$weight_decay, F32Attr:$clip_norm);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_AllReduceOp : Kiln_Op<"all_reduce", [], "Runtime"> {
  let summary = "data parallel: starts the sum over the processes of each one's share times its value";
  let description = [{
    In a process group of P ranks (`mpirun -np P`), each rank r's result is
    Σ_r share_r · input_r, where share_r is rank r's part of the global batch's loss count
    (its rows, or its masked positions for a masked-LM loss), which the runtime sets before
    each step. The shares sum to 1, so a mean over the rank's rows becomes the mean over the
    global batch. In place: the result is the input's buffer (so a process alone does nothing).
    The kernel only starts the sum (a non-blocking MPI_Iallreduce, which the next kernels of the
    backward run beside): the result may be read only through its kiln.all_reduce_wait.
    kiln-apply-optimizer puts one on every gradient, as soon as the backward has it; a runtime
    kernel (kilnrt_kernel_all_reduce), not Halide, and not pure: it communicates.

    ```mlir
    %s = kiln.all_reduce %g : (tensor<128x512xf32>) -> tensor<128x512xf32>
    %g1 = kiln.all_reduce_wait %s : (tensor<128x512xf32>) -> tensor<128x512xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_AllReduceWaitOp : Kiln_Op<"all_reduce_wait", [], "Runtime"> {
  let summary = "in place: waits until the kiln.all_reduce that made its operand has summed it";
  let description = [{
    The operand is a kiln.all_reduce's result; the result is the same buffer, complete (in a
    process alone there is nothing to wait for). A runtime kernel (kilnrt_kernel_all_reduce_wait).

    ```mlir
    %g1 = kiln.all_reduce_wait %s : (tensor<64xf32>) -> tensor<64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$pending);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

#endif  // KILN_TRAINING_OPS
