// batch_test.cpp - the batch dimension (Model::batch, Model::rows): gradients of batches of
// three against PyTorch autograd (GPT-2, BERT masked-LM, the encoder-decoder; fixtures by
// tests/reference/make_grad_fixtures.py, the loss the mean over every valid position of the
// batch), a batched inference run against the same sequences run one at a time, and the errors:
// DSL misuse, a batch beyond the compiled bound, a batch given to an entry that keeps a KV cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "grad_check.h"
#include "kiln/dsl/Ops.h"

namespace {
using ::testing::HasSubstr;

TEST(Batch, DslMisuseIsReportedAtTheUsersLine) {
  kiln::Model m("bad");
  kiln::Dim L = m.seq("L", 8), S = m.seq("S", 8), B = m.batch("B", 4);
  EXPECT_KILN_ERROR(m.rows(L, S), "rows: the first dim must be a batch (Model::batch), got L(<=8)");
  EXPECT_KILN_ERROR(m.rows(B, B), "rows: the second dim must be a sequence length (Model::seq)");
  kiln::Dim N = m.rows(B, L);
  EXPECT_EQ(N.size, 32);
  EXPECT_EQ(m.rows(B, L).sym, N.sym) << "the same rows are one symbol";
  EXPECT_EQ(m.per_sequence(N).sym, L.sym);
  auto q = kiln::split_heads(m.input("q", {N, 8}), 2);
  auto k = kiln::split_heads(m.input("k", {S, 8}), 2);
  EXPECT_KILN_ERROR(kiln::attention(q, k, k), "the query rows B*L(<=32) and the key rows S(<=8) must both be rows of the same batch");
  auto pos = m.param("wpe", {8, 8});
  EXPECT_NO_THROW(kiln::position_embedding(pos, m.tokens("t", N, 5))) << "each sequence's positions fit the table";
  m.seq("A", 2), m.seq("C", 2), m.seq("D", 2), m.rows(B, S);
  EXPECT_KILN_ERROR(m.seq("E", 2), "a model has at most 8 lengths, batches and rows of batches");
}

TEST(Batch, Gpt2GradientsOfThreeSequencesMatchPyTorch) {
  std::string dir = kt::workDir("train_batch_gpt2");
  std::string exe = kt::compileExample("gpt2", "--train --batch 3 --layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64", dir);
  ASSERT_FALSE(exe.empty());
  auto grads = kt::runFixtureGradients(exe, "gpt2_grad_b3", {"tokens", "targets"}, dir + "/out");
  ASSERT_EQ(grads.size(), 2u + 2u + 12u * 2u);
  kt::expectFixtureGradients(grads, dir + "/out");
}

TEST(Batch, BertMaskedLmGradientsOfThreeSequencesMatchPyTorch) {
  std::string dir = kt::workDir("train_batch_bert");
  std::string exe = kt::compileExample("bert", "--train --batch 3 --layers 2 --d-model 32 --heads 2 --vocab 120 --ctx 32", dir);
  ASSERT_FALSE(exe.empty());
  auto grads = kt::runFixtureGradients(exe, "bert_mlm_grad_b3", {"tokens", "targets"}, dir + "/out");
  ASSERT_EQ(grads.size(), 5u + 2u * 16u + 5u);
  // The key bias's exact gradient is zero (softmax cancels q·b_k): both sides hold rounding
  // noise (bert_mlm_test), which must be tiny next to the key weight's gradient.
  auto keyBias = [](const std::string &n) { return n.ends_with("attention.self.key.bias"); };
  kt::expectFixtureGradients(grads, dir + "/out", keyBias);
  for (auto &[name, g] : grads) {
    if (!keyBias(name)) continue;
    ref::T got = kt::loadNpy(dir + "/out/grad." + name + ".npy"), w = grads.at(name.substr(0, name.size() - 4) + "weight");
    double gotMax = 0, wMax = 0;
    for (float v : got.v) gotMax = std::max(gotMax, (double)std::abs(v));
    for (float v : w.v) wMax = std::max(wMax, (double)std::abs(v));
    EXPECT_LT(gotMax, 1e-5 * wMax) << name;
  }
}

TEST(Batch, EncoderDecoderGradientsOfThreeSequencePairsMatchPyTorch) {
  std::string dir = kt::workDir("train_batch_transformer");
  std::string exe = kt::compileExample("transformer",
                                   "--train --batch 3 --layers 2 --d-model 32 --heads 2 --d-ff 64 --src-vocab 50 "
                                   "--tgt-vocab 60 --ctx 16",
                                   dir);
  ASSERT_FALSE(exe.empty());
  auto grads = kt::runFixtureGradients(exe, "transformer_grad_b3", {"src_tokens", "tgt_tokens", "targets"}, dir + "/out");
  ASSERT_EQ(grads.size(), 68u);
  kt::expectFixtureGradients(grads, dir + "/out");
}

// BERT's forward over a [3, L] batch: each sequence's rows equal that sequence run alone (a 1-D
// input, whose output keeps today's [L, d]); a batch beyond the bound and a KV-cache entry
// given a batch are refused with their reason.
TEST(Batch, InferenceOverABatchEqualsEachSequenceAlone) {
  std::string dir = kt::workDir("train_batch_infer");
  std::string bert = kt::compileExample("bert", "--batch 3 --layers 2 --d-model 32 --heads 2 --vocab 120 --ctx 32", dir);
  ASSERT_FALSE(bert.empty());
  const int64_t B = 3, L = 19;
  std::vector<int32_t> all = kt::randomIds(B * L, 120, 7);
  kt::saveIdRows(dir + "/batch.npy", all, B);
  auto r = kt::run(bert + " --random-weights --seed 4 --input tokens=" + dir + "/batch.npy --output-dir " + dir + "/outb");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T batch = kt::loadNpy(dir + "/outb/hidden.npy");
  ASSERT_EQ(batch.shape, (std::vector<int64_t>{B, L, 32}));
  for (int64_t b = 0; b < B; ++b) {
    std::string one = dir + "/seq" + std::to_string(b);
    kt::saveIds(one + ".npy", std::vector<int32_t>(all.begin() + b * L, all.begin() + (b + 1) * L));
    r = kt::run(bert + " --random-weights --seed 4 --input tokens=" + one + ".npy --output-dir " + one);
    ASSERT_EQ(r.code, 0) << r.output;
    ref::T alone = kt::loadNpy(one + "/hidden.npy");
    ASSERT_EQ(alone.shape, (std::vector<int64_t>{L, 32})) << "one sequence without a batch dim keeps its shape";
    ref::T rows;
    rows.shape = alone.shape;
    rows.v.assign(batch.v.begin() + b * L * 32, batch.v.begin() + (b + 1) * L * 32);
    double rel = kt::maxRelDiff(alone, rows);
    EXPECT_LE(rel, 1e-5) << "sequence " << b << " of the batch against itself alone";
  }
  kt::saveIdRows(dir + "/four.npy", kt::randomIds(4 * 5, 120, 8), 4);
  r = kt::run(bert + " --random-weights --input tokens=" + dir + "/four.npy --output-dir " + dir + "/out4");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("batch size B = 4 exceeds the compiled bound 3"));

