// kilnrt sessions: bind weights and inputs to a compiled model, plan its arena, run an entry.
#include <fnmatch.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "device.h"
#include "internal.h"

using namespace kilnrt;

// The Halide runtime is linked into compiled models but not into every user of kilnrt
// (its unit tests), so its hooks are weak references.
extern "C" {
typedef void (*kiln_halide_error_handler)(void *, const char *);
__attribute__((weak)) kiln_halide_error_handler halide_set_error_handler(kiln_halide_error_handler);
__attribute__((weak)) int halide_set_num_threads(int);
__attribute__((weak)) int halide_reuse_device_allocations(void *, bool);
}

static thread_local std::string g_kernel_message;
static void on_halide_error(void *, const char *msg) {
  g_kernel_message = msg ? msg : "";
  while (!g_kernel_message.empty() && g_kernel_message.back() == '\n') g_kernel_message.pop_back();
}

extern "C" void kilnrt_threads_set(int n) {
  if (halide_set_num_threads) halide_set_num_threads(n);
  kilnrt::scratch_threads(n);
}

namespace {
struct AlignedFree {
  void operator()(void *p) const { free(p); }
};
using Storage = std::unique_ptr<uint8_t, AlignedFree>;
// 64-byte aligned. (Transparent huge pages for the weights were tried: decode steps ran about
// 3% faster, but faulting the pages in cost a second of system time at load.)
Storage alloc64(size_t bytes) {
  return Storage((uint8_t *)aligned_alloc(64, (bytes + 63) / 64 * 64 + 64));
}
// A large working buffer (the arena, optimizer moments): 2 MiB aligned and advised to be kept in
// transparent huge pages, where the system allows them on request. The GEMMs of a training step
// walk rows 200 KB apart (a vocabulary-wide gradient) and arrays of hundreds of MB: with 4 KiB
// pages most of those rows were a TLB miss.
Storage allocLarge(size_t bytes) {
  constexpr size_t kHuge = 2u << 20;
  if (bytes < 16 * kHuge) return alloc64(bytes);
  size_t n = (bytes + kHuge - 1) / kHuge * kHuge;
  Storage st((uint8_t *)aligned_alloc(kHuge, n));
  if (st) madvise(st.get(), n, MADV_HUGEPAGE);  // advice: ignored where huge pages are off
  return st;
}
}  // namespace

struct kilnrt_session {
  const kiln_model_info *m;
  kilnrt_weights *weights = nullptr;
  std::vector<Storage> param_store;  // owned parameter data (random weights)
  std::vector<void *> params;        // one pointer per parameter (into weights or param_store)
  std::vector<Storage> io_store;     // inputs and outputs, by io index
  std::vector<Storage> state_store;  // states (KV caches), zero at creation, kept across runs
  std::vector<bool> io_set;
  std::vector<kilnrt_tensor> io_tensor;
  std::vector<bool> io_unbatched;  // an input given without its batch dim (one sequence)
  int64_t syms[KILN_MAX_SYMS] = {};
  Storage arena;
  int64_t arena_bytes = 0;
  std::vector<std::string> ignored;  // tensors the last load skipped
  // --target=cuda|opencl --gpu-buffers=device: a device copy of every buffer; parameters uploaded once
  // per set of weights, inputs per run, outputs downloaded per run, states on demand.
  bool resident = false, params_on_device = false, states_on_device = false;
  std::vector<std::unique_ptr<kilnrt::DeviceBuffer>> dev_params, dev_io, dev_states;
  kilnrt::DeviceBuffer dev_arena;
  // Crops of dev_arena, one per arena buffer; declared after it, so released before it.
  std::vector<std::unique_ptr<kilnrt::DeviceBuffer>> dev_slots;
  ~kilnrt_session() { kilnrt_weights_close(weights); }
};

static std::vector<std::unique_ptr<kilnrt::DeviceBuffer>> device_buffers(int n, const halide_device_interface_t *iface) {
  std::vector<std::unique_ptr<kilnrt::DeviceBuffer>> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(std::make_unique<kilnrt::DeviceBuffer>());
    v.back()->iface = iface;
  }
  return v;
}

static int64_t param_numel(const kiln_tensor_info &p) {
  int64_t n = 1;
  for (int i = 0; i < p.rank; ++i) n *= p.dims[i].size;
  return n;
}

// A parameter's rank and shape in weights files: the [K, N] matrix of a parameter in panels,
// transposed back for a transposed one.
int kilnrt::param_file_shape(const kiln_tensor_info &p, int64_t *shape) {
  int rank = p.rank;
  for (int d = 0; d < p.rank; ++d) shape[d] = p.dims[d].size;
  if (p.panel_cols > 0) rank = 2, shape[0] = p.dims[1].size, shape[1] = p.panel_cols;
  if (p.transposed && rank == 2) std::swap(shape[0], shape[1]);
  return rank;
}

