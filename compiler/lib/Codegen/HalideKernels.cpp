// HalideKernels.cpp - Halide algorithms and CPU schedules for every kiln op kind.
//
// Tensors are row-major; Halide's dim 0 is the innermost (last) tensor dim, so a [L, d]
// activation is the Halide buffer (d, L). Every input and output buffer is constrained to
// min 0, dense strides and its static extents, so Halide specializes on them; sequence lengths
// stay dynamic. Each builder returns the output Func and a text log of the schedule it applied.
//
// Kernel ABI: int32_t name(halide_buffer_t *in0, ..., halide_buffer_t *out).
#include "kiln/Codegen/HalideKernels.h"
#include "kiln/Codegen/SparsePattern.h"

#include <Halide.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <mutex>
#include <fstream>
#include <sstream>

using namespace Halide;

namespace kiln {
namespace {

void constrain(OutputImageParam p, const TensorDesc &d) {
  int r = (int)d.dims.size();
  Expr stride = 1;
  for (int k = 0; k < r; ++k) {
    int64_t ext = d.dims[r - 1 - k];
    p.dim(k).set_min(0);
    p.dim(k).set_stride(stride);
    if (ext >= 0) p.dim(k).set_extent((int)ext);
    stride = stride * (ext >= 0 ? Expr((int)ext) : p.dim(k).extent());
  }
}

std::vector<Expr> ex(const std::vector<Var> &v) { return std::vector<Expr>(v.begin(), v.end()); }

struct Builder {
  const KernelSpec &k;
  std::vector<ImageParam> in;
  std::ostringstream log;
  int vec;
  explicit Builder(const KernelSpec &spec) : k(spec), vec((int)spec.geti("s.vec", 8)) {
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      ImageParam p(k.inputs[i].is_int ? Int(32) : Float(32), (int)k.inputs[i].dims.size(), "in" + std::to_string(i));
      constrain(p, k.inputs[i]);
      in.push_back(p);
    }
  }
  bool gpu = false;  // CUDA or OpenCL target: GPU schedules (kernels without one run on the host)
  Var gpuRows(Func out, std::vector<Var> vars);
  int rank() const { return (int)k.output.dims.size(); }
  int64_t outDim(int tensorDim) const { return k.output.dims[tensorDim]; }
  // Vectorize v by `vec`, shifting the tail inwards when the extent is static and at least
  // one vector wide, guarding it otherwise.
  void vectorize(Func f, Var v, int64_t extent) {
    int w = vec;
    if (extent >= 0)
      while (w > 1 && w > extent) w /= 2;
    if (w <= 1) return;
    f.vectorize(v, w, extent >= w ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf);
    log << f.name() << ".vectorize(" << v.name() << ", " << w << ")\n";
  }
  // Row-wise schedule: vars[0] vectorized, the rest fused into rows, split into parallel tasks.
  // Returns the per-row var (for compute_at of row reductions) or vars[0] when rank is 1.
  Var rowwise(Func out, std::vector<Var> vars) {
    if (gpu) return gpuRows(out, vars);
    int r = (int)vars.size();
    vectorize(out, vars[0], outDim(r - 1));
    if (r == 1) {
      Var o("o");
      out.split(vars[0], o, vars[0], std::max(vec, 1) * 64, TailStrategy::GuardWithIf).parallel(o);
      log << out.name() << ".split(" << vars[0].name() << ", o, " << vars[0].name() << ", " << vec * 64
          << ").parallel(o)\n";
      return vars[0];
    }
    Var row = vars[1];
    for (int i = 2; i < r; ++i) {
      Var f("f" + std::to_string(i));
      out.fuse(row, vars[i], f);
      row = f;
    }
    int64_t rows = std::max<int64_t>(1, k.geti("s.rows_per_task", 16));
    Var ro("ro"), ri("ri");
    out.split(row, ro, ri, (int)rows, TailStrategy::GuardWithIf);
    if (k.geti("s.parallel", 1)) out.parallel(ro);
    log << out.name() << ": rows fused, split(" << rows << " rows per task)" << (k.geti("s.parallel", 1) ? ".parallel" : "")
        << "\n";
    return ri;
  }
};

// GPU row-wise schedule: one block per row (the leading dims fused), the row's columns across
// up to 128 threads. Returns the block's row var: row reductions computed there (compute_at)
// are per block, once per row.
Var Builder::gpuRows(Func out, std::vector<Var> vars) {
  int r = (int)vars.size();
  if (r == 1) {
    Var bo("bo"), ti("ti");
    out.gpu_tile(vars[0], bo, ti, 256, TailStrategy::GuardWithIf);
    log << out.name() << ".gpu_tile(" << vars[0].name() << ", 256)\n";
    return bo;
  }
  Var row = vars[1];
  for (int i = 2; i < r; ++i) {
    Var f("f" + std::to_string(i));
    out.fuse(row, vars[i], f);
    row = f;
  }
  int64_t inner = outDim(r - 1);
  int tx = 128;
  if (inner >= 0)
    while (tx > 32 && tx / 2 >= inner) tx /= 2;
  Var co("co"), ci("ci");
  out.split(vars[0], co, ci, tx, TailStrategy::GuardWithIf).reorder(ci, co, row).gpu_blocks(row).gpu_threads(ci);
  log << out.name() << ": one GPU block per row (gpu_blocks(" << row.name() << ")), columns split by " << tx
      << " across threads (gpu_threads)\n";
  return row;
}

std::vector<Var> makeVars(int r) {
  std::vector<Var> v;
  for (int i = 0; i < r; ++i) v.push_back(Var("c" + std::to_string(i)));  // not "v<n>": Halide names its own vars so
  return v;
}

// tanh through Halide's vectorized exp: libm's tanhf is a scalar call per lane (it was half of
// a GPT-2 forward pass). e = exp(-2|x|) never overflows; the sign is restored at the end.
Expr vtanh(Expr x) {
  Expr e = exp(-2.0f * abs(x));
  Expr t = (1.0f - e) / (1.0f + e);
  return select(x < 0.0f, -t, t);
}

Expr activation(const std::string &act, Expr x) {
  if (act == "relu") return max(x, 0.0f);
  if (act == "gelu_erf") return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
  if (act == "gelu_tanh") return 0.5f * x * (1.0f + vtanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  return x;
}

// GPU GEMM schedule: output tiles of tn columns x 32 rows per block; tn/4 x 8 threads, each
// with a 4 x 4 block of the output.
//
// With `stage` (a static K that kc divides, operands read through Funcs with clamped indices):
// K runs in chunks of kc inside the block. Per chunk the block's threads copy the chunk's
// operand tiles (kc x 32 rows of A, tn columns x kc of B) into shared memory, then each thread
// sums its 4 x 4 block over the chunk in registers (acc's update rfactor'ed over the chunks) and
// adds it to the block's accumulator tile in shared memory. Every tile, edge tiles included, is
// computed whole (bound_extent): the operand Funcs clamp their indices.
//
// Without: each thread's 4 x 4 accumulators stay in registers over all of K and the operands are
// read through the caches. fullTiles: every thread computes its whole 4 x 4 block, edge tiles
// included: needed where out's rows are a split of a dynamic-sized chunk, and safe only where
// every operand read is clamped (the FFN's packed panels and clamped input rows).
struct GpuStage {
  Func a, b;   // a(k, i[, batch]) and b(j, k[, batch]), as acc's update reads them
  int kc = 0;  // K per chunk (divides K)
};

// The largest K chunk (of 32, 16, 8, 4) dividing a static K; 0: no staging, also for a static M
// under one block's 32 rows (decode steps), where whole staged tiles would mostly be padding.
int gpuKChunk(int64_t K, int64_t M) {
  if (M >= 0 && M < 32) return 0;
  for (int kc : {32, 16, 8, 4})
    if (K > 0 && K % kc == 0) return kc;
  return 0;
}

void gpuGemm(Builder &B, Func out, Func acc, Var j, Var i, RVar rk, const Var *batch, int64_t N, bool fullTiles = false,
             GpuStage *stage = nullptr) {
  int tn = 64;
  if (N >= 0)
    while (tn > 16 && tn / 2 >= N) tn /= 2;
  Var jo("jo"), io("io"), ji("ji"), ii("ii"), jt("jt"), it("it"), jr("jr"), ir("ir");
  out.tile(j, i, jo, io, ji, ii, tn, 32, TailStrategy::GuardWithIf)
      .tile(ji, ii, jt, it, jr, ir, 4, 4, TailStrategy::GuardWithIf);
  if (batch) out.gpu_blocks(jo, io, *batch);
  else out.gpu_blocks(jo, io);
  out.gpu_threads(jt, it).unroll(jr).unroll(ir);
  Var aj = acc.args()[0], ai = acc.args()[1];  // acc's own (column, row): out's row may be a split of it
  if (stage) {
    const int kc = stage->kc;
    Var c("c"), tj("tj"), ti("ti"), uj("uj"), ui("ui");
    RVar rko("rko"), rki("rki");
    acc.compute_at(out, jo).store_in(MemoryType::GPUShared).bound_extent(aj, tn).bound_extent(ai, 32);
    if (batch) acc.bound_extent(*batch, 1);
    acc.tile(aj, ai, tj, ti, uj, ui, 4, 4).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    acc.update().split(rk, rko, rki, kc);
    Func part = acc.update().rfactor(rko, c);  // part(j, i[, b], c): one chunk's sum
    acc.update().tile(aj, ai, tj, ti, uj, ui, 4, 4).reorder(uj, ui, tj, ti, rko).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    Var pj = part.args()[0], pi = part.args()[1];
    part.compute_at(acc, tj).store_in(MemoryType::Register).bound_extent(pj, 4).bound_extent(pi, 4).unroll(pj).unroll(pi);
    part.update().reorder(pj, pi, rki).unroll(pj).unroll(pi).unroll(rki);
    // The chunk's operand tiles, copied by the block's threads (tn/4 x 8 of them).
    Var bj = stage->b.args()[0], bk = stage->b.args()[1], ak = stage->a.args()[0], ar = stage->a.args()[1];
    stage->b.compute_at(acc, rko).store_in(MemoryType::GPUShared).bound_extent(bj, tn).bound_extent(bk, kc);
    stage->b.tile(bj, bk, tj, ti, uj, ui, 4, std::max(1, kc / 8)).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    stage->a.compute_at(acc, rko).store_in(MemoryType::GPUShared).bound_extent(ak, kc).bound_extent(ar, 32);
    stage->a.tile(ak, ar, tj, ti, uj, ui, std::max(1, kc / (tn / 4)), 4).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    if (batch) stage->a.bound_extent(stage->a.args()[2], 1), stage->b.bound_extent(stage->b.args()[2], 1);
    B.log << out.name() << ": GPU tiles of " << tn << " columns x 32 rows per block, " << tn / 4 << " x 8 threads; K in chunks of "
          << kc << ": per chunk the operand tiles (" << stage->a.name() << " " << kc << " x 32, " << stage->b.name() << " " << tn
          << " x " << kc << ") staged in shared memory, each thread's 4 x 4 chunk sum in registers (" << part.name()
          << ", acc rfactor'ed over the chunks) added to the block's " << acc.name() << " tile in shared memory\n";
    return;
  }
  acc.compute_at(out, jt).store_in(MemoryType::Register).unroll(aj).unroll(ai);
  if (fullTiles) acc.bound_extent(aj, 4).bound_extent(ai, 4);
  acc.update().reorder(aj, ai, rk).unroll(aj).unroll(ai);
  B.log << out.name() << ": GPU tiles of " << tn << " columns x 32 rows per block, " << tn / 4
        << " x 8 threads with 4 x 4 register accumulators (" << acc.name() << ".compute_at the thread), K serial\n";
}

// ---- linear, matmul, batch_matmul: out(j, i[, b]) = act(sum_k A(k, i[, b]) * B(j, k[, b]) + bias(j))
//
// Schedule (a GEMM micro-kernel in Halide's terms):
//   * out is tiled into tn columns x tr rows; tiles (and batches) run in parallel;
//   * inside a tile, a register block of 4 rows x tn columns accumulates over all of K with the
//     loops fully unrolled (tn/vec x 4 vector accumulators), k unrolled by 2;
//   * the register block always has 4 rows (bound_extent), so a row tail recomputes clamped
//     rows instead of losing the unrolling; columns shift inwards when N is static;
//   * a weight stored [N, K] (x.Wt) is transposed into a K x tn panel once per tile, so the
//     inner loop reads contiguous vectors from both layouts.
Func buildMatmul(Builder &B) {
  const KernelSpec &k = B.k;
  bool batch = k.kind == "batch_matmul", lin = k.kind == "linear";
  Var j("j"), i("i"), b("b");
  ImageParam A = B.in[0], W = B.in[1];
  int64_t K = k.inputs[0].dims.back();
  Expr Kx = K >= 0 ? Expr((int)K) : A.dim(0).extent();
  Expr M = A.dim(1).extent();
  int64_t N = k.output.dims.back();
  bool transposed = lin ? k.gets("layout") == "out_in" : k.geti("transpose_b", 0) != 0;
  RDom r(0, Kx, "r");
  std::vector<Expr> bIdx{b};
  auto withB = [&](std::vector<Expr> v) {
    if (batch) v.push_back(b);
    return v;
  };
  // Rows beyond M are only ever computed by the last register block's padding: clamp them.
  Expr row = clamp(i, 0, M - 1);
  Func Ar("Ar"), Bt("Bt"), acc("acc"), out("out");
  // Columns are clamped where tiles may overhang N: a dynamic N, and the GPU's whole tiles.
  Expr col = N >= 0 && !B.gpu ? Expr(j) : clamp(j, 0, (transposed ? W.dim(1).extent() : W.dim(0).extent()) - 1);
  Bt(withB({j, Var("kk")})) = transposed ? W(withB({Var("kk"), col})) : W(withB({col, Var("kk")}));
  Ar(withB({Var("kk"), i})) = A(withB({Var("kk"), row}));  // inlined on the CPU
  std::vector<Expr> accArgs = withB({j, i});
  acc(accArgs) = 0.0f;
  acc(accArgs) += Ar(withB({r, i})) * Bt(withB({j, r}));
  Expr v = acc(accArgs);
  if (lin && k.inputs.size() > 2) v = v + B.in[2](j);
  if (lin) v = activation(k.gets("act", "none"), v);
  out(accArgs) = v;
  if (B.gpu) {
    if (transposed) {  // the [N, K] weight transposed once per call, so threads read along N
      Var kk("kk"), bx("bx"), by("by"), tx("tx"), ty("ty");
      Bt.compute_root().gpu_tile(j, kk, bx, by, tx, ty, 16, 16, TailStrategy::GuardWithIf);
      B.log << "Bt: the weight transposed on the GPU once per call (gpu_tile 16 x 16)\n";
    }
    GpuStage stage{Ar, transposed ? Bt.in() : Bt, gpuKChunk(K, k.inputs[0].dims[k.inputs[0].dims.size() - 2])};  // a root Bt is staged through a wrapper
    gpuGemm(B, out, acc, j, i, r, batch ? &b : nullptr, N, false, stage.kc ? &stage : nullptr);
    return out;
  }

  int vec = B.vec;
  int tn = (int)k.geti("s.tile_n", 4 * vec), tm = (int)k.geti("s.tile_m", 4), tr = 8 * tm;
  if (N >= 0) {
    while (vec > 1 && vec > N) vec /= 2;
    tn = std::max(vec, std::min<int>(tn, (int)(N / vec) * vec));
  }
  tn = std::max(vec, tn / vec * vec);
  Var jo("jo"), ji("ji"), io("io"), ii("ii"), yi("yi"), yii("yii"), t("t");
  TailStrategy tj = N >= tn ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
  // Row tiles run inside column tiles, so a weight panel (K x tn, L2-sized) is reused by every
  // row tile while the activations stream. With enough column tiles the parallel loop is the
  // column loop and the panel is packed once per column tile; otherwise tiles are fused.
  bool panelParallel = N >= 0 && N / tn >= 8 && !batch;
  Var par = panelParallel ? jo : t;
  // GuardWithIf keeps an inner split's full trip count, so a 32-row tile would compute 8
  // register blocks for a one-row (decode) input: short inputs get tiles of 1, 2, 4... blocks.
  auto tileRows = [&](Stage st, int rows) {
    st.split(j, jo, ji, tn, tj).split(i, io, ii, rows, TailStrategy::GuardWithIf).reorder(ji, ii, io, jo);
    if (!panelParallel) {
      st.fuse(io, jo, t);
      if (batch) st.fuse(t, b, t);
    }
    if (k.geti("s.parallel", 1)) st.parallel(par);
    st.split(ii, yi, yii, tm, TailStrategy::GuardWithIf);
    if (vec > 1) st.vectorize(ji, vec, TailStrategy::GuardWithIf);
  };
  for (int rows = tm; rows < tr; rows *= 2) tileRows(out.specialize(M <= rows), rows);
  tileRows(out, tr);
  // Pack a panel when the weight is transposed, or when a long K makes the in-place panel (K
  // rows of tn floats, one row per weight row) stream badly from L2.
  bool packed = transposed || N < 0 || K < 0 || K >= 1024;
  if (packed) {
    Bt.compute_at(out, par);
    if (vec > 1) Bt.vectorize(j, vec, TailStrategy::GuardWithIf);
  }
  acc.compute_at(out, yi).bound_extent(i, tm).bound_extent(j, tn);
  if (vec > 1) acc.vectorize(j, vec);
  acc.unroll(i);
  acc.update().reorder(j, i, r);
  if (vec > 1) acc.update().vectorize(j, vec);
  acc.update().unroll(j).unroll(i).unroll(r, 2, TailStrategy::GuardWithIf);
  B.log << "out: tiles of " << tn << " columns x " << tr << " rows, rows inside columns; "
        << (panelParallel ? "parallel over column tiles" : std::string("tiles fused") + (batch ? " with the batch" : "") + ", parallel")
        << "; columns " << (N >= tn ? "ShiftInwards" : "GuardWithIf") << "; vectorize(ji, " << vec << ")\n"
        << "acc.compute_at(out, yi): register block " << tm << " rows x " << tn << " columns (bound_extent), unrolled; "
        << "update reorder(j, i, k).vectorize(j, " << vec << ").unroll(j).unroll(i).unroll(k, 2)\n"
        << (packed ? "Bt: the weight panel [K x " + std::to_string(tn) + "] packed once per " + (panelParallel ? "column tile\n" : "tile\n")
                   : std::string("Bt: inlined (the weight is read in place)\n"));
  return out;
}

// ---- ffn: out(j, i) = sum_f act(sum_k x(k, i) W1(f, k) + b1(f)) W2(j, f) + b2(j) [+ res(j, i)]
//
// Chunks of `chunk` rows run in parallel; within a chunk the intermediate h [chunk x d_ff] is
// computed once (a GEMM with the same register blocks as a linear) and consumed by the second
// GEMM, so it never exists for more than one chunk per thread.
Func buildFfn(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam X = B.in[0], W1 = B.in[1], B1 = B.in[2], W2 = B.in[3], B2 = B.in[4];
  int d = (int)k.inputs[0].dims[1];
  bool oi1 = k.gets("layout1") == "out_in", oi2 = k.gets("layout2") == "out_in";
  int dff = (int)(oi1 ? k.inputs[1].dims[0] : k.inputs[1].dims[1]);
  int dout = (int)k.output.dims[1];
  Expr M = X.dim(1).extent();
  Var j("j"), i("i"), f("f"), kk("kk"), pi("pi"), po("po");
  RDom r1(0, d, "r1"), r2(0, dff, "r2");
  int vec = B.vec, tm = (int)k.geti("s.tile_m", 4), chunk = (int)k.geti("chunk", 32);
  auto tileFor = [&](int n) {
    int w = vec;
    while (w > 1 && w > n) w /= 2;
    int tn = std::max(w, std::min<int>((int)k.geti("s.tile_n", 4 * vec), n / w * w));
    return std::make_pair(w, tn);
  };
  auto [w2, tn2] = tileFor(dout);
  auto [w1, tn1] = tileFor(dff);
  // Each weight is packed once per call into panels: P(pi, kk, po) is column po * tn + pi of
  // row kk, so the panel a column tile reads (K x tn) is contiguous, as for a linear.
  Func P1("P1"), P2("P2"), acc1("acc1"), h("h"), acc2("acc2"), out("out");
  Expr c1 = min(po * tn1 + pi, dff - 1), c2 = min(po * tn2 + pi, dout - 1);
  P1(pi, kk, po) = oi1 ? W1(kk, c1) : W1(c1, kk);
  P2(pi, kk, po) = oi2 ? W2(kk, c2) : W2(c2, kk);
  // The GEMMs' operands as Funcs (inlined on the CPU; staged through shared memory on the GPU).
  Func Xr("Xr"), W1p("W1p"), Hr("Hr"), W2p("W2p");
  Xr(kk, i) = X(kk, clamp(i, 0, M - 1));
  W1p(f, kk) = P1(f % tn1, kk, f / tn1);
  acc1(f, i) = 0.0f;
  acc1(f, i) += Xr(r1, i) * W1p(f, r1);
  h(f, i) = activation(k.gets("act", "none"), acc1(f, i) + B1(f));
  Hr(kk, i) = h(kk, i);
  W2p(j, kk) = P2(j % tn2, kk, j / tn2);
  acc2(j, i) = 0.0f;
  acc2(j, i) += Hr(r2, i) * W2p(j, r2);
  Expr v = acc2(j, i) + B2(j);
  if (k.inputs.size() > 5) v = v + B.in[5](j, i);
  out(j, i) = v;
  if (B.gpu) {  // chunks of rows in a host loop; per chunk h [rows, d_ff] on the device, then the second GEMM
    for (Func P : {P1, P2}) {
      Var kp("kp"), bx("bx"), by("by"), tx("tx"), ty("ty");
      P.compute_root().fuse(kk, po, kp).gpu_tile(pi, kp, bx, by, tx, ty, 16, 16, TailStrategy::GuardWithIf);
    }
    // kiln-chunk-ffn picks GPU-sized chunks (1024 rows unless --ffn-chunk says otherwise): each
    // chunk's two GEMMs still fill the GPU, and h never exceeds chunk x d_ff. Inputs shorter than
    // a chunk are one chunk of their own length (the factor is min(L, chunk)).
    Var ic("ic"), ir("ir");
    out.split(i, ic, ir, min(M, chunk), TailStrategy::GuardWithIf);
    h.compute_at(out, ic);
    GpuStage s1{Xr, W1p, gpuKChunk(d, k.inputs[0].dims[0])}, s2{Hr, W2p, gpuKChunk(dff, k.inputs[0].dims[0])};
    gpuGemm(B, h, acc1, f, i, r1, nullptr, dff, false, s1.kc ? &s1 : nullptr);
    gpuGemm(B, out, acc2, j, ir, r2, nullptr, dout, /*fullTiles=*/true, s2.kc ? &s2 : nullptr);
    B.log << "out: chunks of min(L, " << chunk << ") rows, one after another (a host loop); per chunk h [rows x " << dff
          << "] = act(x.W1 + b1) on the device (h.compute_at(out, ic)), then out = h.W2 + b2"
          << (k.inputs.size() > 5 ? " + residual" : "") << "\n"
          << "W1, W2 packed into panels on the GPU once per call\n";
    return out;
  }

  Var io("io"), ii("ii"), jo("jo"), ji("ji"), yi("yi"), yii("yii");
  // As for linears, inputs shorter than a chunk get chunks of 1, 2, 4... register blocks:
  // GuardWithIf would otherwise compute a whole chunk of h for one row.
  auto tileOut = [&](Stage st, int rows) {
    st.split(i, io, ii, rows, TailStrategy::GuardWithIf)
        .split(j, jo, ji, tn2, TailStrategy::ShiftInwards)
        .split(ii, yi, yii, tm, TailStrategy::GuardWithIf)
        .reorder(ji, yii, yi, jo, io);
    if (k.geti("s.parallel", 1)) st.parallel(io).parallel(jo);  // nested: short inputs are one chunk
    if (w2 > 1) st.vectorize(ji, w2, TailStrategy::GuardWithIf);
  };
  for (int rows = tm; rows < chunk; rows *= 2) tileOut(out.specialize(M <= rows), rows);
  tileOut(out, chunk);
  acc2.compute_at(out, yi).bound_extent(i, tm).bound_extent(j, tn2);
  acc2.update().reorder(j, i, r2);
  if (w2 > 1) acc2.vectorize(j, w2), acc2.update().vectorize(j, w2);
  acc2.unroll(i);
  acc2.update().unroll(j).unroll(i).unroll(r2, 2, TailStrategy::GuardWithIf);
  // The chunk's intermediate, itself a register-blocked GEMM.
  Var fo("fo"), fi("fi"), hy("hy"), hyy("hyy");
  h.compute_at(out, io).split(f, fo, fi, tn1, TailStrategy::ShiftInwards).split(i, hy, hyy, tm, TailStrategy::GuardWithIf)
      .reorder(fi, hyy, hy, fo);
  if (k.geti("s.parallel", 1)) h.parallel(fo);
  if (w1 > 1) h.vectorize(fi, w1, TailStrategy::GuardWithIf);
  acc1.compute_at(h, hy).bound_extent(i, tm).bound_extent(f, tn1);
  acc1.update().reorder(f, i, r1);
  if (w1 > 1) acc1.vectorize(f, w1), acc1.update().vectorize(f, w1);
  acc1.unroll(i);
  acc1.update().unroll(f).unroll(i).unroll(r1, 2, TailStrategy::GuardWithIf);
  // The panels are packed once per call (not once per chunk, which would repeat the packing
  // L/chunk times).
  for (auto [P, w] : {std::pair<Func, int>{P1, w1}, {P2, w2}}) {
    P.compute_root().parallel(po);
    if (w > 1) P.vectorize(pi, w, TailStrategy::GuardWithIf);
  }
  B.log << "out: chunks of " << chunk << " rows in parallel; per chunk h [" << chunk << " x " << dff
        << "] = act(x.W1 + b1) is computed once (h.compute_at(out, io)), then out = h.W2 + b2"
        << (k.inputs.size() > 5 ? " + residual" : "") << "\n"
        << "h: column tiles of " << tn1 << ", register blocks " << tm << " x " << tn1 << " (acc1.compute_at(h, hy))\n"
        << "out: column tiles of " << tn2 << ", register blocks " << tm << " x " << tn2 << " (acc2.compute_at(out, yi))\n"
        << "W1, W2 packed once per call into contiguous [K x tile] panels" << (oi1 || oi2 ? " (transposing [out, in])" : "")
        << "\n";
  return out;
}

// ---- attention: q(d, i, h), k(d, j, h), v(e, j, h) -> out(e, i, h)
Func buildAttention(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam Q = B.in[0], K = B.in[1], V = B.in[2];
  int D = (int)k.inputs[0].dims[2], E = (int)k.inputs[2].dims[2];
  float scale = (float)k.getf("scale", 1.0);
  bool causal = k.gets("mask") == "causal";
  Var d("d"), e("e"), i("i"), j("j"), h("h");
  Expr Lq = Q.dim(1).extent(), Lk = K.dim(1).extent();
  Expr off = Lk - Lq;  // causal: query i sees keys j <= i + (Lk - Lq) (aligned at the end)
  // Over a cache, `past` positions precede the queries and only past + Lq rows hold keys. The
  // key loops stay bounded by the cache length (an RDom's bounds cannot depend on a buffer's
  // contents), with the valid length as a predicate.
  Expr valid;
  if (k.inputs.size() > 3 && k.gets("valid") == "key_count") {  // the first n keys
    Expr n = clamp(B.in[3](0), 0, Lk);
    off = n - Lq;
    valid = n;
  } else if (k.inputs.size() > 3) {
    Expr past = B.in[3](0);
    off = past;
    valid = past + Lq;
  }
  auto limit = [&](RDom &r) {
    if (causal) r.where(r <= i + off);
    if (valid.defined()) r.where(r < valid);
  };
  Func Kt("Kt"), S("S"), m("m"), E_("E"), l("l"), o("o"), out("out");
  Kt(j, d, h) = K(d, j, h);
  RDom rd(0, D, "rd");
  S(j, i, h) = 0.0f;
  S(j, i, h) += Q(rd, clamp(i, 0, Lq - 1), h) * Kt(j, rd, h);  // rows past Lq: a block's padding
  RDom rj(0, Lk, "rj");
  limit(rj);
  m(i, h) = -std::numeric_limits<float>::infinity();
  m(i, h) = max(m(i, h), S(rj, i, h) * scale);
  Expr ev = exp(S(j, i, h) * scale - m(i, h));
  E_(j, i, h) = causal ? select(j <= i + off, ev, 0.0f) : ev;
  RDom rj2(0, Lk, "rj2");
  limit(rj2);
  l(i, h) = 0.0f;
  l(i, h) += E_(rj2, i, h);
  RDom rj3(0, Lk, "rj3");
  limit(rj3);
  o(e, i, h) = 0.0f;
  o(e, i, h) += E_(rj3, i, h) * V(e, rj3, h);
  // A row with no visible key has l = 0: its output is zeros, never NaN.
  out(e, i, h) = select(l(i, h) > 0.0f, o(e, i, h) / l(i, h), 0.0f);
  if (B.gpu) {  // decode steps and short queries over a cache: each stage a GPU pass, scores in memory
    Var bx("bx"), by("by"), tx("tx"), ty("ty");
    S.compute_root().gpu_tile(j, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    S.update().gpu_tile(j, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    E_.compute_root().gpu_tile(j, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    for (Func f : {m, l}) {
      f.compute_root().gpu_tile(i, bx, tx, 32, TailStrategy::GuardWithIf);
      f.update().gpu_tile(i, bx, tx, 32, TailStrategy::GuardWithIf);
    }
    o.compute_root().gpu_tile(e, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    o.update().gpu_tile(e, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    out.gpu_tile(e, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    B.log << "GPU: S = q.k^T, the row max m, E = exp(S - m), the row sum l and o = E.v each a GPU pass over (key or "
             "value, query) tiles of 32 x 4, per head; scores [H, Lq, Lk] in device memory\n";
    return out;
  }

  int qb = (int)k.geti("s.q_block", 8);
  Var io("io"), ii("ii");
  out.split(i, io, ii, qb, TailStrategy::GuardWithIf).reorder(e, ii, io, h);
  if (k.geti("s.parallel", 1)) out.parallel(h);
  int w = B.vec;
  while (w > 1 && w > E) w /= 2;
  if (w > 1) out.vectorize(e, w);
  Kt.compute_at(out, h);
  int wk = B.vec;
  if (wk > 1) Kt.vectorize(j, wk, TailStrategy::GuardWithIf);
  // Scores: a register block of qb rows x 2 vectors of keys accumulates over the head dim.
  S.compute_at(out, io).bound_extent(i, qb);
  if (wk > 1) S.vectorize(j, wk, TailStrategy::GuardWithIf);
  Var jo("jo"), ji("ji");
  S.update().split(j, jo, ji, 2 * wk, TailStrategy::GuardWithIf).reorder(ji, i, rd, jo);
  if (wk > 1) S.update().vectorize(ji, wk, TailStrategy::GuardWithIf).unroll(ji);
  S.update().unroll(i);
  m.compute_at(out, io);
  E_.compute_at(out, io);
  if (wk > 1) E_.vectorize(j, wk, TailStrategy::GuardWithIf);
  l.compute_at(out, io);
  // P.V: half a query block (4 rows) x the value width accumulates over the keys in registers.
  o.compute_at(out, io).bound_extent(i, qb);
  if (w > 1) o.vectorize(e, w);
  Var oi("oi"), oii("oii");
  o.update().split(i, oi, oii, std::min(qb, 4)).reorder(e, oii, rj3, oi);
  if (w > 1) o.update().vectorize(e, w).unroll(e);
  o.update().unroll(oii);
  B.log << "Kt (keys transposed).compute_at(out, h): [Lk x " << D << "] per head\n"
        << "out.split(i, io, ii, " << qb << ").reorder(e, ii, io, h).parallel(h).vectorize(e, " << w << ")\n"
        << "S = q.k^T: compute_at(out, io) [Lk x " << qb << " scores], register blocks " << qb << " rows x " << 2 * wk
        << " keys over the head dim\n"
        << "o = E.v: register blocks of " << std::min(qb, 4) << " rows x " << E << " values over the keys\n"
        << "m (row max), E = exp(S - m), l (row sum), o = E.v: compute_at(out, io)\n"
        << (causal ? "causal: key loops bounded by where(j <= i + Lk - Lq)\n" : "");
  (void)E;
  return out;
}

// ---- sparse attention: a block schedule per part (kiln/Codegen/SparsePattern.h), online softmax
// over the visited key blocks, parts merged by log-sum-exp.
struct ExprOps {
  using I = Expr;
  using B = Expr;
  Func table;  // the user layout: 1 where (query block, key block) is visited
  int n = 0;   // layout rows
  Expr lit(int64_t v) const { return Expr((int)v); }
  Expr truth(bool b) const { return b ? Internal::const_true() : Internal::const_false(); }
  Expr sel(Expr c, Expr a, Expr b) const { return select(c, a, b); }
  Expr min(Expr a, Expr b) const { return Halide::min(a, b); }
  Expr max(Expr a, Expr b) const { return Halide::max(a, b); }
  Expr layout(Expr r, Expr c) const {
    return r >= 0 && c >= 0 && r < n && c < n && table(clamp(c, 0, n - 1), clamp(r, 0, n - 1)) != 0;
  }
};

sparse::Pattern patternOf(const KernelSpec &k) {
  sparse::Pattern p;
  p.kind = k.gets("mask");
  p.part = k.gets("part", "union");
  p.size = k.geti("pattern_size", 1);
  p.summary = k.geti("summary", 0);
  p.block = k.geti("s.block", 64);
  p.causal = k.gets("noncausal") != "1";
  std::stringstream ss(k.gets("layout"));
  for (std::string row; std::getline(ss, row, '/');) p.layout.push_back(row);
  return p;
}

int largestDivisor(int n, int upTo) {  // the largest power of two <= upTo dividing n
  int w = 1;
  while (w * 2 <= upTo && n % (w * 2) == 0) w *= 2;
  return w;
}

// Online-softmax attention over blocks of `block` queries and keys, the engine of the sparse
// and LSH kernels. Queries and keys are read through index maps (a permutation, a gather); for
// query block qo, slot j (< slotLimit(qo)) names key block keyBlock(qo, j). ok(qx, kx) is the
// element mask on query and key indices, bias an extra score (undefined: none). All Funcs have
// a last var g (a head, or a head and a round). Returns P(e, x, g) = (o, lse) in query order; a
// row with no allowed key has o = 0 and lse = -1e30.
struct BlockAttention {
  int block = 64;
  Expr nkb, slots;                             // key blocks; slots per query block (an upper bound)
  std::function<Expr(Expr qo)> slotLimit;      // visited slots of query block qo
  std::function<Expr(Expr qo, Expr j)> keyBlock;
  std::function<Expr(Expr qx, Expr g)> qrow;   // Q row of query index qx (clamped here)
  std::function<Expr(Expr kx, Expr g)> krow;   // K/V row of key index kx
  std::function<Expr(Expr g)> head;            // Q/K/V head of g
  // Element mask and extra score on the query and key indices and their rows (qrow, krow,
  // computed once per block, not per pair: a permutation's divisions stay out of the tile).
  std::function<Expr(Expr qx, Expr kx, Expr qrow, Expr krow, Expr g)> ok, bias;
  std::function<Expr(Expr krow, Expr g)> keyScale;  // a factor on each key (undefined: 1)
};

// P is computed at out's `outVar` loop: a head (all query blocks, in parallel), or, when
// `perBlock`, one query block of out (out's rows in query order, split by the block).
Func onlineBlockAttention(Builder &Bd, ImageParam Q, ImageParam K, ImageParam V, const BlockAttention &ba,
                          const std::string &sfx, Func out, Var outVar, bool perBlock = false) {
  const KernelSpec &k = Bd.k;
  const int D = (int)k.inputs[0].dims[2], E = (int)k.inputs[k.kind == "lsh_chunk_attention" ? 1 : 2].dims[2];
  const int Bq = ba.block;
  const float scale = (float)k.getf("scale", 1.0), kNeg = -1e30f;
  Expr Lq = Q.dim(1).extent(), Lk = K.dim(1).extent();
  const int w = Bd.vec, we = largestDivisor(E, w), wq = largestDivisor(Bq, w);
  const int tq = std::min(32, Bq), tk = largestDivisor(Bq, 8), pvq = largestDivisor(Bq, 4);
  Var e("e"), d("d"), qi("qi"), ki("ki"), qo("qo"), g("g"), j("j"), x("x"), xo("xo"), xi("xi");
  Expr kb = ba.keyBlock(qo, j), kbc = clamp(kb, 0, ba.nkb - 1), kx = kbc * Bq + ki, qx = qo * Bq + qi;
  Expr hq = ba.head(g);
  Func Qt("Qt" + sfx), Sacc("Sacc" + sfx), S("S" + sfx), bm("bm" + sfx), Ex("E" + sfx), bs("bs" + sfx),
      bpv("bpv" + sfx), st("st" + sfx), P("P" + sfx), QRow("QRow" + sfx), KRow("KRow" + sfx);
  QRow(qi, qo, g) = ba.qrow(qx, g);
  KRow(ki, j, qo, g) = ba.krow(kx, g);
  Expr qrow = QRow(qi, qo, g), krow = KRow(ki, j, qo, g);
  Expr kp = clamp(krow, 0, Lk - 1), qp = clamp(qrow, 0, Lq - 1);
  Expr ok = kb >= 0 && kb < ba.nkb && ba.ok(qx, kx, qrow, krow, g);
  Qt(qi, d, qo, g) = Q(d, qp, hq) * scale;
  RDom r(0, D, "r" + sfx);
  Sacc(qi, ki, j, qo, g) = 0.0f;
  Sacc(qi, ki, j, qo, g) += Qt(qi, r, qo, g) * K(r, kp, hq);
  Expr score = Sacc(qi, ki, j, qo, g);
  if (ba.keyScale) score = score * ba.keyScale(kp, g);
  if (ba.bias) score = score + ba.bias(qx, kx, qrow, krow, g);
  S(qi, ki, j, qo, g) = score + select(ok, 0.0f, kNeg);
  RDom rk(0, Bq, "rk" + sfx), rk2(0, Bq, "rk2" + sfx), rk3(0, Bq, "rk3" + sfx);
  bm(qi, j, qo, g) = kNeg;
  bm(qi, j, qo, g) = max(bm(qi, j, qo, g), S(qi, rk, j, qo, g));
  Ex(qi, ki, j, qo, g) = select(ok, exp(S(qi, ki, j, qo, g) - bm(qi, j, qo, g)), 0.0f);
  bs(qi, j, qo, g) = 0.0f;
  bs(qi, j, qo, g) += Ex(qi, rk2, j, qo, g);
  Expr kp3 = clamp(KRow(rk3, j, qo, g), 0, Lk - 1);
  bpv(e, qi, j, qo, g) = 0.0f;
  bpv(e, qi, j, qo, g) += Ex(qi, rk3, j, qo, g) * V(e, kp3, hq);
  // The running state (acc, M, l) per row over the visited key blocks (FlashAttention's online
  // softmax; M and l are replicated over e: Tuple elements share dimensions).
  RDom rj(0, ba.slots, "rj" + sfx);
  rj.where(rj < ba.slotLimit(qo));
  st(e, qi, qo, g) = Tuple(0.0f, kNeg, 0.0f);
  Expr Mo = st(e, qi, qo, g)[1], bmv = bm(qi, rj, qo, g), Mn = max(Mo, bmv);
  Expr a = exp(Mo - Mn), b = exp(bmv - Mn);
  st(e, qi, qo, g) = Tuple(st(e, qi, qo, g)[0] * a + bpv(e, qi, rj, qo, g) * b, Mn, st(e, qi, qo, g)[2] * a + bs(qi, rj, qo, g) * b);
  // The normalized result per (row of a query block), then in query order (Pst is inlined on
  // the CPU; on the GPU it is the kernel, so a thread's bounds are its own row, not x % block).
  Func Pst("Pst" + sfx);
  Expr l = st(e, qi, qo, g)[2], M = st(e, qi, qo, g)[1];
  Pst(e, qi, qo, g) = Tuple(select(l > 0.0f, st(e, qi, qo, g)[0] / l, 0.0f), select(l > 0.0f, M + log(l), kNeg));
  P(e, x, g) = Tuple(Pst(e, x % Bq, x / Bq, g));

  if (Bd.gpu) {  // one GPU block per (query block, g), one thread per query row: the row's state,
                 // scores and P.V over each visited key block in the thread's registers and local memory
    Pst.compute_root().reorder(e, qi, qo, g).gpu_blocks(qo, g).gpu_threads(qi);
    QRow.compute_at(Pst, qi);
    Qt.compute_at(Pst, qi);
    st.compute_at(Pst, qi);
    st.update().reorder(e, qi, rj);
    // A GPU thread's allocations are sized over its whole loop nest: one key block at a time
    // (bound_extent), so the scratch has a constant size and stays in local memory.
    for (Func f : {KRow, Sacc, S, bm, Ex, bs, bpv}) f.compute_at(st, rj).bound_extent(j, 1);
    Bd.log << "P" << sfx << ": one GPU block per (query block of " << Bq << ", head), one thread per query row; st" << sfx
           << " (acc, max, sum) per thread over the visited key blocks; S, E, P.V per key block per thread\n";
    return P;
  }
  // Schedule: P for all query blocks of g, in parallel; per block the state over the slots.
  Var qio("qio"), qii("qii"), kio("kio"), kii("kii");
  P.compute_at(out, outVar).split(x, xo, xi, Bq, TailStrategy::RoundUp);
  if (!perBlock) P.parallel(xo);
  if (we > 1) P.vectorize(e, we);
  QRow.compute_at(P, xo);
  Qt.compute_at(P, xo);
  if (wq > 1) Qt.vectorize(qi, wq);
  st.compute_at(P, xo);
  if (we > 1) st.vectorize(e, we);
  st.update().split(qi, qio, qii, pvq).reorder(e, qii, qio, rj);
  if (we > 1) st.update().vectorize(e, we).unroll(e);
  st.update().unroll(qii);
  KRow.compute_at(st, rj);
  S.compute_at(st, rj);
  S.tile(qi, ki, qio, kio, qii, kii, tq, tk, TailStrategy::RoundUp).unroll(kii);
  if (wq > 1) S.vectorize(qii, wq).unroll(qii);
  Sacc.compute_at(S, qio).unroll(ki);
  Sacc.update().reorder(qi, ki, r).unroll(ki);
  if (wq > 1) Sacc.vectorize(qi, wq).unroll(qi), Sacc.update().vectorize(qi, wq).unroll(qi);
  bm.compute_at(st, rj);
  bm.update().reorder(qi, rk);
  Ex.compute_at(st, rj);
  bs.compute_at(st, rj);
  bs.update().reorder(qi, rk2);
  if (wq > 1) {
    bm.vectorize(qi, wq), bm.update().vectorize(qi, wq).unroll(qi);
    Ex.vectorize(qi, wq).unroll(qi);
    bs.vectorize(qi, wq), bs.update().vectorize(qi, wq).unroll(qi);
  }
  bpv.compute_at(st, qio).unroll(qi);
  bpv.update().reorder(e, qi, rk3).unroll(qi);
  if (we > 1) bpv.vectorize(e, we).unroll(e), bpv.update().vectorize(e, we).unroll(e);
  Bd.log << "P" << sfx << "(e, x, g) = (o, lse) in query order: compute_at(out, " << outVar.name() << "), split(x, xo, xi, "
         << Bq << ")" << (perBlock ? " (one query block)" : ".parallel(xo)") << "\n"
         << "st" << sfx << " = (acc, max, sum) over the visited key blocks rj (where rj < visited(qo)): compute_at(P, xo)\n"
         << "S" << sfx << " = q.k^T per (query block, key block): tiles " << tq << " x " << tk << ", vectorized over queries by "
         << wq << "; E = exp(S - block max) under the element mask; bpv = E.v, vectorized over e by " << we << "\n";
  return P;
}

// Dense or causal attention over a whole sequence (no cache): the online block engine with
// every key block up to the diagonal. Queries and keys may have different lengths (causal:
// query i sees keys j <= i + Lk - Lq). Decode steps (a static, short query length) and
// attention over a cache keep buildAttention's row-strip kernel, whose block is 8 rows.
Func buildOnlineAttention(Builder &Bd) {
  const KernelSpec &k = Bd.k;
  const bool causal = k.gets("mask") == "causal";
  const int Bq = 64, E = (int)k.inputs[2].dims[2];
  Expr Lq = Bd.in[0].dim(1).extent(), Lk = Bd.in[1].dim(1).extent(), off = Lk - Lq;
  BlockAttention ba;
  ba.block = Bq;
  ba.nkb = (Lk + Bq - 1) / Bq;
  ba.slots = ba.nkb;
  ba.keyBlock = [](Expr, Expr j) { return j; };
  Expr nkb = ba.nkb;
  ba.slotLimit = [=](Expr qo) {
    return causal ? clamp((qo * Bq + Bq - 1 + off) / Bq + 1, 0, nkb) : nkb;  // blocks up to the last row's diagonal
  };
  ba.qrow = [](Expr qx, Expr) { return qx; };
  ba.krow = [](Expr kx, Expr) { return kx; };
  ba.head = [](Expr g) { return g; };
  ba.ok = [=](Expr qx, Expr kx, Expr, Expr, Expr) {
    Expr in = qx < Lq && kx < Lk;
    return causal ? Expr(in && kx <= qx + off) : in;
  };
  Var e("e"), i("i"), h("h");
  Func out("out");
  Bd.log << (causal ? "causal" : "dense") << " attention, online softmax over blocks of " << Bq << " queries x " << Bq
         << " keys" << (causal ? ", key blocks above the diagonal never visited" : "") << "\n";
  // One query block at a time: scratch O(block x head dim) per task, tasks over (block, head).
  Var io("io"), ii("ii"), t("t");
  Func P = onlineBlockAttention(Bd, Bd.in[0], Bd.in[1], Bd.in[2], ba, "", out, t, true);
  Expr qb = (Lq + Bq - 1) / Bq;
  out(e, i, h) = P(e, clamp(i, 0, qb * Bq - 1), h)[0];
  if (Bd.gpu) {
    Bd.gpuRows(out, {e, i, h});
    return out;
  }
  out.split(i, io, ii, Bq, TailStrategy::GuardWithIf).fuse(io, h, t).parallel(t);
  int we = largestDivisor(E, Bd.vec);
  if (we > 1) out.vectorize(e, we);
  Bd.log << "out.split(i, io, ii, " << Bq << ").fuse(io, h, t).parallel(t): P per (query block, head)\n";
  return out;
}

Func buildSparseAttention(Builder &Bd) {
  const KernelSpec &k = Bd.k;
  const sparse::Pattern p = patternOf(k);
  ImageParam Q = Bd.in[0];
  const int Bq = (int)p.block, E = (int)k.inputs[2].dims[2];
  Expr L = Q.dim(1).extent();
  ExprOps ops;
  std::vector<std::vector<int64_t>> tables;  // a layout's key blocks per query block
  if (p.kind == "layout") {
    ops.n = (int)p.layout.size();
    Buffer<uint8_t> t(ops.n, ops.n, "layout");
    for (int r = 0; r < ops.n; ++r)
      for (int c = 0; c < ops.n; ++c) t(c, r) = p.layoutAt(r, c);
    ops.table(Var("c0"), Var("c1")) = t(Var("c0"), Var("c1"));
    for (int r = 0; r < ops.n; ++r) tables.push_back(sparse::tableBlocks(p, r));
  }
  sparse::Math<ExprOps> m{p, ops, L};
  Var e("e"), i("i"), h("h");
  std::vector<sparse::Part> parts = p.parts();
  std::vector<Func> P;  // per part: Tuple(o, lse)(e, x, h), x in the part's query order
  Func out("out");
  Bd.log << "sparse attention, " << parts.size() << " part" << (parts.size() > 1 ? "s" : "") << ", blocks of " << Bq
         << " queries x " << Bq << " keys, online softmax over the visited key blocks\n";
  for (size_t n = 0; n < parts.size(); ++n) {
    const sparse::Part &pt = parts[n];
    BlockAttention ba;
    ba.block = Bq;
    ba.nkb = m.blocks(pt.k);
    if (pt.rule == sparse::Rule::Table) {
      size_t maxSlots = 1;
      for (auto &t : tables) maxSlots = std::max(maxSlots, t.size());
      Buffer<int32_t> idx((int)maxSlots, ops.n, "idx" + std::to_string(n)), cnt(ops.n, "cnt" + std::to_string(n));
      for (int r = 0; r < ops.n; ++r) {
        cnt(r) = (int32_t)tables[r].size();
        for (size_t s = 0; s < maxSlots; ++s) idx((int)s, r) = s < tables[r].size() ? (int32_t)tables[r][s] : 0;
      }
      int rows = ops.n, ms = (int)maxSlots;
      ba.keyBlock = [=](Expr qo, Expr j) { return idx(clamp(j, 0, ms - 1), clamp(qo, 0, rows - 1)); };
      ba.slots = Expr(ms);
      ba.slotLimit = [=](Expr qo) { return cnt(clamp(qo, 0, rows - 1)); };
    } else {
      ba.keyBlock = [=](Expr qo, Expr j) { return m.lo(pt, qo) + j; };
      ba.slots = ba.nkb;
      ba.slotLimit = [=](Expr qo) { return m.hi(pt, qo) - m.lo(pt, qo) + 1; };
    }
    ba.qrow = [=](Expr qx, Expr) { return m.pos(pt.q, qx); };
    ba.krow = [=](Expr kx, Expr) { return m.pos(pt.k, kx); };
    ba.head = [](Expr g) { return g; };
    ba.ok = [=](Expr qx, Expr kx, Expr qrow, Expr krow, Expr) {
      return qx < m.length(pt.q) && qrow < L && kx < m.length(pt.k) && krow < L && m.allowedPart(pt, qrow, krow);
    };
    P.push_back(onlineBlockAttention(Bd, Bd.in[0], Bd.in[1], Bd.in[2], ba, std::to_string(n), out, h));
  }
  auto rowOf = [&](size_t n) { return clamp(m.inv(parts[n].q, i), 0, m.blocks(parts[n].q) * Bq - 1); };
  if (P.size() == 1) {
    out(e, i, h) = P[0](e, rowOf(0), h)[0];
  } else {  // log-sum-exp merge of the two parts' normalized outputs
    Expr o1 = P[0](e, rowOf(0), h)[0], s1 = P[0](e, rowOf(0), h)[1];
    Expr o2 = P[1](e, rowOf(1), h)[0], s2 = P[1](e, rowOf(1), h)[1];
    Expr mx = max(s1, s2), w1 = exp(s1 - mx), w2 = exp(s2 - mx);
    out(e, i, h) = (o1 * w1 + o2 * w2) / (w1 + w2);
  }
  if (Bd.gpu) {
    Bd.gpuRows(out, {e, i, h});
    Bd.log << sparse::picture(p, 16 * p.block);
    return out;
  }
  // Heads in sequence: P of one head at a time, its query blocks in parallel.
  int we = largestDivisor(E, Bd.vec);
  if (we > 1) out.vectorize(e, we);
  Bd.log << (parts.size() > 1 ? "out = log-sum-exp merge of the two parts, read through each part's inverse order\n"
                              : "out = P0 read through the inverse query order\n")
         << sparse::picture(p, 16 * p.block);
  return out;
}

// ---- LSH attention: q·kᵀ within each sorted chunk and the previous one, per hash round, the
// rounds merged by log-sum-exp. Inputs: qk (d, i, h), v (e, i, h), buckets (i, r, h), sorted
// (p, 0 = order | 1 = inverse, r, h).
Func buildLshChunkAttention(Builder &Bd) {
  const KernelSpec &k = Bd.k;
  ImageParam QK = Bd.in[0], BK = Bd.in[2], SO = Bd.in[3];
  const int C = (int)k.geti("chunk", 64), R = (int)k.inputs[2].dims[1], D = (int)k.inputs[0].dims[2];
  const int E = (int)k.inputs[1].dims[2];
  const bool causal = k.gets("causal") == "1";
  Expr L = QK.dim(1).extent();
  Var e("e"), i("i"), h("h"), c("c");
  // Keys are the unit-normalized queries (shared QK).
  Func knorm("knorm");
  RDom rd(0, D, "rd");
  Expr n2 = sum(QK(rd, c, h) * QK(rd, c, h));
  knorm(c, h) = select(n2 > 0.0f, 1.0f / sqrt(n2), 0.0f);
  auto perm = [=](Expr p, Expr g) { return SO(clamp(p, 0, L - 1), 0, g % R, g / R); };
  BlockAttention ba;
  ba.block = C;
  ba.nkb = (L + C - 1) / C;
  ba.slots = Expr(2);
  ba.keyBlock = [](Expr qo, Expr j) { return qo - 1 + j; };  // the previous chunk, then its own
  ba.slotLimit = [](Expr) { return Expr(2); };
  ba.qrow = perm;
  ba.krow = perm;
  ba.head = [=](Expr g) { return g / R; };
  ba.keyScale = [=](Expr kp, Expr g) { return knorm(kp, g / R); };
  ba.ok = [=](Expr qx, Expr kx, Expr qp, Expr kp, Expr g) {
    Expr same = BK(clamp(qp, 0, L - 1), g % R, g / R) == BK(clamp(kp, 0, L - 1), g % R, g / R);
    Expr allowed = qx < L && kx < L && same;
    return causal ? (allowed && kp <= qp) : allowed;
  };
  // A query sees itself only when no other key is available: a score of -1e9 loses to any
  // other key (its weight underflows to 0) and wins alone.
  ba.bias = [=](Expr, Expr, Expr qp, Expr kp, Expr) { return select(qp == kp, -1e9f, 0.0f); };
  Func out("out");
  Bd.log << "LSH attention, " << R << " hash round" << (R > 1 ? "s" : "") << ", chunks of " << C
         << " sorted positions; each chunk attends to itself and the previous chunk, same bucket only"
         << (causal ? ", causal" : "") << "\n";
  Func P = onlineBlockAttention(Bd, QK, QK, Bd.in[1], ba, "", out, h);
  // Combine the rounds: o = sum_r softmax_r(lse_r) o_r, each read at the position's sorted slot.
  std::vector<Expr> o(R), s(R);
  for (int r = 0; r < R; ++r) {
    Expr slot = clamp(SO(i, 1, r, h), 0, L - 1), g = h * R + r;
    o[r] = P(e, slot, g)[0];
    s[r] = P(e, slot, g)[1];
  }
  Expr mx = s[0];
  for (int r = 1; r < R; ++r) mx = max(mx, s[r]);
  Expr num = 0.0f, den = 0.0f;
  for (int r = 0; r < R; ++r) num = num + o[r] * exp(s[r] - mx), den = den + exp(s[r] - mx);
  out(e, i, h) = num / den;
  if (Bd.gpu) {
    Var bo("bo"), ti("ti");
    knorm.compute_root().gpu_tile(c, bo, ti, 128, TailStrategy::GuardWithIf);
    Bd.gpuRows(out, {e, i, h});
    Bd.log << "knorm on the GPU, 128 positions per block\n";
    return out;
  }
  out.parallel(h);
  knorm.compute_at(out, h);
  int we = largestDivisor(E, Bd.vec);
  if (we > 1) out.vectorize(e, we);
  Bd.log << "knorm (1/|k| per position).compute_at(out, h); out = the rounds merged by log-sum-exp, read through the "
            "inverse order\n";
  return out;
}

// ---- LSH hashing: out(i, r, h) = argmax over b of [x·R_r ; -x·R_r](b).
Func buildLshHash(Builder &Bd) {
  const KernelSpec &k = Bd.k;
  ImageParam QK = Bd.in[0], ROT = Bd.in[1];
  const int D = (int)k.inputs[0].dims[2], half = (int)k.inputs[1].dims[2];
  Var c("c"), i("i"), r("r"), h("h"), io("io"), ii("ii");
  Func proj("proj"), out("out");
  RDom rd(0, D, "rd");
  proj(c, i, r, h) = 0.0f;
  proj(c, i, r, h) += QK(rd, i, h) * ROT(c, rd, r);
  RDom rb(0, 2 * half, "rb");
  Expr pc = proj(clamp(rb % half, 0, half - 1), i, r, h);
  out(i, r, h) = argmax(rb, select(rb < half, pc, -pc))[0];
  if (Bd.gpu) {  // a thread per (position, round), its projections in local memory
    out.gpu_tile(i, io, ii, 64, TailStrategy::GuardWithIf).gpu_blocks(io, r, h);
    proj.compute_at(out, ii);
    Bd.log << "out: 64 positions per GPU block, a thread per position; proj per thread\n";
    return out;
  }
  out.split(i, io, ii, 64, TailStrategy::GuardWithIf).parallel(h).parallel(io);
  proj.compute_at(out, io).reorder(i, c);
  proj.update().reorder(i, c, rd);
  int w = Bd.vec;
  if (w > 1) proj.vectorize(i, w, TailStrategy::GuardWithIf), proj.update().vectorize(i, w, TailStrategy::GuardWithIf);
  Bd.log << "proj = x.R for 64 positions at a time (compute_at(out, io)), vectorized over positions; out = the first "
            "argmax over [proj, -proj]; parallel over heads and position tiles\n";
  return out;
}

Func buildRowReduce(Builder &B) {
  const KernelSpec &k = B.k;
  int r = B.rank();
  std::vector<Var> v = makeVars(r);
  std::vector<Var> rest(v.begin() + 1, v.end());
  ImageParam X = B.in[0];
  int64_t Ds = k.output.dims.back();  // a reduction over a sequence length is dynamic
  Expr D = Ds >= 0 ? Expr((int)Ds) : X.dim(0).extent();
  RDom rx(0, D, "rx");
  std::vector<Expr> xr{rx};
  for (auto &x : rest) xr.push_back(x);
  Func out("out");
  std::vector<Func> rowFuncs;
  if (k.kind == "layer_norm") {
    Func mean("mean"), var("var");
    mean(rest) = 0.0f;
    mean(rest) += X(xr);
    Func mu("mu");
    mu(rest) = mean(rest) / cast<float>(D);
    Expr dx = X(xr) - mu(rest);
    var(rest) = 0.0f;
    var(rest) += dx * dx;
    float eps = (float)k.getf("eps", 1e-5);
    out(v) = (X(ex(v)) - mu(rest)) * (1.0f / sqrt(var(rest) / cast<float>(D) + eps)) * B.in[1](v[0]) + B.in[2](v[0]);
    rowFuncs = {mean, mu, var};
  } else {  // softmax over the last dim
    Func mx("mx"), sum("sum"), e("e");
    mx(rest) = -std::numeric_limits<float>::infinity();
    mx(rest) = max(mx(rest), X(xr));
    e(v) = exp(X(ex(v)) - mx(rest));
    std::vector<Expr> er{rx};
    for (auto &x : rest) er.push_back(x);
    sum(rest) = 0.0f;
    sum(rest) += e(er);
    // A row whose every entry is -inf (fully masked) gives zeros, as the fused attention does.
    out(v) = select(mx(rest) == -std::numeric_limits<float>::infinity(), 0.0f, e(ex(v)) / sum(rest));
    rowFuncs = {mx, e, sum};
  }
  Var row = B.rowwise(out, v);
  for (Func f : rowFuncs)
    if (!(B.gpu && f.name() == "e")) f.compute_at(out, row);  // GPU: exp recomputed, no row-long shared buffer
  B.log << "row reductions compute_at(out, " << row.name() << ") (one row at a time)\n";
  return out;
}

Func buildElementwise(Builder &B) {
  const KernelSpec &k = B.k;
  int r = B.rank();
  std::vector<Var> v = makeVars(r);
  Func out("out");
  ImageParam X = B.in[0];
  Expr x = X(ex(v));
  if (k.kind == "add" || k.kind == "mul") {
    int rb = (int)k.inputs[1].dims.size();
    std::vector<Expr> bv(v.begin(), v.begin() + rb);
    Expr y = B.in[1](bv);
    out(v) = k.kind == "add" ? x + y : x * y;
  } else if (k.kind == "scale") {
    out(v) = x * (float)k.getf("factor", 1.0);
  } else if (k.kind == "relu") {
    out(v) = max(x, 0.0f);
  } else if (k.kind == "gelu") {
    out(v) = activation(k.gets("approx") == "tanh" ? "gelu_tanh" : "gelu_erf", x);
  }
  B.rowwise(out, v);
  return out;
}

// Data movement: embedding, position_embedding, transpose, concat, slice.
Func buildMove(Builder &B) {
  const KernelSpec &k = B.k;
  int r = B.rank();
  std::vector<Var> v = makeVars(r);
  Func out("out");
  if (k.kind == "embedding") {
    int V = (int)k.inputs[0].dims[0];
    // Ids are range-checked by the runtime before any kernel runs; the clamp keeps the access
    // provably in bounds.
    out(v) = B.in[0](v[0], clamp(B.in[1](v[1]), 0, V - 1));
  } else if (k.kind == "position_embedding") {
    out(v) = B.in[0](v[0], v[1]);
  } else if (k.kind == "transpose") {
    std::vector<int64_t> perm;
    std::stringstream ss(k.gets("perm"));
    for (std::string p; std::getline(ss, p, '/');) perm.push_back(std::stoll(p));
    // result tensor dim t is input tensor dim perm[t]; Halide dims are reversed.
    std::vector<Expr> a(r);
    for (int t = 0; t < r; ++t) a[r - 1 - perm[t]] = v[r - 1 - t];
    out(v) = B.in[0](a);
  } else if (k.kind == "sinusoidal_positions") {  // c0: feature, c1: position
    float d = (float)k.output.dims[1];
    Expr freq = exp(cast<float>(v[0] - v[0] % 2) * (-std::log(10000.0f) / d));
    Expr pos = k.inputs.size() > 1 ? v[1] + B.in[1](0) : Expr(v[1]);
    Expr angle = cast<float>(pos) * freq;
    out(v) = select(v[0] % 2 == 0, sin(angle), cos(angle));
  } else if (k.kind == "cache_write") {
    // In place: only rows [past, past + n) of the state are written (an undefined pure step,
    // then an update over the new rows), so a decode step costs O(one row), not O(cache).
    ImageParam V = B.in[1];
    Expr past = k.inputs.size() > 2 ? B.in[2](0) : Expr(0);
    RDom rn(0, V.dim(1).extent(), "rn");
    out(v) = undef<float>();
    out(v[0], past + rn, v[2]) = V(v[0], rn, v[2]);
    if (B.gpu) {  // each new row is written once: the rows are independent
      out.update().allow_race_conditions().reorder(v[0], rn, v[2]).gpu_blocks(rn, v[2]).gpu_threads(v[0]);
      B.log << "out: update over the new rows only, one GPU block per row and head\n";
      return out;
    }
    out.update().vectorize(v[0], std::min(B.vec, (int)k.output.dims[2]), TailStrategy::GuardWithIf);
    B.log << "out: no pure step (undef); update over the new rows only, vectorized over the row\n";
    return out;
  } else if (k.kind == "mask") {  // causal: key c0 visible to query c1 when c0 <= c1 + Lk - Lq
    Expr Lk = B.in[0].dim(0).extent(), Lq = B.in[0].dim(1).extent();
    out(v) = select(v[0] <= v[1] + (Lk - Lq), 0.0f, -std::numeric_limits<float>::infinity());
  } else if (k.kind == "slice") {
    int axis = r - 1 - (int)k.geti("axis", 0);
    std::vector<Expr> a = ex(v);
    a[axis] = a[axis] + (int)k.geti("offset", 0);
    out(v) = B.in[0](a);
  } else if (k.kind == "concat") {
    int axis = r - 1 - (int)k.geti("axis", 0);
    Expr val;
    int64_t start = 0;
    std::vector<std::pair<int64_t, Expr>> parts;
    for (size_t i = 0; i < B.in.size(); ++i) {
      std::vector<Expr> a = ex(v);
      a[axis] = clamp(a[axis] - (int)start, 0, (int)k.inputs[i].dims[k.inputs[i].dims.size() - 1 - axis] - 1);
      parts.push_back({start, B.in[i](a)});
      start += k.inputs[i].dims[k.inputs[i].dims.size() - 1 - axis];
    }
    val = parts.back().second;
    for (int i = (int)parts.size() - 2; i >= 0; --i) val = select(v[axis] < (int)parts[i + 1].first, parts[i].second, val);
    out(v) = val;
  }
  B.rowwise(out, v);
  return out;
}

// ---- depthwise convolution over the sequence: out(c, i) = b(c) + sum_t w(c, t) x(c, i + t - h),
// rows outside [0, L) read as zero. k is static and small: the taps are unrolled.
Func buildDepthwiseConv(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam X = B.in[0], W = B.in[1], Bias = B.in[2];
  const int taps = (int)k.inputs[1].dims[0], half = (taps - 1) / 2;
  std::vector<Var> v = makeVars(2);
  Expr L = X.dim(1).extent();
  Expr sum = Bias(v[0]);
  for (int t = 0; t < taps; ++t) {
    Expr row = v[1] + (t - half);
    sum = sum + W(v[0], t) * select(row >= 0 && row < L, X(v[0], clamp(row, 0, L - 1)), 0.0f);
  }
  Func out("out");
  out(v) = sum;
  B.rowwise(out, v);
  B.log << "taps unrolled (" << taps << "), zero rows outside the sequence\n";
  return out;
}

// ---- ACT (adaptive computation time) on the carry [L, 2d + 3]: columns [0, d) the state,
// [d, 2d) the halting-weighted output, 2d the halting sum h, 2d + 1 the remainder r, 2d + 2
// the update count n. A position runs while h < 1; halting sets h to exactly 1.
Func buildAct(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam C = B.in[0];
  const int d = k.kind == "act_init" ? (int)k.inputs[0].dims[1] : (int)(k.inputs[0].dims[1] - 3) / 2;
  std::vector<Var> v = makeVars(B.rank());
  Func out("out");
  auto col = [&](int c, Expr i) { return C(c, i); };
  if (k.kind == "act_init") {  // the input is the first state x [L, d]
    out(v) = select(v[0] < d, B.in[0](clamp(v[0], 0, d - 1), v[1]), 0.0f);
  } else if (k.kind == "act_input") {  // state + position signal + timestep signal
    Func sig("sig");  // the timestep's sinusoid: d values, computed once per call
    Expr freq = exp(cast<float>(v[0] - v[0] % 2) * (-std::log(10000.0f) / (float)d));
    Expr angle = cast<float>(B.in[2](0)) * freq;
    sig(v[0]) = select(v[0] % 2 == 0, sin(angle), cos(angle));
    out(v) = C(v[0], v[1]) + B.in[1](v[0], v[1]) + sig(v[0]);
    B.rowwise(out, v);
    sig.compute_root();
    if (B.gpu) {
      Var bo("bo"), ti("ti");
      sig.gpu_tile(v[0], bo, ti, 64, TailStrategy::GuardWithIf);
    }
    B.log << "sig (the timestep's sinusoid) compute_root: d values per call\n";
    return out;
  } else if (k.kind == "act_update") {
    ImageParam X = B.in[1], Y = B.in[2], WH = B.in[3], BH = B.in[4], STEP = B.in[5];
    const int T = (int)k.geti("max_steps", 1);
    const float thr = (float)k.getf("threshold", 0.99);
    Var i = v[1], c = v[0];
    Func dot("dot"), p("p");
    RDom rk(0, d, "rk");
    dot(i) = 0.0f;
    dot(i) += X(rk, i) * WH(rk);
    p(i) = 1.0f / (1.0f + exp(-(dot(i) + BH(0))));
    Expr h = col(2 * d, i), r = col(2 * d + 1, i), n = col(2 * d + 2, i);
    Expr running = h < 1.0f;
    Expr halt = running && (h + p(i) > thr || STEP(0) >= T - 1);
    Expr w = select(running, select(halt, 1.0f - h, p(i)), 0.0f);
    Expr cs = clamp(c, 0, d - 1), ca = clamp(c - d, 0, d - 1);
    Expr outS = C(cs + d, i) + w * Y(cs, i), outA = C(ca + d, i) + w * Y(ca, i);
    out(c, i) = select(c < d, select(halt, outS, running, Y(cs, i), C(cs, i)),  // a halted state is its output
                       c < 2 * d, outA,                                           // output += w * step's state
                       c == 2 * d, select(halt, 1.0f, running, h + p(i), h),      // halting sum
                       c == 2 * d + 1, select(halt, 1.0f - h, r),                 // remainder
                       n + select(running, 1.0f, 0.0f));                          // updates
    Var row = B.rowwise(out, v);
    p.compute_at(out, row);
    dot.compute_at(out, row);
    B.log << "p = sigmoid(x.w + b) per row (compute_at(out, " << row.name() << ")); threshold " << thr << ", max_steps "
          << T << "\n";
    return out;
  } else if (k.kind == "act_running") {
    RDom r(0, C.dim(1).extent(), "r");
    out(v) = 0;
    out(v) = max(out(v), select(C(2 * d, r) < 1.0f, 1, 0));
    if (B.gpu) {  // one GPU thread: the flag stays on the device until the host reads it
      out.gpu_single_thread();
      out.update().gpu_single_thread();
    }
    B.log << "out = any(h < 1) over the positions, serial" << (B.gpu ? " (one GPU thread)" : "") << "\n";
    return out;
  } else {  // act_output
    std::string field = k.gets("field");
    if (field == "hidden") out(v) = C(v[0] + d, v[1]);
    else if (field == "ponder") out(v) = col(2 * d + 2, v[0]) + col(2 * d + 1, v[0]);
    else out(v) = cast<int>(col(2 * d + 2, v[0]));
  }
  B.rowwise(out, v);
  return out;
}

std::string slurp(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The PTX modules Halide's CUDA backend stores in an object: NUL-terminated text that LLVM's
// NVPTX printer starts with a "Generated by LLVM NVPTX Back-End" comment.
std::string extractPtx(const std::string &object) {
  static const std::string marker = "//\n// Generated by LLVM NVPTX Back-End";
  std::string ptx;
  for (size_t at = object.find(marker); at != std::string::npos; at = object.find(marker, at + 1)) {
    size_t end = object.find('\0', at);
    ptx += object.substr(at, end == std::string::npos ? std::string::npos : end - at);
    ptx += "\n";
  }
  return ptx;
}

// Halide's compile-time warnings, kept per kernel (Halide compiles in the calling thread).
// Errors are thrown as Halide does by default.
class KernelWarnings : public CompileTimeErrorReporter {
public:
  void warning(const char *msg) override {
    if (sink) *sink += msg;
    else fputs(msg, stderr);
  }
  void error(const char *msg) override { throw CompileError(msg); }
  static thread_local std::string *sink;
};
thread_local std::string *KernelWarnings::sink = nullptr;

// A kernel's warnings: the asserts Halide drops from GPU kernels (the bound_extent contracts the
// GPU schedules keep by construction, which a GPU kernel cannot check) go to the kernel's
// schedule; any other warning is also printed, with the kernel's name.
void reportWarnings(const std::string &kernel, const std::string &text, std::ostream &log) {
  std::stringstream in(text);
  std::string dropped;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line.find("Ignoring assertion inside") != std::string::npos) {
      dropped += "  " + line + "\n";
      continue;
    }
    fprintf(stderr, "kiln: kernel %s: Halide %s\n", kernel.c_str(), line.c_str());
    log << "Halide " << line << "\n";
  }
  if (!dropped.empty())
    log << "checks Halide leaves out of the GPU kernel (bound_extent sizes the schedule guarantees by construction):\n"
        << dropped;
}

}  // namespace

bool buildKernel(const std::string &name, const KernelSpec &spec, const std::string &halideTarget,
                 const std::string &cacheDir, KernelArtifacts *out, std::string *error) {
  namespace fs = std::filesystem;
  std::string dir = cacheDir + "/" KILN_CODEGEN_ID;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create the kernel cache folder '" + dir + "': " + ec.message();
    return false;
  }
  out->object = dir + "/" + name + ".o";
  out->stmt = dir + "/" + name + ".stmt";
  std::string schedPath = dir + "/" + name + ".halide-schedule.txt";
  const bool cuda = halideTarget.find("cuda") != std::string::npos;
  if (cuda) out->ptx = dir + "/" + name + ".ptx";
  if (fs::exists(out->object) && fs::exists(out->stmt) && fs::exists(schedPath) && (!cuda || fs::exists(out->ptx))) {
    out->cached = true;
    out->schedule = slurp(schedPath);
    return true;
  }
  try {
    Builder B(spec);
    B.gpu = cuda || halideTarget.find("opencl") != std::string::npos;
    Func f;
    const std::string &kd = spec.kind;
    if (kd == "linear" || kd == "matmul" || kd == "batch_matmul") f = buildMatmul(B);
    else if (kd == "ffn") f = buildFfn(B);
    else if (kd == "attention" && spec.attrs.count("pattern_size")) f = buildSparseAttention(B);
    else if (kd == "attention" && B.k.inputs.size() == 3 && B.k.inputs[0].dims[1] < 0) f = buildOnlineAttention(B);
    else if (kd == "attention") f = buildAttention(B);
    else if (kd == "lsh_hash") f = buildLshHash(B);
    else if (kd == "lsh_chunk_attention") f = buildLshChunkAttention(B);
    else if (kd == "layer_norm" || kd == "softmax") f = buildRowReduce(B);
    else if (kd == "depthwise_conv") f = buildDepthwiseConv(B);
    else if (kd.rfind("act_", 0) == 0) f = buildAct(B);
    else if (kd == "add" || kd == "mul" || kd == "scale" || kd == "relu" || kd == "gelu") f = buildElementwise(B);
    else if (kd == "embedding" || kd == "position_embedding" || kd == "transpose" || kd == "slice" || kd == "concat" ||
             kd == "mask" || kd == "sinusoidal_positions" || kd == "cache_write")
      f = buildMove(B);
    else {
      *error = "no Halide kernel for op kind '" + kd + "'";
      return false;
    }
    constrain(f.output_buffer(), spec.output);
    std::vector<Argument> args(B.in.begin(), B.in.end());
    Target t(halideTarget);
    t = t.with_feature(Target::NoRuntime);
    // Write under temporary names, then rename: a concurrent or interrupted build never
    // leaves a half-written kernel in the cache.
    std::string tmp = dir + "/." + name + "." + std::to_string(getpid());
    static KernelWarnings reporter;
    static std::once_flag installed;
    std::call_once(installed, [] { set_custom_compile_time_error_reporter(&reporter); });
    std::string warnings;
    KernelWarnings::sink = &warnings;
    struct Reset {
      ~Reset() { KernelWarnings::sink = nullptr; }
    } reset;
    Pipeline(f).compile_to({{OutputFileType::object, tmp + ".o"}, {OutputFileType::stmt, tmp + ".stmt"}}, args, name, t);
    reportWarnings(name, warnings, B.log);
    out->schedule = B.log.str();
    if (cuda) {  // the PTX Halide embedded in the object (empty: every stage runs on the host)
      std::ofstream(tmp + ".ptx") << extractPtx(slurp(tmp + ".o"));
      fs::rename(tmp + ".ptx", out->ptx);
    }
    std::ofstream(tmp + ".sched") << out->schedule;
    fs::rename(tmp + ".stmt", out->stmt);
    fs::rename(tmp + ".sched", schedPath);
    fs::rename(tmp + ".o", out->object);
    return true;
  } catch (const Halide::Error &e) {
    *error = "Halide failed to generate kernel " + name + " (" + spec.text() + "): " + e.what();
  } catch (const std::exception &e) {
    *error = "kernel " + name + ": " + e.what();
  }
  return false;
}

bool buildHalideRuntime(const std::string &halideTarget, const std::string &cacheDir, std::string *objectPath,
                        std::string *error) {
  namespace fs = std::filesystem;
  char hash[17];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a("runtime@" + halideTarget));
  *objectPath = cacheDir + "/halide_runtime_" + hash + ".o";
  if (fs::exists(*objectPath)) return true;
  try {
    std::string tmp = cacheDir + "/.runtime." + std::to_string(getpid()) + ".o";
    compile_standalone_runtime(std::map<OutputFileType, std::string>{{OutputFileType::object, tmp}}, Target(halideTarget));
    fs::rename(tmp, *objectPath);
    return true;
  } catch (const Halide::Error &e) {
    *error = std::string("Halide failed to build its runtime: ") + e.what();
  } catch (const std::exception &e) {
    *error = e.what();
  }
  return false;
}

}  // namespace kiln
