// examples_test.cpp - the example programs (examples/) against the plain reference and against
// PyTorch (tests/fixtures), loading Hugging Face names and layouts as checkpoints carry them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
// ---------------------------------------------------------------- examples/gpt2 with a Hugging Face file
// The example reads GPT-2's names and layouts: here without the "transformer." prefix and with
// the attention mask buffers real checkpoints carry, which are ignored and reported.
TEST(Gpt2Example, LoadsHuggingFaceNamesWithoutPrefixAndIgnoresMaskBuffers) {
  std::string dir = kt::workDir("gpt2_hf");
  std::string exe = kt::example("gpt2");  // 2 layers, d 128, 4 heads, vocab 256, ctx 128
  auto r = kt::run(exe + " --random-weights --seed 7 --save-weights " + dir + "/full.safetensors --tokens 1");
  ASSERT_EQ(r.code, 0) << r.output;
  W full = kt::loadWeights(dir + "/full.safetensors");
  W stripped;
  for (auto &[name, t] : full) {
    ASSERT_EQ(name.rfind("transformer.", 0), 0u) << name;
    stripped[name.substr(12)] = t;
  }
  ref::T mask({1, 1, 4, 4}), masked_bias({1});
  stripped["h.0.attn.bias"] = mask;
  stripped["h.1.attn.masked_bias"] = masked_bias;
  kt::saveWeights(dir + "/hf.safetensors", stripped);
  auto ids = kt::randomIds(19, 256, 3);
  r = kt::run(exe + " --weights " + dir + "/hf.safetensors --tokens " + kt::idList(ids) + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ignored 2 tensors"), std::string::npos) << r.output;
  EXPECT_TRUE(kt::allClose(ref::gpt2_hf(stripped, ids, 2, 4, ""), kt::loadNpy(dir + "/out/logits.npy")));
}
}  // namespace

namespace {
// ---------------------------------------------------------------- examples/bert with a Hugging Face file
// Names with the "bert." prefix plus the tensors BERT checkpoints carry that are not encoder
// weights (position_ids, pooler, cls head); token_type_ids given, and left out (zeros).
TEST(BertExample, LoadsHuggingFaceNamesAndDefaultsTokenTypes) {
  std::string dir = kt::workDir("bert_hf");
  std::string exe = kt::example("bert");  // 2 layers, d 64, 4 heads, vocab 512, ctx 128
  auto r = kt::run(exe + " --random-weights --seed 4 --save-weights " + dir + "/full.safetensors --tokens 1");
  ASSERT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(dir + "/full.safetensors");
  W extra = w;
  extra["bert.pooler.dense.weight"] = kt::randomT({64, 64}, 1);
  extra["cls.predictions.bias"] = kt::randomT({512}, 2);
  extra["bert.embeddings.position_ids"] = ref::T({1, 128});
  kt::saveWeights(dir + "/hf.safetensors", extra);
  auto ids = kt::randomIds(23, 512, 9);
  std::vector<int32_t> types(23, 0);
  for (int i = 12; i < 23; ++i) types[i] = 1;
  r = kt::run(exe + " --weights " + dir + "/hf.safetensors --tokens tokens=" + kt::idList(ids) + " --tokens token_type_ids=" +
              kt::idList(types) + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ignored 3 tensors"), std::string::npos) << r.output;
  EXPECT_TRUE(kt::allClose(ref::bert_hf(w, ids, types, 2, 4, "bert."), kt::loadNpy(dir + "/out/hidden.npy")));
  r = kt::run(exe + " --weights " + dir + "/hf.safetensors --tokens " + kt::idList(ids) + " --output-dir " + dir + "/out0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(kt::allClose(ref::bert_hf(w, ids, std::vector<int32_t>(23, 0), 2, 4, "bert."), kt::loadNpy(dir + "/out0/hidden.npy")));
  r = kt::run(exe + " --weights " + dir + "/hf.safetensors --tokens " + kt::idList(ids) + " --tokens token_type_ids=0,2");
  EXPECT_EQ(r.code, 1);
}
}  // namespace

namespace {
// ---------------------------------------------------------------- examples/transformer
// Source and target lengths are separate sequence lengths: several pairs, including a target
// longer than the source and length 1, against the plain reference of the same layout.
TEST(TransformerExample, MatchesReferenceAtSeveralLengthPairs) {
  std::string dir = kt::workDir("transformer");
  std::string exe = kt::example("transformer");  // 2+2 layers, d 64, 4 heads, d_ff 128, vocab 300/310
  for (auto [S, T] : {std::pair<int, int>{7, 5}, {1, 1}, {3, 20}, {64, 64}}) {
    SCOPED_TRACE("S = " + std::to_string(S) + ", T = " + std::to_string(T));
    auto src = kt::randomIds(S, 300, (unsigned)S), tgt = kt::randomIds(T, 310, (unsigned)(T + 100));
    W w;
    ref::T got = kt::runModel(dir, exe, "--tokens src_tokens=" + kt::idList(src) + " --tokens tgt_tokens=" + kt::idList(tgt),
                          "logits", w, 6);
    EXPECT_TRUE(kt::allClose(ref::transformer(w, src, tgt, 2, 4), got));
  }
}
}  // namespace

namespace {
// ---------------------------------------------------------------- PyTorch fixtures
// tests/reference/make_fixtures.py wrote these with PyTorch (GPT-2 and BERT written out in
// plain torch with Hugging Face names, the Transformer through torch.nn.Transformer), including
// the non-weight tensors real checkpoints carry. Each example, compiled at the fixture's size,
// must reproduce PyTorch's output from the same file.
struct Fixture {
  std::string model, flags, inputs, output;
};
class PyTorchFixtures : public ::testing::TestWithParam<Fixture> {};

TEST_P(PyTorchFixtures, ExampleMatchesPyTorch) {
  const Fixture &f = GetParam();
  std::string dir = kt::workDir("fixture_" + f.model), fx = kSrc + "/tests/fixtures/" + f.model;
  auto r = kt::run(std::string(KILN_BIN) + "/" + f.model + "-compile " + f.flags + " --quiet --cache-dir " + KILN_TEST_CACHE +
                   " -o " + dir + "/" + f.model);
  ASSERT_EQ(r.code, 0) << r.output;
  std::string inputs;
  std::stringstream ss(f.inputs);
  for (std::string in; ss >> in;) inputs += " --input " + in + "=" + fx + "/" + in + ".npy";
  r = kt::run(dir + "/" + f.model + " --weights " + fx + "/weights.safetensors" + inputs + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(kt::allClose(kt::loadNpy(fx + "/" + f.output + ".npy"), kt::loadNpy(dir + "/out/" + f.output + ".npy")));
}
INSTANTIATE_TEST_SUITE_P(
    Models, PyTorchFixtures,
    ::testing::Values(Fixture{"gpt2", "--layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64", "tokens", "logits"},
                      Fixture{"bert", "--layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64", "tokens token_type_ids", "hidden"},
                      Fixture{"transformer",
                              "--layers 2 --d-model 64 --heads 4 --d-ff 128 --src-vocab 200 --tgt-vocab 210 --ctx 64",
                              "src_tokens tgt_tokens", "logits"}),
    [](const auto &i) { return i.param.model; });
}  // namespace
