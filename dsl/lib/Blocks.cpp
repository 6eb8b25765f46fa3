// kiln DSL building blocks: multi-head attention, FFN, transformer block (pre- and post-norm).
#include "kiln/dsl/Blocks.h"

#include <cmath>

namespace kiln {

Tensor dense(Model &m, const std::string &name, Tensor x, int64_t in, int64_t out, DenseOptions opt, SourceLoc loc) {
  Shape ws = opt.layout == WeightLayout::OutIn ? Shape{out, in} : Shape{in, out};
  Tensor w = m.param(name + ".weight", ws, {}, loc);
  Tensor b = m.param(name + ".bias", {out}, {.init = Init::Zeros}, loc);
  return linear(x, w, b, {.layout = opt.layout}, loc);
}

Tensor norm(Model &m, const std::string &p, Tensor x, LayerNormOptions opt, SourceLoc loc) {
  if (x.rank() < 1 || x.dim(x.rank() - 1).dynamic()) throw Error("norm: the last dim must be static", loc);
  int64_t d = x.dim(x.rank() - 1).size;
  Tensor g = m.param(p + ".weight", {d}, {.init = Init::Ones}, loc);
  Tensor b = m.param(p + ".bias", {d}, {.init = Init::Zeros}, loc);
  return layer_norm(x, g, b, opt, loc);
}

Tensor multi_head_attention(Model &m, const std::string &p, Tensor x, Tensor kv, AttentionBlockOptions o,
                            SourceLoc loc) {
  if (o.d_model <= 0 || o.heads <= 0 || o.d_model % o.heads)
    throw Error("multi_head_attention: d_model (" + std::to_string(o.d_model) + ") must be a positive multiple of heads (" +
                    std::to_string(o.heads) + ")",
                loc);
  Tensor q = dense(m, p + ".q", x, o.d_model, o.d_model, {.layout = o.layout}, loc);
  Tensor k = dense(m, p + ".k", kv, o.d_model, o.d_model, {.layout = o.layout}, loc);
  Tensor v = dense(m, p + ".v", kv, o.d_model, o.d_model, {.layout = o.layout}, loc);
  Tensor a = attention(split_heads(q, o.heads, loc), split_heads(k, o.heads, loc), split_heads(v, o.heads, loc),
                       {.mask = o.mask}, loc);
  return dense(m, p + ".out", merge_heads(a, loc), o.d_model, o.d_model, {.layout = o.layout}, loc);
}

Tensor ffn(Model &m, const std::string &p, Tensor x, FfnOptions o, SourceLoc loc) {
  if (o.d_model <= 0 || o.d_ff <= 0) throw Error("ffn: d_model and d_ff must be positive", loc);
  Tensor h = dense(m, p + ".fc1", x, o.d_model, o.d_ff, {.layout = o.layout}, loc);
  h = o.act == Activation::Relu ? relu(h, loc)
                                : gelu(h, {.approx = o.act == Activation::GeluTanh ? GeluApprox::Tanh : GeluApprox::Erf}, loc);
  return dense(m, p + ".fc2", h, o.d_ff, o.d_model, {.layout = o.layout}, loc);
}

Tensor transformer_block(Model &m, const std::string &p, Tensor x, BlockOptions o, SourceLoc loc) {
  AttentionBlockOptions ao{.d_model = o.d_model, .heads = o.heads, .mask = o.mask, .layout = o.layout};
  FfnOptions fo{.d_model = o.d_model, .d_ff = o.d_ff, .act = o.act, .layout = o.layout};
  if (o.norm == NormPlacement::Pre) {
    Tensor h = norm(m, p + ".ln_1", x, {.eps = o.eps}, loc);
    x = add(x, multi_head_attention(m, p + ".attn", h, h, ao, loc), loc);
    Tensor h2 = norm(m, p + ".ln_2", x, {.eps = o.eps}, loc);
    return add(x, ffn(m, p + ".mlp", h2, fo, loc), loc);
  }
  x = norm(m, p + ".ln_1", add(x, multi_head_attention(m, p + ".attn", x, x, ao, loc), loc), {.eps = o.eps}, loc);
  return norm(m, p + ".ln_2", add(x, ffn(m, p + ".mlp", x, fo, loc), loc), {.eps = o.eps}, loc);
}

// The halves of x [L, 2c], checked.
static std::pair<Tensor, Tensor> halves(Tensor x, const char *op, SourceLoc loc) {
  if (x.rank() != 2 || x.dim(1).dynamic() || x.dim(1).size % 2)
    throw Error(std::string(op) + ": the input must be [L, 2c] with an even, static column count", loc);
  int64_t c = x.dim(1).size / 2;
  return {slice(x, 1, 0, c, loc), slice(x, 1, c, c, loc)};
}

static Tensor checked(const SubLayer &f, Tensor in, const char *op, const char *which, SourceLoc loc) {
  Tensor out = f(in);
  if (!out || out.rank() != 2 || out.dim(0) != in.dim(0) || out.dim(1) != in.dim(1))
    throw Error(std::string(op) + ": " + which + " must map [L, c] to [L, c] (c = " + std::to_string(in.dim(1).size) + ")",
                loc);
  return out;
}

Tensor reversible(Tensor x, const SubLayer &F, const SubLayer &G, SourceLoc loc) {
  if (!x) throw Error("reversible: no input", loc);
  Model &m = *x.model();
  int layer = m.new_reversible(loc);
  auto glue = [&](const std::function<Tensor()> &fn) { return m.reversible_part(layer, 0, fn, loc); };
  Tensor x1, x2;
  glue([&] {
    std::tie(x1, x2) = halves(x, "reversible", loc);
    return x1;
  });
  Tensor y1 = glue([&] { return add(x1, m.reversible_part(layer, 1, [&] { return checked(F, x2, "reversible", "F", loc); }, loc), loc); });
  Tensor y2 = glue([&] { return add(x2, m.reversible_part(layer, 2, [&] { return checked(G, y1, "reversible", "G", loc); }, loc), loc); });
  return glue([&] { return concat({y1, y2}, 1, loc); });
}

Tensor reversible_inverse(Tensor y, const SubLayer &F, const SubLayer &G, SourceLoc loc) {
  auto [y1, y2] = halves(y, "reversible_inverse", loc);
  Tensor x2 = add(y2, scale(checked(G, y1, "reversible_inverse", "G", loc), -1.0f, loc), loc);
  Tensor x1 = add(y1, scale(checked(F, x2, "reversible_inverse", "F", loc), -1.0f, loc), loc);
  return concat({x1, x2}, 1, loc);
}

Recurrent recurrent(Model &m, const std::string &prefix, Tensor x, const SubLayer &step, RecurrentOptions opt,
                    SourceLoc loc) {
  if (!x || x.model() != &m) throw Error("recurrent: the state does not belong to this model", loc);
  if (x.rank() != 2 || x.dim(1).dynamic() || x.dtype() != DType::F32)
    throw Error("recurrent: the state must be an f32 [L, d] tensor with a static d, got " + m.shape_str(x.shape()), loc);
  if (opt.max_steps < 1 || opt.max_steps > 1000)
    throw Error("recurrent: max_steps must be 1 to 1000, got " + std::to_string(opt.max_steps), loc);
  if (!(opt.act.epsilon > 0.0f && opt.act.epsilon < 1.0f))
    throw Error("recurrent: act.epsilon must be in (0, 1), got " + std::to_string(opt.act.epsilon), loc);
  if (!(opt.act.ponder_weight >= 0.0f && std::isfinite(opt.act.ponder_weight)))
    throw Error("recurrent: act.ponder_weight must be finite and >= 0, got " + std::to_string(opt.act.ponder_weight), loc);
  int64_t d = x.dim(1).size;
  if (d % 2) throw Error("recurrent: the state width must be even (sinusoidal signals), got " + std::to_string(d), loc);
  Tensor hw = m.param(prefix + ".halt.weight", {d}, {}, loc);
  Tensor hb = m.param(prefix + ".halt.bias", {1}, {.init = Init::Ones}, loc);
  int region = m.begin_region(loc);
  Tensor arg, out;
  try {
    Node a{.kind = OpKind::StepInput, .shape = x.shape()};
    a.loc = loc;
    arg = m.add(a);
    out = step(arg);
  } catch (...) {
    m.end_region();
    throw;
  }
  m.end_region();
  if (!out || out.model() != &m || !(out.shape() == x.shape()) || out.dtype() != DType::F32)
    throw Error("recurrent: the step must map the state " + m.shape_str(x.shape()) + " to the same shape, got " +
                    (out && out.model() == &m ? m.shape_str(out.shape()) : std::string("no tensor of this model")),
                loc);
  if (out.node().region != region && out.id() != arg.id())
    throw Error("recurrent: the step must return a tensor computed inside it", loc);
  Node r{.kind = OpKind::Recurrent, .inputs = {x.id(), hw.id(), hb.id()}, .shape = x.shape()};
  r.body = region;
  r.body_arg = arg.id();
  r.body_out = out.id();
  r.max_steps = opt.max_steps;
  r.eps = opt.act.epsilon;
  r.loc = loc;
  Tensor hidden = m.add(r);
  auto result = [&](int which, DType dt, Shape shape) {
    Node n{.kind = OpKind::RecurrentResult, .inputs = {hidden.id()}, .shape = shape, .dtype = dt};
    n.axis = which;
    n.loc = loc;
    return m.add(n);
  };
  Recurrent res{hidden, result(1, DType::F32, {x.dim(0)}), result(2, DType::I32, {x.dim(0)}),
                result(3, DType::I32, {Dim(1)})};
  if (opt.act.ponder_weight > 0.0f) m.loss_if_any(res.ponder, opt.act.ponder_weight, prefix + ".ponder", loc);
  return res;
}

Tensor universal_block(Model &m, const std::string &p, Tensor x, UniversalBlockOptions o, SourceLoc loc) {
  if (o.d_ff <= 0) throw Error("universal_block: d_ff must be positive", loc);
  AttentionBlockOptions ao{.d_model = o.d_model, .heads = o.heads, .mask = o.mask};
  x = norm(m, p + ".ln_1", add(x, multi_head_attention(m, p + ".attn", x, x, ao, loc), loc), {.eps = o.eps}, loc);
  Tensor t;
  if (o.transition == Transition::Ffn) {
    t = ffn(m, p + ".ffn", x, {.d_model = o.d_model, .d_ff = o.d_ff, .act = Activation::Relu}, loc);
  } else {
    if (o.kernel < 1 || o.kernel % 2 == 0)
      throw Error("universal_block: the convolution kernel must be odd, got " + std::to_string(o.kernel), loc);
    Tensor w = m.param(p + ".conv.depthwise.weight", {o.kernel, o.d_model}, {.scale = 0.3f}, loc);
    Tensor b = m.param(p + ".conv.depthwise.bias", {o.d_model}, {.init = Init::Zeros}, loc);
    Tensor h = relu(dense(m, p + ".conv.pointwise1", depthwise_conv(x, w, b, {.causal = o.mask.kind == Mask::Causal}, loc), o.d_model, o.d_ff, {}, loc), loc);
    t = dense(m, p + ".conv.pointwise2", h, o.d_ff, o.d_model, {}, loc);
  }
  return norm(m, p + ".ln_2", add(x, t, loc), {.eps = o.eps}, loc);
}

}  // namespace kiln
