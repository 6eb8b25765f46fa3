// steady_state: a compiled example run twice in one process, its weights loaded from a
// safetensors file as users load them; the second run of every entry must take no minor page
// fault (getrusage) and make no allocation above 4 KiB (this program's malloc family counts
// them); a second run that is not clean gets a third, which must be (see below). Untimed. Built once per example, linked with that example's model library.
//
//   steady_<example> [WORK_DIR]     exit 0 and one line per entry, or 1 naming what allocated
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kilnrt/api.h"

extern "C" const kiln_model_info KILN_STEADY_MODEL;

// ---- counting allocator: this executable's malloc family wraps glibc's, so every allocation
// of the process (the runtime's, libstdc++'s, Halide's scratch pool's) passes here.
extern "C" {
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void __libc_free(void *);
}
static std::atomic<bool> g_counting{false};
static std::atomic<long> g_large{0};
static std::atomic<size_t> g_largest{0};
static std::atomic<void *> g_caller{nullptr};  // the code that made the largest one
#define KILN_COUNT_ALLOCATION(n) count_from(n, __builtin_return_address(0))
static void count_from(size_t n, void *caller) {
  if (g_counting.load(std::memory_order_relaxed) && n > 4096) {
    g_large++;
    if (n >= g_largest) g_caller = caller;
    size_t l = g_largest;
    while (n > l && !g_largest.compare_exchange_weak(l, n)) {
    }
  }
}
extern "C" void *malloc(size_t n) {
  KILN_COUNT_ALLOCATION(n);
  return __libc_malloc(n);
}
extern "C" void *calloc(size_t a, size_t b) {
  KILN_COUNT_ALLOCATION(a * b);
  return __libc_calloc(a, b);
}
extern "C" void *realloc(void *p, size_t n) {
  KILN_COUNT_ALLOCATION(n);
  return __libc_realloc(p, n);
}
extern "C" void *memalign(size_t al, size_t n) {
  KILN_COUNT_ALLOCATION(n);
  return __libc_memalign(al, n);
}
extern "C" void *aligned_alloc(size_t al, size_t n) {
  KILN_COUNT_ALLOCATION(n);
  return __libc_memalign(al, n);
}
extern "C" int posix_memalign(void **out, size_t al, size_t n) {
  KILN_COUNT_ALLOCATION(n);
  *out = __libc_memalign(al, n);
  return *out ? 0 : 12;  // ENOMEM
}
extern "C" void *valloc(size_t n) {
  KILN_COUNT_ALLOCATION(n);
  return __libc_memalign(4096, n);
}
extern "C" void free(void *p) { __libc_free(p); }

static void check(kilnrt_status st, const char *what) {
  if (st != KILNRT_OK) {
    fprintf(stderr, "steady_state: %s: %s\n", what, kilnrt_last_error());
    exit(2);
  }
}

static long minor_faults() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

int main(int argc, char **argv) {
  const kiln_model_info &m = KILN_STEADY_MODEL;
  std::string dir = argc > 1 ? argv[1] : "/tmp";
  std::string file = dir + "/steady_" + m.name + "_" + std::to_string(getpid()) + ".safetensors";
  kilnrt_threads_set(2);
  {  // weights to a file, as a user has them
    kilnrt_session *w;
    check(kilnrt_session_create(&m, &w), "session");
    check(kilnrt_session_random_weights(w, 7), "random weights");
    check(kilnrt_session_save_weights(w, file.c_str()), "save weights");
    kilnrt_session_destroy(w);
  }
  kilnrt_session *s;
  check(kilnrt_session_create(&m, &s), "session");
  check(kilnrt_session_load_weights(s, file.c_str()), "load weights");
  int failures = 0;
  for (int e = 0; e < m.n_entries; ++e) {
    const kiln_entry_info &en = m.entries[e];
    // Inputs: each length at min(its bound, 24); ids within their range; `past`-like inputs
    // (ids whose range is a length) small, so a decode step has room.
    for (int k = 0; k < en.n_inputs; ++k) {
      const kiln_tensor_info &t = m.io[en.inputs[k]];
      kilnrt_tensor x{};
      x.dtype = (kiln_dtype)t.dtype;
      x.rank = t.rank;
      int64_t n = 1;
      for (int d = 0; d < t.rank; ++d) {
        x.shape[d] = t.dims[d].sym >= 0 ? std::min<int64_t>(24, m.sym_max[t.dims[d].sym]) : t.dims[d].size;
        n *= x.shape[d];
      }
      std::vector<int32_t> ids((size_t)n);
      std::vector<float> f((size_t)n);
      for (int64_t i = 0; i < n; ++i) {
        int64_t range = t.max_value > 0 ? t.max_value : 1;
        if (std::string(t.name) == "past") range = std::min<int64_t>(range, 5);
        ids[i] = (int32_t)((i * 7 + 3) % range);
        f[i] = 0.01f * (float)((i * 13) % 17) - 0.08f;
      }
      x.data = t.dtype == KILN_I32 ? (void *)ids.data() : (void *)f.data();
      check(kilnrt_session_set_input(s, t.name, &x), t.name);
    }
    check(kilnrt_session_run(s, en.name), en.name);  // the first run: arena, scratch, threads
    // The second run must be clean. Which worker runs which task varies from run to run, so a
    // block or stack page that only a rarer overlap of tasks needs can first be touched later:
    // such a one-off shows in one run, while an allocation the run itself makes shows in every
    // run. So a second run that is not clean gets a third, which must be.
    bool clean = false;
    for (int attempt = 2; attempt <= 3 && !clean; ++attempt) {
      long faults = minor_faults();
      g_large = 0;
      g_largest = 0;
      g_counting = true;
      kilnrt_status st = kilnrt_session_run(s, en.name);
      g_counting = false;
      faults = minor_faults() - faults;
      check(st, en.name);
      long large = g_large;
      printf("%s/%s: run %d: %ld minor page faults, %ld allocations over 4 KiB", m.name, en.name, attempt, faults, large);
      if (large) {
        Dl_info info{};
        dladdr(g_caller.load(), &info);
        printf(" (the largest %zu bytes, from %s+0x%zx %s)", (size_t)g_largest, info.dli_fname ? info.dli_fname : "?", (size_t)((char *)g_caller.load() - (char *)info.dli_fbase), info.dli_sname ? info.dli_sname : "");
      }
      printf("\n");
      clean = !faults && !large;
    }
    if (!clean) ++failures;
  }
  kilnrt_session_destroy(s);
  unlink(file.c_str());
  if (failures) fprintf(stderr, "steady_state: %d entr%s of %s allocated in a steady-state run\n", failures,
                        failures > 1 ? "ies" : "y", m.name);
  return failures ? 1 : 0;
}
