// group.cpp - data parallel: the process group of an `mpirun -np P` run (Open MPI).
//
// A compiled model links no MPI library: under Open MPI's mpirun (OMPI_COMM_WORLD_SIZE set to
// more than 1) kilnrt_group_join loads libmpi.so.40 with dlopen and resolves the few functions
// and predefined handles it needs by name (Open MPI's ABI: MPI_COMM_WORLD is the address of
// ompi_mpi_comm_world, MPI_FLOAT of ompi_mpi_float, MPI_SUM of ompi_mpi_op_sum, MPI_IN_PLACE is
// (void *)1). Anywhere else the group is the process alone and nothing is loaded.
//
// kilnrt_kernel_all_reduce (kiln.all_reduce, one per gradient of a training step, as soon as the
// backward has it) scales the rank's gradient by its share of the batch, in its buffer, and
// starts summing it over the ranks in place (MPI_Iallreduce), then lets the sums already
// started progress (MPI_Test on the oldest) and returns: the backward's next kernels run while
// the sums go on. kilnrt_kernel_all_reduce_wait (kiln.all_reduce_wait, before the optimizer)
// waits for the sum in its buffer. Alone: nothing to do.
#include <HalideRuntime.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "internal.h"

namespace {
using Handle = void *;
struct Group {
  bool joined = false, mpi = false;
  int32_t rank = 0, size = 1;
  double share = 1.0;
  Handle comm = nullptr, f32 = nullptr, f64 = nullptr, sum = nullptr;
  int (*init)(int *, char ***) = nullptr;
  int (*finalize)() = nullptr;
  int (*commRank)(Handle, int *) = nullptr;
  int (*commSize)(Handle, int *) = nullptr;
  int (*allreduce)(const void *, void *, int, Handle, Handle, Handle) = nullptr;
  int (*iallreduce)(const void *, void *, int, Handle, Handle, Handle, Handle *) = nullptr;
  int (*wait)(Handle *, void *) = nullptr;
  int (*test)(Handle *, int *, void *) = nullptr;
  // The sums started and not yet waited for: the buffer, its requests (one per piece), and
  // whether MPI_Test found them complete.
  struct Pending {
    const void *buffer;
    std::vector<Handle> requests;
    bool done = false;
  };
  std::vector<Pending> pending;
};
Group g_group;
constexpr int64_t kPiece = INT_MAX / 2;  // an MPI count is an int
void *const kInPlace = (void *)1;  // Open MPI's MPI_IN_PLACE

// MPI_Allreduce of n values in place, in pieces whose count fits an int.
int allreduce(void *data, int64_t n, size_t elem, Handle type) {
  for (int64_t at = 0; at < n;) {
    int count = (int)std::min<int64_t>(n - at, kPiece);
    if (int rc = g_group.allreduce(kInPlace, (char *)data + at * elem, count, type, g_group.sum, g_group.comm)) return rc;
    at += count;
  }
  return 0;
}
}  // namespace

