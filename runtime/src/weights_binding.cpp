// weights_binding.cpp - weights into a session (a checkpoint's tensors bound to the model's
// parameters: checked, converted, relaid) and out of it (random weights, a checkpoint written).
#include <fnmatch.h>

#include <cmath>
#include <cstring>
#include <map>

#include "session_state.h"
#include "weights_state.h"

using namespace kilnrt;

extern "C" kilnrt_status kilnrt_session_load_weights(kilnrt_session *s, const char *path) {
  return kilnrt_session_load_weights_with(s, path, nullptr);
}

namespace {
// A weights file's tensors bound to the model's parameters, one at a time: every tensor is a
// parameter (possibly without the model's prefix), an optimizer state, ignorable or unexpected;
// a parameter's tensor is checked (shape, dtype, finite values), converted (half precision to
// f32, f32 to a bfloat16 parameter's, or to a quantized one's blocks) and, where the model keeps
// it otherwise, relaid.
struct Binding {
  const kiln_model_info *m;
  std::string path, prefix;
  kilnrt_load_options opt;
  std::map<std::string, int> wanted;
  std::vector<void *> ptrs;
  std::vector<bool> seen;
  std::vector<std::string> unexpected, misshaped, skipped;
  std::vector<Storage> converted;                     // converted, relaid or copied parameters
  std::vector<size_t> mapped;                         // bytes of a parameter read in place from the mapping
  std::vector<bool> kept;                             // already in the layout the model keeps
  std::vector<std::pair<int, kilnrt_tensor>> states;  // optimizer states the file holds

  Binding(const kiln_model_info *model, const char *file, const kilnrt_load_options &o)
      : m(model), path(file), prefix(model->weights_prefix ? model->weights_prefix : ""), opt(o),
        ptrs(model->n_params), seen(model->n_params), mapped(model->n_params, 0), kept(model->n_params, false) {
    for (int i = 0; i < m->n_params; ++i) wanted[m->params[i].name] = i;
  }

  bool ignorable(const std::string &name) const {
    for (int i = 0; i < m->n_ignored; ++i)
      if (fnmatch(m->ignored[i], name.c_str(), 0) == 0 || fnmatch(m->ignored[i], (prefix + name).c_str(), 0) == 0)
        return true;
    return false;
  }

  // A training checkpoint's optimizer state: kept when the model has it (the same shape), else
  // skipped (inference ignores it, and reports it).
  void optimizerState(const std::string &name, const kilnrt_tensor &t) {
    int si = -1;
    for (int k = 0; k < m->n_states; ++k)
      if (name == m->states[k].name) si = k;
    bool fits = si >= 0 && t.dtype == KILN_F32 && t.rank == m->states[si].rank;
    for (int d = 0; fits && d < t.rank; ++d) fits = t.shape[d] == m->states[si].dims[d].size;
    if (si >= 0 && !fits)
      misshaped.push_back(name + " (" + shape_str(t.shape, t.rank) + " " + dtype_name(t.dtype) + ", expected the state's shape)");
    else if (si >= 0)
      states.push_back({si, t});
    else
      skipped.push_back(name);
  }

  kilnrt_status nonFinite(const std::string &name, const std::string &what) const {
    return user_error("weights file '" + path + "': tensor '" + name + "' holds " + what +
                      "; kiln refuses non-finite weights, which give silently wrong outputs (load them anyway with "
                      "--allow-non-finite-weights)");
  }

  // The first non-finite value of an f32 tensor, or of one the model keeps in bfloat16 as stored.
  kilnrt_status checkFinite(const std::string &name, const kilnrt_tensor &t, const kiln_tensor_info &p) const {
    if (opt.allow_non_finite) return KILNRT_OK;
    if (t.dtype == KILN_F32)
      if (int64_t at = first_non_finite((const float *)t.data, kilnrt_tensor_numel(&t)); at >= 0)
        return nonFinite(name, "a non-finite value (" + std::to_string(((const float *)t.data)[at]) + ") at flat index " +
                                   std::to_string(at));
    if (t.dtype == KILN_BF16 && p.dtype == KILN_BF16) {
      const uint16_t *u = (const uint16_t *)t.data;
      for (int64_t k = 0, n = kilnrt_tensor_numel(&t); k < n; ++k)
        if ((u[k] & 0x7f80u) == 0x7f80u)
          return nonFinite(name, "a non-finite bf16 value (bits 0x" + hex16(u[k]) + ") at flat index " + std::to_string(k));
    }
    return KILNRT_OK;
  }

