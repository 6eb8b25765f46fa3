// libFuzzer targets for the tokenizer files a checkpoint ships and for prompt text, one binary
// (the sanitized runtime is compiled once) with the target chosen by KILN_FUZZ_TOKENIZER:
//   tokenizer_json  the input is tokenizer.json
//   vocab_json      the input is vocab.json (merges.txt: the BPE fixture's)
//   merges_txt      the input is merges.txt (vocab.json: the BPE fixture's)
//   vocab_txt       the input is vocab.txt (WordPiece)
//   prompt          the input is text, encoded by the BPE and WordPiece fixtures
// Every tokenizer the loader accepts encodes and decodes a text, and every id it produces must
// decode (abort otherwise); for prompts, byte-level BPE must give the input bytes back.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kilnrt/api.h"

namespace {
const std::string kFx = KILN_FUZZ_FIXTURES;

std::string dir() {
  static std::string d = [] {
    std::string p = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/kiln_fuzz_tok_" + std::to_string(getpid());
    mkdir(p.c_str(), 0700);
    return p;
  }();
  return d;
}

void put(const std::string &name, const void *data, size_t size) {
  std::ofstream f(dir() + "/" + name, std::ios::binary | std::ios::trunc);
  f.write((const char *)data, (std::streamsize)size);
}

std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void exercise(kilnrt_tokenizer *t, const std::string &text) {
  for (int32_t special : {0, 1}) {
    const int32_t *ids;
    int64_t n;
    if (kilnrt_tokenizer_encode(t, text.data(), text.size(), special, &ids, &n) != KILNRT_OK) continue;
    std::vector<int32_t> copy(ids, ids + n);
    const char *s;
    size_t len;
    if (kilnrt_tokenizer_decode(t, copy.data(), n, special, &s, &len) != KILNRT_OK) abort();  // its own ids decode
  }
}

enum class Mode { TokenizerJson, VocabJson, MergesTxt, VocabTxt, Prompt };
Mode mode() {
  static Mode m = [] {
    const char *e = getenv("KILN_FUZZ_TOKENIZER");
    std::string s = e ? e : "";
    if (s == "tokenizer_json") return Mode::TokenizerJson;
    if (s == "vocab_json") return Mode::VocabJson;
    if (s == "merges_txt") return Mode::MergesTxt;
    if (s == "vocab_txt") return Mode::VocabTxt;
    if (s == "prompt") return Mode::Prompt;
    fprintf(stderr, "fuzz_tokenizer: set KILN_FUZZ_TOKENIZER to tokenizer_json, vocab_json, merges_txt, vocab_txt or prompt\n");
    abort();
  }();
  return m;
}

int prompt(const uint8_t *data, size_t size) {
  static kilnrt_tokenizer *bpe = [] {
    kilnrt_tokenizer *x;
    if (kilnrt_tokenizer_open((kFx + "/bpe").c_str(), &x)) abort();
    return x;
  }();
  static kilnrt_tokenizer *wp = [] {
    kilnrt_tokenizer *x;
    if (kilnrt_tokenizer_open((kFx + "/wordpiece").c_str(), &x)) abort();
    return x;
  }();
  std::string text((const char *)data, size);
  const int32_t *ids;
  int64_t n;
  if (kilnrt_tokenizer_encode(bpe, text.data(), text.size(), 0, &ids, &n) != KILNRT_OK) abort();
  std::vector<int32_t> copy(ids, ids + n);
  const char *s;
  size_t len;
  if (kilnrt_tokenizer_decode(bpe, copy.data(), n, 0, &s, &len) != KILNRT_OK) abort();
  if (std::string(s, len) != text) abort();  // byte-level BPE: decode(encode(b)) == b
  exercise(wp, text);
  return 0;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (mode() == Mode::Prompt) return prompt(data, size);
  kilnrt_tokenizer *t = nullptr;
  static const std::string text = slurp(kFx + "/corpus.txt").substr(0, 600) + " \xff\xfe <|endoftext|> [CLS]";
  static const std::string merges = slurp(kFx + "/bpe/merges.txt"), vocab = slurp(kFx + "/bpe/vocab.json");
  switch (mode()) {
    case Mode::TokenizerJson:
      put("tokenizer.json", data, size);
      kilnrt_tokenizer_open((dir() + "/tokenizer.json").c_str(), &t);
      break;
    case Mode::VocabJson:
      put("merges.txt", merges.data(), merges.size());
      put("vocab.json", data, size);
      kilnrt_tokenizer_open((dir() + "/vocab.json").c_str(), &t);
      break;
    case Mode::MergesTxt:
      put("vocab.json", vocab.data(), vocab.size());
      put("merges.txt", data, size);
      kilnrt_tokenizer_open((dir() + "/merges.txt").c_str(), &t);
      break;
    case Mode::VocabTxt:
      put("vocab.txt", data, size);
      kilnrt_tokenizer_open((dir() + "/vocab.txt").c_str(), &t);
      break;
    case Mode::Prompt:
      break;
  }
  if (t) {
    exercise(t, text);
    kilnrt_tokenizer_close(t);
  }
  return 0;
}