// A transposed or panel parameter in the layout the model keeps, from its file's layout (made
// once, when weights are loaded or generated), and back (`to_file`, for saving). Panels (or row
// blocks of a transpose) are laid out in parallel, each reading and writing rows contiguously.
// T is the kept element: float, or uint16_t for a parameter kept in bfloat16.
template <typename T>
static Storage kept_layout(const kiln_tensor_info &p, const T *src, bool to_file) {
  int64_t shape[KILN_MAX_RANK] = {};  // relaid parameters are 2-D in files
  kilnrt::param_file_shape(p, shape);
  const int64_t K = p.transposed ? shape[1] : shape[0], N = p.transposed ? shape[0] : shape[1];
  Storage st = alloc64((size_t)(to_file ? K * N : param_numel(p)) * sizeof(T));
  T *dst = (T *)st.get();
  if (p.panel_cols <= 0) {  // transposed: [rows, cols] -> [cols, rows], in blocks of 64 x 64
    const int64_t rows = to_file ? K : N, cols = to_file ? N : K, b = 64;
    kilnrt::parallel_for((int)((rows + b - 1) / b), [&](int rb) {
      for (int64_t c0 = 0; c0 < cols; c0 += b)
        for (int64_t r = rb * b; r < std::min(rows, rb * b + b); ++r)
          for (int64_t c = c0; c < std::min(cols, c0 + b); ++c) dst[c * rows + r] = src[r * cols + c];
    });
    return st;
  }
  const int64_t w = p.dims[2].size;  // panels [ceil(N / w), K, w]
  kilnrt::parallel_for((int)p.dims[0].size, [&](int pn) {
    const int64_t c0 = pn * w, cols = std::min(w, N - c0), at = pn * K * w;
    if (!to_file) {
      if (cols < w)  // the last panel's padding
        for (int64_t k = 0; k < K; ++k) std::fill(dst + at + k * w + cols, dst + at + k * w + w, T(0));
      if (!p.transposed)  // file [K, N]: a row segment per k
        for (int64_t k = 0; k < K; ++k) std::copy(src + k * N + c0, src + k * N + c0 + cols, dst + at + k * w);
      else  // file [N, K]: a file row per column
        for (int64_t l = 0; l < cols; ++l)
          for (int64_t k = 0; k < K; ++k) dst[at + k * w + l] = src[(c0 + l) * K + k];
    } else if (!p.transposed) {
      for (int64_t k = 0; k < K; ++k) std::copy(src + at + k * w, src + at + k * w + cols, dst + k * N + c0);
    } else {
      for (int64_t l = 0; l < cols; ++l)
        for (int64_t k = 0; k < K; ++k) dst[(c0 + l) * K + k] = src[at + k * w + l];
    }
  });
  return st;
}
static bool relaid(const kiln_tensor_info &p) { return p.transposed || p.panel_cols > 0; }
// A parameter in the kept layout, from its f32 (or, kept in bfloat16, its bf16) values in the file's.
static Storage kept_layout(const kiln_tensor_info &p, const void *src, bool to_file) {
  return p.dtype == KILN_BF16 ? kept_layout(p, (const uint16_t *)src, to_file) : kept_layout(p, (const float *)src, to_file);
}

static std::string hex16(uint16_t v) {
  char b[8];
  snprintf(b, sizeof b, "%04x", v);
  return b;
}

