// kilnrt's device-resident buffers for models compiled with --target=cuda|opencl --gpu-buffers=device:
// parameters uploaded once, inputs uploaded and outputs downloaded once per run, states and the
// arena kept on the device. Allocations and copies go through the Halide runtime's device API
// (linked into GPU models; weak references here), so they share the kernels' context.
#include "device.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "internal.h"

// The Halide runtime's device API: present in executables of GPU models only.
#pragma weak halide_device_malloc
#pragma weak halide_device_free
#pragma weak halide_copy_to_device
#pragma weak halide_copy_to_host
#pragma weak halide_device_crop
#pragma weak halide_device_release_crop
#pragma weak halide_cuda_device_interface
#pragma weak halide_opencl_device_interface
extern "C" const struct halide_device_interface_t *halide_cuda_device_interface();
extern "C" const struct halide_device_interface_t *halide_opencl_device_interface();

namespace kilnrt {

const halide_device_interface_t *device_interface(int32_t gpu_api) {
  switch (gpu_api) {
    case KILN_GPU_CUDA: return halide_cuda_device_interface ? halide_cuda_device_interface() : nullptr;
    case KILN_GPU_OPENCL: return halide_opencl_device_interface ? halide_opencl_device_interface() : nullptr;
    default: return nullptr;
  }
}

static kilnrt_status device_error(const char *what, int code) {
  return internal_error(std::string("device ") + what + " failed (Halide runtime error " + std::to_string(code) + ")");
}

kilnrt_status DeviceBuffer::reserve(void *host_ptr, int64_t nbytes) {
  if (!halide_device_malloc || !iface)
    return internal_error("device-resident buffers need the GPU runtime, which this executable lacks");
  int64_t words = (nbytes + 3) / 4;
  if (words >= ((int64_t)1 << 31)) return user_error("a device buffer of " + std::to_string(nbytes) + " bytes is too large");
  if (buf.device && words <= capacity) {  // reused: the allocation is large enough
    buf.host = (uint8_t *)host_ptr;
    dim.extent = (int32_t)std::max<int64_t>(words, 1);
    return KILNRT_OK;
  }
  release();
  dim = halide_dimension_t{0, (int32_t)std::max<int64_t>(words, 1), 1, 0};
  buf = halide_buffer_t{};
  buf.host = (uint8_t *)host_ptr;
  buf.type = halide_type_t(halide_type_float, 32, 1);
  buf.dimensions = 1;
  buf.dim = &dim;
  if (int rc = halide_device_malloc(nullptr, &buf, iface)) return device_error("allocation", rc);
  capacity = dim.extent;
  static uint64_t allocations = 0;
  alloc_id = ++allocations;
  return KILNRT_OK;
}

kilnrt_status DeviceBuffer::crop_of(const DeviceBuffer &parent, int64_t offset) {
  if (buf.device && cropped && crop_parent == parent.alloc_id && crop_offset == offset) return KILNRT_OK;
  release();
  if (!halide_device_crop || !parent.buf.device) return internal_error("a device crop needs an allocated parent buffer");
  iface = parent.iface;
  dim = halide_dimension_t{(int32_t)(offset / 4), (int32_t)std::max<int64_t>(parent.dim.extent - offset / 4, 1), 1, 0};
  buf = halide_buffer_t{};
  buf.type = parent.buf.type;  // no host pointer: only the device handle is used
  buf.dimensions = 1;
  buf.dim = &dim;
  if (int rc = halide_device_crop(nullptr, &parent.buf, &buf)) return device_error("crop", rc);
  cropped = true;
  crop_parent = parent.alloc_id;
  crop_offset = offset;
  return KILNRT_OK;
}

kilnrt_status DeviceBuffer::upload() {
  buf.flags = halide_buffer_flag_host_dirty;
  if (int rc = halide_copy_to_device(nullptr, &buf, iface)) return device_error("upload", rc);
  return KILNRT_OK;
}

kilnrt_status DeviceBuffer::download() {
  buf.flags = halide_buffer_flag_device_dirty;
  if (int rc = halide_copy_to_host(nullptr, &buf)) return device_error("download", rc);
  return KILNRT_OK;
}

void DeviceBuffer::release() {
  if (buf.device && cropped && halide_device_release_crop) halide_device_release_crop(nullptr, &buf);
  else if (buf.device && halide_device_free) halide_device_free(nullptr, &buf);
  buf.device = 0;
  capacity = 0;
  alloc_id = 0;
  cropped = false;
}

}  // namespace kilnrt
