// KilnInterfaces.h - the types of the per-op hooks (KilnInterfaces.td): the kernel an op
// becomes, its kernel key's attributes, sequence lengths and cost.
#pragma once
#include <map>
#include <string>

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "kiln/Dialect/KilnEnums.h"

namespace kiln {

// The kernels the code generator has, one per kiln op that becomes a kernel (the unary
// activations share one, told apart by their Activation). The registry switches over it, so a
// kernel op without generated code is a compiler warning.
enum class KernelOp {
  None,  // not a kernel: a parameter, a state, a view, the structure of a loop
  Linear,
  MatMul,
  BatchMatMul,
  Ffn,
  Attention,
  LshHash,
  LshSort,  // served by the runtime (kilnrt_kernel_lsh_sort), not generated
  LshChunkAttention,
  LayerNorm,
  Softmax,
  Add,
  Mul,
  Scale,
  Activation,  // every activation op (KilnActivationOpInterface)
  Embedding,
  PositionEmbedding,
  SinusoidalPositions,
  Transpose,
  Slice,
  Concat,
  Mask,
  CacheWrite,
  DepthwiseConv,
  ActInit,
  ActInput,
  ActUpdate,
  ActRunning,
  ActOutput,
  // Training: the loss, constants, and the backward's kernels (kiln-differentiate).
  Fill,
  CrossEntropy,
  CrossEntropyGrad,
  ReduceRows,
  Mean,
  MeanGrad,
  ActUpdateGrad,
  DepthwiseConvGrad,
  WeightGrad,
  ActivationGrad,
  LayerNormGrad,
  SoftmaxGrad,
  EmbeddingGrad,
  PositionIds,
  Pad,
  AttentionGrad,
  LshChunkAttentionGrad,
  SumSquares,
  StepCount,
  LearningRate,
  LossWeight,
  AdamWStep,
  AllReduce,  // served by the runtime (kilnrt_kernel_all_reduce), not generated
  AllReduceWait,  // the runtime's too
};

// The semantic attributes in a kernel's key, as canonical text (sorted keys).
class KernelAttrs {
 public:
  void set(llvm::StringRef key, llvm::StringRef value) { map_[key.str()] = value.str(); }
  void set(llvm::StringRef key, int64_t value) { map_[key.str()] = std::to_string(value); }
  void setBool(llvm::StringRef key, bool value) { map_[key.str()] = value ? "1" : "0"; }
  void setFloat(llvm::StringRef key, float value);  // "%.9g": every float keyed exactly
  const std::map<std::string, std::string> &entries() const { return map_; }

 private:
  std::map<std::string, std::string> map_;
};

// The sequence length of each dim of a value (-1: a static dim).
using Syms = llvm::SmallVector<int64_t, 4>;

struct OpCost {
  double flops = 0, read = 0, written = 0;  // bytes read and written
};

// The interface's default implementations.
Syms defaultSeqLengths(mlir::Operation *op, llvm::ArrayRef<Syms> operands);
OpCost defaultCost(mlir::Operation *op, llvm::function_ref<double(mlir::Value)> numel);
// Bytes per element of a tensor value (4 for f32 and i32, 2 for a bf16 weight).
double elementBytes(mlir::Value v);

}  // namespace kiln

#include "kiln/Dialect/KilnInterfaces.h.inc"
