// Sparse attention patterns (kiln-tile-sparse-pattern and the block-sparse kernel) against a
// plain masked attention, at lengths that are and are not multiples of the block and stride.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "harness.h"
#include "kiln/dsl/Ops.h"

using namespace kiln;

namespace {

using Allowed = std::function<bool(int64_t i, int64_t j)>;

// softmax(q·kᵀ·scale over the allowed keys)·v per head; a row with no allowed key is zeros.
ref::T maskedAttention(const ref::T &q, const ref::T &k, const ref::T &v, const Allowed &allowed) {
  int64_t H = q.shape[0], L = q.shape[1], D = q.shape[2];
  double scale = 1.0 / std::sqrt((double)D);
  ref::T o({H, L, D});
  std::vector<double> s(L);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        s[j] = -INFINITY;
        if (!allowed(i, j)) continue;
        double dot = 0;
        for (int64_t c = 0; c < D; ++c) dot += (double)q.v[(h * L + i) * D + c] * k.v[(h * L + j) * D + c];
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < L; ++j) sum += (s[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx));
      for (int64_t c = 0; c < D; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < L; ++j) acc += s[j] * v.v[(h * L + j) * D + c];
        o.v[(h * L + i) * D + c] = (float)(sum > 0 ? acc / sum : 0.0);
      }
    }
  return o;
}

// The patterns as the Sparse Transformer paper defines them, written out plainly.
Allowed window(int64_t w) { return [=](int64_t i, int64_t j) { return j <= i && i - j < w; }; }
Allowed stridedGlobal(int64_t s) { return [=](int64_t i, int64_t j) { return j <= i && (i - j) % s == 0; }; }
Allowed fixedLocal(int64_t c) { return [=](int64_t i, int64_t j) { return j <= i && j / c == i / c; }; }
Allowed fixedGlobal(int64_t c, int64_t t) { return [=](int64_t i, int64_t j) { return j <= i && j % c >= c - t; }; }
Allowed either(Allowed a, Allowed b) { return [=](int64_t i, int64_t j) { return a(i, j) || b(i, j); }; }

struct SparseCase {
  std::string name;
  Mask mask;
  Allowed allowed;
  int64_t heads = 2, hd = 16, bound = 200;
  std::vector<int64_t> lengths = {1, 7, 64, 100, 200};
  std::vector<Mask> head_masks = {};
  std::vector<Allowed> head_allowed = {};
  float input_scale = 1.0f;  // 100: logits of about ±1e4
};

void PrintTo(const SparseCase &c, std::ostream *os) { *os << c.name; }

class SparsePatterns : public ::testing::TestWithParam<SparseCase> {};

TEST_P(SparsePatterns, MatchPlainMaskedAttention) {
  const SparseCase &c = GetParam();
  std::string dir = kt::workDir("sparse_" + c.name);
  std::string exe = kt::compile(dir, "sp", [&](Model &m) {
    Dim L = m.seq("L", c.bound);
    Tensor q = m.input("q", {c.heads, L, c.hd}), k = m.input("k", {c.heads, L, c.hd}), v = m.input("v", {c.heads, L, c.hd});
    m.output("o", attention(q, k, v, {.mask = c.mask, .head_masks = c.head_masks}));
  }, {"--dump-dir", dir + "/dump"});
  ASSERT_FALSE(exe.empty());
  for (int64_t L : c.lengths) {
    SCOPED_TRACE("L = " + std::to_string(L));
    ref::T q = kt::randomT({c.heads, L, c.hd}, 1 + (unsigned)L, c.input_scale),
           k = kt::randomT({c.heads, L, c.hd}, 2 + (unsigned)L, c.input_scale), v = kt::randomT({c.heads, L, c.hd}, 3 + (unsigned)L);
    kt::saveNpy(dir + "/q.npy", q);
    kt::saveNpy(dir + "/k.npy", k);
    kt::saveNpy(dir + "/v.npy", v);
    auto r = kt::run(exe + " --input q=" + dir + "/q.npy --input k=" + dir + "/k.npy --input v=" + dir +
                     "/v.npy --output-dir " + dir + "/out");
    ASSERT_EQ(r.code, 0) << r.output;
    ref::T want;
    if (c.head_masks.empty()) {
      want = maskedAttention(q, k, v, c.allowed);
    } else {  // head h uses head_allowed[h * n / H]
      want = ref::T({c.heads, L, c.hd});
      int64_t n = (int64_t)c.head_allowed.size(), per = c.heads / n;
      for (int64_t g = 0; g < n; ++g) {
        auto heads = [&](const ref::T &t) {
          ref::T s({per, L, c.hd});
          std::copy(t.v.begin() + g * per * L * c.hd, t.v.begin() + (g + 1) * per * L * c.hd, s.v.begin());
          return s;
        };
        ref::T o = maskedAttention(heads(q), heads(k), heads(v), c.head_allowed[g]);
        std::copy(o.v.begin(), o.v.end(), want.v.begin() + g * per * L * c.hd);
      }
    }
    EXPECT_TRUE(kt::allClose(want, kt::loadNpy(dir + "/out/o.npy")));
  }
}

