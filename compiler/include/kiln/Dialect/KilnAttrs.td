// KilnAttrs.td - the decisions kiln's passes make, as typed attributes (IREE's lowering configs):
// each is chosen by one pass, printed in the IR and the schedule report, and applied by codegen
// or the runtime. A pass keeps a decision already present (a user's .mlir, an edited dump).
#ifndef KILN_ATTRS
#define KILN_ATTRS

include "mlir/IR/AttrTypeBase.td"
include "kiln/Dialect/KilnEnums.td"

class Kiln_Attr<string name, string attrMnemonic> : AttrDef<Kiln_Dialect, name> {
  let mnemonic = attrMnemonic;
}
class Kiln_Int<string what> : OptionalParameter<"std::optional<int64_t>", what>;

// ---------------------------------------------------------------- the schedule of a kernel
def Kiln_ScheduleAttr : Kiln_Attr<"Schedule", "schedule"> {
  let summary = "how a kernel is tiled, vectorized and run in parallel";
  let description = [{
    Set by kiln-chunk-ffn (chunk), kiln-tile-sparse-pattern (block), kiln-assign-precision
    (precision), kiln-tile-ops (tiles, engines, packing, GPU tiles) and kiln-assign-schedule
    (vector width, parallelism); the
    kernel generator only applies it. Only the fields an op's kernel reads are set:

      vec             f32 lanes of the kernel's vectors (the target's, halved down to the
                      innermost extent)
      parallel        1: the kernel's tasks run on the runtime's threads (the work at the
                      length bounds is at least 2^16 FLOPs and bytes); 0: one thread
      tile_m, tile_n  a GEMM's register block: rows x columns (a multiple of vec); gemm =
                      stream: every row (a decode step's, or the bound of a batch's few)
      tile_rows       rows of a GEMM's task tile (shorter inputs get 1, 2, 4... blocks; one
                      register block's with column tasks)
      column_tasks    1: a linear's tasks are its column tiles, each packing its weight panel
                      once (enough columns for every thread); 0: row and column tiles fused
      k_chunk         a CPU GEMM's K per pass over the rows (0 or unset: all of K in the
                      register block; a long K is summed chunk by chunk into the output,
                      each chunk's weight panel cache-resident)
      k_unroll        a CPU register-block GEMM's unrolling of its K loop (unset: 2)
      col_group       gemm = stream over a quantized weight with f32 operands: columns summed
                      together, their sums' chains interleaved and their blocks' scales
                      decoded together just before (unset: 1)
      gemm            register_block | stream (a few static rows: each weight read once,
                      in place, column tiles split among the threads)
      pack            none | per_task | per_call | at_load: the weight panels
      hidden_vec, hidden_tile_n   the FFN's first GEMM (over d_ff)
      rows_per_task   row-wise kernels: rows per task (about 16 KiB)
      engine          attention: row_strip | online_block | block_sparse
      q_block         attention: query rows per block (and key rows, online_block, unless
                      k_block says otherwise)
      k_block         attention, online_block on the CPU: key rows per key block
      block           a sparse pattern's block size
      chunk           the FFN's rows per chunk (its intermediate exists for one chunk)
      lsh_tile        LSH hashing: positions per task (CPU) or per block (GPU)
      gpu_tile_n, gpu_tile_m      GPU block tile: GEMM output columns x rows; row strips:
                                  keys or values x queries; LSH key norms: positions
      gpu_k_chunk                 GEMM: K per shared-memory stage (0: unstaged, K in registers)
      gpu_hidden_tile_n, gpu_hidden_k_chunk   the FFN's first GEMM on the GPU
      gpu_threads     row-wise kernels on the GPU: threads across a row's columns
      precision       a GEMM's operands (kiln-assign-precision): unset or f32, or bf16
                      (both operands rounded to bfloat16, products summed in f32), or
                      bf16_dot (the same, pairs of products summed by AVX-512 BF16 dot
                      products: the kernel converts both operands to pairs along K)

    ```mlir
    %y = kiln.linear %x, %w {kiln.schedule = #kiln.schedule<vec = 16, parallel = 1, tile_m = 4, tile_n = 64, tile_rows = 32, column_tasks = 0, pack = per_task>} : ...
    ```
  }];
  let parameters = (ins
    Kiln_Int<"f32 lanes">:$vec,
    Kiln_Int<"tasks on the runtime's threads">:$parallel,
    Kiln_Int<"register block rows">:$tile_m,
    Kiln_Int<"register block columns">:$tile_n,
    Kiln_Int<"task tile rows">:$tile_rows,
    Kiln_Int<"column-tile tasks">:$column_tasks,
    DefaultValuedParameter<"::kiln::Packing", "::kiln::Packing::unset">:$pack,
    Kiln_Int<"first FFN GEMM lanes">:$hidden_vec,
    Kiln_Int<"first FFN GEMM register block columns">:$hidden_tile_n,
    Kiln_Int<"rows per task">:$rows_per_task,
    DefaultValuedParameter<"::kiln::AttentionEngine", "::kiln::AttentionEngine::unset">:$engine,
    Kiln_Int<"query block">:$q_block,
    Kiln_Int<"key block">:$k_block,
    Kiln_Int<"sparse block">:$block,
    Kiln_Int<"FFN rows per chunk">:$chunk,
    Kiln_Int<"LSH hashing tile">:$lsh_tile,
    Kiln_Int<"GPU block tile columns">:$gpu_tile_n,
    Kiln_Int<"GPU block tile rows">:$gpu_tile_m,
    Kiln_Int<"GPU K stage">:$gpu_k_chunk,
    Kiln_Int<"GPU first FFN GEMM tile columns">:$gpu_hidden_tile_n,
    Kiln_Int<"GPU first FFN GEMM K stage">:$gpu_hidden_k_chunk,
    Kiln_Int<"GPU threads per row">:$gpu_threads,
    Kiln_Int<"CPU GEMM K chunk">:$k_chunk,
    Kiln_Int<"CPU GEMM K unrolling">:$k_unroll,
    Kiln_Int<"quantized GEMV columns together">:$col_group,
    DefaultValuedParameter<"::kiln::GemmEngine", "::kiln::GemmEngine::unset">:$gemm,
    DefaultValuedParameter<"::kiln::OperandPrecision", "::kiln::OperandPrecision::unset">:$precision);
  let assemblyFormat = "`<` struct(params) `>`";
}

