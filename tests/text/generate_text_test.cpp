// generate_text_test.cpp - generation as users run it: sampling (kilnrt_sample) on logits,
// kilnrt_generate on a compiled GPT-2 (linked as a library, tokens checked against the logits
// each one was drawn from and against a forward recomputation), and the compiled executable's
// --prompt, streamed text, timing line and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <regex>

#include "harness.h"
#include "kilnrt/api.h"
#include "libgpt2_text_lib.h"

namespace fs = std::filesystem;

namespace {
const std::string kFx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/tokenizers";

std::vector<float> randomLogits(int64_t n, uint32_t seed, float scale = 3) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> l((size_t)n);
  for (float &v : l) v = d(rng);
  return l;
}

// How many logits are strictly larger than logits[tok] (0: the most likely).
int64_t rankOf(const std::vector<float> &l, int32_t tok) {
  return std::count_if(l.begin(), l.end(), [&](float v) { return v > l[tok]; });
}

// The nucleus of softmax(l / T) for top_p: the count of most likely tokens whose probability
// first reaches p (plain double arithmetic).
int64_t nucleusSize(const std::vector<float> &l, double T, double p) {
  std::vector<double> q(l.begin(), l.end());
  std::sort(q.begin(), q.end(), std::greater<double>());
  double sum = 0;
  for (double &v : q) sum += v = std::exp((v - q[0]) / T);
  double c = 0;
  for (size_t i = 0; i < q.size(); ++i)
    if ((c += q[i] / sum) >= p) return (int64_t)i + 1;
  return (int64_t)q.size();
}
}  // namespace

TEST(Sampling, TemperatureZeroIsGreedy) {
  for (uint32_t k = 0; k < 20; ++k) {
    std::vector<float> l = randomLogits(500, k);
    kilnrt_generate_options o{};
    o.top_k = 3;  // ignored when greedy
    uint64_t state = k;
    int32_t tok;
    ASSERT_EQ(kilnrt_sample(l.data(), (int64_t)l.size(), &o, &state, &tok), KILNRT_OK);
    EXPECT_EQ(tok, std::max_element(l.begin(), l.end()) - l.begin());
  }
}

TEST(Sampling, TopKNeverLeavesTheKMostLikely) {
  std::vector<float> l = randomLogits(1000, 3, 1);
  for (int k : {1, 5, 40}) {
    kilnrt_generate_options o{};
    o.temperature = 2.0f;  // flat: without the cut, tokens far down would be drawn
    o.top_k = k;
    uint64_t state = 9;
    std::set<int32_t> seen;
    for (int i = 0; i < 3000; ++i) {
      int32_t tok;
      ASSERT_EQ(kilnrt_sample(l.data(), (int64_t)l.size(), &o, &state, &tok), KILNRT_OK);
      EXPECT_LT(rankOf(l, tok), k);
      seen.insert(tok);
    }
    EXPECT_EQ((int)seen.size(), k) << "every one of the k most likely is drawn";
  }
}

TEST(Sampling, TopPNeverLeavesTheNucleus) {
  for (double p : {0.3, 0.9}) {
    std::vector<float> l = randomLogits(300, 5, 2);
    kilnrt_generate_options o{};
    o.temperature = 0.7f;
    o.top_p = (float)p;
    int64_t nucleus = nucleusSize(l, 0.7, p);
    ASSERT_GT(nucleus, 1);
    uint64_t state = 1;
    for (int i = 0; i < 3000; ++i) {
      int32_t tok;
      ASSERT_EQ(kilnrt_sample(l.data(), (int64_t)l.size(), &o, &state, &tok), KILNRT_OK);
      EXPECT_LT(rankOf(l, tok), nucleus) << "p = " << p;
    }
  }
}

// With temperature 1 and no cut, the draws follow softmax(logits): the frequencies of 8 tokens
// over 40000 draws within 4 standard deviations of their probabilities.
TEST(Sampling, DrawsFollowTheSoftmax) {
  std::vector<float> l = {0.1f, 1.5f, -0.7f, 0.9f, 2.0f, -2.0f, 0.0f, 1.0f};
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp(l[i]);
  kilnrt_generate_options o{};
  o.temperature = 1;
  uint64_t state = 77;
  std::vector<int> count(l.size());
  const int N = 40000;
  for (int i = 0; i < N; ++i) {
    int32_t tok;
    ASSERT_EQ(kilnrt_sample(l.data(), (int64_t)l.size(), &o, &state, &tok), KILNRT_OK);
    ++count[tok];
  }
  for (size_t i = 0; i < l.size(); ++i) {
    double q = p[i] / s, sd = std::sqrt(N * q * (1 - q));
    EXPECT_NEAR(count[i], N * q, 4 * sd) << "token " << i;
  }
}

