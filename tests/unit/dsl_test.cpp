// DSL unit tests: building models, and every shape error with its message and the user's line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness.h"
#include "kiln/dsl/Blocks.h"

using namespace kiln;
using ::testing::HasSubstr;

struct DslTest : ::testing::Test {
  Model m{"t"};
  Dim L = m.seq("L", 16);
  Dim S = m.seq("S", 8);
  Tensor x = m.input("x", {L, 32});
};

TEST_F(DslTest, LinearInFeaturesOutIn) {
  Tensor w = m.param("w", {64, 16});
  EXPECT_KILN_ERROR(linear(x, w),
                    "linear: the input's last dim (in-features) is 32 but the weight's in-features (weight dim 1, layout "
                    "OutIn) is 16; they must be equal");
}
TEST_F(DslTest, LinearInFeaturesInOut) {
  Tensor w = m.param("w", {16, 64});
  EXPECT_KILN_ERROR(linear(x, w, {.layout = WeightLayout::InOut}),
                    "the input's last dim (in-features) is 32 but the weight's in-features (weight dim 0, layout InOut) is 16");
}
TEST_F(DslTest, LinearBiasLength) {
  Tensor w = m.param("w", {64, 32}), b = m.param("b", {63});
  EXPECT_KILN_ERROR(linear(x, w, b), "linear: the bias length is 63 but the weight's out-features is 64");
}
TEST_F(DslTest, LinearShapes) {
  Tensor y = linear(x, m.param("w", {64, 32}), m.param("b", {64}));
  EXPECT_EQ(y.rank(), 2);
  EXPECT_TRUE(y.dim(0) == L);
  EXPECT_EQ(y.dim(1).size, 64);
  Tensor z = linear(y, m.param("w2", {64, 8}), {.layout = WeightLayout::InOut});
  EXPECT_EQ(z.dim(1).size, 8);
}
TEST_F(DslTest, MatmulInnerDims) {
  Tensor b = m.input("b", {16, 4});
  EXPECT_KILN_ERROR(matmul(x, b), "matmul: the left operand's columns is 32 but the right operand's rows is 16");
}
TEST_F(DslTest, BatchMatmulBatch) {
  Tensor a = m.input("a", {4, L, 8}), b = m.input("b", {3, L, 8});
  EXPECT_KILN_ERROR(batch_matmul(a, b, {.transpose_b = true}),
                    "batch_matmul: the left operand's batch is 4 but the right operand's batch is 3");
  Tensor c = m.input("c", {4, L, 8});
  Tensor s = batch_matmul(a, c, {.transpose_b = true});
  EXPECT_TRUE(s.dim(1) == L && s.dim(2) == L);
}
TEST_F(DslTest, AddShapes) {
  Tensor y = m.input("y", {L, 31});
  EXPECT_KILN_ERROR(add(x, y), "add: the left operand [L(<=16), 32] and the right operand [L(<=16), 31] differ in dim 1");
  Tensor z = m.input("z", {S, 32});
  EXPECT_KILN_ERROR(add(x, z), "differ in dim 0: L(<=16) vs S(<=8)");
  EXPECT_KILN_ERROR(mul(m.param("p", {32}), x), "mul: the right operand [L(<=16), 32] has more dims than the left");
}
TEST_F(DslTest, LayerNormGamma) {
  EXPECT_KILN_ERROR(layer_norm(x, m.param("g", {31}), m.param("b", {32})),
                    "layer_norm: the input's last dim is 32 but the gamma length is 31");
  EXPECT_KILN_ERROR(layer_norm(x, m.param("g2", {32}), m.param("b2", {32}), {.eps = -1}), "eps must be positive");
}
TEST_F(DslTest, AttentionHeadDim) {
  Tensor q = m.input("q", {4, L, 16}), k = m.input("k", {4, S, 8}), v = m.input("v", {4, S, 8});
  EXPECT_KILN_ERROR(attention(q, k, v), "attention: the query head dim is 16 but the key head dim is 8");
}
TEST_F(DslTest, AttentionKeyValueLength) {
  Tensor q = m.input("q", {4, L, 8}), k = m.input("k", {4, S, 8}), v = m.input("v", {4, L, 8});
  EXPECT_KILN_ERROR(attention(q, k, v), "attention: the key length is S(<=8) but the value length is L(<=16)");
}
// Grouped-query attention: key heads may divide the query heads (4 over 2 builds), not otherwise;
// with fewer key heads, masks none, causal and window only. A window takes a past (a cache).
TEST_F(DslTest, AttentionHeads) {
  Tensor q = m.input("q", {4, L, 8}), k = m.input("k", {2, L, 8}), k3 = m.input("k3", {3, L, 8});
  EXPECT_NO_THROW(attention(q, k, k, {.mask = Mask::causal()}));
  EXPECT_NO_THROW(attention(q, k, k, {.mask = Mask::window(4)}));
  EXPECT_KILN_ERROR(attention(q, k3, k3), "attention: the key heads (3) must equal or divide the query heads (4)");
  EXPECT_KILN_ERROR(attention(q, k, k, {.mask = Mask::strided({.stride = 4})}),
                    "grouped-query attention (4 query heads, 2 key heads) takes masks none, causal and window only");
  Tensor past = m.input("past", {1}, {.dtype = DType::I32, .vocab = 16});
  Tensor cache = m.input("cache", {2, 16, 8});
  EXPECT_NO_THROW(attention(q, cache, cache, {.mask = Mask::window(4), .past = past}));
  Tensor cache4 = m.input("cache4", {4, 16, 8});
  EXPECT_KILN_ERROR(attention(q, cache4, cache4, {.mask = Mask::strided({.stride = 4}), .past = past}),
                    "sparse patterns other than window do not combine with past, key_count or key_mask");
}
TEST_F(DslTest, EmbeddingNeedsIds) {
  Tensor table = m.param("t", {10, 32});
  Tensor f = m.input("f", {L});
  EXPECT_KILN_ERROR(embedding(table, f), "embedding: the ids must be i32 token ids");
  Tensor ids = m.tokens("ids", L, 11);
  EXPECT_KILN_ERROR(embedding(table, ids), "the ids' vocab (input 'ids') is 11 but the table has only 10 rows");
}
TEST_F(DslTest, PositionTableTooShort) {
  EXPECT_KILN_ERROR(position_embedding(m.param("pos", {8, 32}), x),
                    "position_embedding: the sequence (L(<=16)) can be longer than the table's 8 positions");
}
TEST_F(DslTest, ReshapeAndTranspose) {
  EXPECT_KILN_ERROR(reshape(x, {L, 4, 7}), "reshape: cannot reshape [L(<=16), 32] to [L(<=16), 4, 7]");
  EXPECT_KILN_ERROR(transpose(x, {0, 0}), "transpose: the permutation is not a permutation of 0..1");
  EXPECT_KILN_ERROR(split_heads(x, 5), "split_heads: the model width 32 is not divisible by the 5 heads");
  Tensor h = split_heads(x, 4);
  EXPECT_EQ(h.dim(0).size, 4);
  EXPECT_TRUE(h.dim(1) == L);
  Tensor back = merge_heads(h);
  EXPECT_TRUE(back.dim(0) == L);
  EXPECT_EQ(back.dim(1).size, 32);
}
TEST_F(DslTest, ConcatAndSplit) {
  Tensor y = m.input("y", {S, 8});
  EXPECT_KILN_ERROR(concat({x, y}, 1), "concat: operand 0's dim 0 is L(<=16) but operand 1's dim 0 is S(<=8)");
  EXPECT_KILN_ERROR(concat({x, x}, 0), "cannot concatenate along a sequence length");
  EXPECT_KILN_ERROR(split(x, 1, {16, 8}), "split: the sizes add up to 24");
  auto parts = split(x, 1, {8, 24});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].dim(1).size, 24);
  EXPECT_EQ(concat(parts, 1).dim(1).size, 32);
}
TEST_F(DslTest, NamesAndBounds) {
  m.param("w", {4});
  EXPECT_KILN_ERROR(m.param("w", {4}), "param: the name 'w' is already used");
  EXPECT_KILN_ERROR(m.input("x", {L}), "input: the name 'x' is already used");
  EXPECT_KILN_ERROR(m.seq("Z", 0), "seq: the bound of 'Z' must be at least 1");
  EXPECT_KILN_ERROR(m.param("dyn", {L, 4}), "parameters must have static shapes");
  EXPECT_KILN_ERROR(m.input("bad", {L, 0}), "dimensions must be positive");
}
TEST_F(DslTest, OperandsFromAnotherModel) {
  Model other("o");
  Tensor w = other.param("w", {8, 32});
  EXPECT_KILN_ERROR(linear(x, w), "operands come from different models");
}
TEST_F(DslTest, BlocksBuildTheExpectedGraph) {
  Tensor y = transformer_block(m, "h.0", x, {.d_model = 32, .heads = 4, .d_ff = 64, .mask = Mask::causal()});
  EXPECT_TRUE(y.dim(0) == L);
  EXPECT_EQ(y.dim(1).size, 32);
  int params = 0, attn = 0;
  for (const Node &n : m.nodes()) {
    params += n.kind == OpKind::Param;
    attn += n.kind == OpKind::Attention;
    if (n.kind == OpKind::Attention) {
      EXPECT_EQ(n.mask.kind, Mask::Causal);
    }
  }
  EXPECT_EQ(params, 16);  // 2 norms x 2 + 4 projections x 2 + 2 FFN linears x 2
  EXPECT_EQ(attn, 1);
  EXPECT_KILN_ERROR(multi_head_attention(m, "a", x, x, {.d_model = 32, .heads = 5}),
                    "d_model (32) must be a positive multiple of heads (5)");
}
TEST(DslOpNames, EveryKindHasAName) {
  for (int i = 0; i < (int)OpKind::Count; ++i) EXPECT_STRNE(op_name((OpKind)i), "");
  EXPECT_STREQ(op_name(OpKind::Attention), "attention");
}

