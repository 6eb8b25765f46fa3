// LoopOps.cpp - the Universal Transformer's recurrence (kiln.recurrent), the host loop it lowers
// to, and the ACT bookkeeping on the carried buffer, with its gradient: each op's verifier, the
// hooks it defines (KilnInterfaces.td) and its gradient rule, op after op. Verifier messages start
// with "expected"; dynamic dims (`?`) match anything.
#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::verify;

// The carry of a state [L, d] is [L, 2d + 4].
static LogicalResult expectCarry(Operation *op, Value carry, RankedTensorType state) {
  auto c = ty(carry);
  if (c.getRank() != 2 || state.getRank() != 2 || ShapedType::isDynamic(state.getDimSize(1)) ||
      c.getDimSize(1) != 2 * state.getDimSize(1) + 4)
    return op->emitOpError() << "expected an ACT carry [L, 2d + 4] for the state " << state << ", got " << c;
  return expectDim(op, "carry rows", c.getDimSize(0), "state rows", state.getDimSize(0));
}

static bool isStep(Value v) {
  auto t = ty(v);
  return t.getRank() == 1 && t.getDimSize(0) == 1 && t.getElementType().isInteger(32);
}

static LogicalResult expectStep(Operation *op, Value v, const char *role) {
  if (!isStep(v)) return op->emitOpError() << "expected the " << role << " to be a tensor<1xi32>, got " << ty(v);
  return success();
}

LogicalResult RecurrentOp::verify() {
  auto x = ty(getInit());
  if (x.getRank() != 2 || ShapedType::isDynamic(x.getDimSize(1)))
    return emitOpError("expected the initial state to be [L, d] with a static d");
  if (getMaxSteps() < 1) return emitOpError("expected max_steps to be at least 1");
  float th = getThreshold().convertToFloat();
  if (!(th > 0.0f && th < 1.0f)) return emitOpError("expected the threshold in (0, 1)");
  if (getHaltWeight().getType() != RankedTensorType::get({x.getDimSize(1)}, x.getElementType()) ||
      getHaltBias().getType() != RankedTensorType::get({1}, x.getElementType()))
    return emitOpError("expected the halting weight [d] and bias [1] of the state's width");
  if (getBody().empty()) return emitOpError("expected a body");
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 || body.getArgument(0).getType() != x)
    return emitOpError("expected the body to take one argument of the state's type ") << x;
  // A body whose last op is no terminator (malformed input) has none to read.
  auto y = body.mightHaveTerminator() ? dyn_cast<YieldOp>(body.getTerminator()) : YieldOp();
  if (!y || y.getValues().size() != 1 || y.getValues()[0].getType() != x)
    return emitOpError("expected the body to yield one value of the state's type ") << x;
  auto row = RankedTensorType::get({x.getDimSize(0)}, x.getElementType());
  Type i32 = IntegerType::get(getContext(), 32);
  if (getHidden().getType() != x || getPonder().getType() != row ||
      getSteps().getType() != RankedTensorType::get({x.getDimSize(0)}, i32) ||
      getIterations().getType() != RankedTensorType::get({1}, i32))
    return emitOpError("expected results hidden [L, d], ponder [L] f32, steps [L] i32 and iterations [1] i32");
  return success();
}

Syms RecurrentOp::inferSeqLengths(ArrayRef<Syms> in) { return in[0]; }  // hidden [L, d]

LogicalResult LoopOp::verify() {
  if (getMaxSteps() < 1) return emitOpError("expected max_steps to be at least 1");
  Block &body = getBody().front();
  Type c = getInit().getType();
  if (body.getNumArguments() != 2 || body.getArgument(0).getType() != c || !isStep(body.getArgument(1)))
    return emitOpError("expected the body to take the carried value and the step (tensor<1xi32>)");
  auto y = dyn_cast<YieldOp>(body.getTerminator());
  if (!y || y.getValues().size() != 2 || !isStep(y.getValues()[0]) ||
      y.getValues()[1].getType() != c)
    return emitOpError("expected the body to yield a flag (tensor<1xi32>) and the next carried value");
  if (getResult().getType() != c) return emitOpError("expected the result to have the carried type");
  return success();
}

