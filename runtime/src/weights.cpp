// kilnrt weights: safetensors files, read through mmap and validated before any tensor is used.
//
// Layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data. Every entry is checked: known dtype, non-negative shape whose byte size equals
// end - begin, offsets inside the file, no two tensors overlapping, no name (or field) given
// twice. A header that claims more than the file holds is rejected before anything is
// allocated for it. Files are written through a temporary name and renamed when complete.
//
// Sharded checkpoints: `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}) and
// its shards, each memory-mapped; every shard the index names must exist and hold exactly the
// tensors the index gives it. A folder opens as its model.safetensors, else its index.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>
#include <vector>

#include "internal.h"
#include "weights_state.h"

using namespace kilnrt;
using json = nlohmann::json;

static kilnrt_status bad(const std::string &path, const std::string &why) {
  return user_error("weights file '" + path + "': " + why);
}

// Maps one safetensors file and appends its tensors to w.
static kilnrt_status open_file(const char *path, kilnrt_weights *w) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return bad(path, std::string("cannot open: ") + strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return bad(path, "not a regular file");
  }
  size_t fsize = (size_t)st.st_size;
  if (fsize < 8) {
    close(fd);
    return bad(path, "truncated: " + std::to_string(fsize) + " bytes, shorter than the 8-byte header length");
  }
  void *map = mmap(nullptr, fsize, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return bad(path, std::string("mmap failed: ") + strerror(errno));
  w->maps.push_back({map, fsize});
  const uint8_t *base = (const uint8_t *)map;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | base[i];
  if (hlen > fsize - 8)
    return bad(path, "header claims " + std::to_string(hlen) + " bytes but the file holds only " +
                         std::to_string(fsize - 8) + " after the length field (truncated or not safetensors)");
  const uint8_t *data = base + 8 + hlen;
  uint64_t data_size = fsize - 8 - hlen;
  // The parser keeps only the last of two equal keys: duplicates are found while parsing
  // (a tensor named twice, or a field given twice in one entry), before they can collapse.
  json header;
  std::vector<std::set<std::string>> keys;  // the keys of each open object
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
             duplicate.empty())
      duplicate = depth == 1 ? "tensor '" + parsed.get<std::string>() + "' appears twice in the header"
                             : "key '" + parsed.get<std::string>() + "' appears twice in one entry of the header";
    return true;
  };
  try {
    header = json::parse(base + 8, base + 8 + hlen, on_event);
  } catch (const json::exception &e) {
    return bad(path, std::string("corrupt JSON header: ") + e.what());
  }
  if (!duplicate.empty()) return bad(path, duplicate);
  if (!header.is_object()) return bad(path, "header is not a JSON object");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {  // text pairs (a kiln checkpoint's run); others ignored
      if (it.value().is_object())
        for (auto m = it.value().begin(); m != it.value().end(); ++m)
          if (m.value().is_string()) w->meta[m.key()] = m.value();
      continue;
    }
    const std::string &name = it.key();
    const json &e = it.value();
    auto tb = [&](const std::string &why) { return bad(path, "tensor '" + name + "': " + why); };
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      return tb("entry needs dtype, shape and data_offsets");
    if (!e["dtype"].is_string()) return tb("dtype is not a string");
    std::string dt = e["dtype"].get<std::string>();
    // F32 and I32 are computed with, F16 and BF16 converted to f32 for f32 parameters; the other
    // safetensors dtypes are validated (a checkpoint's mask buffers are often BOOL or U8) and
    // can only be skipped.
    static const std::map<std::string, int> kOther = {{"F64", 8}, {"I64", 8}, {"U64", 8}, {"I16", 2}, {"U16", 2},
                                                      {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U32", 4}};
    kiln_dtype dtype = KILN_OTHER;
    int esize = 4;
    if (dt == "F32") dtype = KILN_F32;
    else if (dt == "I32") dtype = KILN_I32;
    else if (dt == "F16") dtype = KILN_F16, esize = 2;
    else if (dt == "BF16") dtype = KILN_BF16, esize = 2;
    else if (kOther.count(dt)) esize = kOther.at(dt);
    else return tb("dtype " + dt + " is not a safetensors dtype");
    const json &shape = e["shape"];
    const json &offs = e["data_offsets"];
    if (!shape.is_array() || shape.size() > KILN_MAX_RANK) return tb("shape must be an array of at most 4 dims");
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      return tb("data_offsets must be two non-negative integers");
    kilnrt_tensor t{};
    t.dtype = dtype;
    t.rank = (int32_t)shape.size();
    __int128 bytes = esize;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (!shape[i].is_number_unsigned()) return tb("shape entries must be non-negative integers");
      t.shape[i] = shape[i].get<int64_t>();
      if (t.shape[i] < 0) return tb("negative dimension");
      bytes *= t.shape[i];
      if (bytes > ((__int128)1 << 62)) return tb("absurd shape");
    }
    uint64_t b = offs[0].get<uint64_t>(), en = offs[1].get<uint64_t>();
    if (b > en || en > data_size)
      return tb("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] lie outside the " +
                std::to_string(data_size) + " data bytes of the file (truncated?)");
    if ((__int128)(en - b) != bytes)
      return tb("shape " + shape_str(t.shape, t.rank) + " needs " + std::to_string((int64_t)bytes) +
                " bytes but data_offsets span " + std::to_string(en - b));
    ranges.push_back({b, en});
    if (w->index.count(name)) return tb("appears in two shards");
    kilnrt_weights::Entry entry;
    entry.name = name;
    const uint8_t *p = data + b;
    if (dtype != KILN_OTHER && ((uintptr_t)p % esize) != 0 && en > b) {
      entry.aligned.reset(new uint32_t[(en - b + 3) / 4]);
      memcpy(entry.aligned.get(), p, en - b);
      p = (const uint8_t *)entry.aligned.get();
    }
    t.data = const_cast<uint8_t *>(p);  // read-only mapping: kilnrt never writes weights
    entry.t = t;
    w->index[name] = (int)w->entries.size();
    w->entries.push_back(std::move(entry));
  }
  // Sorted by start, a tensor overlaps an earlier one exactly when it starts before the largest
  // end so far (not only the previous range's end: an empty or short range may sit between).
  // Empty tensors own no bytes.
  std::sort(ranges.begin(), ranges.end());
  uint64_t end = 0;
  for (auto &[b, e] : ranges) {
    if (b == e) continue;
    if (b < end) return bad(path, "two tensors overlap in the data section (one starts at byte " + std::to_string(b) +
                                     " before another ends at byte " + std::to_string(end) + ")");
    end = std::max(end, e);
  }
  return KILNRT_OK;
}