// f32 to bfloat16, to nearest with ties to even (as the GEMMs round their operands); a NaN
// stays a (quiet) NaN.
static void narrow_bf16(const float *in, uint16_t *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    memcpy(&u, &in[i], 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) out[i] = (uint16_t)((u >> 16) | 0x40);
    else out[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
}

// Drops the whole pages of [p, p + n), a tensor of the weights file's private, read-only
// mapping that the model no longer reads (it keeps a relaid copy): loading then never holds a
// checkpoint tensor and its copy at once. Safe for any mapped bytes: a later read of a dropped
// page faults it in again from the file.
static void release_mapped(const void *p, size_t n) {
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + page - 1) / page * page,
                  b = ((uintptr_t)p + n) / page * page;
  if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

extern "C" kilnrt_status kilnrt_session_create(const kiln_model_info *model, kilnrt_session **out) {
  *out = nullptr;
  if (!model || model->abi_version != KILN_ABI_VERSION)
    return internal_error("model table has ABI version " + std::to_string(model ? model->abi_version : -1) +
                          ", this runtime expects " + std::to_string(KILN_ABI_VERSION));
  if (halide_set_error_handler) halide_set_error_handler(on_halide_error);
  if (model->gpu_api == KILN_GPU_NONE) kilnrt::scratch_install();
  if (model->gpu_api == KILN_GPU_CUDA || model->gpu_api == KILN_GPU_OPENCL) {
    if (kilnrt_status st = model->gpu_api == KILN_GPU_CUDA ? kilnrt_cuda_check() : kilnrt_opencl_check()) return st;
    if (halide_reuse_device_allocations) halide_reuse_device_allocations(nullptr, true);
  }
  auto s = std::make_unique<kilnrt_session>();
  s->m = model;
  s->resident = model->gpu_api != KILN_GPU_NONE && model->gpu_resident;
  if (s->resident) {
    const halide_device_interface_t *iface = kilnrt::device_interface(model->gpu_api);
    s->dev_params = device_buffers(model->n_params, iface);
    s->dev_io = device_buffers(model->n_io, iface);
    s->dev_states = device_buffers(model->n_states, iface);
    s->dev_arena.iface = iface;
  }
  s->params.assign(model->n_params, nullptr);
  s->io_store.resize(model->n_io);
  s->io_set.assign(model->n_io, false);
  s->io_unbatched.assign(model->n_io, false);
  s->io_tensor.resize(model->n_io);
  for (int i = 0; i < model->n_states; ++i) {
    size_t bytes = (size_t)param_numel(model->states[i]) * 4;
    s->state_store.push_back(allocLarge(bytes));
    memset(s->state_store.back().get(), 0, bytes);
  }
  *out = s.release();
  return KILNRT_OK;
}

extern "C" void kilnrt_session_destroy(kilnrt_session *s) { delete s; }

// The first non-finite value of n floats (by bit pattern: an all-ones exponent), or -1.
static int64_t first_non_finite(const float *f, int64_t n) {
  const uint32_t *u = (const uint32_t *)f;
  for (int64_t i = 0; i < n; ++i)
    if ((u[i] & 0x7f800000u) == 0x7f800000u) return i;
  return -1;
}

// IEEE half and bfloat16 to f32, exactly (both are subsets of f32).
static void widen_half(kiln_dtype dt, const uint16_t *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    if (dt == KILN_BF16) {
      bits = (uint32_t)in[i] << 16;
    } else {
      uint32_t h = in[i], sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
      if (e == 0x1F) bits = sign | 0x7F800000u | (m << 13);  // inf, nan
      else if (e) bits = sign | ((e + 112) << 23) | (m << 13);
      else if (!m) bits = sign;
      else {  // subnormal: normalize
        int shift = 0;
        while (!(m & 0x400)) m <<= 1, ++shift;
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((m & 0x3FF) << 13);
      }
    }
    memcpy(&out[i], &bits, 4);
  }
}

extern "C" kilnrt_status kilnrt_session_load_weights(kilnrt_session *s, const char *path) {
  return kilnrt_session_load_weights_with(s, path, nullptr);
}

