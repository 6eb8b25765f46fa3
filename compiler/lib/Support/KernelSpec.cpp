// KernelSpec.cpp - canonical text, parsing and content hash of a kernel spec.
#include "kiln/Support/KernelSpec.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace kiln {

std::string TensorDesc::text() const {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + (dims[i] < 0 ? std::string("?") : std::to_string(dims[i]));
  return s + (is_int ? ":i32" : ":f32");
}

static std::optional<TensorDesc> parseTensor(const std::string &t) {
  auto colon = t.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  TensorDesc d;
  std::string ty = t.substr(colon + 1);
  if (ty != "f32" && ty != "i32") return std::nullopt;
  d.is_int = ty == "i32";
  std::stringstream ss(t.substr(0, colon));
  for (std::string x; std::getline(ss, x, 'x');) {
    if (x == "?") d.dims.push_back(-1);
    else {
      char *end;
      long long v = strtoll(x.c_str(), &end, 10);
      if (x.empty() || *end || v <= 0) return std::nullopt;
      d.dims.push_back(v);
    }
  }
  if (d.dims.empty()) return std::nullopt;
  return d;
}

std::string KernelSpec::text() const {
  std::string s = kind;
  for (auto &[k, v] : attrs) s += ";" + k + "=" + v;
  s += "|";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? "," : "") + inputs[i].text();
  return s + "->" + output.text();
}

static std::optional<KernelFamily> familyOf(const KernelSpec &k) {
  static const std::map<std::string, KernelFamily> kFamilies = {
      {"linear", KernelFamily::Matmul},          {"matmul", KernelFamily::Matmul},
      {"batch_matmul", KernelFamily::Matmul},    {"ffn", KernelFamily::Ffn},
      {"attention", KernelFamily::Attention},    {"lsh_hash", KernelFamily::LshHash},
      {"lsh_chunk_attention", KernelFamily::LshChunkAttention},
      {"layer_norm", KernelFamily::RowReduce},   {"softmax", KernelFamily::RowReduce},
      {"add", KernelFamily::Elementwise},        {"mul", KernelFamily::Elementwise},
      {"scale", KernelFamily::Elementwise},      {"relu", KernelFamily::Elementwise},
      {"gelu", KernelFamily::Elementwise},       {"embedding", KernelFamily::DataMovement},
      {"position_embedding", KernelFamily::DataMovement}, {"transpose", KernelFamily::DataMovement},
      {"slice", KernelFamily::DataMovement},     {"concat", KernelFamily::DataMovement},
      {"mask", KernelFamily::DataMovement},      {"sinusoidal_positions", KernelFamily::DataMovement},
      {"cache_write", KernelFamily::DataMovement}, {"depthwise_conv", KernelFamily::DepthwiseConv},
      {"act_init", KernelFamily::Act},           {"act_input", KernelFamily::Act},
      {"act_update", KernelFamily::Act},         {"act_running", KernelFamily::Act},
      {"act_output", KernelFamily::Act},         {"lsh_sort", KernelFamily::Host}};
  auto it = kFamilies.find(k.kind);
  if (it == kFamilies.end()) return std::nullopt;
  if (it->second == KernelFamily::Attention && k.attrs.count("pattern_size")) return KernelFamily::SparseAttention;
  return it->second;
}

std::optional<KernelSpec> KernelSpec::parse(const std::string &text) {
  KernelSpec k;
  auto bar = text.find('|'), arrow = text.find("->");
  if (bar == std::string::npos || arrow == std::string::npos || arrow < bar) return std::nullopt;
  std::stringstream head(text.substr(0, bar));
  std::getline(head, k.kind, ';');
  for (std::string kv; std::getline(head, kv, ';');) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) return std::nullopt;
    k.attrs[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::stringstream ins(text.substr(bar + 1, arrow - bar - 1));
  for (std::string t; std::getline(ins, t, ',');) {
    auto d = parseTensor(t);
    if (!d) return std::nullopt;
    k.inputs.push_back(*d);
  }
  auto out = parseTensor(text.substr(arrow + 2));
  if (!out || k.kind.empty()) return std::nullopt;
  k.output = *out;
  k.family = familyOf(k).value_or(KernelFamily::Host);  // Host: the generator names the missing kernel
  return k;
}

int64_t KernelSpec::geti(const std::string &key, int64_t def) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? def : strtoll(it->second.c_str(), nullptr, 10);
}
double KernelSpec::getf(const std::string &key, double def) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? def : strtod(it->second.c_str(), nullptr);
}
std::string KernelSpec::gets(const std::string &key, const std::string &def) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? def : it->second;
}

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

std::string KernelSpec::name(const std::string &target) const {
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", (unsigned long long)fnv1a(text() + "@" + target));
  return "kiln_" + kind + "_" + buf;
}

}  // namespace kiln
