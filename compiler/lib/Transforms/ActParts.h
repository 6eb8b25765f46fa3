// ActParts.h - what kiln-lower-act (a loop) and kiln-unroll-act (straight code) both build
// around a kiln.recurrent's step: the frame before it, the update after each step and the
// outputs at the end. Both passes use these, so the loop and its unrolled copy compute the same.
#pragma once
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

namespace kiln {
struct ActFrame {
  mlir::RankedTensorType stateT;  // [L, d]
  mlir::RankedTensorType carryT;  // [L, 2d + 4]: state, weighted output, h, r, n, steps run
  mlir::RankedTensorType stepT;   // i32 [1]
  mlir::Value positions;          // kiln.sinusoidal_positions of the input, computed once
  mlir::Value init;               // kiln.act_init of the input
};

// At `b`'s insertion point (before `op`): the position signal and the initial carry.
inline ActFrame buildActFrame(mlir::OpBuilder &b, RecurrentOp op) {
  ActFrame f;
  mlir::Location loc = op.getLoc();
  f.stateT = mlir::cast<mlir::RankedTensorType>(op.getInit().getType());
  int64_t d = f.stateT.getDimSize(1);
  f.carryT = mlir::RankedTensorType::get({f.stateT.getDimSize(0), 2 * d + 4}, f.stateT.getElementType());
  f.stepT = mlir::RankedTensorType::get({1}, b.getI32Type());
  f.positions = SinusoidalPositionsOp::create(b, loc, f.stateT, op.getInit(), mlir::Value());
  f.init = ActInitOp::create(b, loc, f.carryT, op.getInit());
  return f;
}

// The step's input: the state plus the position and timestep signals.
inline mlir::Value buildActInput(mlir::OpBuilder &b, RecurrentOp op, const ActFrame &f, mlir::Value carry,
                                 mlir::Value step) {
  return ActInputOp::create(b, op.getLoc(), f.stateT, carry, f.positions, step);
}

// The carry after a step that read `x` and computed `y`: halting, weights, output, state.
inline mlir::Value buildActUpdate(mlir::OpBuilder &b, RecurrentOp op, const ActFrame &f, mlir::Value carry,
                                  mlir::Value x, mlir::Value y, mlir::Value step) {
  return ActUpdateOp::create(b, op.getLoc(), f.carryT, carry, x, y, op.getHaltWeight(), op.getHaltBias(), step,
                             op.getMaxStepsAttr(), op.getThresholdAttr());
}

// At `b`'s insertion point: kiln.act_output hidden, ponder, steps and iterations of the final
// carry replace `op`'s four results; `op` is erased.
inline void replaceActResults(mlir::OpBuilder &b, RecurrentOp op, mlir::Value carry) {
  for (ActField f : {ActField::hidden, ActField::ponder, ActField::steps, ActField::iterations}) {  // results 0-3
    mlir::Value res = op->getResult((unsigned)f);
    res.replaceAllUsesWith(ActOutputOp::create(b, op.getLoc(), res.getType(), carry, ActFieldAttr::get(b.getContext(), f)));
  }
  op.erase();
}
}  // namespace kiln
