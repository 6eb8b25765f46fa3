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

// The kernel families of the code generator: one algorithm each, with its CPU and GPU schedules
// (Codegen/Kernels/<Family>.cpp). Each op names its family in ODS (Kiln_Op's `family`); the
// registry switches over the families, so a family without generated code is a compiler
// warning (-Wswitch), and an op of an existing family adds no case anywhere.
enum class KernelFamily {
  None,     // not a kernel: a parameter, a state, a view, the structure of a loop
  Runtime,  // served by the runtime (kiln::runtimeKernel: lsh_sort, all_reduce), not generated
  Gemm,     // linear, matmul, batch_matmul
  Ffn,
  Attention,  // its engine (#kiln.schedule) picks the algorithm
  LshHash,
  LshChunkAttention,
  RowReduce,  // a reduction over each row: norms, softmax, and their input gradients
  Elementwise,
  DataMovement,
  DepthwiseConv,
  DepthwiseConvGrad,
  Act,  // the ACT bookkeeping on the carried buffer, and its gradient
  // Training: the loss, the backward's reductions, the optimizer.
  Loss,
  Mean,
  Backward,  // reductions over rows: a bias's, a weight's, a gain's, an embedding table's gradient
  AttentionGrad,
  LshChunkAttentionGrad,
  Optimizer,
};

// How kiln-tile-ops decides a kernel's tiles (Kiln_Op's `tiling`); it switches over these.
enum class Tiling {
  None,     // no decision: a serial kernel, the kernel's own column strips, or no kernel
  Rowwise,  // CPU: rows per task (about 16 KiB); GPU: threads across each row
  Gemm,
  Ffn,
  Attention,
  LshHash,
  LshChunkAttention,
  WeightGrad,
  AttentionGrad,
  LshChunkAttentionGrad,
  Loss,        // rows of losses per task
  SumSquares,  // elements per partial sum of a 1-D tensor
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