// Entry points share inputs by name (the same shape and options), as they share parameters.
TEST_F(DslTest, InputsSharedBetweenEntries) {
  m.output("y", relu(x));
  m.entry("other");
  Tensor x2 = m.input("x", {L, 32});
  EXPECT_EQ(x2.node().name, "x");
  EXPECT_KILN_ERROR(m.input("x", {L, 32}), "the name 'x' is already used in this entry");
  m.entry("third");
  EXPECT_KILN_ERROR(m.input("x", {L, 16}), "is shared between entries but has shape");
  EXPECT_KILN_ERROR(m.input("x", {L, 32}, {.dtype = DType::I32, .vocab = 5}), "its options differ from entry 'forward'");
}
TEST_F(DslTest, AttentionKeyCountAndStartPositions) {
  Tensor q = m.input("q", {2, 1, 8}), k = m.input("k", {2, 8, 8});
  Tensor n = m.input("n", {1}, {.dtype = DType::I32, .vocab = 9}), f = m.input("f", {1});
  EXPECT_EQ(attention(q, k, k, {.key_count = n}).dim(1).size, 1);
  EXPECT_KILN_ERROR(attention(q, k, k, {.past = n, .key_count = n}), "give past or key_count, not both");
  EXPECT_KILN_ERROR(attention(q, k, k, {.key_count = f}), "key_count must be a [1] i32 tensor");
  Tensor t = m.tokens("t", 1, 10);
  EXPECT_EQ(sinusoidal_positions(t, 8, {.start = n}).dim(1).size, 8);
  EXPECT_KILN_ERROR(sinusoidal_positions(t, 8, {.start = f}), "start must be a [1] i32 tensor");
}

