// tokenizer.h - what the tokenizer's files share (not installed): the vocabulary, and the two
// tokenizer models (byte-level BPE in bpe.cpp, WordPiece in wordpiece.cpp) behind one
// interface; tokenizer.cpp reads the files and handles added tokens and templates.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kilnrt/api.h"

namespace kilnrt::text {

struct Vocab {
  std::vector<std::string> tokens;  // by id ("" for an id no token names)
  std::unordered_map<std::string, int32_t> ids;
  int32_t find(std::string_view s) const {
    auto it = ids.find(std::string(s));
    return it == ids.end() ? -1 : it->second;
  }
};

// A tokenizer model: the text between added tokens to ids, and one id back to text.
class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `text` (normalized, pre-tokenized and split into subwords).
  virtual kilnrt_status encode(std::string_view text, std::vector<int32_t> &out) = 0;
  // Appends the text token `id` adds after `index` earlier tokens.
  virtual void piece(int32_t id, int64_t index, std::string &out) const = 0;
};

struct BpeOptions {
  std::string source;  // the file(s) it was read from, for messages
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  // Pre-tokenizer steps before the byte-level one, in order: each splits every piece at the
  // matches of a PCRE2 pattern, each match and each text between matches a piece of its own
  // (tokenizers' Split with behavior Isolated; Digits is \p{N} or \p{N}+).
  std::vector<std::string> splits;
  bool add_prefix_space = false, use_regex = true, ignore_merges = false;
};
// Fails (USER_ERROR naming source) on a merge naming a token the vocabulary lacks.
kilnrt_status make_bpe(const Vocab &vocab, const BpeOptions &o, std::unique_ptr<Model> &out);

struct WordPieceOptions {
  std::string source;
  std::string unk = "[UNK]", prefix = "##";
  int max_chars = 100;
  bool clean_text = true, chinese_chars = true, strip_accents = true, lowercase = true;
  bool cleanup = true;  // the decoder's clean-up of spaces before punctuation and contractions
};
kilnrt_status make_wordpiece(const Vocab &vocab, const WordPieceOptions &o, std::unique_ptr<Model> &out);

}  // namespace kilnrt::text
