// gradients_test.cpp - kiln-differentiate end to end: small models compiled with a loss and
// Model::gradients(), their "grad.<param>" outputs checked against central finite differences
// of a plain double-precision forward written here (no autodiff of its own, nothing shared with
// kiln), every element of every parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "harness.h"
#include "kiln/dsl/Ops.h"

namespace {
using Mat = std::vector<double>;  // row-major, shapes passed alongside
using Params = std::map<std::string, Mat>;

// ---- the double-precision forward, op by op, written for obviousness ----
Mat linear(const Mat &x, int64_t L, int64_t in, const Mat &w, int64_t out, const Mat *b, bool outIn) {
  Mat y(L * out);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0;
      for (int64_t k = 0; k < in; ++k) s += x[i * in + k] * (outIn ? w[o * in + k] : w[k * out + o]);
      y[i * out + o] = s;
    }
  return y;
}
Mat layerNorm(const Mat &x, int64_t L, int64_t d, const Mat &g, const Mat &b, double eps) {
  Mat y(L * d);
  for (int64_t i = 0; i < L; ++i) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < d; ++c) mu += x[i * d + c];
    mu /= d;
    for (int64_t c = 0; c < d; ++c) var += (x[i * d + c] - mu) * (x[i * d + c] - mu);
    var /= d;
    for (int64_t c = 0; c < d; ++c) y[i * d + c] = (x[i * d + c] - mu) / std::sqrt(var + eps) * g[c] + b[c];
  }
  return y;
}
Mat add(Mat a, const Mat &b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i % b.size()];
  return a;
}
Mat mapEach(Mat x, const std::function<double(double)> &f) {
  for (double &v : x) v = f(v);
  return x;
}
double geluTanh(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double geluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double silu(double x) { return x / (1 + std::exp(-x)); }
// Rows [L, n] -> softmax over each row.
Mat softmaxRows(Mat x, int64_t L, int64_t n) {
  for (int64_t i = 0; i < L; ++i) {
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[i * n + j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[i * n + j] - mx);
    for (int64_t j = 0; j < n; ++j) x[i * n + j] = std::exp(x[i * n + j] - mx) / s;
  }
  return x;
}
// q, k, v [L, H*hd] (heads side by side), causal: softmax(q kᵀ / sqrt(hd), j <= i) v per head.
Mat causalAttention(const Mat &q, const Mat &k, const Mat &v, int64_t L, int64_t H, int64_t hd) {
  int64_t d = H * hd;
  Mat o(L * d, 0.0);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(i + 1);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double t = 0;
        for (int64_t c = 0; c < hd; ++c) t += q[i * d + h * hd + c] * k[j * d + h * hd + c];
        s[j] = t / std::sqrt((double)hd);
        mx = std::max(mx, s[j]);
      }
      for (int64_t j = 0; j <= i; ++j) sum += s[j] = std::exp(s[j] - mx);
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t c = 0; c < hd; ++c) o[i * d + h * hd + c] += s[j] / sum * v[j * d + h * hd + c];
    }
  return o;
}
double crossEntropy(const Mat &logits, int64_t L, int64_t V, const std::vector<int32_t> &targets) {
  double total = 0;
  int n = 0;
  for (int64_t i = 0; i < L; ++i) {
    if (targets[i] < 0) continue;
    double mx = -1e300, s = 0;
    for (int64_t c = 0; c < V; ++c) mx = std::max(mx, logits[i * V + c]);
    for (int64_t c = 0; c < V; ++c) s += std::exp(logits[i * V + c] - mx);
    total += std::log(s) + mx - logits[i * V + targets[i]];
    ++n;
  }
  return n ? total / n : 0.0;
}

// Central differences of `loss` with respect to every element of every parameter.
Params finiteDifferences(Params p, const std::function<double(const Params &)> &loss) {
  Params g;
  const double h = 1e-5;
  for (auto &[name, w] : p) {
    Mat &d = g[name];
    d.resize(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      double keep = w[i];
      w[i] = keep + h;
      double up = loss(p);
      w[i] = keep - h;
      double down = loss(p);
      w[i] = keep;
      d[i] = (up - down) / (2 * h);
    }
  }
  return g;
}

