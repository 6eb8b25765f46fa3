// Builder.cpp - kernel inputs, logged scheduling calls and the row-wise schedules shared by the
// kernel families (see Builder.h).
#include "Builder.h"

namespace kiln::codegen {

std::string str(const VarOrRVar &v) { return v.name(); }
std::string funcName(const std::string &name) {
  // "out$9" and "acc$1.update(0)" -> "out" and "acc.update(0)"
  std::string r;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '$' && i + 1 < name.size() && isdigit((unsigned char)name[i + 1])) {
      while (i + 1 < name.size() && isdigit((unsigned char)name[i + 1])) ++i;
      continue;
    }
    r += name[i];
  }
  return r;
}
std::string str(const Expr &e) {
  std::ostringstream os;
  os << e;
  return os.str();
}
const char *str(TailStrategy t) {
  switch (t) {
    case TailStrategy::RoundUp: return "RoundUp";
    case TailStrategy::GuardWithIf: return "GuardWithIf";
    case TailStrategy::Predicate: return "Predicate";
    case TailStrategy::PredicateLoads: return "PredicateLoads";
    case TailStrategy::PredicateStores: return "PredicateStores";
    case TailStrategy::ShiftInwards: return "ShiftInwards";
    case TailStrategy::Auto: return "Auto";
  }
  return "?";
}
const char *str(MemoryType m) {
  switch (m) {
    case MemoryType::Auto: return "Auto";
    case MemoryType::Heap: return "Heap";
    case MemoryType::Stack: return "Stack";
    case MemoryType::Register: return "Register";
    case MemoryType::GPUShared: return "GPUShared";
    case MemoryType::GPUTexture: return "GPUTexture";
    case MemoryType::LockedCache: return "LockedCache";
    case MemoryType::VTCM: return "VTCM";
    case MemoryType::AMXTile: return "AMXTile";
  }
  return "?";
}

void constrain(OutputImageParam p, const TensorDesc &d, bool stridesOnly) {
  int r = (int)d.dims.size();
  Expr stride = 1;
  for (int k = 0; k < r; ++k) {
    int64_t ext = d.dims[r - 1 - k];
    if (!stridesOnly) p.dim(k).set_min(0);
    if (!d.strides.empty())
      p.dim(k).set_stride((int)d.strides[r - 1 - k]);
    else if (k == 0 || !d.per_sequence)  // one sequence of a batch: the outer strides are the batch's
      p.dim(k).set_stride(stride);
    if (ext >= 0 && !stridesOnly) p.dim(k).set_extent((int)ext);
    stride = stride * (ext >= 0 ? Expr((int)ext) : p.dim(k).extent());
  }
}

std::vector<Expr> ex(const std::vector<Var> &v) { return std::vector<Expr>(v.begin(), v.end()); }

std::vector<Var> makeVars(int r) {
  std::vector<Var> v;
  for (int i = 0; i < r; ++i) v.push_back(Var("c" + std::to_string(i)));  // not "v<n>": Halide names its own vars so
  return v;
}

int largestDivisor(int n, int upTo) {
  int w = 1;
  while (w * 2 <= upTo && n % (w * 2) == 0) w *= 2;
  return w;
}

Builder::Builder(const KernelSpec &spec, bool gpuTarget) : k(spec), sch(spec.schedule), gpu(gpuTarget) {
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    ImageParam p(k.inputs[i].is_int ? Int(32) : k.inputs[i].is_bf16 ? BFloat(16) : k.inputs[i].is_u8 ? UInt(8) : Float(32), (int)k.inputs[i].dims.size(), "in" + std::to_string(i));
    constrain(p, k.inputs[i]);
    in.push_back(p);
  }
}

int Builder::need(const std::optional<int64_t> &field, const char *name) const {
  if (!field)
    throw std::runtime_error("kernel " + k.kind + ": its kiln.schedule has no " + name +
                             " (the pass that decides it did not run)");
  return (int)*field;
}

void Builder::vectorize(Func f, Var v, int64_t extent) {
  int w = vec();
  if (extent >= 0)
    while (w > 1 && w > extent) w /= 2;
  if (w <= 1) return;
  s(f).vectorize(v, w, extent >= w ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf);
}

Var Builder::rowwise(Func out, std::vector<Var> vars, bool inPlace) {
  if (gpu) return gpuRows(out, vars);
  int r = (int)vars.size();
  if (inPlace) s(out).vectorize(vars[0], std::max(vec(), 1), TailStrategy::GuardWithIf);
  else vectorize(out, vars[0], outDim(r - 1));
  if (r == 1) {  // tasks of 64 vectors
    Var o("o");
    s(out).split(vars[0], o, vars[0], std::max(vec(), 1) * 64, TailStrategy::GuardWithIf);
    if (parallel()) s(out).parallel(o);
    return vars[0];
  }
  Var row = vars[1];
  for (int i = 2; i < r; ++i) {
    Var f("f" + std::to_string(i));
    s(out).fuse(row, vars[i], f);
    row = f;
  }
  Var ro("ro"), ri("ri");
  s(out).split(row, ro, ri, need(sch.rows_per_task, "rows_per_task"), TailStrategy::GuardWithIf);
  if (parallel()) s(out).parallel(ro);
  return ri;
}

Var Builder::gpuRows(Func out, std::vector<Var> vars) {
  int r = (int)vars.size();
  int tx = need(sch.gpu_threads, "gpu_threads");
  if (r == 1) {
    Var bo("bo"), ti("ti");
    s(out).gpu_tile(vars[0], bo, ti, tx, TailStrategy::GuardWithIf);
    return bo;
  }
  Var row = vars[1];
  for (int i = 2; i < r; ++i) {
    Var f("f" + std::to_string(i));
    s(out).fuse(row, vars[i], f);
    row = f;
  }
  Var co("co"), ci("ci");
  s(out).split(vars[0], co, ci, tx, TailStrategy::GuardWithIf).reorder(ci, co, row).gpu_blocks(row).gpu_threads(ci);
  return row;
}

}  // namespace kiln::codegen