std::vector<SparseCase> cases() {
  std::vector<std::string> lay = {"#............", "##...........", "#.#..........", ".#.#.........", "#...#........",
                                  "..#..#.......", ".............", "...#...#.....", "#.......#....", "....#....#...",
                                  "#.........#..", ".....#.....#.", "#...........#"};
  std::vector<std::string> full(13, std::string(13, '#'));
  full[2][5] = full[7][1] = '.';
  return {
      {"window7", Mask::window(7), window(7)},
      {"window300_longer_than_L", Mask::window(300), window(300)},
      {"strided8_local", Mask::strided({.stride = 8, .part = Part::Local}), window(8)},
      {"strided8_global", Mask::strided({.stride = 8, .part = Part::Global}), stridedGlobal(8)},
      {"strided8_union", Mask::strided({.stride = 8}), either(window(8), stridedGlobal(8))},
      {"strided13_union", Mask::strided({.stride = 13}), either(window(13), stridedGlobal(13))},
      {"strided64_union", Mask::strided({.stride = 64}), either(window(64), stridedGlobal(64))},
      {"fixed16_local", Mask::fixed({.block = 16, .summary = 2, .part = Part::Local}), fixedLocal(16)},
      {"fixed16_global", Mask::fixed({.block = 16, .summary = 2, .part = Part::Global}), fixedGlobal(16, 2)},
      {"fixed16_union", Mask::fixed({.block = 16, .summary = 2}), either(fixedLocal(16), fixedGlobal(16, 2))},
      {"fixed10_union", Mask::fixed({.block = 10, .summary = 3}), either(fixedLocal(10), fixedGlobal(10, 3))},
      // Logits of about ±1e4: the online softmax subtracts running maxima, nothing overflows.
      {"strided8_union_logits_1e4", Mask::strided({.stride = 8}), either(window(8), stridedGlobal(8)), 2, 16, 200,
       {7, 200}, {}, {}, 100.0f},
      {"layout16_causal", Mask::block_layout({.block = 16, .rows = lay}),
       [lay](int64_t i, int64_t j) { return j <= i && lay[i / 16][j / 16] == '#'; }},
      {"layout16_full", Mask::block_layout({.block = 16, .rows = full, .causal = false}),
       [full](int64_t i, int64_t j) { return full[i / 16][j / 16] == '#'; }},
      {"heads_strided", Mask::none(), nullptr, 4, 16, 200, {1, 37, 200},
       {Mask::strided({.stride = 8, .part = Part::Local}), Mask::strided({.stride = 8, .part = Part::Global})},
       {window(8), stridedGlobal(8)}},
      // Real block sizes (64) over many blocks.
      {"strided64_union_long", Mask::strided({.stride = 64}), either(window(64), stridedGlobal(64)), 2, 32, 4096,
       {1000, 4096}},
      {"fixed64_union_long", Mask::fixed({.block = 64, .summary = 8}), either(fixedLocal(64), fixedGlobal(64, 8)), 2, 32,
       4096, {1000, 4096}},
  };
}
INSTANTIATE_TEST_SUITE_P(Patterns, SparsePatterns, ::testing::ValuesIn(cases()), [](const auto &i) { return i.param.name; });

}  // namespace

