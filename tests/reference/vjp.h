// vjp.h - the plain reference of kiln's backward rules: each op's forward and its
// vector-Jacobian product in double precision, written for obviousness (loops, no tricks, no
// sharing with kiln). tests/train/vjp_test.cpp checks every VJP here against central finite
// differences of the forward beside it. Matrices are row-major vectors with their sizes passed.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace vjp {
using V = std::vector<double>;

// ---- linear: y [L, out] = x [L, in] · Wᵀ + b, W [out, in] (outIn) or x · W, W [in, out]; b may
// be empty ----
inline double &weightAt(V &w, int64_t o, int64_t k, int64_t in, int64_t out, bool outIn) {
  return outIn ? w[o * in + k] : w[k * out + o];
}
inline V linear(const V &x, const V &w, const V &b, int64_t L, int64_t in, int64_t out, bool outIn = true) {
  V y(L * out);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0 : b[o];
      for (int64_t k = 0; k < in; ++k) s += x[i * in + k] * (outIn ? w[o * in + k] : w[k * out + o]);
      y[i * out + o] = s;
    }
  return y;
}
struct LinearGrads {
  V dx, dw, db;
};
inline LinearGrads linearVjp(const V &dy, const V &x, V w, int64_t L, int64_t in, int64_t out, bool outIn = true) {
  LinearGrads g{V(L * in), V(out * in), V(out)};  // dw in w's layout
  for (int64_t i = 0; i < L; ++i)
    for (int64_t o = 0; o < out; ++o) {
      g.db[o] += dy[i * out + o];
      for (int64_t k = 0; k < in; ++k) {
        g.dx[i * in + k] += dy[i * out + o] * weightAt(w, o, k, in, out, outIn);
        weightAt(g.dw, o, k, in, out, outIn) += dy[i * out + o] * x[i * in + k];
      }
    }
  return g;
}

// ---- matmul: y [M, N] = a [M, K] · b [K, N] ----
inline V matmul(const V &a, const V &b, int64_t M, int64_t K, int64_t N) {
  V y(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) y[i * N + j] += a[i * K + k] * b[k * N + j];
  return y;
}
inline void matmulVjp(const V &dy, const V &a, const V &b, int64_t M, int64_t K, int64_t N, V &da, V &db) {
  da.assign(M * K, 0), db.assign(K * N, 0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) {
        da[i * K + k] += dy[i * N + j] * b[k * N + j];
        db[k * N + j] += dy[i * N + j] * a[i * K + k];
      }
}

// ---- elementwise: activations, a row-broadcast add and mul ----
enum class Act { Relu, GeluErf, GeluTanh, Silu };
inline double act(Act a, double x) {
  switch (a) {
    case Act::Relu: return x > 0 ? x : 0;
    case Act::GeluErf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Act::GeluTanh: return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Act::Silu: return x / (1 + std::exp(-x));
  }
  return 0;
}
inline double actDerivative(Act a, double x) {
  switch (a) {
    case Act::Relu: return x > 0 ? 1 : 0;
    case Act::GeluErf: return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    case Act::GeluTanh: {
      const double c = 0.7978845608028654, t = std::tanh(c * (x + 0.044715 * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
    }
    case Act::Silu: {
      double s = 1 / (1 + std::exp(-x));
      return s * (1 + x * (1 - s));
    }
  }
  return 0;
}
inline V activation(Act a, V x) {
  for (double &v : x) v = act(a, v);
  return x;
}
inline V activationVjp(Act a, const V &dy, const V &x) {
  V dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) dx[i] = dy[i] * actDerivative(a, x[i]);
  return dx;
}
// y = a + b and y = a ⊙ b with b [n] broadcast over the rows of a [L, n].
inline V addRows(V a, const V &b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i % b.size()];
  return a;
}
inline V mulRows(V a, const V &b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] *= b[i % b.size()];
  return a;
}
inline V sumRows(const V &dy, size_t n) {  // the broadcast operand's gradient: a sum over rows
  V g(n);
  for (size_t i = 0; i < dy.size(); ++i) g[i % n] += dy[i];
  return g;
}