  // An F32 or F16 tensor of a parameter the model keeps in bfloat16: rounded once, here, and
  // relaid at once (one tensor's rounded copy held at a time, not all of them).
  kilnrt_status roundToBf16(const std::string &name, kilnrt_tensor &t, int i) {
    int64_t n = kilnrt_tensor_numel(&t);
    Storage wide;
    const float *f = (const float *)t.data;
    if (t.dtype == KILN_F16) {
      wide = alloc64((size_t)n * 4);
      widen_half(KILN_F16, (const uint16_t *)t.data, (float *)wide.get(), n);
      f = (const float *)wide.get();
    }
    Storage st = alloc64((size_t)n * 2);
    narrow_bf16(f, (uint16_t *)st.get(), n);
    for (int64_t k = 0; k < n && !opt.allow_non_finite; ++k)
      if ((((const uint16_t *)st.get())[k] & 0x7f80u) == 0x7f80u) {
        if (!std::isfinite(f[k])) return nonFinite(name, std::to_string(f[k]) + " at flat index " + std::to_string(k));
        return user_error("weights file '" + path + "': tensor '" + name + "' holds " + std::to_string(f[k]) +
                          " at flat index " + std::to_string(k) +
                          ", which is beyond bfloat16's range (the model keeps this weight in bf16: --precision bf16)");
      }
    if (t.dtype == KILN_F32) release_mapped(t.data, (size_t)n * 4);
    if (relaid(m->params[i])) {
      st = kept_layout(m->params[i], (const void *)st.get(), false);
      kept[i] = true;
    }
    t.data = st.get();
    t.dtype = KILN_BF16;
    converted.push_back(std::move(st));
    return KILNRT_OK;
  }

  // A tensor of a quantized type (a GGUF file's), or one bound to a parameter the model keeps
  // quantized: blocks of the parameter's type as stored; F32, F16 or BF16 quantized once here,
  // as llama.cpp's quantizer would (quant.cpp); blocks of another type refused (never converted
  // from one lossy format to another, nor widened into an f32 copy of the model).
  kilnrt_status quantized(const std::string &name, kilnrt_tensor &t, int i, const int64_t *want, int rank) {
    const kiln_tensor_info &p = m->params[i];
    const kiln_dtype pd = (kiln_dtype)p.dtype;
    bool same = t.rank == rank;
    for (int d = 0; same && d < rank; ++d) same = t.shape[d] == want[d];
    const bool floats = t.dtype == KILN_F32 || t.dtype == KILN_F16 || t.dtype == KILN_BF16;
    if (!same || !(t.dtype == pd || (is_quantized(pd) && floats))) {
      std::string hint = !same ? "" : is_quantized(pd) ? "; the model was compiled for " + std::string(dtype_name(pd)) + " blocks"
                                                       : "; compile with --config FILE.gguf to keep the file's types, or --quantize " +
                                                             std::string(dtype_name(t.dtype));
      misshaped.push_back(name + " (" + shape_str(t.shape, t.rank) + " " + dtype_name(t.dtype) + ", expected " + shape_str(want, rank) +
                          " " + dtype_name(pd) + hint + ")");
      return KILNRT_OK;
    }
    const int64_t n = kilnrt_tensor_numel(&t);
    if (t.dtype == pd) {  // as stored
      if (int64_t b = first_non_finite_block(pd, (const uint8_t *)t.data, n); b >= 0 && !opt.allow_non_finite)
        return nonFinite(name, "a non-finite scale in block " + std::to_string(b));
      ptrs[i] = t.data;
      mapped[i] = tensor_bytes(pd, n);
      return KILNRT_OK;
    }
    Storage wide;
    const float *f = (const float *)t.data;
    if (t.dtype != KILN_F32) {
      wide = alloc64((size_t)n * 4);
      widen_half(t.dtype, (const uint16_t *)t.data, (float *)wide.get(), n);
      f = (const float *)wide.get();
    }
    if (!opt.allow_non_finite)
      if (int64_t at = first_non_finite(f, n); at >= 0)
        return nonFinite(name, "a non-finite value (" + std::to_string(f[at]) + ") at flat index " + std::to_string(at));
    Storage st = alloc64(tensor_bytes(pd, n));
    quantize_blocks(pd, f, st.get(), n);
    if (t.dtype == KILN_F32) release_mapped(t.data, (size_t)n * 4);
    ptrs[i] = st.get();
    converted.push_back(std::move(st));
    return KILNRT_OK;
  }

