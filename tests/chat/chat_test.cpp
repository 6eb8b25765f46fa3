// chat_test.cpp - a conversation continued over the KV cache: examples/llama's extend entry (a
// chunk of tokens at `past`) and kilnrt_generate's `past`, on the Llama checkpoint transformers
// wrote (tests/fixtures/hf_llama, linked as the library llama_lib), against the forward entry
// rerun over the whole sequence; the stop ids; the errors of a chunk that does not fit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kilnrt/api.h"
#include "llama_session.h"
#include "libllama_lib.h"

namespace {

using kiln_test::relErr;
struct Session : kiln_test::LlamaSession {
  Session() : LlamaSession(llama_lib_model) {}
};

std::vector<int32_t> sequence(int n) {  // ids spread over the vocabulary of 300
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back((i * 37 + 11) % 300);
  return v;
}

// prefill of 5 tokens, then chunks of 7, 1 and 6 at past 5, 12 and 13: each chunk's logits equal
// the forward's row of its last token (all rows of one run over the 19 tokens).
// Measured: 1.4e-7 of the largest logit at most.
TEST(Extend, ChunksAtPastEqualTheForwardRows) {
  std::vector<int32_t> ids = sequence(19);
  Session ref;
  EXPECT_EQ(ref.set("tokens", ids), KILNRT_OK) << kilnrt_last_error();
  std::vector<float> all = ref.run("forward", "logits");
  const size_t V = all.size() / ids.size();
  ASSERT_EQ(V, 300u);
  Session s;
  ASSERT_EQ(s.set("tokens", std::vector<int32_t>(ids.begin(), ids.begin() + 5)), KILNRT_OK) << kilnrt_last_error();
  std::vector<float> first = s.run("prefill", "last_logits");
  ASSERT_EQ(first.size(), V);
  EXPECT_LE(relErr(first.data(), &all[4 * V], V), 1e-6);
  for (auto [past, n] : std::vector<std::pair<int, int>>{{5, 7}, {12, 1}, {13, 6}}) {
    SCOPED_TRACE("chunk of " + std::to_string(n) + " at past " + std::to_string(past));
    ASSERT_EQ(s.set("chunk", std::vector<int32_t>(ids.begin() + past, ids.begin() + past + n)), KILNRT_OK) << kilnrt_last_error();
    ASSERT_EQ(s.set("past", {past}), KILNRT_OK) << kilnrt_last_error();
    std::vector<float> got = s.run("extend", "chunk_logits");
    ASSERT_EQ(got.size(), V);
    EXPECT_LE(relErr(got.data(), &all[(past + n - 1) * V], V), 1e-6);
  }
}

struct Record {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};
int32_t record(void *user, int32_t token, const float *logits, int64_t vocab) {
  Record &r = *(Record *)user;
  r.tokens.push_back(token);
  r.logits.emplace_back(logits, logits + vocab);
  return 0;
}

// A conversation of three turns in one session, each call continuing at the past the previous
// left (its prompt and its tokens but the last), gives the tokens and logits of generating from
// scratch over the whole conversation in a fresh session (logits within 1e-6 of the largest;
// measured 5.9e-7).
TEST(Extend, AContinuedConversationEqualsGeneratingFromScratch) {
  Session s;
  std::vector<int32_t> convo;  // every token so far: the turns and the answers
  size_t cached = 0;           // the positions the session's cache holds
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    for (int32_t u : sequence(4 + turn)) convo.push_back((u + 101 * turn) % 300);
    // The continued call: the tokens past the cache (the previous answer's last one first).
    std::vector<int32_t> fresh(convo.begin() + (int64_t)cached, convo.end());
    kilnrt_generate_options o{};
    o.max_new_tokens = 5;
    o.past = (int64_t)cached;
    Record r;
    kilnrt_generate_stats st{};
    ASSERT_EQ(kilnrt_generate(s.s, fresh.data(), (int64_t)fresh.size(), &o, record, &r, &st), KILNRT_OK)
        << kilnrt_last_error();
    EXPECT_EQ(st.prompt_tokens, (int64_t)fresh.size());
    // From scratch: the whole conversation in a new session.
    Session ref;
    kilnrt_generate_options o0{};
    o0.max_new_tokens = 5;
    Record want;
    ASSERT_EQ(kilnrt_generate(ref.s, convo.data(), (int64_t)convo.size(), &o0, record, &want, nullptr), KILNRT_OK)
        << kilnrt_last_error();
    ASSERT_EQ(r.tokens, want.tokens);
    for (size_t k = 0; k < r.logits.size(); ++k)
      EXPECT_LE(relErr(r.logits[k].data(), want.logits[k].data(), r.logits[k].size()), 1e-6) << "token " << k;
    convo.insert(convo.end(), r.tokens.begin(), r.tokens.end());
    cached = convo.size() - 1;  // every generated token but the last has run
  }
}

