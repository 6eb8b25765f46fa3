// params.cpp - the layouts a parameter is kept in (transposed, in panels) and back, the float
// formats' conversions (f32, IEEE half, bfloat16), and the session's aligned storage.
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "session_state.h"

using namespace kilnrt;

// 64-byte aligned. (Transparent huge pages for the weights were tried: decode steps ran about
// 3% faster, but faulting the pages in cost a second of system time at load.)
Storage kilnrt::alloc64(size_t bytes) {
  return Storage((uint8_t *)aligned_alloc(64, (bytes + 63) / 64 * 64 + 64));
}
// A large working buffer (the arena, optimizer moments): 2 MiB aligned and advised to be kept in
// transparent huge pages, where the system allows them on request. The GEMMs of a training step
// walk rows 200 KB apart (a vocabulary-wide gradient) and arrays of hundreds of MB: with 4 KiB
// pages most of those rows were a TLB miss.
Storage kilnrt::allocLarge(size_t bytes) {
  constexpr size_t kHuge = 2u << 20;
  if (bytes < 16 * kHuge) return alloc64(bytes);
  size_t n = (bytes + kHuge - 1) / kHuge * kHuge;
  Storage st((uint8_t *)aligned_alloc(kHuge, n));
  if (st) madvise(st.get(), n, MADV_HUGEPAGE);  // advice: ignored where huge pages are off
  return st;
}

std::vector<std::unique_ptr<kilnrt::DeviceBuffer>> kilnrt::device_buffers(int n, const halide_device_interface_t *iface) {
  std::vector<std::unique_ptr<kilnrt::DeviceBuffer>> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(std::make_unique<kilnrt::DeviceBuffer>());
    v.back()->iface = iface;
  }
  return v;
}

int64_t kilnrt::param_numel(const kiln_tensor_info &p) {
  int64_t n = 1;
  for (int i = 0; i < p.rank; ++i) n *= p.dims[i].size;
  return n;
}

// A parameter's rank and shape in weights files: the [K, N] matrix of a parameter in panels,
// transposed back for a transposed one.
int kilnrt::param_file_shape(const kiln_tensor_info &p, int64_t *shape) {
  int rank = p.rank;
  for (int d = 0; d < p.rank; ++d) shape[d] = p.dims[d].size;
  if (is_quantized((kiln_dtype)p.dtype)) {  // bytes [rows, blocks, block bytes]: the file's [rows, blocks·32]
    shape[1] = p.dims[1].size * 32;
    return 2;
  }
  if (p.panel_cols > 0) rank = 2, shape[0] = p.dims[1].size, shape[1] = p.panel_cols;
  if (p.transposed && rank == 2) std::swap(shape[0], shape[1]);
  return rank;
}