  // One tensor of the file.
  kilnrt_status tensor(const std::string &name, kilnrt_tensor t) {
    auto it = wanted.find(name);
    if (it == wanted.end() && !prefix.empty()) it = wanted.find(prefix + name);
    if (it == wanted.end() && name.rfind(KILN_OPTIMIZER_PREFIX, 0) == 0) {
      optimizerState(name, t);
      return KILNRT_OK;
    }
    if (it == wanted.end()) {
      (ignorable(name) ? skipped : unexpected).push_back(name);
      return KILNRT_OK;
    }
    const int i = it->second;
    const kiln_tensor_info &p = m->params[i];
    if (seen[i])
      return user_error("weights file '" + path + "' holds parameter '" + p.name + "' twice (with and without '" + prefix + "')");
    seen[i] = true;
    int64_t want[KILN_MAX_RANK];
    const int rank = kilnrt::param_file_shape(p, want);
    if (is_quantized(t.dtype) || is_quantized((kiln_dtype)p.dtype)) return quantized(name, t, i, want, rank);
    const bool half = (t.dtype == KILN_F16 || t.dtype == KILN_BF16) && p.dtype == KILN_F32;
    // A parameter kept in bfloat16 (--precision bf16) takes any float dtype: BF16 as stored.
    const bool keptBf16 = p.dtype == KILN_BF16 && (t.dtype == KILN_F32 || t.dtype == KILN_F16 || t.dtype == KILN_BF16);
    bool same = t.rank == rank && (t.dtype == (kiln_dtype)p.dtype || half || keptBf16);
    for (int d = 0; d < rank; ++d) same = same && t.shape[d] == want[d];
    if (!same) {
      misshaped.push_back(name + " (" + shape_str(t.shape, t.rank) + " " + dtype_name(t.dtype) + ", expected " +
                          shape_str(want, rank) + " " + dtype_name((kiln_dtype)p.dtype) + ")");
      return KILNRT_OK;
    }
    if (half) {  // converted once, here; the model computes in f32
      int64_t n = kilnrt_tensor_numel(&t);
      Storage st = alloc64((size_t)n * 4);
      widen_half(t.dtype, (const uint16_t *)t.data, (float *)st.get(), n);
      t.data = st.get();
      t.dtype = KILN_F32;
      converted.push_back(std::move(st));
    }
    if (kilnrt_status st = checkFinite(name, t, p)) return st;
    const bool mappedHere = !half && !(keptBf16 && t.dtype != KILN_BF16);
    if (keptBf16 && t.dtype != KILN_BF16)
      if (kilnrt_status st = roundToBf16(name, t, i)) return st;
    ptrs[i] = t.data;
    if (mappedHere) mapped[i] = (size_t)kilnrt_tensor_numel(&t) * dtype_size(t.dtype);
    return KILNRT_OK;
  }

  // Every missing, unexpected and mis-shaped tensor, listed; OK when there is none.
  kilnrt_status mismatches() const {
    std::vector<std::string> missing;
    for (int i = 0; i < m->n_params; ++i)
      if (!seen[i]) missing.push_back(m->params[i].name);
    if (missing.empty() && unexpected.empty() && misshaped.empty()) return KILNRT_OK;
    auto list = [](const char *what, const std::vector<std::string> &v) {
      if (v.empty()) return std::string();
      std::string r = std::string("\n  ") + what + " (" + std::to_string(v.size()) + "): ";
      for (size_t i = 0; i < v.size() && i < 12; ++i) r += (i ? ", " : "") + v[i];
      if (v.size() > 12) r += ", ... (" + std::to_string(v.size() - 12) + " more)";
      return r;
    };
    return user_error("weights file '" + path + "' does not match the model:" + list("missing", missing) +
                      list("unexpected", unexpected) + list("mis-shaped", misshaped));
  }