  std::string gpt2 = kt::compileExample("gpt2", "--batch 2 --layers 1 --d-model 32 --heads 2 --vocab 120 --ctx 32", dir);
  ASSERT_FALSE(gpt2.empty());
  kt::saveIdRows(dir + "/two.npy", kt::randomIds(2 * 5, 120, 9), 2);
  r = kt::run(gpt2 + " --random-weights --entry prefill --input tokens=" + dir + "/two.npy --output-dir " + dir + "/outg");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("entry 'prefill' runs one sequence at a time (it slices the rows of a sequence): give "
                                  "it one sequence, not B = 2"));
}

// ./gpt2 --train --batch: B windows per step; a batch beyond the bound, or a batch for a model
// without one, is refused before any step.
TEST(Batch, TrainingStepsTakeBatchesOfWindows) {
  std::string dir = kt::workDir("train_batch_steps");
  std::string exe = kt::compileExample("gpt2", "--train --batch 4 --layers 1 --d-model 32 --heads 2 --vocab 256 --ctx 32", dir);
  ASSERT_FALSE(exe.empty());
  std::vector<int32_t> data = kt::randomIds(3000, 256, 11);
  for (size_t i = 0; i < data.size(); ++i) data[i] = (int32_t)((i * 7 + i / 13) % 61);  // learnable
  kt::saveIds(dir + "/data.npy", data);
  auto r = kt::run(exe + " --train --random-weights --data " + dir + "/data.npy --seq 16 --batch 4 --steps 30 --lr 1e-2 --quiet --log " +
                   dir + "/log.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream log(dir + "/log.csv");
  std::string line;
  std::vector<double> losses;
  std::getline(log, line);
  while (std::getline(log, line)) losses.push_back(std::stod(line.substr(line.find(',') + 1)));
  ASSERT_EQ(losses.size(), 30u);
  EXPECT_LT(losses.back(), losses.front() - 2.0) << "30 steps of 4 windows learn the sequence";
  r = kt::run(exe + " --train --random-weights --data " + dir + "/data.npy --seq 16 --batch 5 --steps 1 --quiet");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("--batch 5 exceeds the compiled bound 4 of B"));
  std::string one = kt::compileExample("gpt2", "--train --layers 1 --d-model 32 --heads 2 --vocab 256 --ctx 32",
                                   kt::workDir("train_batch_steps_one"));
  ASSERT_FALSE(one.empty());
  r = kt::run(one + " --train --random-weights --data " + dir + "/data.npy --seq 16 --batch 2 --steps 1 --quiet");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("--batch 2: input 'tokens' of entry 'train_step' takes one sequence"));
}

}  // namespace

