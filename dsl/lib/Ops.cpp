// kiln DSL ops: shape checks and graph nodes. Checks name the op, each operand's role and both
// sizes, and are reported at the caller's line.
#include <cmath>

#include "kiln/dsl/Ops.h"

namespace kiln {
namespace {

Model &model_of(std::initializer_list<Tensor> ts, const char *op, const SourceLoc &loc) {
  Model *m = nullptr;
  for (const Tensor &t : ts) {
    if (!t) throw Error(std::string(op) + ": an operand is an empty tensor", loc);
    if (m && t.model() != m) throw Error(std::string(op) + ": operands come from different models", loc);
    m = t.model();
  }
  return *m;
}

void need(bool ok, const char *op, const std::string &msg, const SourceLoc &loc) {
  if (!ok) throw Error(std::string(op) + ": " + msg, loc);
}

// "the <role a> (<what a>) is X but the <role b> (<what b>) is Y"
void same_dim(const Model &m, const char *op, const std::string &a, Dim da, const std::string &b, Dim db,
              const SourceLoc &loc) {
  if (da != db)
    throw Error(std::string(op) + ": " + a + " is " + m.dim_str(da) + " but " + b + " is " + m.dim_str(db) +
                    "; they must be equal",
                loc);
}

void need_f32(const Model &m, const char *op, const char *role, Tensor t, const SourceLoc &loc) {
  (void)m;
  need(t.dtype() == DType::F32, op, std::string("the ") + role + " must be f32, got " + dtype_name(t.dtype()), loc);
}

void need_rank(const Model &m, const char *op, const char *role, Tensor t, int lo, int hi, const SourceLoc &loc) {
  if (t.rank() < lo || t.rank() > hi)
    throw Error(std::string(op) + ": the " + role + " must have rank " +
                    (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) + ", got " +
                    m.shape_str(t.shape()),
                loc);
}

Tensor make(Model &m, OpKind k, std::vector<int> in, Shape shape, const SourceLoc &loc, DType dt = DType::F32) {
  Node n{.kind = k, .inputs = std::move(in), .shape = std::move(shape), .dtype = dt};
  n.loc = loc;
  return m.add(std::move(n));
}
// A generic op (OpKind::Op): the dialect op `name` with `attrs`, an f32 result.
Tensor make_op(Model &m, const char *name, std::vector<int> in, Shape shape, std::vector<OpAttr> attrs,
               const SourceLoc &loc) {
  Node n{.kind = OpKind::Op, .inputs = std::move(in), .shape = std::move(shape)};
  n.op = name;
  n.attrs = std::move(attrs);
  n.loc = loc;
  return m.add(std::move(n));
}
}  // namespace

Tensor embedding(Tensor table, Tensor ids, SourceLoc loc) {
  Model &m = model_of({table, ids}, "embedding", loc);
  need_rank(m, "embedding", "table", table, 2, 2, loc);
  need_f32(m, "embedding", "table", table, loc);
  need_rank(m, "embedding", "ids", ids, 1, 1, loc);
  need(ids.dtype() == DType::I32, "embedding", "the ids must be i32 token ids, got f32", loc);
  const Node &in = ids.node();
  if (in.kind == OpKind::Input && in.vocab > table.dim(0).size)
    throw Error("embedding: the ids' vocab (input '" + in.name + "') is " + std::to_string(in.vocab) +
                    " but the table has only " + std::to_string(table.dim(0).size) + " rows",
                loc);
  return make(m, OpKind::Embedding, {table.id(), ids.id()}, {ids.dim(0), table.dim(1)}, loc);
}

Tensor position_embedding(Tensor table, Tensor like, PositionOptions opt, SourceLoc loc) {
  Model &m = model_of({table, like}, "position_embedding", loc);
  need_rank(m, "position_embedding", "table", table, 2, 2, loc);
  Dim L = like.dim(0);
  need(m.per_sequence(L).size <= table.dim(0).size, "position_embedding",
       "the sequence (" + m.dim_str(L) + ") can be longer than the table's " + std::to_string(table.dim(0).size) +
           " positions",
       loc);
  std::vector<int> ins{table.id(), like.id()};
  if (opt.start) {
    model_of({like, opt.start}, "position_embedding", loc);
    need(opt.start.dtype() == DType::I32 && opt.start.rank() == 1 && opt.start.dim(0) == Dim(1), "position_embedding",
         "start must be a [1] i32 tensor (the first position)", loc);
    ins.push_back(opt.start.id());
  }
  return make(m, OpKind::PositionEmbedding, ins, {L, table.dim(1)}, loc);
}

Tensor sinusoidal_positions(Tensor like, int64_t d, PositionOptions opt, SourceLoc loc) {
  Model &m = model_of({like}, "sinusoidal_positions", loc);
  need(d >= 2 && d % 2 == 0, "sinusoidal_positions", "the width must be a positive even number, got " + std::to_string(d), loc);
  std::vector<int> ins{like.id()};
  if (opt.start) {
    model_of({like, opt.start}, "sinusoidal_positions", loc);
    need(opt.start.dtype() == DType::I32 && opt.start.rank() == 1 && opt.start.dim(0) == Dim(1), "sinusoidal_positions",
         "start must be a [1] i32 tensor (the first position)", loc);
    ins.push_back(opt.start.id());
  }
  return make(m, OpKind::SinusoidalPositions, ins, {like.dim(0), d}, loc);
}

// A `past`: [1] i32 (one position for every sequence), or one per sequence when the op has one
// row per sequence of a batch (`rows` is the batch itself: a batched decode step, each sequence
// at its own position).
static void need_past(Model &m, const char *op, Tensor past, Dim rows, const std::string &what, SourceLoc loc) {
  const Dim d = past.rank() == 1 ? past.dim(0) : Dim();
  const bool perSequence = d.dynamic() && m.symbols().at(d.sym).batch && d == rows;
  need(past.dtype() == DType::I32 && past.rank() == 1 && (d == Dim(1) || perSequence), op,
       "past must be a [1] i32 tensor (" + what + ") or one per sequence of the batch its rows are ([" + m.dim_str(rows) +
           "] when the rows are that batch)",
       loc);
}

Tensor rope(Tensor x, RopeOptions opt, SourceLoc loc) {
  Model &m = model_of({x}, "rope", loc);
  need_f32(m, "rope", "input", x, loc);
  need_rank(m, "rope", "input (heads, rows, head dim)", x, 3, 3, loc);
  need(!x.dim(2).dynamic() && x.dim(2).size % 2 == 0, "rope",
       "the head dim must be static and even, got " + m.dim_str(x.dim(2)), loc);
  need(opt.theta > 1 && std::isfinite(opt.theta), "rope", "theta must be a finite number above 1, got " + std::to_string(opt.theta), loc);
  need(opt.scaling > 0 && std::isfinite(opt.scaling), "rope",
       "scaling must be a positive finite number, got " + std::to_string(opt.scaling), loc);
  need(opt.original_context >= 0, "rope", "original_context must be 0 (none) or positive, got " + std::to_string(opt.original_context),
       loc);
  need(opt.original_context == 0 ||
           (opt.low_freq_factor > 0 && opt.high_freq_factor > opt.low_freq_factor && std::isfinite(opt.high_freq_factor)),
       "rope",
       "with an original_context, 0 < low_freq_factor < high_freq_factor is needed, got " + std::to_string(opt.low_freq_factor) +
           " and " + std::to_string(opt.high_freq_factor),
       loc);
  std::vector<int> ins{x.id()};
  if (opt.past) {
    model_of({x, opt.past}, "rope", loc);
    need_past(m, "rope", opt.past, x.dim(1), "the first row's position", loc);
    ins.push_back(opt.past.id());
  }
  Node n{.kind = OpKind::Rope, .inputs = std::move(ins), .shape = x.shape()};
  n.rope_style = opt.style;
  n.theta = opt.theta;
  n.rope_scaling = opt.scaling;
  n.rope_original_context = opt.original_context;
  n.rope_low_freq_factor = opt.low_freq_factor;
  n.rope_high_freq_factor = opt.high_freq_factor;
  n.loc = loc;
  return m.add(std::move(n));
}

Tensor linear(Tensor x, Tensor w, LinearOptions opt, SourceLoc loc) { return linear(x, w, Tensor(), opt, loc); }

Tensor linear(Tensor x, Tensor w, Tensor bias, LinearOptions opt, SourceLoc loc) {
  Model &m = bias ? model_of({x, w, bias}, "linear", loc) : model_of({x, w}, "linear", loc);
  need_rank(m, "linear", "input", x, 1, 4, loc);
  need_rank(m, "linear", "weight", w, 2, 2, loc);
  need_f32(m, "linear", "input", x, loc);
  bool oi = opt.layout == WeightLayout::OutIn;
  Dim in = oi ? w.dim(1) : w.dim(0), out = oi ? w.dim(0) : w.dim(1);
  same_dim(m, "linear", "the input's last dim (in-features)", x.dim(-1),
           std::string("the weight's in-features (weight dim ") + (oi ? "1, layout OutIn" : "0, layout InOut") + ")",
           in, loc);
  std::vector<int> ins{x.id(), w.id()};
  if (bias) {
    need_rank(m, "linear", "bias", bias, 1, 1, loc);
    same_dim(m, "linear", "the bias length", bias.dim(0), "the weight's out-features", out, loc);
    ins.push_back(bias.id());
  }
  Shape s = x.shape();
  s.pop_back();
  s.push_back(out);
  Tensor r = make(m, OpKind::Linear, ins, s, loc);
  const_cast<Node &>(r.node()).layout = opt.layout;
  return r;
}

Tensor matmul(Tensor a, Tensor b, MatMulOptions opt, SourceLoc loc) {
  Model &m = model_of({a, b}, "matmul", loc);
  need_rank(m, "matmul", "left operand", a, 2, 2, loc);
  need_rank(m, "matmul", "right operand", b, 2, 2, loc);
  Dim k = opt.transpose_b ? b.dim(1) : b.dim(0), n = opt.transpose_b ? b.dim(0) : b.dim(1);
  same_dim(m, "matmul", "the left operand's columns", a.dim(1),
           opt.transpose_b ? "the right operand's columns (transpose_b)" : "the right operand's rows", k, loc);
  Tensor r = make(m, OpKind::MatMul, {a.id(), b.id()}, {a.dim(0), n}, loc);
  const_cast<Node &>(r.node()).transpose_b = opt.transpose_b;
  return r;
}

Tensor batch_matmul(Tensor a, Tensor b, MatMulOptions opt, SourceLoc loc) {
  Model &m = model_of({a, b}, "batch_matmul", loc);
  need_rank(m, "batch_matmul", "left operand", a, 3, 3, loc);
  need_rank(m, "batch_matmul", "right operand", b, 3, 3, loc);
  same_dim(m, "batch_matmul", "the left operand's batch", a.dim(0), "the right operand's batch", b.dim(0), loc);
  Dim k = opt.transpose_b ? b.dim(2) : b.dim(1), n = opt.transpose_b ? b.dim(1) : b.dim(2);
  same_dim(m, "batch_matmul", "the left operand's columns", a.dim(2),
           opt.transpose_b ? "the right operand's columns (transpose_b)" : "the right operand's rows", k, loc);
  Tensor r = make(m, OpKind::BatchMatMul, {a.id(), b.id()}, {a.dim(0), a.dim(1), n}, loc);
  const_cast<Node &>(r.node()).transpose_b = opt.transpose_b;
  return r;
}

static Tensor binary(OpKind k, const char *op, Tensor a, Tensor b, const SourceLoc &loc) {
  Model &m = model_of({a, b}, op, loc);
  need_f32(m, op, "left operand", a, loc);
  need_f32(m, op, "right operand", b, loc);
  need(b.rank() <= a.rank(), op,
       "the right operand " + m.shape_str(b.shape()) + " has more dims than the left operand " + m.shape_str(a.shape()) +
           " (only the right operand is broadcast)",
       loc);
  for (int i = 1; i <= b.rank(); ++i)
    if (a.dim(-i) != b.dim(-i))
      throw Error(std::string(op) + ": the left operand " + m.shape_str(a.shape()) + " and the right operand " +
                      m.shape_str(b.shape()) + " differ in dim " + std::to_string(a.rank() - i) + ": " +
                      m.dim_str(a.dim(-i)) + " vs " + m.dim_str(b.dim(-i)),
                  loc);
  return make(m, k, {a.id(), b.id()}, a.shape(), loc);
}
Tensor add(Tensor a, Tensor b, SourceLoc loc) { return binary(OpKind::Add, "add", a, b, loc); }
Tensor mul(Tensor a, Tensor b, SourceLoc loc) { return binary(OpKind::Mul, "mul", a, b, loc); }

static Tensor unary(OpKind k, const char *op, Tensor x, const SourceLoc &loc) {
  Model &m = model_of({x}, op, loc);
  need_f32(m, op, "input", x, loc);
  return make(m, k, {x.id()}, x.shape(), loc);
}
Tensor scale(Tensor x, float factor, SourceLoc loc) {
  need(std::isfinite(factor), "scale", "the factor must be finite", loc);
  Tensor r = unary(OpKind::Scale, "scale", x, loc);
  const_cast<Node &>(r.node()).factor = factor;
  return r;
}
Tensor gelu(Tensor x, GeluOptions opt, SourceLoc loc) {
  Tensor r = unary(OpKind::Gelu, "gelu", x, loc);
  const_cast<Node &>(r.node()).approx = opt.approx;
  return r;
}
Tensor relu(Tensor x, SourceLoc loc) { return unary(OpKind::Relu, "relu", x, loc); }
Tensor silu(Tensor x, SourceLoc loc) { return unary(OpKind::Silu, "silu", x, loc); }
Tensor softmax(Tensor x, SourceLoc loc) { return unary(OpKind::Softmax, "softmax", x, loc); }

Tensor layer_norm(Tensor x, Tensor gamma, Tensor beta, LayerNormOptions opt, SourceLoc loc) {
  Model &m = model_of({x, gamma, beta}, "layer_norm", loc);
  need_f32(m, "layer_norm", "input", x, loc);
  need_rank(m, "layer_norm", "gamma", gamma, 1, 1, loc);
  need_rank(m, "layer_norm", "beta", beta, 1, 1, loc);
  same_dim(m, "layer_norm", "the input's last dim", x.dim(-1), "the gamma length", gamma.dim(0), loc);
  same_dim(m, "layer_norm", "the input's last dim", x.dim(-1), "the beta length", beta.dim(0), loc);
  need(opt.eps > 0 && std::isfinite(opt.eps), "layer_norm", "eps must be positive", loc);
  Tensor r = make(m, OpKind::LayerNorm, {x.id(), gamma.id(), beta.id()}, x.shape(), loc);
  const_cast<Node &>(r.node()).eps = opt.eps;
  return r;
}

Tensor rms_norm(Tensor x, Tensor weight, RmsNormOptions opt, SourceLoc loc) {
  Model &m = model_of({x, weight}, "rms_norm", loc);
  need_f32(m, "rms_norm", "input", x, loc);
  need_rank(m, "rms_norm", "weight", weight, 1, 1, loc);
  same_dim(m, "rms_norm", "the input's last dim", x.dim(-1), "the weight length", weight.dim(0), loc);
  need(opt.eps > 0 && std::isfinite(opt.eps), "rms_norm", "eps must be positive", loc);
  return make_op(m, "rms_norm", {x.id(), weight.id()}, x.shape(), {{"epsilon", OpAttr::Type::F32, opt.eps}}, loc);
}

Tensor l2_normalize(Tensor x, L2NormalizeOptions opt, SourceLoc loc) {
  Model &m = model_of({x}, "l2_normalize", loc);
  need_f32(m, "l2_normalize", "input", x, loc);
  need(opt.eps > 0 && std::isfinite(opt.eps), "l2_normalize", "eps must be positive", loc);
  return make_op(m, "l2_normalize", {x.id()}, x.shape(), {{"epsilon", OpAttr::Type::F32, opt.eps}}, loc);
}

Tensor mean_pool(Tensor x, MeanPoolOptions opt, SourceLoc loc) {
  Model &m = model_of({x}, "mean_pool", loc);
  need_f32(m, "mean_pool", "input", x, loc);
  need_rank(m, "mean_pool", "input", x, 2, 2, loc);
  const Dim rows = x.dim(0);
  const int batch = rows.dynamic() ? m.symbols().at(rows.sym).rows_of : -1;  // the B of rows(B, L)
  std::vector<int> ins{x.id()};
  if (opt.mask) {
    model_of({x, opt.mask}, "mean_pool", loc);
    need(opt.mask.dtype() == DType::I32 && opt.mask.rank() == 1, "mean_pool", "the mask must be a 1-D i32 tensor (0: padding)", loc);
    same_dim(m, "mean_pool", "the input rows", rows, "the mask length", opt.mask.dim(0), loc);
    ins.push_back(opt.mask.id());
  }
  Shape out{batch >= 0 ? Dim(m.symbols().at(batch).max, batch) : Dim(1), x.dim(1)};
  return make_op(m, "mean_pool", ins, out, {{"batch", OpAttr::Type::I64, (double)batch}}, loc);
}

Tensor reshape(Tensor x, Shape shape, SourceLoc loc) {
  Model &m = model_of({x}, "reshape", loc);
  int64_t a = 1, b = 1;
  std::vector<int> da, db;
  for (auto &d : x.shape()) d.dynamic() ? da.push_back(d.sym) : (void)(a *= d.size);
  for (auto &d : shape) {
    need(d.dynamic() || d.size >= 1, "reshape", "target dims must be positive, got " + m.shape_str(shape), loc);
    d.dynamic() ? db.push_back(d.sym) : (void)(b *= d.size);
  }
  need(da == db && a == b, "reshape",
       "cannot reshape " + m.shape_str(x.shape()) + " to " + m.shape_str(shape) +
           ": the element counts differ (sequence lengths must stay whole dims, in order)",
       loc);
  need(!shape.empty() && shape.size() <= 4, "reshape", "the target rank must be 1 to 4", loc);
  return make(m, OpKind::Reshape, {x.id()}, shape, loc, x.dtype());
}

Tensor transpose(Tensor x, std::vector<int64_t> perm, SourceLoc loc) {
  Model &m = model_of({x}, "transpose", loc);
  need((int)perm.size() == x.rank(), "transpose",
       "the permutation has " + std::to_string(perm.size()) + " entries but the input " + m.shape_str(x.shape()) +
           " has rank " + std::to_string(x.rank()),
       loc);
  std::vector<bool> seen(perm.size());
  Shape s;
  for (int64_t p : perm) {
    need(p >= 0 && p < x.rank() && !seen[p], "transpose", "the permutation is not a permutation of 0.." + std::to_string(x.rank() - 1), loc);
    seen[p] = true;
    s.push_back(x.dim((int)p));
  }
  Tensor r = make(m, OpKind::Transpose, {x.id()}, s, loc, x.dtype());
  const_cast<Node &>(r.node()).perm = perm;
  return r;
}

Tensor split_heads(Tensor x, int64_t heads, SourceLoc loc) {
  Model &m = model_of({x}, "split_heads", loc);
  need_rank(m, "split_heads", "input", x, 2, 2, loc);
  need(heads >= 1 && x.dim(1).size % heads == 0 && !x.dim(1).dynamic(), "split_heads",
       "the model width " + m.dim_str(x.dim(1)) + " is not divisible by the " + std::to_string(heads) + " heads", loc);
  Tensor r = reshape(x, {x.dim(0), heads, x.dim(1).size / heads}, loc);
  return transpose(r, {1, 0, 2}, loc);
}

Tensor merge_heads(Tensor x, SourceLoc loc) {
  Model &m = model_of({x}, "merge_heads", loc);
  need_rank(m, "merge_heads", "input", x, 3, 3, loc);
  Tensor t = transpose(x, {1, 0, 2}, loc);
  return reshape(t, {x.dim(1), x.dim(0).size * x.dim(2).size}, loc);
}

Tensor concat(std::vector<Tensor> xs, int64_t axis, SourceLoc loc) {
  need(!xs.empty(), "concat", "needs at least one operand", loc);
  Model &m = model_of({xs[0]}, "concat", loc);
  int r = xs[0].rank();
  need(axis >= 0 && axis < r, "concat", "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r), loc);
  Shape s = xs[0].shape();
  need(!s[axis].dynamic(), "concat", "cannot concatenate along a sequence length", loc);
  std::vector<int> ids{xs[0].id()};
  for (size_t i = 1; i < xs.size(); ++i) {
    model_of({xs[0], xs[i]}, "concat", loc);
    need(xs[i].rank() == r, "concat", "operand " + std::to_string(i) + " has rank " + std::to_string(xs[i].rank()) +
                                          " but operand 0 has rank " + std::to_string(r), loc);
    for (int d = 0; d < r; ++d)
      if (d != axis)
        same_dim(m, "concat", "operand 0's dim " + std::to_string(d), xs[0].dim(d),
                 "operand " + std::to_string(i) + "'s dim " + std::to_string(d), xs[i].dim(d), loc);
    need(!xs[i].dim((int)axis).dynamic(), "concat", "cannot concatenate along a sequence length", loc);
    s[axis].size += xs[i].dim((int)axis).size;
    ids.push_back(xs[i].id());
  }
  Tensor t = make(m, OpKind::Concat, ids, s, loc, xs[0].dtype());
  const_cast<Node &>(t.node()).axis = axis;
  return t;
}

Tensor slice(Tensor x, int64_t axis, int64_t offset, int64_t size, SourceLoc loc) {
  Model &m = model_of({x}, "slice", loc);
  need(axis >= 0 && axis < x.rank(), "slice", "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()), loc);
  Dim d = x.dim((int)axis);
  need(!d.dynamic(), "slice", "cannot slice along a sequence length", loc);
  need(offset >= 0 && size >= 1 && offset + size <= d.size, "slice",
       "the range [" + std::to_string(offset) + ", " + std::to_string(offset + size) + ") does not fit in dim " +
           std::to_string(axis) + " of size " + std::to_string(d.size),
       loc);
  Shape s = x.shape();
  s[axis] = size;
  Tensor t = make(m, OpKind::Slice, {x.id()}, s, loc, x.dtype());
  Node &n = const_cast<Node &>(t.node());
  n.axis = axis;
  n.offset = offset;
  return t;
}

Tensor last(Tensor x, int64_t axis, SourceLoc loc) {
  Model &m = model_of({x}, "last", loc);
  need(axis >= 0 && axis < x.rank(), "last", "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()), loc);
  Shape s = x.shape();
  s[axis] = 1;
  Tensor t = make(m, OpKind::Slice, {x.id()}, s, loc, x.dtype());
  Node &n = const_cast<Node &>(t.node());
  n.axis = axis;
  n.offset = -1;  // counted from the end: the slice [size - 1, size)
  return t;
}

std::vector<Tensor> split(Tensor x, int64_t axis, std::vector<int64_t> sizes, SourceLoc loc) {
  Model &m = model_of({x}, "split", loc);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  need(axis >= 0 && axis < x.rank() && total == x.dim((int)axis).size, "split",
       "the sizes add up to " + std::to_string(total) + " but dim " + std::to_string(axis) + " of " +
           m.shape_str(x.shape()) + " is not that",
       loc);
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, axis, off, s, loc));
    off += s;
  }
  return out;
}

// A pattern's parameters, checked against the attention's shapes.
static void check_pattern(Model &m, const Mask &mk, Tensor q, Tensor k, const AttentionOptions &opt, const SourceLoc &loc) {
  if (!mk.sparse()) return;
  if (mk.kind == Mask::Window && opt.past) {  // a sliding window over a cache: i + past - w < j <= i + past
    need(!opt.key_count && !opt.key_mask, "attention", "a window over a cache does not combine with key_count or key_mask", loc);
  } else {
    need(!opt.past && !opt.key_count && !opt.key_mask, "attention",
         "sparse patterns other than window do not combine with past, key_count or key_mask", loc);
    same_dim(m, "attention", "the query length", q.dim(1), "the key length (a sparse pattern is for self-attention)", k.dim(1), loc);
  }
  auto positive = [&](const char *what, int64_t v) {
    need(v >= 1, "attention", std::string(what) + " must be at least 1, got " + std::to_string(v), loc);
  };
  switch (mk.kind) {
    case Mask::Window: positive("the window", mk.size); break;
    case Mask::Strided: positive("the stride", mk.size); break;
    case Mask::Fixed:
      positive("the fixed pattern's block", mk.size);
      need(mk.summary >= 1 && mk.summary <= mk.size, "attention",
           "the fixed pattern's summary positions per block must lie in [1, block = " + std::to_string(mk.size) + "], got " +
               std::to_string(mk.summary),
           loc);
      break;
    case Mask::Layout: {
      positive("the layout's block", mk.size);
      int64_t n = (int64_t)mk.layout.size();
      need(n >= 1, "attention", "the block layout has no rows", loc);
      for (int64_t r = 0; r < n; ++r)
        need((int64_t)mk.layout[r].size() == n && mk.layout[r].find_first_not_of("#.") == std::string::npos, "attention",
             "block layout row " + std::to_string(r) + " is '" + mk.layout[r] + "': every row must have " + std::to_string(n) +
                 " characters, '#' (visited) or '.'",
             loc);
      need(n * mk.size >= q.dim(1).size, "attention",
           "the block layout covers " + std::to_string(n) + " blocks x " + std::to_string(mk.size) + " = " +
               std::to_string(n * mk.size) + " positions but the query length " + m.dim_str(q.dim(1)) + " can reach " +
               std::to_string(q.dim(1).size),
           loc);
      break;
    }
    default: break;
  }
}

Tensor attention(Tensor q, Tensor k, Tensor v, AttentionOptions opt, SourceLoc loc) {
  Model &m = model_of({q, k, v}, "attention", loc);
  if (!opt.head_masks.empty()) {  // one attention per group of heads, concatenated
    need(opt.mask.kind == Mask::None, "attention", "give mask or head_masks, not both", loc);
    need_rank(m, "attention", "query", q, 3, 3, loc);
    int64_t H = q.dim(0).size, n = (int64_t)opt.head_masks.size();
    need(!q.dim(0).dynamic() && H % n == 0, "attention",
         "head_masks has " + std::to_string(n) + " masks but the " + std::to_string(H) + " heads do not split into that many groups",
         loc);
    std::vector<Tensor> parts;
    for (int64_t g = 0; g < n; ++g) {
      AttentionOptions o = opt;
      o.head_masks.clear();
      o.mask = opt.head_masks[g];
      auto heads = [&](Tensor t) { return slice(t, 0, g * H / n, H / n, loc); };
      parts.push_back(attention(heads(q), heads(k), heads(v), o, loc));
    }
    return n == 1 ? parts[0] : concat(parts, 0, loc);
  }
  need_rank(m, "attention", "query", q, 3, 3, loc);
  need_rank(m, "attention", "key", k, 3, 3, loc);
  need_rank(m, "attention", "value", v, 3, 3, loc);
  same_dim(m, "attention", "the key heads", k.dim(0), "the value heads", v.dim(0), loc);
  if (q.dim(0) != k.dim(0)) {  // grouped-query attention: each key head serves H / Hkv query heads
    need(!q.dim(0).dynamic() && !k.dim(0).dynamic() && q.dim(0).size % k.dim(0).size == 0, "attention",
         "the key heads (" + m.dim_str(k.dim(0)) + ") must equal or divide the query heads (" + m.dim_str(q.dim(0)) + ")", loc);
    need(opt.mask.kind == Mask::None || opt.mask.kind == Mask::Causal || opt.mask.kind == Mask::Window, "attention",
         "grouped-query attention (" + m.dim_str(q.dim(0)) + " query heads, " + m.dim_str(k.dim(0)) +
             " key heads) takes masks none, causal and window only",
         loc);
  }
  same_dim(m, "attention", "the query head dim", q.dim(2), "the key head dim", k.dim(2), loc);
  same_dim(m, "attention", "the key length", k.dim(1), "the value length", v.dim(1), loc);
  // Over a batch's rows (Model::rows), each sequence attends to its own keys: the keys must be
  // rows of the same batch (or a cache, in an entry that runs one sequence).
  auto batchOf = [&](const Dim &d) { return d.dynamic() ? m.symbols().at(d.sym).rows_of : -1; };
  if (int qb = batchOf(q.dim(1)), kb = batchOf(k.dim(1)); qb != kb && (qb >= 0 || kb >= 0) && k.dim(1).dynamic())
    need(false, "attention",
         "the query rows " + m.dim_str(q.dim(1)) + " and the key rows " + m.dim_str(k.dim(1)) +
             " must both be rows of the same batch (Model::rows) or neither",
         loc);
  check_pattern(m, opt.mask, q, k, opt, loc);
  float sc = opt.scale ? *opt.scale : 1.0f / std::sqrt((float)q.dim(2).size);
  need(std::isfinite(sc), "attention", "the scale must be finite", loc);
  std::vector<int> ins{q.id(), k.id(), v.id()};
  if (opt.past) {
    model_of({q, opt.past}, "attention", loc);
    need_past(m, "attention", opt.past, q.dim(1), "the number of cached positions", loc);
    ins.push_back(opt.past.id());
  }
  if (opt.key_count) {
    model_of({q, opt.key_count}, "attention", loc);
    need(!opt.past, "attention", "give past or key_count, not both", loc);
    need(opt.key_count.dtype() == DType::I32 && opt.key_count.rank() == 1 && opt.key_count.dim(0) == Dim(1),
         "attention", "key_count must be a [1] i32 tensor (the number of valid keys)", loc);
    ins.push_back(opt.key_count.id());
  }
  if (opt.key_mask) {
    model_of({q, opt.key_mask}, "attention", loc);
    need(!opt.past && !opt.key_count, "attention", "key_mask does not combine with past or key_count", loc);
    need(opt.key_mask.dtype() == DType::I32 && opt.key_mask.rank() == 1, "attention",
         "key_mask must be a 1-D i32 tensor over the keys (0: padding)", loc);
    same_dim(m, "attention", "the key rows", k.dim(1), "the key_mask length", opt.key_mask.dim(0), loc);
    ins.push_back(opt.key_mask.id());
  }
  Tensor r = make(m, OpKind::Attention, ins, {q.dim(0), q.dim(1), v.dim(2)}, loc);
  Node &n = const_cast<Node &>(r.node());
  n.key_count = bool(opt.key_count);
  n.key_mask = bool(opt.key_mask);
  n.mask = opt.mask;
  n.factor = sc;
  return r;
}

Tensor lsh_attention(Tensor qk, Tensor v, Tensor rot, LshOptions opt, SourceLoc loc) {
  Model &m = model_of({qk, v, rot}, "lsh_attention", loc);
  need_rank(m, "lsh_attention", "qk", qk, 3, 3, loc);
  need_rank(m, "lsh_attention", "value", v, 3, 3, loc);
  need_rank(m, "lsh_attention", "rotations", rot, 3, 3, loc);
  same_dim(m, "lsh_attention", "the qk heads", qk.dim(0), "the value heads", v.dim(0), loc);
  same_dim(m, "lsh_attention", "the qk length", qk.dim(1), "the value length", v.dim(1), loc);
  need(opt.buckets >= 2 && opt.buckets % 2 == 0, "lsh_attention",
       "buckets must be an even number, at least 2, got " + std::to_string(opt.buckets), loc);
  need(opt.hashes >= 1, "lsh_attention", "hashes must be at least 1, got " + std::to_string(opt.hashes), loc);
  need(opt.chunk >= 1, "lsh_attention", "chunk must be at least 1, got " + std::to_string(opt.chunk), loc);
  same_dim(m, "lsh_attention", "the rotations' rounds (dim 0)", rot.dim(0), "hashes", Dim(opt.hashes), loc);
  same_dim(m, "lsh_attention", "the rotations' rows (dim 1)", rot.dim(1), "the qk head dim", qk.dim(2), loc);
  same_dim(m, "lsh_attention", "the rotations' columns (dim 2)", rot.dim(2), "buckets / 2", Dim(opt.buckets / 2), loc);
  float sc = opt.scale ? *opt.scale : 1.0f / std::sqrt((float)qk.dim(2).size);
  need(std::isfinite(sc), "lsh_attention", "the scale must be finite", loc);
  Tensor r = make(m, OpKind::LshAttention, {qk.id(), v.id(), rot.id()}, {qk.dim(0), qk.dim(1), v.dim(2)}, loc);
  Node &n = const_cast<Node &>(r.node());
  n.buckets = opt.buckets;
  n.hashes = opt.hashes;
  n.chunk = opt.chunk;
  n.mask = opt.causal ? Mask::causal() : Mask::none();
  n.factor = sc;
  return r;
}

Tensor depthwise_conv(Tensor x, Tensor w, Tensor b, DepthwiseConvOptions opt, SourceLoc loc) {
  Model &m = model_of({x, w, b}, "depthwise_conv", loc);
  need_rank(m, "depthwise_conv", "input", x, 2, 2, loc);
  need_rank(m, "depthwise_conv", "weight", w, 2, 2, loc);
  need_rank(m, "depthwise_conv", "bias", b, 1, 1, loc);
  for (Tensor t : {x, w, b}) need_f32(m, "depthwise_conv", "operands", t, loc);
  need(!w.dim(0).dynamic() && w.dim(0).size % 2 == 1, "depthwise_conv",
       "the kernel size (weight dim 0) must be odd, got " + m.dim_str(w.dim(0)), loc);
  same_dim(m, "depthwise_conv", "the weight's width (dim 1)", w.dim(1), "the input's width", x.dim(1), loc);
  same_dim(m, "depthwise_conv", "the bias length", b.dim(0), "the input's width", x.dim(1), loc);
  Node n{.kind = OpKind::DepthwiseConv, .inputs = {x.id(), w.id(), b.id()}, .shape = x.shape()};
  n.mask = opt.causal ? Mask::causal() : Mask::none();
  n.loc = loc;
  return m.add(std::move(n));
}

Tensor cache_write(Tensor cache, Tensor value, Tensor past, SourceLoc loc) {
  Model &m = model_of({cache, value}, "cache_write", loc);
  need(cache.node().kind == OpKind::State || cache.node().kind == OpKind::CacheWrite, "cache_write",
       "the cache must be a state (Model::state) or another cache_write's result", loc);
  need_rank(m, "cache_write", "cache", cache, 3, 3, loc);
  need_rank(m, "cache_write", "value", value, 3, 3, loc);
  same_dim(m, "cache_write", "the cache's heads", cache.dim(0), "the value's heads", value.dim(0), loc);
  same_dim(m, "cache_write", "the cache's row width", cache.dim(2), "the value's row width", value.dim(2), loc);
  // The state the cache is (a chain of cache_writes from it): one buffer, or one per sequence.
  const Node *root = &cache.node();
  while (root->kind == OpKind::CacheWrite) root = &m.nodes()[root->inputs[0]];
  const Dim rows = value.dim(1);
  const bool rowPerSequence = rows.dynamic() && m.symbols().at(rows.sym).batch;  // [H, B, d]: a batched decode step
  const int valueBatch = !rows.dynamic() ? -1 : rowPerSequence ? rows.sym : m.symbols().at(rows.sym).rows_of;
  need(!rowPerSequence || root->state_batch == valueBatch, "cache_write",
       "a value of one row per sequence of " + m.dim_str(rows) + " needs a state per sequence of it (Model::state with a batch)", loc);
  need(root->state_batch < 0 || valueBatch < 0 || root->state_batch == valueBatch, "cache_write",
       "the value's rows " + m.dim_str(rows) + " are not of the batch the state '" + root->name + "' holds a cache per sequence of", loc);
  need((rowPerSequence ? 1 : m.per_sequence(rows).size) <= cache.dim(1).size, "cache_write",  // a batch's entry: one sequence
       "the value has up to " + m.dim_str(rows) + " rows but the cache holds " + std::to_string(cache.dim(1).size), loc);
  std::vector<int> ins{cache.id(), value.id()};
  if (past) {
    model_of({cache, past}, "cache_write", loc);
    need_past(m, "cache_write", past, rows, "the first row to write", loc);
    ins.push_back(past.id());
  }
  return make(m, OpKind::CacheWrite, ins, cache.shape(), loc);
}

Tensor mask_for(Tensor scores, Mask mask, SourceLoc loc) {
  Model &m = model_of({scores}, "mask_for", loc);
  need_rank(m, "mask_for", "scores", scores, 2, 3, loc);
  need(mask.kind == Mask::Causal, "mask_for", "only Mask::causal() has an additive form (give patterns to attention)", loc);
  Tensor r = make(m, OpKind::Mask, {scores.id()}, scores.shape(), loc);
  const_cast<Node &>(r.node()).mask = mask;
  return r;
}

Tensor mean(Tensor x, SourceLoc loc) {
  Model &m = model_of({x}, "mean", loc);
  need_f32(m, "mean", "input", x, loc);
  return make(m, OpKind::Mean, {x.id()}, {Dim(1)}, loc);
}

Tensor cross_entropy(Tensor logits, Tensor targets, CrossEntropyOptions opt, SourceLoc loc) {
  Model &m = model_of({logits, targets}, "cross_entropy", loc);
  need_rank(m, "cross_entropy", "logits", logits, 2, 2, loc);
  need_f32(m, "cross_entropy", "logits", logits, loc);
  need_rank(m, "cross_entropy", "targets", targets, 1, 1, loc);
  need(targets.dtype() == DType::I32, "cross_entropy", "the targets must be i32 token ids, got f32", loc);
  same_dim(m, "cross_entropy", "the logits' rows", logits.dim(0), "the targets' length", targets.dim(0), loc);
  need(opt.ignore_index < 0, "cross_entropy", "ignore_index must be negative, got " + std::to_string(opt.ignore_index), loc);
  const Node &tn = targets.node();
  if (tn.kind == OpKind::Input && tn.vocab > logits.dim(1).size)
    throw Error("cross_entropy: the targets' vocab (input '" + tn.name + "') is " + std::to_string(tn.vocab) +
                    " but the logits have only " + std::to_string(logits.dim(1).size) + " classes",
                loc);
  if (tn.kind == OpKind::Input && tn.ignore_index != 0 && tn.ignore_index != opt.ignore_index)
    throw Error("cross_entropy: the targets (input '" + tn.name + "') mark ignored positions with " +
                    std::to_string(tn.ignore_index) + " but ignore_index is " + std::to_string(opt.ignore_index),
                loc);
  Tensor r = make(m, OpKind::CrossEntropy, {logits.id(), targets.id()}, {Dim(1)}, loc);
  const_cast<Node &>(r.node()).ignore_index = opt.ignore_index;
  return r;
}

}  // namespace kiln