  // The parameters the model keeps in another layout, relaid once here, and those a training
  // step writes, copied out of the mapping.
  void relayAndCopy() {
    for (int i = 0; i < m->n_params; ++i)
      if (relaid(m->params[i]) && !kept[i]) {
        converted.push_back(kept_layout(m->params[i], (const void *)ptrs[i], false));
        if (mapped[i]) release_mapped(ptrs[i], mapped[i]);
        ptrs[i] = converted.back().get();
      } else if (m->params_written && mapped[i]) {
        converted.push_back(alloc64(mapped[i]));
        memcpy(converted.back().get(), ptrs[i], mapped[i]);
        release_mapped(ptrs[i], mapped[i]);
        ptrs[i] = converted.back().get();
      }
  }
};
}  // namespace

extern "C" kilnrt_status kilnrt_session_load_weights_with(kilnrt_session *s, const char *path,
                                                          const kilnrt_load_options *options) {
  kilnrt_load_options opt = options ? *options : kilnrt_load_options{};
  kilnrt_weights *w;
  if (kilnrt_status st = kilnrt_weights_open(path, &w)) return st;
  std::unique_ptr<kilnrt_weights, void (*)(kilnrt_weights *)> guard(w, kilnrt_weights_close);
  const kiln_model_info *m = s->m;
  if (!opt.ignore_config && m->n_config && w->gguf) {  // a GGUF file's metadata, as a config.json
    if (kilnrt_status st = config_check_json(w->config, "GGUF file '" + w->path + "'", m->config, m->n_config)) return st;
  } else if (!opt.ignore_config && m->n_config) {  // the checkpoint's config.json, when it has one
    std::string wp = kilnrt_weights_path(w);
    std::string cfg = (wp.rfind('/') == std::string::npos ? std::string(".") : wp.substr(0, wp.rfind('/'))) + "/config.json";
    if (path_exists(cfg))
      if (kilnrt_status st = kilnrt_config_check(cfg.c_str(), m->config, m->n_config)) return st;
  }
  Binding b(m, path, opt);
  for (int i = 0; i < kilnrt_weights_count(w); ++i) {
    const char *name;
    kilnrt_tensor t;
    kilnrt_weights_get(w, i, &name, &t);
    if (kilnrt_status st = b.tensor(name, t)) return st;
  }
  if (kilnrt_status st = b.mismatches()) return st;
  b.relayAndCopy();
  s->state_loaded.assign((size_t)m->n_states, false);
  for (auto &[si, t] : b.states) {
    memcpy(s->state_store[si].get(), t.data, (size_t)kilnrt_tensor_numel(&t) * 4);
    s->state_loaded[si] = true;
  }
  if (!b.states.empty()) s->states_on_device = false;
  kilnrt_weights_close(s->weights);
  s->weights = guard.release();
  s->param_store = std::move(b.converted);
  s->params = b.ptrs;
  s->ignored = b.skipped;
  s->params_on_device = false;
  return KILNRT_OK;
}

extern "C" int32_t kilnrt_session_ignored_count(const kilnrt_session *s) { return (int32_t)s->ignored.size(); }
extern "C" const char *kilnrt_session_ignored_name(const kilnrt_session *s, int32_t i) {
  return i >= 0 && i < (int32_t)s->ignored.size() ? s->ignored[i].c_str() : "";
}