// Batched decode: GPT-2 compiled with --batch keeps one KV cache per sequence. forward over
// [B, L] prompts fills each sequence's, and decode_batch steps the sequences each at its own
// past (past_batch) in the cache of its slot (slots; --entry forward,decode_batch: one session).
// Every sequence's next logits, and its prompt logits, equal that sequence run alone (forward
// over its first `past` tokens, then decode, which use sequence 0's cache): sequences at pasts
// 7, 4 and 6 (a step at past < L overwrites the cache from there on, as a shorter prompt would
// have left it), and a step of two rows over slots 2 and 0 (slot 1 left out). Sequences with
// different prompts get different logits, so a cache shared or mixed between sequences would show.
TEST(Batch, BatchedDecodeEqualsEachSequenceDecodedAlone) {
  std::string dir = kt::workDir("train_batch_decode");
  std::string exe = kt::compileExample("gpt2", "--batch 3 --layers 2 --d-model 64 --heads 4 --vocab 120 --ctx 32", dir);
  ASSERT_FALSE(exe.empty());
  const int64_t B = 3, L = 7, V = 120;
  std::vector<int32_t> prompts = kt::randomIds(B * L, (int)V, 11), next = {7, 55, 101};
  kt::saveIdRows(dir + "/prompts.npy", prompts, B);
  // Each case: the rows' sequences, their pasts and (when given) their slots.
  struct Case {
    std::vector<int> seqs;
    std::vector<int32_t> pasts;
    bool slots;
  };
  for (const Case &c : {Case{{0, 1, 2}, {7, 4, 6}, false}, Case{{2, 0}, {5, 7}, true}}) {
    std::string tag = "case" + std::to_string(c.seqs.size());
    std::vector<int32_t> tokens, slots;
    for (int b : c.seqs) tokens.push_back(next[b]), slots.push_back(b);
    kt::saveIds(dir + "/" + tag + "_next.npy", tokens);
    kt::saveIds(dir + "/" + tag + "_past.npy", c.pasts);
    kt::saveIds(dir + "/" + tag + "_slots.npy", slots);
    auto r = kt::run(exe + " --random-weights --seed 5 --entry forward,decode_batch --input tokens=" + dir +
                     "/prompts.npy --input token_batch=" + dir + "/" + tag + "_next.npy --input past_batch=" + dir + "/" + tag +
                     "_past.npy" + (c.slots ? " --input slots=" + dir + "/" + tag + "_slots.npy" : "") + " --output-dir " + dir +
                     "/" + tag);
    ASSERT_EQ(r.code, 0) << r.output;
    ref::T batch = kt::loadNpy(dir + "/" + tag + "/next_logits_batch.npy"), prompt = kt::loadNpy(dir + "/" + tag + "/logits.npy");
    const int64_t rows = (int64_t)c.seqs.size();
    ASSERT_EQ(batch.shape, (std::vector<int64_t>{rows, V}));
    ASSERT_EQ(prompt.shape, (std::vector<int64_t>{B, L, V}));
    for (int64_t k = 0; k < rows; ++k) {
      const int b = c.seqs[k];
      const int32_t past = c.pasts[k];
      SCOPED_TRACE(tag + ": row " + std::to_string(k) + ", sequence " + std::to_string(b) + " at past " + std::to_string(past));
      std::string one = dir + "/" + tag + "_seq" + std::to_string(b);
      kt::saveIds(one + ".npy", std::vector<int32_t>(prompts.begin() + b * L, prompts.begin() + b * L + past));
      kt::saveIds(one + "_next.npy", {next[b]});
      kt::saveIds(one + "_past.npy", {past});
      r = kt::run(exe + " --random-weights --seed 5 --entry forward,decode --input tokens=" + one + ".npy --input token=" +
                  one + "_next.npy --input past=" + one + "_past.npy --output-dir " + one);
      ASSERT_EQ(r.code, 0) << r.output;
      ref::T alone = kt::loadNpy(one + "/next_logits.npy"), alonePrompt = kt::loadNpy(one + "/logits.npy");
      ASSERT_EQ(alone.shape, (std::vector<int64_t>{1, V}));
      ref::T row, rowsOf;
      row.shape = alone.shape;
      row.v.assign(batch.v.begin() + k * V, batch.v.begin() + (k + 1) * V);
      rowsOf.shape = alonePrompt.shape;
      rowsOf.v.assign(prompt.v.begin() + b * L * V, prompt.v.begin() + (b * L + past) * V);
      EXPECT_LE(kt::maxRelDiff(alone, row), 1e-5) << "the decode step in the batch against the sequence alone";
      EXPECT_LE(kt::maxRelDiff(alonePrompt, rowsOf), 1e-5) << "the prompt logits";
      if (k > 0) {
        ref::T prev;
        prev.shape = row.shape;
        prev.v.assign(batch.v.begin() + (k - 1) * V, batch.v.begin() + k * V);
        EXPECT_GT(kt::maxRelDiff(prev, row), 1e-3) << "rows " << k - 1 << " and " << k << " gave the same logits";
      }
    }
  }
  // A batch beyond the bound; an entry name that does not exist in a chain.
  kt::saveIds(dir + "/four.npy", {1, 2, 3, 4});
  kt::saveIds(dir + "/past4.npy", {1, 1, 1, 1});
  auto r = kt::run(exe + " --random-weights --entry decode_batch --input token_batch=" + dir + "/four.npy --input past_batch=" + dir +
                   "/past4.npy");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("B = 4 exceeds the compiled bound 3"));
  r = kt::run(exe + " --random-weights --entry forward,decod --input tokens=" + dir + "/prompts.npy");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("no entry point 'decod'"));
}

