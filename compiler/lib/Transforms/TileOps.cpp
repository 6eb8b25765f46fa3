// kiln-tile-ops: tiles, engines, weight packing and GPU tiles for every kernel.
//
// Algorithm, per kernel op (a decision already in its kiln.schedule is kept):
//   1. linear / matmul / batch_matmul / ffn on the CPU: a register block of tile_m rows x
//      tile_n columns, tile_n = 4 vectors of the op's lanes (the target's halved down to a
//      static column count), at most the columns rounded down to whole vectors; tile_m = 6
//      with AVX-512's 32 registers (6 x 4 accumulator vectors, the weight vectors and a
//      broadcast), 4 with AVX2's 16. Task tiles of tile_rows = 8 blocks. A linear with at
//      least 8 column tiles runs its column tiles as tasks (column_tasks, tile_rows = one
//      block: every block of a tile is computed, the rows' tail too), each packing its
//      weight panel once; a weight kept in panels since load (kiln-prepack-weights) is read in
//      place (pack = at_load, tile_n = the panel's columns); otherwise a weight read
//      transposed, through a dynamic or long (>= 1024) K, or with rows of 1024 or more columns
//      (each K step of an in-place panel on its own page: the TLB misses cost more than the
//      copy) is packed per task, others are read in place. A static K of at least 4 x 2048
//      with column tasks packing per task is summed in k_chunk = 2048 chunks (a K x tile_n
//      panel of the vocabulary-wide product in the LM head's backward is 12.8 MB: it streamed
//      from memory for every row tile). The K loop is unrolled by 2 (k_unroll unset), by 1 for
//      an output of at least 16384 columns (measured: the LM heads). The FFN reads both weights from their panels (at_load) or packs them per
//      call; its first GEMM's tile (hidden_tile_n, hidden_vec) is over d_ff.
//      A linear or matmul (not batched) or an FFN over at most 4 rows (a decode step's static
//      rows, or a batched decode step's dynamic rows whose bound is at most 4) is a bandwidth
//      problem: gemm = stream, tile_m = those rows (or that bound: rows past a run's are
//      computed from clamped copies and not stored), no packing, each weight read once in place
//      by tasks of tile_n columns (128 for 1 or 2 rows, 64 for 3 or 4, within N): an [in, out] weight as
//      row segments (whole panels for a weight in panels), an [out, in] one (a tied LM head)
//      along K, vec = the lanes over K. An FFN streams only [in, out] weights or panels.
//   2. The same ops on a GPU: block tiles of gpu_tile_n columns (64, halved down to the
//      columns, at least 16) x gpu_tile_m = 32 rows, 4 x 4 per thread; with a static K that 32,
//      16, 8 or 4 divides and at least 32 static rows (not a decode step), K is staged through
//      shared memory in chunks of gpu_k_chunk. A transposed weight is transposed once per call.
//   3. attention: a sparse pattern's engine and block come from kiln-tile-sparse-pattern; over a
//      whole sequence (no cache, a dynamic query length) the online block engine with blocks of
//      q_block = 64 queries and, on the CPU, k_block = 128 keys (the per-row rescaling of the
//      running state is paid once per key block: causal attention at L = 8192 took 565 ms
//      against 587-607 with blocks of 64; the GPU's threads keep a key block of scores each,
//      so there key blocks stay q_block); over a cache or for decode steps row strips of
//      q_block = 8 queries (the score strip is 8 x Lk per task; GPU: 32 x 4 tiles per pass),
//      a decode step's fewer static query rows as one block (a batched decode step's one row
//      per sequence: q_block = 1).
//   4. LSH hashing: 64 positions per task (lsh_tile); LSH chunk attention on the GPU: key norms
//      over 128 positions per block (gpu_tile_n).
//   5. weight_grad with static sides, its contiguous side whole vectors: a register block of
//      tile_n = 4 vectors x tile_m = 6 rows of the result, as the linears' (3 x 4 with 16
//      registers; GPT-2's weight gradients took ~6% less time than with 3 x 8), summed over all
//      rows of the operands, blocks of tile_rows = 384 result rows (their operand columns
//      packed tile by tile, rows_per_task = 64 rows of them per packing task); otherwise the
//      plain column-strip schedule.
//   6. row-wise ops (norms, softmax, elementwise, data movement, depthwise conv, ACT): CPU
//      rows_per_task = enough rows that a task touches about 16 KiB; GPU a block per row with
//      gpu_threads across its columns (128, halved down to the row, at least 32; 256 per block
//      for a 1-D result).
//   7. the backward's and the optimizer's other kernels on the CPU: attention_grad over a whole
//      sequence, tasks of tile_rows = 16 result rows (query or key rows) per head, register
//      blocks of tile_m = 4 of them; over a sparse pattern's blocks, rows_per_task = 256;
//      lsh_chunk_attention_grad, rows_per_task = 16 sorted slots; cross_entropy, the rows'
//      losses in rows_per_task = 16; sum_squares of a 1-D tensor, partial sums of
//      rows_per_task = 4096 elements. (GPU: a block per row, as rule 6, for the two attention
//      gradients.) Kernels with no decision: the column strips of reduce_rows and
//      embedding_grad, the serial mean, the runtime's, cache_write (new rows only) and
//      act_running (one serial reduction).
#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_TILEOPS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
int64_t dim(Value v, int64_t d) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t s = t.getDimSize(d < 0 ? t.getRank() + d : d);
  return ShapedType::isDynamic(s) ? -1 : s;
}