// A transposed or panel parameter in the layout the model keeps, from its file's layout (made
// once, when weights are loaded or generated), and back (`to_file`, for saving). Panels (or row
// blocks of a transpose) are laid out in parallel, each reading and writing rows contiguously.
// T is the kept element: float, or uint16_t for a parameter kept in bfloat16.
template <typename T>
static Storage kept_layout(const kiln_tensor_info &p, const T *src, bool to_file) {
  int64_t shape[KILN_MAX_RANK] = {};  // relaid parameters are 2-D in files
  kilnrt::param_file_shape(p, shape);
  const int64_t K = p.transposed ? shape[1] : shape[0], N = p.transposed ? shape[0] : shape[1];
  Storage st = alloc64((size_t)(to_file ? K * N : param_numel(p)) * sizeof(T));
  T *dst = (T *)st.get();
  if (p.panel_cols <= 0) {  // transposed: [rows, cols] -> [cols, rows], in blocks of 64 x 64
    const int64_t rows = to_file ? K : N, cols = to_file ? N : K, b = 64;
    kilnrt::parallel_for((int)((rows + b - 1) / b), [&](int rb) {
      for (int64_t c0 = 0; c0 < cols; c0 += b)
        for (int64_t r = rb * b; r < std::min(rows, rb * b + b); ++r)
          for (int64_t c = c0; c < std::min(cols, c0 + b); ++c) dst[c * rows + r] = src[r * cols + c];
    });
    return st;
  }
  const int64_t w = p.dims[2].size;  // panels [ceil(N / w), K, w]
  kilnrt::parallel_for((int)p.dims[0].size, [&](int pn) {
    const int64_t c0 = pn * w, cols = std::min(w, N - c0), at = pn * K * w;
    if (!to_file) {
      if (cols < w)  // the last panel's padding
        for (int64_t k = 0; k < K; ++k) std::fill(dst + at + k * w + cols, dst + at + k * w + w, T(0));
      if (!p.transposed)  // file [K, N]: a row segment per k
        for (int64_t k = 0; k < K; ++k) std::copy(src + k * N + c0, src + k * N + c0 + cols, dst + at + k * w);
      else  // file [N, K]: a file row per column
        for (int64_t l = 0; l < cols; ++l)
          for (int64_t k = 0; k < K; ++k) dst[at + k * w + l] = src[(c0 + l) * K + k];
    } else if (!p.transposed) {
      for (int64_t k = 0; k < K; ++k) std::copy(src + at + k * w, src + at + k * w + cols, dst + k * N + c0);
    } else {
      for (int64_t l = 0; l < cols; ++l)
        for (int64_t k = 0; k < K; ++k) dst[(c0 + l) * K + k] = src[at + k * w + l];
    }
  });
  return st;
}
bool kilnrt::relaid(const kiln_tensor_info &p) { return p.transposed || p.panel_cols > 0; }
// A parameter in the kept layout, from its f32 (or, kept in bfloat16, its bf16) values in the file's.
Storage kilnrt::kept_layout(const kiln_tensor_info &p, const void *src, bool to_file) {
  return p.dtype == KILN_BF16 ? kept_layout(p, (const uint16_t *)src, to_file) : kept_layout(p, (const float *)src, to_file);
}

std::string kilnrt::hex16(uint16_t v) {
  char b[8];
  snprintf(b, sizeof b, "%04x", v);
  return b;
}

// f32 to bfloat16, to nearest with ties to even (as the GEMMs round their operands); a NaN
// stays a (quiet) NaN.
void kilnrt::narrow_bf16(const float *in, uint16_t *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    memcpy(&u, &in[i], 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) out[i] = (uint16_t)((u >> 16) | 0x40);
    else out[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
}

// Drops the whole pages of [p, p + n), a tensor of the weights file's private, read-only
// mapping that the model no longer reads (it keeps a relaid copy): loading then never holds a
// checkpoint tensor and its copy at once. Safe for any mapped bytes: a later read of a dropped
// page faults it in again from the file.
void kilnrt::release_mapped(const void *p, size_t n) {
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + page - 1) / page * page,
                  b = ((uintptr_t)p + n) / page * page;
  if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

// The first non-finite value of n floats (by bit pattern: an all-ones exponent), or -1.
int64_t kilnrt::first_non_finite(const float *f, int64_t n) {
  const uint32_t *u = (const uint32_t *)f;
  for (int64_t i = 0; i < n; ++i)
    if ((u[i] & 0x7f800000u) == 0x7f800000u) return i;
  return -1;
}

// IEEE half and bfloat16 to f32, exactly (both are subsets of f32).
void kilnrt::widen_half(kiln_dtype dt, const uint16_t *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    if (dt == KILN_BF16) {
      bits = (uint32_t)in[i] << 16;
    } else {
      uint32_t h = in[i], sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
      if (e == 0x1F) bits = sign | 0x7F800000u | (m << 13);  // inf, nan
      else if (e) bits = sign | ((e + 112) << 23) | (m << 13);
      else if (!m) bits = sign;
      else {  // subnormal: normalize
        int shift = 0;
        while (!(m & 0x400)) m <<= 1, ++shift;
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((m & 0x3FF) << 13);
      }
    }
    memcpy(&out[i], &bits, 4);
  }
}
