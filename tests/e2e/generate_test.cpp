// generate_test.cpp - KV-cache generation (--generate) of the decoder-only and the
// encoder-decoder example against greedy decoding with the plain reference and PyTorch's tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "harness.h"
#include "kiln/dsl/Blocks.h"
#include "kilnrt/api.h"
#include "models.h"

using namespace kiln;
using W = std::map<std::string, ref::T>;

namespace {
const std::string kSrc = KILN_SOURCE_DIR;
}  // namespace

namespace {
// ---------------------------------------------------------------- KV-cache generation
std::vector<int32_t> readIds(const std::string &path) {
  kilnrt_tensor g;
  EXPECT_EQ(kilnrt_npy_read(path.c_str(), &g), KILNRT_OK) << path;
  if (!g.data) return {};
  std::vector<int32_t> ids((int32_t *)g.data, (int32_t *)g.data + kilnrt_tensor_numel(&g));
  kilnrt_tensor_free(&g);
  return ids;
}

// Greedy decoding with a plain reference that reruns the whole sequence each step:
// `logits(seq)` gives [len, vocab]; `seq` starts as the prompt and grows by n tokens.
std::vector<int32_t> greedyReference(std::vector<int32_t> seq, int n,
                                     const std::function<ref::T(const std::vector<int32_t> &)> &logits) {
  std::vector<int32_t> want;
  for (int k = 0; k < n; ++k) {
    ref::T l = logits(seq);
    int64_t V = l.shape[1];
    const float *last = &l.v[(l.shape[0] - 1) * V];
    want.push_back((int32_t)(std::max_element(last, last + V) - last));
    seq.push_back(want.back());
  }
  return want;
}

// Runs `exe ... --generate n`, checks the printed line and generated.npy against `want` and
// PyTorch's tokens (the fixture's generated.npy; make_fixtures.py checked their margins).
void expectGenerated(const std::string &dir, const std::string &cmd, int n, const std::vector<int32_t> &want,
                     const std::string &fixture) {
  auto r = kt::run(cmd + " --generate " + std::to_string(n) + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  std::string printed;
  for (size_t i = 0; i < want.size(); ++i) printed += (i ? " " : "") + std::to_string(want[i]);
  EXPECT_NE(r.output.find(printed), std::string::npos) << "kiln printed: " << r.output << "reference: " << printed;
  std::vector<int32_t> got = readIds(dir + "/out/generated.npy");
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, readIds(fixture + "/generated.npy"));
  ref::T wantT({(int64_t)want.size()});
  std::copy(want.begin(), want.end(), wantT.v.begin());
  kt::noteReference(kt::loadNpy(dir + "/out/generated.npy"), wantT);  // the GPU bundle's reference
  std::set<int32_t> distinct(got.begin(), got.end());
  EXPECT_GT(distinct.size(), 2u) << "a sequence of one repeated token would not test the cache";
}

// The GPT-2 of the PyTorch fixture (2 layers, width 64, 4 heads, vocabulary 256, context 64),
// compiled to dir/gpt2.
kt::RunResult compileSmallGpt2(const std::string &dir, const std::string &flags = "") {
  return kt::run(std::string(KILN_BIN) + "/gpt2-compile --layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64 --quiet "
                 "--cache-dir " + std::string(KILN_TEST_CACHE) + " -o " + dir + "/gpt2 " + flags);
}

// examples/gpt2 --generate: the prompt runs once (filling the caches), then one decode step per
// token attends to the cache. The tokens must equal greedy decoding with the plain reference
// rerunning the whole prefix each step (PyTorch fixture weights: clear top-1 margins).
TEST(Gpt2Generate, KvCacheDecodingMatchesGreedyReference) {
  std::string dir = kt::workDir("gpt2_generate"), fx = kSrc + "/tests/fixtures/gpt2";
  auto r = compileSmallGpt2(dir);
  ASSERT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(fx + "/weights.safetensors");
  std::vector<int32_t> prompt{17, 4, 99, 3, 250};
  const int n = 12;
  std::string cmd = dir + "/gpt2 --weights " + fx + "/weights.safetensors --tokens " + kt::idList(prompt);
  expectGenerated(dir, cmd, n,
                  greedyReference(prompt, n, [&](const std::vector<int32_t> &seq) { return ref::gpt2_hf(w, seq, 2, 4, ""); }),
                  fx);
  // Reaching the compiled context: generation stops there with a message (a 5-token prompt in a
  // 64-token cache leaves room for 60 new tokens: the last one needs no cache slot).
  r = kt::run(cmd + " --generate 70 --output-dir " + dir + "/long");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("generation stopped at the compiled context of 64 tokens, after 60 new tokens"),
            std::string::npos) << r.output;
  EXPECT_EQ(readIds(dir + "/long/generated.npy").size(), 60u);
}