// A streaming GEMM's rows at most (a decode step, a few batched ones) and its column tile:
// 128 columns for 1 or 2 rows, 64 for 3 or 4 (at most 16 accumulator vectors), whole vectors
// within N; for a weight in panels of `panel` columns (0: none), whole panels.
constexpr int64_t kStreamRows = 4;
// A batched decode step over quantized weights streams up to this many rows (the batch's bound),
// in groups of kStreamRows: a register-block GEMM would decode every weight to f32 per call.
constexpr int64_t kStreamBatchRows = 64;
// A quantized streaming GEMM's columns summed together (col_group).
constexpr int64_t kStreamColGroup = 4;
// A CPU GEMM's K per chunk where K is long (at least 4 chunks).
constexpr int64_t kKChunk = 2048;
constexpr int64_t kWideColumns = 16384;  // an output this wide: K not unrolled (measured, rule 1)
// The backward's and the optimizer's tasks (rules 5 and 7).
constexpr int64_t kWeightGradPackRows = 64;  // weight_grad: rows of S packed per task
constexpr int64_t kAttentionGradRows = 16, kAttentionGradBlock = 4;
constexpr int64_t kSparseGradRows = 256;
constexpr int64_t kLshGradSlots = 16;
constexpr int64_t kLossRows = 16;
constexpr int64_t kSumSquaresChunk = 4096;
int64_t streamTileN(int64_t lanes, int64_t N, int64_t M, int64_t panel = 0) {
  int64_t tn = M <= 2 ? 128 : 64;
  tn = std::max(lanes, std::min(tn, N / lanes * lanes));
  return panel ? std::max(panel, tn / panel * panel) : tn;
}

// The GPU block tile's columns: 64, halved while half still covers N, at least 16.
int64_t gpuTileN(int64_t N) {
  int64_t tn = 64;
  if (N >= 0)
    while (tn > 16 && tn / 2 >= N) tn /= 2;
  return tn;
}

// The K chunk a GPU GEMM stages through shared memory: the largest of 32, 16, 8, 4 dividing a
// static K; 0 (unstaged) for a dynamic K or a static M under one block's 32 rows (decode
// steps), where whole staged tiles would mostly be padding.
int64_t gpuKChunk(int64_t K, int64_t M) {
  if (M >= 0 && M < 32) return 0;
  for (int64_t kc : {32, 16, 8, 4})
    if (K > 0 && K % kc == 0) return kc;
  return 0;
}

// Threads across a row of `inner` columns on the GPU (a 1-D result: 256 elements per block).
int64_t gpuRowThreads(int64_t rank, int64_t inner) {
  if (rank == 1) return 256;
  int64_t tx = 128;
  if (inner >= 0)
    while (tx > 32 && tx / 2 >= inner) tx /= 2;
  return tx;
}

struct TileOpsPass : kiln::impl::TileOpsBase<TileOpsPass> {
  using TileOpsBase::TileOpsBase;

  // The columns of a weight's panels (weight layout "panels", kiln-prepack-weights), or 0.
  static int64_t panelWidth(Value w, kiln::WeightLayoutKind layout) { return layout == kiln::WeightLayoutKind::panels ? dim(w, 2) : 0; }