extern "C" kilnrt_status kilnrt_session_load_weights_with(kilnrt_session *s, const char *path,
                                                          const kilnrt_load_options *options) {
  kilnrt_load_options opt = options ? *options : kilnrt_load_options{};
  kilnrt_weights *w;
  if (kilnrt_status st = kilnrt_weights_open(path, &w)) return st;
  std::unique_ptr<kilnrt_weights, void (*)(kilnrt_weights *)> guard(w, kilnrt_weights_close);
  const kiln_model_info *m = s->m;
  if (!opt.ignore_config && m->n_config) {  // the checkpoint's config.json, when it has one
    std::string wp = kilnrt_weights_path(w);
    std::string cfg = (wp.rfind('/') == std::string::npos ? std::string(".") : wp.substr(0, wp.rfind('/'))) + "/config.json";
    if (path_exists(cfg))
      if (kilnrt_status st = kilnrt_config_check(cfg.c_str(), m->config, m->n_config)) return st;
  }
  std::string prefix = m->weights_prefix ? m->weights_prefix : "";
  std::map<std::string, int> wanted;
  for (int i = 0; i < m->n_params; ++i) wanted[m->params[i].name] = i;
  auto ignored = [&](const std::string &name) {
    for (int i = 0; i < m->n_ignored; ++i)
      if (fnmatch(m->ignored[i], name.c_str(), 0) == 0 || fnmatch(m->ignored[i], (prefix + name).c_str(), 0) == 0)
        return true;
    return false;
  };
  // 1. Every tensor of the file is a parameter (possibly without the prefix), ignorable, or unexpected.
  std::vector<void *> ptrs(m->n_params);
  std::vector<bool> seen(m->n_params);
  std::vector<std::string> unexpected, misshaped, skipped;
  std::vector<Storage> converted;  // F16/BF16 parameters widened to f32
  std::vector<size_t> mapped(m->n_params, 0);  // bytes of a parameter read in place from the mapping
  std::vector<bool> kept(m->n_params, false);  // already in the layout the model keeps
  std::vector<std::pair<int, kilnrt_tensor>> states;  // optimizer states the file holds
  for (int i = 0; i < kilnrt_weights_count(w); ++i) {
    const char *cname;
    kilnrt_tensor t;
    kilnrt_weights_get(w, i, &cname, &t);
    std::string name = cname;
    auto it = wanted.find(name);
    if (it == wanted.end() && !prefix.empty()) it = wanted.find(prefix + name);
    if (it == wanted.end() && name.rfind(KILN_OPTIMIZER_PREFIX, 0) == 0) {  // a training checkpoint's optimizer state
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
        skipped.push_back(name);  // inference ignores the optimizer's state, and reports it
      continue;
    }
    if (it == wanted.end()) {
      (ignored(name) ? skipped : unexpected).push_back(name);
      continue;
    }
    const kiln_tensor_info &p = m->params[it->second];
    if (seen[it->second])
      return user_error("weights file '" + std::string(path) + "' holds parameter '" + p.name + "' twice (with and without '" +
                        prefix + "')");
    seen[it->second] = true;
    int64_t want[KILN_MAX_RANK];
    const int rank = kilnrt::param_file_shape(p, want);
    const bool half = (t.dtype == KILN_F16 || t.dtype == KILN_BF16) && p.dtype == KILN_F32;
    // A parameter kept in bfloat16 (--precision bf16) takes any float dtype: BF16 as stored.
    const bool keptBf16 = p.dtype == KILN_BF16 && (t.dtype == KILN_F32 || t.dtype == KILN_F16 || t.dtype == KILN_BF16);
    bool same = t.rank == rank && (t.dtype == (kiln_dtype)p.dtype || half || keptBf16);
    for (int d = 0; d < rank; ++d) same = same && t.shape[d] == want[d];
    if (!same) {
      misshaped.push_back(name + " (" + shape_str(t.shape, t.rank) + " " + dtype_name(t.dtype) + ", expected " +
                          shape_str(want, rank) + " " + dtype_name((kiln_dtype)p.dtype) + ")");
      continue;
    }
    if (half) {  // converted once, here; the model computes in f32
      int64_t n = kilnrt_tensor_numel(&t);
      Storage st = alloc64((size_t)n * 4);
      widen_half(t.dtype, (const uint16_t *)t.data, (float *)st.get(), n);
      t.data = st.get();
      t.dtype = KILN_F32;
      converted.push_back(std::move(st));
    }
    if (!opt.allow_non_finite && t.dtype == KILN_F32)
      if (int64_t at = first_non_finite((const float *)t.data, kilnrt_tensor_numel(&t)); at >= 0)
        return user_error("weights file '" + std::string(path) + "': tensor '" + name + "' holds a non-finite value (" +
                          std::to_string(((const float *)t.data)[at]) + ") at flat index " + std::to_string(at) +
                          "; kiln refuses non-finite weights, which give silently wrong outputs (load them anyway "
                          "with --allow-non-finite-weights)");
    if (!opt.allow_non_finite && t.dtype == KILN_BF16 && p.dtype == KILN_BF16) {
      const uint16_t *u = (const uint16_t *)t.data;
      for (int64_t k = 0, n = kilnrt_tensor_numel(&t); k < n; ++k)
        if ((u[k] & 0x7f80u) == 0x7f80u)
          return user_error("weights file '" + std::string(path) + "': tensor '" + name + "' holds a non-finite bf16 value (bits 0x" +
                            hex16(u[k]) + ") at flat index " + std::to_string(k) +
                            "; kiln refuses non-finite weights, which give silently wrong outputs (load them anyway "
                            "with --allow-non-finite-weights)");
    }
    const bool mappedHere = !half && !(keptBf16 && t.dtype != KILN_BF16);
    if (keptBf16 && t.dtype != KILN_BF16) {  // rounded to bfloat16 once, here
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
        if ((((const uint16_t *)st.get())[k] & 0x7f80u) == 0x7f80u)
          return user_error("weights file '" + std::string(path) + "': tensor '" + name + "' holds " + std::to_string(f[k]) +
                            " at flat index " + std::to_string(k) +
                            (std::isfinite(f[k]) ? ", which is beyond bfloat16's range (the model keeps this weight in bf16: --precision bf16)"
                                                 : "; kiln refuses non-finite weights, which give silently wrong outputs (load them "
                                                   "anyway with --allow-non-finite-weights)"));
      if (t.dtype == KILN_F32) release_mapped(t.data, (size_t)n * 4);
      if (relaid(p)) {  // relaid now, so one tensor's rounded copy is held at a time, not all of them
        st = kept_layout(p, (const void *)st.get(), false);
        kept[it->second] = true;
      }
      t.data = st.get();
      t.dtype = KILN_BF16;
      converted.push_back(std::move(st));
    }
    ptrs[it->second] = t.data;
    if (mappedHere) mapped[it->second] = (size_t)kilnrt_tensor_numel(&t) * dtype_size(t.dtype);
  }
  std::vector<std::string> missing;
  for (int i = 0; i < m->n_params; ++i)
    if (!seen[i]) missing.push_back(m->params[i].name);
  if (!missing.empty() || !unexpected.empty() || !misshaped.empty()) {
    auto list = [](const char *what, const std::vector<std::string> &v) {
      if (v.empty()) return std::string();
      std::string r = std::string("\n  ") + what + " (" + std::to_string(v.size()) + "): ";
      for (size_t i = 0; i < v.size() && i < 12; ++i) r += (i ? ", " : "") + v[i];
      if (v.size() > 12) r += ", ... (" + std::to_string(v.size() - 12) + " more)";
      return r;
    };
    return user_error("weights file '" + std::string(path) + "' does not match the model:" + list("missing", missing) +
                      list("unexpected", unexpected) + list("mis-shaped", misshaped));
  }
  std::vector<Storage> owned = std::move(converted);  // converted, transposed and panel parameters, made once here
  for (int i = 0; i < m->n_params; ++i)
    if (relaid(m->params[i]) && !kept[i]) {
      owned.push_back(kept_layout(m->params[i], (const void *)ptrs[i], false));
      if (mapped[i]) release_mapped(ptrs[i], mapped[i]);
      ptrs[i] = owned.back().get();
    } else if (m->params_written && mapped[i]) {  // a training step writes it: a copy of its own
      owned.push_back(alloc64(mapped[i]));
      memcpy(owned.back().get(), ptrs[i], mapped[i]);
      release_mapped(ptrs[i], mapped[i]);
      ptrs[i] = owned.back().get();
    }
  for (auto &[si, t] : states) memcpy(s->state_store[si].get(), t.data, (size_t)kilnrt_tensor_numel(&t) * 4);
  if (!states.empty()) s->states_on_device = false;
  kilnrt_weights_close(s->weights);
  s->weights = guard.release();
  s->param_store = std::move(owned);
  s->params = ptrs;
  s->ignored = skipped;
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
  std::vector<const char *> names;
  std::vector<kilnrt_tensor> ts;
  std::vector<Storage> back;  // transposed and panel parameters, in the file's layout again
  for (int i = 0; i < s->m->n_params; ++i) {
    const kiln_tensor_info &p = s->m->params[i];
    if (!s->params[i]) return user_error("no weights loaded: use --weights or --random-weights");
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
  return kilnrt_weights_save(path, (int32_t)names.size(), names.data(), ts.data());
}

static int find_io(const kiln_model_info *m, const char *name) {
  for (int i = 0; i < m->n_io; ++i)
    if (strcmp(m->io[i].name, name) == 0) return i;
  return -1;
}

static bool is_input(const kiln_model_info *m, int io) {
  for (int e = 0; e < m->n_entries; ++e)
    for (int i = 0; i < m->entries[e].n_inputs; ++i)
      if (m->entries[e].inputs[i] == io) return true;
  return false;
}

extern "C" kilnrt_status kilnrt_session_set_input(kilnrt_session *s, const char *name, const kilnrt_tensor *t) {
  const kiln_model_info *m = s->m;
  int io = find_io(m, name);
  if (io < 0 || !is_input(m, io)) {
    std::string names;
    for (int i = 0; i < m->n_io; ++i)
      if (is_input(m, i)) names += (names.empty() ? "" : ", ") + std::string(m->io[i].name);
    return user_error("the model has no input '" + std::string(name) + "' (inputs: " + names + ")");
  }
  const kiln_tensor_info &info = m->io[io];
  // One sequence may leave out the batch dim: it is then a batch of one.
  kilnrt_tensor one;
  bool unbatched = info.rank > 1 && t->rank == info.rank - 1 && kilnrt::is_batch_sym(m, info.dims[0].sym);
  if (unbatched) {
    one = *t;
    one.rank = info.rank;
    one.shape[0] = 1;
    for (int d = 0; d < t->rank; ++d) one.shape[d + 1] = t->shape[d];
    t = &one;
  }
  if (t->dtype != (kiln_dtype)info.dtype)
    return user_error("input '" + std::string(name) + "' must be " + dtype_name((kiln_dtype)info.dtype) + ", got " +
                      dtype_name(t->dtype));
  if (t->rank != info.rank)
    return user_error("input '" + std::string(name) + "' must have rank " + std::to_string(info.rank) +
                      (kilnrt::is_batch_sym(m, info.dims[0].sym) ? " (or " + std::to_string(info.rank - 1) + ": one sequence)"
                                                                 : std::string()) +
                      ", got shape " + shape_str(t->shape, t->rank));
  for (int d = 0; d < info.rank; ++d) {
    const kiln_dim &dim = info.dims[d];
    if (dim.sym < 0 && t->shape[d] != dim.size)
      return user_error("input '" + std::string(name) + "' dimension " + std::to_string(d) + " must be " +
                        std::to_string(dim.size) + ", got " + std::to_string(t->shape[d]));
    if (dim.sym >= 0) {
      std::string sn = std::string(kilnrt::is_batch_sym(m, dim.sym) ? "batch size " : "sequence length ") + m->sym_names[dim.sym];
      if (t->shape[d] < 1)
        return user_error("input '" + std::string(name) + "': " + sn + " must be at least 1, got " +
                          std::to_string(t->shape[d]));
      if (t->shape[d] > m->sym_max[dim.sym])
        return user_error("input '" + std::string(name) + "': " + sn + " = " +
                          std::to_string(t->shape[d]) + " exceeds the compiled bound " +
                          std::to_string(m->sym_max[dim.sym]) + " (recompile with a larger bound)");
    }
  }
  int64_t n = kilnrt_tensor_numel(t);
  // NaN and infinities are rejected, not propagated: max-based ops (ReLU, softmax's row max)
  // would silently drop a NaN on some rows and keep it on others.
  if (t->dtype == KILN_F32) {
    const float *f = (const float *)t->data;
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(f[i]))
        return user_error("input '" + std::string(name) + "' holds a non-finite value (" + std::to_string(f[i]) +
                          ") at flat index " + std::to_string(i) + "; kiln's inputs must be finite");
  }
  if (info.max_value > 0) {
    const int32_t *ids = (const int32_t *)t->data;
    for (int64_t i = 0; i < n; ++i)
      if ((ids[i] < 0 || ids[i] >= info.max_value) && !(info.ignore_id < 0 && ids[i] == info.ignore_id))
        return user_error("input '" + std::string(name) + "': token id " + std::to_string(ids[i]) + " at position " +
                          std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(info.max_value) + ")" +
                          (info.ignore_id < 0 ? " (" + std::to_string(info.ignore_id) + " marks an ignored position)"
                                              : std::string()));
  }
  Storage st = alloc64((size_t)n * 4);
  memcpy(st.get(), t->data, (size_t)n * 4);
  s->io_store[io] = std::move(st);
  s->io_tensor[io] = *t;
  s->io_tensor[io].data = s->io_store[io].get();
  s->io_set[io] = true;
  s->io_unbatched[io] = unbatched;
  return KILNRT_OK;
}