LogicalResult ActInitOp::verify() { return expectCarry(*this, getResult(), ty(getX())); }

// ACT (kiln-unroll-act unrolls a differentiated entry's kiln.recurrent into these). The carry
// [L, 2d+4] holds the state, the weighted output, h, r, n and the steps run: the first state is columns [0, d)
// of act_init's result, a step's input reads them, hidden and ponder (n + r) are columns.
LogicalResult ActInitOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(SliceOp::create(b, getLoc(), getX().getType(), g[0], b.getI64IntegerAttr(1), b.getI64IntegerAttr(0)));
  return success();
}

LogicalResult ActInputOp::verify() {
  if (getPositions().getType() != getResult().getType()) return emitOpError("expected the positions to have the result's type");
  if (failed(expectStep(*this, getStep(), "step"))) return failure();
  return expectCarry(*this, getCarry(), ty(getResult()));
}

OpCost ActInputOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 2); }

LogicalResult ActInputOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(PadOp::create(b, getLoc(), getCarry().getType(), g[0], getCarry(), b.getI64IntegerAttr(1), b.getI64IntegerAttr(0)));
  out.push_back(Value());  // the position signal: fixed
  out.push_back(Value());  // the step
  return success();
}

LogicalResult ActUpdateOp::verify() {
  auto x = ty(getX());
  if (getY().getType() != x) return emitOpError("expected the step's output to have its input's type");
  if (getCarry().getType() != getResult().getType()) return emitOpError("expected the result to have the carry's type");
  if (failed(expectStep(*this, getStep(), "step")) || failed(expectCarry(*this, getCarry(), x))) return failure();
  if (getHaltWeight().getType() != RankedTensorType::get({x.getDimSize(1)}, x.getElementType()) ||
      getHaltBias().getType() != RankedTensorType::get({1}, x.getElementType()))
    return emitOpError("expected the halting weight [d] and bias [1]");
  float th = getThreshold().convertToFloat();
  if (!(th > 0.0f && th < 1.0f) || getMaxSteps() < 1) return emitOpError("expected a threshold in (0, 1) and max_steps >= 1");
  return success();
}

void ActUpdateOp::getKernelAttrs(KernelAttrs &a) {
  a.set("max_steps", (int64_t)getMaxSteps());
  a.setFloat("threshold", getThreshold().convertToFloat());
}

// The halting dot product, then 3 FLOPs per state entry.
OpCost ActUpdateOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 5 * numel(getX());
  return c;
}

// The update count n and each step's halting decision are constants (Graves 2016): gradients
// flow through the halting probabilities and the remainder only. kiln.act_update_grad reads
// the decisions from the carry and the result.
LogicalResult ActUpdateOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  // carry, x, y, halt_weight, halt_bias: operands 0 to 4, each gradient of its operand's type.
  for (ActGradWrt w : {ActGradWrt::carry, ActGradWrt::x, ActGradWrt::y, ActGradWrt::halt_weight, ActGradWrt::halt_bias})
    out.push_back(ActUpdateGradOp::create(b, loc, getOperand((unsigned)w).getType(), getCarry(), getResult(), getX(), getY(),
                                          getHaltWeight(), getHaltBias(), g[0], ActGradWrtAttr::get(b.getContext(), w)));
  out.push_back(Value());  // the step
  return success();
}

