// Passes.td - kiln's passes, in pipeline order. Each is one file with the same stem.
#ifndef KILN_PASSES
#define KILN_PASSES
include "mlir/Pass/PassBase.td"

def FuseAttention : Pass<"kiln-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Recognize attention written as separate ops and fuse it into kiln.attention";
  let description = [{
    Before:
      %s = kiln.batch_matmul %q, %k {transpose_b = true}
      %t = kiln.scale %s {factor = 0.125}
      %u = kiln.add %t, (kiln.mask %t {kind = "causal"})
      %p = kiln.softmax %u
      %o = kiln.batch_matmul %p, %v
    After:
      %o = kiln.attention %q, %k, %v {mask = "causal", scale = 0.125}
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

def LowerAct : Pass<"kiln-lower-act", "mlir::ModuleOp"> {
  let summary = "Expand a recurrent step with adaptive computation time into a host loop";
  let description = [{
    Before:
      %h, %p, %n = kiln.recurrent %x, %hw, %hb {max_steps = 8, threshold = 0.99} {
      ^bb0(%s):  <the step>  kiln.yield %y }
    After:
      %pos = kiln.sinusoidal_positions %x           // the position signal, once
      %c0 = kiln.act_init %x                         // carry [L, 2d + 3]: state, output, h, r, n
      %c = kiln.loop %c0 {max_steps = 8} {
      ^bb0(%c: ..., %t: tensor<1xi32>):
        %s = kiln.act_input %c, %pos, %t             // state + position + timestep signal
        <the step on %s>
        %c1 = kiln.act_update %c, %s, %y, %hw, %hb, %t {max_steps = 8, threshold = 0.99}
        %go = kiln.act_running %c1                   // any position still running?
        kiln.yield %go, %c1 }
      %h = kiln.act_output %c {field = "hidden"}     // and "ponder", "steps"
    The step's ops stay one copy in the loop body (not unrolled); the loop runs on the host and
    stops after the first step that leaves no position running.
  }];
}

def FuseEpilogue : Pass<"kiln-fuse-epilogue", "mlir::ModuleOp"> {
  let summary = "Fold an activation that only consumes a linear into the linear's epilogue";
  let description = [{
    Before:
      %h = kiln.linear %x, %w, %b : ...
      %g = kiln.gelu %h {approximate = "tanh"} : ...
    After:
      %g = kiln.linear %x, %w, %b {activation = "gelu_tanh"} : ...
    The [L, d_ff] activation is then written once instead of written, read and written again.
  }];
}

def ChunkFfn : Pass<"kiln-chunk-ffn", "mlir::ModuleOp"> {
  let summary = "Run the FFN (linear, activation, linear, residual add) over chunks of rows";
  let description = [{
    Before (after kiln-fuse-epilogue):
      %h = kiln.linear %x, %w1, %b1 {activation = "gelu_tanh"}
      %y = kiln.linear %h, %w2, %b2
      %r = kiln.add %x0, %y
    After:
      %r = kiln.ffn %x, %w1, %b1, %w2, %b2, %x0 {activation = "gelu_tanh", chunk = 32}
    The [L, d_ff] intermediate becomes [chunk, d_ff] per task: bias and activation are fused
    into the first matmul, bias and residual into the second. The default chunk keeps the
    intermediate within half of one core's L2 (`l2-bytes`), in multiples of 32 rows, 32 to 64.
  }];
  let options = [
    Option<"chunkRows", "chunk-rows", "int64_t", "0", "rows per chunk (0: from the L2 size)">,
    Option<"l2Bytes", "l2-bytes", "int64_t", "1048576", "L2 cache per core, for the default chunk">
  ];
}

def TileSparsePattern : Pass<"kiln-tile-sparse-pattern", "mlir::ModuleOp"> {
  let summary = "Turn an attention's sparse pattern into a block schedule";
  let description = [{
    For kiln.attention with a pattern (window, strided, fixed, layout), chooses the block size
    (`kiln.schedule` entry `block`) and writes `kiln.sparse`: per part, the query and key orders
    and the rule for the key blocks each query block visits, so that the kernel's work follows
    the allowed entries, not the blocks the pattern touches in sequence order:
      * window, strided local, fixed local: sequence order, the key blocks from the window's
        (or own block's) first block to the diagonal;
      * strided global (j = i mod s): queries and keys in stride-transpose order (the sequence
        as [ceil(L/s), s], transposed): each residue class is contiguous and causal within;
      * fixed global (the summary positions): keys gathered into a compact list;
      * layout: the user's table of key blocks per query block.
    A union (one merged head) has two parts, merged by log-sum-exp; keys both allow are masked
    out of the second. The schedule dump draws each part's block matrix.

      %o = kiln.attention %q, %k, %v {mask = "strided", part = "union", pattern_size = 64}
    becomes
      %o = kiln.attention ... {kiln.schedule = {block = 64}, kiln.sparse = {part0 = "...", part1 = "..."}}
  }];
  let options = [Option<"block", "block", "int64_t", "0", "block size (0: from the pattern, 16 to 64)">];
}

def PrepackWeights : Pass<"kiln-prepack-weights", "mlir::ModuleOp"> {
  let summary = "Keep [out, in] linear weights transposed, so kernels never transpose them per call";
  let description = [{
    A parameter whose every use (in every entry) is the [out, in] weight of a linear or of a
    chunked FFN becomes `transposed`: its type is [in, out] and its users read it in the in_out
    layout. The runtime transposes it once, when the weights are loaded or generated, and saves
    it back in the file's [out, in] layout.

      %w = kiln.param "fc.weight" : tensor<512x128xf32>
      %y = kiln.linear %x, %w {weight_layout = "out_in"}
    becomes
      %w = kiln.param "fc.weight" {transposed} : tensor<128x512xf32>
      %y = kiln.linear %x, %w {weight_layout = "in_out"}
    A parameter with any other use (an embedding table tied to the output head) is left alone.
  }];
}

def TileOps : Pass<"kiln-tile-ops", "mlir::ModuleOp"> {
  let summary = "Choose tile sizes for matmul-class ops, attention and row-wise ops";
  let description = [{
    Adds `kiln.schedule = {tile_m, tile_n, ...}` to each compute op: register tiles for linears
    and matmuls (rows x vector columns), the query block of attention, rows per task for
    row-wise ops. Sizes depend on the target's vector width.
  }];
  let options = [Option<"vectorWidth", "vector-width", "int64_t", "16", "f32 lanes of the target's widest SIMD">];
}

def AssignSchedule : Pass<"kiln-assign-schedule", "mlir::ModuleOp"> {
  let summary = "Decide vectorization and parallelism of every kernel";
  let description = [{
    Completes `kiln.schedule` with the vector width, whether the outer loop runs in parallel
    (only where there is more than one task's worth of work) and the loop that is parallel.
  }];
  let options = [Option<"vectorWidth", "vector-width", "int64_t", "16", "f32 lanes of the target's widest SIMD">];
}

def OutlineKernels : Pass<"kiln-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Turn every compute op into a kernel with a content-hashed name";
  let description = [{
    Writes `kiln.kernel_spec` (op kind, operand types, attributes and schedule, as canonical
    text) and `kiln.kernel` (a name derived from a hash of the spec and the target) on each
    compute op. Ops with the same spec share one kernel. Reshapes become views, not kernels.
  }];
  let options = [Option<"target", "target", "std::string", "\"host\"", "target string that keys the kernel cache">];
}

def PlanBuffers : Pass<"kiln-plan-buffers", "mlir::ModuleOp"> {
  let summary = "Assign every tensor a buffer: a parameter, an input/output, or an arena slot";
  let description = [{
    1. Infer, for each dynamic dim, which sequence length it is (`kiln.syms` per result).
    2. Number the buffers: parameters, then inputs and outputs, then arena slots.
    3. A reshape aliases its input's buffer; a returned value is written straight into its output.
    4. Record each arena slot's size (bytes as a monomial in the sequence lengths) and live range
       (first and last kernel) in the function's `kiln.arena`; the runtime places them at start-up.
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
