// tokenizer_test.cpp - kiln's tokenizers against Hugging Face `tokenizers`: the ids and decoded
// texts of tests/fixtures/tokenizers/cases.json (written by make_tokenizer_fixtures.py), from
// every file format a checkpoint ships; byte strings round-trip through byte-level BPE; bad
// files are clear errors naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "harness.h"
#include "kilnrt/api.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
const std::string kFx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/tokenizers";

json cases() {
  std::ifstream f(kFx + "/cases.json");
  return json::parse(f);
}

struct Tok {
  kilnrt_tokenizer *t = nullptr;
  explicit Tok(const std::string &path) {
    EXPECT_EQ(kilnrt_tokenizer_open(path.c_str(), &t), KILNRT_OK) << path << ": " << kilnrt_last_error();
  }
  ~Tok() {
    if (t) kilnrt_tokenizer_close(t);
  }
  std::vector<int32_t> encode(const std::string &s, bool special) {
    const int32_t *ids;
    int64_t n;
    EXPECT_EQ(kilnrt_tokenizer_encode(t, s.data(), s.size(), special, &ids, &n), KILNRT_OK) << kilnrt_last_error();
    return std::vector<int32_t>(ids, ids + n);
  }
  std::string decode(const std::vector<int32_t> &ids, bool skip) {
    const char *s;
    size_t n;
    EXPECT_EQ(kilnrt_tokenizer_decode(t, ids.data(), (int64_t)ids.size(), skip, &s, &n), KILNRT_OK) << kilnrt_last_error();
    return std::string(s, n);
  }
};

// A folder holding only `files` of fixture folder `from` (so the loader must take that format).
std::string only(const std::string &name, const std::string &from, const std::vector<std::string> &files) {
  std::string d = kt::workDir("tok_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  for (const auto &f : files) fs::copy_file(kFx + "/" + from + "/" + f, d + "/" + f);
  return d;
}

void expectCases(const std::string &kind, const std::string &path, bool special, bool skip) {
  Tok tok(path);
  ASSERT_TRUE(tok.t);
  int n = 0;
  const json all = cases();
  for (const json &c : all[kind]) {
    std::string text = c["text"];
    std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text, special), want) << kind << " from " << path << ": '" << text << "'";
    EXPECT_EQ(tok.decode(want, skip), c["decoded"].get<std::string>()) << kind << " from " << path << ": '" << text << "'";
    ++n;
  }
  EXPECT_GT(n, 20);
}
}  // namespace

TEST(Tokenizer, ByteLevelBpeMatchesTokenizersFromTokenizerJson) {
  expectCases("bpe", kFx + "/bpe/tokenizer.json", true, false);
  expectCases("bpe", kFx + "/bpe", true, false);  // the folder: tokenizer.json first
}

TEST(Tokenizer, ByteLevelBpeMatchesTokenizersFromVocabAndMerges) {
  std::string d = only("bpe_vm", "bpe", {"vocab.json", "merges.txt"});
  expectCases("bpe", d, true, false);
  expectCases("bpe", d + "/merges.txt", true, false);
}

TEST(Tokenizer, WordPieceMatchesTokenizersFromTokenizerJson) {
  expectCases("wordpiece", kFx + "/wordpiece/tokenizer.json", true, true);
  expectCases("wordpiece_cased", kFx + "/wordpiece_cased/tokenizer.json", true, true);
}

TEST(Tokenizer, WordPieceMatchesTokenizersFromVocabTxt) {
  expectCases("wordpiece", only("wp_txt", "wordpiece", {"vocab.txt", "tokenizer_config.json"}), true, true);
  expectCases("wordpiece_cased", only("wpc_txt", "wordpiece_cased", {"vocab.txt", "tokenizer_config.json"}), true, true);
}

