// ragged_test.cpp - sequences decoded together, each at its own past and cache slot: examples/llama
// compiled with --batch 4 (a KV cache per slot), on the Llama checkpoint transformers wrote
// (tests/fixtures/hf_llama, linked as the library llama_batch_lib). Prompts of different lengths
// go into slots of their own through the extend entry (a chunk at `past` of slot `slot`, whole or
// in pieces); decode_batch then steps the active sequences, row r at past_batch[r] of the cache of
// slot slots[r], with slots left empty between them and sequences leaving the batch. Every row's
// logits are checked against the forward entry run over that sequence alone (its row of the
// token); the errors of slots given twice or out of range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kilnrt/api.h"
#include "llama_session.h"
#include "libllama_batch_lib.h"

namespace {
constexpr size_t kVocab = 300;

using kiln_test::relErr;
struct Session : kiln_test::LlamaSession {
  Session() : LlamaSession(llama_batch_lib_model) {}
};

std::vector<int32_t> sequence(int n, int salt) {  // ids spread over the vocabulary
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back((i * 37 + 11 + 53 * salt) % (int)kVocab);
  return v;
}

// The logits of every row of `ids` run alone through the forward entry (its own session).
std::vector<float> alone(const std::vector<int32_t> &ids) {
  Session ref;
  EXPECT_EQ(ref.set("tokens", ids), KILNRT_OK) << kilnrt_last_error();
  return ref.run("forward", "logits");
}

// Three prompts of 5, 9 and 3 tokens into slots 2, 0 and 3 (slot 1 stays empty; the second
// prompt in chunks of 4 and 5), then three decode steps: all three sequences (pasts 5, 9 and 3),
// then the first and the third in the other order (the second has left), then the third alone.
// Each row equals that sequence's row run alone. Measured: 6.3e-7 of the largest logit at most.
TEST(Ragged, SequencesAtTheirOwnPastAndSlotEqualEachRunAlone) {
  const std::vector<int> lengths = {5, 9, 3}, slots = {2, 0, 3};
  std::vector<std::vector<int32_t>> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(sequence(lengths[i] + 3, i));  // the prompt and 3 more tokens
  double worst = 0;
  auto expectRow = [&](const float *got, int i, int pos, const std::string &what) {
    std::vector<float> ref = alone(std::vector<int32_t>(seqs[i].begin(), seqs[i].begin() + pos + 1));
    ASSERT_EQ(ref.size(), (size_t)(pos + 1) * kVocab);
    double e = relErr(got, &ref[(size_t)pos * kVocab], kVocab);
    worst = std::max(worst, e);
    EXPECT_LE(e, 1e-6) << what << ": sequence " << i << " at position " << pos;
  };
  Session s;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::pair<int, int>> chunks = i == 1 ? std::vector<std::pair<int, int>>{{0, 4}, {4, 5}}
                                                     : std::vector<std::pair<int, int>>{{0, lengths[i]}};
    for (auto [past, n] : chunks) {
      ASSERT_EQ(s.set("chunk", std::vector<int32_t>(seqs[i].begin() + past, seqs[i].begin() + past + n)), KILNRT_OK);
      ASSERT_EQ(s.set("past", {past}), KILNRT_OK);
      ASSERT_EQ(s.set("slot", {slots[i]}), KILNRT_OK) << kilnrt_last_error();
      std::vector<float> got = s.run("extend", "chunk_logits");
      ASSERT_EQ(got.size(), kVocab);
      expectRow(got.data(), i, past + n - 1, "extend");
    }
  }
  std::vector<int> pos = lengths;  // each sequence's next position
  for (const std::vector<int> &rows : {std::vector<int>{0, 1, 2}, {2, 0}, {2}}) {
    std::vector<int32_t> tokens, pasts, rowSlots;
    for (int i : rows) {
      tokens.push_back(seqs[i][pos[i]]);
      pasts.push_back(pos[i]);
      rowSlots.push_back(slots[i]);
    }
    ASSERT_EQ(s.set("token_batch", tokens), KILNRT_OK);
    ASSERT_EQ(s.set("past_batch", pasts), KILNRT_OK);
    ASSERT_EQ(s.set("slots", rowSlots), KILNRT_OK) << kilnrt_last_error();
    std::vector<float> got = s.run("decode_batch", "next_logits_batch");
    ASSERT_EQ(got.size(), rows.size() * kVocab);
    for (size_t r = 0; r < rows.size(); ++r) expectRow(&got[r * kVocab], rows[r], pos[rows[r]], "decode_batch row " + std::to_string(r));
    for (int i : rows) ++pos[i];
  }
  printf("[ measured ] ragged rows against each sequence alone: %.2e of the largest logit\n", worst);
}