  // The most rows v's dim `axis` can have: its static size, the bound of a batch's dynamic
  // rows (one row per sequence in a batched decode step: B's bound), or -1.
  std::optional<kiln::SeqLengths> lengths_;
  ArrayRef<int64_t> bounds_;
  int64_t atMost(Value v, int64_t axis) const {
    int64_t d = dim(v, axis);
    if (d >= 0 || !lengths_) return d;
    const kiln::Syms &sy = lengths_->of(v);
    int64_t a = axis < 0 ? (int64_t)sy.size() + axis : axis;
    int64_t sym = a >= 0 && a < (int64_t)sy.size() ? sy[a] : -1;
    return sym >= 0 && sym < (int64_t)bounds_.size() ? bounds_[sym] : -1;
  }

  // Whether v's dim `axis` is a batch itself (one row per sequence: a batched decode step).
  ArrayRef<int64_t> factors_;
  bool onePerSequence(Value v, int64_t axis) const {
    if (!lengths_ || dim(v, axis) >= 0) return false;
    const kiln::Syms &sy = lengths_->of(v);
    if (axis < 0) axis += (int64_t)sy.size();
    return axis >= 0 && axis < (int64_t)sy.size() && kiln::isBatchSymbol(factors_, sy[axis]);
  }

  // An [N, K] weight streamed along K: column tiles of 64, fewer where that leaves under 16 tasks
  // (N = 576: 9 tasks of 64 kept one of two threads idle for a ninth of the step; 18 of 32 split
  // evenly).
  static int64_t streamTileNAlongK(int64_t N) {
    int64_t tn = 64;
    while (tn > 16 && N / tn < 16) tn /= 2;
    return std::min(tn, N);
  }

  void gemm(Operation *op, kiln::ScheduleFields &s) {
    auto lin = dyn_cast<kiln::LinearOp>(op);
    bool batch = isa<kiln::BatchMatMulOp>(op);
    int64_t N = dim(op->getResult(0), -1), K = dim(op->getOperand(0), -1), M = atMost(op->getOperand(0), -2);
    bool transposed = lin ? lin.getWeightLayout() == kiln::WeightLayoutKind::out_in : op->getAttrOfType<BoolAttr>("transpose_b").getValue();
    int64_t panel = lin ? panelWidth(lin.getWeight(), lin.getWeightLayout()) : 0;
    if (gpu) {
      s.gpu_tile_n = gpuTileN(N);
      s.gpu_tile_m = 32;
      s.gpu_k_chunk = gpuKChunk(K, M);
      s.pack = transposed ? kiln::Packing::per_call : panel ? kiln::Packing::at_load : kiln::Packing::none;
      return;
    }
    int64_t lanes = kiln::lanesFor(vectorWidth, N);
    const bool quantized = lin && lin.getWeightFormat() != kiln::WeightFormat::f32;
    const bool batchedStep = quantized && M > kStreamRows && M <= kStreamBatchRows && onePerSequence(op->getOperand(0), -2);
    if (!batch && M > 0 && (M <= kStreamRows || batchedStep) && N > 0 && K > 0) {
      s.gemm = kiln::GemmEngine::stream;
      s.pack = panel ? kiln::Packing::at_load : kiln::Packing::none;
      s.tile_m = std::min(M, kStreamRows);
      s.tile_n = transposed ? streamTileNAlongK(N) : streamTileN(lanes, N, M, panel);
      if (transposed) s.vec = kiln::lanesFor(vectorWidth, K);
      // A quantized weight's columns 4 at a time: four chains of 16-lane sums in flight, and each
      // group's scales decoded just before its blocks are summed (the group's first touch of its
      // bytes; the tile's, decoded in a pass before, left the tile to be read twice from beyond L1).
      // SmolLM2's decode step, AMD EPYC, 2 threads: 11.7 -> 9.9 ms a token (1 column, scales per tile).
      if (quantized && *s.tile_n % kStreamColGroup == 0) s.col_group = kStreamColGroup;
      return;
    }
    s.gemm = kiln::GemmEngine::register_block;
    s.tile_m = kiln::gemmTileM(vectorWidth);
    s.tile_n = panel ? panel : kiln::gemmTileN(vectorWidth, N);
    s.column_tasks = N >= 0 && N / *s.tile_n >= 8 && !batch;
    // Row tiles are the tasks' unit only without column tasks. A column task reuses its panel
    // in every register block, tiled or not, so its rows are one block per tile: a tile of
    // several blocks computes all of them, and 8-block tiles computed 24 blocks for the 22 of
    // M = 128 (9% of the work) and 88 for M = 512's 86.
    s.tile_rows = *s.column_tasks ? *s.tile_m : 8 * *s.tile_m;
    s.pack = panel                                                      ? kiln::Packing::at_load
             : transposed || N < 0 || K < 0 || K >= 1024 || N >= 1024 ? kiln::Packing::per_task
                                                                       : kiln::Packing::none;
    // A long static K (the backward's product with a vocabulary-wide gradient): chunks of
    // kKChunk, each column task's panel of one chunk cache-resident, summed into the output.
    if (K >= 4 * kKChunk && *s.column_tasks && s.pack == kiln::Packing::per_task &&
        (!lin || lin.getActivation() == kiln::ActivationKind::none))
      s.k_chunk = kKChunk;
    // The K loop unrolled by 2, except for a vocabulary-wide output (the LM head): measured on
    // GPT-2's kernel objects timed alone (2 threads, AVX-512), unrolling by 2 made the
    // [1024, 768] x [768, 3072] and [.., 2304] products 3-8% faster and the 50257-wide ones
    // 20-25% slower (unrolled by 1: the training step's head, packed per task, 320 -> 254 ms at
    // 1024 rows; the inference head in panels 161 -> 130 ms at 512 rows).
    if (N >= kWideColumns && !s.k_chunk) s.k_unroll = 1;
  }