namespace {
// ---------------------------------------------------------------- examples/sparse
struct SparseModelCase {
  std::string pattern, combine;
};
void PrintTo(const SparseModelCase &c, std::ostream *os) { *os << c.pattern << "_" << c.combine; }
class SparseExample : public ::testing::TestWithParam<SparseModelCase> {};

// The example's network written with the plain reference ops.
ref::T sparseReference(std::map<std::string, ref::T> &w, const std::vector<int32_t> &ids, const SparseModelCase &c,
                       int64_t layers, int64_t H, int64_t s, int64_t t) {
  Allowed local = c.pattern == "strided" ? window(s) : fixedLocal(s);
  Allowed global = c.pattern == "strided" ? stridedGlobal(s) : fixedGlobal(s, t);
  auto ln = [&](const ref::T &x, const std::string &n) { return ref::layer_norm(x, w[n + ".weight"], w[n + ".bias"], 1e-5f); };
  auto dense = [&](const ref::T &x, const std::string &n) { return ref::linear(x, w[n + ".weight"], w[n + ".bias"], true); };
  int64_t L = (int64_t)ids.size();
  ref::T x = ref::add(ref::embedding(w["tok_embed.weight"], ids), ref::rows(w["pos_embed.weight"], L));
  int64_t d = x.shape[1], hd = d / H;
  for (int64_t i = 0; i < layers; ++i) {
    std::string p = "layers." + std::to_string(i);
    ref::T qkv = dense(ln(x, p + ".ln1"), p + ".attn.qkv");
    ref::T q({L, d}), k({L, d}), v({L, d});
    for (int64_t r = 0; r < L; ++r)
      for (int64_t col = 0; col < d; ++col)
        q.at(r, col) = qkv.at(r, col), k.at(r, col) = qkv.at(r, d + col), v.at(r, col) = qkv.at(r, 2 * d + col);
    ref::T qh = ref::to_heads(q, H), kh = ref::to_heads(k, H), vh = ref::to_heads(v, H), o({H, L, hd});
    for (int64_t h = 0; h < H; ++h) {
      Allowed a = c.combine == "alternate" ? (i % 2 == 0 ? local : global)
                  : c.combine == "merged"  ? either(local, global)
                                           : (h < H / 2 ? local : global);
      auto one = [&](const ref::T &tt) {
        ref::T r({1, L, hd});
        std::copy(tt.v.begin() + h * L * hd, tt.v.begin() + (h + 1) * L * hd, r.v.begin());
        return r;
      };
      ref::T oh = maskedAttention(one(qh), one(kh), one(vh), a);
      std::copy(oh.v.begin(), oh.v.end(), o.v.begin() + h * L * hd);
    }
    x = ref::add(x, dense(ref::from_heads(o), p + ".attn.proj"));
    x = ref::add(x, dense(ref::gelu_tanh(dense(ln(x, p + ".ln2"), p + ".mlp.fc1")), p + ".mlp.fc2"));
  }
  return ref::linear(ln(x, "ln_f"), w["head.weight"], {}, true);
}

TEST_P(SparseExample, MatchesReference) {
  const SparseModelCase &c = GetParam();
  std::string dir = kt::workDir("sparse_example_" + c.pattern + "_" + c.combine), exe = dir + "/sparse";
  auto r = kt::run(std::string(KILN_BIN) + "/sparse-compile --layers 2 --d-model 64 --heads 4 --vocab 97 --ctx 300 --stride 16 "
                   "--summary 3 --pattern " + c.pattern + " --combine " + c.combine + " --quiet --cache-dir " +
                   KILN_TEST_CACHE + " -o " + exe);
  ASSERT_EQ(r.code, 0) << r.output;
  for (int L : {1, 45, 300}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    std::vector<int32_t> ids = kt::randomIds(L, 97, (unsigned)L);
    kt::saveIds(dir + "/ids.npy", ids);
    r = kt::run(exe + " --random-weights --seed 5 --save-weights " + dir + "/w.safetensors --input tokens=" + dir +
                "/ids.npy --output-dir " + dir + "/out");
    ASSERT_EQ(r.code, 0) << r.output;
    std::map<std::string, ref::T> w = kt::loadWeights(dir + "/w.safetensors");
    EXPECT_TRUE(kt::allClose(sparseReference(w, ids, c, 2, 4, 16, 3), kt::loadNpy(dir + "/out/logits.npy")));
  }
}
INSTANTIATE_TEST_SUITE_P(Modes, SparseExample,
                         ::testing::Values(SparseModelCase{"strided", "merged"}, SparseModelCase{"strided", "alternate"},
                                           SparseModelCase{"strided", "heads"}, SparseModelCase{"fixed", "merged"},
                                           SparseModelCase{"fixed", "alternate"}),
                         [](const auto &i) { return i.param.pattern + "_" + i.param.combine; });
}  // namespace

