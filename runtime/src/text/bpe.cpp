// bpe.cpp - byte-level BPE (GPT-2): the pre-tokenizer's pattern, the byte-level alphabet and
// merging by rank, as Hugging Face `tokenizers` computes them.
//
// Pre-tokenization: the pre-tokenizer's splits (Digits, Split: BpeOptions::splits), then GPT-2's pattern, compiled by PCRE2 with UTF and UCP (\p{L}, \p{N} and \s are
// Unicode classes) and PCRE2_MATCH_INVALID_UTF: bytes that are not valid UTF-8 match nothing and
// become pieces of their own, so any byte string encodes and decodes back to itself. Each piece's
// bytes are mapped to the byte-level alphabet (GPT-2's bytes_to_unicode), then the adjacent pair
// of lowest merge rank, leftmost first, is merged until no pair has a rank.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <climits>
#include <cstring>

#include "../internal.h"
#include "tokenizer.h"

namespace kilnrt::text {
namespace {

const char *kPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

void append_utf8(std::string &s, uint32_t c) {
  if (c < 0x80) s += (char)c;
  else if (c < 0x800) s += {(char)(0xC0 | c >> 6), (char)(0x80 | (c & 0x3F))};
  else s += {(char)(0xE0 | c >> 12), (char)(0x80 | ((c >> 6) & 0x3F)), (char)(0x80 | (c & 0x3F))};
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others for 256 + n.
struct ByteAlphabet {
  std::string of[256];                      // byte -> its character, UTF-8
  std::unordered_map<uint32_t, uint8_t> back;  // character -> byte
  ByteAlphabet() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t c = printable ? (uint32_t)b : 256u + (uint32_t)n++;
      append_utf8(of[b], c);
      back[c] = (uint8_t)b;
    }
  }
};
const ByteAlphabet &alphabet() {
  static const ByteAlphabet a;
  return a;
}

class Bpe final : public Model {
 public:
  Bpe(const Vocab &v, const BpeOptions &o) : vocab_(v), o_(o) {}
  ~Bpe() override {
    for (auto *md : mds_) pcre2_match_data_free(md);
    for (auto *re : res_) pcre2_code_free(re);
  }

  kilnrt_status init() {
    for (size_t r = 0; r < o_.merges.size(); ++r) {
      const auto &[a, b] = o_.merges[r];
      int32_t ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
      const char *missing = ia < 0 ? a.c_str() : ib < 0 ? b.c_str() : im < 0 ? nullptr : "";
      if (!missing || *missing)
        return user_error(o_.source + ": merges entry " + std::to_string(r + 1) + " '" + a + " " + b + "' names " +
                          (missing ? "the token '" + std::string(missing) + "'" : "the merged token '" + a + b + "'") +
                          ", which is not in the vocabulary");
      merges_.emplace(key(ia, ib), std::make_pair((int32_t)r, im));
    }
    for (int b = 0; b < 256; ++b) byte_id_[b] = vocab_.find(alphabet().of[b]);
    std::vector<std::string> patterns = o_.splits;
    if (o_.use_regex) patterns.push_back(kPattern);  // the byte-level step's own split: GPT-2's pattern
    for (const std::string &p : patterns) {
      int errcode;
      PCRE2_SIZE erroff;
      pcre2_code *re = pcre2_compile((PCRE2_SPTR)p.c_str(), p.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                                     &errcode, &erroff, nullptr);
      if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        return user_error(o_.source + ": the pre-tokenizer pattern '" + p + "' does not compile (PCRE2: " + (const char *)msg +
                          " at offset " + std::to_string(erroff) + ")");
      }
      pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // faster when available; the interpreter otherwise
      res_.push_back(re);
      mds_.push_back(pcre2_match_data_create_from_pattern(re, nullptr));
    }
    return KILNRT_OK;
  }

  kilnrt_status encode(std::string_view text, std::vector<int32_t> &out) override {
    std::string buf;
    if (o_.add_prefix_space && !text.empty() && text[0] != ' ') {
      buf = " " + std::string(text);
      text = buf;
    }
    return split(0, text, out);
  }

