// gguf_test.cpp - GGUF files as weights: a plain writer here builds small files (every metadata
// value type, nested arrays, F32, F16, BF16, Q8_0, Q4_0 and Q4_1 tensors, a custom alignment);
// the reader's tensors against a plain dequantization written here from the format's
// definition, llama.cpp's names mapped to Hugging Face's with attn_q / attn_k rows back in
// Hugging Face's order, the metadata as a config.json; and each class of bad file refused with
// a message naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "harness.h"
#include "kilnrt/api.h"

namespace {

// ---- a plain GGUF writer
struct Bytes {
  std::string s;
  template <class T>
  Bytes &put(T v) {
    s.append((const char *)&v, sizeof v);
    return *this;
  }
  Bytes &str(const std::string &x) {
    put<uint64_t>(x.size());
    s += x;
    return *this;
  }
};

struct Tensor {
  std::string name;
  std::vector<uint64_t> ne;  // fastest first
  uint32_t type;
  std::string data;
};

// `kv`: the metadata's bytes (count given), `tensors` laid out at `alignment`.
std::string gguf(uint64_t nKv, const std::string &kv, const std::vector<Tensor> &tensors, uint64_t alignment = 32,
                 uint32_t version = 3) {
  Bytes b;
  b.s = "GGUF";
  b.put<uint32_t>(version).put<uint64_t>(tensors.size()).put<uint64_t>(nKv);
  b.s += kv;
  uint64_t off = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor &t : tensors) {
    b.str(t.name).put<uint32_t>((uint32_t)t.ne.size());
    for (uint64_t e : t.ne) b.put<uint64_t>(e);
    b.put<uint32_t>(t.type).put<uint64_t>(off);
    offsets.push_back(off);
    off += (t.data.size() + alignment - 1) / alignment * alignment;
  }
  b.s.resize((b.s.size() + alignment - 1) / alignment * alignment, '\0');
  for (const Tensor &t : tensors) {
    b.s += t.data;
    b.s.resize((b.s.size() + alignment - 1) / alignment * alignment, '\0');
  }
  return b.s;
}

std::string kvString(const std::string &k, const std::string &v) { return Bytes().str(k).put<uint32_t>(8).str(v).s; }
std::string kvU32(const std::string &k, uint32_t v) { return Bytes().str(k).put<uint32_t>(4).put<uint32_t>(v).s; }
std::string kvF32(const std::string &k, float v) { return Bytes().str(k).put<uint32_t>(6).put<float>(v).s; }

uint16_t toHalf(float f) {  // round to nearest even, normal range only (what the tests use)
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 255, m = x & 0x7fffff;
  if (e == 0 && m == 0) return (uint16_t)sign;
  int he = (int)e - 127 + 15;
  uint32_t hm = m >> 13, rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (hm & 1))) ++hm;
  if (hm == 1024) hm = 0, ++he;
  return (uint16_t)(sign | (uint32_t)he << 10 | hm);
}
float fromHalf(uint16_t h) {  // normal range and zero
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? std::ldexp((float)m, -24) : std::ldexp(1.0f + (float)m / 1024.0f, e - 15);
  return (h & 0x8000) ? -v : v;
}

// Blocks of 32 written from the format's definition, and the values they stand for.
struct Quantized {
  std::string bytes;
  std::vector<float> values;
};
Quantized quantize(uint32_t type, const std::vector<float> &x) {
  Quantized q;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0, lo = x[b], hi = x[b];
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b + j])), lo = std::min(lo, x[b + j]), hi = std::max(hi, x[b + j]);
    Bytes blk;
    if (type == 8) {  // Q8_0
      uint16_t d = toHalf(amax / 127);
      blk.put(d);
      for (size_t j = 0; j < 32; ++j) {
        int8_t v = (int8_t)std::lround(x[b + j] / fromHalf(d));
        blk.put(v);
        q.values.push_back(fromHalf(d) * v);
      }
    } else if (type == 2) {  // Q4_0: (nibble - 8) · d; weight j low nibble of byte j, j + 16 high
      uint16_t d = toHalf(amax / 7);
      blk.put(d);
      std::vector<float> vals(32);
      for (size_t j = 0; j < 16; ++j) {
        int lo4 = std::clamp((int)std::lround(x[b + j] / fromHalf(d)) + 8, 0, 15);
        int hi4 = std::clamp((int)std::lround(x[b + j + 16] / fromHalf(d)) + 8, 0, 15);
        blk.put<uint8_t>((uint8_t)(lo4 | hi4 << 4));
        vals[j] = (float)(lo4 - 8) * fromHalf(d);
        vals[j + 16] = (float)(hi4 - 8) * fromHalf(d);
      }
      q.values.insert(q.values.end(), vals.begin(), vals.end());
    } else {  // Q4_1: nibble · d + m
      uint16_t d = toHalf((hi - lo) / 15), m = toHalf(lo);
      blk.put(d).put(m);
      std::vector<float> vals(32);
      for (size_t j = 0; j < 16; ++j) {
        int lo4 = std::clamp((int)std::lround((x[b + j] - fromHalf(m)) / fromHalf(d)), 0, 15);
        int hi4 = std::clamp((int)std::lround((x[b + j + 16] - fromHalf(m)) / fromHalf(d)), 0, 15);
        blk.put<uint8_t>((uint8_t)(lo4 | hi4 << 4));
        vals[j] = (float)lo4 * fromHalf(d) + fromHalf(m);
        vals[j + 16] = (float)hi4 * fromHalf(d) + fromHalf(m);
      }
      q.values.insert(q.values.end(), vals.begin(), vals.end());
    }
    q.bytes += blk.s;
  }
  return q;
}