namespace {
// ---------------------------------------------------------------- a block schedule edited in the IR
// The sparse kernel is generated from the op's #kiln.sparse_schedule, which passes keep when a
// .mlir file states it: a merged strided head (local and global parts) edited to its local
// part alone, with blocks of 32 instead of the default 16, computes the strided-local pattern,
// not the union; without the edit the same file computes the union. (The schedule is part of
// the kernel's key: the two never share a cached kernel.)
TEST(SparseSchedule, EditedInTheIrAndCompiledByKilnc) {
  std::string dir = kt::workDir("sparse_edited");
  const int64_t H = 2, D = 16, s = 8;
  auto module = [&](const std::string &extra) {
    return std::string(R"(module attributes {kiln.seq_bounds = array<i64: 128>, kiln.seq_names = ["L"]} {
  func.func @forward(%q: tensor<2x?x16xf32> {kiln.name = "q", kiln.syms = array<i64: -1, 0, -1>},
                     %k: tensor<2x?x16xf32> {kiln.name = "k", kiln.syms = array<i64: -1, 0, -1>},
                     %v: tensor<2x?x16xf32> {kiln.name = "v", kiln.syms = array<i64: -1, 0, -1>}) -> (tensor<2x?x16xf32> {kiln.name = "o"}) {
    %o = kiln.attention %q, %k, %v {mask = #kiln.mask<strided>, pattern_size = 8 : i64, part = #kiln.part<union>, scale = 0.25 : f32)") +
           extra + R"(} : (tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>) -> tensor<2x?x16xf32>
    return %o : tensor<2x?x16xf32>
  }
})";
  };
  std::ofstream(dir + "/union.mlir") << module("");
  std::ofstream(dir + "/edited.mlir") << module(
      ", kiln.schedule = #kiln.schedule<block = 32>, kiln.sparse = #kiln.sparse_schedule<parts = [<queries = sequence, "
      "keys = sequence, blocks = window_to_diagonal, mask = strided_local>]>");
  for (const char *m : {"union", "edited"}) {
    auto r = kt::run(std::string(KILN_BIN) + "/kilnc " + dir + "/" + m + ".mlir --quiet --cache-dir " + KILN_TEST_CACHE +
                     " --dump-dir " + dir + "/" + m + ".dump -o " + dir + "/" + m);
    ASSERT_EQ(r.code, 0) << r.output;
  }
  // The edit is what the schedule report shows and what the kernel was generated from.
  std::string sched;
  for (auto &e : std::filesystem::directory_iterator(dir + "/edited.dump"))
    if (e.path().filename().string().starts_with("kiln_attention_") && e.path().extension() == ".txt") {
      std::ifstream f(e.path());
      sched.assign(std::istreambuf_iterator<char>(f), {});
    }
  EXPECT_NE(sched.find("block = 32"), std::string::npos) << sched;
  EXPECT_NE(sched.find("mask = strided_local>]"), std::string::npos) << sched;
  for (int64_t L : {7, 100}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    ref::T q = kt::randomT({H, L, D}, 31 + (unsigned)L), k = kt::randomT({H, L, D}, 32 + (unsigned)L),
           v = kt::randomT({H, L, D}, 33 + (unsigned)L);
    kt::saveNpy(dir + "/q.npy", q);
    kt::saveNpy(dir + "/k.npy", k);
    kt::saveNpy(dir + "/v.npy", v);
    std::string inputs = " --input q=" + dir + "/q.npy --input k=" + dir + "/k.npy --input v=" + dir + "/v.npy";
    for (const char *m : {"union", "edited"}) {
      auto r = kt::run(dir + "/" + m + inputs + " --output-dir " + dir + "/" + m + ".out");
      ASSERT_EQ(r.code, 0) << r.output;
    }
    ref::T local = maskedAttention(q, k, v, window(s)), both = maskedAttention(q, k, v, either(window(s), stridedGlobal(s)));
    EXPECT_TRUE(kt::allClose(local, kt::loadNpy(dir + "/edited.out/o.npy")));
    EXPECT_TRUE(kt::allClose(both, kt::loadNpy(dir + "/union.out/o.npy")));
    if (L > s) {  // the edit changed the result
      EXPECT_FALSE(kt::allClose(both, kt::loadNpy(dir + "/edited.out/o.npy")));
    }
  }
}
}  // namespace