// examples/gpt2's `prefill` entry: the prompt through every layer, the head on its last row only
// (last_logits [1, vocab]), which --generate runs the prompt through. Its logits must be the last
// row of `forward`'s and of the reference's; --generate's step logits (--output-dir writes them)
// must be the reference's over the prompt and the tokens generated so far (teacher-forced).
TEST(Gpt2Generate, PrefillKeepsTheLastRowAndStepLogitsMatchTheReference) {
  std::string dir = kt::workDir("gpt2_prefill"), fx = kSrc + "/tests/fixtures/gpt2";
  auto r = compileSmallGpt2(dir);
  ASSERT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(fx + "/weights.safetensors");
  std::vector<int32_t> prompt{17, 4, 99, 3, 250, 61, 7};
  std::string cmd = dir + "/gpt2 --weights " + fx + "/weights.safetensors --tokens " + kt::idList(prompt);
  r = kt::run(cmd + " --entry forward --output-dir " + dir + "/f");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(cmd + " --entry prefill --output-dir " + dir + "/p");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T all = kt::loadNpy(dir + "/f/logits.npy"), lastRow = kt::loadNpy(dir + "/p/last_logits.npy");
  const int64_t V = 256, L = (int64_t)prompt.size();
  ASSERT_EQ(lastRow.shape, (std::vector<int64_t>{1, V}));
  ref::T want({1, V});
  std::copy(all.v.end() - V, all.v.end(), want.v.begin());
  EXPECT_TRUE(kt::allClose(want, lastRow));
  ref::T full = ref::gpt2_hf(w, prompt, 2, 4, "");
  std::copy(full.v.begin() + (L - 1) * V, full.v.begin() + L * V, want.v.begin());
  EXPECT_TRUE(kt::allClose(want, lastRow));
  const int n = 4;
  r = kt::run(cmd + " --generate " + std::to_string(n) + " --output-dir " + dir + "/g");
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<int32_t> gen = readIds(dir + "/g/generated.npy");
  ASSERT_EQ(gen.size(), (size_t)n);
  ref::T steps = kt::loadNpy(dir + "/g/step_logits.npy");
  ASSERT_EQ(steps.shape, (std::vector<int64_t>{n, V}));
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), gen.begin(), gen.end() - 1);
  ref::T tf = ref::gpt2_hf(w, seq, 2, 4, "");  // row L - 1 + k predicts generated token k
  ref::T wantSteps({n, V});
  std::copy(tf.v.begin() + (L - 1) * V, tf.v.end(), wantSteps.v.begin());
  EXPECT_TRUE(kt::allClose(wantSteps, steps));
  EXPECT_NE(r.output.find("prompt: 7 tokens in"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ms; peak RSS "), std::string::npos) << r.output;  // loading and memory after it
}

// examples/gpt2's `extend`: a chunk appended at `past` of the cache (learned positions past,
// past + 1, ...: position_embedding from a start). prefill over the first 5 tokens, then extend
// with the next 4 at past 5: the chunk's last row is the reference's row 8 over all 9 tokens
// (tests/train/batch_test.cpp: the same into one cache slot of a batched build).
TEST(Gpt2Generate, ExtendAppendsAChunkAtPast) {
  std::string dir = kt::workDir("gpt2_extend"), fx = kSrc + "/tests/fixtures/gpt2";
  auto r = compileSmallGpt2(dir);
  ASSERT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(fx + "/weights.safetensors");
  const std::vector<int32_t> ids{17, 4, 99, 3, 250, 61, 7, 128, 33, 90};
  const int64_t V = 256;
  ref::T full = ref::gpt2_hf(w, ids, 2, 4, "");
  auto row = [&](int64_t p) {
    ref::T t({1, V});
    std::copy(full.v.begin() + p * V, full.v.begin() + (p + 1) * V, t.v.begin());
    return t;
  };
  const std::string weights = " --weights " + fx + "/weights.safetensors";
  r = kt::run(dir + "/gpt2" + weights + " --entry prefill,extend --tokens tokens=17,4,99,3,250 --tokens chunk=61,7,128,33 "
              "--tokens past=5 --output-dir " + dir + "/e");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T got = kt::loadNpy(dir + "/e/chunk_logits.npy");
  ASSERT_EQ(got.shape, (std::vector<int64_t>{1, V}));
  EXPECT_TRUE(kt::allClose(row(8), got));
  // A chunk past the context is refused, naming it.
  r = kt::run(dir + "/gpt2" + weights + " --entry extend --tokens chunk=1,2,3 --tokens past=62");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("past"), std::string::npos) << r.output;
}

