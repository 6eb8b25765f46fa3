// device.h - one device allocation mirroring a host buffer (models with device-resident buffers).
#pragma once
#include <HalideRuntime.h>

#include <cstdint>

#include "kilnrt/api.h"

namespace kilnrt {

struct DeviceBuffer {
  halide_buffer_t buf{};  // 1-D f32 view of the bytes; buf.device is the CUdeviceptr
  halide_dimension_t dim{};
  int64_t capacity = 0;  // f32 words allocated
  // Allocates (or keeps, when large enough) device memory for `bytes`, mirroring `host`.
  kilnrt_status reserve(void *host, int64_t bytes);
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