TEST(Tokenizer, SpecialTokensAndEos) {
  Tok bpe(kFx + "/bpe");
  EXPECT_EQ(kilnrt_tokenizer_kind_of(bpe.t), KILNRT_TOKENIZER_BPE);
  EXPECT_EQ(kilnrt_tokenizer_eos(bpe.t), kilnrt_tokenizer_token_id(bpe.t, "<|endoftext|>"));
  EXPECT_GE(kilnrt_tokenizer_eos(bpe.t), 0);
  EXPECT_EQ(kilnrt_tokenizer_vocab_size(bpe.t), 400);
  Tok wp(kFx + "/wordpiece");
  EXPECT_EQ(kilnrt_tokenizer_kind_of(wp.t), KILNRT_TOKENIZER_WORDPIECE);
  std::vector<int32_t> ids = wp.encode("hello", true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), kilnrt_tokenizer_token_id(wp.t, "[CLS]"));
  EXPECT_EQ(ids.back(), kilnrt_tokenizer_token_id(wp.t, "[SEP]"));
  EXPECT_EQ(wp.encode("hello", false).size(), ids.size() - 2);
}

// The stop ids: the end-of-text token, and generation_config.json's eos_token_id (one id or a
// list, as Llama 3's) beside the tokenizer, sorted and once each.
TEST(Tokenizer, StopIdsAreTheEndOfTextAndGenerationConfigs) {
  auto stops = [](const Tok &t) {
    const int32_t *ids;
    int64_t n = kilnrt_tokenizer_stop_ids(t.t, &ids);
    return std::vector<int32_t>(ids, ids + n);
  };
  std::string d = only("stops", "bpe", {"tokenizer.json"});
  Tok plain(d);
  ASSERT_EQ(kilnrt_tokenizer_eos(plain.t), 0);  // <|endoftext|>
  EXPECT_EQ(stops(plain), std::vector<int32_t>{0});
  std::ofstream(d + "/generation_config.json") << "{\"eos_token_id\": [7, 0, 5, 1000000]}";  // past the vocabulary: left out
  Tok listed(d);
  EXPECT_EQ(stops(listed), (std::vector<int32_t>{0, 5, 7}));
  std::ofstream(d + "/generation_config.json") << "{\"eos_token_id\": 9}";
  Tok one(d);
  EXPECT_EQ(stops(one), (std::vector<int32_t>{0, 9}));
}

// Streaming: the pieces of ids 0, 1, ... concatenated are their decode.
TEST(Tokenizer, PiecesConcatenateToTheDecode) {
  for (const char *kind : {"bpe", "wordpiece"}) {
    Tok tok(kFx + "/" + kind);
    const json all = cases();
    for (const json &c : all[kind]) {
      std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
      std::string joined;
      int64_t index = 0;
      for (int32_t id : ids) {
        const char *s;
        size_t n;
        ASSERT_EQ(kilnrt_tokenizer_piece(tok.t, id, index, 0, &s, &n), KILNRT_OK);
        joined.append(s, n);
        ++index;
      }
      EXPECT_EQ(joined, tok.decode(ids, false)) << kind << ": " << c["text"];
    }
  }
}

// Any byte string, invalid UTF-8 included, encodes and decodes back to itself.
TEST(Tokenizer, ByteLevelBpeRoundTripsAnyBytes) {
  Tok tok(kFx + "/bpe");
  std::mt19937 rng(7);
  std::vector<std::string> samples = {std::string("\xff\xfe\x80 abc \xc3(\xe2\x82 \xf0\x9f\x98", 19), std::string(1, '\0'),
                                      "\xed\xa0\x80 surrogate", "caf\xc3\xa9 \xe6\x88\x91 \xf0\x9f\x98\x80"};
  for (int k = 0; k < 300; ++k) {
    std::string s(rng() % 40, '\0');
    for (char &c : s) c = (char)(rng() % 3 == 0 ? rng() % 256 : " aZ9\n.\xc3\xa9"[rng() % 9]);
    samples.push_back(s);
  }
  for (const std::string &s : samples) {
    std::vector<int32_t> ids = tok.encode(s, false);
    EXPECT_EQ(tok.decode(ids, false), s);
    EXPECT_EQ(s.empty(), ids.empty());
  }
}