TEST(Sampling, NonFiniteLogitsAreAnError) {
  std::vector<float> l = {0, 1, NAN, 2};
  kilnrt_generate_options o{};
  uint64_t state = 0;
  int32_t tok;
  EXPECT_EQ(kilnrt_sample(l.data(), 4, &o, &state, &tok), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("non-finite value (nan) at token 2"), std::string::npos)
      << kilnrt_last_error();
}

// ---------------------------------------------------------------- kilnrt_generate on GPT-2
namespace {
struct Session {
  kilnrt_session *s = nullptr;
  explicit Session(uint64_t seed = 11) {
    EXPECT_EQ(kilnrt_session_create(&gpt2_text_lib_model, &s), KILNRT_OK) << kilnrt_last_error();
    EXPECT_EQ(kilnrt_session_random_weights(s, seed), KILNRT_OK);
  }
  ~Session() { kilnrt_session_destroy(s); }
  // The last row of the forward entry's logits over `seq`: the reference for a decode step.
  std::vector<float> forwardLastRow(const std::vector<int32_t> &seq) {
    kilnrt_tensor t{KILN_I32, 1, {(int64_t)seq.size()}, const_cast<int32_t *>(seq.data())};
    EXPECT_EQ(kilnrt_session_set_input(s, "tokens", &t), KILNRT_OK);
    EXPECT_EQ(kilnrt_session_run(s, "forward"), KILNRT_OK) << kilnrt_last_error();
    const kilnrt_tensor *out;
    EXPECT_EQ(kilnrt_session_output(s, "logits", &out), KILNRT_OK);
    int64_t V = out->shape[1];
    const float *last = (const float *)out->data + (out->shape[0] - 1) * V;
    return std::vector<float>(last, last + V);
  }
};

struct Record {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  int stop_after = -1;
};
int32_t record(void *user, int32_t token, const float *logits, int64_t vocab) {
  Record &r = *(Record *)user;
  r.tokens.push_back(token);
  r.logits.emplace_back(logits, logits + vocab);
  return (int)r.tokens.size() == r.stop_after;
}

Record generate(const std::vector<int32_t> &prompt, const kilnrt_generate_options &o, kilnrt_generate_stats *st = nullptr,
                int stop_after = -1) {
  Session s;
  Record r;
  r.stop_after = stop_after;
  EXPECT_EQ(kilnrt_generate(s.s, prompt.data(), (int64_t)prompt.size(), &o, record, &r, st), KILNRT_OK)
      << kilnrt_last_error();
  return r;
}

const std::vector<int32_t> kPrompt = {44, 69, 275, 389, 273, 382, 257};
}  // namespace

// Each step's logits equal the forward entry rerun over the whole sequence, and greedy tokens
// are their argmax.
TEST(Generate, StepLogitsMatchAForwardRecomputation) {
  kilnrt_generate_options o{};
  o.max_new_tokens = 12;
  Record r = generate(kPrompt, o);
  ASSERT_EQ(r.tokens.size(), 12u);
  Session ref;
  std::vector<int32_t> seq = kPrompt;
  for (size_t k = 0; k < r.tokens.size(); ++k) {
    std::vector<float> want = ref.forwardLastRow(seq);
    ASSERT_EQ(want.size(), r.logits[k].size());
    float err = 0, mx = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      err = std::max(err, std::abs(want[i] - r.logits[k][i]));
      mx = std::max(mx, std::abs(want[i]));
    }
    EXPECT_LE(err, 1e-4f * mx + 1e-6f) << "step " << k;
    EXPECT_EQ(r.tokens[k], std::max_element(r.logits[k].begin(), r.logits[k].end()) - r.logits[k].begin());
    seq.push_back(r.tokens[k]);
  }
}