// The shape of `info` at the lengths `syms`; the index of a length no input set, or -1.
static int shape_at(const kiln_tensor_info &info, const int64_t *syms, kilnrt_tensor *t) {
  *t = kilnrt_tensor{};
  t->dtype = (kiln_dtype)info.dtype;
  t->rank = info.rank;
  for (int d = 0; d < info.rank; ++d) {
    int sym = info.dims[d].sym;
    if (sym >= 0 && syms[sym] == 0) return sym;
    t->shape[d] = sym >= 0 ? syms[sym] : info.dims[d].size;
  }
  return -1;
}

// Device-resident buffers: every buffer the entry uses gets its device copy; parameters are
// uploaded once per set of weights, states (zero) once, this entry's inputs every run.
static kilnrt_status sync_to_device(kilnrt_session *s, const kiln_entry_info *e, int64_t arena) {
  const kiln_model_info *m = s->m;
  if (!s->params_on_device) {
    for (int i = 0; i < m->n_params; ++i)
      if (kilnrt_status st = s->dev_params[i]->reserve(s->params[i], param_numel(m->params[i]) * dtype_size((kiln_dtype)m->params[i].dtype));
          st || (st = s->dev_params[i]->upload()))
        return st;
    s->params_on_device = true;
  }
  if (!s->states_on_device) {
    for (int i = 0; i < m->n_states; ++i)
      if (kilnrt_status st = s->dev_states[i]->reserve(s->state_store[i].get(), param_numel(m->states[i]) * 4);
          st || (st = s->dev_states[i]->upload()))
        return st;
    s->states_on_device = true;
  }
  for (int i = 0; i < m->n_io; ++i) {
    if (!s->io_store[i]) continue;
    if (kilnrt_status st = s->dev_io[i]->reserve(s->io_store[i].get(), kilnrt_tensor_numel(&s->io_tensor[i]) * 4)) return st;
  }
  for (int k = 0; k < e->n_inputs; ++k)
    if (s->io_store[e->inputs[k]])
      if (kilnrt_status st = s->dev_io[e->inputs[k]]->upload()) return st;
  return s->dev_arena.reserve(s->arena.get(), std::max<int64_t>(arena, 4));
}