// Random weights of a usable scale (norm gains around 1), saved for the executable.
Params randomParams(const std::map<std::string, std::vector<int64_t>> &shapes, unsigned seed) {
  Params p;
  std::map<std::string, ref::T> file;
  for (auto &[name, shape] : shapes) {
    bool gain = name.find(".g") != std::string::npos;
    ref::T t = kt::randomT(shape, seed++, gain ? 0.2f : 0.3f);
    if (gain)
      for (float &v : t.v) v += 1.0f;
    file[name] = t;
    p[name] = Mat(t.v.begin(), t.v.end());
  }
  return p;
}

// Runs the compiled entry and checks every "grad.<name>" output against `ref`:
// max |kiln - ref| <= 1e-4 max |ref| per parameter (and the loss within 1e-5 relative).
void checkGradients(const std::string &dir, const std::string &exe, const Params &p,
                    const std::map<std::string, std::vector<int64_t>> &shapes, const std::string &inputs,
                    double refLoss, const Params &ref) {
  std::map<std::string, ref::T> file;
  for (auto &[name, w] : p) {
    ref::T t(shapes.at(name));
    for (size_t i = 0; i < w.size(); ++i) t.v[i] = (float)w[i];
    file[name] = t;
  }
  kt::saveWeights(dir + "/w.safetensors", file);
  auto r = kt::run(exe + " --weights " + dir + "/w.safetensors " + inputs + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T loss = kt::loadNpy(dir + "/out/loss.npy");
  ASSERT_EQ(loss.v.size(), 1u);
  EXPECT_NEAR(loss.v[0], refLoss, 1e-5 * std::abs(refLoss)) << "the loss";
  for (auto &[name, g] : ref) {
    ref::T got = kt::loadNpy(dir + "/out/grad." + name + ".npy");
    ASSERT_EQ(got.shape, shapes.at(name)) << name;
    double maxRef = 0, maxDiff = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      maxRef = std::max(maxRef, std::abs(g[i]));
      maxDiff = std::max(maxDiff, std::abs(g[i] - (double)got.v[i]));
    }
    EXPECT_GT(maxRef, 1e-6) << "grad." << name << ": the reference is zero (the loss does not depend on it?)";
    EXPECT_LE(maxDiff, 1e-4 * maxRef) << "grad." << name << ": max |kiln - finite differences| " << maxDiff
                                      << " vs max |ref| " << maxRef;
  }
}

// The parameter `name` of the test's shape table.
kiln::Tensor param(kiln::Model &m, const std::map<std::string, std::vector<int64_t>> &shapes, const char *name) {
  kiln::Shape s;
  for (int64_t e : shapes.at(name)) s.push_back(e);
  return m.param(name, s);
}

std::vector<int32_t> withIgnored(std::vector<int32_t> t) {
  for (size_t i = 2; i < t.size(); i += 5) t[i] = -1;
  return t;
}

