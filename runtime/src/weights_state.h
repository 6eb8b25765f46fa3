// weights_state.h - an open weights file (weights.cpp: safetensors; gguf.cpp: GGUF), private to
// the runtime.
#pragma once
#include <sys/mman.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "internal.h"

struct kilnrt_weights {
  std::string path;
  struct Mapping {
    void *map = nullptr;
    size_t size = 0;
  };
  std::vector<Mapping> maps;  // one per file (shards)
  struct Entry {
    std::string name;
    kilnrt_tensor t;
    // The data when not read in place: a copy when the file stores it misaligned, or GGUF's
    // attn_q / attn_k with their rows in Hugging Face's order.
    std::unique_ptr<uint32_t[]> aligned;
  };
  std::vector<Entry> entries;
  std::map<std::string, int> index;
  // A GGUF file: its metadata (every key, arrays as JSON arrays), and the Hugging Face-style
  // config.json its architecture's keys amount to (checked against the model as a config.json).
  // A safetensors file: meta holds its __metadata__ text pairs.
  bool gguf = false;
  nlohmann::json meta, config, types;  // types: each tensor's stored type by the model's name ("Q4_1")
  ~kilnrt_weights() {
    for (auto &m : maps) munmap(m.map, m.size);
  }
};

namespace kilnrt {
// Opens a GGUF file (its magic checked by the caller) into `w`: every tensor as stored, under
// the model's (Hugging Face) names. With tensors false, the metadata and config only.
kilnrt_status open_gguf(const std::string &path, kilnrt_weights *w, bool tensors = true);
// Whether the file at `path` starts with GGUF's magic.
bool is_gguf(const std::string &path);
// kilnrt_config_check on a parsed config; `label` names it in the message ("config file 'x'").
kilnrt_status config_check_json(const nlohmann::json &cfg, const std::string &label, const kiln_config_field *fields, int32_t n);
}  // namespace kilnrt