LogicalResult ActUpdateGradOp::verify() {
  auto x = ty(getX());
  if (getY().getType() != x) return emitOpError("expected y to have x's type");
  if (failed(expectCarry(*this, getCarry(), x))) return failure();
  if (getNext().getType() != getCarry().getType() || getGrad().getType() != getCarry().getType())
    return emitOpError("expected next and grad to have the carry's type");
  if (getHaltWeight().getType() != RankedTensorType::get({x.getDimSize(1)}, x.getElementType()) ||
      getHaltBias().getType() != RankedTensorType::get({1}, x.getElementType()))
    return emitOpError("expected the halting weight [d] and bias [1]");
  RankedTensorType want;
  switch (getWrt()) {
    case ActGradWrt::carry: want = ty(getCarry()); break;
    case ActGradWrt::x:
    case ActGradWrt::y: want = x; break;
    case ActGradWrt::halt_weight: want = ty(getHaltWeight()); break;
    case ActGradWrt::halt_bias: want = ty(getHaltBias()); break;
  }
  if (ty(getResult()) != want) return emitOpError("expected the result to be ") << want << ", got " << getType();
  return success();
}

void ActUpdateGradOp::getKernelAttrs(KernelAttrs &a) { a.set("wrt", stringifyActGradWrt(getWrt())); }

Syms ActUpdateGradOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(ty(getResult()).getRank());
  ActGradWrt w = getWrt();
  if (w == ActGradWrt::carry || w == ActGradWrt::x || w == ActGradWrt::y) r[0] = in[0][0];  // [L, ...]; the halting's are static
  return r;
}

OpCost ActUpdateGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 6 * numel(getX());
  return c;
}

LogicalResult ActRunningOp::verify() {
  auto c = ty(getCarry());
  if (c.getRank() != 2 || ShapedType::isDynamic(c.getDimSize(1)) || (c.getDimSize(1) - 4) % 2 || c.getDimSize(1) < 6)
    return emitOpError("expected an ACT carry [L, 2d + 4]");
  return expectStep(*this, getResult(), "result");
}

Syms ActRunningOp::inferSeqLengths(ArrayRef<Syms>) { return {-1}; }

LogicalResult ActOutputOp::verify() {
  auto c = ty(getCarry()), r = ty(getResult());
  if (c.getRank() != 2 || ShapedType::isDynamic(c.getDimSize(1)) || (c.getDimSize(1) - 4) % 2 || c.getDimSize(1) < 6)
    return emitOpError("expected an ACT carry [L, 2d + 4]");
  int64_t d = (c.getDimSize(1) - 4) / 2;
  Type f32 = Float32Type::get(getContext()), i32 = IntegerType::get(getContext(), 32);
  RankedTensorType want;
  switch (getField()) {
    case ActField::hidden: want = RankedTensorType::get({c.getDimSize(0), d}, f32); break;
    case ActField::ponder: want = RankedTensorType::get({c.getDimSize(0)}, f32); break;
    case ActField::steps: want = RankedTensorType::get({c.getDimSize(0)}, i32); break;
    case ActField::iterations: want = RankedTensorType::get({1}, i32); break;
  }
  if (r != want)
    return emitOpError("expected the ") << stringifyActField(getField()) << " result to be " << want << ", got " << r;
  return success();
}

void ActOutputOp::getKernelAttrs(KernelAttrs &a) { a.set("field", stringifyActField(getField())); }

Syms ActOutputOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(ty(getResult()).getRank());
  if (getField() != ActField::iterations) r[0] = in[0][0];  // [L, ...]; the loop's count is [1]
  return r;
}

LogicalResult ActOutputOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  ActField f = getField();
  if (f == ActField::steps || f == ActField::iterations) return emitOpError("gradient: the step counts are integers");
  Location loc = getLoc();
  auto ct = cast<RankedTensorType>(getCarry().getType());
  int64_t d = (ct.getDimSize(1) - 4) / 2;
  Value col = g[0];
  if (f == ActField::ponder)  // n + r: the remainder's column; n is a constant
    col = ReshapeOp::create(b, loc, RankedTensorType::get({ct.getDimSize(0), 1}, ct.getElementType()), g[0]);
  out.push_back(PadOp::create(b, loc, ct, col, getCarry(), b.getI64IntegerAttr(1),
                              b.getI64IntegerAttr(f == ActField::hidden ? d : 2 * d + 1)));
  return success();
}