extern "C" kilnrt_status kilnrt_group_join(int32_t *rank, int32_t *size) {
  Group &g = g_group;
  if (!g.joined) {
    const char *ompi = getenv("OMPI_COMM_WORLD_SIZE");
    if (ompi && atoi(ompi) > 1) {
      void *lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);  // global: Open MPI's plugins resolve against it
      if (!lib)
        return kilnrt::user_error(std::string("this process runs under mpirun (OMPI_COMM_WORLD_SIZE=") + ompi +
                                  ") but Open MPI's library could not be loaded: " + dlerror() +
                                  " (install Open MPI: apt install openmpi-bin)");
      auto sym = [&](const char *name) { return dlsym(lib, name); };
      g.init = (int (*)(int *, char ***))sym("MPI_Init");
      g.finalize = (int (*)())sym("MPI_Finalize");
      g.commRank = (int (*)(Handle, int *))sym("MPI_Comm_rank");
      g.commSize = (int (*)(Handle, int *))sym("MPI_Comm_size");
      g.allreduce = (int (*)(const void *, void *, int, Handle, Handle, Handle))sym("MPI_Allreduce");
      g.iallreduce = (int (*)(const void *, void *, int, Handle, Handle, Handle, Handle *))sym("MPI_Iallreduce");
      g.wait = (int (*)(Handle *, void *))sym("MPI_Wait");
      g.test = (int (*)(Handle *, int *, void *))sym("MPI_Test");
      g.comm = sym("ompi_mpi_comm_world"), g.f32 = sym("ompi_mpi_float"), g.f64 = sym("ompi_mpi_double");
      g.sum = sym("ompi_mpi_op_sum");
      if (!g.init || !g.finalize || !g.commRank || !g.commSize || !g.allreduce || !g.iallreduce || !g.wait || !g.test ||
          !g.comm || !g.f32 || !g.f64 || !g.sum)
        return kilnrt::user_error("libmpi.so.40 lacks MPI functions or Open MPI handles kiln uses (MPI_Allreduce, "
                                  "ompi_mpi_comm_world, ...): kiln supports Open MPI's library only");
      int r = 0, n = 1;
      if (g.init(nullptr, nullptr) || g.commRank(g.comm, &r) || g.commSize(g.comm, &n))
        return kilnrt::user_error("MPI_Init failed under mpirun");
      g.mpi = true, g.rank = r, g.size = n;
    }
    g.joined = true;
  }
  if (rank) *rank = g.rank;
  if (size) *size = g.size;
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_group_set_share(double share) {
  if (!(share >= 0 && share <= 1)) return kilnrt::user_error("a rank's share of the batch must be in [0, 1], got " + std::to_string(share));
  g_group.share = share;
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_group_sum(double *values, int64_t n) {
  if (!g_group.mpi || n == 0) return KILNRT_OK;
  if (int rc = allreduce(values, n, sizeof(double), g_group.f64)) return kilnrt::internal_error("MPI_Allreduce failed: " + std::to_string(rc));
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_group_leave(void) {
  if (g_group.mpi) {
    g_group.mpi = false;
    if (g_group.finalize()) return kilnrt::internal_error("MPI_Finalize failed");
  }
  return KILNRT_OK;
}

namespace {
// The elements of two dense views of one shape (kiln-fold-views folds no view into a runtime
// kernel), or -1.
int64_t denseElements(const halide_buffer_t *in, const halide_buffer_t *out) {
  if (in->dimensions != out->dimensions) return -1;
  int64_t n = 1;
  for (int d = 0; d < in->dimensions; ++d) {
    if (in->dim[d].extent != out->dim[d].extent || in->dim[d].stride != n || out->dim[d].stride != n) return -1;
    n *= in->dim[d].extent;
  }
  return n;
}
}  // namespace

// kiln.all_reduce, in place (in and out are one buffer): Σ over the ranks of share · in, started.
extern "C" int32_t kilnrt_kernel_all_reduce(halide_buffer_t *in, halide_buffer_t *out) {
  Group &g = g_group;
  int64_t n = denseElements(in, out);
  if (n < 0 || in->host != out->host) return 1;
  if (!g.mpi) return 0;
  float *dst = (float *)out->host;
  const float share = (float)g.share;
  for (int64_t i = 0; i < n; ++i) dst[i] *= share;
  Group::Pending p{dst, {}};
  for (int64_t at = 0; at < n; at += kPiece) {
    Handle req = nullptr;
    if (g.iallreduce(kInPlace, dst + at, (int)std::min<int64_t>(n - at, kPiece), g.f32, g.sum, g.comm, &req)) return 2;
    p.requests.push_back(req);
  }
  g.pending.push_back(std::move(p));
  for (Group::Pending &q : g.pending) {  // progress: the oldest sum not yet complete
    if (q.done) continue;
    int flag = 1;
    for (Handle &r : q.requests) {
      int one = 0;
      if (g.test(&r, &one, nullptr)) return 2;  // a completed request becomes MPI_REQUEST_NULL
      flag &= one;
    }
    q.done = flag;
    break;
  }
  return 0;
}

// kiln.all_reduce_wait: in and out are the buffer a kiln.all_reduce started summing into.
extern "C" int32_t kilnrt_kernel_all_reduce_wait(halide_buffer_t *in, halide_buffer_t *out) {
  Group &g = g_group;
  if (denseElements(in, out) < 0 || in->host != out->host) return 1;
  if (!g.mpi) return 0;
  for (size_t k = 0; k < g.pending.size(); ++k) {
    if (g.pending[k].buffer != in->host) continue;
    for (Handle &r : g.pending[k].requests)
      if (g.wait(&r, nullptr)) return 2;  // MPI_STATUS_IGNORE is null in Open MPI
    g.pending.erase(g.pending.begin() + (ptrdiff_t)k);
    return 0;
  }
  return 3;  // no sum was started into this buffer
}
