// kiln/dsl/OpKind.h - the one list of kiln ops with a case of their own in the emitter. Adding
// one without its name fails to build. An op whose attributes are plain numbers needs neither:
// it is an OpKind::Op node naming its dialect op (Node::op) and listing its attributes.
#pragma once
#include <cstddef>

namespace kiln {

enum class OpKind {
  Input,
  Param,
  Embedding,
  PositionEmbedding,
  Linear,
  MatMul,
  BatchMatMul,
  Add,
  Mul,
  Scale,
  Gelu,
  Relu,
  Softmax,
  LayerNorm,
  Reshape,
  Transpose,
  Concat,
  Slice,
  Attention,
  Mask,
  SinusoidalPositions,
  State,
  CacheWrite,
  LshAttention,
  DepthwiseConv,
  Recurrent,
  StepInput,
  RecurrentResult,
  Silu,
  CrossEntropy,
  LossWeight,
  Mean,
  Rope,
  Op,  // a generic op: Node::op names it, Node::attrs holds its attributes
  Count
};

inline constexpr const char *kOpNames[] = {
    "input",   "param", "embedding", "position_embedding", "linear",     "matmul",  "batch_matmul",
    "add",     "mul",   "scale",     "gelu",               "relu",       "softmax", "layer_norm",
    "reshape", "transpose", "concat", "slice",             "attention",  "mask", "sinusoidal_positions", "state", "cache_write",
    "lsh_attention", "depthwise_conv", "recurrent", "step_input", "recurrent_result", "silu",
    "cross_entropy", "loss_weight", "mean", "rope", "op",
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == static_cast<size_t>(OpKind::Count),
              "every OpKind needs a name in kOpNames");

inline const char *op_name(OpKind k) { return kOpNames[static_cast<size_t>(k)]; }

}  // namespace kiln
