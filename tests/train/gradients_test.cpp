// gradients_test.cpp - kiln-differentiate end to end: small models compiled with a loss and
// Model::gradients(), their "grad.<param>" outputs checked against central finite differences
// of the plain double-precision forward of tests/reference/vjp.h (nothing shared with kiln; its
// backward rules are not used here), every element of every parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "grad_check.h"
#include "kiln/dsl/Ops.h"
#include "vjp.h"

namespace {
using Mat = std::vector<double>;  // row-major, shapes passed alongside
using Params = std::map<std::string, Mat>;

// The double-precision forward is tests/reference/vjp.h's (its backward rules are not used
// here: the gradients come from central differences).
using vjp::Act;
using vjp::activation;
using vjp::addRows;
using vjp::linear;

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
  std::map<std::string, ref::T> want;
  for (auto &[name, g] : ref) {
    want[name] = ref::T(shapes.at(name));
    for (size_t i = 0; i < g.size(); ++i) want[name].v[i] = (float)g[i];
  }
  kt::expectFixtureGradients(want, dir + "/out");
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
      Mat h = vjp::layerNorm(x, w.at("ln1.g"), w.at("ln1.b"), L, d, 1e-5);
      Mat qkv = linear(h, w.at("qkv.w"), w.at("qkv.b"), L, d, 3 * d, false);
      Mat a = vjp::attentionHeads(vjp::sliceCols(qkv, L, 3 * d, 0, d), vjp::sliceCols(qkv, L, 3 * d, d, 2 * d),
                                  vjp::sliceCols(qkv, L, 3 * d, 2 * d, 3 * d), L, L, H, d / H, true);
      x = addRows(x, linear(a, w.at("proj.w"), w.at("proj.b"), L, d, d));
      Mat f = activation(Act::GeluTanh, linear(vjp::layerNorm(x, w.at("ln2.g"), w.at("ln2.b"), L, d, 1e-5), w.at("fc.w"),
                                               w.at("fc.b"), L, d, F, false));
      x = addRows(x, linear(f, w.at("out.w"), w.at("out.b"), L, F, d, false));
      Mat logits = linear(vjp::layerNorm(x, w.at("lnf.g"), w.at("lnf.b"), L, d, 1e-5), w.at("wte"), {}, L, d, V);
      return vjp::crossEntropy(logits, targets, V);
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
    Mat a = activation(Act::Relu, linear(x, w.at("a.w"), w.at("a.b"), L, d, d, false));
    Mat b = activation(Act::GeluErf, linear(x, w.at("b.w"), {}, L, d, d));
    Mat c = activation(Act::Silu, linear(x, w.at("c.w"), {}, L, d, d, false));
    Mat scores = vjp::matmul(a, vjp::transpose(b, L, d), L, d, L);
    for (double &v : scores) v *= 0.5;
    Mat y = vjp::matmul(vjp::softmax(scores, L, L), c, L, L, d);
    Mat att = vjp::attentionHeads(y, x, c, L, L, 2, d / 2, false);  // q = y, k = x, v = c
    Mat z(L * 3 * d);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t e = 0; e < d; ++e) {
        z[i * 3 * d + e] = y[i * d + e] * w.at("gain")[e];
        z[i * 3 * d + d + e] = 0.5 * att[i * d + e];
        z[i * 3 * d + 2 * d + e] = x[i * d + e] * c[i * d + e];
      }
    Mat logits = linear(z, w.at("head"), w.at("head.b"), L, 3 * d, V, false);
    return vjp::crossEntropy(logits, targets, V) + 0.5 * vjp::crossEntropy(linear(x, w.at("emb"), {}, L, d, V), targets, V);
  };
  kt::saveIds(dir + "/tokens.npy", tokens);
  kt::saveIds(dir + "/targets.npy", targets);
  checkGradients(dir, exe, prm, shapes, "--input tokens=" + dir + "/tokens.npy --input targets=" + dir + "/targets.npy",
                 loss(prm), finiteDifferences(prm, loss));
}

