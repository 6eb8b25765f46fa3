// kiln/dsl/Blocks.h - transformer building blocks written with kiln ops.
//
//   kiln::BlockOptions o{.d_model = 128, .heads = 4, .d_ff = 512, .mask = kiln::Mask::causal(),
//                        .norm = kiln::NormPlacement::Pre};
//   x = kiln::transformer_block(m, "h.0", x, o);
//
// Parameter names follow the prefix given ("h.0.attn.q.weight", ...); weights use the OutIn
// (nn.Linear) layout unless `layout` says otherwise.
#pragma once
#include <functional>

#include "kiln/dsl/Ops.h"

namespace kiln {

enum class NormPlacement { Pre, Post };
enum class Activation { Relu, GeluErf, GeluTanh };

// A named linear layer: "<prefix>.weight" ([out, in] for OutIn, the nn.Linear layout; [in, out]
// for InOut) and "<prefix>.bias" (zeros at start).
struct DenseOptions {
  WeightLayout layout = WeightLayout::OutIn;
};
Tensor dense(Model &m, const std::string &prefix, Tensor x, int64_t in, int64_t out, DenseOptions opt = {},
             SourceLoc loc = SourceLoc::current());
// A named layer norm over the last dim d: "<prefix>.weight" (ones) and "<prefix>.bias" (zeros).
Tensor norm(Model &m, const std::string &prefix, Tensor x, LayerNormOptions opt = {}, SourceLoc loc = SourceLoc::current());

struct AttentionBlockOptions {
  int64_t d_model = 0, heads = 0;
  Mask mask;
  WeightLayout layout = WeightLayout::OutIn;
};
// Self-attention when `kv` is x itself, cross-attention otherwise: q from x, k and v from kv.
Tensor multi_head_attention(Model &m, const std::string &prefix, Tensor x, Tensor kv, AttentionBlockOptions opt,
                            SourceLoc loc = SourceLoc::current());

struct FfnOptions {
  int64_t d_model = 0, d_ff = 0;
  Activation act = Activation::GeluErf;
  WeightLayout layout = WeightLayout::OutIn;
};
Tensor ffn(Model &m, const std::string &prefix, Tensor x, FfnOptions opt, SourceLoc loc = SourceLoc::current());

struct BlockOptions {
  int64_t d_model = 0, heads = 0, d_ff = 0;
  Mask mask;
  NormPlacement norm = NormPlacement::Pre;
  Activation act = Activation::GeluErf;
  float eps = 1e-5f;
  WeightLayout layout = WeightLayout::OutIn;
};
Tensor transformer_block(Model &m, const std::string &prefix, Tensor x, BlockOptions opt,
                         SourceLoc loc = SourceLoc::current());

// A reversible residual layer (RevNet, as the Reformer uses it). x [L, 2c] is two halves x1, x2
// of c columns; the result is [y1, y2] with y1 = x1 + F(x2), y2 = x2 + G(y1). F and G map
// [L, c] to [L, c] and may be called more than once (by reversible_inverse too): declare their
// parameters outside and capture them.
using SubLayer = std::function<Tensor(Tensor)>;
Tensor reversible(Tensor x, const SubLayer &F, const SubLayer &G, SourceLoc loc = SourceLoc::current());
// The inverse, from the output alone: x2 = y2 - G(y1), x1 = y1 - F(x2); returns [x1, x2].
Tensor reversible_inverse(Tensor y, const SubLayer &F, const SubLayer &G, SourceLoc loc = SourceLoc::current());

// The Universal Transformer's recurrence: `step` ([L, d] -> [L, d]) applied repeatedly to one
// shared set of parameters, each step's input being the state plus a position-and-timestep signal
// (sinusoids of the position and of the step number), with ACT halting (Graves): per position
// p = sigmoid(x·w + b) ("<prefix>.halt.weight" [d], "<prefix>.halt.bias" [1], init 1), summed
// until the sum would pass 1 - epsilon or max_steps is reached; that step's weight is the
// remainder. `hidden` is the halting-weighted sum of the states; a halted position stops
// updating. It compiles to one copy of the step in a loop that stops when every position halted.
// In an entry with a loss, the ponder cost ponder_weight · mean over positions of (N + R) (the
// steps taken and the remainder; tensor2tensor's act_loss_weight, Graves' τ) is added to the
// loss as the term "loss.<prefix>.ponder" (0: none). Its gradient flows through the halting
// probabilities and the remainders; the step counts N are constants. Such an entry, when
// differentiated, runs all max_steps steps (kiln-unroll-act), keeping each one's activations.
struct ActOptions {
  float epsilon = 0.01f;
  float ponder_weight = 0.01f;
};
struct RecurrentOptions {
  int64_t max_steps = 0;
  ActOptions act;
};
struct Recurrent {
  Tensor hidden;  // [L, d]
  Tensor ponder;  // [L]: steps taken + the remainder (the ACT ponder cost)
  Tensor steps;   // [L] i32: steps each position took
  Tensor iterations;  // [1] i32: steps the loop ran (the largest of `steps` unless it ran past them)
};
Recurrent recurrent(Model &m, const std::string &prefix, Tensor x, const SubLayer &step, RecurrentOptions opt,
                    SourceLoc loc = SourceLoc::current());

// The Universal Transformer's shared block (post-norm): h = norm(x + attention(x)), then
// norm(h + transition(h)). The transition is the FFN (relu) or a depthwise-separable convolution
// over the sequence: depthwise (kernel `kernel`) + pointwise to d_ff, relu, pointwise back to d.
enum class Transition { Ffn, SepConv };
struct UniversalBlockOptions {
  int64_t d_model = 0, heads = 0, d_ff = 0;
  Transition transition = Transition::Ffn;
  int64_t kernel = 3;
  Mask mask;
  float eps = 1e-5f;
};
Tensor universal_block(Model &m, const std::string &prefix, Tensor x, UniversalBlockOptions opt,
                       SourceLoc loc = SourceLoc::current());

}  // namespace kiln