namespace {
// ---------------------------------------------------------------- mixed precision
// --precision bf16 on a CPU target: the block-sparse kernel rounds q, k and v to bfloat16 once
// and computes the scores, the softmax, P·V and the parts' log-sum-exp merge in f32: the plain
// masked attention on rounded operands, and not the unrounded one. Two parts merged (strided),
// a table of blocks (a layout) and per-head patterns.
TEST(SparseBf16, RoundsQueriesKeysAndValues) {
  std::vector<std::string> lay = {"#......", "##.....", "#.#....", ".#.#...", "#...#..", "..#..#.", "#.....#"};
  struct Case {
    std::string name;
    Mask mask;
    std::vector<Mask> heads;
    std::vector<Allowed> allowed;  // per head group
  };
  std::vector<Case> cases = {
      {"strided", Mask::strided({.stride = 8}), {}, {either(window(8), stridedGlobal(8))}},
      {"layout", Mask::block_layout({.block = 16, .rows = lay}), {},
       {[lay](int64_t i, int64_t j) { return j <= i && lay[i / 16][j / 16] == '#'; }}},
      {"heads", Mask::none(),
       {Mask::strided({.stride = 8, .part = Part::Local}), Mask::fixed({.block = 16, .summary = 2, .part = Part::Global})},
       {window(8), fixedGlobal(16, 2)}},
  };
  const int64_t H = 2, L = 100, D = 16;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    std::string dir = kt::workDir("sparse_bf16_" + c.name);
    std::string exe = kt::compile(dir, "sp", [&](Model &m) {
      Dim Ls = m.seq("L", 112);
      Tensor q = m.input("q", {H, Ls, D}), k = m.input("k", {H, Ls, D}), v = m.input("v", {H, Ls, D});
      m.output("o", attention(q, k, v, {.mask = c.mask, .head_masks = c.heads}));
    }, {"--target", "host", "--precision", "bf16", "--dump-dir", dir + "/dump"});
    ASSERT_FALSE(exe.empty());
    // Every attention kernel (per-head patterns: one per pattern) says bf16.
    auto att = kt::run("grep -l 'precision=bf16' " + dir + "/dump/*attention*.schedule.txt | wc -l"),
         f32 = kt::run("grep -L 'precision=bf16' " + dir + "/dump/*attention*.schedule.txt | wc -l");
    EXPECT_EQ(std::atoi(att.output.c_str()), c.heads.empty() ? 1 : 2) << att.output;
    EXPECT_EQ(std::atoi(f32.output.c_str()), 0) << f32.output;
    ref::T q = kt::randomT({H, L, D}, 51, 2.0f), k = kt::randomT({H, L, D}, 52, 2.0f), v = kt::randomT({H, L, D}, 53);
    kt::saveNpy(dir + "/q.npy", q);
    kt::saveNpy(dir + "/k.npy", k);
    kt::saveNpy(dir + "/v.npy", v);
    auto r = kt::run(exe + " --input q=" + dir + "/q.npy --input k=" + dir + "/k.npy --input v=" + dir + "/v.npy --output-dir " +
                     dir + "/out");
    ASSERT_EQ(r.code, 0) << r.output;
    ref::T got = kt::loadNpy(dir + "/out/o.npy");
    auto reference = [&](const ref::T &qq, const ref::T &kk, const ref::T &vv) {
      if (c.allowed.size() == 1) return maskedAttention(qq, kk, vv, c.allowed[0]);
      ref::T o({H, L, D});
      for (int64_t g = 0; g < H; ++g) {  // one head per pattern
        auto head = [&](const ref::T &t) {
          ref::T s({1, L, D});
          std::copy(t.v.begin() + g * L * D, t.v.begin() + (g + 1) * L * D, s.v.begin());
          return s;
        };
        ref::T oh = maskedAttention(head(qq), head(kk), head(vv), c.allowed[g]);
        std::copy(oh.v.begin(), oh.v.end(), o.v.begin() + g * L * D);
      }
      return o;
    };
    EXPECT_TRUE(kt::allClose(reference(kt::roundedBf16(q), kt::roundedBf16(k), kt::roundedBf16(v)), got));
    ref::T unrounded = reference(q, k, v);
    double top = 0, diff = 0;
    for (size_t i = 0; i < got.v.size(); ++i) {
      top = std::max(top, (double)std::abs(unrounded.v[i]));
      diff = std::max(diff, (double)std::abs(unrounded.v[i] - got.v[i]));
    }
    EXPECT_GT(diff, 1e-4 * top) << "the operands were not rounded";
  }
}
}  // namespace