using kt::roundBf16;

// --precision bf16 on a CPU target, inference only: GPT-2's GEMM weights (the linears', the
// FFNs' and the LM head's, which is the token embedding's table, tied) are kept in bfloat16:
// rounded once at load from the f32 fixture, saved as BF16 tensors, and a BF16 checkpoint is
// used as stored (the same outputs, bit for bit). The decode steps (streaming GEMMs reading the
// bf16 panels) agree with the forward entry (register-block GEMMs) over the same tokens, and
// both are within bfloat16's rounding of the f32 reference, not equal to it.
TEST(Gpt2Generate, Bf16WeightsAreKeptInBfloat16) {
  std::string dir = kt::workDir("gpt2_bf16"), fx = kSrc + "/tests/fixtures/gpt2";
  auto r = compileSmallGpt2(dir, "--target host --precision bf16");  // a CPU test: the GPU runs of the suite leave it alone
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(dir + "/gpt2 --help");
  EXPECT_NE(r.output.find("h.0.mlp.c_fc.weight [64, 256] bf16 (kept in bfloat16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("h.0.mlp.c_fc.bias [256] f32"), std::string::npos) << r.output;
  W w = kt::loadWeights(fx + "/weights.safetensors");
  std::vector<int32_t> prompt{17, 4, 99, 3, 250, 61, 7};
  std::string cmd = dir + "/gpt2 --tokens " + kt::idList(prompt);
  r = kt::run(cmd + " --weights " + fx + "/weights.safetensors --entry forward --output-dir " + dir + "/f --save-weights " +
              dir + "/bf16.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  // The saved checkpoint: the GEMM weights as BF16, each the fixture's value rounded; the rest F32, unchanged.
  kilnrt_weights *saved = nullptr;
  ASSERT_EQ(kilnrt_weights_open((dir + "/bf16.safetensors").c_str(), &saved), KILNRT_OK) << kilnrt_last_error();
  int bf16 = 0;
  for (int i = 0; i < kilnrt_weights_count(saved); ++i) {
    const char *cname;
    kilnrt_tensor t;
    kilnrt_weights_get(saved, i, &cname, &t);
    std::string name = cname;
    if (!w.count(name) && name.rfind("transformer.", 0) == 0) name = name.substr(12);
    ASSERT_TRUE(w.count(name)) << name;
    const ref::T &want = w[name];
    ASSERT_EQ(kilnrt_tensor_numel(&t), (int64_t)want.v.size()) << name;
    const bool gemm = name.find(".weight") != std::string::npos && name.find("ln") == std::string::npos && name != "wpe.weight";
    EXPECT_EQ(t.dtype, gemm ? KILN_BF16 : KILN_F32) << name;
    if (t.dtype == KILN_BF16) ++bf16;
    for (size_t k = 0; k < want.v.size(); ++k) {
      float got;
      if (t.dtype == KILN_BF16) {
        uint32_t bits = (uint32_t)((const uint16_t *)t.data)[k] << 16;
        std::memcpy(&got, &bits, 4);
      } else {
        got = ((const float *)t.data)[k];
      }
      float expect = t.dtype == KILN_BF16 ? roundBf16(want.v[k]) : want.v[k];
      if (got != expect) {
        ADD_FAILURE() << name << "[" << k << "] = " << got << ", expected " << expect;
        break;
      }
    }
  }
  kilnrt_weights_close(saved);
  EXPECT_EQ(bf16, 9) << "wte and, per layer, c_attn, c_proj, c_fc and mlp.c_proj";
  // The BF16 checkpoint, used as stored: the same logits, bit for bit.
  r = kt::run(cmd + " --weights " + dir + "/bf16.safetensors --entry forward --output-dir " + dir + "/f2");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T logits = kt::loadNpy(dir + "/f/logits.npy");
  EXPECT_EQ(logits.v, kt::loadNpy(dir + "/f2/logits.npy").v);
  // Within bfloat16's rounding of the f32 reference, and not equal to it.
  ref::T full = ref::gpt2_hf(w, prompt, 2, 4, "");
  double scale = 0, diff = 0;
  for (size_t k = 0; k < full.v.size(); ++k) {
    scale = std::max(scale, (double)std::abs(full.v[k]));
    diff = std::max(diff, (double)std::abs(full.v[k] - logits.v[k]));
  }
  EXPECT_GT(diff, 1e-5 * scale) << "bf16 logits equal the f32 reference's: nothing was rounded";
  EXPECT_LT(diff, 3e-2 * scale);
  // Decode steps against the forward over the prompt and the generated tokens.
  const int n = 4, V = 256, L = (int)prompt.size();
  r = kt::run(cmd + " --weights " + dir + "/bf16.safetensors --generate " + std::to_string(n) + " --output-dir " + dir + "/g");
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<int32_t> gen = readIds(dir + "/g/generated.npy");
  ASSERT_EQ(gen.size(), (size_t)n);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), gen.begin(), gen.end() - 1);
  r = kt::run(dir + "/gpt2 --tokens " + kt::idList(seq) + " --weights " + dir + "/bf16.safetensors --entry forward --output-dir " + dir + "/tf");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T tf = kt::loadNpy(dir + "/tf/logits.npy"), steps = kt::loadNpy(dir + "/g/step_logits.npy"), want({n, V});
  std::copy(tf.v.begin() + (L - 1) * V, tf.v.end(), want.v.begin());
  EXPECT_TRUE(kt::allClose(want, steps));
  // Bad checkpoints: an f32 weight beyond bfloat16's range, and an infinite BF16 one, are
  // refused with the tensor and the index named.
  W big = w;
  big["h.1.mlp.c_fc.weight"].v[5] = 3.4e38f;
  kt::saveWeights(dir + "/big.safetensors", big);
  r = kt::run(cmd + " --weights " + dir + "/big.safetensors");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("tensor 'h.1.mlp.c_fc.weight' holds 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" at flat index 5, which is beyond bfloat16's range"), std::string::npos) << r.output;
  std::vector<const char *> names;
  std::vector<kilnrt_tensor> ts;
  std::vector<std::vector<uint16_t>> halves;
  for (auto &[name, t] : w) {
    kilnrt_tensor k{KILN_F32, (int32_t)t.shape.size(), {}, const_cast<float *>(t.v.data())};
    for (size_t d = 0; d < t.shape.size(); ++d) k.shape[d] = t.shape[d];
    if (name == "h.0.attn.c_proj.weight") {  // as BF16, with an infinity at index 7
      halves.emplace_back(t.v.size());
      for (size_t e = 0; e < t.v.size(); ++e) {
        uint32_t bits;
        float rv = roundBf16(t.v[e]);
        std::memcpy(&bits, &rv, 4);
        halves.back()[e] = (uint16_t)(bits >> 16);
      }
      halves.back()[7] = 0x7f80;
      k.dtype = KILN_BF16;
      k.data = halves.back().data();
    }
    names.push_back(name.c_str());
    ts.push_back(k);
  }
  ASSERT_EQ(kilnrt_weights_save((dir + "/inf.safetensors").c_str(), (int32_t)names.size(), names.data(), ts.data()), KILNRT_OK)
      << kilnrt_last_error();
  r = kt::run(cmd + " --weights " + dir + "/inf.safetensors");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("tensor 'h.0.attn.c_proj.weight' holds a non-finite bf16 value (bits 0x7f80) at flat index 7"),
            std::string::npos) << r.output;
}

// examples/transformer --generate: the encoder runs once (its `encode` entry fills every decoder
// layer's cross-attention keys and values), then each decode step runs one target token through
// the decoder with its own self-attention cache. Must equal greedy decoding with the reference
// rerunning the whole encoder-decoder on the growing target, and PyTorch's tokens.
TEST(TransformerGenerate, EncodeOnceThenCachedDecodingMatchesGreedyReference) {
  std::string dir = kt::workDir("transformer_generate"), fx = kSrc + "/tests/fixtures/transformer";
  auto r = kt::run(std::string(KILN_BIN) + "/transformer-compile --layers 2 --d-model 64 --heads 4 --d-ff 128 --src-vocab 200 "
                   "--tgt-vocab 210 --ctx 64 --quiet --cache-dir " + std::string(KILN_TEST_CACHE) + " -o " + dir + "/transformer");
  ASSERT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(fx + "/weights.safetensors");
  std::vector<int32_t> src = readIds(fx + "/src_tokens.npy");
  ASSERT_EQ(src.size(), 17u);
  const int n = 12;
  std::string cmd = dir + "/transformer --weights " + fx + "/weights.safetensors --tokens " + kt::idList(src);
  expectGenerated(dir, cmd + " --start-token 0", n,
                  greedyReference({0}, n, [&](const std::vector<int32_t> &seq) { return ref::transformer(w, src, seq, 2, 4); }),
                  fx);
  r = kt::run(cmd + " --generate 65");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("generation stopped at the compiled context of 64 tokens, after 64 new tokens"),
            std::string::npos) << r.output;
  r = kt::run(cmd + " --generate 3 --start-token 210");  // the target vocabulary is 210
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("token"), std::string::npos) << r.output;
  r = kt::run(cmd + " --start-token 3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--start-token applies to --generate"), std::string::npos) << r.output;
}
}  // namespace