TEST_F(DslTest, SparsePatternErrors) {
  Tensor q = m.input("q", {2, L, 8}), k = m.input("k", {2, S, 8});
  EXPECT_KILN_ERROR(attention(q, k, k, {.mask = Mask::window(4)}), "the query length is L(<=16) but the key length");
  EXPECT_KILN_ERROR(attention(q, q, q, {.mask = Mask::strided({.stride = 0})}), "the stride must be at least 1, got 0");
  EXPECT_KILN_ERROR(attention(q, q, q, {.mask = Mask::fixed({.block = 4, .summary = 5})}),
                    "summary positions per block must lie in [1, block = 4], got 5");
  EXPECT_KILN_ERROR(attention(q, q, q, {.mask = Mask::block_layout({.block = 4, .rows = {"#.", "##"}})}),
                    "the block layout covers 2 blocks x 4 = 8 positions but the query length L(<=16) can reach 16");
  EXPECT_KILN_ERROR(attention(q, q, q, {.mask = Mask::block_layout({.block = 8, .rows = {"#.", "#"}})}),
                    "block layout row 1 is '#': every row must have 2 characters");
  EXPECT_KILN_ERROR(attention(q, q, q, {.head_masks = {Mask::window(2), Mask::window(3), Mask::window(4)}}),
                    "head_masks has 3 masks but the 2 heads do not split into that many groups");
  EXPECT_KILN_ERROR(attention(q, q, q, {.mask = Mask::causal(), .head_masks = {Mask::window(2)}}), "give mask or head_masks");
  Tensor y = attention(q, q, q, {.head_masks = {Mask::window(2), Mask::strided({.stride = 4})}});
  EXPECT_EQ(y.dim(0).size, 2);
}

