// tokenizer.cpp - the tokenizer C API: reading a checkpoint's tokenizer files (tokenizer.json;
// vocab.json + merges.txt; vocab.txt + tokenizer_config.json), added tokens matched in the text,
// the post-processor's template, and decoding.

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../internal.h"
#include "../weights_state.h"
#include "template.h"
#include "tokenizer.h"

using namespace kilnrt;
using namespace kilnrt::text;
using json = nlohmann::json;

struct kilnrt_tokenizer {
  kilnrt_tokenizer_kind kind = KILNRT_TOKENIZER_BPE;
  Vocab vocab;
  std::unique_ptr<Model> model;
  struct Added {
    std::string content;
    int32_t id;
  };
  std::vector<Added> added;   // matched in the text as themselves
  std::vector<bool> special;  // by id
  std::vector<int32_t> prefix, suffix;  // the template around the text (add_special)
  int32_t eos = -1, bos = -1;
  std::vector<int32_t> stops;  // generation ends at any: eos, end of turn, end of message
  std::string chat_template;  // empty: none
  std::vector<int32_t> ids;  // the last results
  std::string text;
};

namespace {

std::string folder_of(const std::string &p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}
std::string base_of(const std::string &p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// A boolean field; absent or null: `dflt` (a field of another type is malformed: json throws).
bool flag(const json &j, const char *key, bool dflt) {
  return j.contains(key) && !j[key].is_null() ? j[key].get<bool>() : dflt;
}
std::string text_field(const json &j, const char *key, const std::string &dflt) {
  return j.contains(key) && !j[key].is_null() ? j[key].get<std::string>() : dflt;
}

kilnrt_status read_file(const std::string &path, std::string &out) { return kilnrt::read_file(path, "tokenizer file", out); }

kilnrt_status read_json(const std::string &path, json &out) {
  std::string s;
  if (kilnrt_status st = read_file(path, s)) return st;
  out = json::parse(s, nullptr, false);
  if (out.is_discarded()) return user_error("tokenizer file '" + path + "': not valid JSON");
  if (!out.is_object()) return user_error("tokenizer file '" + path + "': not a JSON object");
  return KILNRT_OK;
}

// Adds `token` as `id`; a token or id given twice is an error.
kilnrt_status add_token(kilnrt_tokenizer &t, const std::string &source, const std::string &token, int64_t id) {
  if (id < 0 || id >= (1 << 24)) return user_error(source + ": token '" + token + "' has the id " + std::to_string(id) +
                                                   ", outside [0, 16777216)");
  auto [it, fresh] = t.vocab.ids.emplace(token, (int32_t)id);
  if (!fresh && it->second != id)
    return user_error(source + ": token '" + token + "' is given twice, with ids " + std::to_string(it->second) + " and " +
                      std::to_string(id));
  if ((int64_t)t.vocab.tokens.size() <= id) t.vocab.tokens.resize((size_t)id + 1);
  if (fresh && !t.vocab.tokens[id].empty())
    return user_error(source + ": id " + std::to_string(id) + " names both '" + t.vocab.tokens[id] + "' and '" + token + "'");
  t.vocab.tokens[id] = token;
  return KILNRT_OK;
}

kilnrt_status read_vocab_object(kilnrt_tokenizer &t, const std::string &source, const json &v) {
  if (!v.is_object()) return user_error(source + ": the vocabulary is not an object of token -> id");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_number_integer()) return user_error(source + ": token '" + it.key() + "' has no integer id");
    if (kilnrt_status st = add_token(t, source, it.key(), it.value().get<int64_t>())) return st;
  }
  if (t.vocab.ids.empty()) return user_error(source + ": the vocabulary is empty");
  return KILNRT_OK;
}

void mark_special(kilnrt_tokenizer &t, const std::string &content) {
  int32_t id = t.vocab.find(content);
  if (id < 0) return;
  for (auto &a : t.added)
    if (a.content == content) return;
  t.added.push_back({content, id});
  t.special.resize(t.vocab.tokens.size());
  t.special[id] = true;
}

void find_eos(kilnrt_tokenizer &t) {
  for (const char *e : {"<|endoftext|>", "</s>", "<|end_of_text|>"})
    for (auto &a : t.added)
      if (a.content == e && t.eos < 0) t.eos = a.id;
}

