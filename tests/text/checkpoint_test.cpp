// checkpoint_test.cpp - the checkpoints people have: BF16 and F16 tensors (converted to f32 at
// load), sharded checkpoints (an index and its shards), each giving the logits of the f32 file;
// a shard missing or misplaced is a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "kilnrt/api.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
struct Blob {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A plain safetensors writer (header, then the data in order).
void writeSafetensors(const std::string &path, const std::vector<Blob> &blobs) {
  json h = json::object();
  uint64_t off = 0;
  for (const Blob &b : blobs) {
    h[b.name] = {{"dtype", b.dtype}, {"shape", b.shape}, {"data_offsets", {off, off + b.bytes.size()}}};
    off += b.bytes.size();
  }
  h["__metadata__"] = {{"format", "pt"}};
  std::string hs = h.dump();
  uint64_t n = hs.size();
  std::ofstream f(path, std::ios::binary);
  f.write((const char *)&n, 8);
  f << hs;
  for (const Blob &b : blobs) f << b.bytes;
}

uint16_t toBf16(float x) {  // round to nearest even
  uint32_t u;
  memcpy(&u, &x, 4);
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}
uint16_t toF16(float x) {  // normal range only (the weights are small): round to nearest
  uint32_t u;
  memcpy(&u, &x, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  int e = (int)((u >> 23) & 0xFF) - 127 + 15;
  uint32_t m = u & 0x7FFFFF;
  if (e <= 0) {  // subnormal half
    if (e < -10) return (uint16_t)sign;
    m |= 0x800000;
    return (uint16_t)(sign | ((m >> (14 - e)) + ((m >> (13 - e)) & 1)));
  }
  return (uint16_t)(sign | (((uint32_t)e << 10) + ((m + 0x1000) >> 13)));
}

// The f32 checkpoint's tensors, as blobs.
std::vector<Blob> readAll(const std::string &path) {
  kilnrt_weights *w;
  EXPECT_EQ(kilnrt_weights_open(path.c_str(), &w), KILNRT_OK) << kilnrt_last_error();
  std::vector<Blob> out;
  for (int i = 0; i < kilnrt_weights_count(w); ++i) {
    const char *name;
    kilnrt_tensor t;
    kilnrt_weights_get(w, i, &name, &t);
    Blob b{name, "F32", std::vector<int64_t>(t.shape, t.shape + t.rank), ""};
    b.bytes.assign((const char *)t.data, (size_t)kilnrt_tensor_numel(&t) * 4);
    out.push_back(b);
  }
  kilnrt_weights_close(w);
  return out;
}

template <class F>
std::vector<Blob> converted(std::vector<Blob> blobs, const char *dtype, F conv) {
  for (Blob &b : blobs) {
    const float *f = (const float *)b.bytes.data();
    size_t n = b.bytes.size() / 4;
    std::string out(n * 2, '\0');
    for (size_t i = 0; i < n; ++i) {
      uint16_t h = conv(f[i]);
      memcpy(&out[i * 2], &h, 2);
    }
    b.bytes = out;
    b.dtype = dtype;
  }
  return blobs;
}

struct Ckpt {
  std::string dir, f32;
  Ckpt() {
    dir = kt::workDir(std::string("ckpt_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());  // ctest runs tests in parallel
    fs::remove_all(dir);
    fs::create_directories(dir);
    f32 = dir + "/f32.safetensors";
    auto r = kt::run(std::string(KILN_BIN) + "/gpt2_text --random-weights --seed 6 --save-weights " + f32 + " --tokens 1");
    EXPECT_TRUE(fs::exists(f32)) << r.output;
  }
  ref::T logits(const std::string &weights, const std::string &tag) {
    auto r = kt::run(std::string(KILN_BIN) + "/gpt2_text --weights " + weights +
                     " --tokens 5,17,300,42,8,99,230,1 --output-dir " + dir + "/out_" + tag);
    EXPECT_EQ(r.code, 0) << r.output;
    return kt::loadNpy(dir + "/out_" + tag + "/logits.npy");
  }
};

float maxDiff(const ref::T &a, const ref::T &b) {
  EXPECT_EQ(a.v.size(), b.v.size());
  float d = 0;
  for (size_t i = 0; i < a.v.size() && i < b.v.size(); ++i) d = std::max(d, std::abs(a.v[i] - b.v[i]));
  return d;
}
// Copies of the checkpoint `path` (into dir) with a mis-mapping that a fixture of perturbed
// parameters must show: "swapped" exchanges norms `a` and `b` (.weight and .bias), "no_bias"
// zeroes the tensor `bias`. Each name with its file.
std::vector<std::pair<std::string, std::string>> misMapped(const std::string &path, const std::string &dir, const std::string &a,
                                                           const std::string &b, const std::string &bias) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string what : {"swapped", "no_bias"}) {
    auto w = kt::loadWeights(path);
    if (what == "swapped") {
      std::swap(w.at(a + ".weight"), w.at(b + ".weight"));
      std::swap(w.at(a + ".bias"), w.at(b + ".bias"));
    } else {
      for (float &v : w.at(bias).v) v = 0;
    }
    kt::saveWeights(dir + "/" + what + ".safetensors", w);
    out.push_back({what, dir + "/" + what + ".safetensors"});
  }
  return out;
}

float maxAbs(const ref::T &a) {
  float m = 0;
  for (float v : a.v) m = std::max(m, std::abs(v));
  return m;
}
}  // namespace

// BF16 and F16 files: the logits of the f32 file whose weights were rounded the same way
// (conversion at load is exact), and within half precision's rounding of the f32 logits.
TEST(Checkpoint, HalfPrecisionFilesGiveTheLogitsOfTheirF32Values) {
  Ckpt c;
  std::vector<Blob> blobs = readAll(c.f32);
  ref::T base = c.logits(c.f32, "f32");
  for (const char *dt : {"BF16", "F16"}) {
    std::string t = dt;
    std::vector<Blob> half = t == "BF16" ? converted(blobs, dt, toBf16) : converted(blobs, dt, toF16);
    writeSafetensors(c.dir + "/" + t + ".safetensors", half);
    // The same values as f32: bf16 widened exactly; f16 widened by float arithmetic here.
    std::vector<Blob> rounded = blobs;
    for (size_t k = 0; k < rounded.size(); ++k) {
      float *f = (float *)rounded[k].bytes.data();
      const uint16_t *h = (const uint16_t *)half[k].bytes.data();
      for (size_t i = 0; i < rounded[k].bytes.size() / 4; ++i) {
        if (t == "BF16") {
          f[i] = fromBf16(h[i]);
        } else {
          int e = (h[i] >> 10) & 0x1F, m = h[i] & 0x3FF;
          float v = e ? std::ldexp(1.0f + m / 1024.0f, e - 15) : std::ldexp(m / 1024.0f, -14);
          f[i] = (h[i] & 0x8000) ? -v : v;
        }
      }
    }
    writeSafetensors(c.dir + "/" + t + "_as_f32.safetensors", rounded);
    ref::T got = c.logits(c.dir + "/" + t + ".safetensors", t), want = c.logits(c.dir + "/" + t + "_as_f32.safetensors", t + "r");
    EXPECT_EQ(got.v, want.v) << dt << ": widening at load is exact";
    float tol = (t == "BF16" ? 2e-2f : 2e-3f) * maxAbs(base);
    EXPECT_LE(maxDiff(got, base), tol) << dt << " against the f32 logits";
    EXPECT_GT(maxDiff(got, base), 0.0f) << dt << ": the rounding is visible, so the file really was half precision";
  }
}

// A sharded checkpoint (index + 3 shards, named as save_pretrained names them) gives the f32
// file's logits, opened by its index or its folder; a missing or misplaced shard is an error.
TEST(Checkpoint, ShardedCheckpointsLoadThroughTheirIndex) {
  Ckpt c;
  std::vector<Blob> blobs = readAll(c.f32);
  ref::T base = c.logits(c.f32, "f32");
  std::string sd = c.dir + "/sharded";
  fs::create_directories(sd);
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  const int S = 3;
  std::vector<std::vector<Blob>> shards(S);
  for (size_t i = 0; i < blobs.size(); ++i) shards[i * S / blobs.size()].push_back(blobs[i]);
  for (int k = 0; k < S; ++k) {
    char name[64];
    snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, S);
    writeSafetensors(sd + "/" + name, shards[k]);
    for (const Blob &b : shards[k]) index["weight_map"][b.name] = name;
  }
  std::ofstream(sd + "/model.safetensors.index.json") << index.dump(1);
  EXPECT_EQ(c.logits(sd + "/model.safetensors.index.json", "idx").v, base.v);
  EXPECT_EQ(c.logits(sd, "dir").v, base.v);
  auto fails = [&](const std::string &needle) {
    auto r = kt::run(std::string(KILN_BIN) + "/gpt2_text --weights " + sd + " --tokens 1");
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("model.safetensors.index.json"), std::string::npos) << "names the index: " << r.output;
  };
  // A tensor the index places in the wrong shard.
  json moved = index;
  std::string first = shards[0][0].name;
  moved["weight_map"][first] = "model-00002-of-00003.safetensors";
  std::ofstream(sd + "/model.safetensors.index.json") << moved.dump();
  fails("holds tensor '" + first + "', which the index places in 'model-00002-of-00003.safetensors'");
  // A shard missing.
  std::ofstream(sd + "/model.safetensors.index.json") << index.dump();
  fs::rename(sd + "/model-00003-of-00003.safetensors", sd + "/elsewhere.safetensors");
  fails("shard 'model-00003-of-00003.safetensors' named by the index is missing");
  std::ofstream(sd + "/model.safetensors.index.json") << "{\"weight_map\": 3}";
  fails("no weight_map");
}

