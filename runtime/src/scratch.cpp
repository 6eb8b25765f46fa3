// scratch.cpp - the memory Halide kernels allocate while they run (a task's panel, a score
// strip, a root buffer of a kernel's own), served from blocks kilnrt owns and keeps.
//
// Without it every such allocation goes to malloc and is freed when the kernel returns; glibc
// serves the large ones with a fresh mmap each time, which the kernel zero-fills again on first
// touch: a steady-state run then takes tens of thousands of minor page faults. Here a freed block
// goes back to a free list of its size (rounded up to 4 KiB pages above 4 KiB, to 128 bytes
// below) and the next request of that size takes it: after the first run at a given length every
// kernel's scratch is memory that was already touched, and a run makes no allocation of its own.
// The blocks are kept until the process ends (kilnrt_scratch_trim returns the idle ones).
// Installed into the Halide runtime by the first session (halide_set_custom_malloc).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <chrono>
#include <thread>
#include <mutex>
#include <vector>

#include "internal.h"

extern "C" {
typedef void *(*kiln_halide_malloc_t)(void *, size_t);
typedef void (*kiln_halide_free_t)(void *, void *);
__attribute__((weak)) kiln_halide_malloc_t halide_set_custom_malloc(kiln_halide_malloc_t);
__attribute__((weak)) kiln_halide_free_t halide_set_custom_free(kiln_halide_free_t);
typedef int (*kiln_halide_task_t)(void *, int, uint8_t *);
__attribute__((weak)) int halide_do_par_for(void *, kiln_halide_task_t, int, int, uint8_t *);
}

namespace {
// Halide's kernels assume the alignment its own allocator gives (up to 128 bytes for its widest
// vector types); every block starts on a 128-byte boundary.
constexpr size_t kAlign = 128;
// Blocks up to this size are per-task scratch (a panel, a strip): made for every thread at once.
constexpr size_t kTaskSized = (size_t)1 << 20;
// Blocks up to this size double in number on a miss (a few tens of KiB each).
constexpr size_t kSmallTaskSized = (size_t)64 << 10;

struct Pool {
  std::mutex mu;
  int threads = (int)std::max(1u, std::thread::hardware_concurrency());
  std::map<size_t, int> made;  // blocks ever made, by rounded size
  std::map<size_t, std::vector<void *>> free_blocks;  // by rounded size
  std::map<void *, size_t> size_of;                   // every block handed out or kept
  kilnrt_scratch_stats stats{};
};
Pool &pool() {
  static Pool *p = new Pool;  // never destroyed: kernels may run during static destruction
  return *p;
}

size_t rounded(size_t n) {
  if (n <= 4096) return (n + kAlign - 1) / kAlign * kAlign;  // aligned_alloc: a multiple of the alignment
  return (n + 4095) / 4096 * 4096;
}

void *scratch_malloc(void *, size_t n) {
  size_t r = rounded(n ? n : 1);
  Pool &p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  void *b = nullptr;
  auto it = p.free_blocks.find(r);
  if (it != p.free_blocks.end() && !it->second.empty()) {
    b = it->second.back();
    it->second.pop_back();
    p.stats.idle_bytes -= (int64_t)r;
  } else {
    // A miss: blocks for every thread at once when they are task-sized (each parallel
    // task may ask for one at the same moment, and which tasks overlap varies from run to run);
    // large blocks (a kernel's root buffer, made once per call) one at a time. Every new block
    // is touched now, so no later run takes its page faults.
    // (Two per thread at first, as a task may hold two blocks of one size; a later miss adds one
    // per thread, or, for small blocks, as many as there are: a task of a block attention kernel
    // holds its first key block's scores and exponentials beside the later blocks', and under
    // load one more per thread per miss still missed in the third run; doubling reaches what the
    // busiest run needs in a miss or two.)
    int want = r > kTaskSized         ? 1
               : p.made[r] == 0       ? 2 * p.threads
               : r <= kSmallTaskSized ? std::max(p.threads, p.made[r])
                                      : p.threads;
    for (int k = 0; k < want; ++k) {
      void *nb = aligned_alloc(kAlign, r);
      if (!nb) break;
      memset(nb, 0, r);
      p.size_of[nb] = r;
      p.made[r] += 1;
      p.stats.held_bytes += (int64_t)r;
      p.stats.blocks_allocated += 1;
      if (!b) {
        b = nb;
      } else {
        p.free_blocks[r].push_back(nb);
        p.stats.idle_bytes += (int64_t)r;
      }
    }
    if (!b) return nullptr;
  }
  p.stats.in_use_bytes += (int64_t)r;
  if (p.stats.in_use_bytes > p.stats.peak_in_use_bytes) p.stats.peak_in_use_bytes = p.stats.in_use_bytes;
  p.stats.requests += 1;
  return b;
}

void scratch_free(void *, void *b) {
  if (!b) return;
  Pool &p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  auto it = p.size_of.find(b);
  if (it == p.size_of.end()) {  // not ours (allocated before the pool was installed)
    free(b);
    return;
  }
  p.free_blocks[it->second].push_back(b);
  p.stats.in_use_bytes -= (int64_t)it->second;
  p.stats.idle_bytes += (int64_t)it->second;
}
}  // namespace