static bool ends_with(const std::string &s, const std::string &t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// A sharded checkpoint: the index, then each shard it names (once, in order of first mention).
static kilnrt_status open_index(const std::string &path, kilnrt_weights *w) {
  std::string text;
  if (kilnrt_status st = read_file(path, "weights file", text)) return st;
  json idx = json::parse(text, nullptr, false);
  if (idx.is_discarded() || !idx.is_object()) return bad(path, "the shard index is not a JSON object");
  if (!idx.contains("weight_map") || !idx["weight_map"].is_object() || idx["weight_map"].empty())
    return bad(path, "the shard index has no weight_map of tensor -> shard file");
  std::string dir = path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  std::vector<std::string> shards;
  std::map<std::string, std::string> where;  // tensor -> shard
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
    if (!it.value().is_string()) return bad(path, "weight_map['" + it.key() + "'] is not a file name");
    std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos)
      return bad(path, "weight_map['" + it.key() + "'] = '" + shard + "' is not a file name in the index's folder");
    if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    where[it.key()] = shard;
  }
  for (const std::string &shard : shards) {
    std::string sp = dir + shard;
    if (!path_exists(sp))
      return bad(path, "shard '" + shard + "' named by the index is missing (" + sp + ")");
    size_t before = w->entries.size();
    if (kilnrt_status s = open_file(sp.c_str(), w)) return s;
    for (size_t i = before; i < w->entries.size(); ++i) {
      auto it = where.find(w->entries[i].name);
      if (it == where.end() || it->second != shard)
        return bad(path, "shard '" + shard + "' holds tensor '" + w->entries[i].name + "', which the index places " +
                             (it == where.end() ? std::string("nowhere") : "in '" + it->second + "'"));
    }
  }
  for (auto &[name, shard] : where)
    if (!w->index.count(name)) return bad(path, "tensor '" + name + "' is not in shard '" + shard + "', where the index places it");
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_weights_open(const char *cpath, kilnrt_weights **out) {
  *out = nullptr;
  std::string path = cpath;
  if (is_dir(path)) {  // a checkpoint folder
    if (path_exists(path + "/model.safetensors")) path += "/model.safetensors";
    else if (path_exists(path + "/model.safetensors.index.json")) path += "/model.safetensors.index.json";
    else return bad(path, "a folder without model.safetensors or model.safetensors.index.json");
  }
  auto w = std::make_unique<kilnrt_weights>();
  w->path = path;
  if (kilnrt::is_gguf(path)) {
    if (kilnrt_status st = kilnrt::open_gguf(path, w.get())) return st;
    *out = w.release();
    return KILNRT_OK;
  }
  kilnrt_status st = ends_with(path, ".index.json") ? open_index(path, w.get()) : open_file(path.c_str(), w.get());
  if (st) return st;
  *out = w.release();
  return KILNRT_OK;
}

