// session_state.h - a kilnrt session's state and what its three files share (not installed):
// session.cpp (create, inputs, runs, outputs), weights_binding.cpp (weights in and out) and
// params.cpp (the layouts a parameter is kept in, conversions between float formats, storage).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "device.h"
#include "internal.h"

namespace kilnrt {
struct AlignedFree {
  void operator()(void *p) const { free(p); }
};
using Storage = std::unique_ptr<uint8_t, AlignedFree>;
// 64-byte aligned storage.
Storage alloc64(size_t bytes);
// A large working buffer (the arena, optimizer moments): 2 MiB aligned, huge pages advised.
Storage allocLarge(size_t bytes);

// A parameter's elements; whether it is kept in another layout than its file's (transposed or
// in panels); that layout from the file's values (or back, `to_file`), f32 or bfloat16 ones.
int64_t param_numel(const kiln_tensor_info &p);
bool relaid(const kiln_tensor_info &p);
Storage kept_layout(const kiln_tensor_info &p, const void *src, bool to_file);
// f32 to bfloat16 (to nearest, ties to even), IEEE half or bfloat16 to f32 (exactly), the first
// non-finite f32 (or -1), a bf16 value's bits in hex.
void narrow_bf16(const float *in, uint16_t *out, int64_t n);
void widen_half(kiln_dtype dt, const uint16_t *in, float *out, int64_t n);
int64_t first_non_finite(const float *f, int64_t n);
std::string hex16(uint16_t v);
// Drops the whole pages of a tensor of a weights file's mapping the model no longer reads.
void release_mapped(const void *p, size_t n);
// n device buffers of `iface` (device-resident sessions).
std::vector<std::unique_ptr<DeviceBuffer>> device_buffers(int n, const halide_device_interface_t *iface);
}  // namespace kilnrt

struct kilnrt_session {
  const kiln_model_info *m;
  kilnrt_weights *weights = nullptr;
  std::vector<kilnrt::Storage> param_store;  // owned parameter data (random weights)
  std::vector<void *> params;        // one pointer per parameter (into weights or param_store)
  std::vector<kilnrt::Storage> io_store;     // inputs and outputs, by io index
  std::vector<kilnrt::Storage> state_store;  // states (KV caches), zero at creation, kept across runs
  std::vector<bool> io_set;
  std::vector<kilnrt_tensor> io_tensor;
  std::vector<bool> io_unbatched;  // an input given without its batch dim (one sequence)
  int64_t syms[KILN_MAX_SYMS] = {};
  kilnrt::Storage arena;
  int64_t arena_bytes = 0;
  std::vector<std::string> ignored;  // tensors the last load skipped
  std::vector<bool> state_loaded;    // by state: the last weights file held it (a checkpoint's optimizer state)
  // --target=cuda|opencl --gpu-buffers=device: a device copy of every buffer; parameters uploaded once
  // per set of weights, inputs per run, outputs downloaded per run, states on demand.
  bool resident = false, params_on_device = false, states_on_device = false;
  std::vector<std::unique_ptr<kilnrt::DeviceBuffer>> dev_params, dev_io, dev_states;
  kilnrt::DeviceBuffer dev_arena;
  // Crops of dev_arena, one per arena buffer; declared after it, so released before it.
  std::vector<std::unique_ptr<kilnrt::DeviceBuffer>> dev_slots;
  ~kilnrt_session() { kilnrt_weights_close(weights); }
};