// ---- softmax over each row of x [L, n] ----
inline V softmax(V x, int64_t L, int64_t n) {
  for (int64_t i = 0; i < L; ++i) {
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[i * n + j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[i * n + j] - mx);
    for (int64_t j = 0; j < n; ++j) x[i * n + j] = std::exp(x[i * n + j] - mx) / s;
  }
  return x;
}
inline V softmaxVjp(const V &dy, const V &y, int64_t L, int64_t n) {  // dx = y ⊙ (dy - Σ dy ⊙ y)
  V dx(L * n);
  for (int64_t i = 0; i < L; ++i) {
    double dot = 0;
    for (int64_t j = 0; j < n; ++j) dot += dy[i * n + j] * y[i * n + j];
    for (int64_t j = 0; j < n; ++j) dx[i * n + j] = y[i * n + j] * (dy[i * n + j] - dot);
  }
  return dx;
}

// ---- layer norm over each row of x [L, d], gain g and bias b [d] ----
inline V layerNorm(const V &x, const V &g, const V &b, int64_t L, int64_t d, double eps) {
  V y(L * d);
  for (int64_t i = 0; i < L; ++i) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < d; ++c) mu += x[i * d + c] / d;
    for (int64_t c = 0; c < d; ++c) var += (x[i * d + c] - mu) * (x[i * d + c] - mu) / d;
    for (int64_t c = 0; c < d; ++c) y[i * d + c] = (x[i * d + c] - mu) / std::sqrt(var + eps) * g[c] + b[c];
  }
  return y;
}
struct LayerNormGrads {
  V dx, dg, db;
};
inline LayerNormGrads layerNormVjp(const V &dy, const V &x, const V &g, int64_t L, int64_t d, double eps) {
  LayerNormGrads r{V(L * d), V(d), V(d)};
  for (int64_t i = 0; i < L; ++i) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < d; ++c) mu += x[i * d + c] / d;
    for (int64_t c = 0; c < d; ++c) var += (x[i * d + c] - mu) * (x[i * d + c] - mu) / d;
    const double rstd = 1 / std::sqrt(var + eps);
    // xhat = (x - mu) rstd; dxhat = dy g; dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
    double m1 = 0, m2 = 0;
    for (int64_t c = 0; c < d; ++c) {
      double xh = (x[i * d + c] - mu) * rstd, dxh = dy[i * d + c] * g[c];
      m1 += dxh / d, m2 += dxh * xh / d;
      r.dg[c] += dy[i * d + c] * xh;
      r.db[c] += dy[i * d + c];
    }
    for (int64_t c = 0; c < d; ++c) {
      double xh = (x[i * d + c] - mu) * rstd;
      r.dx[i * d + c] = rstd * (dy[i * d + c] * g[c] - m1 - xh * m2);
    }
  }
  return r;
}

// ---- embedding: y [L, d] = table [V, d] rows at ids; its gradient a scatter-add ----
inline V embedding(const V &table, const std::vector<int32_t> &ids, int64_t d) {
  V y(ids.size() * d);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < d; ++c) y[i * d + c] = table[ids[i] * d + c];
  return y;
}
inline V embeddingVjp(const V &dy, const std::vector<int32_t> &ids, int64_t vocab, int64_t d) {
  V g(vocab * d);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < d; ++c) g[ids[i] * d + c] += dy[i * d + c];
  return g;
}

// ---- transpose [M, N] -> [N, M]; concat of [L, a] and [L, b] along columns; slice of columns ----
inline V transpose(const V &x, int64_t M, int64_t N) {
  V y(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[j * M + i] = x[i * N + j];
  return y;
}
inline V concatCols(const V &a, const V &b, int64_t L, int64_t na, int64_t nb) {
  V y(L * (na + nb));
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t c = 0; c < na; ++c) y[i * (na + nb) + c] = a[i * na + c];
    for (int64_t c = 0; c < nb; ++c) y[i * (na + nb) + na + c] = b[i * nb + c];
  }
  return y;
}
inline V sliceCols(const V &x, int64_t L, int64_t n, int64_t from, int64_t to) {
  V y(L * (to - from));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t c = from; c < to; ++c) y[i * (to - from) + c - from] = x[i * n + c];
  return y;
}
inline V sliceColsVjp(const V &dy, int64_t L, int64_t n, int64_t from, int64_t to) {  // zeros around
  V dx(L * n);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t c = from; c < to; ++c) dx[i * n + c] = dy[i * (to - from) + c - from];
  return dx;
}