TEST(Tokenizer, BadFilesAreClearErrors) {
  auto fails = [](const std::string &path, const std::string &needle) {
    kilnrt_tokenizer *t = nullptr;
    EXPECT_EQ(kilnrt_tokenizer_open(path.c_str(), &t), KILNRT_USER_ERROR) << path;
    EXPECT_EQ(t, nullptr);
    std::string msg = kilnrt_last_error();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(fs::path(path).filename().string()), std::string::npos) << "names the file: " << msg;
  };
  std::string d = kt::workDir("tok_bad");
  fs::remove_all(d);
  fs::create_directories(d);
  fails(d + "/nothing.json", "does not exist");
  fails(d, "has no tokenizer.json");
  auto write = [&](const std::string &name, const std::string &text) {
    std::ofstream(d + "/" + name, std::ios::binary) << text;
    return d + "/" + name;
  };
  fails(write("broken.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {"), "not valid JSON");
  fails(write("nomodel.json", "{}"), "no 'model'");
  fails(write("unigram.json", R"({"model": {"type": "Unigram", "vocab": {"a": 0}}})"), "Unigram");
  fails(write("badid.json", R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})"), "no integer id");
  fails(write("dupid.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})"), "id 0 names both");
  fails(write("meta.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                              "pre_tokenizer": {"type": "Metaspace"}})"),
        "Metaspace");
  fails(write("unknown_merge.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a c"]},
                                       "pre_tokenizer": {"type": "ByteLevel"}})"),
        "merges entry 1 'a c' names the token 'c', which is not in the vocabulary");
  fails(write("suffix.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "end_of_word_suffix": "</w>"},
                               "pre_tokenizer": {"type": "ByteLevel"}})"),
        "end_of_word_suffix '</w>' is not supported");
  fails(write("fallback.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": true},
                                 "pre_tokenizer": {"type": "ByteLevel"}})"),
        "byte_fallback is not supported");
  fails(write("bad_field.json", R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0}, "unk_token": 5},
                                    "pre_tokenizer": {"type": "BertPreTokenizer"}})"),
        "malformed");
  fails(write("no_unk.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}},
                                 "pre_tokenizer": {"type": "BertPreTokenizer"}})"),
        "unknown token '[UNK]'");
  // vocab.json + merges.txt: an entry naming an unknown token, a line that is not two tokens.
  std::string vm = d + "/vm";
  fs::create_directories(vm);
  std::ofstream(vm + "/vocab.json") << R"({"a": 0, "b": 1, "ab": 2})";
  std::ofstream(vm + "/merges.txt") << "#version: 0.2\na b\nab zz\n";
  fails(vm + "/merges.txt", "merges entry 2 'ab zz' names the token 'zz'");
  std::ofstream(vm + "/merges.txt") << "#version: 0.2\na b c\n";
  fails(vm + "/merges.txt", "line 2: expected two tokens");
  fs::remove(vm + "/merges.txt");
  fails(vm, "has vocab.json but no merges.txt");
  std::string vt = d + "/vt";
  fs::create_directories(vt);
  std::ofstream(vt + "/vocab.txt") << "[UNK]\na\n\nb\n";
  fails(vt + "/vocab.txt", "line 3: an empty token");
  std::ofstream(vt + "/vocab.txt") << "[UNK]\na\na\n";
  fails(vt + "/vocab.txt", "token 'a' is given twice");
}

TEST(Tokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  Tok tok(kFx + "/bpe");
  const char *s;
  size_t n;
  int32_t bad[] = {5, 400};
  EXPECT_EQ(kilnrt_tokenizer_decode(tok.t, bad, 2, 0, &s, &n), KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("token id 400"), std::string::npos) << kilnrt_last_error();
}