// Generation stops after any of the stop ids, and says so.
TEST(Extend, StopsAtAnyStopId) {
  std::vector<int32_t> prompt = sequence(6);
  Record free;
  {
    Session s;
    kilnrt_generate_options o{};
    o.max_new_tokens = 8;
    ASSERT_EQ(kilnrt_generate(s.s, prompt.data(), 6, &o, record, &free, nullptr), KILNRT_OK) << kilnrt_last_error();
  }
  ASSERT_EQ(free.tokens.size(), 8u);
  // Stop ids: one never drawn, and the third token drawn (not its first occurrence's index if
  // it repeats: the run stops at the first).
  int32_t third = free.tokens[2];
  size_t at = std::find(free.tokens.begin(), free.tokens.end(), third) - free.tokens.begin();
  int32_t never = 0;
  while (std::find(free.tokens.begin(), free.tokens.end(), never) != free.tokens.end()) ++never;
  std::vector<int32_t> stops = {never, third};
  Session s;
  kilnrt_generate_options o{};
  o.max_new_tokens = 8;
  o.stop_ids = stops.data();
  o.n_stop_ids = 2;
  Record r;
  kilnrt_generate_stats st{};
  ASSERT_EQ(kilnrt_generate(s.s, prompt.data(), 6, &o, record, &r, &st), KILNRT_OK) << kilnrt_last_error();
  EXPECT_EQ(st.stop, KILNRT_STOP_EOS);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(free.tokens.begin(), free.tokens.begin() + at + 1));
}

// A chunk that would run past the context, a negative past, and past without the new tokens are
// clear errors, and leave the session usable.
TEST(Extend, AChunkPastTheContextIsAClearError) {
  Session s;
  ASSERT_EQ(s.set("chunk", sequence(10)), KILNRT_OK) << kilnrt_last_error();
  ASSERT_EQ(s.set("past", {60}), KILNRT_OK) << kilnrt_last_error();  // the context is 64
  EXPECT_EQ(kilnrt_session_run(s.s, "extend"), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("10 tokens at past = 60 run past the context of 64 tokens"), std::string::npos)
      << kilnrt_last_error();
  std::vector<int32_t> ids = sequence(10);
  kilnrt_generate_options o{};
  o.max_new_tokens = 2;
  o.past = 58;
  EXPECT_EQ(kilnrt_generate(s.s, ids.data(), 10, &o, nullptr, nullptr, nullptr), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("the conversation is 68 tokens; this model's context is 64 tokens"),
            std::string::npos)
      << kilnrt_last_error();
  o.past = -1;
  EXPECT_EQ(kilnrt_generate(s.s, ids.data(), 10, &o, nullptr, nullptr, nullptr), KILNRT_USER_ERROR);
  o.past = 3;
  EXPECT_EQ(kilnrt_generate(s.s, nullptr, 0, &o, nullptr, nullptr, nullptr), KILNRT_USER_ERROR);
  o.past = 0;
  EXPECT_EQ(kilnrt_generate(s.s, ids.data(), 10, &o, nullptr, nullptr, nullptr), KILNRT_OK) << kilnrt_last_error();
}

}  // namespace