kilnrt_status parse_merges_txt(const std::string &path, std::vector<std::pair<std::string, std::string>> &merges) {
  std::string s;
  if (kilnrt_status st = read_file(path, s)) return st;
  std::istringstream in(s);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
      return user_error("tokenizer file '" + path + "' line " + std::to_string(line_no) +
                        ": expected two tokens separated by one space, got '" + line + "'");
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  return KILNRT_OK;
}

// The template of a tokenizer.json post-processor: the special tokens before and after the text.
kilnrt_status read_post_processor(kilnrt_tokenizer &t, const std::string &source, const json &pp) {
  if (pp.is_null()) return KILNRT_OK;
  std::string type = pp.value("type", "");
  auto id_of = [&](const json &pair, int32_t &id) {
    if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) return false;
    id = pair[1].get<int32_t>();
    return true;
  };
  if (type == "ByteLevel") return KILNRT_OK;
  if (type == "Sequence") {
    for (const json &p : pp.value("processors", json::array()))
      if (kilnrt_status st = read_post_processor(t, source, p)) return st;
    return KILNRT_OK;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    int32_t cls, sep;
    if (!id_of(pp.value("cls", json()), cls) || !id_of(pp.value("sep", json()), sep))
      return user_error(source + ": post_processor " + type + " needs cls and sep as [token, id]");
    t.prefix = {cls};
    t.suffix = {sep};
    return KILNRT_OK;
  }
  if (type == "TemplateProcessing") {
    const json &single = pp.value("single", json::array());
    const json &specials = pp.value("special_tokens", json::object());
    bool after = false;
    for (const json &item : single) {
      if (item.contains("Sequence")) {
        after = true;
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].is_object() || !item["SpecialToken"].contains("id"))
        return user_error(source + ": post_processor TemplateProcessing: an item is neither Sequence nor SpecialToken");
      std::string name = item["SpecialToken"]["id"].is_string() ? item["SpecialToken"]["id"].get<std::string>() : "";
      if (!specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") ||
          !specials[name]["ids"].is_array())
        return user_error(source + ": post_processor TemplateProcessing: special token '" + name + "' has no ids");
      for (const json &id : specials[name]["ids"]) {
        if (!id.is_number_integer()) return user_error(source + ": post_processor: special token '" + name + "' has a bad id");
        (after ? t.suffix : t.prefix).push_back(id.get<int32_t>());
      }
    }
    return KILNRT_OK;
  }
  return user_error(source + ": post_processor '" + type + "' is not supported (kiln reads TemplateProcessing, "
                    "BertProcessing, RobertaProcessing and ByteLevel)");
}

// A byte-level BPE's pre-tokenizer into `o`: Digits and Split steps (their patterns, in order),
// then the ByteLevel step, alone or in a Sequence. Any other step, a Split that does not isolate
// its matches, or no ByteLevel step last is refused by name: a tokenizer read in part would
// give other ids than the checkpoint's, silently.
kilnrt_status read_pre_tokenizer(const std::string &src, const json &pre, BpeOptions &o, bool &byteLevel) {
  if (!pre.is_object()) return user_error(src + ": kiln reads byte-level BPE tokenizers (a ByteLevel pre-tokenizer); this one has none");
  std::string type = pre.value("type", std::string("?"));
  if (byteLevel) return user_error(src + ": the pre-tokenizer has a " + type + " step after its ByteLevel step, which kiln does not support");
  if (type == "Sequence") {
    const json &steps = pre.value("pretokenizers", json::array());
    if (!steps.is_array()) return user_error(src + ": pre_tokenizer Sequence: pretokenizers is not an array");
    for (const json &p : steps)
      if (kilnrt_status st = read_pre_tokenizer(src, p, o, byteLevel)) return st;
    return KILNRT_OK;
  }
  if (type == "ByteLevel") {
    o.add_prefix_space = flag(pre, "add_prefix_space", false);
    o.use_regex = flag(pre, "use_regex", true);
    byteLevel = true;
    return KILNRT_OK;
  }
  if (type == "Digits") {
    o.splits.push_back(flag(pre, "individual_digits", false) ? "\\p{N}" : "\\p{N}+");
    return KILNRT_OK;
  }
  if (type == "Split") {
    std::string behavior = pre.value("behavior", std::string("?"));
    if (behavior != "Isolated")
      return user_error(src + ": pre_tokenizer Split with behavior " + behavior + " is not supported (kiln implements Isolated)");
    if (flag(pre, "invert", false)) return user_error(src + ": pre_tokenizer Split with invert is not supported");
    const json &p = pre.value("pattern", json());
    if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
      o.splits.push_back(p["Regex"].get<std::string>());
    } else if (p.is_object() && p.contains("String") && p["String"].is_string()) {
      o.splits.push_back("\\Q" + p["String"].get<std::string>() + "\\E");  // the string as it is
    } else {
      return user_error(src + ": pre_tokenizer Split needs a pattern {\"Regex\": ...} or {\"String\": ...}");
    }
    return KILNRT_OK;
  }
  return user_error(src + ": pre-tokenizer step " + type +
                    " is not supported (kiln reads Sequence, Digits, Split (Isolated) and ByteLevel)");
}

kilnrt_status open_tokenizer_json(kilnrt_tokenizer &t, const std::string &path) {
  json j;
  if (kilnrt_status st = read_json(path, j)) return st;
  const std::string src = "tokenizer file '" + path + "'";
  if (!j.contains("model") || !j["model"].is_object()) return user_error(src + ": no 'model' object");
  const json &m = j["model"];
  std::string type = m.value("type", m.contains("merges") ? "BPE" : "");
  if (kilnrt_status st = read_vocab_object(t, src, m.value("vocab", json()))) return st;
  const json &added = j.value("added_tokens", json::array());
  if (!added.is_array()) return user_error(src + ": added_tokens is not an array");
  for (const json &a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string() || a["content"].get<std::string>().empty())
      return user_error(src + ": an added_tokens entry needs an integer id and a non-empty content");
    std::string content = a["content"].get<std::string>();
    if (kilnrt_status st = add_token(t, src, content, a["id"].get<int64_t>())) return st;
    t.added.push_back({content, a["id"].get<int32_t>()});
    t.special.resize(t.vocab.tokens.size());
    t.special[t.added.back().id] = flag(a, "special", false);
  }
  const json &norm = j.value("normalizer", json());
  const json &pre = j.value("pre_tokenizer", json());
  auto type_of = [](const json &x) { return x.is_object() ? x.value("type", std::string("?")) : std::string("none"); };
  if (type == "BPE") {
    t.kind = KILNRT_TOKENIZER_BPE;
    BpeOptions o;
    o.source = src;
    o.ignore_merges = flag(m, "ignore_merges", false);
    // Options that change the result and that kiln does not implement: refused, not ignored.
    for (const char *k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (!text_field(m, k, "").empty())
        return user_error(src + ": a BPE model with " + k + " '" + text_field(m, k, "") + "' is not supported");
    if (flag(m, "byte_fallback", false)) return user_error(src + ": a BPE model with byte_fallback is not supported");
    if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0)
      return user_error(src + ": BPE dropout (a training option) is not supported");
    bool byteLevel = false;
    if (kilnrt_status st = read_pre_tokenizer(src, pre, o, byteLevel)) return st;
    if (!byteLevel)
      return user_error(src + ": kiln reads byte-level BPE tokenizers (a ByteLevel pre-tokenizer); this one's "
                        "pre-tokenizer is " + type_of(pre));
    if (!norm.is_null()) return user_error(src + ": a byte-level BPE tokenizer with a normalizer (" + type_of(norm) +
                                           ") is not supported");
    const json &merges = m.value("merges", json::array());
    if (!merges.is_array()) return user_error(src + ": model.merges is not an array");
    for (size_t i = 0; i < merges.size(); ++i) {
      const json &e = merges[i];
      if (e.is_string()) {
        std::string s = e.get<std::string>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
          return user_error(src + ": merges entry " + std::to_string(i + 1) + " '" + s + "' is not two tokens");
        o.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        o.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        return user_error(src + ": merges entry " + std::to_string(i + 1) + " is neither \"a b\" nor [a, b]");
      }
    }
    if (kilnrt_status st = make_bpe(t.vocab, o, t.model)) return st;
  } else if (type == "WordPiece") {
    t.kind = KILNRT_TOKENIZER_WORDPIECE;
    WordPieceOptions o;
    o.source = src;
    o.unk = text_field(m, "unk_token", "[UNK]");
    o.prefix = text_field(m, "continuing_subword_prefix", "##");
    o.max_chars = m.contains("max_input_chars_per_word") && !m["max_input_chars_per_word"].is_null()
                      ? m["max_input_chars_per_word"].get<int>()
                      : 100;
    if (norm.is_null()) {
      o.clean_text = o.chinese_chars = o.strip_accents = o.lowercase = false;
    } else if (type_of(norm) == "BertNormalizer") {
      o.clean_text = flag(norm, "clean_text", true);
      o.chinese_chars = flag(norm, "handle_chinese_chars", true);
      o.lowercase = flag(norm, "lowercase", true);
      o.strip_accents = norm.contains("strip_accents") && norm["strip_accents"].is_boolean()
                            ? norm["strip_accents"].get<bool>()
                            : o.lowercase;
    } else {
      return user_error(src + ": normalizer " + type_of(norm) + " is not supported (kiln reads BertNormalizer)");
    }
    if (type_of(pre) != "BertPreTokenizer")
      return user_error(src + ": kiln reads WordPiece tokenizers with BertPreTokenizer; this one's pre-tokenizer is " +
                        type_of(pre));
    const json &dec = j.value("decoder", json());
    if (dec.is_object()) o.cleanup = flag(dec, "cleanup", true);
    if (kilnrt_status st = make_wordpiece(t.vocab, o, t.model)) return st;
  } else {
    return user_error(src + ": model type '" + type + "' is not supported (kiln reads BPE and WordPiece)");
  }
  return read_post_processor(t, src, j.value("post_processor", json()));
}

kilnrt_status open_vocab_merges(kilnrt_tokenizer &t, const std::string &vocab, const std::string &merges) {
  json v;
  if (kilnrt_status st = read_json(vocab, v)) return st;
  if (kilnrt_status st = read_vocab_object(t, "tokenizer file '" + vocab + "'", v)) return st;
  BpeOptions o;
  o.source = "tokenizer file '" + merges + "'";
  if (kilnrt_status st = parse_merges_txt(merges, o.merges)) return st;
  t.kind = KILNRT_TOKENIZER_BPE;
  mark_special(t, "<|endoftext|>");
  return make_bpe(t.vocab, o, t.model);
}

kilnrt_status open_vocab_txt(kilnrt_tokenizer &t, const std::string &path) {
  std::string s;
  if (kilnrt_status st = read_file(path, s)) return st;
  const std::string src = "tokenizer file '" + path + "'";
  std::istringstream in(s);
  int64_t id = 0;
  for (std::string line; std::getline(in, line); ++id) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) return user_error(src + " line " + std::to_string(id + 1) + ": an empty token");
    if (kilnrt_status st = add_token(t, src, line, id)) return st;
  }
  if (t.vocab.ids.empty()) return user_error(src + ": the vocabulary is empty");
  WordPieceOptions o;
  o.source = src;
  // BertTokenizer's settings, from tokenizer_config.json beside the vocabulary when present.
  std::string cfg = folder_of(path) + "/tokenizer_config.json";
  if (path_exists(cfg)) {
    json c;
    if (kilnrt_status st = read_json(cfg, c)) return st;
    auto flag = [&](const char *k, bool dflt) {
      return c.contains(k) && c[k].is_boolean() ? c[k].get<bool>() : dflt;
    };
    o.lowercase = flag("do_lower_case", true);
    o.strip_accents = flag("strip_accents", o.lowercase);
    o.chinese_chars = flag("tokenize_chinese_chars", true);
    if (c.contains("unk_token") && c["unk_token"].is_string()) o.unk = c["unk_token"].get<std::string>();
  }
  t.kind = KILNRT_TOKENIZER_WORDPIECE;
  for (const char *sp : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) mark_special(t, sp);
  int32_t cls = t.vocab.find("[CLS]"), sep = t.vocab.find("[SEP]");
  if (cls >= 0 && sep >= 0) {
    t.prefix = {cls};
    t.suffix = {sep};
  }
  return make_wordpiece(t.vocab, o, t.model);
}

// The tokenizer a GGUF file holds in its metadata (tokenizer.ggml.*): byte-level BPE ("gpt2")
// with the pre-tokenizer `tokenizer.ggml.pre` names (each name kiln knows mapped to its steps;
// another is refused by name), control tokens (type 3) matched in the text as special tokens,
// user-defined ones (type 4) as plain added tokens, the BOS id prepended when
// tokenizer.ggml.add_bos_token says so.
kilnrt_status open_gguf_tokenizer(kilnrt_tokenizer &t, const std::string &path) {
  kilnrt_weights w;
  w.path = path;
  if (kilnrt_status st = open_gguf(path, &w, false)) return st;
  const std::string src = "GGUF file '" + path + "'";
  const json &meta = w.meta;
  std::string model = meta.value("tokenizer.ggml.model", std::string());
  if (model.empty()) return user_error(src + ": no tokenizer in its metadata (tokenizer.ggml.model)");
  if (model != "gpt2")
    return user_error(src + ": tokenizer.ggml.model '" + model + "' is not supported (kiln reads 'gpt2', byte-level BPE)");
  std::string pre = meta.value("tokenizer.ggml.pre", std::string("default"));
  BpeOptions o;
  o.source = src;
  // The names' steps, as the tokenizer.json files of those families write them: a Split with the
  // family's pattern replaces GPT-2's (ByteLevel without its own regex).
  static const char *const kLlama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const char *const kQwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre == "smollm") {
    o.splits.push_back("\\p{N}");  // Digits (individual), then GPT-2's pattern
  } else if (pre == "llama-bpe" || pre == "llama3") {
    o.splits.push_back(kLlama3);
    o.use_regex = false;
  } else if (pre == "qwen2") {
    o.splits.push_back(kQwen2);
    o.use_regex = false;
  } else if (pre != "gpt2" && pre != "default") {
    return user_error(src + ": tokenizer.ggml.pre '" + pre +
                      "' is not supported (kiln knows 'smollm', 'llama-bpe', 'llama3', 'qwen2', 'gpt2' and 'default')");
  }
  const json &tokens = meta.value("tokenizer.ggml.tokens", json());
  const json &types = meta.value("tokenizer.ggml.token_type", json::array());
  const json &merges = meta.value("tokenizer.ggml.merges", json());
  if (!tokens.is_array() || tokens.empty()) return user_error(src + ": tokenizer.ggml.tokens is not a list of tokens");
  if (!merges.is_array()) return user_error(src + ": tokenizer.ggml.merges is not a list of merges");
  if (!types.empty() && types.size() != tokens.size())
    return user_error(src + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                      std::to_string(tokens.size()) + " tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].is_string()) return user_error(src + ": token " + std::to_string(i) + " is not a string");
    if (kilnrt_status st = add_token(t, src, tokens[i].get<std::string>(), (int64_t)i)) return st;
  }
  t.special.assign(t.vocab.tokens.size(), false);
  for (size_t i = 0; i < types.size(); ++i) {
    int type = types[i].is_number_integer() ? types[i].get<int>() : -1;
    if (type == 3 || type == 4) {
      t.added.push_back({tokens[i].get<std::string>(), (int32_t)i});
      t.special[i] = type == 3;
    }
  }
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string m = merges[i].is_string() ? merges[i].get<std::string>() : std::string();
    size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= m.size() || m.find(' ', sp + 1) != std::string::npos)
      return user_error(src + ": merges entry " + std::to_string(i + 1) + " '" + m + "' is not two tokens");
    o.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  auto id = [&](const char *key) {
    const json &v = meta.value(key, json());
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t)tokens.size() ? (int32_t)v.get<int64_t>() : -1;
  };
  t.eos = id("tokenizer.ggml.eos_token_id");
  for (const char *k : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (id(k) >= 0) t.stops.push_back(id(k));
  if (meta.contains("tokenizer.chat_template") && meta["tokenizer.chat_template"].is_string())
    t.chat_template = meta["tokenizer.chat_template"].get<std::string>();
  t.bos = id("tokenizer.ggml.bos_token_id");
  if (meta.value("tokenizer.ggml.add_bos_token", false) && id("tokenizer.ggml.bos_token_id") >= 0)
    t.prefix.push_back(id("tokenizer.ggml.bos_token_id"));
  return make_bpe(t.vocab, o, t.model);
}

kilnrt_status open_any(kilnrt_tokenizer &t, const std::string &path) {
  if (!is_dir(path) && is_gguf(path)) return open_gguf_tokenizer(t, path);
  if (is_dir(path)) {
    if (path_exists(path + "/tokenizer.json")) return open_tokenizer_json(t, path + "/tokenizer.json");
    if (path_exists(path + "/vocab.json") || path_exists(path + "/merges.txt")) {
      for (const char *f : {"/vocab.json", "/merges.txt"})
        if (!path_exists(path + f))
          return user_error("tokenizer folder '" + path + "' has " + (f[1] == 'v' ? "merges.txt" : "vocab.json") +
                            " but no " + (f + 1));
      return open_vocab_merges(t, path + "/vocab.json", path + "/merges.txt");
    }
    if (path_exists(path + "/vocab.txt")) return open_vocab_txt(t, path + "/vocab.txt");
    return user_error("tokenizer folder '" + path + "' has no tokenizer.json, vocab.json + merges.txt, or vocab.txt");
  }
  if (!path_exists(path)) return user_error("tokenizer file '" + path + "' does not exist");
  std::string base = base_of(path), dir = folder_of(path);
  if (base == "vocab.json" || base == "merges.txt") {
    std::string other = dir + (base == "vocab.json" ? "/merges.txt" : "/vocab.json");
    if (!path_exists(other)) return user_error("tokenizer file '" + path + "' needs '" + other + "' beside it");
    return base == "vocab.json" ? open_vocab_merges(t, path, other) : open_vocab_merges(t, other, path);
  }
  if (base.size() >= 4 && base.compare(base.size() - 4, 4, ".txt") == 0) return open_vocab_txt(t, path);
  return open_tokenizer_json(t, path);
}

}  // namespace

extern "C" kilnrt_status kilnrt_tokenizer_open(const char *path, kilnrt_tokenizer **out) {
  *out = nullptr;
  auto t = std::make_unique<kilnrt_tokenizer>();
  try {
    if (kilnrt_status st = open_any(*t, path)) return st;
  } catch (const json::exception &e) {  // a field of the wrong type
    return user_error(std::string("tokenizer '") + path + "': malformed: " + e.what());
  }
  t->special.resize(t->vocab.tokens.size());
  for (int32_t id : t->prefix)
    if (id < 0 || id >= (int32_t)t->vocab.tokens.size() || t->vocab.tokens[id].empty())
      return user_error(std::string("tokenizer '") + path + "': the template names the id " + std::to_string(id) +
                        ", which no token has");
  for (int32_t id : t->suffix)
    if (id < 0 || id >= (int32_t)t->vocab.tokens.size() || t->vocab.tokens[id].empty())
      return user_error(std::string("tokenizer '") + path + "': the template names the id " + std::to_string(id) +
                        ", which no token has");
  // Longest first: at each position the longest added token that starts there matches.
  std::stable_sort(t->added.begin(), t->added.end(),
                   [](const auto &a, const auto &b) { return a.content.size() > b.content.size(); });
  find_eos(*t);
  // The stop ids: the end-of-text token, those a GGUF file names (end of turn, end of message),
  // generation_config.json's eos_token_id (an id or a list: Llama 3 has several) beside a
  // tokenizer.json, and the special tokens that end a turn in the common chat formats.
  if (t->eos >= 0) t->stops.push_back(t->eos);
  if (std::string gc = (is_dir(path) ? std::string(path) : folder_of(path)) + "/generation_config.json"; path_exists(gc)) {
    json g;
    if (read_json(gc, g) == KILNRT_OK && g.is_object() && g.contains("eos_token_id")) {
      json e = g["eos_token_id"].is_array() ? g["eos_token_id"] : json::array({g["eos_token_id"]});
      for (const json &v : e)
        if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t)t->vocab.tokens.size())
          t->stops.push_back((int32_t)v.get<int64_t>());
    }
  }
  for (const char *e : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"})
    for (auto &a : t->added)
      if (a.content == e && a.id < (int32_t)t->special.size() && t->special[a.id]) t->stops.push_back(a.id);
  std::sort(t->stops.begin(), t->stops.end());
  t->stops.erase(std::unique(t->stops.begin(), t->stops.end()), t->stops.end());
  if (t->chat_template.empty()) {  // tokenizer_config.json's chat_template (a string, or named templates)
    std::string cfg = (is_dir(path) ? std::string(path) : folder_of(path)) + "/tokenizer_config.json";
    json c;
    if (path_exists(cfg) && read_json(cfg, c) == KILNRT_OK && c.contains("chat_template")) {
      const json &ct = c["chat_template"];
      if (ct.is_string()) t->chat_template = ct.get<std::string>();
      else if (ct.is_array())
        for (const json &e : ct)
          if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
            t->chat_template = e["template"].get<std::string>();
    }
  }
  *out = t.release();
  return KILNRT_OK;
}

extern "C" void kilnrt_tokenizer_close(kilnrt_tokenizer *t) { delete t; }
extern "C" const char *kilnrt_tokenizer_chat_template(const kilnrt_tokenizer *t) {
  return t->chat_template.empty() ? nullptr : t->chat_template.c_str();
}
extern "C" kilnrt_status kilnrt_chat_render(const char *template_text, const char *context_json, const char **text, size_t *len) {
  thread_local std::string out;
  json ctx = json::parse(context_json ? context_json : "", nullptr, false);
  if (ctx.is_discarded() || !ctx.is_object()) return user_error("chat template context: not a JSON object");
  if (kilnrt_status st = render_template(template_text ? template_text : "", ctx, out)) return st;
  *text = out.data();
  *len = out.size();
  return KILNRT_OK;
}
extern "C" kilnrt_tokenizer_kind kilnrt_tokenizer_kind_of(const kilnrt_tokenizer *t) { return t->kind; }
extern "C" int32_t kilnrt_tokenizer_vocab_size(const kilnrt_tokenizer *t) { return (int32_t)t->vocab.tokens.size(); }
extern "C" int32_t kilnrt_tokenizer_eos(const kilnrt_tokenizer *t) { return t->eos; }
extern "C" int32_t kilnrt_tokenizer_bos(const kilnrt_tokenizer *t) { return t->bos; }
extern "C" int64_t kilnrt_tokenizer_stop_ids(const kilnrt_tokenizer *t, const int32_t **ids) {
  *ids = t->stops.data();
  return (int64_t)t->stops.size();
}
extern "C" int32_t kilnrt_tokenizer_token_id(const kilnrt_tokenizer *t, const char *token) {
  return t->vocab.find(token);
}

extern "C" kilnrt_status kilnrt_tokenizer_encode(kilnrt_tokenizer *t, const char *text, size_t len, int32_t add_special,
                                                 const int32_t **ids, int64_t *n) {
  t->ids.clear();
  if (add_special) t->ids = t->prefix;
  std::string_view s(text ? text : "", text ? len : 0);
  size_t from = 0;
  for (size_t at = 0; at < s.size();) {
    const kilnrt_tokenizer::Added *hit = nullptr;
    for (const auto &a : t->added)
      if (s.compare(at, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++at;
      continue;
    }
    if (at > from)
      if (kilnrt_status st = t->model->encode(s.substr(from, at - from), t->ids)) return st;
    t->ids.push_back(hit->id);
    from = at += hit->content.size();
  }
  if (s.size() > from)
    if (kilnrt_status st = t->model->encode(s.substr(from), t->ids)) return st;
  if (add_special) t->ids.insert(t->ids.end(), t->suffix.begin(), t->suffix.end());
  *ids = t->ids.data();
  *n = (int64_t)t->ids.size();
  return KILNRT_OK;
}

static kilnrt_status check_id(const kilnrt_tokenizer *t, int32_t id) {
  if (id < 0 || id >= (int32_t)t->vocab.tokens.size() || t->vocab.tokens[id].empty())
    return user_error("token id " + std::to_string(id) + " is not in the tokenizer's vocabulary (" +
                      std::to_string(t->vocab.tokens.size()) + " ids)");
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_tokenizer_decode(kilnrt_tokenizer *t, const int32_t *ids, int64_t n, int32_t skip_special,
                                                 const char **text, size_t *len) {
  t->text.clear();
  int64_t emitted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (kilnrt_status st = check_id(t, ids[i])) return st;
    if (skip_special && t->special[ids[i]]) continue;
    t->model->piece(ids[i], emitted++, t->text);
  }
  *text = t->text.data();
  *len = t->text.size();
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_tokenizer_piece(kilnrt_tokenizer *t, int32_t id, int64_t index, int32_t skip_special,
                                                const char **text, size_t *len) {
  t->text.clear();
  if (kilnrt_status st = check_id(t, id)) return st;
  if (!(skip_special && t->special[id])) t->model->piece(id, index, t->text);
  *text = t->text.data();
  *len = t->text.size();
  return KILNRT_OK;
}