// config.json beside the weights is compared with the compiled model: sizes and what silently
// changes numbers are named when they differ; --ignore-config skips it.
TEST(Checkpoint, ConfigJsonBesideTheWeightsIsChecked) {
  Ckpt c;
  std::string d = c.dir + "/cfg";
  fs::create_directories(d);
  fs::copy_file(c.f32, d + "/model.safetensors");
  json good = {{"model_type", "gpt2"}, {"n_layer", 2},   {"n_embd", 64}, {"n_head", 4},
               {"vocab_size", 400},    {"n_positions", 64}, {"n_inner", nullptr}, {"activation_function", "gelu_new"},
               {"layer_norm_epsilon", 1e-05}};
  std::string run = std::string(KILN_BIN) + "/gpt2_text --weights " + d + "/model.safetensors --tokens 1,2";
  std::ofstream(d + "/config.json") << good.dump(1);
  auto r = kt::run(run);
  EXPECT_EQ(r.code, 0) << r.output;
  auto fails = [&](json cfg, const std::string &needle) {
    std::ofstream(d + "/config.json") << cfg.dump(1);
    auto r = kt::run(run);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("config.json"), std::string::npos) << "names the file: " << r.output;
    EXPECT_EQ(kt::run(run + " --ignore-config").code, 0);
  };
  json bad = good;
  bad["n_layer"] = 24;
  fails(bad, "the checkpoint has n_layer 24, this model was compiled with 2 layers");
  bad = good;
  bad["activation_function"] = "gelu";
  bad["layer_norm_epsilon"] = 1e-6;
  fails(bad, "the checkpoint has activation_function gelu, this model was compiled with gelu_new as its activation");
  fails(bad, "the checkpoint has layer_norm_epsilon 1e-06");
  bad = good;
  bad["tie_word_embeddings"] = false;
  fails(bad, "tie_word_embeddings false");
  bad = good;
  bad["n_inner"] = 1024;  // null (as above) means 4 * n_embd
  fails(bad, "n_inner 1024, this model was compiled with 256 as its FFN width");
  bad = good;
  bad.erase("vocab_size");
  fails(bad, "the checkpoint gives no vocab_size");
  std::ofstream(d + "/config.json") << "{not json";
  EXPECT_EQ(kt::run(run).code, 1);
}

