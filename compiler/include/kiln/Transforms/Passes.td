// Passes.td - kiln's passes, in pipeline order. Each is one file with the same stem.
#ifndef KILN_PASSES
#define KILN_PASSES
include "mlir/Pass/PassBase.td"

def Differentiate : Pass<"kiln-differentiate", "mlir::ModuleOp"> {
  let summary = "Append the reverse-mode gradient of an entry's loss with respect to its parameters";
  let description = [{
    For every entry marked `kiln.differentiate` (a unit attribute on the func.func; the DSL's
    Model::gradients), whose result "loss" is a [1] scalar: the ops the loss depends on through
    parameters are visited in reverse order and each builds its vector-Jacobian product (its
    buildGradient hook) from the gradients of its results, starting from d loss / d loss = 1.
    A value used more than once sums its gradients (kiln.add). The gradient of each parameter
    becomes a new result "grad.<name>" (kiln.fill 0 for one the loss does not depend on).
      %l = kiln.cross_entropy (kiln.linear %x, %w) ...            // the forward, unchanged
    gains
      %one = kiln.fill {value = 1.0} : tensor<1xf32>
      %dlogits = kiln.cross_entropy_grad %logits, %targets, %one
      %dw = kiln.weight_grad %x, %dlogits {weight_layout = #kiln.weight_layout<out_in>}
      return %l, %dw                                              // "loss", "grad.w"
    The backward is ordinary kiln ops in the same function: the later passes fuse, tile,
    schedule and plan it with the forward, and kiln-plan-buffers keeps each activation the
    backward reads alive until that read. An op on the loss's path without a gradient rule is
    an error at its model line.
  }];
}

def CheckpointFfn : Pass<"kiln-checkpoint-ffn", "mlir::ModuleOp"> {
  let summary = "Mark each FFN of a differentiated entry as a checkpointed block of its own (--recompute-ffn)";
  let description = [{
    A memory option (the drivers' --recompute-ffn): in every entry kiln-differentiate
    differentiated, each FFN of the forward
      %p = kiln.linear %x, %w1, %b1
      %h = kiln.gelu %p                 // or another activation op
      %y = kiln.linear %h, %w2, %b2
    whose %p and %h the backward reads (the activation's gradient reads %p, the second weight's
    gradient %h) gets its three ops marked `kiln.checkpoint = id`, an id of its own after the
    DSL's blocks. kiln-recompute-checkpoints then recomputes %p and %h from %x just before the
    backward's first read (the second linear's result is read by no gradient). In the forward
    they then have one reader each, so kiln-fuse-epilogue and kiln-chunk-ffn fuse the forward
    into kiln.ffn, whose intermediate
    exists one chunk at a time. This saves the two [rows, d_ff] activations per FFN from the
    forward to the backward for one more GEMM (x·W1) per FFN in the backward. An FFN inside a
    checkpointed block is left to its block.
    With activation-only (--recompute-ffn=activation) only the activation and the second linear
    are marked: the backward recomputes %h from the kept %p (an elementwise pass), one of the
    two activations is saved; the forward stays unfused, as %p is read by the backward.
  }];
  let options = [
    Option<"activationOnly", "activation-only", "bool", "false",
           "recompute only the activation's output, from the first linear's kept output">,
  ];
}

def ReverseLayers : Pass<"kiln-reverse-layers", "mlir::ModuleOp"> {
  let summary = "Reversible layers: the backward reconstructs each layer's input from its output instead of keeping its activations";
  let description = [{
    For every entry kiln-differentiate differentiated, each reversible layer (ops marked
    `kiln.reversible = array<i64: layer, part>` by the DSL's reversible(x, F, G): y1 = x1 +
    F(x2), y2 = x2 + G(y1)), from the last to the first: at the backward's first read of the
    layer, from its output as the backward has it (the last layer's, kept; else the input the
    next layer reconstructed), G and F run again (clones marked `kiln.reconstructed = layer`):
      x2' = y2 - G(y1)     x1' = y1 - F(x2')
    and the backward reads those clones, x1' and x2' instead of the forward's values. The
    forward's activations of the stack then die in the forward; the backward holds one layer's
    reconstruction at a time, so a reversible stack's activation memory does not grow with its
    depth (the cost report's saved bytes).
  }];
}

def RecomputeCheckpoints : Pass<"kiln-recompute-checkpoints", "mlir::ModuleOp"> {
  let summary = "Gradient checkpointing: recompute checkpointed blocks in the backward instead of keeping their activations";
  let description = [{
    For every entry kiln-differentiate differentiated (the backward starts at the kiln.fill
    marked kiln.grad_seed): the forward ops of a block marked `kiln.checkpoint = id` (the DSL's
    Model::checkpoint) whose values the backward reads are cloned, marked `kiln.recomputed =
    id`, just before the backward's first read of them, and the backward reads the clones. The
    block then keeps only its inputs (and values the forward reads after it) for the backward;
    kiln-plan-buffers frees its activations after the forward and holds one block's recomputed
    ones at a time in the backward.
      %h = kiln.gelu (kiln.linear %x, %w) {kiln.checkpoint = 0}    // forward, dead after it
      ...
      %h2 = kiln.gelu (kiln.linear %x, %w) {kiln.recomputed = 0}   // backward
      %dw = kiln.weight_grad %h2, %dy
    Every differentiated entry gets `kiln.backward = {saved_bytes, recomputed_flops,
    recomputed_ops}` at the sequence bounds: the bytes of forward values the backward reads
    and the FLOPs recomputed, which the cost report prints.
  }];
}

def ApplyOptimizer : Pass<"kiln-apply-optimizer", "mlir::ModuleOp"> {
  let summary = "Turn a differentiated entry into a training step: clipped AdamW updates in place";
  let description = [{
    For every entry marked `kiln.train` (a dictionary: lr, beta1, beta2, eps, weight_decay,
    clip_norm, warmup, decay_steps, min_ratio, and `no_decay`, the parameters without weight
    decay; the DSL's Model::train), after kiln-differentiate: its "grad.<name>" results are
    consumed by the optimizer instead of returned.
      %t = kiln.step_count (kiln.state "optimizer.step")          // in place: t = step + 1
      %lr = kiln.learning_rate %t {lr, warmup, decay_steps, min_ratio}
      %sumsq = the kiln.add of every gradient's kiln.sum_squares   // for global-norm clipping
      per parameter p with gradient g:
        kiln.adamw_step %p, (kiln.state "optimizer.m.<p>"), (kiln.state "optimizer.v.<p>"), %g,
                        %sumsq, %t, %lr {beta1, beta2, eps, weight_decay, clip_norm}
        // one kernel: the parameter and both moments in place, each element read once
    The entry returns its loss, "lr" and "grad_sumsq" (the gradients' sum of squares before
    clipping). Moments and step are states (zero when a session starts), saved with the
    parameters in a checkpoint under their "optimizer." names.
  }];
}

def FuseAttention : Pass<"kiln-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Recognize attention written as separate ops and fuse it into kiln.attention";
  let description = [{
    Before:
      %s = kiln.batch_matmul %q, %k {transpose_b = true}
      %t = kiln.scale %s {factor = 0.125}
      %u = kiln.add %t, (kiln.mask %t )
      %p = kiln.softmax %u
      %o = kiln.batch_matmul %p, %v
    After:
      %o = kiln.attention %q, %k, %v {mask = #kiln.mask<causal>, scale = 0.125}
    The fused kernel never materializes the [Lq, Lk] scores: it works on one block of query
    rows at a time, visits only the keys the mask allows, and gives zeros for a row with no
    visible key. 2-D (single-head) chains are fused through [1, L, d] views.
  }];
}

def LowerLshAttention : Pass<"kiln-lower-lsh-attention", "mlir::ModuleOp"> {
  let summary = "Expand LSH attention into hashing, a counting sort and chunked attention";
  let description = [{
    Before:
      %o = kiln.lsh_attention %qk, %v, %rot {buckets = 16, hashes = 2, chunk = 64, scale = 0.125}
    After:
      %b = kiln.lsh_hash %qk, %rot                      // i32 [H, hashes, L]
      %s = kiln.lsh_sort %b                             // i32 [H, hashes, 2, L]: order and inverse
      %o = kiln.lsh_chunk_attention %qk, %v, %b, %s {chunk = 64, scale = 0.125}
    The sort is a stable counting sort (linear in L) served by the runtime; the hashing and the
    chunked attention (all rounds, combined by log-sum-exp) are Halide kernels.
  }];
}

def UnrollAct : Pass<"kiln-unroll-act", "mlir::ModuleOp"> {
  let summary = "Unroll a differentiated entry's recurrent step to max_steps copies (ACT's backward)";
  let description = [{
    In each func.func marked kiln.differentiate (run before kiln-differentiate), every
    kiln.recurrent becomes the ops kiln-lower-act puts in its loop, repeated max_steps times in
    straight code (the step number a kiln.fill of i32):
      %pos = kiln.sinusoidal_positions %x;  %c0 = kiln.act_init %x
      %t0 = kiln.fill {value = 0.0} : tensor<1xi32>
      %s0 = kiln.act_input %c0, %pos, %t0;  <the step on %s0>;  %c1 = kiln.act_update %c0, %s0, %y0, %hw, %hb, %t0
      ...                                   (steps 1 .. max_steps - 1)
      %h = kiln.act_output %cT {field = #kiln.act_field<hidden>}   // and "ponder", "steps"
    The same values as the loop: a step after every position halted changes nothing. Each
    act op has a gradient rule: the update counts and halting decisions are constants, the
    gradients flow through the halting probabilities and the remainders (Graves 2016).
  }];
}

def LowerAct : Pass<"kiln-lower-act", "mlir::ModuleOp"> {
  let summary = "Expand a recurrent step with adaptive computation time into a host loop";
  let description = [{
    Before:
      %h, %p, %n, %it = kiln.recurrent %x, %hw, %hb {max_steps = 8, threshold = 0.99} {
      ^bb0(%s):  <the step>  kiln.yield %y }
    After:
      %pos = kiln.sinusoidal_positions %x           // the position signal, once
      %c0 = kiln.act_init %x                         // carry [L, 2d + 4]: state, output, h, r, n, steps run
      %c = kiln.loop %c0 {max_steps = 8} {
      ^bb0(%c: ..., %t: tensor<1xi32>):
        %s = kiln.act_input %c, %pos, %t             // state + position + timestep signal
        <the step on %s>
        %c1 = kiln.act_update %c, %s, %y, %hw, %hb, %t {max_steps = 8, threshold = 0.99}
        %go = kiln.act_running %c1                   // any position still running?
        kiln.yield %go, %c1 }
      %h = kiln.act_output %c {field = #kiln.act_field<hidden>}     // and "ponder", "steps", "iterations"
    The step's ops stay one copy in the loop body (not unrolled); the loop runs on the host and
    stops after the first step that leaves no position running.
  }];
}

def FuseEpilogue : Pass<"kiln-fuse-epilogue", "mlir::ModuleOp"> {
  let summary = "Fold an activation that only consumes a linear into the linear's epilogue";
  let description = [{
    Before:
      %h = kiln.linear %x, %w, %b : ...
      %g = kiln.gelu %h {approximate = #kiln.gelu<tanh>} : ...
    After:
      %g = kiln.linear %x, %w, %b {activation = #kiln.activation<gelu_tanh>} : ...
    The [L, d_ff] activation is then written once instead of written, read and written again.
  }];
}

def ChunkFfn : Pass<"kiln-chunk-ffn", "mlir::ModuleOp"> {
  let summary = "Run the FFN (linear, activation, linear, residual add) over chunks of rows";
  let description = [{
    Before (after kiln-fuse-epilogue):
      %h = kiln.linear %x, %w1, %b1 {activation = #kiln.activation<gelu_tanh>}
      %y = kiln.linear %h, %w2, %b2
      %r = kiln.add %x0, %y
    After:
      %r = kiln.ffn %x, %w1, %b1, %w2, %b2, %x0 {activation = #kiln.activation<gelu_tanh>, kiln.schedule = #kiln.schedule<chunk = 48>}
    The [L, d_ff] intermediate becomes [chunk, d_ff] per task: bias and activation are fused
    into the first matmul, bias and residual into the second. Every chunk reads both weights,
    so the default chunk is the longest whose intermediate fits in `chunk-bytes` (4 MiB), in
    multiples of 48 rows (whole register blocks of 6 or 4 rows), 48 to 384; GPU targets take
    1024 rows.
  }];
  let options = [
    Option<"chunkRows", "chunk-rows", "int64_t", "0", "rows per chunk (0: from chunk-bytes)">,
    Option<"chunkBytes", "chunk-bytes", "int64_t", "4194304", "the default chunk's budget for its [chunk, d_ff] intermediate">
  ];
}

def ChunkFfnGrad : Pass<"kiln-chunk-ffn-grad", "mlir::ModuleOp"> {
  let summary = "Run the backward of a recomputed FFN over chunks of d_ff";
  let description = [{
    The backward of an FFN whose intermediates are recomputed (--recompute-ffn all, or an FFN
    in a DSL checkpointed block), after kiln-recompute-checkpoints:
      %h = kiln.linear %x, %w1, %b1 {kiln.recomputed}
      %a = kiln.gelu %h
      %dw2 = kiln.weight_grad %a, %dy
      %da = kiln.matmul %dy, %w2
      %dh = kiln.activation_grad %h, %da
      %dx = kiln.matmul %dh, %w1
      %dw1 = kiln.weight_grad %x, %dh
      %db1 = kiln.reduce_rows %dh
    becomes the same eight ops per chunk of d_ff columns, on slices of w1, b1 and w2 (views):
    %dw1, %dw2 and %db1 are concats of the chunks' parts (written in place), %dx the sum of the
    chunks' products. The [rows, d_ff] intermediates exist one chunk at a time, as the forward's
    kiln.ffn never stores them. The chunk: `chunk-cols`, else the widest multiple of 64
    columns whose [rows, chunk] f32 intermediate fits in `chunk-bytes` at the row bound.
  }];
  let options = [
    Option<"chunkCols", "chunk-cols", "int64_t", "0", "d_ff columns per chunk (0: from chunk-bytes)">,
    Option<"chunkBytes", "chunk-bytes", "int64_t", "16777216", "the default chunk's budget for one [rows, chunk] intermediate at the row bound">
  ];
}

def TileSparsePattern : Pass<"kiln-tile-sparse-pattern", "mlir::ModuleOp"> {
  let summary = "Turn an attention's sparse pattern into a block schedule";
  let description = [{
    For kiln.attention with a pattern (window, strided, fixed, layout), chooses the block size
    (the schedule's `block`, engine block_sparse) and writes `kiln.sparse`, the
    #kiln.sparse_schedule the kernel is generated from: per part, the query and key orders, the
    rule for the key blocks each query block visits and the element masks, so that the kernel's
    work follows the allowed entries, not the blocks the pattern touches in sequence order:
      * window, strided local, fixed local: sequence order, the key blocks from the window's
        (or own block's) first block to the diagonal;
      * strided global (j = i mod s): queries and keys in stride-transpose order (the sequence
        as [ceil(L/s), s], transposed): each residue class is contiguous and causal within;
      * fixed global (the summary positions): keys gathered into a compact list;
      * layout: the user's table of key blocks per query block.
    A union (one merged head) has two parts, merged by log-sum-exp; keys both allow are masked
    out of the second. The schedule dump draws each part's block matrix. A block or a sparse
    schedule already in the IR is kept: edited in a .mlir file, it is what the kernel computes.

      %o = kiln.attention %q, %k, %v {mask = #kiln.mask<strided>, part = #kiln.part<union>, pattern_size = 64}
    becomes
      %o = kiln.attention ... {kiln.schedule = #kiln.schedule<engine = block_sparse, block = 64>,
                               kiln.sparse = #kiln.sparse_schedule<parts = [#kiln.sparse_part<...>, ...]>}
  }];
  let options = [Option<"block", "block", "int64_t", "0", "block size (0: from the pattern, 16 to 64)">];
}

def QuantizeWeights : Pass<"kiln-quantize-weights", "mlir::ModuleOp"> {
  let summary = "Keep GEMM weights and embedding tables in ggml's quantized blocks (q8_0, q4_0, q4_1)";
  let description = [{
    Decides each parameter's storage format. Asked for by `tensor-formats` (name=format, from a
    GGUF file's tensor types: the format the file stores) or by `format` (every eligible
    parameter: --quantize). A parameter is eligible when it is 2-D, its rows' length is a
    multiple of 32, and every use (in every entry) is the [out, in] weight of a kiln.linear or
    the table (rows) of a kiln.embedding. An eligible parameter's kiln.param ops get `format` and
    the type bytes [rows, in / 32, block bytes] (i8), and each user `weight_format` (linear) or
    `table_format` (embedding). A parameter that `tensor-formats` names and that is not eligible
    is an error naming the use that is not (a training entry's gradient, a row not a whole number
    of blocks); `format` leaves such parameters f32 (and refuses a model with training entries).
    A GPU target refuses both (its kernels read f32 weights). The runtime reads a GGUF
    file's blocks as stored, quantizes f32 weights once when they are loaded, and refuses
    weights stored in another quantized format.

      %w = kiln.param "fc.weight" : tensor<512x128xf32>
      %y = kiln.linear %x, %w : (tensor<?x128xf32>, tensor<512x128xf32>) -> tensor<?x512xf32>
    becomes (format=q8_0)
      %w = kiln.param "fc.weight" {format = #kiln.weight_format<q8_0>} : tensor<512x4x34xi8>
      %y = kiln.linear %x, %w {weight_format = #kiln.weight_format<q8_0>} : (tensor<?x128xf32>, tensor<512x4x34xi8>) -> tensor<?x512xf32>
  }];
  let options = [Option<"format", "format", "kiln::WeightFormat", "kiln::WeightFormat::f32",
                        "every eligible parameter's format (f32: only those tensor-formats names)",
                        [{::llvm::cl::values(clEnumValN(kiln::WeightFormat::f32, "f32", "as declared"),
                                             clEnumValN(kiln::WeightFormat::q8_0, "q8_0", "ggml Q8_0 blocks"),
                                             clEnumValN(kiln::WeightFormat::q4_0, "q4_0", "ggml Q4_0 blocks"),
                                             clEnumValN(kiln::WeightFormat::q4_1, "q4_1", "ggml Q4_1 blocks"))}]>,
                 ListOption<"tensorFormats", "tensor-formats", "std::string", "name=format for each named parameter (a GGUF file's types)">,
                 Option<"gpu", "gpu", "bool", "false", "a GPU target (quantized weights refused: its kernels are CPU-only)">];
}

def PrepackWeights : Pass<"kiln-prepack-weights", "mlir::ModuleOp"> {
  let summary = "Keep GEMM weights in the layout their kernels read, made once at load: transposed, then in panels";
  let description = [{
    1. A parameter whose every use (in every entry) is the [out, in] weight of a linear or of a
       chunked FFN becomes `transposed`: its type is [in, out] and its users read it in the
       in_out layout.
    2. On a CPU target, a 2-D parameter whose every use is then the [in, out] weight of a linear
       or an FFN is kept in panels: [ceil(N / w), in, w], w = the register block's columns for
       its N columns (kiln-tile-ops reads one panel per block: 4 vectors of the target, within
       N), `panel_cols = N`, its users' layout "panels". A GEMM then never packs it per call or
       per task, and a decode step's streaming GEMM reads the same panels front to back.
    The runtime lays the weights out once, when they are loaded or generated, and saves them
    back in the file's layout. The panels' padding counts in the parameters' bytes (the cost
    report, --max-memory).

      %w = kiln.param "fc.weight" : tensor<512x128xf32>
      %y = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<out_in>}
    becomes (--vector-width=16)
      %w = kiln.param "fc.weight" {panel_cols = 512 : i64, transposed} : tensor<8x128x64xf32>
      %y = kiln.linear %x, %w {weight_layout = #kiln.weight_layout<panels>}
    A parameter with any other use (an embedding table tied to the output head) is left alone.
  }];
  let options = [Option<"vectorWidth", "vector-width", "int64_t", "16", "f32 lanes of the target's widest SIMD">,
                 Option<"gpu", "gpu", "bool", "false", "a GPU target: no panels (its GEMMs stage tiles in shared memory)">];
}

def TileOps : Pass<"kiln-tile-ops", "mlir::ModuleOp"> {
  let summary = "Choose tiles, attention engines, weight packing and GPU tiles for every kernel";
  let description = [{
    Completes each kernel's `kiln.schedule`: on the CPU register blocks and task tiles for
    linears, matmuls and FFNs (rows x vector columns), whether a linear's tasks are column
    tiles, how weights are packed; the attention engine (online blocks over a sequence, row
    strips over a cache) and its query block; LSH hashing tiles; rows per task for row-wise
    ops. On a GPU target: block tiles, K staging and threads per row instead.

      %y = kiln.linear %x, %w : (tensor<?x128xf32>, tensor<512x128xf32>) -> tensor<?x512xf32>
    becomes
      %y = kiln.linear %x, %w {kiln.schedule = #kiln.schedule<tile_m = 4, tile_n = 64, tile_rows = 32, column_tasks = 1, pack = per_task>} : ...
  }];
  let options = [Option<"vectorWidth", "vector-width", "int64_t", "16", "f32 lanes of the target's widest SIMD">,
                 Option<"gpu", "gpu", "bool", "false", "GPU schedules (block tiles and threads) for every kernel">];
}

def AssignPrecision : Pass<"kiln-assign-precision", "mlir::ModuleOp"> {
  let summary = "Decide the precision of every GEMM's operands (mixed precision)";
  let description = [{
    The requested precision is the pass's `precision` option when given (the driver's
    --precision), else the module's `kiln.precision` (the DSL's Model::set_precision), else f32.
    With bf16, every kiln.linear, kiln.matmul, kiln.batch_matmul and kiln.ffn (the backward's
    input gradients, dY·W, are matmuls too) gets `precision = bf16` in its schedule: its kernel
    rounds both operands to bfloat16 (round to nearest, ties to even) and sums the products in
    f32. Parameters, activations between kernels, weight gradients (kiln.weight_grad) and
    the optimizer stay f32 (attention: see `cpu` below).

    With `dot` (a target with AVX-512 BF16), a linear, matmul (not batched) or FFN that
    kiln-tile-ops gave a register-block schedule without K chunks and whose column tiles
    (tile_n, an FFN's hidden_tile_n too) are whole 16-lane vectors gets `precision = bf16_dot` instead: the same rounding, and each pair of
    products along K summed by one lane of a `vdpbf16ps` (f32 accumulators).

      %y = kiln.linear %x, %w {kiln.schedule = #kiln.schedule<..., gemm = register_block>} : ...
    becomes
      %y = kiln.linear %x, %w {kiln.schedule = #kiln.schedule<..., gemm = register_block, precision = bf16_dot>} : ...

    With `cpu` (a CPU target) and no training step in the module (no kiln.adamw_step: the
    optimizer updates f32 master weights), a parameter whose every use reads it in panels as a
    linear's weight, an FFN's W1 or W2 or an embedding's table gets the element type bf16: the
    runtime keeps it in bfloat16 (rounded once at load, or as stored in a BF16 checkpoint), half
    the bytes of f32, and the GEMMs read it as it is kept.

      %w = kiln.param "h.0.mlp.c_fc.weight" {panel_cols = 3072, ...} : tensor<48x768x64xf32>
    becomes
      %w = kiln.param "h.0.mlp.c_fc.weight" {panel_cols = 3072, ...} : tensor<48x768x64xbf16>

    With `cpu`, every attention and its gradient gets `precision = bf16` as well, whatever its
    engine (kiln.attention and kiln.attention_grad: dense, causal, over a cache, block-sparse;
    kiln.lsh_hash, kiln.lsh_chunk_attention and kiln.lsh_chunk_attention_grad): the kernels
    round q, k and v (LSH: the shared qk, hashed as rounded) to bfloat16 and compute scores,
    softmax, the weighted sums and the gradients in f32.
  }];
  let options = [Option<"precision", "precision", "kiln::PrecisionOption", "kiln::PrecisionOption::model",
                        "model (the module's kiln.precision, else f32), f32 or bf16",
                        [{::llvm::cl::values(clEnumValN(kiln::PrecisionOption::model, "model", "the module's kiln.precision, else f32"),
                                             clEnumValN(kiln::PrecisionOption::f32, "f32", "f32 operands"),
                                             clEnumValN(kiln::PrecisionOption::bf16, "bf16", "bfloat16 operands, f32 sums"))}]>,
                 Option<"dot", "dot", "bool", "false",
                        "the target has AVX-512 BF16 dot products (vdpbf16ps)">,
                 Option<"cpu", "cpu", "bool", "false",
                        "the target is a CPU: attention rounds too, and an inference model keeps its GEMM weights in bfloat16">];
}

def AssignSchedule : Pass<"kiln-assign-schedule", "mlir::ModuleOp"> {
  let summary = "Decide vectorization and parallelism of every kernel";
  let description = [{
    Completes `kiln.schedule` with the vector width and whether the kernel's tasks run in
    parallel: where its work at the sequence-length bounds (FLOPs plus bytes moved, from its
    cost hook) is at least 2^16.

      kiln.schedule = #kiln.schedule<tile_m = 4, tile_n = 64, ...>
    becomes
      kiln.schedule = #kiln.schedule<vec = 16, parallel = 1, tile_m = 4, tile_n = 64, ...>
  }];
  let options = [Option<"vectorWidth", "vector-width", "int64_t", "16", "f32 lanes of the target's widest SIMD">];
}

def FoldViews : Pass<"kiln-fold-views", "mlir::ModuleOp"> {
  let summary = "Make slices, transposes and head splits strided views instead of copy kernels";
  let description = [{
    A slice or transpose whose users can all read it in place (Halide kernels, or reshapes that
    stay strided) becomes a view of its operand's buffer; a transpose of a kernel's result that
    nothing else reads is written in place by that kernel. The decision is the typed attribute
    `kiln.view` (#kiln.view<kind, offset, strides>); the kernels are generated for those strides.

      %qkv = kiln.linear ... : tensor<?x2304xf32>
      %q = kiln.slice %qkv {axis = 1, offset = 0} : tensor<?x768xf32>
      %r = kiln.reshape %q : tensor<?x12x64xf32>
      %t = kiln.transpose %r {permutation = [1, 0, 2]} : tensor<12x?x64xf32>
    becomes
      %q = kiln.slice %qkv {kiln.view = #kiln.view<kind = read, offset = 0, strides = [2304, 1]>, ...}
      %r = kiln.reshape %q {kiln.view = #kiln.view<kind = read, offset = 0, strides = [2304, 64, 1]>}
      %t = kiln.transpose %r {kiln.view = #kiln.view<kind = read, offset = 0, strides = [64, 2304, 1]>, ...}
    Not on GPU targets (their buffers stay dense).
  }];
  let options = [Option<"gpu", "gpu", "bool", "false", "a GPU target: fold nothing">];
}

def LoopSequences : Pass<"kiln-loop-sequences", "mlir::ModuleOp"> {
  let summary = "Mark the kernels of a batched entry that run once per sequence";
  let description = [{
    A batch of B sequences of L positions is B·L rows (Model::rows; the module's
    kiln.seq_factors). Row-wise kernels run once over all rows; a kernel that relates the
    positions of a sequence (attention and its gradient, positions, causal convolution, masks)
    gets `kiln.per_sequence = B`, and kiln-lower-to-llvm calls it once per sequence with views
    of that sequence's rows:
      %o = kiln.attention %q, %k, %v {mask = #kiln.mask<causal>, ...} : (tensor<4x?x32xf32>, ...)   // ? = B*L
    becomes
      %o = kiln.attention %q, %k, %v {kiln.per_sequence = 1 : i64, mask = #kiln.mask<causal>, ...}
    An entry with an op that cannot run a batch (a KV cache, a slice along the rows, all rows
    against all rows) gets `kiln.single_sequence = "why"`: the runtime refuses it B > 1.
  }];
}

def OutlineKernels : Pass<"kiln-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Turn every compute op into a kernel with a content-hashed name";
  let description = [{
    Writes `kiln.kernel_spec` (op kind, the attributes its getKernelAttrs hook names, the
    schedule and the operand types, as canonical text: the kernel cache's key) and
    `kiln.kernel` (a name derived from a hash of the spec and the target) on each kernel op.
    Ops with the same spec share one kernel. Reshapes become views, not kernels.
  }];
  let options = [Option<"target", "target", "std::string", "\"host\"", "target string that keys the kernel cache">];
}

def PlanBuffers : Pass<"kiln-plan-buffers", "mlir::ModuleOp"> {
  let summary = "Assign every tensor a buffer: a parameter, an input/output, or an arena slot";
  let description = [{
    1. Infer, for each dynamic dim, which sequence length it is (`kiln.syms` per result, from
       the ops' inferSeqLengths hooks), and check every tensor stays under 2^31 elements.
    2. Number the buffers: parameters, then inputs and outputs, then arena slots.
    3. A reshape aliases its input's buffer; a returned value is written straight into its output.
    4. Record each arena slot's size (bytes as a monomial in the sequence lengths) and live range
       (first and last kernel) as a #kiln.arena_slot in the function's `kiln.arena`; the runtime
       places them at start-up.
  }];
}

def LowerToLLVM : Pass<"kiln-lower-to-llvm", "mlir::ModuleOp"> {
  let summary = "Lower each entry function to an LLVM function that calls its kernels";
  let description = [{
    Each `func.func @NAME` becomes `llvm.func @kiln_entry_NAME(%buffers, %syms, %failed) -> i32`
    that fills one halide_buffer_t view per operand (extents from the sequence lengths) and calls
    the Halide kernels in order, returning the first non-zero status.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
  let options = [Option<"prefix", "prefix", "std::string", "\"kiln_entry_\"",
                        "symbol prefix of the entry functions (unique per model linked into one program)">,
                 Option<"gpu", "gpu", "std::string", "\"\"",
                        "GPU kernels (cuda or opencl): operands marked host-dirty, each result copied back and device copies freed after each call">,
                 Option<"resident", "resident", "bool", "false",
                        "GPU kernels on device-resident buffers (device pointers after the host table)">];
}

#endif
