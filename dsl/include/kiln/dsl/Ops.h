// kiln/dsl/Ops.h - kiln's ops. Each takes tensors plus a small option struct and checks shapes.
//
//   auto h = kiln::linear(x, w, b, {.layout = kiln::WeightLayout::InOut});
//   auto a = kiln::attention(q, k, v, {.mask = kiln::Mask::causal()});
//
// Layout conventions: activations are [L, d] (rows are positions); attention works on heads as
// [H, L, head_dim]; linear weights are [out, in] (OutIn, x·Wᵀ) or [in, out] (InOut, x·W).
#pragma once
#include <optional>

#include "kiln/dsl/Model.h"

namespace kiln {

Tensor embedding(Tensor table, Tensor ids, SourceLoc loc = SourceLoc::current());
// The fixed sinusoidal encoding of "Attention Is All You Need" for positions [0, L), L taken
// from `like`'s first dim: pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(same). No weights.
struct PositionOptions {
  Tensor start;  // [1] i32: positions [start, start + L) (a decode step); none: from 0
};
Tensor sinusoidal_positions(Tensor like, int64_t d, PositionOptions opt = {}, SourceLoc loc = SourceLoc::current());
// Rows [0, L) of `table` where L is the length of `like`'s first dimension (learned positions);
// with opt.start, rows [start, start + L) (a chunk appended to a KV cache at `past`).
Tensor position_embedding(Tensor table, Tensor like, PositionOptions opt = {}, SourceLoc loc = SourceLoc::current());

// Rotary positions (RoFormer; Llama and its relatives) on a head-split q or k: x [H, L, hd]
// (hd even). Row p of each head is at position p (past + p with `past`, a [1] i32: a decode
// step, or a chunk appended to a cache); pair i turns by the angle pos · theta^(-2i/hd) /
// scaling (linear position scaling; 1: none). Llama 3.1's scaling (config.json's rope_type
// llama3) instead: original_context > 0 with low and high frequency factors, `scaling` its factor
// (pairs of short wavelengths unscaled, long ones divided by it, those between blended).
struct RopeOptions {
  float theta = 10000.0f;
  RopeStyle style = RopeStyle::HalfSplit;
  float scaling = 1.0f;
  Tensor past;
  int64_t original_context = 0;
  float low_freq_factor = 0, high_freq_factor = 0;
};
Tensor rope(Tensor x, RopeOptions opt = {}, SourceLoc loc = SourceLoc::current());

struct LinearOptions {
  WeightLayout layout = WeightLayout::OutIn;
};
Tensor linear(Tensor x, Tensor w, LinearOptions opt = {}, SourceLoc loc = SourceLoc::current());
Tensor linear(Tensor x, Tensor w, Tensor bias, LinearOptions opt = {}, SourceLoc loc = SourceLoc::current());

struct MatMulOptions {
  bool transpose_b = false;
};
Tensor matmul(Tensor a, Tensor b, MatMulOptions opt = {}, SourceLoc loc = SourceLoc::current());
Tensor batch_matmul(Tensor a, Tensor b, MatMulOptions opt = {}, SourceLoc loc = SourceLoc::current());

// Elementwise; `b` may have fewer dims than `a` and is then broadcast over a's leading dims.
Tensor add(Tensor a, Tensor b, SourceLoc loc = SourceLoc::current());
Tensor mul(Tensor a, Tensor b, SourceLoc loc = SourceLoc::current());
Tensor scale(Tensor x, float factor, SourceLoc loc = SourceLoc::current());

struct GeluOptions {
  GeluApprox approx = GeluApprox::Erf;
};
Tensor gelu(Tensor x, GeluOptions opt = {}, SourceLoc loc = SourceLoc::current());
Tensor relu(Tensor x, SourceLoc loc = SourceLoc::current());
Tensor silu(Tensor x, SourceLoc loc = SourceLoc::current());  // x·sigmoid(x) (SiLU, Swish)
Tensor softmax(Tensor x, SourceLoc loc = SourceLoc::current());  // over the last dim

struct LayerNormOptions {
  float eps = 1e-5f;
};
Tensor layer_norm(Tensor x, Tensor gamma, Tensor beta, LayerNormOptions opt = {},
                  SourceLoc loc = SourceLoc::current());
// RMSNorm over the last dim (Llama and its relatives): x / sqrt(mean(x²) + eps) · weight, no
// mean subtracted and no bias. x [..., d], weight [d].
struct RmsNormOptions {
  float eps = 1e-6f;
};
Tensor rms_norm(Tensor x, Tensor weight, RmsNormOptions opt = {}, SourceLoc loc = SourceLoc::current());

// Each row over its L2 norm, x / max(||x||₂, eps) over the last dim (a sentence embedding
// normalized). Forward only.
struct L2NormalizeOptions {
  float eps = 1e-12f;
};
Tensor l2_normalize(Tensor x, L2NormalizeOptions opt = {}, SourceLoc loc = SourceLoc::current());
// The mean of each sequence's rows: x [N, d] -> [B, d] over a batch's rows (Model::rows: a row per
// sequence), or [1, d] for one sequence. With `mask` ([N] i32, 0 where a row is padding) only the
// rows it keeps count (sentence-transformers' mean pooling); a sequence with none gives zeros.
// Forward only.
struct MeanPoolOptions {
  Tensor mask;
};
Tensor mean_pool(Tensor x, MeanPoolOptions opt = {}, SourceLoc loc = SourceLoc::current());

Tensor reshape(Tensor x, Shape shape, SourceLoc loc = SourceLoc::current());
Tensor transpose(Tensor x, std::vector<int64_t> perm, SourceLoc loc = SourceLoc::current());
// [L, H*hd] -> [H, L, hd] and back.
Tensor split_heads(Tensor x, int64_t heads, SourceLoc loc = SourceLoc::current());
Tensor merge_heads(Tensor x, SourceLoc loc = SourceLoc::current());
Tensor concat(std::vector<Tensor> xs, int64_t axis, SourceLoc loc = SourceLoc::current());
Tensor slice(Tensor x, int64_t axis, int64_t offset, int64_t size, SourceLoc loc = SourceLoc::current());
std::vector<Tensor> split(Tensor x, int64_t axis, std::vector<int64_t> sizes, SourceLoc loc = SourceLoc::current());
// The last element along `axis` (a sequence length too), the axis kept with size 1: a prompt's
// last row, whose logits start generation.
Tensor last(Tensor x, int64_t axis, SourceLoc loc = SourceLoc::current());

struct AttentionOptions {
  Mask mask;
  std::optional<float> scale;  // default 1/sqrt(head_dim)
  // Attention over a cache: `past` ([1] i32) positions precede the Lq queries; only the first
  // past + Lq keys are valid, and causal query i sees keys j <= past + i (Mask::window(w):
  // past + i - w < j <= past + i, a sliding window over the cache; no other pattern takes a past).
  Tensor past;
  // Attention over a cache another entry filled (cross-attention while decoding): only the first
  // `key_count` ([1] i32) keys are valid. Give `past` or `key_count`, not both.
  Tensor key_count;
  // A padded batch (BERT's attention_mask): key_mask [Lk] i32 over the keys' rows, 0 where a key
  // is padding, hidden from every query. Over a batch's rows, each sequence reads its own part.
  Tensor key_mask;
  // Different patterns for different heads: head h of H uses head_masks[h * n / H] (n masks,
  // H a multiple of n; contiguous groups of heads). `mask` must then be none.
  std::vector<Mask> head_masks;
};
// q [H, Lq, hd], k [H, Lk, hd], v [H, Lk, hv] -> [H, Lq, hv]: softmax(q·kᵀ·scale + mask)·v.
// Grouped-query attention: k and v may have Hkv heads, Hkv dividing H; query head h reads key
// and value head h / (H / Hkv) (masks none, causal and window; a window over grouped heads runs
// as row strips and has no gradient yet).
Tensor attention(Tensor q, Tensor k, Tensor v, AttentionOptions opt = {}, SourceLoc loc = SourceLoc::current());
// The Reformer's LSH attention. qk [H, L, d] serves as queries and, unit-normalized, as keys
// (shared QK); v [H, L, dv]; rotations [hashes, d, buckets / 2], a parameter (random normal
// by default, saved and loaded like any weight). Per round: bucket = argmax([x·R; -x·R]),
// positions sorted by (bucket, position) in linear time, the sorted sequence cut into chunks;
// a query sees the keys of its bucket in its chunk and the previous one (causal: not after
// it), itself only when nothing else. Rounds are combined by their log-sum-exp weights.
struct LshOptions {
  int64_t buckets = 32;
  int64_t hashes = 2;
  int64_t chunk = 64;
  bool causal = false;
  std::optional<float> scale;  // default 1/sqrt(d)
};
Tensor lsh_attention(Tensor qk, Tensor v, Tensor rotations, LshOptions opt = {}, SourceLoc loc = SourceLoc::current());

// The mean over positions of -log softmax(logits)[target]: logits [N, V], targets [N] i32 ->
// [1]. Positions whose target is `ignore_index` count neither in the sum nor in the mean (a
// loss of 0 when none is left). Fused: the probabilities are never stored.
struct CrossEntropyOptions {
  int64_t ignore_index = -1;
};
Tensor cross_entropy(Tensor logits, Tensor targets, CrossEntropyOptions opt = {}, SourceLoc loc = SourceLoc::current());

// The mean of every element of an f32 tensor (of any rank): -> [1]. A loss term such as the
// ponder cost of a recurrent (recurrent() adds that one itself).
Tensor mean(Tensor x, SourceLoc loc = SourceLoc::current());

// A convolution over the sequence with one filter per feature: x [L, d], w [k, d] (k odd),
// b [d] -> [L, d]; result[i, c] = b[c] + sum_t w[t, c] * x[i + t - s, c], zero outside
// [0, L), s = (k - 1) / 2 (centered), or k - 1 with `causal` (row i reads rows i - k + 1 to i,
// as a decoder must). Followed by a pointwise linear it is a depthwise-separable convolution.
struct DepthwiseConvOptions {
  bool causal = false;
};
Tensor depthwise_conv(Tensor x, Tensor w, Tensor b, DepthwiseConvOptions opt = {}, SourceLoc loc = SourceLoc::current());

// Writes `value` [H, n, d] into rows [past, past + n) of the state `cache` [H, ctx, d] (past:
// a [1] i32 tensor, or none for 0) and returns the updated cache for attention to read.
Tensor cache_write(Tensor cache, Tensor value, Tensor past = Tensor(), SourceLoc loc = SourceLoc::current());

// The additive mask of `mask` for attention scores [..., Lq, Lk]: 0 where query i may see key j,
// -inf elsewhere. `add(scores, mask_for(scores, Mask::causal()))` before a softmax is what
// kiln-fuse-attention recognizes.
Tensor mask_for(Tensor scores, Mask mask, SourceLoc loc = SourceLoc::current());

}  // namespace kiln