extern "C" const kiln_model_info *kilnrt_session_model(const kilnrt_session *s) { return s->m; }

extern "C" kilnrt_status kilnrt_session_run(kilnrt_session *s, const char *entry_name) {
  const kiln_model_info *m = s->m;
  const kiln_entry_info *e = nullptr;
  for (int i = 0; i < m->n_entries; ++i)
    if (strcmp(m->entries[i].name, entry_name) == 0) e = &m->entries[i];
  if (!e) return user_error("the model has no entry point '" + std::string(entry_name) + "'");
  for (int i = 0; i < m->n_params; ++i)
    if (!s->params[i]) return user_error("no weights loaded: use --weights FILE or --random-weights");
  // 1. Sequence lengths come from the inputs; they must agree.
  int64_t syms[KILN_MAX_SYMS] = {};
  bool batched = false, unbatched = false;  // inputs given with, and without, their batch dim
  for (int k = 0; k < e->n_inputs; ++k) {
    int io = e->inputs[k];
    if (!s->io_set[io]) {
      if (m->io[io].optional) continue;  // zeros, sized below
      return user_error("input '" + std::string(m->io[io].name) + "' was not given");
    }
    for (int d = 0; d < m->io[io].rank; ++d) {
      int sym = m->io[io].dims[d].sym;
      if (sym < 0) continue;
      int64_t v = s->io_tensor[io].shape[d];
      if (syms[sym] && syms[sym] != v)
        return user_error("inputs disagree on sequence length " + std::string(m->sym_names[sym]) + ": " +
                          std::to_string(syms[sym]) + " vs " + std::to_string(v) + " (input '" + m->io[io].name + "')");
      syms[sym] = v;
    }
    if (kilnrt::is_batch_sym(m, m->io[io].rank > 0 ? m->io[io].dims[0].sym : -1))
      (s->io_unbatched[io] ? unbatched : batched) = true;
  }
  // The rows of a batch: B·L.
  for (int i = 0; i < m->n_syms && m->sym_factors; ++i)
    if (m->sym_factors[2 * i] >= 0)  // a batch no input shows (its bound is 1) is one sequence
      syms[i] = std::max<int64_t>(1, syms[m->sym_factors[2 * i]]) * syms[m->sym_factors[2 * i + 1]];
  // Device-resident buffers have no per-sequence views (kiln-lower-to-llvm offsets host pointers).
  if (s->resident)
    for (int i = 0; i < m->n_syms; ++i)
      if (kilnrt::is_batch_sym(m, i) && syms[i] > 1)
        return user_error("a model compiled with --gpu-buffers=device runs one sequence at a time: give it one "
                          "sequence, not " + std::string(m->sym_names[i]) + " = " + std::to_string(syms[i]));
  if (e->single_sequence)
    for (int i = 0; i < m->n_syms; ++i)
      if (kilnrt::is_batch_sym(m, i) && syms[i] > 1)
        return user_error("entry '" + std::string(e->name) + "' runs one sequence at a time (" + e->single_sequence +
                          "): give it one sequence, not " + m->sym_names[i] + " = " + std::to_string(syms[i]));
  // Optional inputs left out are zeros of the lengths the given inputs set.
  for (int k = 0; k < e->n_inputs; ++k) {
    int io = e->inputs[k];
    const kiln_tensor_info &info = m->io[io];
    if (s->io_set[io] || !info.optional) continue;
    kilnrt_tensor t;
    if (int sym = shape_at(info, syms, &t); sym >= 0)
      return user_error("optional input '" + std::string(info.name) + "' was not given and no other input sets its length " +
                        m->sym_names[sym]);
    size_t bytes = (size_t)kilnrt_tensor_numel(&t) * 4;
    if (!s->io_store[io] || kilnrt_tensor_numel(&s->io_tensor[io]) != kilnrt_tensor_numel(&t)) s->io_store[io] = alloc64(bytes);
    memset(s->io_store[io].get(), 0, bytes);
    t.data = s->io_store[io].get();
    s->io_tensor[io] = t;
  }
  // 2. Outputs are sized from the lengths.
  for (int k = 0; k < e->n_outputs; ++k) {
    int io = e->outputs[k];
    const kiln_tensor_info &info = m->io[io];
    kilnrt_tensor t;
    if (shape_at(info, syms, &t) >= 0)
      return internal_error("output '" + std::string(info.name) + "' depends on a length no input sets");
    if (unbatched && !batched && t.rank > 1 && kilnrt::is_batch_sym(m, info.dims[0].sym)) {  // one sequence: no batch dim
      for (int d = 1; d < t.rank; ++d) t.shape[d - 1] = t.shape[d];
      t.shape[--t.rank] = 0;
    }
    int64_t n = kilnrt_tensor_numel(&t);
    if (!s->io_store[io] || kilnrt_tensor_numel(&s->io_tensor[io]) != n) s->io_store[io] = alloc64((size_t)n * 4);
    t.data = s->io_store[io].get();
    s->io_tensor[io] = t;
  }
  // 3. The arena, sized for these lengths, reused while it is large enough.
  std::vector<int64_t> offsets(e->n_buffers);
  int64_t total = 0;
  if (kilnrt_status st = kilnrt_arena_plan(e->buffers, e->n_buffers, syms, offsets.data(), &total)) return st;
  if (m->gpu_api == KILN_GPU_NONE) kilnrt::scratch_prefault_stacks();
  if (total > s->arena_bytes || !s->arena) {
    s->arena = allocLarge((size_t)total);
    if (!s->arena) return user_error("cannot allocate the " + std::to_string(total) + "-byte arena");
    s->arena_bytes = total;
  }
  std::vector<void *> bufs;
  bufs.reserve(m->n_params + m->n_io + m->n_states + e->n_buffers);
  for (void *p : s->params) bufs.push_back(p);
  for (int i = 0; i < m->n_io; ++i) bufs.push_back(s->io_store[i].get());
  for (auto &st : s->state_store) bufs.push_back(st.get());
  for (int i = 0; i < e->n_buffers; ++i) bufs.push_back(s->arena.get() + offsets[i]);
  if (s->resident) {  // the device table follows the host table: entry functions read bufs[n + slot]
    if (kilnrt_status st = sync_to_device(s, e, total)) return st;
    for (auto &d : s->dev_params) bufs.push_back((void *)(uintptr_t)d->device());
    for (auto &d : s->dev_io) bufs.push_back((void *)(uintptr_t)d->device());
    for (auto &d : s->dev_states) bufs.push_back((void *)(uintptr_t)d->device());
    while ((int)s->dev_slots.size() < e->n_buffers) s->dev_slots.push_back(std::make_unique<kilnrt::DeviceBuffer>());
    for (int i = 0; i < e->n_buffers; ++i) {
      if (kilnrt_status st = s->dev_slots[i]->crop_of(s->dev_arena, offsets[i])) return st;
      bufs.push_back((void *)(uintptr_t)s->dev_slots[i]->device());
    }
  }
  memcpy(s->syms, syms, sizeof(syms));
  // 4. Run.
  int32_t failed = -1;
  g_kernel_message.clear();
  int32_t rc = e->fn(bufs.data(), syms, &failed);
  if (rc != 0) {
    std::string k = failed >= 0 && failed < e->n_kernels ? e->kernel_names[failed] : "?";
    return internal_error("kernel " + std::to_string(failed) + " (" + k + ") failed with code " + std::to_string(rc) +
                          (g_kernel_message.empty() ? "" : ": " + g_kernel_message));
  }
  if (s->resident)  // the outputs back to the host
    for (int k = 0; k < e->n_outputs; ++k)
      if (kilnrt_status st = s->dev_io[e->outputs[k]]->download()) return st;
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_session_output(kilnrt_session *s, const char *name, const kilnrt_tensor **out) {
  int io = find_io(s->m, name);
  if (io < 0 || is_input(s->m, io)) return user_error("the model has no output '" + std::string(name) + "'");
  if (!s->io_store[io]) return user_error("output '" + std::string(name) + "' has not been computed yet");
  *out = &s->io_tensor[io];
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_session_state(kilnrt_session *s, const char *name, kilnrt_tensor *out) {
  const kiln_model_info *m = s->m;
  std::string names;
  for (int i = 0; i < m->n_states; ++i) {
    const kiln_tensor_info &st = m->states[i];
    if (std::string(st.name) == name) {
      *out = kilnrt_tensor{};
      out->dtype = KILN_F32;
      out->rank = st.rank;
      for (int d = 0; d < st.rank; ++d) out->shape[d] = st.dims[d].size;
      out->data = s->state_store[i].get();
      if (s->resident && s->states_on_device) return s->dev_states[i]->download();  // a snapshot: writes stay on the host
      return KILNRT_OK;
    }
    names += (names.empty() ? "" : ", ") + std::string(st.name);
  }
  return user_error("the model has no state '" + std::string(name) + "' (states: " + (names.empty() ? "none" : names) + ")");
}

const void *kilnrt::session_param(const kilnrt_session *s, int i) {
  return i >= 0 && i < (int)s->params.size() ? s->params[i] : nullptr;
}

const kilnrt_tensor *kilnrt::session_input(const kilnrt_session *s, const char *name) {
  for (int i = 0; i < s->m->n_io; ++i)
    if (strcmp(s->m->io[i].name, name) == 0) return s->io_set[i] ? &s->io_tensor[i] : nullptr;
  return nullptr;
}

extern "C" int64_t kilnrt_session_arena_bytes(const kilnrt_session *s) { return s->arena_bytes; }
