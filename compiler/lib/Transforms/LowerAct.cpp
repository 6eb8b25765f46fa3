// kiln-lower-act: kiln.recurrent (a step with adaptive computation time) -> kiln.loop.
//
// Algorithm, for each kiln.recurrent %x, %hw, %hb with state type [L, d]:
//   1. Before it: %pos = kiln.sinusoidal_positions %x (the position signal, computed once) and
//      %c0 = kiln.act_init %x, the carry [L, 2d + 3] (state, weighted output, h, r, n).
//   2. A kiln.loop %c0 whose body takes the carry %c and the step %t:
//        %s  = kiln.act_input %c, %pos, %t (the step's input: state + position + timestep)
//        the recurrent body's ops, moved (one copy; its argument replaced by %s)
//        %c1 = kiln.act_update %c, %s, %y, %hw, %hb, %t (halting, weights, output, state)
//        %go = kiln.act_running %c1;  kiln.yield %go, %c1
//   3. After it, kiln.act_output "hidden", "ponder" and "steps" replace the three results.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERACT
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct LowerActPass : kiln::impl::LowerActBase<LowerActPass> {
  using LowerActBase::LowerActBase;
  void runOnOperation() override {
    SmallVector<kiln::RecurrentOp> ops;
    getOperation().walk([&](kiln::RecurrentOp op) { ops.push_back(op); });
    for (kiln::RecurrentOp op : ops) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      auto xt = cast<RankedTensorType>(op.getInit().getType());
      int64_t d = xt.getDimSize(1);
      auto carryT = RankedTensorType::get({xt.getDimSize(0), 2 * d + 3}, xt.getElementType());
      auto stepT = RankedTensorType::get({1}, b.getI32Type());
      Value pos = kiln::SinusoidalPositionsOp::create(b, loc, xt, op.getInit(), Value());
      Value c0 = kiln::ActInitOp::create(b, loc, carryT, op.getInit());
      auto loop = kiln::LoopOp::create(b, loc, carryT, c0, op.getMaxStepsAttr());
      Block *body = b.createBlock(&loop.getBody(), {}, {carryT, stepT}, {loc, loc});
      Value carry = body->getArgument(0), step = body->getArgument(1);
      Value x = kiln::ActInputOp::create(b, loc, xt, carry, pos, step);
      Block &old = op.getBody().front();
      auto yield = cast<kiln::YieldOp>(old.getTerminator());
      Value y = yield.getValues()[0];
      old.getArgument(0).replaceAllUsesWith(x);
      if (y == old.getArgument(0)) y = x;
      body->getOperations().splice(body->end(), old.getOperations(), old.begin(), Block::iterator(yield));
      b.setInsertionPointToEnd(body);
      Value next = kiln::ActUpdateOp::create(b, loc, carryT, carry, x, y, op.getHaltWeight(), op.getHaltBias(), step,
                                             op.getMaxStepsAttr(), op.getThresholdAttr());
      Value flag = kiln::ActRunningOp::create(b, loc, stepT, next);
      kiln::YieldOp::create(b, loc, ValueRange{flag, next});
      b.setInsertionPointAfter(loop);
      static const char *const kFields[] = {"hidden", "ponder", "steps"};
      for (unsigned i = 0; i < 3; ++i) {
        Value res = op->getResult(i);
        res.replaceAllUsesWith(kiln::ActOutputOp::create(b, loc, res.getType(), loop.getResult(), b.getStringAttr(kFields[i])));
      }
      op.erase();
    }
  }
};
}  // namespace