// RMSNorm (kiln.rms_norm: its input's gradient kiln.rms_norm_grad, its weight's from a
// unit-weight rms_norm, a mul and a reduce_rows) over rows of [L, d] and over the heads of a
// [2, L, d / 2] split (a rank-3 input: the weight's gradient sums over heads and rows), their
// sum through a head: tests/reference/make_grad_fixtures.py's rms_norm_grad model.
const std::map<std::string, std::vector<int64_t>> kRmsShapes = {{"emb", {19, 12}}, {"n1.g", {12}}, {"n2.g", {6}}, {"head", {12, 19}}};
std::string compileRmsNormModel(const std::string &dir) {
  return kt::compile(dir, "rms_norm_grad", [&](kiln::Model &m) {
    kiln::Dim L = m.seq("L", 16);
    auto tok = m.tokens("tokens", L, 19);
    auto tgt = m.targets("targets", L, 19);
    auto p = [&](const char *n) { return param(m, kRmsShapes, n); };
    auto h = kiln::rms_norm(kiln::embedding(p("emb"), tok), p("n1.g"), {.eps = 1e-5f});
    auto q = kiln::merge_heads(kiln::rms_norm(kiln::split_heads(h, 2), p("n2.g"), {.eps = 1e-6f}));
    m.loss(kiln::cross_entropy(kiln::linear(kiln::add(h, q), p("head"), {.layout = kiln::WeightLayout::InOut}), tgt));
    m.gradients();
  });
}

// Against central differences of the plain double forward, gains perturbed around 1.
TEST(Gradients, RmsNormMatchesFiniteDifferences) {
  const int64_t V = 19, d = 12, L = 11, H = 2;
  std::string dir = kt::workDir("train_rms_norm");
  std::string exe = compileRmsNormModel(dir);
  ASSERT_FALSE(exe.empty());
  std::vector<int32_t> tokens = kt::randomIds((int)L, (int)V, 5), targets = withIgnored(kt::randomIds((int)L, (int)V, 6));
  Params prm = randomParams(kRmsShapes, 31);
  // x / sqrt(mean(x²) + eps) · w over rows of `n`.
  auto rmsNorm = [](const Mat &x, const Mat &w, int64_t n, double eps) {
    Mat y(x.size());
    for (size_t r = 0; r < x.size() / n; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < n; ++c) ss += x[r * n + c] * x[r * n + c];
      double s = 1.0 / std::sqrt(ss / n + eps);
      for (int64_t c = 0; c < n; ++c) y[r * n + c] = x[r * n + c] * s * w[c];
    }
    return y;
  };
  auto loss = [&](const Params &w) {
    Mat x((size_t)(L * d));
    for (int64_t i = 0; i < L; ++i)
      for (int64_t c = 0; c < d; ++c) x[i * d + c] = w.at("emb")[tokens[i] * d + c];
    Mat h = rmsNorm(x, w.at("n1.g"), d, 1e-5);
    Mat q = rmsNorm(h, w.at("n2.g"), d / H, 1e-6);  // a row's two halves are its two heads' rows
    for (size_t i = 0; i < h.size(); ++i) h[i] += q[i];
    return vjp::crossEntropy(linear(h, w.at("head"), {}, L, d, V, false), targets, V);
  };
  kt::saveIds(dir + "/tokens.npy", tokens);
  kt::saveIds(dir + "/targets.npy", targets);
  checkGradients(dir, exe, prm, kRmsShapes, "--input tokens=" + dir + "/tokens.npy --input targets=" + dir + "/targets.npy",
                 loss(prm), finiteDifferences(prm, loss));
}

