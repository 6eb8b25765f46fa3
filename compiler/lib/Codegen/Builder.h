// Builder.h - what every kernel family shares: the kernel's inputs as constrained Halide
// ImageParams, the target (CPU or GPU schedules), and scheduling calls that write themselves
// to the kernel's schedule log.
//
// A family writes its algorithm once, target-independent, then its CPU and GPU schedules
// through `B.s(func)` (or `B.s(func.update())`): each call is applied to Halide and logged as
// it is made, so the schedule file shows exactly the calls that ran, in order:
//
//   B.s(out).split(i, io, ii, 64, TailStrategy::GuardWithIf).parallel(io);
//   ->  out.split(i, io, ii, 64, GuardWithIf)
//       out.parallel(io)
//
// Tensors are row-major; Halide's dim 0 is the innermost (last) tensor dim, so a [L, d]
// activation is the Halide buffer (d, L). Every input and the output are constrained to min 0,
// dense strides (or a strided view's static strides, kiln-fold-views) and their static
// extents, so Halide specializes on them; sequence lengths stay dynamic. Kernel ABI: int32_t name(halide_buffer_t *in0, ..., halide_buffer_t *out).
#pragma once
#include <Halide.h>

#include <sstream>
#include <string>
#include <vector>

#include "kiln/Dialect/KernelSpec.h"

namespace kiln::codegen {

using namespace Halide;

std::string str(const VarOrRVar &v);
// A Func's or Stage's name without the "$N" Halide appends to keep names unique in a process.
std::string funcName(const std::string &name);
std::string str(const Expr &e);
const char *str(TailStrategy t);
const char *str(MemoryType m);

// Halide's buffer constraints for a tensor: min 0, dense row-major strides (a view's own static
// strides, kiln-fold-views), static extents. `stridesOnly`: a Tuple's further output buffers,
// whose mins and extents Halide ties to the first one's.
void constrain(OutputImageParam p, const TensorDesc &d, bool stridesOnly = false);

// A Func or a Stage whose scheduling calls are logged as they are made.
template <class T>
class Logged {
 public:
  Logged(T t, std::ostream &log) : t_(t), log_(log) {}
  T &get() { return t_; }

  Logged &split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner, const Expr &factor,
                TailStrategy tail = TailStrategy::Auto) {
    t_.split(old, outer, inner, factor, tail);
    return line("split", str(old), str(outer), str(inner), str(factor), tailArg(tail));
  }
  Logged &fuse(const VarOrRVar &a, const VarOrRVar &b, const VarOrRVar &fused) {
    t_.fuse(a, b, fused);
    return line("fuse", str(a), str(b), str(fused));
  }
  Logged &tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo, const VarOrRVar &yo, const VarOrRVar &xi,
               const VarOrRVar &yi, const Expr &fx, const Expr &fy, TailStrategy tail = TailStrategy::Auto) {
    t_.tile(x, y, xo, yo, xi, yi, fx, fy, tail);
    return line("tile", str(x), str(y), str(xo), str(yo), str(xi), str(yi), str(fx), str(fy), tailArg(tail));
  }
  template <class... V>
  Logged &reorder(const VarOrRVar &first, const V &...rest) {
    std::vector<VarOrRVar> vars{first, VarOrRVar(rest)...};
    t_.reorder(vars);
    std::string s;
    for (auto &v : vars) s += (s.empty() ? "" : ", ") + str(v);
    return line("reorder", s);
  }
  Logged &vectorize(const VarOrRVar &v, int width, TailStrategy tail = TailStrategy::Auto) {
    t_.vectorize(v, width, tail);
    return line("vectorize", str(v), std::to_string(width), tailArg(tail));
  }
  Logged &vectorize(const VarOrRVar &v) {
    t_.vectorize(v);
    return line("vectorize", str(v));
  }
  Logged &unroll(const VarOrRVar &v) {
    t_.unroll(v);
    return line("unroll", str(v));
  }
  Logged &unroll(const VarOrRVar &v, int factor, TailStrategy tail = TailStrategy::Auto) {
    t_.unroll(v, factor, tail);
    return line("unroll", str(v), std::to_string(factor), tailArg(tail));
  }
  Logged &parallel(const VarOrRVar &v) {
    t_.parallel(v);
    return line("parallel", str(v));
  }
  Logged &gpu_blocks(const VarOrRVar &x) {
    t_.gpu_blocks(x);
    return line("gpu_blocks", str(x));
  }
  Logged &gpu_blocks(const VarOrRVar &x, const VarOrRVar &y) {
    t_.gpu_blocks(x, y);
    return line("gpu_blocks", str(x), str(y));
  }
  Logged &gpu_blocks(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z) {
    t_.gpu_blocks(x, y, z);
    return line("gpu_blocks", str(x), str(y), str(z));
  }
  Logged &gpu_threads(const VarOrRVar &x) {
    t_.gpu_threads(x);
    return line("gpu_threads", str(x));
  }
  Logged &gpu_threads(const VarOrRVar &x, const VarOrRVar &y) {
    t_.gpu_threads(x, y);
    return line("gpu_threads", str(x), str(y));
  }
  Logged &gpu_single_thread() {
    t_.gpu_single_thread();
    return line("gpu_single_thread");
  }
  Logged &gpu_tile(const VarOrRVar &x, const VarOrRVar &bx, const VarOrRVar &tx, const Expr &size,
                   TailStrategy tail = TailStrategy::Auto) {
    t_.gpu_tile(x, bx, tx, size, tail);
    return line("gpu_tile", str(x), str(bx), str(tx), str(size), tailArg(tail));
  }
  Logged &gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &bx, const VarOrRVar &by, const VarOrRVar &tx,
                   const VarOrRVar &ty, const Expr &sx, const Expr &sy, TailStrategy tail = TailStrategy::Auto) {
    t_.gpu_tile(x, y, bx, by, tx, ty, sx, sy, tail);
    return line("gpu_tile", str(x), str(y), str(bx), str(by), str(tx), str(ty), str(sx), str(sy), tailArg(tail));
  }
  Logged &atomic() {
    t_.atomic();
    return line("atomic");
  }
  Logged &allow_race_conditions() {
    t_.allow_race_conditions();
    return line("allow_race_conditions");
  }
  // Func only.
  Logged &compute_at(const Func &f, const VarOrRVar &v) {
    if (v.is_rvar) t_.compute_at(f, v.rvar);
    else t_.compute_at(f, v.var);
    return line("compute_at", funcName(f.name()), str(v));
  }
  Logged &compute_root() {
    t_.compute_root();
    return line("compute_root");
  }
  template <class... V>
  Logged &reorder_storage(const Var &first, const V &...rest) {
    std::vector<Var> vars{first, Var(rest)...};
    t_.reorder_storage(vars);
    std::string s;
    for (auto &v : vars) s += (s.empty() ? "" : ", ") + v.name();
    return line("reorder_storage", s);
  }
  Logged &store_in(MemoryType m) {
    t_.store_in(m);
    return line("store_in", str(m));
  }
  Logged &bound_extent(const Var &v, const Expr &extent) {
    t_.bound_extent(v, extent);
    return line("bound_extent", v.name(), str(extent));
  }
  Logged &bound(const Var &v, const Expr &min, const Expr &extent) {
    t_.bound(v, min, extent);
    return line("bound", v.name(), str(min), str(extent));
  }

 private:
  static std::string tailArg(TailStrategy t) { return t == TailStrategy::Auto ? std::string() : str(t); }
  template <class... S>
  Logged &line(const char *call, const S &...args) {
    std::string a;
    for (const std::string &s : {std::string(args)...})
      if (!s.empty()) a += (a.empty() ? "" : ", ") + s;
    log_ << funcName(t_.name()) << "." << call << "(" << a << ")\n";
    return *this;
  }
  Logged &line(const char *call) {
    log_ << funcName(t_.name()) << "." << call << "()\n";
    return *this;
  }
  T t_;
  std::ostream &log_;
};