// A GPT block: embeddings and learned positions, a causal multi-head attention and a GELU FFN
// with residuals and pre-norms, the output head tied to the token embedding.
TEST(Gradients, GptBlockMatchesFiniteDifferences) {
  const int64_t V = 37, d = 16, H = 2, F = 32, P = 24;
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"wte", {V, d}},   {"wpe", {P, d}},     {"ln1.g", {d}},  {"ln1.b", {d}}, {"qkv.w", {d, 3 * d}},
      {"qkv.b", {3 * d}}, {"proj.w", {d, d}}, {"proj.b", {d}}, {"ln2.g", {d}}, {"ln2.b", {d}},
      {"fc.w", {d, F}},  {"fc.b", {F}},      {"out.w", {F, d}}, {"out.b", {d}}, {"lnf.g", {d}},
      {"lnf.b", {d}}};
  std::string dir = kt::workDir("train_gpt_block");
  std::string exe = kt::compile(dir, "gpt_block", [&](kiln::Model &m) {
    kiln::Dim L = m.seq("L", P);
    auto tok = m.tokens("tokens", L, V);
    auto tgt = m.targets("targets", L, V);
    auto p = [&](const char *n) { return param(m, shapes, n); };
    auto wte = p("wte");
    auto x = kiln::add(kiln::embedding(wte, tok), kiln::position_embedding(p("wpe"), tok));
    auto h = kiln::layer_norm(x, p("ln1.g"), p("ln1.b"));
    auto qkv = kiln::linear(h, p("qkv.w"), p("qkv.b"), {.layout = kiln::WeightLayout::InOut});
    auto parts = kiln::split(qkv, 1, {d, d, d});
    auto a = kiln::attention(kiln::split_heads(parts[0], H), kiln::split_heads(parts[1], H),
                             kiln::split_heads(parts[2], H), {.mask = kiln::Mask::causal()});
    x = kiln::add(x, kiln::linear(kiln::merge_heads(a), p("proj.w"), p("proj.b")));
    auto f = kiln::gelu(kiln::linear(kiln::layer_norm(x, p("ln2.g"), p("ln2.b")), p("fc.w"), p("fc.b"),
                                     {.layout = kiln::WeightLayout::InOut}),
                        {.approx = kiln::GeluApprox::Tanh});
    x = kiln::add(x, kiln::linear(f, p("out.w"), p("out.b"), {.layout = kiln::WeightLayout::InOut}));
    auto logits = kiln::linear(kiln::layer_norm(x, p("lnf.g"), p("lnf.b")), wte);
    m.loss(kiln::cross_entropy(logits, tgt));
    m.gradients();
  });
  ASSERT_FALSE(exe.empty());
  for (int64_t L : {1, 13}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    std::vector<int32_t> tokens = kt::randomIds((int)L, (int)V, 5), targets = withIgnored(kt::randomIds((int)L, (int)V, 6));
    Params prm = randomParams(shapes, 11);
    auto loss = [&](const Params &w) {
      Mat x((size_t)(L * d));
      for (int64_t i = 0; i < L; ++i)
        for (int64_t c = 0; c < d; ++c) x[i * d + c] = w.at("wte")[tokens[i] * d + c] + w.at("wpe")[i * d + c];
      Mat h = layerNorm(x, L, d, w.at("ln1.g"), w.at("ln1.b"), 1e-5);
      Mat qkv = linear(h, L, d, w.at("qkv.w"), 3 * d, &w.at("qkv.b"), false);
      Mat q(L * d), k(L * d), v(L * d);
      for (int64_t i = 0; i < L; ++i)
        for (int64_t c = 0; c < d; ++c) {
          q[i * d + c] = qkv[i * 3 * d + c];
          k[i * d + c] = qkv[i * 3 * d + d + c];
          v[i * d + c] = qkv[i * 3 * d + 2 * d + c];
        }
      Mat a = causalAttention(q, k, v, L, H, d / H);
      x = add(x, linear(a, L, d, w.at("proj.w"), d, &w.at("proj.b"), true));
      Mat f = mapEach(linear(layerNorm(x, L, d, w.at("ln2.g"), w.at("ln2.b"), 1e-5), L, d, w.at("fc.w"), F, &w.at("fc.b"), false),
                    geluTanh);
      x = add(x, linear(f, L, F, w.at("out.w"), d, &w.at("out.b"), false));
      Mat logits = linear(layerNorm(x, L, d, w.at("lnf.g"), w.at("lnf.b"), 1e-5), L, d, w.at("wte"), V, nullptr, true);
      return crossEntropy(logits, L, V, targets);
    };
    std::string sub = dir + "/L" + std::to_string(L);
    std::filesystem::create_directories(sub);
    kt::saveIds(sub + "/tokens.npy", tokens);
    kt::saveIds(sub + "/targets.npy", targets);
    checkGradients(sub, exe, prm, shapes,
                   "--input tokens=" + sub + "/tokens.npy --input targets=" + sub + "/targets.npy", loss(prm),
                   finiteDifferences(prm, loss));
  }
}

// a [M, K] · b [K, N] (tb: b is [N, K]).
Mat matmul(const Mat &a, const Mat &b, int64_t M, int64_t K, int64_t N, bool tb) {
  Mat c(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) c[i * N + j] += a[i * K + k] * (tb ? b[j * K + k] : b[k * N + j]);
  return c;
}