// Pre-tokenizers beyond ByteLevel in tokenizer.json: Digits and Split steps in a Sequence before
// it (SmolLM2's and Llama 3's files have these shapes), against `tokenizers`
// (make_pretokenizer_fixtures.py). The reader once kept the ByteLevel step alone and dropped the
// others, silently: bpe_digits then splits "12345" differently.
TEST(Tokenizer, DigitsAndSplitPreTokenizersMatchTokenizers) {
  std::ifstream f(kFx + "/pretok_cases.json");
  const json all = json::parse(f);
  for (const char *name : {"bpe_digits", "bpe_split", "bpe_qwen2"}) {
    Tok tok(kFx + "/" + name + "/tokenizer.json");
    ASSERT_TRUE(tok.t);
    ASSERT_GE(all[name].size(), 25u);
    for (const json &c : all[name]) {
      std::string text = c["text"];
      EXPECT_EQ(tok.encode(text, true), c["ids"].get<std::vector<int32_t>>()) << name << ": '" << text << "'";
      EXPECT_EQ(tok.decode(c["ids"].get<std::vector<int32_t>>(), false), c["decoded"].get<std::string>()) << name;
    }
  }
}

// The same vocabularies as GGUF metadata (tokenizer.ggml.*, as llama.cpp's converter writes a
// Llama 3 or Qwen2 file): `tokenizer.ggml.pre` names the pre-tokenizer, and `llama-bpe` and
// `qwen2` give the ids of the tokenizer.json forms (Split with the family's pattern, ByteLevel).
namespace {
void ggufString(std::string &o, const std::string &v) {
  uint64_t n = v.size();
  o.append((const char *)&n, 8);
  o += v;
}
template <class T> void ggufPod(std::string &o, T v) { o.append((const char *)&v, sizeof v); }
void ggufStrings(std::string &o, const std::string &key, const std::vector<std::string> &vs) {
  ggufString(o, key);
  ggufPod<uint32_t>(o, 9);  // array
  ggufPod<uint32_t>(o, 8);  // of strings
  ggufPod<uint64_t>(o, vs.size());
  for (const std::string &v : vs) ggufString(o, v);
}
// A GGUF file holding the tokenizer.json's vocabulary and merges, and the pre-tokenizer `pre`.
// `digitMerge`: a token "12" and the merge "1 2" added last (the trained vocabularies merge no
// digits), where Llama 3's pattern (up to three digits a piece) and Qwen2's (one) differ.
std::string ggufFromTokenizerJson(const std::string &json_path, const std::string &pre, const std::string &out,
                                  bool digitMerge = false) {
  std::ifstream f(json_path);
  json tj = json::parse(f);
  std::vector<std::string> tokens(tj["model"]["vocab"].size());
  for (auto &[tok, id] : tj["model"]["vocab"].items()) tokens.at(id.get<size_t>()) = tok;
  std::vector<std::string> merges;
  for (const json &m : tj["model"]["merges"]) merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  if (digitMerge) {
    tokens.push_back("12");
    merges.push_back("1 2");
  }
  std::string o = "GGUF";
  ggufPod<uint32_t>(o, 3);
  ggufPod<uint64_t>(o, 0);  // tensors
  ggufPod<uint64_t>(o, 6);  // metadata
  auto str = [&](const std::string &k, const std::string &v) {
    ggufString(o, k);
    ggufPod<uint32_t>(o, 8);
    ggufString(o, v);
  };
  str("general.architecture", "llama");
  str("tokenizer.ggml.model", "gpt2");
  str("tokenizer.ggml.pre", pre);
  ggufStrings(o, "tokenizer.ggml.tokens", tokens);
  ggufStrings(o, "tokenizer.ggml.merges", merges);
  ggufString(o, "tokenizer.ggml.token_type");
  ggufPod<uint32_t>(o, 9);
  ggufPod<uint32_t>(o, 5);  // int32
  ggufPod<uint64_t>(o, tokens.size());
  for (const std::string &t : tokens) ggufPod<int32_t>(o, t == "<|endoftext|>" ? 3 : 1);  // control, normal
  while (o.size() % 32) o += '\0';
  std::ofstream(out, std::ios::binary) << o;
  return out;
}
}  // namespace

