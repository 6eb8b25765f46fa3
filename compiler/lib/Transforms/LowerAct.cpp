// kiln-lower-act: kiln.recurrent (a step with adaptive computation time) -> kiln.loop.
//
// Algorithm, for each kiln.recurrent %x, %hw, %hb with state type [L, d]:
//   1. Before it: %pos = kiln.sinusoidal_positions %x (the position signal, computed once) and
//      %c0 = kiln.act_init %x, the carry [L, 2d + 4] (state, weighted output, h, r, n, steps run).
//   2. A kiln.loop %c0 whose body takes the carry %c and the step %t:
//        %s  = kiln.act_input %c, %pos, %t (the step's input: state + position + timestep)
//        the recurrent body's ops, moved (one copy; its argument replaced by %s)
//        %c1 = kiln.act_update %c, %s, %y, %hw, %hb, %t (halting, weights, output, state)
//        %go = kiln.act_running %c1;  kiln.yield %go, %c1
//   3. After it, kiln.act_output "hidden", "ponder", "steps" and "iterations" replace the four
//      results (iterations: the steps the loop ran, written by each act_update).
#include "ActParts.h"
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
      kiln::ActFrame frame = kiln::buildActFrame(b, op);
      auto loop = kiln::LoopOp::create(b, loc, frame.carryT, frame.init, op.getMaxStepsAttr());
      Block *body = b.createBlock(&loop.getBody(), {}, {frame.carryT, frame.stepT}, {loc, loc});
      Value carry = body->getArgument(0), step = body->getArgument(1);
      Value x = kiln::buildActInput(b, op, frame, carry, step);
      Block &old = op.getBody().front();
      auto yield = cast<kiln::YieldOp>(old.getTerminator());
      Value y = yield.getValues()[0];
      old.getArgument(0).replaceAllUsesWith(x);
      if (y == old.getArgument(0)) y = x;
      body->getOperations().splice(body->end(), old.getOperations(), old.begin(), Block::iterator(yield));
      b.setInsertionPointToEnd(body);
      Value next = kiln::buildActUpdate(b, op, frame, carry, x, y, step);
      Value flag = kiln::ActRunningOp::create(b, loc, frame.stepT, next);
      kiln::YieldOp::create(b, loc, ValueRange{flag, next});
      b.setInsertionPointAfter(loop);
      kiln::replaceActResults(b, op, loop.getResult());
    }
  }
};
}  // namespace
