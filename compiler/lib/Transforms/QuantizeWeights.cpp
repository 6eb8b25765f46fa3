// kiln-quantize-weights: GEMM weights and embedding tables kept in ggml's quantized blocks.
//
// Algorithm:
//   1. The formats asked for: `tensor-formats` (name=format, a GGUF file's tensor types) per
//      parameter, else `format` (--quantize) for every parameter.
//   2. For every parameter name with a quantized format, collect its kiln.param ops (a name
//      appears in every entry and region that uses it). It is eligible when it is 2-D, f32, its
//      rows' length a multiple of 32, and every use is the weight of a kiln.linear in layout
//      out_in or the rows table of a kiln.embedding.
//   3. An eligible parameter: each kiln.param gets `format` and the type bytes [rows, in / 32,
//      block bytes] (i8); each user gets `weight_format` or `table_format`. One named by
//      `tensor-formats` that is not eligible is an error naming why; one that only `format`
//      covers stays f32.
// Runs before kiln-prepack-weights, which leaves quantized parameters alone (they are 3-D).
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "llvm/ADT/MapVector.h"

namespace kiln {
#define GEN_PASS_DEF_QUANTIZEWEIGHTS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
using kiln::WeightFormat;

// Why `use` cannot read a quantized parameter, or "" when it can.
std::string ineligibleUse(OpOperand &use) {
  Operation *user = use.getOwner();
  if (auto l = dyn_cast<kiln::LinearOp>(user)) {
    if (use.getOperandNumber() != 1) return "it is a linear's input, not its weight";
    if (l.getWeightLayout() != kiln::WeightLayoutKind::out_in) return "a linear reads it [in, out]";
    return "";
  }
  if (auto e = dyn_cast<kiln::EmbeddingOp>(user)) {
    if (use.getOperandNumber() != 0 || e.getTableLayout() != kiln::TableLayoutKind::rows) return "an embedding reads it in panels";
    return "";
  }
  return "it is used by " + user->getName().getStringRef().str() + " (quantized weights are read by linears and embeddings only)";
}

struct QuantizeWeightsPass : kiln::impl::QuantizeWeightsBase<QuantizeWeightsPass> {
  using QuantizeWeightsBase::QuantizeWeightsBase;
  void runOnOperation() override {
    llvm::StringMap<WeightFormat> named;
    for (const std::string &entry : tensorFormats) {
      size_t eq = entry.rfind('=');
      std::optional<WeightFormat> f = eq == std::string::npos ? std::nullopt : kiln::symbolizeWeightFormat(entry.substr(eq + 1));
      if (!f) {
        getOperation().emitError("kiln-quantize-weights: expected tensor-formats entries name=f32|q8_0|q4_0|q4_1, got '") << entry << "'";
        return signalPassFailure();
      }
      named[entry.substr(0, eq)] = *f;
    }
    if (gpu && (format != WeightFormat::f32 || !named.empty())) {  // refused, never silently left f32
      getOperation().emitError("quantized weights (--quantize, or a GGUF file's quantized tensors) run on CPU targets only (for now)");
      return signalPassFailure();
    }
    if (format != WeightFormat::f32) {  // --quantize on a model that trains: its weights must stay f32
      bool training = false;
      getOperation().walk([&](Operation *op) { training |= isa<kiln::WeightGradOp, kiln::AdamWStepOp>(op); });
      if (training) {
        getOperation().emitError("--quantize ") << kiln::stringifyWeightFormat(format)
                                                << ": this model has training entries, whose weights stay f32 (compile it without --train)";
        return signalPassFailure();
      }
    }
    llvm::MapVector<StringRef, SmallVector<kiln::ParamOp>> byName;
    getOperation().walk([&](kiln::ParamOp p) { byName[p.getName()].push_back(p); });
    for (auto &[name, ops] : byName) {
      auto it = named.find(name);
      const bool asked = it != named.end();
      const WeightFormat f = asked ? it->second : format.getValue();
      if (f == WeightFormat::f32) continue;
      auto t = cast<RankedTensorType>(ops.front().getType());
      std::string why;
      if (t.getRank() != 2 || !t.getElementType().isF32()) why = "it is not a 2-D f32 matrix";
      else if (ops.front().getTransposed() || ops.front().getPanelCols()) why = "it is already relaid";
      else if (t.getDimSize(1) % kiln::kQuantBlock) why = "its rows of " + std::to_string(t.getDimSize(1)) + " are no whole number of blocks of 32";
      for (kiln::ParamOp p : ops)
        for (OpOperand &use : p->getUses())
          if (why.empty()) why = ineligibleUse(use);
      if (!why.empty()) {
        if (!asked) continue;  // --quantize: what cannot be quantized stays f32
        ops.front().emitError("parameter '") << name << "' is stored as " << kiln::stringifyWeightFormat(f)
                                             << " but cannot be kept so: " << why;
        return signalPassFailure();
      }
      const int bytes = kiln::quantBlockBytes(f);
      auto qt = RankedTensorType::get({t.getDimSize(0), t.getDimSize(1) / kiln::kQuantBlock, bytes}, IntegerType::get(&getContext(), 8));
      auto attr = kiln::WeightFormatAttr::get(&getContext(), f);
      for (kiln::ParamOp p : ops) {
        for (OpOperand &use : p->getUses())
          use.getOwner()->setAttr(isa<kiln::LinearOp>(use.getOwner()) ? "weight_format" : "table_format", attr);
        p.setFormat(f);
        p.getResult().setType(qt);
      }
    }
  }
};
}  // namespace