TEST(Generate, SampledTokensStayWithinTopKAndTopPOfTheirLogits) {
  kilnrt_generate_options o{};
  o.max_new_tokens = 40;
  o.temperature = 50.0f;  // random weights give nearly flat logits: a high temperature keeps them apart
  o.top_k = 4;
  o.seed = 5;
  Record r = generate(kPrompt, o);
  ASSERT_EQ(r.tokens.size(), 40u);
  std::set<int32_t> distinct(r.tokens.begin(), r.tokens.end());
  EXPECT_GT(distinct.size(), 3u);
  for (size_t k = 0; k < r.tokens.size(); ++k) EXPECT_LT(rankOf(r.logits[k], r.tokens[k]), 4) << "step " << k;
  o.top_k = 0;
  o.top_p = 0.5f;
  o.temperature = 0.05f;
  r = generate(kPrompt, o);
  for (size_t k = 0; k < r.tokens.size(); ++k)
    EXPECT_LT(rankOf(r.logits[k], r.tokens[k]), nucleusSize(r.logits[k], 0.05, 0.5)) << "step " << k;
}

TEST(Generate, ASeedNamesOneTextAndTemperatureZeroIsGreedy) {
  kilnrt_generate_options o{};
  o.max_new_tokens = 20;
  Record greedy = generate(kPrompt, o);
  o.top_k = 7;
  o.top_p = 0.3f;
  o.seed = 99;
  EXPECT_EQ(generate(kPrompt, o).tokens, greedy.tokens) << "temperature 0: the sampling options change nothing";
  o.temperature = 30.0f;
  o.top_k = 0;
  o.top_p = 1;
  Record a = generate(kPrompt, o), b = generate(kPrompt, o);
  EXPECT_EQ(a.tokens, b.tokens);
  o.seed = 100;
  EXPECT_NE(generate(kPrompt, o).tokens, a.tokens);
  EXPECT_NE(a.tokens, greedy.tokens);
}

TEST(Generate, StopsAtEosTheCallbackAndTheContext) {
  kilnrt_generate_options o{};
  o.max_new_tokens = 20;
  kilnrt_generate_stats st{};
  Record greedy = generate(kPrompt, o, &st);
  EXPECT_EQ(st.stop, KILNRT_STOP_LENGTH);
  EXPECT_EQ(st.prompt_tokens, (int64_t)kPrompt.size());
  EXPECT_EQ(st.generated_tokens, 20);
  EXPECT_EQ(st.context, 64);
  o.has_eos = 1;
  o.eos = greedy.tokens[3];
  int64_t first = std::find(greedy.tokens.begin(), greedy.tokens.end(), o.eos) - greedy.tokens.begin();
  Record r = generate(kPrompt, o, &st);
  EXPECT_EQ(st.stop, KILNRT_STOP_EOS);
  EXPECT_EQ((int64_t)r.tokens.size(), first + 1);
  o.has_eos = 0;
  r = generate(kPrompt, o, &st, 5);
  EXPECT_EQ(st.stop, KILNRT_STOP_CALLBACK);
  EXPECT_EQ(r.tokens.size(), 5u);
  o.max_new_tokens = 100;
  r = generate(kPrompt, o, &st);
  EXPECT_EQ(st.stop, KILNRT_STOP_CONTEXT);
  EXPECT_EQ(r.tokens.size(), 64 - kPrompt.size() + 1);
}

TEST(Generate, BadRequestsAreClearErrors) {
  Session s;
  kilnrt_generate_options o{};
  o.max_new_tokens = 3;
  std::vector<int32_t> big(65, 1);
  EXPECT_EQ(kilnrt_generate(s.s, big.data(), 65, &o, nullptr, nullptr, nullptr), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("the prompt is 65 tokens; this model's context is 64"), std::string::npos)
      << kilnrt_last_error();
  int32_t bad = 400;
  EXPECT_EQ(kilnrt_generate(s.s, &bad, 1, &o, nullptr, nullptr, nullptr), KILNRT_USER_ERROR);
  o.temperature = -1;
  EXPECT_EQ(kilnrt_generate(s.s, kPrompt.data(), 3, &o, nullptr, nullptr, nullptr), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("temperature"), std::string::npos);
  o.temperature = 0;
  o.top_p = 2;
  EXPECT_EQ(kilnrt_generate(s.s, kPrompt.data(), 3, &o, nullptr, nullptr, nullptr), KILNRT_USER_ERROR);
}