std::vector<float> randomValues(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> v(n);
  for (float &x : v) x = d(g);
  return v;
}

std::string write(const std::string &name, const std::string &bytes) {
  std::string path = kt::workDir("gguf") + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// A tensor's values: as stored (F32), or decoded by kilnrt_tensor_to_f32 (half types, blocks).
std::vector<float> floats(const kilnrt_tensor &t) {
  std::vector<float> f((size_t)kilnrt_tensor_numel(&t));
  EXPECT_EQ(kilnrt_tensor_to_f32(&t, f.data()), KILNRT_OK) << kilnrt_last_error();
  return f;
}

// A llama-architecture file: 2 heads (kv 1) of 4, width 8, one block, vocab 4.
struct Llama {
  std::vector<float> embd = randomValues(4 * 32, 1), q = randomValues(8 * 32, 2), k = randomValues(4 * 32, 3),
                     norm = randomValues(32, 4);
  Quantized embdQ = quantize(8, embd), qQ = quantize(3, q), kQ = quantize(2, k);
  std::string file(uint64_t alignment = 32) {
    std::string kv = kvString("general.architecture", "llama") + kvU32("llama.block_count", 1) +
                     kvU32("llama.embedding_length", 32) + kvU32("llama.attention.head_count", 2) +
                     kvU32("llama.attention.head_count_kv", 1) + kvF32("llama.rope.freq_base", 1e5f) +
                     kvF32("llama.attention.layer_norm_rms_epsilon", 1e-5f) +
                     // a nested array: [[1, 2], [3]] of u32, and a bool and an i64
                     Bytes().str("test.nested").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(2)
                         .put<uint32_t>(4).put<uint64_t>(2).put<uint32_t>(1).put<uint32_t>(2)
                         .put<uint32_t>(4).put<uint64_t>(1).put<uint32_t>(3).s +
                     Bytes().str("test.flag").put<uint32_t>(7).put<uint8_t>(1).s +
                     Bytes().str("test.i64").put<uint32_t>(11).put<int64_t>(-5).s;
    uint64_t nKv = 10;
    if (alignment != 32) kv += kvU32("general.alignment", (uint32_t)alignment), ++nKv;
    std::string f16, bf16;
    for (float v : norm) {
      uint16_t h = toHalf(v);
      f16.append((const char *)&h, 2);
      uint32_t bits;
      memcpy(&bits, &v, 4);
      uint16_t b = (uint16_t)(bits >> 16);
      bf16.append((const char *)&b, 2);
    }
    return gguf(nKv, kv,
                {{"token_embd.weight", {32, 4}, 8, embdQ.bytes},
                 {"blk.0.attn_q.weight", {32, 8}, 3, qQ.bytes},
                 {"blk.0.attn_k.weight", {32, 4}, 2, kQ.bytes},
                 {"blk.0.attn_norm.weight", {32}, 1, f16},
                 {"blk.0.ffn_norm.weight", {32}, 30, bf16},
                 {"output_norm.weight", {32}, 0, std::string((const char *)norm.data(), norm.size() * 4)}},
                alignment);
  }
};

// Hugging Face's row of a llama.cpp-permuted q/k row: within each head of hd rows, file row
// 2i + s is row s·hd/2 + i.
int64_t hfRow(int64_t fileRow, int64_t hd) {
  int64_t h = fileRow / hd, r = fileRow % hd;
  return h * hd + (r % 2) * (hd / 2) + r / 2;
}

TEST(Gguf, TensorsAsStoredNamesMapAndRowsUnpermute) {
  for (uint64_t alignment : {32, 64}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    Llama l;
    std::string path = write("llama.gguf", l.file(alignment));
    kilnrt_weights *w;
    ASSERT_EQ(kilnrt_weights_open(path.c_str(), &w), KILNRT_OK) << kilnrt_last_error();
    EXPECT_EQ(kilnrt_weights_count(w), 6);
    kilnrt_tensor t;
    ASSERT_EQ(kilnrt_weights_find(w, "model.embed_tokens.weight", &t), KILNRT_OK) << kilnrt_last_error();
    EXPECT_EQ(t.dtype, KILN_Q8_0);  // blocks as stored: the file's bytes, read in place
    EXPECT_EQ(std::vector<int64_t>(t.shape, t.shape + t.rank), (std::vector<int64_t>{4, 32}));
    EXPECT_EQ(std::string((const char *)t.data, l.embdQ.bytes.size()), l.embdQ.bytes);
    EXPECT_EQ(floats(t), l.embdQ.values);  // Q8_0 decoded: exact
    for (auto [name, rows, heads, qz] : {std::tuple{"model.layers.0.self_attn.q_proj.weight", 8, 2, &l.qQ},
                                         std::tuple{"model.layers.0.self_attn.k_proj.weight", 4, 1, &l.kQ}}) {
      ASSERT_EQ(kilnrt_weights_find(w, name, &t), KILNRT_OK) << kilnrt_last_error();
      EXPECT_EQ(t.dtype, rows == 8 ? KILN_Q4_1 : KILN_Q4_0);  // whole rows of blocks moved
      std::vector<float> got = floats(t);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < 32; ++c)
          ASSERT_EQ(got[hfRow(r, rows / heads) * 32 + c], qz->values[r * 32 + c]) << name << " file row " << r;
    }
    // F16 and BF16 read as stored (widened when bound to a parameter), F32 in place.
    ASSERT_EQ(kilnrt_weights_find(w, "model.layers.0.input_layernorm.weight", &t), KILNRT_OK);
    EXPECT_EQ(t.dtype, KILN_F16);
    EXPECT_EQ(fromHalf(((const uint16_t *)t.data)[3]), fromHalf(toHalf(l.norm[3])));
    ASSERT_EQ(kilnrt_weights_find(w, "model.layers.0.post_attention_layernorm.weight", &t), KILNRT_OK);
    EXPECT_EQ(t.dtype, KILN_BF16);
    ASSERT_EQ(kilnrt_weights_find(w, "model.norm.weight", &t), KILNRT_OK);
    EXPECT_EQ(floats(t), l.norm);
    kilnrt_weights_close(w);
    const char *cfg;
    ASSERT_EQ(kilnrt_gguf_config(path.c_str(), &cfg), KILNRT_OK) << kilnrt_last_error();
    nlohmann::json c = nlohmann::json::parse(cfg);
    EXPECT_EQ(c["num_hidden_layers"], 1);
    EXPECT_EQ(c["num_key_value_heads"], 1);
    EXPECT_NEAR(c["rope_theta"].get<double>(), 1e5, 1e-3);
    EXPECT_EQ(c["tie_word_embeddings"], true);  // no output.weight
    ASSERT_EQ(kilnrt_gguf_tensor_types(path.c_str(), &cfg), KILNRT_OK) << kilnrt_last_error();
    nlohmann::json types = nlohmann::json::parse(cfg);
    EXPECT_EQ(types["model.embed_tokens.weight"], "Q8_0");
    EXPECT_EQ(types["model.layers.0.self_attn.q_proj.weight"], "Q4_1");
    EXPECT_EQ(types["model.layers.0.self_attn.k_proj.weight"], "Q4_0");
    EXPECT_EQ(types["model.norm.weight"], "F32");
  }
}