TEST_F(DslTest, LshAttentionErrors) {
  Tensor q = m.input("q", {2, L, 8}), v = m.input("v", {2, L, 8});
  Tensor rot = m.param("rot", {2, 8, 4});
  EXPECT_EQ(lsh_attention(q, v, rot, {.buckets = 8, .hashes = 2}).dim(2).size, 8);
  EXPECT_KILN_ERROR(lsh_attention(q, v, rot, {.buckets = 7, .hashes = 2}), "buckets must be an even number, at least 2, got 7");
  EXPECT_KILN_ERROR(lsh_attention(q, v, rot, {.buckets = 6, .hashes = 2}),
                    "the rotations' columns (dim 2) is 4 but buckets / 2 is 3");
  EXPECT_KILN_ERROR(lsh_attention(q, v, rot, {.buckets = 8, .hashes = 3}), "the rotations' rounds (dim 0) is 2 but hashes is 3");
  EXPECT_KILN_ERROR(lsh_attention(q, v, rot, {.buckets = 8, .hashes = 2, .chunk = 0}), "chunk must be at least 1, got 0");
}
TEST_F(DslTest, ReversibleErrors) {
  Tensor w = m.param("w", {16, 16}), w2 = m.param("w2", {8, 16});
  SubLayer F = [&](Tensor h) { return linear(h, w); }, bad = [&](Tensor h) { return linear(h, w2); };
  Tensor y = reversible(x, F, F);  // x [L, 32]: halves of 16
  EXPECT_EQ(y.dim(1).size, 32);
  EXPECT_EQ(reversible_inverse(y, F, F).dim(1).size, 32);
  EXPECT_KILN_ERROR(reversible(x, F, bad), "reversible: G must map [L, c] to [L, c] (c = 16)");
  Tensor odd = m.input("odd", {L, 33});
  EXPECT_KILN_ERROR(reversible(odd, F, F), "the input must be [L, 2c] with an even, static column count");
}