// Rotary positions and grouped-query attention (kiln.rope: its gradient the inverse rotation;
// kiln.attention with 4 query heads over 2 key and value heads: the key and value gradients
// sum each group's heads), both rotary pairings, a causal mask: against central differences of
// a plain double forward. Lengths 11 (no multiple of a block).
TEST(Gradients, RopeAndGroupedQueryAttentionMatchFiniteDifferences) {
  const int64_t V = 19, d = 16, L = 11, H = 4, Hkv = 2, hd = 4;
  const std::map<std::string, std::vector<int64_t>> shapes = {
      {"emb", {V, d}}, {"wq", {H * hd, d}}, {"wk", {Hkv * hd, d}}, {"wv", {Hkv * hd, d}}, {"head", {H * hd, V}}};
  for (bool inter : {false, true}) {
    SCOPED_TRACE(inter ? "interleaved" : "half split");
    std::string dir = kt::workDir(inter ? "train_rope_gqa_inter" : "train_rope_gqa");
    std::string exe = kt::compile(dir, "rope_gqa", [&](kiln::Model &m) {
      kiln::Dim Ls = m.seq("L", 16);
      auto tok = m.tokens("tokens", Ls, V);
      auto tgt = m.targets("targets", Ls, V);
      auto p = [&](const char *n) { return param(m, shapes, n); };
      auto x = kiln::embedding(p("emb"), tok);
      kiln::RopeOptions ro{.theta = 100.0f, .style = inter ? kiln::RopeStyle::Interleaved : kiln::RopeStyle::HalfSplit};
      auto q = kiln::rope(kiln::split_heads(kiln::linear(x, p("wq")), H), ro);
      auto k = kiln::rope(kiln::split_heads(kiln::linear(x, p("wk")), Hkv), ro);
      auto v = kiln::split_heads(kiln::linear(x, p("wv")), Hkv);
      auto a = kiln::merge_heads(kiln::attention(q, k, v, {.mask = kiln::Mask::causal()}));
      m.loss(kiln::cross_entropy(kiln::linear(a, p("head"), {.layout = kiln::WeightLayout::InOut}), tgt));
      m.gradients();
    });
    ASSERT_FALSE(exe.empty());
    std::vector<int32_t> tokens = kt::randomIds((int)L, (int)V, 7), targets = withIgnored(kt::randomIds((int)L, (int)V, 8));
    Params prm = randomParams(shapes, 41);
    // Row i of every head [L, heads * hd] turned by i · 100^(-2j/hd) per pair j.
    auto rot = [&](Mat x, int64_t heads) {
      for (int64_t i = 0; i < L; ++i)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t j = 0; j < hd / 2; ++j) {
            double ang = (double)i * std::pow(100.0, -2.0 * (double)j / (double)hd);
            int64_t a = i * heads * hd + h * hd + (inter ? 2 * j : j), b = a + (inter ? 1 : hd / 2);
            double xa = x[a], xb = x[b];
            x[a] = xa * std::cos(ang) - xb * std::sin(ang);
            x[b] = xa * std::sin(ang) + xb * std::cos(ang);
          }
      return x;
    };
    // Key and value heads repeated for their query heads: [L, Hkv·hd] -> [L, H·hd].
    auto repeat = [&](const Mat &x) {
      Mat y((size_t)(L * H * hd));
      for (int64_t i = 0; i < L; ++i)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t c = 0; c < hd; ++c) y[(i * H + h) * hd + c] = x[(i * Hkv + h / (H / Hkv)) * hd + c];
      return y;
    };
    auto loss = [&](const Params &w) {
      Mat x((size_t)(L * d));
      for (int64_t i = 0; i < L; ++i)
        for (int64_t c = 0; c < d; ++c) x[i * d + c] = w.at("emb")[tokens[i] * d + c];
      Mat q = rot(linear(x, w.at("wq"), {}, L, d, H * hd), H);
      Mat k = repeat(rot(linear(x, w.at("wk"), {}, L, d, Hkv * hd), Hkv));
      Mat v = repeat(linear(x, w.at("wv"), {}, L, d, Hkv * hd));
      Mat a = vjp::attentionHeads(q, k, v, L, L, H, hd, true);
      return vjp::crossEntropy(linear(a, w.at("head"), {}, L, H * hd, V, false), targets, V);
    };
    kt::saveIds(dir + "/tokens.npy", tokens);
    kt::saveIds(dir + "/targets.npy", targets);
    checkGradients(dir, exe, prm, shapes, "--input tokens=" + dir + "/tokens.npy --input targets=" + dir + "/targets.npy",
                   loss(prm), finiteDifferences(prm, loss));
  }
}

