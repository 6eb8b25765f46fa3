// KilnInterfaces.td - the per-op hooks the passes and the code generator use, declared on each
// op (as Toy's ShapeInferenceOpInterface) instead of central switches: which kernel computes
// the op, what identifies its kernel, the sequence length of each result dim, and its cost.
#ifndef KILN_INTERFACES
#define KILN_INTERFACES

include "mlir/IR/OpBase.td"

def KilnOpInterface : OpInterface<"KilnOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    Every kiln op with a result implements it. An op that becomes a kernel names its kernel
    family (the code generator's dispatch) and its tiling class (kiln-tile-ops'), writes the attributes that identify what its
    kernel computes into the kernel's key, infers the sequence length of each result dim from
    its operands', and states its FLOPs and bytes for the cost report and the schedule.
  }];
  let methods = [
    InterfaceMethod<[{The kernel family that computes this op: KernelFamily::None for what is not
      a kernel (parameters, states, views, structure), Runtime for the runtime's kernels.}],
      "::kiln::KernelFamily", "getKernelFamily", (ins), [{}], [{ return ConcreteOp::kFamily; }]>,
    InterfaceMethod<[{How kiln-tile-ops decides the op's kernel's tiles.}],
      "::kiln::Tiling", "getTiling", (ins), [{}], [{ return ConcreteOp::kTiling; }]>,
    InterfaceMethod<[{Adds the op's semantic attributes to its kernel's key (the key also holds
      the op kind, the operand and result types and the schedule). Every attribute the kernel
      reads must be here: equal keys share one kernel.}],
      "void", "getKernelAttrs", (ins "::kiln::KernelAttrs &":$attrs), [{}], [{ (void)attrs; }]>,
    InterfaceMethod<[{The sequence length of each result dim (-1: static) from the operands'
      (one array per operand, -1 for static dims): by default operand 0's, or all static.}],
      "::kiln::Syms", "inferSeqLengths", (ins "::llvm::ArrayRef<::kiln::Syms>":$operands), [{}],
      [{ return ::kiln::defaultSeqLengths($_op.getOperation(), operands); }]>,
    InterfaceMethod<[{FLOPs and bytes moved; `numel(v)` is v's element count at the lengths
      costed. By default every operand read and the result written, no FLOPs.}],
      "::kiln::OpCost", "getCost", (ins "::llvm::function_ref<double(::mlir::Value)>":$numel), [{}],
      [{ return ::kiln::defaultCost($_op.getOperation(), numel); }]>,
    InterfaceMethod<[{The vector-Jacobian product (kiln-differentiate): given the gradient of the
      loss with respect to each result (null where no gradient flows), builds kiln ops at `b`'s
      insertion point for the gradient with respect to each operand, appended to `operandGrads`
      in operand order (null for an operand without one: token ids, positions). Failure: the op
      has no gradient rule, and kiln-differentiate reports it at the op's model line.}],
      "::mlir::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$b, "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads), [{}],
      [{ (void)b; (void)resultGrads; (void)operandGrads; return ::mlir::failure(); }]>,
  ];
}

def KilnActivationOpInterface : OpInterface<"KilnActivationOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    An elementwise activation op: the ActivationKind it applies. The activation
    kernel computes it, and kiln-fuse-epilogue folds the op into a linear's epilogue.
  }];
  let methods = [InterfaceMethod<"The activation the op applies.", "::kiln::ActivationKind", "getActivation", (ins)>];
}

#endif
