// bytes_demo_test.cpp - a byte-level GPT learns: examples/gpt2 compiled with --train at a tiny
// size, trained by the executable on the texts every Debian machine has
// (/usr/share/common-licenses/ but GPL-3, bench/train/bytes.py), evaluated on GPL-3. Its
// validation loss after a short run must beat a byte n-gram model with add-one smoothing counted
// on the same training bytes and scored on the same validation positions: order 1 for this
// short run (the longer run of bench/train/run.sh is measured against order 3).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness.h"

namespace {

TEST(BytesDemo, ValidationLossBeatsAUnigramModel) {
  std::string dir = kt::workDir("train_bytes");
  std::string src = KILN_SOURCE_DIR;
  auto r = kt::run("python3 " + src + "/bench/train/bytes.py data " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const int T = 64;
  r = kt::run("python3 " + src + "/bench/train/bytes.py ngram " + dir + " 1 " + std::to_string(T));
  ASSERT_EQ(r.code, 0) << r.output;
  double unigram = std::stod(r.output);
  auto c = kt::run(std::string(KILN_BIN) + "/gpt2-compile --train --layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64 "
                   "--train-lr 3e-3 --train-warmup 20 --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/bytes");
  ASSERT_EQ(c.code, 0) << c.output;
  r = kt::run(dir + "/bytes --train --data " + dir + "/train.npy --eval-data " + dir + "/val.npy --seq " + std::to_string(T) +
              " --steps 400 --eval-every 200 --seed 1 --log " + dir + "/log.csv --save " + dir + "/ckpt.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("step 400/400"));
  std::ifstream f(dir + "/log.csv");
  std::string line, last;
  double first = 0;
  int rows = 0;
  while (std::getline(f, line)) {
    if (rows++ == 1) first = std::stod(line.substr(line.find(',') + 1));
    last = line;
  }
  ASSERT_EQ(rows, 401);
  std::vector<std::string> cells;
  std::stringstream ss(last);
  for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
  ASSERT_GE(cells.size(), 3u);
  double eval = std::stod(cells[2]);
  fprintf(stderr, "[ bytes    ] first loss %.3f, validation loss after 400 steps %.3f, unigram %.3f nats\n", first, eval,
          unigram);
  EXPECT_GT(first, 5.0) << "an untrained model starts near log(256) = 5.55";
  EXPECT_LT(eval, unigram) << "validation loss " << eval << " vs the add-one unigram model's " << unigram;
  // The checkpoint loads for inference.
  r = kt::run(dir + "/bytes --weights " + dir + "/ckpt.safetensors --tokens 84,104,101");
  EXPECT_EQ(r.code, 0) << r.output;
}

}  // namespace
