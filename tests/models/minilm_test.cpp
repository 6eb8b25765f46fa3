// minilm_test.cpp - sentence embeddings of a real checkpoint: all-MiniLM-L6-v2 (the
// sentence-transformers folder, scripts/fetch_models.sh, the ctest fixture models/fetch) read as
// it is by examples/bert compiled with `--pool mean --normalize`, against transformers' BertModel
// + mean pooling over the attention mask + L2 normalization
// (tests/reference/make_minilm_fixtures.py: 20 sentences, each embedded alone).
//  * kiln's WordPiece tokenizer from the folder's tokenizer.json gives transformers' ids;
//  * each sentence alone, and the 20 as one batch padded on the right with its attention_mask,
//    give the reference embeddings (the padding hidden from attention and from the mean);
//  * compiled with --quantize q8_0 (the weights quantized at load), the cosine of each
//    embedding to the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "kilnrt/api.h"

namespace {
using json = nlohmann::json;

const std::string kFolder = std::string(KILN_MODELS_DIR) + "/all-MiniLM-L6-v2";
const std::string kFixture = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/minilm";

json fixture() {
  std::ifstream f(kFixture + "/sentences.json");
  return json::parse(f);
}

std::string compileMiniLM(const std::string &dir, const std::string &extra = "--batch 20") {
  auto c = kt::run(std::string(KILN_BIN) + "/bert-compile --config " + kFolder + "/config.json --pool mean --normalize " +
                   extra + " --quiet --cache-dir " + KILN_TEST_CACHE " -o " + dir + "/minilm");
  EXPECT_EQ(c.code, 0) << c.output;
  return c.code == 0 ? dir + "/minilm" : "";
}

// max |a[i] - b[i]| over n values.
double maxAbsDiff(const float *a, const float *b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, (double)std::abs(a[i] - b[i]));
  return d;
}

// [rows, cols] of ids as an int32 .npy.
void saveIds2(const std::string &path, const json &rows) {
  std::vector<int32_t> v;
  for (const json &r : rows)
    for (const json &x : r) v.push_back(x.get<int32_t>());
  kilnrt_tensor t{KILN_I32, 2, {(int64_t)rows.size(), (int64_t)rows[0].size()}, v.data()};
  ASSERT_EQ(kilnrt_npy_write(path.c_str(), &t), KILNRT_OK) << kilnrt_last_error();
}

// Runs the padded batch; returns the [20, 384] embeddings.
ref::T runBatch(const std::string &exe, const std::string &dir, const json &fx) {
  saveIds2(dir + "/ids.npy", fx["batch_ids"]);
  saveIds2(dir + "/mask.npy", fx["batch_mask"]);
  auto r = kt::run(exe + " --weights " + kFolder + "/model.safetensors --input tokens=" + dir + "/ids.npy --input attention_mask=" +
                   dir + "/mask.npy --output-dir " + dir + "/batch");
  EXPECT_EQ(r.code, 0) << r.output;
  return r.code == 0 ? kt::loadNpy(dir + "/batch/embedding.npy") : ref::T();
}

TEST(MiniLM, TokensMatchTransformers) {
  json fx = fixture();
  kilnrt_tokenizer *t;
  ASSERT_EQ(kilnrt_tokenizer_open(kFolder.c_str(), &t), KILNRT_OK) << kilnrt_last_error();
  for (size_t k = 0; k < fx["sentences"].size(); ++k) {
    std::string s = fx["sentences"][k];
    const int32_t *ids;
    int64_t n;
    ASSERT_EQ(kilnrt_tokenizer_encode(t, s.data(), s.size(), 1, &ids, &n), KILNRT_OK) << kilnrt_last_error();
    EXPECT_EQ(std::vector<int32_t>(ids, ids + n), fx["ids"][k].get<std::vector<int32_t>>()) << s;
  }
  kilnrt_tokenizer_close(t);
}

