// smollm2_test.cpp - a real chat model end to end: SmolLM2-135M-Instruct from its Q4_1 GGUF file
// (scripts/fetch_models.sh, the ctest fixture models/fetch) against transformers, which reads the
// same file and dequantizes it to f32 (tests/reference/make_smollm2_fixtures.py wrote
// tests/fixtures/smollm2: 10 chat prompts, their rendering by apply_chat_template, their ids, the
// last position's logits and 48 greedy tokens).
//  * the chat template stored in the file, rendered by kiln's Jinja subset, equals
//    apply_chat_template's text, and kiln's tokenizer from the file gives transformers' ids;
//  * examples/llama compiled from the file's metadata: each prompt's last logits within 2e-5 of
//    the largest (measured: 8e-5 of 29.8 at most, 2.7e-6), and `--chat --generate 48` gives
//    transformers' greedy tokens (none of the 10 has a near tie).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "kilnrt/api.h"

namespace {
using json = nlohmann::json;

const std::string kGguf = std::string(KILN_MODELS_DIR) + "/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kFixture = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/smollm2";

json fixture() {
  std::ifstream f(kFixture + "/prompts.json");
  return json::parse(f);
}

TEST(SmolLM2, ChatTemplateAndTokensMatchTransformers) {
  json fx = fixture();
  kilnrt_tokenizer *t;
  ASSERT_EQ(kilnrt_tokenizer_open(kGguf.c_str(), &t), KILNRT_OK) << kilnrt_last_error();
  const char *tmpl = kilnrt_tokenizer_chat_template(t);
  ASSERT_NE(tmpl, nullptr);
  EXPECT_EQ(kilnrt_tokenizer_eos(t), fx["end_of_turn"].get<int32_t>());
  // Generation stops at the end of the turn (<|im_end|>, the file's eos) and at <|endoftext|>.
  const int32_t *stops;
  int64_t ns = kilnrt_tokenizer_stop_ids(t, &stops);
  EXPECT_EQ(std::vector<int32_t>(stops, stops + ns),
            (std::vector<int32_t>{kilnrt_tokenizer_token_id(t, "<|endoftext|>"), fx["end_of_turn"].get<int32_t>()}));
  for (const json &c : fx["cases"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    json ctx = {{"messages", {{{"role", "user"}, {"content", c["prompt"]}}}}, {"add_generation_prompt", true}};
    const char *text;
    size_t len;
    ASSERT_EQ(kilnrt_chat_render(tmpl, ctx.dump().c_str(), &text, &len), KILNRT_OK) << kilnrt_last_error();
    EXPECT_EQ(std::string(text, len), c["text"].get<std::string>());
    const int32_t *ids;
    int64_t n;
    ASSERT_EQ(kilnrt_tokenizer_encode(t, text, len, 1, &ids, &n), KILNRT_OK) << kilnrt_last_error();
    EXPECT_EQ(std::vector<int32_t>(ids, ids + n), c["ids"].get<std::vector<int32_t>>());
  }
  kilnrt_tokenizer_close(t);
}

std::string compileSmolLM2(const std::string &dir) {
  auto c = kt::run(std::string(KILN_BIN) + "/llama-compile --config " + kGguf + " --ctx 512 --quiet --cache-dir " +
                   KILN_TEST_CACHE " -o " + dir + "/smollm");
  EXPECT_EQ(c.code, 0) << c.output;
  return c.code == 0 ? dir + "/smollm" : "";
}

TEST(SmolLM2, LogitsAndGreedyAnswersMatchTransformers) {
  json fx = fixture();
  std::string dir = kt::workDir("smollm2");
  std::string exe = compileSmolLM2(dir);
  ASSERT_FALSE(exe.empty());
  ref::T last = kt::loadNpy(kFixture + "/last_logits.npy");
  const int64_t V = last.shape[1];
  double worst = 0;
  for (size_t k = 0; k < fx["cases"].size(); ++k) {
    const json &c = fx["cases"][k];
    SCOPED_TRACE(c["prompt"].get<std::string>());
    auto r = kt::run(exe + " --weights " + kGguf + " --entry prefill --tokens " + kt::idList(c["ids"].get<std::vector<int32_t>>()) +
                     " --output-dir " + dir + "/p" + std::to_string(k));
    ASSERT_EQ(r.code, 0) << r.output;
    ref::T got = kt::loadNpy(dir + "/p" + std::to_string(k) + "/last_logits.npy");
    ASSERT_EQ(got.v.size(), (size_t)V);
    double maxRef = 0, maxDiff = 0;
    for (int64_t i = 0; i < V; ++i) {
      maxRef = std::max(maxRef, (double)std::abs(last.v[k * V + i]));
      maxDiff = std::max(maxDiff, (double)std::abs(got.v[i] - last.v[k * V + i]));
    }
    worst = std::max(worst, maxDiff / maxRef);
    EXPECT_LE(maxDiff, 2e-5 * maxRef) << "max |kiln - transformers| " << maxDiff << " of max |logit| " << maxRef;
    // The answer: the prompt through --chat (kiln's template and tokenizer), 48 greedy tokens.
    std::string out = dir + "/g" + std::to_string(k);
    std::string quoted;  // the prompt as one shell word
    for (char ch : c["prompt"].get<std::string>()) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    auto g = kt::run(exe + " --weights " + kGguf + " --chat --prompt '" + quoted + "' --generate 48 --quiet --output-dir " + out);
    ASSERT_EQ(g.code, 0) << g.output;
    ref::T ids = kt::loadNpy(out + "/generated.npy");
    std::vector<int32_t> gotIds(ids.v.begin(), ids.v.end());
    EXPECT_FALSE(c["near_tie"].get<bool>()) << "the fixture reports a near tie: regenerate or accept it";
    EXPECT_EQ(gotIds, c["generated"].get<std::vector<int32_t>>());
    std::string answer = c["answer"].get<std::string>();
    answer = answer.substr(0, answer.find("<|im_end|>"));  // the text printed: special tokens left out
    EXPECT_EQ(g.output.rfind(answer, 0), 0u) << "printed: " << g.output << "\nwanted: " << answer;
  }
  printf("largest logit error over the 10 prompts: %.3g of the largest logit\n", worst);
}

// The conversation on the terminal (--chat without --prompt: a message per line of stdin) keeps
// the KV cache between turns, running only each turn's new tokens through the extend entry: three
// turns give transformers' greedy answers, each computed from scratch over the whole conversation
// (tests/reference/make_smollm2_chat_fixtures.py).
TEST(SmolLM2, AConversationKeepsTheCacheAndMatchesTransformers) {
  std::ifstream f(kFixture + "/conversation.json");
  json fx = json::parse(f);
  std::string dir = kt::workDir("smollm2_chat");
  std::string exe = compileSmolLM2(dir);
  ASSERT_FALSE(exe.empty());
  std::string lines;
  for (const json &t : fx["turns"]) lines += t["user"].get<std::string>() + "\n";
  std::ofstream(dir + "/stdin.txt") << lines;
  auto r = kt::run(exe + " --weights " + kGguf + " --chat --generate 48 --output-dir " + dir + "/out < " + dir + "/stdin.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<int32_t> want;
  size_t cached = 0;
  for (size_t k = 0; k < fx["turns"].size(); ++k) {
    const json &t = fx["turns"][k];
    SCOPED_TRACE(t["user"].get<std::string>());
    EXPECT_FALSE(t["near_tie"].get<bool>()) << "the fixture reports a near tie: regenerate or accept it";
    auto gen = t["generated"].get<std::vector<int32_t>>();
    want.insert(want.end(), gen.begin(), gen.end());
    EXPECT_NE(r.output.find(t["answer"].get<std::string>() + "\n"), std::string::npos) << r.output;
    // Only the tokens past what the cache holds ran (the earlier turns and answers but the last token).
    size_t n = t["ids"].size();
    std::string line = "turn " + std::to_string(k + 1) + ": " + std::to_string(n - cached) + " new prompt tokens (" +
                       std::to_string(cached) + " reused from the cache)";
    EXPECT_NE(r.output.find(line), std::string::npos) << "wanted: " << line << "\n" << r.output;
    cached = n + gen.size() - 1;
  }
  ref::T ids = kt::loadNpy(dir + "/out/generated.npy");
  EXPECT_EQ(std::vector<int32_t>(ids.v.begin(), ids.v.end()), want);
  std::ifstream c(dir + "/out/conversation.json");
  json convo = json::parse(c);
  ASSERT_EQ(convo.size(), 2 * fx["turns"].size());
  EXPECT_EQ(convo[5]["content"], fx["turns"][2]["answer"]);
  // Compiled with a context of 64: the first turn (42 tokens) is answered, the second would not
  // fit with room for an answer, and the conversation ends there with a message naming the context.
  auto small = kt::run(std::string(KILN_BIN) + "/llama-compile --config " + kGguf + " --ctx 64 --quiet --cache-dir " +
                   KILN_TEST_CACHE " -o " + dir + "/small");
  ASSERT_EQ(small.code, 0) << small.output;
  auto s = kt::run(dir + "/small --weights " + kGguf + " --chat --generate 48 < " + dir + "/stdin.txt");
  EXPECT_EQ(s.code, 0) << s.output;
  EXPECT_NE(s.output.find(fx["turns"][0]["answer"].get<std::string>() + "\n"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("the compiled context is 64 tokens: it ends here"), std::string::npos) << s.output;
  EXPECT_EQ(s.output.find("turn 2:"), std::string::npos) << s.output;
}

}  // namespace