// last(x, axis): its gradient is the output's gradient at the last element of the axis, zeros
// elsewhere, along a sequence length (the last position, [L, d] -> [1, d]) and a static axis
// (the last head, [2, L, 6] -> [1, L, 6]). The loss adds a term through each.
TEST(Gradients, LastMatchesFiniteDifferences) {
  const int64_t V = 19, d = 12, L = 9, dh = 6;
  const std::map<std::string, std::vector<int64_t>> shapes = {{"emb", {V, d}}, {"head", {d, V}}, {"head2", {dh, V}}};
  std::string dir = kt::workDir("train_last");
  std::string exe = kt::compile(dir, "last_grad", [&](kiln::Model &m) {
    kiln::Dim Ls = m.seq("L", 16);
    auto tok = m.tokens("tokens", Ls, V);
    auto next = m.targets("next", kiln::Dim(1), V);
    auto tgt = m.targets("targets", Ls, V);
    auto p = [&](const char *n) { return param(m, shapes, n); };
    auto h = kiln::embedding(p("emb"), tok);
    m.loss(kiln::cross_entropy(kiln::linear(kiln::last(h, 0), p("head"), {.layout = kiln::WeightLayout::InOut}), next));
    auto g = kiln::merge_heads(kiln::last(kiln::split_heads(h, 2), 0));
    m.loss(kiln::cross_entropy(kiln::linear(g, p("head2"), {.layout = kiln::WeightLayout::InOut}), tgt));
    m.gradients();
  });
  ASSERT_FALSE(exe.empty());
  std::vector<int32_t> tokens = kt::randomIds((int)L, (int)V, 7), targets = kt::randomIds((int)L, (int)V, 8), next = {4};
  Params prm = randomParams(shapes, 41);
  auto loss = [&](const Params &w) {
    Mat h((size_t)(L * d)), g((size_t)(L * dh));
    for (int64_t i = 0; i < L; ++i)
      for (int64_t c = 0; c < d; ++c) h[i * d + c] = w.at("emb")[tokens[i] * d + c];
    for (int64_t i = 0; i < L; ++i)  // the second head: the second half of each row
      for (int64_t c = 0; c < dh; ++c) g[i * dh + c] = h[i * d + dh + c];
    Mat lastRow(h.end() - d, h.end());
    return vjp::crossEntropy(linear(lastRow, w.at("head"), {}, 1, d, V, false), next, V) +
           vjp::crossEntropy(linear(g, w.at("head2"), {}, L, dh, V, false), targets, V);
  };
  kt::saveIds(dir + "/tokens.npy", tokens);
  kt::saveIds(dir + "/next.npy", next);
  kt::saveIds(dir + "/targets.npy", targets);
  checkGradients(dir, exe, prm, shapes,
                 "--input tokens=" + dir + "/tokens.npy --input next=" + dir + "/next.npy --input targets=" + dir + "/targets.npy",
                 loss(prm), finiteDifferences(prm, loss));
}

// Against PyTorch autograd through torch.nn.functional.rms_norm (tests/fixtures/rms_norm_grad),
// within 2e-6 of each gradient's largest element: 10x the largest error measured (1.9e-7, the
// embedding's; the gains' 0.9-1.1e-7).
TEST(Gradients, RmsNormMatchesPyTorch) {
  std::string dir = kt::workDir("train_rms_norm_torch");
  std::string exe = compileRmsNormModel(dir);
  ASSERT_FALSE(exe.empty());
  auto grads = kt::runFixtureGradients(exe, "rms_norm_grad", {"tokens", "targets"}, dir + "/out", "forward");
  ASSERT_EQ(grads.size(), kRmsShapes.size());
  kt::expectFixtureGradients(grads, dir + "/out", {}, 2e-6);
}

