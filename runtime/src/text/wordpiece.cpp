// wordpiece.cpp - WordPiece (BERT): BERT's normalizer and pre-tokenizer, greedy longest-match
// subwords, and its decoder, as Hugging Face `tokenizers` computes them. Unicode categories,
// canonical decomposition and lower-casing come from utf8proc.
//
//  normalize: (clean_text) drop NUL, U+FFFD and control/format/unassigned/private characters,
//             whitespace becomes ' '; (chinese_chars) spaces around each CJK ideograph;
//             (strip_accents) canonical decomposition, nonspacing marks dropped; (lowercase).
//  split:     on whitespace (dropped) and around each punctuation character (kept alone).
//  subwords:  longest vocabulary match from the left, continuations prefixed "##"; a word with
//             no full cover, or longer than max_chars characters, is the unknown token.
#include <utf8proc.h>

#include <array>

#include "../internal.h"
#include "tokenizer.h"

namespace kilnrt::text {
namespace {

bool is_whitespace(int32_t c) {
  if (c == '\t' || c == '\n' || c == '\r' || c == ' ' || c == 0x0B || c == 0x0C || c == 0x85) return true;
  utf8proc_category_t k = utf8proc_category(c);
  return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}
bool is_control(int32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  utf8proc_category_t k = utf8proc_category(c);
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CN ||
         k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CS;
}
bool is_punctuation(int32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  utf8proc_category_t k = utf8proc_category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}
bool is_cjk(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Text as code points; a byte that is not valid UTF-8 is U+FFFD.
std::vector<int32_t> code_points(std::string_view s) {
  std::vector<int32_t> cps;
  for (size_t i = 0; i < s.size();) {
    int32_t c;
    utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)s.data() + i, (utf8proc_ssize_t)(s.size() - i), &c);
    if (n <= 0) {
      c = 0xFFFD;
      n = 1;
    }
    cps.push_back(c);
    i += (size_t)n;
  }
  return cps;
}

void append(std::string &s, int32_t c) {
  utf8proc_uint8_t b[4];
  s.append((const char *)b, (size_t)utf8proc_encode_char(c, b));
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

class WordPiece final : public Model {
 public:
  WordPiece(const Vocab &v, const WordPieceOptions &o) : vocab_(v), o_(o) {}

  kilnrt_status init() {
    unk_ = vocab_.find(o_.unk);
    if (unk_ < 0) return user_error(o_.source + ": the unknown token '" + o_.unk + "' is not in the vocabulary");
    return KILNRT_OK;
  }

  kilnrt_status encode(std::string_view text, std::vector<int32_t> &out) override {
    std::vector<int32_t> norm;
    for (int32_t c : code_points(text)) {
      if (o_.clean_text) {
        if (c == 0 || c == 0xFFFD || is_control(c)) continue;
        if (is_whitespace(c)) c = ' ';
      }
      if (o_.chinese_chars && is_cjk(c)) {
        norm.insert(norm.end(), {' ', c, ' '});
        continue;
      }
      norm.push_back(c);
    }
    if (o_.strip_accents) {
      std::vector<int32_t> stripped;
      for (int32_t c : norm) {
        std::array<utf8proc_int32_t, 32> d;
        utf8proc_ssize_t n = utf8proc_decompose_char(c, d.data(), (utf8proc_ssize_t)d.size(), UTF8PROC_DECOMPOSE, nullptr);
        if (n <= 0 || n > (utf8proc_ssize_t)d.size()) n = 1, d[0] = c;
        for (utf8proc_ssize_t k = 0; k < n; ++k)
          if (utf8proc_category(d[k]) != UTF8PROC_CATEGORY_MN) stripped.push_back(d[k]);
      }
      norm.swap(stripped);
    }
    if (o_.lowercase)
      for (int32_t &c : norm) c = utf8proc_tolower(c);
    // Words: split on whitespace, punctuation alone.
    std::vector<int32_t> w;
    for (int32_t c : norm) {
      if (is_whitespace(c) || is_punctuation(c)) {
        word(w, out);
        w.clear();
        if (!is_whitespace(c)) word({c}, out);
      } else {
        w.push_back(c);
      }
    }
    word(w, out);
    return KILNRT_OK;
  }

  void piece(int32_t id, int64_t index, std::string &out) const override {
    std::string t = vocab_.tokens[id];
    if (index > 0) t = t.compare(0, o_.prefix.size(), o_.prefix) == 0 ? t.substr(o_.prefix.size()) : " " + t;
    if (o_.cleanup) {
      static const std::pair<const char *, const char *> kRules[] = {
          {" .", "."},   {" ?", "?"},        {" !", "!"},    {" ,", ","},     {" ' ", "'"},   {" n't", "n't"},
          {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
      for (auto &[from, to] : kRules) t = replace_all(t, from, to);
    }
    out += t;
  }

 private:
  void word(const std::vector<int32_t> &cps, std::vector<int32_t> &out) {
    if (cps.empty()) return;
    if ((int)cps.size() > o_.max_chars) {
      out.push_back(unk_);
      return;
    }
    std::vector<size_t> at{0};  // byte offset of each code point
    std::string s;
    for (int32_t c : cps) {
      append(s, c);
      at.push_back(s.size());
    }
    std::vector<int32_t> ids;
    for (size_t start = 0; start < cps.size();) {
      int32_t found = -1;
      size_t end = cps.size();
      for (; end > start; --end) {
        std::string sub = s.substr(at[start], at[end] - at[start]);
        if (start > 0) sub = o_.prefix + sub;
        if ((found = vocab_.find(sub)) >= 0) break;
      }
      if (found < 0) {
        out.push_back(unk_);
        return;
      }
      ids.push_back(found);
      start = end;
    }
    out.insert(out.end(), ids.begin(), ids.end());
  }

  const Vocab &vocab_;
  WordPieceOptions o_;
  int32_t unk_ = -1;
};

}  // namespace

kilnrt_status make_wordpiece(const Vocab &vocab, const WordPieceOptions &o, std::unique_ptr<Model> &out) {
  auto m = std::make_unique<WordPiece>(vocab, o);
  if (kilnrt_status st = m->init()) return st;
  out = std::move(m);
  return KILNRT_OK;
}

}  // namespace kilnrt::text
