// kiln-apply-optimizer: a differentiated entry marked `kiln.train` becomes a training step.
//
// Algorithm, per func.func with the `kiln.train` dictionary (after kiln-differentiate):
//   1. Its "grad.<name>" results and the kiln.param ops they belong to.
//   2. After each gradient's last kernel, a kiln.all_reduce: starts the sum over the ranks of a
//      data parallel run (mpirun), each rank's gradient weighted by its share of the batch,
//      which goes on beside the rest of the backward; before the optimizer, a
//      kiln.all_reduce_wait per gradient. The optimizer reads the reduced gradients, so every
//      rank takes the same step.
//   3. Before the return: the step counter (a state, incremented in place), the step's learning
//      rate, the sum of every gradient's squares; then per parameter one kiln.adamw_step: its
//      two moments (states) and the parameter updated in place by one kernel. Parameters named
//      in `no_decay` get weight_decay 0.
//   4. The gradients leave the results; "lr" and "grad_sumsq" join them.
// Kernels run in the function's order: every gradient (and every read of a parameter by the
// backward) comes before the first update.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "kilnrt/model.h"
#include "llvm/ADT/StringSet.h"

namespace kiln {
#define GEN_PASS_DEF_APPLYOPTIMIZER
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
LogicalResult apply(func::FuncOp f, DictionaryAttr cfg) {
  auto fl = [&](const char *k) -> FailureOr<float> {
    auto a = cfg.getAs<FloatAttr>(k);
    if (!a) return f.emitError("kiln-apply-optimizer: kiln.train needs the float '") << k << "'";
    return (float)a.getValueAsDouble();
  };
  auto in = [&](const char *k) -> FailureOr<int64_t> {
    auto a = cfg.getAs<IntegerAttr>(k);
    if (!a) return f.emitError("kiln-apply-optimizer: kiln.train needs the integer '") << k << "'";
    return a.getInt();
  };
  FailureOr<float> lr = fl("lr"), b1 = fl("beta1"), b2 = fl("beta2"), eps = fl("eps"), wd = fl("weight_decay"),
                   clip = fl("clip_norm"), minRatio = fl("min_ratio");
  FailureOr<int64_t> warmup = in("warmup"), decay = in("decay_steps");
  if (failed(lr) || failed(b1) || failed(b2) || failed(eps) || failed(wd) || failed(clip) || failed(minRatio) ||
      failed(warmup) || failed(decay))
    return failure();
  llvm::StringSet<> noDecay;
  if (auto nd = cfg.getAs<ArrayAttr>("no_decay"))
    for (Attribute a : nd) noDecay.insert(cast<StringAttr>(a).getValue());

  // 1. The gradients and their parameters.
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  llvm::StringMap<kiln::ParamOp> params;
  for (kiln::ParamOp p : body.getOps<kiln::ParamOp>()) params[p.getName()] = p;
  SmallVector<std::pair<kiln::ParamOp, Value>> grads;
  SmallVector<Value> keep;
  SmallVector<std::string> keepNames;
  for (unsigned i = 0; i < f.getNumResults(); ++i) {
    auto n = f.getResultAttrOfType<StringAttr>(i, "kiln.name");
    if (n && n.getValue().starts_with("grad.")) {
      auto it = params.find(n.getValue().drop_front(5));
      if (it == params.end()) return f.emitError("kiln-apply-optimizer: no parameter for result ") << n;
      grads.push_back({it->second, ret.getOperand(i)});
    } else {
      keep.push_back(ret.getOperand(i));
      keepNames.push_back(n ? n.str() : std::string());
    }
  }
  if (grads.empty()) return f.emitError("kiln-apply-optimizer: entry '") << f.getName() << "' has no gradients (run kiln-differentiate first)";

  // Data parallel: each gradient's sum over the ranks, weighted by their shares of the batch,
  // started in its buffer as soon as the backward has it (in a process alone, nothing);
  // waited for below. A gradient that is not a kernel's result of its own (read elsewhere
  // too, or a view) is first copied, so that the sum writes a buffer nothing else reads.
  for (auto &[p, g] : grads) {
    OpBuilder ab(f.getContext());
    Operation *def = g.getDefiningOp();
    if (def) ab.setInsertionPointAfter(def);
    else ab.setInsertionPointToStart(&body);
    if (!def || !g.hasOneUse() || !kiln::isKernelOp(def) || kiln::writesInPlace(def) || def->getNumResults() != 1)
      g = kiln::ScaleOp::create(ab, p.getLoc(), g.getType(), g, ab.getF32FloatAttr(1.0f));
    g = kiln::AllReduceOp::create(ab, p.getLoc(), g.getType(), g);
  }

  // 3. The optimizer, before the return.
  OpBuilder b(ret);
  Location loc = f.getLoc();
  for (auto &[p, g] : grads) g = kiln::AllReduceWaitOp::create(b, p.getLoc(), g.getType(), g);
  auto scalar = RankedTensorType::get({1}, b.getF32Type());
  Value step = kiln::StateOp::create(b, loc, scalar, b.getStringAttr(KILN_STATE_STEP), IntegerAttr());
  Value t = kiln::StepCountOp::create(b, loc, scalar, step);
  Value peak = kiln::StateOp::create(b, loc, scalar, b.getStringAttr(KILN_STATE_LR), IntegerAttr());  // --lr; zero: the DSL's
  Value rate = kiln::LearningRateOp::create(b, loc, scalar, t, peak, b.getF32FloatAttr(*lr), b.getI64IntegerAttr(*warmup),
                                            b.getI64IntegerAttr(*decay), b.getF32FloatAttr(*minRatio));
  Value sumsq;
  for (auto &[p, g] : grads) {
    Value s = kiln::SumSquaresOp::create(b, p.getLoc(), scalar, g);
    sumsq = sumsq ? Value(kiln::AddOp::create(b, loc, scalar, sumsq, s)) : s;
  }
  if (sumsq.getDefiningOp<kiln::SumSquaresOp>())  // an output needs its own kernel: one parameter's is its sum
    sumsq = kiln::ScaleOp::create(b, loc, scalar, sumsq, b.getF32FloatAttr(1.0f));
  for (auto &[p, g] : grads) {
    Location pl = p.getLoc();
    std::string name = p.getName().str();
    Value m = kiln::StateOp::create(b, pl, p.getType(), b.getStringAttr(KILN_STATE_MOMENT1 + name), IntegerAttr());
    Value v = kiln::StateOp::create(b, pl, p.getType(), b.getStringAttr(KILN_STATE_MOMENT2 + name), IntegerAttr());
    kiln::AdamWStepOp::create(b, pl, p.getType(), p.getResult(), m, v, g, sumsq, t, rate, b.getF32FloatAttr(*b1),
                              b.getF32FloatAttr(*b2), b.getF32FloatAttr(*eps),
                              b.getF32FloatAttr(noDecay.contains(name) ? 0.0f : *wd), b.getF32FloatAttr(*clip));
  }

  // 4. The results: the entry's own (its loss), the learning rate and the squared norm.
  keep.push_back(rate);
  keepNames.push_back(KILN_OUTPUT_LR);
  keep.push_back(sumsq);
  keepNames.push_back(KILN_OUTPUT_GRAD_SUMSQ);
  kiln::setResults(f, keep, keepNames);
  f->removeAttr("kiln.train");
  return success();
}

struct ApplyOptimizerPass : kiln::impl::ApplyOptimizerBase<ApplyOptimizerPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (auto cfg = f->getAttrOfType<DictionaryAttr>("kiln.train"); cfg && failed(apply(f, cfg)))
        return signalPassFailure();
  }
};
}  // namespace