struct Builder {
  const KernelSpec &k;
  const ScheduleFields &sch;  // the decisions of the kernel's kiln.schedule
  std::vector<ImageParam> in;
  // The kernel's further outputs, one per KernelSpec::more_outputs (an attention's lse), set by
  // its family's builder; the Func it returns is the first.
  std::vector<Func> more_out;
  std::ostringstream log;
  bool gpu;  // CUDA or OpenCL target: the GPU schedules (stages without one run on the host)

  Builder(const KernelSpec &spec, bool gpuTarget);
  // A decided schedule field; a compiler bug (an exception naming the field) when the pass that
  // decides it did not run: codegen never substitutes a default of its own.
  int need(const std::optional<int64_t> &field, const char *name) const;
  int vec() const { return need(sch.vec, "vec"); }
  bool parallel() const { return need(sch.parallel, "parallel") != 0; }
  // The op the kernel computes (one of those sharing the spec), for its typed attributes.
  template <class OpT>
  OpT op() const {
    return mlir::cast<OpT>(k.source);
  }
  int rank() const { return (int)k.output.dims.size(); }
  int64_t outDim(int tensorDim) const { return k.output.dims[tensorDim]; }

  Logged<Func> s(Func f) { return Logged<Func>(f, log); }
  Logged<Stage> s(Stage st) { return Logged<Stage>(st, log); }
  // A line of prose in the schedule log (what a group of calls achieves).
  void note(const std::string &text) { log << "# " << text << "\n"; }

  // Vectorizes v by `vec` (a static extent below one vector: the largest power of two within
  // it), shifting the tail inwards when the extent is static and at least one vector wide,
  // guarding it otherwise.
  void vectorize(Func f, Var v, int64_t extent);
  // Row-wise schedule: vars[0] vectorized, the rest fused into rows, split into tasks of
  // rows_per_task rows (parallel when decided). Returns the per-row var (for compute_at of row
  // reductions) or vars[0] when rank is 1. On a GPU target: gpuRows.
  // `inPlace`: the kernel writes a buffer it reads (kiln's in-place updates), so no element may
  // be computed twice: the vector tail is guarded instead of shifted inwards.
  Var rowwise(Func out, std::vector<Var> vars, bool inPlace = false);
  // GPU row-wise schedule: one block per row (the leading dims fused), the row's columns across
  // gpu_threads threads (a 1-D result: gpu_threads elements per block). Returns the block's row var.
  Var gpuRows(Func out, std::vector<Var> vars);
};

std::vector<Var> makeVars(int rank);
std::vector<Expr> ex(const std::vector<Var> &v);
// The largest power of two <= upTo dividing n.
int largestDivisor(int n, int upTo);

}  // namespace kiln::codegen