// *-compile --config: the sizes come from the checkpoint's config (a flag contradicting it is an error), and a
// field the model cannot follow is an error at compile time.
TEST(Checkpoint, CompileProgramsTakeTheirSizesFromConfig) {
  std::string d = kt::workDir("cfg_compile");
  fs::create_directories(d);
  json cfg = {{"n_layer", 1}, {"n_embd", 32}, {"n_head", 2}, {"vocab_size", 77}, {"n_positions", 16}};
  std::ofstream(d + "/config.json") << cfg.dump();
  std::string compile = std::string(KILN_BIN) + "/gpt2-compile --config " + d + "/config.json --emit=mlir --compile-to=input";
  auto r = kt::run(compile);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tensor<77x32xf32>"), std::string::npos) << "wte from vocab_size x n_embd";
  EXPECT_EQ(r.output.find("transformer.h.1."), std::string::npos) << "one layer";
  EXPECT_EQ(kt::run(compile + " --vocab 77").code, 0) << "a flag may repeat the config";
  r = kt::run(compile + " --vocab 90");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("--vocab 90 contradicts --config"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("whose vocab_size is 77"), std::string::npos) << r.output;
  cfg["activation_function"] = "relu";
  std::ofstream(d + "/config.json") << cfg.dump();
  r = kt::run(compile);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("the checkpoint has activation_function relu"), std::string::npos) << r.output;
  r = kt::run(std::string(KILN_BIN) + "/gpt2-compile --config " + d + "/nothing.json --emit=mlir");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("nothing.json': cannot open"), std::string::npos) << r.output;
}