  void piece(int32_t id, int64_t, std::string &out) const override {
    const std::string &t = vocab_.tokens[id];
    for (size_t i = 0; i < t.size();) {  // each character back to its byte
      unsigned char c = (unsigned char)t[i];
      size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      n = std::min(n, t.size() - i);
      uint32_t cp = n == 1 ? c : c & (0x7F >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | ((unsigned char)t[i + k] & 0x3F);
      auto it = alphabet().back.find(cp);
      if (it != alphabet().back.end()) out += (char)it->second;
      else out.append(t, i, n);  // not of the alphabet (an added token's text): as it is
      i += n;
    }
  }

 private:
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

  // One pre-tokenized piece: its bytes as alphabet symbols, merged by rank.
  kilnrt_status word(std::string_view w, std::vector<int32_t> &out) {
    auto hit = cache_.find(std::string(w));
    if (hit != cache_.end()) {
      out.insert(out.end(), hit->second.begin(), hit->second.end());
      return KILNRT_OK;
    }
    std::vector<int32_t> syms;
    if (o_.ignore_merges) {
      std::string mapped;
      for (unsigned char c : w) mapped += alphabet().of[c];
      if (int32_t id = vocab_.find(mapped); id >= 0) syms.push_back(id);
    }
    if (syms.empty()) {
      for (unsigned char c : w) {
        if (byte_id_[c] < 0) {
          char hex[8];
          snprintf(hex, sizeof hex, "0x%02X", c);
          return user_error(o_.source + ": the text holds the byte " + hex + ", whose byte-level token '" +
                            alphabet().of[c] + "' is not in the vocabulary");
        }
        syms.push_back(byte_id_[c]);
      }
      while (syms.size() > 1) {
        int32_t best = INT32_MAX, merged = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < syms.size(); ++i) {
          auto it = merges_.find(key(syms[i], syms[i + 1]));
          if (it != merges_.end() && it->second.first < best) {
            best = it->second.first;
            merged = it->second.second;
            at = i;
          }
        }
        if (merged < 0) break;
        syms[at] = merged;
        syms.erase(syms.begin() + (ptrdiff_t)at + 1);
      }
    }
    out.insert(out.end(), syms.begin(), syms.end());
    if (cache_.size() > (1u << 16)) cache_.clear();
    cache_.emplace(std::string(w), std::move(syms));
    return KILNRT_OK;
  }

  // The pieces of `text` after split step `step` and the ones after it, merged into ids.
  kilnrt_status split(size_t step, std::string_view text, std::vector<int32_t> &out) {
    if (step == res_.size()) return word(text, out);
    pcre2_code *re = res_[step];
    pcre2_match_data *md = mds_[step];
    size_t at = 0;
    while (at < text.size()) {
      int rc = pcre2_match(re, (PCRE2_SPTR)text.data(), text.size(), at, 0, md, nullptr);
      size_t b = text.size(), e = text.size();
      if (rc >= 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        b = ov[0];
        e = ov[1];
      } else if (rc != PCRE2_ERROR_NOMATCH) {
        return internal_error("PCRE2 failed on the text (error " + std::to_string(rc) + ")");
      }
      if (b > at)  // the text before the match (or bytes no pattern matched: invalid UTF-8)
        if (kilnrt_status st = split(step + 1, text.substr(at, b - at), out)) return st;
      if (e > b)
        if (kilnrt_status st = split(step + 1, text.substr(b, e - b), out)) return st;
      at = e > at ? e : at + 1;
    }
    return KILNRT_OK;
  }

  const Vocab &vocab_;
  BpeOptions o_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // pair -> (rank, merged id)
  int32_t byte_id_[256];
  std::vector<pcre2_code *> res_;  // the split steps' patterns, the byte-level one last (use_regex)
  std::vector<pcre2_match_data *> mds_;
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

kilnrt_status make_bpe(const Vocab &vocab, const BpeOptions &o, std::unique_ptr<Model> &out) {
  auto m = std::make_unique<Bpe>(vocab, o);
  if (kilnrt_status st = m->init()) return st;
  out = std::move(m);
  return KILNRT_OK;
}

}  // namespace kilnrt::text