// ---- cross-entropy: the mean over targets >= 0 of -log softmax(logits)[target] ----
inline double crossEntropy(const V &logits, const std::vector<int32_t> &t, int64_t n) {
  double total = 0;
  int64_t count = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] < 0) continue;
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, logits[i * n + j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(logits[i * n + j] - mx);
    total += std::log(s) + mx - logits[i * n + t[i]];
    ++count;
  }
  return total / (double)count;
}
inline V crossEntropyVjp(double dloss, const V &logits, const std::vector<int32_t> &t, int64_t n) {
  int64_t count = 0;
  for (int32_t v : t) count += v >= 0;
  V p = softmax(logits, (int64_t)t.size(), n);
  for (size_t i = 0; i < t.size(); ++i)
    for (int64_t j = 0; j < n; ++j)
      p[i * n + j] = t[i] < 0 ? 0 : dloss * (p[i * n + j] - (j == t[i] ? 1 : 0)) / (double)count;
  return p;
}

// ---- attention, one head: o [Lq, D] = softmax(scale q kᵀ, causal: j <= i + Lk - Lq) v ----
inline V attentionProbs(const V &q, const V &k, int64_t Lq, int64_t Lk, int64_t D, double scale, bool causal) {
  V s(Lq * Lk);
  for (int64_t i = 0; i < Lq; ++i)
    for (int64_t j = 0; j < Lk; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < D; ++c) dot += q[i * D + c] * k[j * D + c];
      s[i * Lk + j] = causal && j > i + Lk - Lq ? -1e300 : scale * dot;
    }
  return softmax(s, Lq, Lk);
}
inline V attention(const V &q, const V &k, const V &v, int64_t Lq, int64_t Lk, int64_t D, int64_t Dv, double scale,
                   bool causal) {
  return matmul(attentionProbs(q, k, Lq, Lk, D, scale, causal), v, Lq, Lk, Dv);
}
// Heads side by side: q [Lq, H·hd], k and v [Lk, H·hd]; each head attends with scale 1/sqrt(hd).
inline V attentionHeads(const V &q, const V &k, const V &v, int64_t Lq, int64_t Lk, int64_t H, int64_t hd, bool causal) {
  const int64_t d = H * hd;
  V o(Lq * d);
  for (int64_t h = 0; h < H; ++h) {
    auto head = [&](const V &x, int64_t L) {
      V t(L * hd);
      for (int64_t i = 0; i < L; ++i)
        for (int64_t c = 0; c < hd; ++c) t[i * hd + c] = x[i * d + h * hd + c];
      return t;
    };
    V oh = attention(head(q, Lq), head(k, Lk), head(v, Lk), Lq, Lk, hd, hd, 1 / std::sqrt((double)hd), causal);
    for (int64_t i = 0; i < Lq; ++i)
      for (int64_t c = 0; c < hd; ++c) o[i * d + h * hd + c] = oh[i * hd + c];
  }
  return o;
}
struct AttentionGrads {
  V dq, dk, dv;
};
inline AttentionGrads attentionVjp(const V &dO, const V &q, const V &k, const V &v, int64_t Lq, int64_t Lk, int64_t D,
                                   int64_t Dv, double scale, bool causal) {
  V p = attentionProbs(q, k, Lq, Lk, D, scale, causal), dp, dv;
  matmulVjp(dO, p, v, Lq, Lk, Dv, dp, dv);
  V ds = softmaxVjp(dp, p, Lq, Lk);  // masked entries: p = 0, so ds = 0
  AttentionGrads g{V(Lq * D), V(Lk * D), dv};
  for (int64_t i = 0; i < Lq; ++i)
    for (int64_t j = 0; j < Lk; ++j)
      for (int64_t c = 0; c < D; ++c) {
        g.dq[i * D + c] += scale * ds[i * Lk + j] * k[j * D + c];
        g.dk[j * D + c] += scale * ds[i * Lk + j] * q[i * D + c];
      }
  return g;
}

}  // namespace vjp