extern "C" const char *kilnrt_weights_path(const kilnrt_weights *w) { return w->path.c_str(); }

extern "C" void kilnrt_weights_close(kilnrt_weights *w) { delete w; }
extern "C" int32_t kilnrt_weights_count(const kilnrt_weights *w) { return (int32_t)w->entries.size(); }

extern "C" kilnrt_status kilnrt_weights_get(const kilnrt_weights *w, int32_t i, const char **name,
                                            kilnrt_tensor *t) {
  if (i < 0 || i >= (int32_t)w->entries.size()) return user_error("weights index out of range");
  *name = w->entries[i].name.c_str();
  *t = w->entries[i].t;
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_weights_find(const kilnrt_weights *w, const char *name, kilnrt_tensor *t) {
  auto it = w->index.find(name);
  if (it == w->index.end()) return user_error("weights file '" + w->path + "' has no tensor '" + name + "'");
  *t = w->entries[it->second].t;
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_weights_save(const char *path, int32_t n, const char *const *names,
                                             const kilnrt_tensor *ts) {
  return kilnrt::save_weights(path, n, names, ts, {});
}

kilnrt_status kilnrt::save_weights(const char *path, int32_t n, const char *const *names, const kilnrt_tensor *ts,
                                   const FileMetadata &meta) {
  json header = json::object();
  uint64_t off = 0;
  for (int i = 0; i < n; ++i)
    if (kilnrt_tensor_numel(&ts[i]) < 0 || dtype_size(ts[i].dtype) == 0)
      return user_error(std::string("cannot write weights file '") + path + "': tensor '" + names[i] +
                        "' is not a valid f32, i32, f16 or bf16 tensor");
  for (int i = 0; i < n; ++i) {
    uint64_t bytes = (uint64_t)kilnrt_tensor_numel(&ts[i]) * dtype_size(ts[i].dtype);
    json shape = json::array();
    for (int d = 0; d < ts[i].rank; ++d) shape.push_back(ts[i].shape[d]);
    const char *dt = ts[i].dtype == KILN_F32 ? "F32" : ts[i].dtype == KILN_I32 ? "I32" : ts[i].dtype == KILN_F16 ? "F16" : "BF16";
    header[names[i]] = {{"dtype", dt},
                        {"shape", shape},
                        {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}, {"producer", "kiln"}};
  for (auto &[k, v] : meta) header["__metadata__"][k] = v;
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h.push_back(' ');  // keep the data 8-byte aligned
  uint64_t hl = h.size();
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = (uint8_t)(hl >> (8 * i));
  AtomicFile f;
  kilnrt_status st = f.open(path, "weights file");
  if (!st) st = f.write(le, 8);
  if (!st) st = f.write(h.data(), h.size());
  for (int i = 0; i < n && !st; ++i) st = f.write(ts[i].data, (size_t)kilnrt_tensor_numel(&ts[i]) * dtype_size(ts[i].dtype));
  return st ? st : f.commit();
}
