// reference.cpp - plain loops, double accumulators, no tricks.
#include "reference.h"

#include <cmath>
#include <stdexcept>

namespace ref {

T embedding(const T &table, const std::vector<int32_t> &ids) {
  int64_t d = table.shape[1];
  T out({(int64_t)ids.size(), d});
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < d; ++j) out.at(i, j) = table.at(ids[i], j);
  return out;
}

T rows(const T &table, int64_t n) {
  T out({n, table.shape[1]});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < table.shape[1]; ++j) out.at(i, j) = table.at(i, j);
  return out;
}

T sinusoid(int64_t n, int64_t d) {
  T out({n, d});
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < d; ++i) {
      double angle = p / std::pow(10000.0, (double)(2 * (i / 2)) / d);
      out.at(p, i) = (float)(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  return out;
}

T linear(const T &x, const T &w, const T &bias, bool out_in) {
  int64_t L = x.shape[0], in = x.shape[1];
  int64_t out = out_in ? w.shape[0] : w.shape[1];
  T y({L, out});
  std::vector<double> acc(out);
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t o = 0; o < out; ++o) acc[o] = bias.v.empty() ? 0.0 : bias.v[o];
    if (out_in) {  // w [out, in]: a dot product along a row of w
      for (int64_t o = 0; o < out; ++o)
        for (int64_t k = 0; k < in; ++k) acc[o] += (double)x.at(i, k) * w.at(o, k);
    } else {  // w [in, out]: x[i, k] times row k of w, accumulated along the output row
      for (int64_t k = 0; k < in; ++k)
        for (int64_t o = 0; o < out; ++o) acc[o] += (double)x.at(i, k) * w.at(k, o);
    }
    for (int64_t o = 0; o < out; ++o) y.at(i, o) = (float)acc[o];
  }
  return y;
}

T add(const T &a, const T &b) {
  if (a.v.size() != b.v.size()) throw std::runtime_error("ref::add: size mismatch");
  T y = a;
  for (size_t i = 0; i < y.v.size(); ++i) y.v[i] += b.v[i];
  return y;
}

T relu(const T &x) {
  T y = x;
  for (float &f : y.v) f = f > 0 ? f : 0;
  return y;
}

T gelu_erf(const T &x) {
  T y = x;
  for (float &f : y.v) f = (float)(0.5 * f * (1.0 + std::erf(f / std::sqrt(2.0))));
  return y;
}

T gelu_tanh(const T &x) {
  T y = x;
  for (float &f : y.v) {
    double u = f;
    f = (float)(0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u))));
  }
  return y;
}

T silu(const T &x) {
  T y = x;
  for (float &f : y.v) f = (float)((double)f / (1.0 + std::exp(-(double)f)));
  return y;
}

T layer_norm(const T &x, const T &g, const T &b, float eps) {
  int64_t L = x.shape[0], d = x.shape[1];
  T y({L, d});
  for (int64_t i = 0; i < L; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += x.at(i, j);
    mean /= d;
    for (int64_t j = 0; j < d; ++j) var += (x.at(i, j) - mean) * (x.at(i, j) - mean);
    var /= d;
    for (int64_t j = 0; j < d; ++j) y.at(i, j) = (float)((x.at(i, j) - mean) / std::sqrt(var + eps) * g.v[j] + b.v[j]);
  }
  return y;
}

T rms_norm(const T &x, const T &w, float eps) {
  int64_t L = x.shape[0], d = x.shape[1];
  T y({L, d});
  for (int64_t i = 0; i < L; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += (double)x.at(i, j) * x.at(i, j);
    double r = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t j = 0; j < d; ++j) y.at(i, j) = (float)(x.at(i, j) * r * w.v[j]);
  }
  return y;
}

T softmax_rows(const T &x) {
  int64_t L = x.shape[0], d = x.shape[1];
  T y({L, d});
  for (int64_t i = 0; i < L; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < d; ++j) m = std::max(m, (double)x.at(i, j));
    for (int64_t j = 0; j < d; ++j) s += std::exp(x.at(i, j) - m);
    for (int64_t j = 0; j < d; ++j) y.at(i, j) = (float)(std::exp(x.at(i, j) - m) / s);
  }
  return y;
}

T mha_core(const T &q, const T &k, const T &v, int64_t heads, bool causal, int64_t kv_heads) {
  int64_t Lq = q.shape[0], Lk = k.shape[0], D = q.shape[1], hd = D / heads;
  int64_t group = kv_heads > 0 ? heads / kv_heads : 1;
  double scale = 1.0 / std::sqrt((double)hd);
  T out({Lq, D});
  std::vector<double> s(Lk);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < Lq; ++i) {
      double m = -INFINITY;
      for (int64_t j = 0; j < Lk; ++j) {
        bool visible = !causal || j <= i + (Lk - Lq);
        double dot = 0;
        for (int64_t c = 0; c < hd; ++c) dot += (double)q.at(i, h * hd + c) * k.at(j, h / group * hd + c);
        s[j] = visible ? dot * scale : -INFINITY;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < Lk; ++j) sum += (s[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - m));
      for (int64_t c = 0; c < hd; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < Lk; ++j) acc += s[j] * v.at(j, h / group * hd + c);
        out.at(i, h * hd + c) = (float)(sum > 0 ? acc / sum : 0.0);
      }
    }
  return out;
}

T rope(const T &x, int64_t heads, int64_t past, double theta, bool interleaved, double scaling) {
  int64_t L = x.shape[0], hd = x.shape[1] / heads;
  T y = x;
  for (int64_t i = 0; i < L; ++i)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < hd / 2; ++j) {
        double angle = (double)(past + i) * std::pow(theta, -2.0 * (double)j / (double)hd) / scaling;
        int64_t a = h * hd + (interleaved ? 2 * j : j), b = a + (interleaved ? 1 : hd / 2);
        double xa = x.at(i, a), xb = x.at(i, b);
        y.at(i, a) = (float)(xa * std::cos(angle) - xb * std::sin(angle));
        y.at(i, b) = (float)(xa * std::sin(angle) + xb * std::cos(angle));
      }
  return y;
}

T to_heads(const T &x, int64_t H) {
  int64_t L = x.shape[0], hd = x.shape[1] / H;
  T o({H, L, hd});
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t c = 0; c < hd; ++c) o.v[(h * L + i) * hd + c] = x.at(i, h * hd + c);
  return o;
}

T from_heads(const T &o) {
  int64_t H = o.shape[0], L = o.shape[1], hd = o.shape[2];
  T x({L, H * hd});
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t c = 0; c < hd; ++c) x.at(i, h * hd + c) = o.v[(h * L + i) * hd + c];
  return x;
}

}  // namespace ref
