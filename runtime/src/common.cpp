// kilnrt common: error reporting, dtypes, timing, CPU feature checks.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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
size_t dtype_size(kiln_dtype t) { return t == KILN_F32 || t == KILN_I32 ? 4 : t == KILN_F16 || t == KILN_BF16 ? 2 : 0; }
const char *dtype_name(kiln_dtype t) {
  return t == KILN_F32 ? "f32" : t == KILN_I32 ? "i32" : t == KILN_F16 ? "f16" : t == KILN_BF16 ? "bf16" : t == KILN_Q8_0 ? "Q8_0"
         : t == KILN_Q4_0 ? "Q4_0" : t == KILN_Q4_1 ? "Q4_1" : "an unsupported dtype";
}
bool is_dir(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool path_exists(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}
kilnrt_status read_file(const std::string &path, const std::string &what, std::string &out) {
  if (is_dir(path)) return user_error(what + " '" + path + "' is a folder");
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) return user_error(what + " '" + path + "': cannot open: " + strerror(errno));
  out.clear();
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  bool bad = ferror(f);
  fclose(f);
  if (bad) return user_error(what + " '" + path + "': read error");
  return KILNRT_OK;
}

std::string shape_str(const int64_t *shape, int rank) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < rank; ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

int64_t checked_numel(const int64_t *shape, int rank, int64_t limit) {
  for (int i = 0; i < rank; ++i)
    if (shape[i] < 0) return -1;
  for (int i = 0; i < rank; ++i)
    if (shape[i] == 0) return 0;  // an empty array, whatever its other dims
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    if (__builtin_mul_overflow(n, shape[i], &n) || n > limit) return -1;
  return n;
}

kilnrt_status AtomicFile::open(const std::string &path, const std::string &what) {
  path_ = path;
  what_ = what;
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  tmp_ = dir + "." + base + ".kiln-tmp-" + std::to_string(getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    tmp_.clear();
    return user_error("cannot write " + what_ + " '" + path_ + "': " + strerror(errno));
  }
  return KILNRT_OK;
}

kilnrt_status AtomicFile::failed(const std::string &why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) unlink(tmp_.c_str());
  tmp_.clear();
  return user_error("error writing " + what_ + " '" + path_ + "': " + why + " (the file was left as it was)");
}

kilnrt_status AtomicFile::write(const void *data, size_t bytes) {
  if (fd_ < 0) return user_error("internal: " + what_ + " '" + path_ + "' is not open");
  const char *p = (const char *)data;
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed(n < 0 ? strerror(errno) : "no progress");
    p += n;
    bytes -= (size_t)n;
  }
  return KILNRT_OK;
}

kilnrt_status AtomicFile::commit() {
  if (fd_ < 0) return user_error("internal: " + what_ + " '" + path_ + "' is not open");
  if (fsync(fd_) != 0 && errno != EINVAL) return failed(strerror(errno));
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return failed(strerror(errno));
  if (rename(tmp_.c_str(), path_.c_str()) != 0) return failed(std::string("cannot rename the finished file: ") + strerror(errno));
  tmp_.clear();
  // The rename itself made durable: the folder's entry synced (a crash right after a checkpoint
  // could otherwise leave the folder pointing at the previous file).
  size_t slash = path_.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    fsync(dfd);  // best effort: some file systems refuse a directory fsync (EINVAL)
    ::close(dfd);
  }
  return KILNRT_OK;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) unlink(tmp_.c_str());
}
}  // namespace kilnrt

using namespace kilnrt;

extern "C" const char *kilnrt_last_error(void) { return g_last_error.c_str(); }

extern "C" int64_t kilnrt_tensor_numel(const kilnrt_tensor *t) {
  if (t->rank < 0 || t->rank > KILN_MAX_RANK) return -1;
  return checked_numel(t->shape, t->rank);
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
  KILN_FEATURE(avx512bf16)
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