// Checkpoints written by transformers' save_pretrained (tests/reference/make_checkpoint_fixtures.py):
// a GPT-2 sharded by max_shard_size and the same model saved in bf16, each with its config.json
// (checked on load). The sharded one gives transformers' logits; the bf16 one the logits of the
// model with bf16-rounded weights (what a bf16 file holds), and transformers' f32 logits within
// bf16's rounding.
TEST(Checkpoint, HuggingFaceShardedAndBf16CheckpointsGiveTransformersLogits) {
  const std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/hf_gpt2";
  std::string dir = kt::workDir("hf_ckpt");
  ref::T want = kt::loadNpy(fx + "/logits.npy"), wantBf16 = kt::loadNpy(fx + "/logits_bf16.npy");
  auto logits = [&](const std::string &weights, const std::string &tag) {
    auto r = kt::run(std::string(KILN_BIN) + "/gpt2_text --weights " + weights + " --input tokens=" + fx +
                     "/tokens.npy --output-dir " + dir + "/" + tag);
    EXPECT_EQ(r.code, 0) << r.output;
    return kt::loadNpy(dir + "/" + tag + "/logits.npy");
  };
  ref::T sharded = logits(fx + "/sharded", "sharded");
  fprintf(stderr, "[ measured ] sharded: max |kiln - transformers| / max |logit| = %.3g\n", maxDiff(sharded, want) / maxAbs(want));
  EXPECT_LE(maxDiff(sharded, want), 5e-6f * maxAbs(want));  // measured 5.1e-7
  ref::T bf16 = logits(fx + "/bf16/model.safetensors", "bf16");
  fprintf(stderr, "[ measured ] bf16: max |kiln - transformers| / max |logit| = %.3g\n", maxDiff(bf16, wantBf16) / maxAbs(wantBf16));
  EXPECT_LE(maxDiff(bf16, wantBf16), 5e-6f * maxAbs(wantBf16));  // measured 4.4e-7
  // The fixture's parameters are perturbed from their initialisation (biases nonzero, norm gains
  // other than 1), so a norm or bias read under another name would show: swapping a layer's two
  // norms, or dropping its attention's bias, moves the logits far past the tolerance.
  for (const auto &[what, file] : misMapped(fx + "/bf16/model.safetensors", dir, "transformer.h.0.ln_1", "transformer.h.0.ln_2",
                                            "transformer.h.1.attn.c_attn.bias"))
    EXPECT_GT(maxDiff(logits(file, what), wantBf16), 1e-2f * maxAbs(wantBf16)) << what;
  EXPECT_LE(maxDiff(bf16, want), 1e-2f * maxAbs(want));
  EXPECT_GT(maxDiff(bf16, want), 1e-4f * maxAbs(want)) << "the file really is bf16";
  // gpt2-compile --config takes its sizes from the same config.json.
  auto r = kt::run(std::string(KILN_BIN) + "/gpt2-compile --config " + fx + "/sharded/config.json --emit=mlir --compile-to=input");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tensor<400x64xf32>"), std::string::npos);
  // And bert-compile from the config.json transformers writes for BERT.
  r = kt::run(std::string(KILN_BIN) + "/bert-compile --config " + std::string(KILN_SOURCE_DIR) +
              "/tests/fixtures/hf_bert/config.json --emit=mlir --compile-to=input");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tensor<512x64xf32>"), std::string::npos);
}

// A BertModel saved by transformers' save_pretrained (tests/reference/make_checkpoint_fixtures.py:
// no "bert." prefix, every parameter perturbed from its initialisation), compiled from the
// config.json beside it: kiln's `hidden` is transformers' last_hidden_state for tokens of both
// types. Swapping a layer's two LayerNorms, or zeroing an attention bias, moves it far past the
// tolerance, so a mis-mapped norm or bias would show.
TEST(Checkpoint, HuggingFaceBertModelGivesTransformersHiddenStates) {
  const std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/hf_bert";
  std::string dir = kt::workDir("hf_bert");
  auto r = kt::run(std::string(KILN_BIN) + "/bert-compile --config " + fx + "/config.json --quiet --cache-dir " +
                   std::string(KILN_TEST_CACHE) + " -o " + dir + "/bert");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T want = kt::loadNpy(fx + "/last_hidden_state.npy");
  auto hidden = [&](const std::string &weights, const std::string &tag) {
    auto r = kt::run(dir + "/bert --weights " + weights + " --input tokens=" + fx + "/tokens.npy --input token_type_ids=" + fx +
                     "/token_type_ids.npy --output-dir " + dir + "/" + tag);
    EXPECT_EQ(r.code, 0) << r.output;
    return kt::loadNpy(dir + "/" + tag + "/hidden.npy");
  };
  ref::T got = hidden(fx + "/model.safetensors", "f32");
  ASSERT_EQ(got.shape, want.shape);
  fprintf(stderr, "[ measured ] BertModel: max |kiln - transformers| / max |hidden| = %.3g\n", maxDiff(got, want) / maxAbs(want));
  EXPECT_LE(maxDiff(got, want), 2e-6f * maxAbs(want));  // measured 2.5e-7 (8x margin)
  for (const auto &[what, file] : misMapped(fx + "/model.safetensors", dir, "encoder.layer.0.attention.output.LayerNorm",
                                            "encoder.layer.0.output.LayerNorm", "encoder.layer.1.attention.self.value.bias"))
    EXPECT_GT(maxDiff(hidden(file, what), want), 1e-2f * maxAbs(want)) << what;
}