TEST_F(DslTest, RecurrentErrors) {
  Tensor inner;
  auto step = [&](Tensor s) { return inner = relu(s); };
  Recurrent r = recurrent(m, "u", x, step, {.max_steps = 3});
  EXPECT_EQ(r.hidden.dim(1).size, 32);
  EXPECT_EQ(r.steps.dtype(), DType::I32);
  EXPECT_EQ(r.ponder.dim(0), L);
  EXPECT_EQ(r.iterations.dtype(), DType::I32);
  EXPECT_EQ(r.iterations.rank(), 1);
  EXPECT_EQ(r.iterations.dim(0).size, 1);
  EXPECT_KILN_ERROR(add(inner, x), "an operand was made inside a recurrent step and is used outside it");
  EXPECT_KILN_ERROR(m.output("o", inner), "the tensor was made inside a recurrent step");
  EXPECT_KILN_ERROR(recurrent(m, "v", x, [&](Tensor s) { return slice(s, 1, 0, 16); }, {.max_steps = 3}),
                    "recurrent: the step must map the state [L(<=16), 32] to the same shape, got [L(<=16), 16]");
  EXPECT_KILN_ERROR(recurrent(m, "w1", x, step, {.max_steps = 0}), "max_steps must be 1 to 1000, got 0");
  EXPECT_KILN_ERROR(recurrent(m, "w2", x, step, {.max_steps = 2, .act = {.epsilon = 1.5f}}), "act.epsilon must be in (0, 1)");
  EXPECT_KILN_ERROR(recurrent(m, "w3", x, [&](Tensor s) { return recurrent(m, "n", s, step, {.max_steps = 2}).hidden; }, {.max_steps = 2}),
                    "a recurrent step inside another recurrent step is not supported");
  EXPECT_KILN_ERROR(recurrent(m, "w4", x, [&](Tensor) { return x; }, {.max_steps = 2}), "the step must return a tensor computed inside it");
  EXPECT_KILN_ERROR(recurrent(m, "w5", x, [&](Tensor s) { m.input("late", {L, 32}); return s; }, {.max_steps = 2}),
                    "declare inputs outside a recurrent step");
  EXPECT_KILN_ERROR(depthwise_conv(x, m.param("dw", {4, 32}), m.param("db", {32})), "the kernel size (weight dim 0) must be odd, got 4");
  EXPECT_KILN_ERROR(depthwise_conv(x, m.param("dw3", {3, 16}), m.param("db3", {32})), "the weight's width (dim 1) is 16");
}

// A state per sequence of a batch: cache_write checks that the value's rows are of that batch,
// and that one row per sequence (a batched decode step) goes to such a state.
TEST(DslState, PerSequenceCaches) {
  Model m("s");
  Dim B = m.batch("B", 3), L = m.seq("L", 8), N = m.rows(B, L);
  Tensor one = m.state("one", {2, 8, 4}), per = m.state("per", {2, 8, 4}, B);
  EXPECT_EQ(per.node().state_batch, B.sym);
  EXPECT_EQ(one.node().state_batch, -1);
  Tensor rows = m.input("x", {2, N, 4}), step = m.input("y", {2, B, 4});
  EXPECT_NO_THROW(cache_write(per, rows));
  EXPECT_NO_THROW(cache_write(per, step));
  EXPECT_NO_THROW(cache_write(cache_write(per, rows), step));
  EXPECT_KILN_ERROR(cache_write(one, step), "needs a state per sequence of it (Model::state with a batch)");
  EXPECT_KILN_ERROR(m.state("bad", {2, 8, 4}, L), "the per-sequence dim must be a batch (Model::batch)");
  m.entry("other");
  EXPECT_KILN_ERROR(m.state("per", {2, 8, 4}), "is shared between entries but is one buffer here and per sequence");
  Dim C = m.batch("C", 2), M = m.rows(C, L);
  Tensor rowsC = m.input("z", {2, M, 4});
  EXPECT_KILN_ERROR(cache_write(m.state("per", {2, 8, 4}, B), rowsC), "are not of the batch the state 'per' holds");
}