  // weight_grad (out[J, I] = the sum over rows of S(j) ⊗ V(i)) on the CPU: a register block of
  // tile_n (3 vectors of I) x tile_m (8 with 32 vector registers, else 4) accumulates over all
  // rows; S's columns in blocks of tile_rows, each block packed tile by tile.
  void weightGrad(Operation *op, kiln::ScheduleFields &s) {
    if (cast<RankedTensorType>(op->getResult(0).getType()).getRank() != 2) return;  // the verifier's to report
    int64_t I = dim(op->getResult(0), 1), J = dim(op->getResult(0), 0);
    int64_t lanes = kiln::lanesFor(vectorWidth, I);
    if (gpu || I < 0 || J < 0 || I % lanes) return;  // the plain column-strip schedule
    s.tile_n = std::min((vectorWidth >= 16 ? 4 : 3) * lanes, I);
    s.tile_m = std::min<int64_t>(vectorWidth >= 16 ? 6 : 4, J);
    s.tile_rows = std::max(*s.tile_m, 384 / *s.tile_m * *s.tile_m);
    s.rows_per_task = kWeightGradPackRows;
  }

  void ffn(kiln::FfnOp op, kiln::ScheduleFields &s) {
    bool oi1 = op.getLayout1() == kiln::WeightLayoutKind::out_in, oi2 = op.getLayout2() == kiln::WeightLayoutKind::out_in;
    int64_t panel1 = panelWidth(op.getW1(), op.getLayout1()), panel2 = panelWidth(op.getW2(), op.getLayout2());
    int64_t M = atMost(op.getX(), 0), dout = dim(op.getResult(), 1), dff = dim(op.getB1(), 0);
    if (!gpu && M > 0 && M <= kStreamRows && !oi1 && !oi2) {
      int64_t lanes = kiln::lanesFor(vectorWidth, dout), hiddenLanes = kiln::lanesFor(vectorWidth, dff);
      s.gemm = kiln::GemmEngine::stream;
      s.tile_m = M;
      s.pack = panel1 && panel2 ? kiln::Packing::at_load : kiln::Packing::none;
      s.tile_n = streamTileN(lanes, dout, M, panel2);
      s.hidden_vec = hiddenLanes;
      s.hidden_tile_n = streamTileN(hiddenLanes, dff, M, panel1);
      return;
    }
    // Both weights in panels: read in place; otherwise the others are packed once per call.
    s.pack = panel1 && panel2 ? kiln::Packing::at_load : kiln::Packing::per_call;
    if (!gpu) s.gemm = kiln::GemmEngine::register_block;
    if (gpu) {
      s.gpu_tile_n = gpuTileN(dout);
      s.gpu_hidden_tile_n = gpuTileN(dff);
      s.gpu_tile_m = 32;
      s.gpu_k_chunk = gpuKChunk(dff, M);
      s.gpu_hidden_k_chunk = gpuKChunk(dim(op.getX(), 1), M);
      return;
    }
    int64_t lanes = kiln::lanesFor(vectorWidth, dout), hiddenLanes = kiln::lanesFor(lanes, dff);
    int64_t tn0 = std::min(4 * vectorWidth, (dout + vectorWidth - 1) / vectorWidth * vectorWidth);
    s.tile_m = kiln::gemmTileM(vectorWidth);
    s.tile_n = panel2 ? panel2 : std::max(lanes, std::min(tn0, dout / lanes * lanes));
    s.hidden_vec = hiddenLanes;
    s.hidden_tile_n = panel1 ? panel1 : std::max(hiddenLanes, std::min(tn0, dff / hiddenLanes * hiddenLanes));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto bounds = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
    bounds_ = bounds ? bounds.asArrayRef() : ArrayRef<int64_t>{};
    // Lengths only where a batch may make few dynamic rows (a module with kiln.seq_factors).
    auto factors = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_factors");
    factors_ = factors ? factors.asArrayRef() : ArrayRef<int64_t>{};
    bool batched = bool(factors);
    for (auto f : module.getOps<func::FuncOp>()) {
      lengths_.reset();
      if (batched) {
        FailureOr<kiln::SeqLengths> l = kiln::SeqLengths::infer(f);
        if (failed(l)) return signalPassFailure();
        lengths_ = std::move(*l);
      }
      tile(f);
    }
  }

