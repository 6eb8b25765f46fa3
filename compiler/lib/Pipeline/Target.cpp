// Target.cpp - the named targets and the host's.
#include "kiln/Pipeline/Target.h"

namespace kiln {

const char *gpuApiName(GpuApi api) {
  switch (api) {
    case GpuApi::None: return "";
    case GpuApi::Cuda: return "cuda";
    case GpuApi::OpenCL: return "opencl";
  }
  return "";
}

std::optional<TargetInfo> resolveTarget(const std::string &name) {
  TargetInfo avx512{"x86-64-avx512", "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41", 16,
                    "sse4.1,avx,avx2,fma,f16c,avx512f,avx512cd,avx512bw,avx512dq,avx512vl"};
  TargetInfo avx2{"x86-64-avx2", "x86-64-linux-avx-avx2-f16c-fma-sse41", 8, "sse4.1,avx,avx2,fma,f16c"};
  TargetInfo sse{"x86-64-sse41", "x86-64-linux-sse41", 4, "sse4.1"};
  // AVX-512 with BF16 dot products (Cooper Lake, Sapphire Rapids and later, Zen 4): only
  // kernels that use them (precision = bf16_dot) are generated with avx512_sapphirerapids.
  TargetInfo avx512bf16 = avx512;
  avx512bf16.name = "x86-64-avx512bf16";
  avx512bf16.bf16_dot = true;
  if (name == avx512.name) return avx512;
  if (name == avx512bf16.name) return avx512bf16;
  if (name == avx2.name) return avx2;
  if (name == sse.name) return sse;
  if (name == "cuda" || name == "opencl") {  // the host CPU for the orchestration and host kernels, the GPU for the rest
    auto cpu = resolveTarget("host");
    cpu->name += "-" + name;
    cpu->halide += name == "cuda" ? "-cuda-cuda_capability_80" : "-opencl";
    cpu->gpu = name == "cuda" ? GpuApi::Cuda : GpuApi::OpenCL;
    return cpu;
  }
  if (name == "host") {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd")) {
      avx512.bf16_dot = __builtin_cpu_supports("avx512bf16");  // same name: f32 kernels are the same
      return avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return avx2;
    return sse;
  }
  return std::nullopt;
}

}  // namespace kiln