// Each sentence alone (--prompt through the folder's tokenizer), and the 20 as one padded batch:
// every embedding within 2e-6 of transformers' (max abs; measured 2.3e-7 alone and batched).
TEST(MiniLM, EmbeddingsAloneAndBatchedMatchTransformers) {
  json fx = fixture();
  std::string dir = kt::workDir("minilm");
  std::string exe = compileMiniLM(dir);
  ASSERT_FALSE(exe.empty());
  ref::T want = kt::loadNpy(kFixture + "/embeddings.npy");
  const int64_t N = want.shape[0], D = want.shape[1];
  ASSERT_EQ(N, 20);
  ASSERT_EQ(D, 384);
  double alone = 0;
  for (int64_t k = 0; k < N; ++k) {
    std::string s = fx["sentences"][k], quoted;
    for (char ch : s) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    std::string out = dir + "/s" + std::to_string(k);
    auto r = kt::run(exe + " --weights " + kFolder + "/model.safetensors --prompt '" + quoted + "' --output-dir " + out);
    ASSERT_EQ(r.code, 0) << r.output;
    ref::T got = kt::loadNpy(out + "/embedding.npy");
    ASSERT_EQ(got.v.size(), (size_t)D) << s;
    alone = std::max(alone, maxAbsDiff(got.v.data(), &want.v[k * D], D));
    double norm = 0;
    for (float x : got.v) norm += (double)x * x;
    EXPECT_NEAR(norm, 1.0, 1e-5) << s;
  }
  EXPECT_LE(alone, 2e-6);
  ref::T got = runBatch(exe, dir, fx);
  ASSERT_EQ(got.shape, want.shape);
  double batched = maxAbsDiff(got.v.data(), want.v.data(), want.v.size());
  EXPECT_LE(batched, 2e-6);
  printf("max |kiln - transformers|: %.3g alone, %.3g in the padded batch\n", alone, batched);
  // The mask matters: the batch without it (all ones: the padding attended to and averaged)
  // moves the padded sentences' embeddings.
  auto r = kt::run(exe + " --weights " + kFolder + "/model.safetensors --input tokens=" + dir + "/ids.npy --output-dir " + dir +
                   "/nomask");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T unmasked = kt::loadNpy(dir + "/nomask/embedding.npy");
  EXPECT_GT(maxAbsDiff(unmasked.v.data(), want.v.data(), want.v.size()), 1e-2);
}

// Compiled without --batch (one sentence a run: the embedding's batch dim, bound 1, shown by no
// input), the same embedding.
TEST(MiniLM, AModelOfOneSentenceGivesTheSameEmbedding) {
  json fx = fixture();
  std::string dir = kt::workDir("minilm_one");
  std::string exe = compileMiniLM(dir, "");
  ASSERT_FALSE(exe.empty());
  ref::T want = kt::loadNpy(kFixture + "/embeddings.npy");
  auto r = kt::run(exe + " --weights " + kFolder + "/model.safetensors --tokens " + kt::idList(fx["ids"][2].get<std::vector<int32_t>>()) +
                   " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T got = kt::loadNpy(dir + "/out/embedding.npy");
  ASSERT_EQ(got.v.size(), 384u);
  double err = maxAbsDiff(got.v.data(), &want.v[2 * 384], 384);
  printf("one sentence, a model without --batch: max |kiln - transformers| %.3g\n", err);
  EXPECT_LE(err, 2e-6);
}

// --quantize q8_0: the embeddings' cosine to the f32 reference (measured: 0.999855 at worst, 0.999922 on
// average).
TEST(MiniLM, Q8EmbeddingsStayCloseToF32) {
  json fx = fixture();
  std::string dir = kt::workDir("minilm_q8");
  std::string exe = compileMiniLM(dir, "--batch 20 --quantize q8_0");
  ASSERT_FALSE(exe.empty());
  ref::T want = kt::loadNpy(kFixture + "/embeddings.npy");
  ref::T got = runBatch(exe, dir, fx);
  ASSERT_EQ(got.shape, want.shape);
  const int64_t N = want.shape[0], D = want.shape[1];
  double worst = 1, mean = 0;
  for (int64_t k = 0; k < N; ++k) {
    double dot = 0, a = 0, b = 0;
    for (int64_t i = 0; i < D; ++i) {
      dot += (double)got.v[k * D + i] * want.v[k * D + i];
      a += (double)got.v[k * D + i] * got.v[k * D + i];
      b += (double)want.v[k * D + i] * want.v[k * D + i];
    }
    double c = dot / std::sqrt(a * b);
    worst = std::min(worst, c);
    mean += c / N;
  }
  printf("q8_0 embeddings: cosine to f32 %.6f at worst, %.6f on average\n", worst, mean);
  EXPECT_GE(worst, 0.9995);
  EXPECT_LT(worst, 1.0 - 1e-7);  // quantized: not the f32 model by accident
}

}  // namespace