// Scaled rotary positions in the metadata: rope.scaling.type and .factor (linear) become
// config.json's rope_scaling; Llama 3.1's, which llama.cpp's converter stores as a rope_freqs
// tensor of per-pair factors, is named as the scaling type (not read yet: a build refuses it
// rather than rotate unscaled).
TEST(Gguf, RotaryScalingIsInTheConfig) {
  std::vector<float> norm = randomValues(32, 4), freqs = randomValues(2, 5);
  auto file = [&](const std::string &extraKv, uint64_t extraN, bool ropeFreqs) {
    std::string kv = kvString("general.architecture", "llama") + kvU32("llama.block_count", 1) +
                     kvU32("llama.embedding_length", 32) + kvU32("llama.attention.head_count", 2) + extraKv;
    std::vector<Tensor> tensors{{"output_norm.weight", {32}, 0, std::string((const char *)norm.data(), norm.size() * 4)}};
    if (ropeFreqs) tensors.push_back({"rope_freqs.weight", {2}, 0, std::string((const char *)freqs.data(), freqs.size() * 4)});
    return gguf(4 + extraN, kv, tensors);
  };
  const char *cfg;
  std::string path = write("linear.gguf", file(kvString("llama.rope.scaling.type", "linear") + kvF32("llama.rope.scaling.factor", 2.5f), 2, false));
  ASSERT_EQ(kilnrt_gguf_config(path.c_str(), &cfg), KILNRT_OK) << kilnrt_last_error();
  nlohmann::json c = nlohmann::json::parse(cfg);
  ASSERT_TRUE(c.contains("rope_scaling")) << cfg;
  ASSERT_TRUE(c["rope_scaling"].contains("factor")) << cfg;
  EXPECT_EQ(c["rope_scaling"]["type"], "linear");
  EXPECT_NEAR(c["rope_scaling"]["factor"].get<double>(), 2.5, 1e-6);
  path = write("freqs.gguf", file("", 0, true));
  ASSERT_EQ(kilnrt_gguf_config(path.c_str(), &cfg), KILNRT_OK) << kilnrt_last_error();
  c = nlohmann::json::parse(cfg);
  EXPECT_EQ(c["rope_scaling"]["type"], "rope_freqs (a tensor of per-pair factors)");
  path = write("plain.gguf", file("", 0, false));
  ASSERT_EQ(kilnrt_gguf_config(path.c_str(), &cfg), KILNRT_OK) << kilnrt_last_error();
  EXPECT_FALSE(nlohmann::json::parse(cfg).contains("rope_scaling"));
}

