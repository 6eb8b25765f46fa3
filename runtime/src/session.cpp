// kilnrt sessions: a compiled model's state (session_state.h), its inputs, its arena planned at
// each run's lengths, an entry run, the outputs and states read back. Weights come in through
// weights_binding.cpp; the parameters' layouts are params.cpp's.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <map>

#include "session_state.h"

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
      if ((ids[i] < 0 || ids[i] >= info.max_value) && !(info.ignore_id < 0 && ids[i] == info.ignore_id) && info.cache_slots)
        return user_error("input '" + std::string(name) + "': cache slot " + std::to_string(ids[i]) + " of sequence " +
                          std::to_string(i) + " is outside [0, " + std::to_string(info.max_value) +
                          ") (the model keeps that many per-sequence caches: its compiled batch bound)");
      else if ((ids[i] < 0 || ids[i] >= info.max_value) && !(info.ignore_id < 0 && ids[i] == info.ignore_id))
        return user_error("input '" + std::string(name) + "': token id " + std::to_string(ids[i]) + " at position " +
                          std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(info.max_value) + ")" +
                          (info.ignore_id < 0 ? " (" + std::to_string(info.ignore_id) + " marks an ignored position)"
                                              : std::string()));
  }
  if (info.cache_slots) {  // two sequences in one slot would write one cache
    const int32_t *ids = (const int32_t *)t->data;
    std::vector<int64_t> first((size_t)info.max_value, -1);
    for (int64_t i = 0; i < n; ++i) {
      if (first[(size_t)ids[i]] >= 0)
        return user_error("input '" + std::string(name) + "': cache slot " + std::to_string(ids[i]) + " is given twice (sequences " +
                          std::to_string(first[(size_t)ids[i]]) + " and " + std::to_string(i) +
                          "); each sequence needs a slot of its own");
      first[(size_t)ids[i]] = i;
    }
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
      if (kilnrt_status st = s->dev_params[i]->reserve(s->params[i], param_numel(m->params[i]) *
                                                                      (is_quantized((kiln_dtype)m->params[i].dtype) ? 1 : dtype_size((kiln_dtype)m->params[i].dtype)));
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
  // An extend entry's chunk goes at `past` of the caches: past + its length must fit the context
  // (the bound of `past`), or the cache writes would run past the end.
  if (e->role == KILN_ROLE_EXTEND)
    for (int k = 0; k < e->n_inputs; ++k)
      if (const kiln_tensor_info &p = m->io[e->inputs[k]]; strcmp(p.name, "past") == 0 && p.max_value > 0)
        for (int j = 0; j < e->n_inputs; ++j)
          if (const kiln_tensor_info &c = m->io[e->inputs[j]]; j != k && c.dtype == KILN_I32 && c.rank == 1 && c.dims[0].sym >= 0) {
            int64_t past = *(const int32_t *)s->io_tensor[e->inputs[k]].data, n = s->io_tensor[e->inputs[j]].shape[0];
            if (past + n > p.max_value)
              return user_error("entry '" + std::string(e->name) + "': " + std::to_string(n) + " tokens at past = " +
                                std::to_string(past) + " run past the context of " + std::to_string(p.max_value) +
                                " tokens");
          }
  // A batch no input shows (its bound is 1, or every input was given as one sequence) is one
  // sequence: an output with a row per sequence (a pooled embedding) has one row.
  for (int i = 0; i < m->n_syms; ++i)
    if (syms[i] == 0 && kilnrt::is_batch_sym(m, i)) syms[i] = 1;
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
  if (s->resident)  // nor views of another slot than the first
    for (int k = 0; k < e->n_inputs; ++k)
      if (int io = e->inputs[k]; m->io[io].cache_slots && s->io_set[io])
        for (int64_t i = 0; i < kilnrt_tensor_numel(&s->io_tensor[io]); ++i)
          if (((const int32_t *)s->io_tensor[io].data)[i] != 0)
            return user_error("a model compiled with --gpu-buffers=device keeps one sequence's caches: input '" +
                              std::string(m->io[io].name) + "' names cache slot " +
                              std::to_string(((const int32_t *)s->io_tensor[io].data)[i]) + ", not 0");
  if (e->single_sequence)
    for (int i = 0; i < m->n_syms; ++i)
      if (kilnrt::is_batch_sym(m, i) && syms[i] > 1)
        return user_error("entry '" + std::string(e->name) + "' runs one sequence at a time (" + e->single_sequence +
                          "): give it one sequence, not " + m->sym_names[i] + " = " + std::to_string(syms[i]));
  // Optional inputs left out hold their fill value (zeros, or an attention mask's ones) at the
  // lengths the given inputs set.
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
    if (info.cache_slots) {  // sequence r in slot r
      std::iota((int32_t *)s->io_store[io].get(), (int32_t *)s->io_store[io].get() + kilnrt_tensor_numel(&t), 0);
    } else if (info.fill == 0) {
      memset(s->io_store[io].get(), 0, bytes);
    } else if (info.dtype == KILN_I32) {
      std::fill_n((int32_t *)s->io_store[io].get(), kilnrt_tensor_numel(&t), (int32_t)info.fill);
    } else {
      std::fill_n((float *)s->io_store[io].get(), kilnrt_tensor_numel(&t), (float)info.fill);
    }
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