// Every other rule: relu, erf GELU, SiLU, an explicit softmax of scaled scores, matmuls with
// and without a transposed operand, non-causal attention, a broadcast mul, concat, a fixed
// sinusoid (no gradient), and a loss of two weighted terms.
TEST(Gradients, EveryRuleMatchesFiniteDifferences) {
  const int64_t V = 23, d = 8, P = 16;
  std::map<std::string, std::vector<int64_t>> shapes = {{"emb", {V, d}},  {"a.w", {d, d}},  {"a.b", {d}},
                                                        {"b.w", {d, d}},  {"c.w", {d, d}},  {"gain", {d}},
                                                        {"head", {3 * d, V}}, {"head.b", {V}}};
  std::string dir = kt::workDir("train_every_rule");
  std::string exe = kt::compile(dir, "every_rule", [&](kiln::Model &m) {
    kiln::Dim L = m.seq("L", P);
    auto tok = m.tokens("tokens", L, V);
    auto tgt = m.targets("targets", L, V);
    auto p = [&](const char *n) { return param(m, shapes, n); };
    auto emb = p("emb");
    auto x = kiln::add(kiln::embedding(emb, tok), kiln::sinusoidal_positions(tok, d));
    auto in_out = kiln::LinearOptions{.layout = kiln::WeightLayout::InOut};
    auto a = kiln::relu(kiln::linear(x, p("a.w"), p("a.b"), in_out));
    auto b = kiln::gelu(kiln::linear(x, p("b.w")));
    auto c = kiln::silu(kiln::linear(x, p("c.w"), in_out));
    auto sm = kiln::softmax(kiln::scale(kiln::matmul(a, b, {.transpose_b = true}), 0.5f));
    auto y = kiln::matmul(sm, c);
    auto att = kiln::merge_heads(kiln::attention(kiln::split_heads(y, 2), kiln::split_heads(x, 2), kiln::split_heads(c, 2)));
    auto z = kiln::concat({kiln::mul(y, p("gain")), kiln::scale(att, 0.5f), kiln::mul(x, c)}, 1);
    auto logits = kiln::linear(z, p("head"), p("head.b"), in_out);
    m.loss(kiln::cross_entropy(logits, tgt));
    m.loss(kiln::cross_entropy(kiln::linear(x, emb), tgt), {.weight = 0.5f});
    m.gradients();
  });
  ASSERT_FALSE(exe.empty());
  const int64_t L = 11;
  std::vector<int32_t> tokens = kt::randomIds((int)L, (int)V, 7), targets = withIgnored(kt::randomIds((int)L, (int)V, 8));
  Params prm = randomParams(shapes, 21);
  auto loss = [&](const Params &w) {
    Mat x((size_t)(L * d));
    for (int64_t i = 0; i < L; ++i)
      for (int64_t c = 0; c < d; ++c) {
        double freq = std::exp((double)(c - c % 2) * (-std::log(10000.0) / (double)d));
        x[i * d + c] = w.at("emb")[tokens[i] * d + c] + (c % 2 == 0 ? std::sin(i * freq) : std::cos(i * freq));
      }
    Mat a = mapEach(linear(x, L, d, w.at("a.w"), d, &w.at("a.b"), false), [](double v) { return std::max(v, 0.0); });
    Mat b = mapEach(linear(x, L, d, w.at("b.w"), d, nullptr, true), geluErf);
    Mat c = mapEach(linear(x, L, d, w.at("c.w"), d, nullptr, false), silu);
    Mat sm = softmaxRows(mapEach(matmul(a, b, L, d, L, true), [](double v) { return 0.5 * v; }), L, L);
    Mat y = matmul(sm, c, L, L, d, false);
    // Non-causal two-head attention: q = y, k = x, v = c.
    const int64_t H = 2, hd = d / H;
    Mat att(L * d, 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        Mat s(L);
        for (int64_t j = 0; j < L; ++j) {
          double t = 0;
          for (int64_t e = 0; e < hd; ++e) t += y[i * d + h * hd + e] * x[j * d + h * hd + e];
          s[j] = t / std::sqrt((double)hd);
        }
        s = softmaxRows(s, 1, L);
        for (int64_t j = 0; j < L; ++j)
          for (int64_t e = 0; e < hd; ++e) att[i * d + h * hd + e] += s[j] * c[j * d + h * hd + e];
      }
    Mat z(L * 3 * d);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t e = 0; e < d; ++e) {
        z[i * 3 * d + e] = y[i * d + e] * w.at("gain")[e];
        z[i * 3 * d + d + e] = 0.5 * att[i * d + e];
        z[i * 3 * d + 2 * d + e] = x[i * d + e] * c[i * d + e];
      }
    Mat logits = linear(z, L, 3 * d, w.at("head"), V, &w.at("head.b"), false);
    return crossEntropy(logits, L, V, targets) + 0.5 * crossEntropy(linear(x, L, d, w.at("emb"), V, nullptr, true), L, V, targets);
  };
  kt::saveIds(dir + "/tokens.npy", tokens);
  kt::saveIds(dir + "/targets.npy", targets);
  checkGradients(dir, exe, prm, shapes, "--input tokens=" + dir + "/tokens.npy --input targets=" + dir + "/targets.npy",
                 loss(prm), finiteDifferences(prm, loss));
}

}  // namespace
