// config.cpp - a checkpoint's config.json against the fields the model was compiled for: its
// sizes, and what silently changes numbers (epsilons, activations, tied embeddings).

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "weights_state.h"

using json = nlohmann::json;
using namespace kilnrt;

namespace {
// JSON values equal as a checkpoint means them: numbers to 1e-6 relative (1e-5 == 1e-05), others exactly.
bool same(const json &a, const json &b) {
  if (a.is_number() && b.is_number() && !a.is_boolean() && !b.is_boolean()) {
    double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= 1e-6 * std::max(std::abs(x), std::abs(y));
  }
  return a == b;
}
std::string text(const json &v) { return v.is_string() ? v.get<std::string>() : v.dump(-1, ' ', false, json::error_handler_t::replace); }
// The field a key names, dots reaching into objects ("rope_parameters.rope_theta"), or null.
const json *field(const json &cfg, const std::string &key) {
  const json *at = &cfg;
  for (size_t from = 0; from <= key.size();) {
    size_t dot = key.find('.', from);
    std::string part = key.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!at->is_object() || !at->contains(part)) return nullptr;
    at = &(*at)[part];
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  return at->is_null() ? nullptr : at;
}
}  // namespace

extern "C" kilnrt_status kilnrt_config_check(const char *path, const kiln_config_field *fields, int32_t n) {
  std::string body;
  if (kilnrt_status st = read_file(path, "config file", body)) return st;
  json cfg = json::parse(body, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) return user_error(std::string("config file '") + path + "' is not a JSON object");
  return kilnrt::config_check_json(cfg, std::string("config file '") + path + "'", fields, n);
}

kilnrt_status kilnrt::config_check_json(const json &cfg, const std::string &label, const kiln_config_field *fields, int32_t n) {
  std::vector<std::string> diffs;
  for (int32_t i = 0; i < n; ++i) {
    const kiln_config_field &fd = fields[i];
    json want = json::parse(fd.value, nullptr, false);
    if (want.is_discarded()) return internal_error(std::string("the model's config field '") + fd.key + "' is not JSON");
    // The first of the alternative keys the file has.
    std::string keys = fd.key, key;
    json have;
    for (size_t at = 0; at <= keys.size();) {
      size_t bar = keys.find('|', at);
      std::string k = keys.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
      if (const json *v = field(cfg, k)) {
        key = k;
        have = *v;
        break;
      }
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    std::string first = keys.substr(0, keys.find('|'));
    if (fd.at_least) {  // null or absent: none (no limit); a number: no smaller than the model's
      if (key.empty()) continue;
      if (!have.is_number() || have.is_boolean() || !want.is_number())
        diffs.push_back("the checkpoint has " + key + " " + text(have) + ", not a number; this model was compiled " + fd.what);
      else if (have.get<double>() < want.get<double>())
        diffs.push_back("the checkpoint has " + key + " " + text(have) + ", this model was compiled " + fd.what + " (" +
                        text(want) + " or more, or null)");
      continue;
    }
    if (key.empty()) {
      if (!fd.absent) {
        diffs.push_back("the checkpoint gives no " + first + "; this model was compiled with " + text(want) + " " + fd.what);
        continue;
      }
      have = json::parse(fd.absent, nullptr, false);
      key = first + " (left out: " + text(have) + ")";
    }
    if (!same(have, want))
      diffs.push_back("the checkpoint has " + key + " " + text(have) + ", this model was compiled with " + text(want) + " " +
                      fd.what);
  }
  if (diffs.empty()) return KILNRT_OK;
  std::string msg = label + " does not match the model:";
  for (auto &d : diffs) msg += "\n  " + d;
  return user_error(msg);
}

extern "C" kilnrt_status kilnrt_gguf_config(const char *path, const char **json_text) {
  thread_local std::string text;
  kilnrt_weights w;
  w.path = path;
  if (!kilnrt::is_gguf(path)) return user_error(std::string("'") + path + "' is no GGUF file (no GGUF magic)");
  if (kilnrt_status st = kilnrt::open_gguf(path, &w, false)) return st;
  text = w.config.dump(-1, ' ', false, json::error_handler_t::replace);  // invalid UTF-8 in metadata replaced
  *json_text = text.c_str();
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_gguf_tensor_types(const char *path, const char **json_text) {
  thread_local std::string text;
  kilnrt_weights w;
  w.path = path;
  if (!kilnrt::is_gguf(path)) return user_error(std::string("'") + path + "' is no GGUF file (no GGUF magic)");
  if (kilnrt_status st = kilnrt::open_gguf(path, &w, false)) return st;
  text = w.types.dump(-1, ' ', false, json::error_handler_t::replace);
  *json_text = text.c_str();
  return KILNRT_OK;
}
