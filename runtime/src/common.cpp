// kilnrt common: error reporting, dtypes, timing, CPU feature checks.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <vector>
#include "internal.h"

namespace kilnrt {
static thread_local std::string g_last_error;

kilnrt_status fail(kilnrt_status code, std::string message) {
  g_last_error = std::move(message);
  return code;
}
size_t dtype_size(kiln_dtype t) { return t == KILN_F32 || t == KILN_I32 ? 4 : 0; }
const char *dtype_name(kiln_dtype t) { return t == KILN_F32 ? "f32" : t == KILN_I32 ? "i32" : "an unsupported dtype"; }
std::string shape_str(const int64_t *shape, int rank) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < rank; ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}
}  // namespace kilnrt

using namespace kilnrt;

extern "C" const char *kilnrt_last_error(void) { return g_last_error.c_str(); }

extern "C" int64_t kilnrt_tensor_numel(const kilnrt_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; ++i) n *= t->shape[i];
  return n;
}

extern "C" int64_t kilnrt_time_now_ns(void) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// __builtin_cpu_supports needs a literal, so the names kiln may require are listed here.
static bool cpu_has(const std::string &f) {
  __builtin_cpu_init();
#define KILN_FEATURE(name) \
  if (f == #name) return __builtin_cpu_supports(#name);
  KILN_FEATURE(sse4.1)
  KILN_FEATURE(avx)
  KILN_FEATURE(avx2)
  KILN_FEATURE(fma)
  KILN_FEATURE(f16c)
  KILN_FEATURE(avx512f)
  KILN_FEATURE(avx512bw)
  KILN_FEATURE(avx512dq)
  KILN_FEATURE(avx512vl)
  KILN_FEATURE(avx512cd)
#undef KILN_FEATURE
  return false;
}

extern "C" kilnrt_status kilnrt_cpu_check(const char *features) {
  std::string missing;
  std::stringstream ss(features ? features : "");
  for (std::string f; std::getline(ss, f, ',');) {
    if (f.empty() || cpu_has(f)) continue;
    missing += (missing.empty() ? "" : ", ") + f;
  }
  if (!missing.empty())
    return user_error("this CPU lacks instruction set extensions the model was compiled for: " + missing +
                      " (recompile with a --target this CPU supports, e.g. --target=x86-64-avx2)");
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_cuda_check(void) {
  // Halide's CUDA runtime looks its driver symbols up in the process first, then opens
  // "libcuda.so", which only the toolkit's development stub provides: the driver's own
  // libcuda.so.1 is loaded here with RTLD_GLOBAL so that the first lookup finds it.
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    return user_error(std::string("no CUDA driver or device: the model was compiled with --target=cuda but the "
                                  "CUDA driver library cannot be loaded (") + dlerror() + ")");
  auto init = (int (*)(unsigned))dlsym(lib, "cuInit");
  auto count = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
  if (!init || !count) return user_error("no CUDA driver or device: libcuda.so.1 has no cuInit/cuDeviceGetCount");
  if (int rc = init(0))
    return user_error("no CUDA driver or device: cuInit failed with CUDA error " + std::to_string(rc));
  int n = 0;
  if (int rc = count(&n); rc || n < 1)
    return user_error("no CUDA driver or device: no CUDA device found" + (rc ? " (CUDA error " + std::to_string(rc) + ")" : std::string()));
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_opencl_check(void) {
  // As for CUDA: Halide's OpenCL runtime opens "libOpenCL.so" (a development symlink) unless
  // the process already has the API; the ICD loader's libOpenCL.so.1 is loaded globally here.
  void *lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    return user_error(std::string("no OpenCL platform or device: the model was compiled with --target=opencl but "
                                  "the OpenCL loader cannot be loaded (") + dlerror() + ")");
  using Platforms = int (*)(unsigned, void **, unsigned *);
  using Devices = int (*)(void *, uint64_t, unsigned, void **, unsigned *);
  auto platforms = (Platforms)dlsym(lib, "clGetPlatformIDs");
  auto devices = (Devices)dlsym(lib, "clGetDeviceIDs");
  if (!platforms || !devices) return user_error("no OpenCL platform or device: libOpenCL.so.1 has no clGetPlatformIDs/clGetDeviceIDs");
  void *ids[8];
  unsigned n = 0;
  if (platforms(8, ids, &n) != 0 || n == 0) return user_error("no OpenCL platform or device: no OpenCL platform found");
  for (unsigned i = 0; i < std::min(n, 8u); ++i) {
    unsigned nd = 0;
    if (devices(ids[i], 0xFFFFFFFFull /* CL_DEVICE_TYPE_ALL */, 0, nullptr, &nd) == 0 && nd > 0) return KILNRT_OK;
  }
  return user_error("no OpenCL platform or device: no OpenCL platform has a device");
}