extern "C" kilnrt_status kilnrt_session_random_weights(kilnrt_session *s, uint64_t seed) {
  s->param_store.clear();
  for (int i = 0; i < s->m->n_params; ++i) {
    const kiln_tensor_info &p = s->m->params[i];
    int64_t shape[KILN_MAX_RANK], n = 1;
    for (int d = 0, rank = kilnrt::param_file_shape(p, shape); d < rank; ++d) n *= shape[d];  // the file's elements
    Storage st = alloc64((size_t)n * 4);
    float *f = (float *)st.get();
    uint64_t state = seed * 0x100000001b3ULL;
    for (const char *c = p.name; *c; ++c) state = (state ^ (uint8_t)*c) * 0x100000001b3ULL;
    for (int64_t k = 0; k < n; ++k) {
      if (p.init == KILN_INIT_ONES) f[k] = 1.0f;
      else if (p.init == KILN_INIT_ZEROS) f[k] = 0.0f;
      else {  // Box-Muller
        double u1 = ((splitmix64(state) >> 11) + 1.0) / 9007199254740993.0;
        double u2 = (splitmix64(state) >> 11) / 9007199254740992.0;
        f[k] = (float)(p.init_scale * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
      }
    }
    if (is_quantized((kiln_dtype)p.dtype)) {  // kept quantized: the generated numbers quantized once
      Storage q = alloc64(tensor_bytes((kiln_dtype)p.dtype, n));
      quantize_blocks((kiln_dtype)p.dtype, f, q.get(), n);
      st = std::move(q);
    }
    if (p.dtype == KILN_BF16) {  // kept in bfloat16: the generated numbers rounded once
      Storage h = alloc64((size_t)n * 2);
      narrow_bf16(f, (uint16_t *)h.get(), n);
      st = std::move(h);
    }
    if (relaid(p)) st = kept_layout(p, (const void *)st.get(), false);  // generated in the file's layout (the same numbers), kept as the model reads them
    s->params[i] = st.get();
    s->param_store.push_back(std::move(st));
  }
  kilnrt_weights_close(s->weights);
  s->weights = nullptr;
  s->params_on_device = false;
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_session_save_weights(kilnrt_session *s, const char *path) {
  return kilnrt::session_save_weights(s, path, {});
}

kilnrt::FileMetadata kilnrt::session_weights_metadata(const kilnrt_session *s) {
  FileMetadata out;
  if (s->weights && !s->weights->gguf && s->weights->meta.is_object())
    for (auto it = s->weights->meta.begin(); it != s->weights->meta.end(); ++it)
      if (it.value().is_string()) out[it.key()] = it.value().get<std::string>();
  return out;
}

kilnrt_status kilnrt::session_save_weights(kilnrt_session *s, const char *path, const FileMetadata &meta) {
  std::vector<const char *> names;
  std::vector<kilnrt_tensor> ts;
  std::vector<Storage> back;  // transposed and panel parameters, in the file's layout again
  for (int i = 0; i < s->m->n_params; ++i) {
    const kiln_tensor_info &p = s->m->params[i];
    if (!s->params[i]) return user_error("no weights loaded: use --weights or --random-weights");
    if (is_quantized((kiln_dtype)p.dtype))
      return user_error(std::string("cannot save the weights: parameter '") + p.name + "' is kept in " +
                        dtype_name((kiln_dtype)p.dtype) + " blocks, and kiln saves f32 and bf16 safetensors only");
    kilnrt_tensor t{};
    t.dtype = (kiln_dtype)p.dtype;
    t.rank = kilnrt::param_file_shape(p, t.shape);
    t.data = s->params[i];
    if (relaid(p)) {
      back.push_back(kept_layout(p, (const void *)s->params[i], true));
      t.data = back.back().get();
    }
    names.push_back(p.name);
    ts.push_back(t);
  }
  // A training model's optimizer state (moments, step) too: a checkpoint resumes from it, and
  // inference ignores it.
  for (int i = 0; i < s->m->n_states && s->m->params_written; ++i) {
    const kiln_tensor_info &st = s->m->states[i];
    if (strncmp(st.name, KILN_OPTIMIZER_PREFIX, strlen(KILN_OPTIMIZER_PREFIX)) != 0) continue;
    kilnrt_tensor t{};
    if (kilnrt_status e = kilnrt_session_state(s, st.name, &t)) return e;
    names.push_back(st.name);
    ts.push_back(t);
  }
  return kilnrt::save_weights(path, (int32_t)names.size(), names.data(), ts.data(), meta);
}

// The model's optimizer states (optimizer.*) that the last weights file did not hold.
std::vector<std::string> kilnrt::optimizer_states_not_loaded(const kilnrt_session *s) {
  std::vector<std::string> missing;
  for (int i = 0; i < s->m->n_states; ++i)
    if (strncmp(s->m->states[i].name, KILN_OPTIMIZER_PREFIX, strlen(KILN_OPTIMIZER_PREFIX)) == 0 &&
        !(i < (int)s->state_loaded.size() && s->state_loaded[i]))
      missing.push_back(s->m->states[i].name);
  return missing;
}
