// device.h - one device allocation mirroring a host buffer (models with device-resident buffers).
#pragma once
#include <HalideRuntime.h>

#include <cstdint>

#include "kilnrt/api.h"

namespace kilnrt {

// The Halide device interface of a model's GPU API (kiln_model_info.gpu_api); null for none,
// or when the executable lacks that runtime.
const halide_device_interface_t *device_interface(int32_t gpu_api);

struct DeviceBuffer {
  const halide_device_interface_t *iface = nullptr;  // the GPU API (set before reserve)
  halide_buffer_t buf{};  // 1-D f32 view of the bytes; buf.device is the API's device handle
  halide_dimension_t dim{};
  int64_t capacity = 0;  // f32 words allocated
  bool cropped = false;  // a crop of another buffer's allocation (released, not freed)
  uint64_t alloc_id = 0;     // this allocation's number (unique in the process; 0: none)
  uint64_t crop_parent = 0;  // the parent allocation's number
  int64_t crop_offset = 0;
  // Allocates (or keeps, when large enough) device memory for `bytes`, mirroring `host`.
  kilnrt_status reserve(void *host, int64_t bytes);
  // A view of `parent` from byte `offset` to its end, sharing its allocation (Halide's device
  // crop: a pointer offset on CUDA, a handle with an offset on OpenCL); kept while the parent's
  // allocation and the offset stay the same.
  kilnrt_status crop_of(const DeviceBuffer &parent, int64_t offset);
  kilnrt_status upload();    // host -> device
  kilnrt_status download();  // device -> host
  void release();
  uint64_t device() const { return buf.device; }
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { release(); }
};

}  // namespace kilnrt