// A tied head over a vocabulary of 8200: the backward's product with the [L, V] gradient of
// the logits sums over K = V, long enough for kiln-tile-ops' K chunks (k_chunk = 2048, five
// chunks, the last partial), and the head's weight gradient is a weight_grad over 8200 rows of
// the result. The table's gradient is checked against the reference rules of tests/reference/vjp.h
// (cross-entropy, linear and embedding VJPs in double precision): at d = 512, finite
// differences over 4 million elements would take hours.
TEST(Gradients, AVocabularyWideHeadMatchesTheReferenceVjps) {
  const int64_t V = 8200, d = 512, P = 16, L = 13;
  std::map<std::string, std::vector<int64_t>> shapes = {{"emb", {V, d}}};
  std::string dir = kt::workDir("train_long_head");
  std::string exe = kt::compile(dir, "long_head", [&](kiln::Model &m) {
    kiln::Dim Ls = m.seq("L", P);
    auto tok = m.tokens("tokens", Ls, V);
    auto tgt = m.targets("targets", Ls, V);
    auto emb = param(m, shapes, "emb");
    m.loss(kiln::cross_entropy(kiln::linear(kiln::embedding(emb, tok), emb), tgt));
    m.gradients();
  }, {"--dump-dir", dir + "/dump"});
  ASSERT_FALSE(exe.empty());
  std::string chunked;
  for (auto &e : std::filesystem::directory_iterator(dir + "/dump"))
    if (e.path().filename().string().starts_with("kiln_matmul_") && e.path().extension() == ".txt") {
      std::ifstream f(e.path());
      std::string text(std::istreambuf_iterator<char>(f), {});
      if (text.find("s.k_chunk=2048") != std::string::npos) chunked = text;
    }
  EXPECT_FALSE(chunked.empty()) << "no matmul of the backward was given K chunks";
  std::vector<int32_t> tokens = kt::randomIds((int)L, (int)V, 31), targets = withIgnored(kt::randomIds((int)L, (int)V, 32));
  Params prm = randomParams(shapes, 33);
  const Mat &emb = prm.at("emb");
  Mat x = vjp::embedding(emb, tokens, d);
  Mat logits = linear(x, emb, {}, L, d, V);
  vjp::LinearGrads head = vjp::linearVjp(vjp::crossEntropyVjp(1.0, logits, targets, V), x, emb, L, d, V);
  Mat grad = head.dw, viaRows = vjp::embeddingVjp(head.dx, tokens, V, d);
  for (size_t e = 0; e < grad.size(); ++e) grad[e] += viaRows[e];
  kt::saveIds(dir + "/tokens.npy", tokens);
  kt::saveIds(dir + "/targets.npy", targets);
  checkGradients(dir, exe, prm, shapes, "--input tokens=" + dir + "/tokens.npy --input targets=" + dir + "/targets.npy",
                 vjp::crossEntropy(logits, targets, V), {{"emb", grad}});
}

// Mixed precision (--precision bf16 on a CPU): attention and its gradient round q, k and v to
// bfloat16. The gradients must be those of attention over the rounded operands, passed on to q,
// k and v unchanged: central differences of the unrounded double-precision loss taken at the
// rounded q, k and v. The loss (a mean of attention's output times an input c, no GEMM) must be
// the one at the rounded operands, which differs from the unrounded one at this tolerance.
TEST(Gradients, Bf16AttentionGradientsAreThoseAtTheRoundedOperands) {
  const int64_t L = 9, d = 8, H = 2;
  std::map<std::string, std::vector<int64_t>> shapes = {{"q", {L, d}}, {"k", {L, d}}, {"v", {L, d}}};
  std::string dir = kt::workDir("train_bf16_attention");
  std::string exe = kt::compile(dir, "bf16_attention", [&](kiln::Model &m) {
    auto c = m.input("c", {L, d});
    auto p = [&](const char *n) { return kiln::split_heads(param(m, shapes, n), H); };
    auto att = kiln::merge_heads(kiln::attention(p("q"), p("k"), p("v"), {.mask = kiln::Mask::causal()}));
    m.loss(kiln::mean(kiln::mul(att, c)));
    m.gradients();
  }, {"--target", "host", "--precision", "bf16"});
  ASSERT_FALSE(exe.empty());
  ref::T c = kt::randomT({L, d}, 3);
  kt::saveNpy(dir + "/c.npy", c);
  Params prm = randomParams(shapes, 31), at = prm;
  for (auto &[name, w] : at)
    for (double &x : w) x = kt::roundBf16((float)x);  // to bfloat16, to nearest even
  auto loss = [&](const Params &w) {
    Mat att = vjp::attentionHeads(w.at("q"), w.at("k"), w.at("v"), L, L, H, d / H, true);
    double sum = 0;
    for (size_t i = 0; i < att.size(); ++i) sum += att[i] * c.v[i];
    return sum / (double)att.size();
  };
  EXPECT_GT(std::abs(loss(prm) - loss(at)), 1e-5 * std::abs(loss(at))) << "rounding would go unnoticed";
  checkGradients(dir, exe, prm, shapes, "--input c=" + dir + "/c.npy", loss(at), finiteDifferences(at, loss));
}

}  // namespace