// examples/gpt2's extend in a build with --batch 3 writes the cache of slot `slot`: a prompt of 9
// tokens into slot 2 (slots 0 and 1 untouched), then decode_batch steps slot 2 alone at past 9.
// The chunk's last row and the step's row equal rows 8 and 9 of forward over the 10 tokens.
TEST(Batch, ExtendWritesTheCacheOfItsSlot) {
  std::string dir = kt::workDir("train_batch_extend");
  std::string exe = kt::compileExample("gpt2", "--batch 3 --layers 2 --d-model 64 --heads 4 --vocab 120 --ctx 32", dir);
  ASSERT_FALSE(exe.empty());
  const int64_t V = 120;
  std::vector<int32_t> ids = kt::randomIds(10, (int)V, 17);
  kt::saveIdRows(dir + "/all.npy", ids, 1);
  kt::saveIds(dir + "/chunk.npy", std::vector<int32_t>(ids.begin(), ids.begin() + 9));
  kt::saveIds(dir + "/next.npy", {ids[9]});
  auto r = kt::run(exe + " --random-weights --seed 5 --entry forward --input tokens=" + dir + "/all.npy --output-dir " + dir + "/f");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(exe + " --random-weights --seed 5 --entry extend,decode_batch --input chunk=" + dir + "/chunk.npy --tokens past=0 "
              "--tokens slot=2 --input token_batch=" + dir + "/next.npy --tokens past_batch=9 --tokens slots=2 --output-dir " + dir + "/e");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T all = kt::loadNpy(dir + "/f/logits.npy");
  ASSERT_EQ(all.shape, (std::vector<int64_t>{1, 10, V}));
  auto row = [&](int64_t p) {
    ref::T t({1, V});
    std::copy(all.v.begin() + p * V, all.v.begin() + (p + 1) * V, t.v.begin());
    return t;
  };
  EXPECT_TRUE(kt::allClose(row(8), kt::loadNpy(dir + "/e/chunk_logits.npy")));
  EXPECT_TRUE(kt::allClose(row(9), kt::loadNpy(dir + "/e/next_logits_batch.npy")));
}
