// Target.h - a compilation target: the Halide target string the kernels are generated for, the
// f32 vector width the schedules assume, the CPU features the executable checks for at
// start-up, and the GPU API with where the buffers live.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

// The GPU API the kernels run on: none (the CPU), CUDA (Halide's CUDA backend, sm_80 PTX) or
// OpenCL (any OpenCL device; the tests run the GPU schedules on PoCL's CPU device).
enum class GpuApi { None, Cuda, OpenCL };
const char *gpuApiName(GpuApi api);  // "", "cuda", "opencl"

struct TargetInfo {
  std::string name;    // x86-64-avx512, x86-64-avx2, x86-64-sse41; "<cpu>-cuda" / "<cpu>-opencl" with GPU kernels
  std::string halide;  // Halide target string (without no_runtime)
  int64_t vector_width = 16;
  std::string cpu_features;
  GpuApi gpu = GpuApi::None;
  bool bf16_dot = false;  // AVX-512 BF16 (vdpbf16ps): kiln-assign-precision's bf16 GEMMs may use it
  bool gpu_resident = false;  // GPU: buffers live on the device (--gpu-buffers=device), not copied per call
  bool isGpu() const { return gpu != GpuApi::None; }
};

// "host" picks the best of the named targets this CPU supports; "cuda" and
// "opencl" are that CPU plus the GPU API.
std::optional<TargetInfo> resolveTarget(const std::string &name);

}  // namespace kiln