// ---------------------------------------------------------------- the executable
namespace {
// A folder with random GPT-2 weights and the BPE tokenizer beside them, as a checkpoint ships.
std::string checkpoint() {
  static std::string dir = [] {
    // One per test: ctest runs the tests of this binary in parallel processes.
    std::string d = kt::workDir(std::string("text_ckpt_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(d);
    fs::create_directories(d);
    kt::run(std::string(KILN_BIN) + "/gpt2_text --random-weights --seed 2 --save-weights " + d + "/model.safetensors --tokens 1");
    fs::copy_file(kFx + "/bpe/tokenizer.json", d + "/tokenizer.json");
    return d;
  }();
  return dir;
}
std::string exe() { return std::string(KILN_BIN) + "/gpt2_text --weights " + checkpoint() + "/model.safetensors"; }

std::vector<int32_t> npyIds(const std::string &path) {
  kilnrt_tensor t;
  EXPECT_EQ(kilnrt_npy_read(path.c_str(), &t), KILNRT_OK) << path;
  std::vector<int32_t> v((int32_t *)t.data, (int32_t *)t.data + kilnrt_tensor_numel(&t));
  kilnrt_tensor_free(&t);
  return v;
}

std::string decode(const std::vector<int32_t> &ids) {
  kilnrt_tokenizer *t;
  EXPECT_EQ(kilnrt_tokenizer_open((kFx + "/bpe").c_str(), &t), KILNRT_OK);
  const char *s;
  size_t n;
  EXPECT_EQ(kilnrt_tokenizer_decode(t, ids.data(), (int64_t)ids.size(), 1, &s, &n), KILNRT_OK);
  std::string r(s, n);
  kilnrt_tokenizer_close(t);
  return r;
}
}  // namespace

// --prompt: the text through the tokenizer beside the weights; the generated text is streamed on
// stdout, the same tokens as --tokens with the prompt's ids, and the timing line on stderr.
TEST(GenerateCli, PromptInTextOut) {
  std::string d = kt::workDir("text_cli");
  auto r = kt::run(exe() + " --prompt 'Le café est' --generate 9 --temperature 20 --seed 3 --output-dir " + d + "/a");
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<int32_t> ids = npyIds(d + "/a/generated.npy");
  ASSERT_EQ(ids.size(), 9u);
  EXPECT_NE(r.output.find(decode(ids) + "\n"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(prompt: 6 tokens in [0-9.]+ ms \([0-9.]+ tok/s\); generated: 9 tokens in [0-9.]+ ms \([0-9.]+ ms/token, [0-9.]+ tok/s\))")))
      << r.output;
  // The same ids given as --tokens (the BPE fixture's encoding of the prompt) give the same tokens.
  auto t = kt::run(exe() + " --tokens 44,69,275,389,273,382 --generate 9 --temperature 20 --seed 3 --quiet --output-dir " + d + "/b");
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_EQ(npyIds(d + "/b/generated.npy"), ids);
  EXPECT_EQ(t.output.find("prompt:"), std::string::npos) << "--quiet: " << t.output;
  // --prompt-file reads the same text.
  std::ofstream(d + "/prompt.txt") << "Le café est";
  auto f = kt::run(exe() + " --prompt-file " + d + "/prompt.txt --generate 9 --temperature 20 --seed 3 --output-dir " + d + "/c");
  ASSERT_EQ(f.code, 0) << f.output;
  EXPECT_EQ(npyIds(d + "/c/generated.npy"), ids);
  // Another seed, another text; temperature 0 (the default) is greedy and prints the same text twice.
  auto o = kt::run(exe() + " --prompt 'Le café est' --generate 9 --temperature 20 --seed 4 --output-dir " + d + "/d");
  EXPECT_NE(npyIds(d + "/d/generated.npy"), ids);
  auto g1 = kt::run(exe() + " --prompt 'Le café est' --generate 9 --quiet");
  auto g2 = kt::run(exe() + " --prompt 'Le café est' --generate 9 --quiet --top-k 3");
  EXPECT_EQ(g1.code, 0);
  EXPECT_EQ(g1.output, g2.output);
}

TEST(GenerateCli, BadInputIsAClearError) {
  auto fails = [](const std::string &cmd, const std::string &needle) {
    auto r = kt::run(cmd);
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << cmd << "\n" << r.output;
  };
  std::string longText;
  for (int i = 0; i < 80; ++i) longText += " word";
  fails(exe() + " --prompt '" + longText + "' --generate 2", "tokens, longer than this model's context of 64 tokens");
  std::string d = kt::workDir("text_bad");
  fs::remove_all(d);
  fs::create_directories(d);
  fs::copy_file(checkpoint() + "/model.safetensors", d + "/model.safetensors");
  std::string bare = std::string(KILN_BIN) + "/gpt2_text --weights " + d + "/model.safetensors";
  fails(bare + " --prompt hi --generate 2", "--prompt needs a tokenizer");
  std::ofstream(d + "/broken.json") << "{\"model\": ";
  fails(bare + " --tokenizer " + d + "/broken.json --prompt hi", "broken.json': not valid JSON");
  fails(bare + " --tokenizer " + d + "/missing --prompt hi", "missing' does not exist");
  fails(exe() + " --prompt-file " + d + "/nope.txt", "nope.txt': cannot open");
  fails(exe() + " --prompt hi --temperature 0.5", "--temperature applies to --generate");
  fails(exe() + " --prompt hi --tokens 1,2", "give --prompt or --tokens");
  fails(exe() + " --prompt ''", "the prompt is empty");
  fails(exe() + " --prompt hi --generate 2 --entry decode", "--generate runs the prompt through entry 'prefill'");
  // A tokenizer larger than the model's vocabulary (the gpt2 example has 256 tokens).
  fails(std::string(KILN_BIN) + "/gpt2 --random-weights --tokenizer " + kFx + "/bpe --prompt hi",
        "the tokenizer has 400 tokens, more than this model's vocabulary of 256");
}

// BERT: the WordPiece tokenizer adds [CLS] and [SEP]; token_type_ids are set to zeros.
TEST(GenerateCli, BertPromptGoesThroughWordPiece) {
  std::string d = kt::workDir("text_bert");
  std::string bert = std::string(KILN_BIN) + "/bert --random-weights --seed 4";
  auto r = kt::run(bert + " --tokenizer " + kFx + "/wordpiece --prompt 'Le café, très chaud!' --output-dir " + d + "/a");
  ASSERT_EQ(r.code, 0) << r.output;
  kilnrt_tokenizer *t;
  ASSERT_EQ(kilnrt_tokenizer_open((kFx + "/wordpiece").c_str(), &t), KILNRT_OK);
  const int32_t *ids;
  int64_t n;
  std::string text = "Le café, très chaud!";
  ASSERT_EQ(kilnrt_tokenizer_encode(t, text.data(), text.size(), 1, &ids, &n), KILNRT_OK);
  std::vector<int32_t> v(ids, ids + n);
  kilnrt_tokenizer_close(t);
  EXPECT_EQ(v.front(), 2);  // [CLS]
  EXPECT_EQ(v.back(), 3);   // [SEP]
  auto s = kt::run(bert + " --tokens tokens=" + kt::idList(v) + " --tokens token_type_ids=" +
                   kt::idList(std::vector<int32_t>(v.size(), 0)) + " --output-dir " + d + "/b");
  ASSERT_EQ(s.code, 0) << s.output;
  EXPECT_EQ(kt::loadNpy(d + "/a/hidden.npy").v, kt::loadNpy(d + "/b/hidden.npy").v) << "the same run as the ids";
}

// examples/embed: a C program that links the model as a library prints the prompt and its completion.
TEST(Embed, CProgramPrintsACompletion) {
  auto r = kt::run(std::string(KILN_BIN) + "/gpt2-complete --weights " + checkpoint() + "/model.safetensors --prompt 'Le café est' --max-new-tokens 6");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("Le café est", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("generated: 6 tokens"), std::string::npos) << r.output;
  auto g = kt::run(exe() + " --prompt 'Le café est' --generate 6 --quiet");
  ASSERT_EQ(g.code, 0);
  EXPECT_NE(r.output.find("Le café est" + g.output), std::string::npos) << "the same greedy text: " << r.output << " / " << g.output;
}