// A row's logits do not depend on the other rows of the step: the same step of one sequence
// alone, with two others before it, and after one other, gives the same bits (each row's
// reductions run in one order whatever the batch; the step rewrites the cache row it writes with
// the same values).
TEST(Ragged, ARowsLogitsAreTheSameBitsWhateverElseIsInTheBatch) {
  Session s;
  const std::vector<int> slots = {1, 3, 0};
  std::vector<std::vector<int32_t>> seqs;
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(sequence(4 + 2 * i, i + 5));
    ASSERT_EQ(s.set("chunk", seqs[i]), KILNRT_OK);
    ASSERT_EQ(s.set("past", {0}), KILNRT_OK);
    ASSERT_EQ(s.set("slot", {slots[i]}), KILNRT_OK);
    s.run("extend", "chunk_logits");
  }
  auto step = [&](const std::vector<int> &rows) {
    std::vector<int32_t> tokens, pasts, rowSlots;
    for (int i : rows) tokens.push_back(17 + i), pasts.push_back((int32_t)seqs[i].size()), rowSlots.push_back(slots[i]);
    EXPECT_EQ(s.set("token_batch", tokens), KILNRT_OK);
    EXPECT_EQ(s.set("past_batch", pasts), KILNRT_OK);
    EXPECT_EQ(s.set("slots", rowSlots), KILNRT_OK);
    std::vector<float> all = s.run("decode_batch", "next_logits_batch");
    size_t r = std::find(rows.begin(), rows.end(), 1) - rows.begin();
    return std::vector<float>(all.begin() + r * kVocab, all.begin() + (r + 1) * kVocab);
  };
  std::vector<float> one = step({1}), three = step({0, 2, 1}), two = step({1, 2});
  EXPECT_EQ(one, three) << "sequence 1 alone and third of three";
  EXPECT_EQ(one, two) << "sequence 1 alone and first of two";
}

// kilnrt_generate on a model compiled with --batch: the prompt (a batch of one, stored as
// [1, L]) through prefill, then decode at past = L, L + 1, ...: each greedy step's logits equal
// the forward entry's row over the prompt and the tokens so far (the prompt's length was once
// taken from the batch dim, and decoding went on at past 1).
int32_t keep(void *user, int32_t, const float *logits, int64_t vocab) {
  ((std::vector<std::vector<float>> *)user)->emplace_back(logits, logits + vocab);
  return 0;
}
TEST(Ragged, GenerateOnABatchedModelDecodesAfterThePrompt) {
  Session s;
  std::vector<int32_t> ids = sequence(6, 9);
  kilnrt_generate_options o{};
  o.max_new_tokens = 4;
  std::vector<std::vector<float>> steps;
  kilnrt_generate_stats st{};
  ASSERT_EQ(kilnrt_generate(s.s, ids.data(), (int64_t)ids.size(), &o, keep, &steps, &st), KILNRT_OK) << kilnrt_last_error();
  EXPECT_EQ(st.prompt_tokens, 6);
  ASSERT_EQ(steps.size(), 4u);
  for (size_t k = 0; k < steps.size(); ++k) {
    std::vector<float> ref = alone(ids);
    EXPECT_LE(relErr(steps[k].data(), &ref[(ids.size() - 1) * kVocab], kVocab), 1e-6) << "step " << k;
    ids.push_back((int32_t)(std::max_element(steps[k].begin(), steps[k].end()) - steps[k].begin()));
  }
}

// Without slots, row r is slot r; a slot given twice, or past the compiled bound of 4, is a clear
// error, and the session stays usable.
TEST(Ragged, SlotsTwiceOrOutOfRangeAreClearErrors) {
  Session s;
  EXPECT_EQ(s.set("slots", {1, 3, 1}), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("cache slot 1 is given twice (sequences 0 and 2)"), std::string::npos)
      << kilnrt_last_error();
  EXPECT_EQ(s.set("slots", {0, 4}), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("cache slot 4 of sequence 1 is outside [0, 4)"), std::string::npos)
      << kilnrt_last_error();
  EXPECT_EQ(s.set("slot", {-1}), KILNRT_USER_ERROR);
  // The default: sequence r in slot r (the forward entry fills slot b of sequence b).
  std::vector<int32_t> a = sequence(4, 0), b = sequence(4, 1), both = a;
  both.insert(both.end(), b.begin(), b.end());
  kilnrt_tensor t{KILN_I32, 2, {2, 4}, both.data()};
  ASSERT_EQ(kilnrt_session_set_input(s.s, "tokens", &t), KILNRT_OK) << kilnrt_last_error();
  s.run("forward", "logits");
  ASSERT_EQ(s.set("token_batch", {7, 8}), KILNRT_OK);
  ASSERT_EQ(s.set("past_batch", {4, 4}), KILNRT_OK);
  std::vector<float> got = s.run("decode_batch", "next_logits_batch");
  ASSERT_EQ(got.size(), 2 * kVocab);
  for (int r = 0; r < 2; ++r) {
    std::vector<int32_t> ids = r ? b : a;
    ids.push_back(7 + r);
    std::vector<float> ref = alone(ids);
    EXPECT_LE(relErr(&got[r * kVocab], &ref[4 * kVocab], kVocab), 1e-6) << "row " << r;
  }
  // A past per sequence that does not match the batch.
  ASSERT_EQ(s.set("past_batch", {4, 4, 4}), KILNRT_OK);
  EXPECT_EQ(kilnrt_session_run(s.s, "decode_batch"), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("inputs disagree"), std::string::npos) << kilnrt_last_error();
}

}  // namespace
