// kiln-unroll-act: a differentiated entry's kiln.recurrent -> max_steps copies of its step.
//
// The backward of ACT needs every step's activations, and kiln-differentiate works on straight
// code: in an entry marked kiln.differentiate (before that pass), each kiln.recurrent becomes
//   %pos = kiln.sinusoidal_positions %x;  %c0 = kiln.act_init %x
//   for t in [0, max_steps):   (unrolled; %t a kiln.fill i32 [1])
//     %s  = kiln.act_input %c, %pos, %t
//     the step's ops, cloned, on %s (its kiln.params cloned once, before the first step)
//     %c' = kiln.act_update %c, %s, %y, %hw, %hb, %t
//   kiln.act_output %c_T "hidden", "ponder", "steps", "iterations" (max_steps: every copy runs)
// the same ops kiln-lower-act puts in its loop, so the forward computes the same values: a step
// after every position halted leaves the carry as it is (its state is not read again). Every
// step runs, the loop's early stop included: the cost of a step where all positions halted
// is paid in training. Other entries keep kiln.recurrent for kiln-lower-act's loop.
#include "ActParts.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_UNROLLACT
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct UnrollActPass : kiln::impl::UnrollActBase<UnrollActPass> {
  using UnrollActBase::UnrollActBase;
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (!f->hasAttr("kiln.differentiate")) continue;
      SmallVector<kiln::RecurrentOp> ops;
      f.walk([&](kiln::RecurrentOp op) { ops.push_back(op); });
      for (kiln::RecurrentOp op : ops) unroll(op);
    }
  }

  void unroll(kiln::RecurrentOp op) {
    OpBuilder b(op);
    kiln::ActFrame frame = kiln::buildActFrame(b, op);
    Value carry = frame.init;
    Block &body = op.getBody().front();
    auto yield = cast<kiln::YieldOp>(body.getTerminator());
    // The step's parameters, read once for every copy.
    IRMapping params;
    for (Operation &inner : body.without_terminator())
      if (isa<kiln::ParamOp>(inner)) b.clone(inner, params);
    for (int64_t t = 0; t < (int64_t)op.getMaxSteps(); ++t) {
      Value step = kiln::FillOp::create(b, op.getLoc(), frame.stepT, b.getF32FloatAttr((float)t));
      Value x = kiln::buildActInput(b, op, frame, carry, step);
      IRMapping map = params;
      map.map(body.getArgument(0), x);
      for (Operation &inner : body.without_terminator())
        if (!isa<kiln::ParamOp>(inner)) b.clone(inner, map);
      Value y = map.lookupOrDefault(yield.getValues()[0]);
      carry = kiln::buildActUpdate(b, op, frame, carry, x, y, step);
    }
    kiln::replaceActResults(b, op, carry);
  }
};
}  // namespace
