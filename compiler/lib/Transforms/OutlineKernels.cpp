// kiln-outline-kernels: give every compute op a kernel spec and a content-hashed kernel name.
//
// Algorithm:
//   1. For each kernel op, collect its kind, its semantic attributes (with defaults spelled
//      out, so an absent attribute and its default give the same spec), its schedule (as
//      "s.<key>"), and its operand and result types.
//   2. Write the canonical text as `kiln.kernel_spec` and the name kiln_<kind>_<hash(spec,
//      target)> as `kiln.kernel`. Equal specs give equal names: the kernel is generated once.
#include <cstdio>

#include "kiln/Support/KernelSpec.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

static kiln::TensorDesc desc(Type t) {
  auto rt = cast<RankedTensorType>(t);
  kiln::TensorDesc d;
  for (int64_t s : rt.getShape()) d.dims.push_back(ShapedType::isDynamic(s) ? -1 : s);
  d.is_int = rt.getElementType().isInteger(32);
  return d;
}

static std::string f2s(float f) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.9g", f);
  return buf;
}

static void semanticAttrs(Operation *op, std::map<std::string, std::string> &a) {
  if (auto o = dyn_cast<kiln::LinearOp>(op)) {
    a["layout"] = o.getWeightLayout().str();
    a["act"] = o.getActivation().str();
  } else if (auto o = dyn_cast<kiln::MatMulOp>(op)) {
    a["transpose_b"] = o.getTransposeB() ? "1" : "0";
  } else if (auto o = dyn_cast<kiln::BatchMatMulOp>(op)) {
    a["transpose_b"] = o.getTransposeB() ? "1" : "0";
  } else if (auto o = dyn_cast<kiln::ScaleOp>(op)) {
    a["factor"] = f2s(o.getFactor().convertToFloat());
  } else if (auto o = dyn_cast<kiln::GeluOp>(op)) {
    a["approx"] = o.getApproximate().str();
  } else if (auto o = dyn_cast<kiln::LayerNormOp>(op)) {
    a["eps"] = f2s(o.getEpsilon().convertToFloat());
  } else if (auto o = dyn_cast<kiln::TransposeOp>(op)) {
    std::string p;
    for (int64_t v : o.getPermutation()) p += (p.empty() ? "" : "/") + std::to_string(v);
    a["perm"] = p;
  } else if (auto o = dyn_cast<kiln::ConcatOp>(op)) {
    a["axis"] = std::to_string(o.getAxis());
  } else if (auto o = dyn_cast<kiln::SliceOp>(op)) {
    a["axis"] = std::to_string(o.getAxis());
    a["offset"] = std::to_string(o.getOffset());
  } else if (auto o = dyn_cast<kiln::FfnOp>(op)) {
    a["layout1"] = o.getLayout1().str();
    a["layout2"] = o.getLayout2().str();
    a["act"] = o.getActivation().str();
    a["chunk"] = std::to_string(o.getChunk());
  } else if (auto o = dyn_cast<kiln::MaskOp>(op)) {
    a["mask"] = o.getKind().str();
  } else if (auto o = dyn_cast<kiln::LshChunkAttentionOp>(op)) {
    a["chunk"] = std::to_string(o.getChunk());
    a["scale"] = f2s(o.getScale().convertToFloat());
    if (o.getCausal()) a["causal"] = "1";
  } else if (auto o = dyn_cast<kiln::ActUpdateOp>(op)) {
    a["max_steps"] = std::to_string(o.getMaxSteps());
    a["threshold"] = f2s(o.getThreshold().convertToFloat());
  } else if (auto o = dyn_cast<kiln::ActOutputOp>(op)) {
    a["field"] = o.getField().str();
  } else if (auto o = dyn_cast<kiln::AttentionOp>(op)) {
    a["mask"] = o.getMask().str();
    a["scale"] = f2s(o.getScale().convertToFloat());
    if (o.getPast()) a["valid"] = o.getKeyCount() ? "key_count" : "past";
    if (auto v = o.getPatternSize()) a["pattern_size"] = std::to_string(*v);
    if (auto v = o.getSummary()) a["summary"] = std::to_string(*v);
    if (auto v = o.getPart()) a["part"] = v->str();
    if (auto rows = o.getLayout()) {
      std::string s;
      for (Attribute r : *rows) s += (s.empty() ? "" : "/") + cast<StringAttr>(r).getValue().str();
      a["layout"] = s;
    }
    if (o.getNoncausal()) a["noncausal"] = "1";
  }
}

namespace {
struct OutlineKernelsPass : kiln::impl::OutlineKernelsBase<OutlineKernelsPass> {
  using OutlineKernelsBase::OutlineKernelsBase;
  void runOnOperation() override {
    getOperation().walk([&](Operation *op) {
      if (!kiln::isKernelOp(op)) return;
      if (isa<kiln::LshSortOp>(op)) {  // served by the runtime (kilnrt), not generated
        op->setAttr("kiln.kernel", StringAttr::get(op->getContext(), "kilnrt_kernel_lsh_sort"));
        return;
      }
      kiln::KernelSpec spec;
      spec.kind = op->getName().stripDialect().str();
      semanticAttrs(op, spec.attrs);
      for (NamedAttribute na : kiln::scheduleOf(op))
        spec.attrs["s." + na.getName().str()] = std::to_string(cast<IntegerAttr>(na.getValue()).getInt());
      for (Value v : op->getOperands()) spec.inputs.push_back(desc(v.getType()));
      spec.output = desc(op->getResult(0).getType());
      op->setAttr("kiln.kernel_spec", StringAttr::get(op->getContext(), spec.text()));
      op->setAttr("kiln.kernel", StringAttr::get(op->getContext(), spec.name(target)));
    });
  }
};
}  // namespace