  void tile(func::FuncOp f) {
    f.walk([&](Operation *op) {
      if (!kiln::isKernelOp(op)) return;
      auto rt = cast<RankedTensorType>(op->getResult(0).getType());
      int64_t inner = dim(op->getResult(0), -1);
      kiln::ScheduleFields s;
      switch (cast<kiln::KilnOpInterface>(op).getTiling()) {
        case kiln::Tiling::None: break;
        case kiln::Tiling::Gemm: gemm(op, s); break;
        case kiln::Tiling::Ffn: ffn(cast<kiln::FfnOp>(op), s); break;
        case kiln::Tiling::Attention: attention(cast<kiln::AttentionOp>(op), inner, s); break;
        case kiln::Tiling::LshHash: s.lsh_tile = 64; break;
        case kiln::Tiling::LshChunkAttention:
          if (gpu) s.gpu_tile_n = 128, s.gpu_threads = gpuRowThreads(3, inner);
          break;
        case kiln::Tiling::WeightGrad: weightGrad(op, s); break;
        case kiln::Tiling::AttentionGrad:
          if (gpu) {
            s.gpu_threads = gpuRowThreads(3, inner);
          } else if (cast<kiln::AttentionGradOp>(op).getPatternSize()) {
            s.rows_per_task = kSparseGradRows;
          } else {
            s.tile_rows = kAttentionGradRows;
            s.tile_m = kAttentionGradBlock;
          }
          break;
        case kiln::Tiling::LshChunkAttentionGrad:
          if (gpu) s.gpu_threads = gpuRowThreads(3, inner);
          else s.rows_per_task = kLshGradSlots;
          break;
        case kiln::Tiling::Loss:
          if (!gpu) s.rows_per_task = kLossRows;
          break;
        case kiln::Tiling::SumSquares:
          if (!gpu && cast<RankedTensorType>(op->getOperand(0).getType()).getRank() == 1) s.rows_per_task = kSumSquaresChunk;
          break;
        case kiln::Tiling::Rowwise:
          if (gpu) {
            s.gpu_threads = gpuRowThreads(rt.getRank(), inner);
            if (isa<kiln::ActInputOp>(op)) s.gpu_tile_n = 64;  // the timestep's sinusoid: d values
          } else {
            int64_t width = inner < 0 ? 64 : inner;
            s.rows_per_task = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, width));
          }
          break;
      }
      kiln::mergeSchedule(op, s);
    });
  }

  void attention(kiln::AttentionOp a, int64_t inner, kiln::ScheduleFields &s) {
    if (kiln::patternOf(a)) {  // kiln-tile-sparse-pattern's block schedule
      if (gpu) s.gpu_threads = gpuRowThreads(3, inner);
      return;
    }
    // An lse result is written by the sequence engine only (static lengths too). A sliding
    // window over a cache or grouped key heads takes row strips, the window a predicate.
    bool sequence = !a.getPast() && a.getMask() != kiln::MaskKind::window && (dim(a.getQuery(), 1) < 0 || a.getLse());
    s.engine = sequence ? kiln::AttentionEngine::online_block : kiln::AttentionEngine::row_strip;
    // A decode step's few static query rows are one block of their own: a block of 8
    // would compute 8 score rows for 1.
    int64_t lq = onePerSequence(a.getQuery(), 1) ? 1 : dim(a.getQuery(), 1);  // a batched decode step: 1 per call
    s.q_block = sequence ? 64 : lq > 0 && lq < 8 ? lq : 8;
    if (sequence && !gpu) s.k_block = 128;
    if (gpu && sequence) s.gpu_threads = gpuRowThreads(3, inner);
    if (gpu && !sequence) s.gpu_tile_n = 32, s.gpu_tile_m = 4;
  }
};
}  // namespace
