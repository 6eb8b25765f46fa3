// libFuzzer targets for the files users hand a compiled model: safetensors (KILN_FUZZ_SAFETENSORS)
// and .npy (KILN_FUZZ_NPY). Each input is written to an in-memory file and read with the
// runtime's own reader; every tensor the reader accepts is touched end to end, so a bad offset
// or size shows up as an ASan report.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "kilnrt/api.h"

static std::string memfile(const uint8_t *data, size_t size) {
  static int fd = memfd_create("kiln_fuzz", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  return "/proc/self/fd/" + std::to_string(fd);
}

static volatile uint8_t g_sink;
static void touch(const kilnrt_tensor &t, size_t esize) {
  const uint8_t *p = (const uint8_t *)t.data;
  size_t n = (size_t)kilnrt_tensor_numel(&t) * esize;
  for (size_t i = 0; i < n; ++i) g_sink ^= p[i];
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = memfile(data, size);
#ifdef KILN_FUZZ_SAFETENSORS
  kilnrt_weights *w;
  if (kilnrt_weights_open(path.c_str(), &w) == KILNRT_OK) {
    for (int i = 0; i < kilnrt_weights_count(w); ++i) {
      const char *name;
      kilnrt_tensor t;
      if (kilnrt_weights_get(w, i, &name, &t) == KILNRT_OK) touch(t, t.dtype == KILN_OTHER ? 1 : t.dtype == KILN_F16 || t.dtype == KILN_BF16 ? 2 : 4);
    }
    kilnrt_weights_close(w);
  }
#else
  kilnrt_tensor t;
  if (kilnrt_npy_read(path.c_str(), &t) == KILNRT_OK) {
    touch(t, 4);
    kilnrt_tensor_free(&t);
  }
#endif
  return 0;
}
