// reference.h - plain-loop reference implementations of kiln's ops, written for obviousness.
// Never shares code with the compiler or its kernels: it is the oracle the tests compare to.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ref {

// A row-major f32 tensor.
struct T {
  std::vector<int64_t> shape;
  std::vector<float> v;
  T() = default;
  explicit T(std::vector<int64_t> s) : shape(std::move(s)), v(numel(), 0.0f) {}
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  float &at(int64_t i, int64_t j) { return v[i * shape[1] + j]; }
  float at(int64_t i, int64_t j) const { return v[i * shape[1] + j]; }
};

T embedding(const T &table, const std::vector<int32_t> &ids);
T rows(const T &table, int64_t n);  // the first n rows (learned positions)
T sinusoid(int64_t n, int64_t d);
// x [L, in]; w [out, in] when out_in, else [in, out]; bias may be empty
T linear(const T &x, const T &w, const T &bias, bool out_in);
T add(const T &a, const T &b);
T relu(const T &x);
T gelu_erf(const T &x);
T gelu_tanh(const T &x);
T silu(const T &x);  // x / (1 + e^-x)
T layer_norm(const T &x, const T &g, const T &b, float eps);
T rms_norm(const T &x, const T &w, float eps);  // x / sqrt(mean(x²) + eps) · w per row
T softmax_rows(const T &x);
// q [Lq, H*hd], k, v [Lk, H*hd]: per-head softmax(q kᵀ scale [+ causal]) v, merged back.
// [L, H*hd] <-> [H, L, hd] (what split_heads and merge_heads do).
T to_heads(const T &x, int64_t heads);
T from_heads(const T &x);
// kv_heads (0: heads): grouped-query attention, query head h reading k and v head h / (heads / kv_heads).
T mha_core(const T &q, const T &k, const T &v, int64_t heads, bool causal, int64_t kv_heads = 0);
// Rotary positions on x [L, heads*hd]: row i at position past + i; pair j of each head turned by
// pos · theta^(-2j/hd) / scaling, the pairs (j, j + hd/2), or (2j, 2j + 1) when interleaved.
T rope(const T &x, int64_t heads, int64_t past, double theta, bool interleaved, double scaling = 1.0);

}  // namespace ref
