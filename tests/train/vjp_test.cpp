// vjp_test.cpp - the reference backward rules (tests/reference/vjp.h) against central finite
// differences of their forwards, in double precision at tiny shapes: for a random cotangent u,
// d<u, f(x)>/dx_e by (f(x + h e) - f(x - h e)) / 2h for every element e of every input.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "vjp.h"

namespace {
using vjp::V;

V random(size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, scale);
  V v(n);
  for (double &x : v) x = d(g);
  return v;
}
double dot(const V &a, const V &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks `grad` against central differences of `loss` with respect to every element of `x`.
void expectFiniteDifferences(const char *what, V &x, const V &grad, const std::function<double()> &loss) {
  ASSERT_EQ(grad.size(), x.size()) << what;
  const double h = 1e-5;
  double worst = 0, scale = 1e-3;
  for (double g : grad) scale = std::max(scale, std::abs(g));
  for (size_t e = 0; e < x.size(); ++e) {
    double keep = x[e];
    x[e] = keep + h;
    double up = loss();
    x[e] = keep - h;
    double down = loss();
    x[e] = keep;
    worst = std::max(worst, std::abs((up - down) / (2 * h) - grad[e]));
  }
  EXPECT_LE(worst, 1e-7 * scale) << what << ": max |finite difference - VJP| " << worst << ", max |VJP| " << scale;
}

TEST(ReferenceVjp, Linear) {
  const int64_t L = 3, in = 4, out = 5;
  for (bool outIn : {true, false}) {  // W [out, in] (x·Wᵀ) and [in, out] (x·W)
    V x = random(L * in, 1), w = random(out * in, 2), b = random(out, 3), u = random(L * out, 4);
    vjp::LinearGrads g = vjp::linearVjp(u, x, w, L, in, out, outIn);
    auto loss = [&] { return dot(u, vjp::linear(x, w, b, L, in, out, outIn)); };
    expectFiniteDifferences("linear dx", x, g.dx, loss);
    expectFiniteDifferences("linear dw", w, g.dw, loss);
    expectFiniteDifferences("linear db", b, g.db, loss);
  }
}

TEST(ReferenceVjp, Matmul) {
  const int64_t M = 3, K = 4, N = 2;
  V a = random(M * K, 5), b = random(K * N, 6), u = random(M * N, 7), da, db;
  vjp::matmulVjp(u, a, b, M, K, N, da, db);
  auto loss = [&] { return dot(u, vjp::matmul(a, b, M, K, N)); };
  expectFiniteDifferences("matmul da", a, da, loss);
  expectFiniteDifferences("matmul db", b, db, loss);
  // The transposed form a · bᵀ is the same rule on bᵀ: its gradient is the transpose of db.
  V bt = vjp::transpose(b, K, N), dbt = vjp::transpose(db, K, N);
  auto lossT = [&] { return dot(u, vjp::matmul(a, vjp::transpose(bt, N, K), M, K, N)); };
  expectFiniteDifferences("matmul (transposed b) db", bt, dbt, lossT);
}

TEST(ReferenceVjp, Activations) {
  for (vjp::Act a : {vjp::Act::Relu, vjp::Act::GeluErf, vjp::Act::GeluTanh, vjp::Act::Silu}) {
    V x = random(12, 8, 1.5), u = random(12, 9);
    for (double &v : x)
      if (std::abs(v) < 1e-3) v = 0.5;  // ReLU's kink is not differentiable
    expectFiniteDifferences("activation", x, vjp::activationVjp(a, u, x), [&] { return dot(u, vjp::activation(a, x)); });
  }
}

TEST(ReferenceVjp, BroadcastAddAndMul) {
  const int64_t L = 3, n = 4;
  V a = random(L * n, 10), b = random(n, 11), u = random(L * n, 12);
  expectFiniteDifferences("add da", a, u, [&] { return dot(u, vjp::addRows(a, b)); });
  expectFiniteDifferences("add db", b, vjp::sumRows(u, n), [&] { return dot(u, vjp::addRows(a, b)); });
  V da(L * n), uTimesA(L * n);
  for (int64_t i = 0; i < L * n; ++i) da[i] = u[i] * b[i % n], uTimesA[i] = u[i] * a[i];
  expectFiniteDifferences("mul da", a, da, [&] { return dot(u, vjp::mulRows(a, b)); });
  expectFiniteDifferences("mul db", b, vjp::sumRows(uTimesA, n), [&] { return dot(u, vjp::mulRows(a, b)); });
}

TEST(ReferenceVjp, Softmax) {
  const int64_t L = 3, n = 5;
  V x = random(L * n, 13), u = random(L * n, 14);
  V dx = vjp::softmaxVjp(u, vjp::softmax(x, L, n), L, n);
  expectFiniteDifferences("softmax dx", x, dx, [&] { return dot(u, vjp::softmax(x, L, n)); });
}

TEST(ReferenceVjp, LayerNorm) {
  const int64_t L = 3, d = 6;
  const double eps = 1e-5;
  V x = random(L * d, 15), g = random(d, 16), b = random(d, 17), u = random(L * d, 18);
  for (double &v : g) v += 1;
  vjp::LayerNormGrads r = vjp::layerNormVjp(u, x, g, L, d, eps);
  auto loss = [&] { return dot(u, vjp::layerNorm(x, g, b, L, d, eps)); };
  expectFiniteDifferences("layer_norm dx", x, r.dx, loss);
  expectFiniteDifferences("layer_norm dgamma", g, r.dg, loss);
  expectFiniteDifferences("layer_norm dbeta", b, r.db, loss);
}

TEST(ReferenceVjp, EmbeddingScatterAdd) {
  const int64_t vocab = 5, d = 3;
  std::vector<int32_t> ids{1, 4, 1, 0, 1};  // repeated ids add up
  V table = random(vocab * d, 19), u = random(ids.size() * d, 20);
  expectFiniteDifferences("embedding dtable", table, vjp::embeddingVjp(u, ids, vocab, d),
                          [&] { return dot(u, vjp::embedding(table, ids, d)); });
}

TEST(ReferenceVjp, DataMovement) {
  const int64_t L = 3, na = 2, nb = 3;
  V a = random(L * na, 21), b = random(L * nb, 22), u = random(L * (na + nb), 23);
  // concat's gradients are slices of the output's; slice's is the output's padded with zeros.
  expectFiniteDifferences("concat da", a, vjp::sliceCols(u, L, na + nb, 0, na),
                          [&] { return dot(u, vjp::concatCols(a, b, L, na, nb)); });
  expectFiniteDifferences("concat db", b, vjp::sliceCols(u, L, na + nb, na, na + nb),
                          [&] { return dot(u, vjp::concatCols(a, b, L, na, nb)); });
  V x = random(L * 5, 24), us = random(L * 2, 25);
  expectFiniteDifferences("slice dx", x, vjp::sliceColsVjp(us, L, 5, 1, 3), [&] { return dot(us, vjp::sliceCols(x, L, 5, 1, 3)); });
  V ut = random(5 * L, 26);
  expectFiniteDifferences("transpose dx", x, vjp::transpose(ut, 5, L), [&] { return dot(ut, vjp::transpose(x, L, 5)); });
}

TEST(ReferenceVjp, CrossEntropyWithIgnoredTargets) {
  const int64_t n = 6;
  std::vector<int32_t> t{2, -1, 5, 0, -1};
  V logits = random(t.size() * n, 27, 2.0);
  const double dloss = 0.7;
  expectFiniteDifferences("cross_entropy dlogits", logits, vjp::crossEntropyVjp(dloss, logits, t, n),
                          [&] { return dloss * vjp::crossEntropy(logits, t, n); });
}

TEST(ReferenceVjp, Attention) {
  for (bool causal : {false, true})
    for (auto [Lq, Lk] : {std::pair<int64_t, int64_t>{4, 4}, {3, 5}}) {
      const int64_t D = 3, Dv = 2;
      const double scale = 0.6;
      V q = random(Lq * D, 28), k = random(Lk * D, 29), v = random(Lk * Dv, 30), u = random(Lq * Dv, 31);
      vjp::AttentionGrads g = vjp::attentionVjp(u, q, k, v, Lq, Lk, D, Dv, scale, causal);
      auto loss = [&] { return dot(u, vjp::attention(q, k, v, Lq, Lk, D, Dv, scale, causal)); };
      std::string what = std::string(causal ? "causal" : "full") + " attention " + std::to_string(Lq) + "x" + std::to_string(Lk);
      expectFiniteDifferences((what + " dq").c_str(), q, g.dq, loss);
      expectFiniteDifferences((what + " dk").c_str(), k, g.dk, loss);
      expectFiniteDifferences((what + " dv").c_str(), v, g.dv, loss);
    }
}

}  // namespace