// Each class of bad file, refused with a message naming the problem (never a crash, never a
// silent load).
TEST(Gguf, BadFilesAreClearErrors) {
  Llama l;
  const std::string good = l.file();
  auto expectError = [&](const std::string &bytes, const std::string &what, const std::string &name) {
    std::string path = write(name + ".gguf", bytes);
    kilnrt_weights *w = nullptr;
    EXPECT_NE(kilnrt_weights_open(path.c_str(), &w), KILNRT_OK) << name;
    EXPECT_NE(std::string(kilnrt_last_error()).find(what), std::string::npos) << name << ": " << kilnrt_last_error();
    if (w) kilnrt_weights_close(w);
  };
  expectError(good.substr(0, 20), "truncated", "truncated_header");
  expectError(good.substr(0, good.size() - 40), "outside", "truncated_data");
  std::string v1 = good;
  v1[4] = 1;
  expectError(v1, "version 1", "version1");
  auto oneKv = [&](const std::string &kv, uint64_t n = 1) { return gguf(n, kv, {}); };
  expectError(oneKv(Bytes().str("x").put<uint32_t>(13).put<uint32_t>(0).s), "unknown value type 13", "value_type");
  expectError(oneKv(kvU32("x", 1) + kvU32("x", 2), 2), "'x' appears twice", "duplicate_key");
  expectError(oneKv(Bytes().str("x").put<uint32_t>(7).put<uint8_t>(2).s), "not 0 or 1", "bool");
  expectError(oneKv(Bytes().str("x").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(1ull << 40).s),
              "longer than the rest of the file", "huge_array");
  expectError(oneKv(Bytes().str("x").put<uint32_t>(8).put<uint64_t>(1ull << 50).s), "truncated", "huge_string");
  std::string arch = kvString("general.architecture", "llama");
  std::string q4(20, '\0');
  expectError(gguf(1, arch, {{"a", {32}, 3, q4}, {"a", {32}, 3, q4}}), "'a': appears twice", "duplicate_tensor");
  expectError(gguf(1, arch, {{"a", {32}, 12, std::string(144, '\0')}}), "type Q4_K, which kiln does not read", "q4_k");
  expectError(gguf(1, arch, {{"a", {30}, 3, q4}}), "no whole number of Q4_1 blocks", "partial_block");
  expectError(gguf(1, arch, {{"a", {32}, 3, q4}}, 32, 4), "version 4", "version4");
  // A misaligned offset and overlapping tensors: the offsets patched in a good file.
  std::string g2 = gguf(1, arch, {{"a", {32}, 3, q4}, {"b", {32}, 3, q4}});
  size_t off = g2.find("b") + 1 + 4 + 8 + 4;  // name, dims, extent, type
  std::string mis = g2;
  mis[off] = 8;
  expectError(mis, "not a multiple of the alignment", "misaligned");
  std::string over = g2;
  memset(&over[off], 0, 8);
  expectError(over, "overlap", "overlap");
  expectError(gguf(1, kvString("general.architecture", "gemma3"), {{"a", {32}, 3, q4}}), "architecture 'gemma3': kiln maps the tensor names of architectures llama, qwen2 and qwen3", "arch");
  // Found by fuzz/gguf: an architecture that is no string was an uncaught exception.
  expectError(gguf(1, kvU32("general.architecture", 7), {{"a", {32}, 3, q4}}), "general.architecture is 7, not a string",
              "arch_not_string");
}

}  // namespace