// ---------------------------------------------------------------- a sparse pattern's block schedule
def Kiln_SparsePartAttr : Kiln_Attr<"SparsePart", "sparse_part"> {
  let summary = "one part of a sparse block schedule";
  let description = [{
    Queries and keys visited in `queries` and `keys` order, the key blocks of each query block
    chosen by `blocks`, pairs kept by `mask` minus `exclude` (keys an earlier part counts).
  }];
  let parameters = (ins "::kiln::SparseOrder":$queries, "::kiln::SparseOrder":$keys, "::kiln::SparseRule":$blocks,
                        "::kiln::SparseMask":$mask,
                        DefaultValuedParameter<"::kiln::SparseMask", "::kiln::SparseMask::none">:$exclude);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Kiln_SparseScheduleAttr : Kiln_Attr<"SparseSchedule", "sparse_schedule"> {
  let summary = "the block schedule a sparse attention kernel is generated from";
  let description = [{
    Chosen by kiln-tile-sparse-pattern from the attention's pattern and kept when already
    present: the kernel follows these parts (one, or two merged by log-sum-exp), so editing
    them changes what is computed.

    ```mlir
    kiln.sparse = #kiln.sparse_schedule<parts = [#kiln.sparse_part<queries = sequence, keys = sequence, blocks = window_to_diagonal, mask = strided_local>]>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::kiln::SparsePartAttr", "parts">:$parts);
  let assemblyFormat = "`<` `parts` `=` `[` $parts `]` `>`";
}

// ---------------------------------------------------------------- a buffer of the arena
def Kiln_ArenaSlotAttr : Kiln_Attr<"ArenaSlot", "arena_slot"> {
  let summary = "an arena buffer: its size and live range (the runtime's kiln_buffer_info)";
  let description = [{
    bytes * prod(L_s ^ powers[s]) bytes, live from kernel `first` to kernel `last` of its
    entry; kiln-plan-buffers writes one per arena buffer into the entry's `kiln.arena`, the
    runtime places them at start-up for the actual lengths.

    ```mlir
    kiln.arena = [#kiln.arena_slot<bytes = 32, powers = [1, 0, 0, 0], first = 0, last = 1>]
    ```
  }];
  let parameters = (ins "int64_t":$bytes, "::mlir::DenseI64ArrayAttr":$powers, "int64_t":$first, "int64_t":$last);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

// ---------------------------------------------------------------- a strided view of a buffer
def Kiln_ViewAttr : Kiln_Attr<"View", "view"> {
  let summary = "where a tensor lies in its buffer: an element offset and a stride per dim";
  let description = [{
    Set by kiln-fold-views as `kiln.view` on an op: its result is the elements
    buffer[offset + sum_d index_d * strides[d]] of the buffer kiln-plan-buffers gives it (the
    strides in tensor order, outermost first; all static). `kind` says how the buffer is shared:
    read (a view of the operand's buffer: no kernel), write (the op's kernel writes into its
    single user's buffer) or placed (the user of a `write`: its operand's kernel wrote it, no
    kernel). Kernels reading or writing a view are generated for its strides (KernelSpec).
    A view of a sequence's last row (kiln.slice offset -1 of a dynamic axis) adds
    (L[last_sym] - 1) * last_stride to the offset, at run time.

    ```mlir
    %q = kiln.transpose %r {kiln.view = #kiln.view<kind = read, offset = 768, strides = [64, 2304, 1]>}
    ```
  }];
  let parameters = (ins "::kiln::ViewKind":$kind, "int64_t":$offset, "::mlir::DenseI64ArrayAttr":$strides,
                        DefaultValuedParameter<"int64_t", "-1">:$last_sym, DefaultValuedParameter<"int64_t", "0">:$last_stride);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif
