// gguf.cpp - GGUF files (the format of llama.cpp) as weights.
//
// Layout (versions 2 and 3, little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata
// count; the metadata (a string key, a u32 value type, the value: integers, floats, bools,
// strings as u64 length + bytes, arrays as u32 element type + u64 count + elements, nested);
// the tensor infos (name, u32 dims, u64 extents fastest first, u32 type, u64 offset from the
// data section); the data section at the next multiple of `general.alignment` (default 32).
//
// Every count, length, extent and offset is checked against the file and against overflow
// before it is used; a tensor outside the data, two tensors overlapping, a name or key given
// twice, an unknown value type, a misaligned offset are each refused with a message naming the
// problem. Tensor types F32 (read in place), F16 and BF16 (widened when bound, as from
// safetensors), Q8_0, Q4_0 and Q4_1 (blocks of 32 with an f16 scale, and an f16 minimum for
// Q4_1: kept as stored, for a model compiled with those types: quant.cpp); any other type is
// refused naming it and the tensor.
//
// Names: the tensors of architectures "llama", "qwen2" and "qwen3" are given Hugging Face's names
// (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM: weights, biases, Qwen3's q/k norms).
// The rows of a llama file's attn_q and attn_k (weights and biases), which llama.cpp's converter
// permutes for its rotary layout (pairs (2i, 2i + 1) of each head), are put back in Hugging
// Face's order (pairs (i, i + d/2)), so one compiled model (rope half_split) reads both kinds of
// checkpoint; qwen2 and qwen3 files are stored in Hugging Face's order already (the converter
// permutes Llama's only). The metadata's sizes become a config.json (`config`: model_type the
// architecture, biases where the file has them), checked against the model like a checkpoint's.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <regex>
#include <set>

#include "weights_state.h"

using json = nlohmann::json;

namespace kilnrt {
namespace {

// ggml's tensor types: the ones kiln reads, and names for the rest (messages).
struct TypeInfo {
  int block;       // weights per block
  int bytes;       // bytes per block
  const char *name;
};
const std::map<uint32_t, TypeInfo> kTypes = {{0, {1, 4, "F32"}},    {1, {1, 2, "F16"}},   {2, {32, 18, "Q4_0"}},
                                             {3, {32, 20, "Q4_1"}}, {8, {32, 34, "Q8_0"}}, {30, {1, 2, "BF16"}}};
const std::map<uint32_t, const char *> kOtherTypes = {
    {6, "Q5_0"},     {7, "Q5_1"},    {9, "Q8_1"},    {10, "Q2_K"},   {11, "Q3_K"},    {12, "Q4_K"},  {13, "Q5_K"},
    {14, "Q6_K"},    {15, "Q8_K"},   {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"},
    {21, "IQ3_S"},   {22, "IQ2_S"},  {23, "IQ4_XS"}, {24, "I8"},     {25, "I16"},     {26, "I32"},   {27, "I64"},
    {28, "F64"},     {29, "IQ1_M"},  {34, "TQ1_0"},  {35, "TQ2_0"},  {39, "MXFP4"}};

std::string typeName(uint32_t t) {
  if (auto it = kTypes.find(t); it != kTypes.end()) return it->second.name;
  if (auto it = kOtherTypes.find(t); it != kOtherTypes.end()) return it->second;
  return "type " + std::to_string(t);
}

// A bounds-checked cursor over the mapped file.
struct Reader {
  const uint8_t *p;
  size_t size, at = 0;
  std::string err;
  bool need(uint64_t n, const char *what) {
    if (n > size - at) {
      if (err.empty())
        err = std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(at) +
              " but the file ends at " + std::to_string(size);
      return false;
    }
    return true;
  }
  template <class T>
  bool get(T &v, const char *what) {
    if (!need(sizeof v, what)) return false;
    memcpy(&v, p + at, sizeof v);
    at += sizeof v;
    return true;
  }
  bool str(std::string &s, const char *what) {
    uint64_t n;
    if (!get(n, what) || !need(n, what)) return false;
    s.assign((const char *)p + at, n);
    at += n;
    return true;
  }
};

// Reads one metadata value of `type` into `out` (arrays nest up to a few levels).
bool readValue(Reader &r, uint32_t type, json &out, int depth, const std::string &key) {
  auto num = [&](auto v) {
    if (!r.get(v, "a metadata value")) return false;
    out = v;
    return true;
  };
  switch (type) {
    case 0: return num(uint8_t{});
    case 1: return num(int8_t{});
    case 2: return num(uint16_t{});
    case 3: return num(int16_t{});
    case 4: return num(uint32_t{});
    case 5: return num(int32_t{});
    case 6: return num(float{});
    case 10: return num(uint64_t{});
    case 11: return num(int64_t{});
    case 12: return num(double{});
    case 7: {
      uint8_t b;
      if (!r.get(b, "a metadata bool")) return false;
      if (b > 1) return r.err = "metadata '" + key + "': a bool holds " + std::to_string(b) + ", not 0 or 1", false;
      out = b == 1;
      return true;
    }
    case 8: {
      std::string s;
      if (!r.str(s, "a metadata string")) return false;
      out = std::move(s);
      return true;
    }
    case 9: {
      uint32_t et;
      uint64_t n;
      if (!r.get(et, "an array's type") || !r.get(n, "an array's length")) return false;
      if (depth >= 4) return r.err = "metadata '" + key + "': arrays nested deeper than 4", false;
      // Every element takes at least a byte (a string at least its 8-byte length): a count the
      // rest of the file cannot hold is refused before anything is allocated for it.
      uint64_t least = et == 8 ? 8 : et == 9 ? 12 : 1;
      if (n > (r.size - r.at) / least)
        return r.err = "metadata '" + key + "': an array of " + std::to_string(n) + " elements is longer than the rest of the file",
               false;
      out = json::array();
      for (uint64_t i = 0; i < n; ++i) {
        json e;
        if (!readValue(r, et, e, depth + 1, key)) return false;
        out.push_back(std::move(e));
      }
      return true;
    }
    default: return r.err = "metadata '" + key + "': unknown value type " + std::to_string(type), false;
  }
}

// The architectures whose tensors get Hugging Face's names (below).
bool llamaFamily(const std::string &arch) { return arch == "llama" || arch == "qwen2" || arch == "qwen3"; }

// llama.cpp's names of a Llama-family model's tensors -> Hugging Face's (LlamaForCausalLM; the
// same names in Qwen2ForCausalLM and Qwen3ForCausalLM): weights and biases.
std::string llamaName(const std::string &n) {
  static const std::map<std::string, std::string> top = {
      {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"}, {"output.weight", "lm_head.weight"}};
  if (auto it = top.find(n); it != top.end()) return it->second;
  static const std::map<std::string, std::string> block = {
      {"attn_norm", "input_layernorm"},     {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},       {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},  {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},            {"ffn_down", "mlp.down_proj"}};
  static const std::regex blk("blk\\.([0-9]+)\\.(.*)\\.(weight|bias)");
  std::smatch m;
  if (std::regex_match(n, m, blk))
    if (auto it = block.find(m[2].str()); it != block.end())
      return "model.layers." + m[1].str() + "." + it->second + "." + m[3].str();
  return n;  // unknown: kept, and reported by the binding like any tensor the model lacks
}

// Rows of attn_q / attn_k from llama.cpp's rotary order back to Hugging Face's: within each head
// of `hd` rows, file row 2i + s is row s·hd/2 + i. A row is `rowBytes` bytes (its f32 values, or
// its quantized blocks: whole rows move).
void unpermuteRows(uint8_t *w, int64_t rows, size_t rowBytes, int64_t heads) {
  const int64_t hd = rows / heads;
  std::vector<uint8_t> tmp((size_t)hd * rowBytes);
  for (int64_t h = 0; h < heads; ++h) {
    uint8_t *head = w + (size_t)(h * hd) * rowBytes;
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int s = 0; s < 2; ++s) memcpy(&tmp[(size_t)(s * hd / 2 + i) * rowBytes], head + (size_t)(2 * i + s) * rowBytes, rowBytes);
    memcpy(head, tmp.data(), tmp.size());
  }
}

}  // namespace

bool is_gguf(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  char magic[4] = {};
  bool yes = read(fd, magic, 4) == 4 && memcmp(magic, "GGUF", 4) == 0;
  close(fd);
  return yes;
}

namespace {
kilnrt_status openGguf(const std::string &path, kilnrt_weights *w, bool tensors);
}

// Any metadata value of an unexpected type that a check below missed is still an error naming
// the file, never an uncaught exception.
kilnrt_status open_gguf(const std::string &path, kilnrt_weights *w, bool tensors) {
  try {
    return openGguf(path, w, tensors);
  } catch (const json::exception &e) {
    return user_error("GGUF file '" + path + "': malformed metadata (" + e.what() + ")");
  }
}

namespace {
kilnrt_status openGguf(const std::string &path, kilnrt_weights *w, bool tensors) {
  auto bad = [&](const std::string &why) { return user_error("GGUF file '" + path + "': " + why); };
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return bad(std::string("cannot open: ") + strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return bad("not a regular file");
  }
  size_t fsize = (size_t)st.st_size;
  void *map = fsize ? mmap(nullptr, fsize, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  close(fd);
  if (map == MAP_FAILED) return bad(fsize ? std::string("mmap failed: ") + strerror(errno) : "empty file");
  w->maps.push_back({map, fsize});
  w->gguf = true;
  Reader r{(const uint8_t *)map, fsize};
  uint32_t magic, version;
  uint64_t nTensors, nKv;
  if (!r.get(magic, "the magic") || memcmp(&magic, "GGUF", 4) != 0) return bad("no GGUF magic");
  if (!r.get(version, "the version")) return bad(r.err);
  if (version != 2 && version != 3) return bad("version " + std::to_string(version) + " (kiln reads versions 2 and 3)");
  if (!r.get(nTensors, "the tensor count") || !r.get(nKv, "the metadata count")) return bad(r.err);
  if (nKv > fsize / 13 || nTensors > fsize / 28)
    return bad("claims " + std::to_string(nKv) + " metadata entries and " + std::to_string(nTensors) +
               " tensors, more than its " + std::to_string(fsize) + " bytes can hold");
  w->meta = json::object();
  for (uint64_t i = 0; i < nKv; ++i) {
    std::string key;
    uint32_t type;
    if (!r.str(key, "a metadata key") || !r.get(type, "a metadata type")) return bad(r.err);
    if (w->meta.contains(key)) return bad("metadata key '" + key + "' appears twice");
    json v;
    if (!readValue(r, type, v, 0, key)) return bad(r.err);
    w->meta[key] = std::move(v);
  }
  uint64_t alignment = 32;
  if (w->meta.contains("general.alignment")) {
    const json &a = w->meta["general.alignment"];
    if (!a.is_number_unsigned() || a.get<uint64_t>() == 0 || (a.get<uint64_t>() & (a.get<uint64_t>() - 1)) ||
        a.get<uint64_t>() > 65536)
      return bad("general.alignment is " + a.dump(-1, ' ', false, json::error_handler_t::replace) + ", not a power of two up to 65536");
    alignment = a.get<uint64_t>();
  }
  std::string arch;
  if (auto it = w->meta.find("general.architecture"); it != w->meta.end()) {
    if (!it->is_string())
      return bad("general.architecture is " + it->dump(-1, ' ', false, json::error_handler_t::replace) + ", not a string");
    arch = it->get<std::string>();
  }
  struct Info {
    std::string name;
    std::vector<int64_t> ne;  // fastest first
    uint32_t type;
    uint64_t offset, bytes;
  };
  std::vector<Info> infos;
  std::set<std::string> names;
  for (uint64_t i = 0; i < nTensors; ++i) {
    Info t;
    uint32_t nd;
    if (!r.str(t.name, "a tensor name") || !r.get(nd, "a tensor's dims")) return bad(r.err);
    auto tb = [&](const std::string &why) { return bad("tensor '" + t.name + "': " + why); };
    if (!names.insert(t.name).second) return tb("appears twice");
    if (nd == 0 || nd > KILN_MAX_RANK) return tb(std::to_string(nd) + " dims (1 to 4 expected)");
    __int128 count = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t e;
      if (!r.get(e, "a tensor extent")) return bad(r.err);
      if (e == 0 || e > ((uint64_t)1 << 40)) return tb("extent " + std::to_string(e) + " of dim " + std::to_string(d));
      t.ne.push_back((int64_t)e);
      count *= e;
      if (count > ((__int128)1 << 40)) return tb("absurd shape");
    }
    if (!r.get(t.type, "a tensor type") || !r.get(t.offset, "a tensor offset")) return bad(r.err);
    auto ti = kTypes.find(t.type);
    if (ti == kTypes.end())
      return tb("type " + typeName(t.type) + ", which kiln does not read (it reads F32, F16, BF16, Q8_0, Q4_0 and Q4_1)");
    if (t.ne[0] % ti->second.block)
      return tb("rows of " + std::to_string(t.ne[0]) + " weights are no whole number of " + ti->second.name + " blocks of " +
                std::to_string(ti->second.block));
    t.bytes = (uint64_t)(count / ti->second.block * ti->second.bytes);
    if (t.offset % alignment) return tb("offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(alignment));
    infos.push_back(std::move(t));
  }
  w->types = json::object();  // the model's names -> the stored types
  for (const Info &t : infos) w->types[llamaFamily(arch) ? llamaName(t.name) : t.name] = typeName(t.type);
  const uint64_t dataStart = (r.at + alignment - 1) / alignment * alignment;
  if (dataStart > fsize) return bad("the data section would start at byte " + std::to_string(dataStart) + ", past the end of the file");
  const uint64_t dataSize = fsize - dataStart;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Info &t : infos) {
    if (t.offset > dataSize || t.bytes > dataSize - t.offset)
      return bad("tensor '" + t.name + "': bytes [" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.bytes) +
                 ") of the data lie outside its " + std::to_string(dataSize) + " bytes (truncated?)");
    ranges.push_back({t.offset, t.offset + t.bytes});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return bad("two tensors overlap in the data section (one starts at byte " + std::to_string(ranges[i].first) +
                 " before another ends at byte " + std::to_string(ranges[i - 1].second) + ")");

  // The config.json the metadata amounts to (architectures llama, qwen2, qwen3).
  json &cfg = w->config;
  cfg = json::object();
  auto key = [&](const std::string &k) -> const json * {
    auto it = w->meta.find(arch + "." + k);
    return it == w->meta.end() ? nullptr : &*it;
  };
  if (llamaFamily(arch)) {
    const std::pair<const char *, const char *> sizes[] = {
        {"block_count", "num_hidden_layers"},           {"embedding_length", "hidden_size"},
        {"attention.head_count", "num_attention_heads"}, {"attention.head_count_kv", "num_key_value_heads"},
        {"feed_forward_length", "intermediate_size"},   {"context_length", "max_position_embeddings"},
        {"rope.freq_base", "rope_theta"},               {"attention.layer_norm_rms_epsilon", "rms_norm_eps"},
        {"attention.key_length", "head_dim"},           {"vocab_size", "vocab_size"}};
    for (auto [g, h] : sizes)
      if (const json *v = key(g)) cfg[h] = *v;
    if (!cfg.contains("vocab_size") && w->meta.contains("tokenizer.ggml.tokens"))
      cfg["vocab_size"] = w->meta["tokenizer.ggml.tokens"].size();
    if (!cfg.contains("vocab_size"))
      for (const Info &t : infos)
        if (t.name == "token_embd.weight" && t.ne.size() == 2) cfg["vocab_size"] = t.ne[1];
    cfg["tie_word_embeddings"] = !names.count("output.weight");
    cfg["hidden_act"] = "silu";
    cfg["model_type"] = arch;
    // Biases where the file has them: Qwen2's q/k/v biases come with its type; Llama's and
    // Qwen3's attention_bias covers q, k, v and o, mlp_bias gate, up and down.
    if (arch != "qwen2") cfg["attention_bias"] = names.count("blk.0.attn_q.bias") > 0;
    cfg["mlp_bias"] = names.count("blk.0.ffn_up.bias") > 0;
    if (const json *s = key("rope.scaling.type"); s && *s != "none") {
      cfg["rope_scaling"] = {{"type", *s}};
      if (const json *f = key("rope.scaling.factor")) cfg["rope_scaling"]["factor"] = *f;
    }
    // Llama 3.1's scaling as llama.cpp's converter stores it: a factor per rotary pair in a
    // rope_freqs tensor, no metadata. Not read yet: named as the type, so a build refuses it.
    if (names.count("rope_freqs.weight")) cfg["rope_scaling"] = {{"type", "rope_freqs (a tensor of per-pair factors)"}};
  }
  if (!tensors) return KILNRT_OK;
  if (!llamaFamily(arch))
    return bad("architecture '" + arch + "': kiln maps the tensor names of architectures llama, qwen2 and qwen3 (for now)");

  const int64_t heads = key("attention.head_count") && key("attention.head_count")->is_number_unsigned()
                            ? key("attention.head_count")->get<int64_t>() : 0;
  const int64_t kvHeads = key("attention.head_count_kv") && key("attention.head_count_kv")->is_number_unsigned()
                              ? key("attention.head_count_kv")->get<int64_t>() : heads;
  const uint8_t *data = (const uint8_t *)map + dataStart;
  for (const Info &t : infos) {
    kilnrt_weights::Entry e;
    e.name = llamaName(t.name);
    if (w->index.count(e.name)) return bad("tensor '" + t.name + "' maps to '" + e.name + "', which another tensor has too");
    kilnrt_tensor &x = e.t;
    x.rank = (int32_t)t.ne.size();
    for (int d = 0; d < x.rank; ++d) x.shape[d] = t.ne[x.rank - 1 - d];  // row-major: slowest first
    const int64_t count = checked_numel(x.shape, x.rank);
    // A llama file's attn_q and attn_k rows (weights, and biases: one value a row) move.
    auto is = [&](const char *suffix) { return t.name.size() > strlen(suffix) && t.name.ends_with(suffix); };
    const bool q = arch == "llama" && (is(".attn_q.weight") || is(".attn_q.bias")),
               k = arch == "llama" && (is(".attn_k.weight") || is(".attn_k.bias"));
    const int64_t rowHeads = q ? heads : k ? kvHeads : 0;
    if (rowHeads > 0 && (x.rank > 2 || x.shape[0] % rowHeads || (x.shape[0] / rowHeads) % 2))
      return bad("tensor '" + t.name + "': " + std::to_string(x.shape[0]) + " rows are no whole number of " +
                 std::to_string(rowHeads) + " heads of an even size");
    const uint8_t *src = data + t.offset;
    // F32, F16 and BF16 read in place where aligned (widened when bound to an f32 parameter), the
    // block types as stored (bound to a parameter compiled for that type); attn_q and attn_k,
    // whose rows move, and misaligned ones copied.
    const kiln_dtype dt = t.type == 0 ? KILN_F32 : t.type == 1 ? KILN_F16 : t.type == 30 ? KILN_BF16
                          : t.type == 8 ? KILN_Q8_0 : t.type == 2 ? KILN_Q4_0 : KILN_Q4_1;
    const size_t bytes = tensor_bytes(dt, count), align = is_quantized(dt) ? 2 : dtype_size(dt);
    x.dtype = dt;
    if (rowHeads == 0 && (uintptr_t)src % align == 0) {
      x.data = const_cast<uint8_t *>(src);
    } else {
      e.aligned.reset(new uint32_t[(bytes + 3) / 4]);
      memcpy(e.aligned.get(), src, bytes);
      if (rowHeads > 0) unpermuteRows((uint8_t *)e.aligned.get(), x.shape[0], bytes / (size_t)x.shape[0], rowHeads);
      x.data = e.aligned.get();
    }
    w->index[e.name] = (int)w->entries.size();
    w->entries.push_back(std::move(e));
  }
  return KILNRT_OK;
}

}  // namespace

}  // namespace kilnrt