namespace {
// The kernels keep small fixed-size buffers (register blocks, a task's accumulators) on the
// stack of whichever thread runs a task, and which worker runs which task varies from run to
// run: a worker would otherwise fault in a stack page the first time it happens to run the
// deepest task. So every worker touches the top of its stack once, up front: tasks that each
// touch kStackTouch bytes and wait a little, so that every thread takes some.
constexpr size_t kStackTouch = (size_t)1 << 20;
__attribute__((noinline)) int touch_stack(void *, int, uint8_t *) {
  volatile char *buf = (volatile char *)__builtin_alloca(kStackTouch);
  for (size_t i = 0; i < kStackTouch; i += 4096) buf[i] = 0;
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  return 0;
}
}  // namespace

namespace kilnrt {
void scratch_prefault_stacks() {
  static int done_for = 0;  // the thread count the stacks were touched for
  int threads;
  {
    Pool &p = pool();
    std::lock_guard<std::mutex> l(p.mu);
    if (p.threads == done_for) return;
    threads = done_for = p.threads;
  }
  if (halide_do_par_for && threads > 1) halide_do_par_for(nullptr, touch_stack, 0, 4 * threads, nullptr);
}

void parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx) {
  struct Closure {
    void (*fn)(void *, int);
    void *ctx;
  } c{fn, ctx};
  auto task = [](void *, int i, uint8_t *closure) {
    Closure *cl = (Closure *)closure;
    cl->fn(cl->ctx, i);
    return 0;
  };
  if (halide_do_par_for && n > 1) halide_do_par_for(nullptr, task, 0, n, (uint8_t *)&c);
  else
    for (int i = 0; i < n; ++i) fn(ctx, i);
}

void scratch_threads(int n) {
  Pool &p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  if (n > 0) p.threads = n;
}

void scratch_install() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (halide_set_custom_malloc && halide_set_custom_free) {
      halide_set_custom_malloc(scratch_malloc);
      halide_set_custom_free(scratch_free);
    }
  });
}
}  // namespace kilnrt

extern "C" void kilnrt_scratch_get_stats(kilnrt_scratch_stats *out) {
  Pool &p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  *out = p.stats;
}

extern "C" void kilnrt_scratch_reset_peak(void) {
  Pool &p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  p.stats.peak_in_use_bytes = p.stats.in_use_bytes;
}

extern "C" void kilnrt_scratch_trim(void) {
  Pool &p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  for (auto &[size, blocks] : p.free_blocks) {
    for (void *b : blocks) {
      p.size_of.erase(b);
      free(b);
      p.stats.held_bytes -= (int64_t)size;
      p.stats.idle_bytes -= (int64_t)size;
    }
    blocks.clear();
  }
}