TEST(Tokenizer, GgufPreTokenizerNamesMatchTheirTokenizerJsonForms) {
  std::ifstream f(kFx + "/pretok_cases.json");
  const json all = json::parse(f);
  std::string d = kt::workDir("tok_gguf_pre");
  for (auto [name, pre] : std::vector<std::pair<std::string, std::string>>{{"bpe_split", "llama-bpe"}, {"bpe_qwen2", "qwen2"}}) {
    SCOPED_TRACE(pre);
    Tok tok(ggufFromTokenizerJson(kFx + "/" + name + "/tokenizer.json", pre, d + "/" + name + ".gguf"));
    ASSERT_TRUE(tok.t);
    for (const json &c : all[name]) {
      std::string text = c["text"];
      EXPECT_EQ(tok.encode(text, true), c["ids"].get<std::vector<int32_t>>()) << "'" << text << "'";
    }
  }
  // The pattern a name maps to matters: the Llama 3 vocabulary read with GPT-2's pattern misses
  // some of the ids; with a digit merge, Llama 3's pattern keeps "12" of "12345" whole, Qwen2's
  // splits every digit.
  Tok asGpt2(ggufFromTokenizerJson(kFx + "/bpe_split/tokenizer.json", "gpt2", d + "/split_gpt2.gguf"));
  int misses = 0;
  for (const json &c : all["bpe_split"]) misses += asGpt2.encode(c["text"], true) != c["ids"].get<std::vector<int32_t>>();
  EXPECT_GT(misses, 0);
  Tok l3(ggufFromTokenizerJson(kFx + "/bpe_qwen2/tokenizer.json", "llama-bpe", d + "/l3_digits.gguf", true));
  Tok q2(ggufFromTokenizerJson(kFx + "/bpe_qwen2/tokenizer.json", "qwen2", d + "/q2_digits.gguf", true));
  const int32_t twelve = kilnrt_tokenizer_token_id(l3.t, "12");
  ASSERT_GE(twelve, 0);
  std::vector<int32_t> a = l3.encode("12345", true), b = q2.encode("12345", true);
  EXPECT_NE(std::find(a.begin(), a.end(), twelve), a.end());
  EXPECT_EQ(std::find(b.begin(), b.end(), twelve), b.end());
  EXPECT_EQ(b.size(), 5u);
  kilnrt_tokenizer *t = nullptr;
  EXPECT_EQ(kilnrt_tokenizer_open(ggufFromTokenizerJson(kFx + "/bpe_split/tokenizer.json", "falcon", d + "/f.gguf").c_str(), &t),
            KILNRT_USER_ERROR);
  EXPECT_NE(std::string(kilnrt_last_error()).find("tokenizer.ggml.pre 'falcon' is not supported"), std::string::npos)
      << kilnrt_last_error();
}

// A pre-tokenizer kiln does not implement is refused by name, never read in part.
TEST(Tokenizer, UnsupportedPreTokenizersAreRefusedByName) {
  std::ifstream f(kFx + "/bpe_digits/tokenizer.json");
  const json base = json::parse(f);
  auto refused = [&](const json &pre, const std::string &what) {
    json j = base;
    j["pre_tokenizer"] = pre;
    std::string d = kt::workDir("tok_pretok_bad");
    std::ofstream(d + "/tokenizer.json") << j.dump();
    kilnrt_tokenizer *t = nullptr;
    EXPECT_NE(kilnrt_tokenizer_open((d + "/tokenizer.json").c_str(), &t), KILNRT_OK) << pre.dump();
    EXPECT_NE(std::string(kilnrt_last_error()).find(what), std::string::npos) << kilnrt_last_error();
    if (t) kilnrt_tokenizer_close(t);
  };
  json byteLevel = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  refused({{"type", "Sequence"}, {"pretokenizers", {{{"type", "Punctuation"}, {"behavior", "Isolated"}}, byteLevel}}},
          "pre-tokenizer step Punctuation is not supported");
  refused({{"type", "Sequence"},
           {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "\\d"}}}, {"behavior", "Removed"}, {"invert", false}}, byteLevel}}},
          "Split with behavior Removed");
  refused({{"type", "Sequence"}, {"pretokenizers", {byteLevel, {{"type", "Digits"}, {"individual_digits", true}}}}},
          "a Digits step after its ByteLevel step");
  refused({{"type", "Metaspace"}, {"replacement", "_"}}, "pre-tokenizer step Metaspace");
}
