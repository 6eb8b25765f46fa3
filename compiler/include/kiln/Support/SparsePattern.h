// SparsePattern.h - the sparse attention patterns and their block schedules, written once for
// two kinds of numbers: plain integers (the cost report, the schedule picture, tests) and
// Halide expressions (the kernel). `Ops` supplies the integer and boolean types, select, min,
// max and the user layout lookup.
//
// A pattern is split into one or two parts (a union of two factorized halves has two, merged by
// log-sum-exp in the kernel). Each part has
//   * a query order and a key order: identity; "stride transpose" (the sequence viewed as
//     [ceil(L/s), s] and transposed, so positions with equal i mod s are contiguous); or, for
//     keys, "summary gather" (the fixed pattern's summary positions gathered into a compact
//     list of t per block);
//   * a block rule: for query block qo (rows [qo*B, qo*B + B) in query order) the contiguous
//     range [lo, hi] of key blocks (in key order) to visit, or a table for a user layout;
//   * an element mask: the pattern's predicate on original positions, minus the other part's
//     (so keys both parts allow are counted once).
// Positions past L (padding of the permuted orders) are never valid.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::sparse {

// A pattern (kiln.attention's mask) and which of a factorized pattern's halves it keeps (its
// part): the dialect's MaskKind (its sparse values) and PatternPart, case for case.
enum class Kind { Window, Strided, Fixed, Layout };
enum class Half { Union, Local, Global };
enum class Pred { None, Window, StridedLocal, StridedGlobal, FixedLocal, FixedGlobal, Layout };
enum class Order { Identity, StrideTranspose, SummaryGather };
enum class Rule { Window, Group, OwnBlock, Summary, Table };

struct Part {
  Order q = Order::Identity, k = Order::Identity;
  Rule rule = Rule::Window;
  Pred mask = Pred::None, exclude = Pred::None;
};

// The pattern as the attention op states it, and the block schedule kiln-tile-sparse-pattern
// chose: the block size and, once chosen (the op's #kiln.sparse_schedule), the parts.
struct Pattern {
  Kind kind = Kind::Window;
  Half part = Half::Union;
  int64_t size = 0, summary = 0, block = 64;
  std::vector<std::string> layout;
  bool causal = true;
  std::vector<Part> schedule;  // the block schedule's parts; empty: not chosen yet

  // The parts the kernel computes: the schedule's, or those the pattern implies.
  std::vector<Part> parts() const { return schedule.empty() ? patternParts() : schedule; }
  // The parts a pattern implies (what kiln-tile-sparse-pattern chooses).
  std::vector<Part> patternParts() const {
    if (kind == Kind::Window) return {{Order::Identity, Order::Identity, Rule::Window, Pred::Window}};
    if (kind == Kind::Layout) return {{Order::Identity, Order::Identity, Rule::Table, Pred::Layout}};
    Part local, global;
    if (kind == Kind::Strided) {
      local = {Order::Identity, Order::Identity, Rule::Window, Pred::StridedLocal};
      global = {Order::StrideTranspose, Order::StrideTranspose, Rule::Group, Pred::StridedGlobal};
    } else {
      local = {Order::Identity, Order::Identity, Rule::OwnBlock, Pred::FixedLocal};
      global = {Order::Identity, Order::SummaryGather, Rule::Summary, Pred::FixedGlobal};
    }
    if (part == Half::Local) return {local};
    if (part == Half::Global) return {global};
    global.exclude = local.mask;
    return {local, global};
  }
  bool layoutAt(int64_t r, int64_t c) const {
    return r >= 0 && c >= 0 && r < (int64_t)layout.size() && c < (int64_t)layout[r].size() && layout[r][c] == '#';
  }
};

// ---- integer and expression arithmetic, generic over Ops
template <class Ops>
struct Math {
  using I = typename Ops::I;
  using B = typename Ops::B;
  const Pattern &p;
  const Ops &ops;
  I L;  // the true sequence length

  I ceilDiv(I a, I b) const { return (a + b - 1) / b; }
  I s() const { return ops.lit(p.size); }
  I Bk() const { return ops.lit(p.block); }
  I groups() const { return ceilDiv(L, s()); }  // stride transpose: positions per residue class

  // Length of the sequence in `o` order before padding to whole blocks.
  I length(Order o) const {
    if (o == Order::StrideTranspose) return s() * groups();
    if (o == Order::SummaryGather) return ceilDiv(L, s()) * ops.lit(p.summary);
    return L;
  }
  I blocks(Order o) const { return ceilDiv(length(o), Bk()); }
  // The original position at index x of order o (may be >= L: padding).
  I pos(Order o, I x) const {
    if (o == Order::StrideTranspose) return (x % groups()) * s() + x / groups();
    if (o == Order::SummaryGather) {
      I t = ops.lit(p.summary);
      return (x / t) * s() + s() - t + x % t;
    }
    return x;
  }
  // The index of original position i in order o (query orders only: identity, stride transpose).
  I inv(Order o, I i) const {
    if (o == Order::StrideTranspose) return (i % s()) * groups() + i / s();
    return i;
  }
  B valid(Order o, I x) const { return x < length(o) && pos(o, x) < L; }
  // Whether key order o holds original position i (a summary gather: the summary positions
  // only), and its index there.
  B holds(Order o, I i) const {
    if (o == Order::SummaryGather) return i % s() >= s() - ops.lit(p.summary);
    return ops.truth(true);
  }
  I invKey(Order o, I i) const {
    if (o == Order::SummaryGather) {
      I t = ops.lit(p.summary);
      return (i / s()) * t + i % s() - (s() - t);
    }
    return inv(o, i);
  }

  B allowed(Pred pr, I i, I j) const {
    I sz = ops.lit(p.size);
    switch (pr) {
      case Pred::Window:
      case Pred::StridedLocal: return j <= i && i - j < sz;
      case Pred::StridedGlobal: return j <= i && (i - j) % sz == 0;
      case Pred::FixedLocal: return j <= i && j / sz == i / sz;
      case Pred::FixedGlobal: return j <= i && j % sz >= sz - ops.lit(p.summary);
      case Pred::Layout: {
        B in = ops.layout(i / sz, j / sz);
        return p.causal ? B(in && j <= i) : in;
      }
      case Pred::None: break;
    }
    return ops.truth(false);
  }
  B allowedPart(const Part &pt, I i, I j) const {
    B a = allowed(pt.mask, i, j);
    return pt.exclude == Pred::None ? a : B(a && !allowed(pt.exclude, i, j));
  }

  // Key blocks [lo, hi] that query block qo visits (rules other than Table); empty when hi < lo.
  I lo(const Part &pt, I qo) const {
    I first = qo * Bk();  // the block's first row, in query order
    switch (pt.rule) {
      case Rule::Window: return ops.max(first - s() + 1, ops.lit(0)) / Bk();
      case Rule::Group: return (first / groups()) * groups() / Bk();
      case Rule::OwnBlock: return first / s() * s() / Bk();
      default: return ops.lit(0);
    }
  }
  I hi(const Part &pt, I qo) const {
    if (pt.rule != Rule::Summary) return qo;  // causal: never past the diagonal block
    // The summary keys at or before the block's last row x: t per whole block before x's, plus
    // those of x's own block up to x.
    I x = ops.min(qo * Bk() + Bk() - 1, L - 1), t = ops.lit(p.summary);
    I n = (x / s()) * t + ops.max(ops.min(x % s() - (s() - t) + 1, t), ops.lit(0));
    return ops.sel(n > 0, (n - 1) / Bk(), ops.lit(-1));
  }
};

// Plain integers.
struct IntOps {
  using I = int64_t;
  using B = bool;
  const Pattern *p;
  I lit(int64_t v) const { return v; }
  B truth(bool b) const { return b; }
  I sel(B c, I a, I b) const { return c ? a : b; }
  I min(I a, I b) const { return std::min(a, b); }
  I max(I a, I b) const { return std::max(a, b); }
  B layout(I r, I c) const { return p->layoutAt(r, c); }
};

// Key blocks visited by query block qo of a Table part (a user layout), in order.
inline std::vector<int64_t> tableBlocks(const Pattern &p, int64_t qo) {
  std::vector<int64_t> out;
  for (int64_t c = 0; c < (int64_t)p.layout.size(); ++c)
    if (p.layoutAt(qo, c) && (!p.causal || c <= qo)) out.push_back(c);
  return out;
}

// What the pattern allows and what the block schedule computes, at length L.
struct Work {
  double allowed = 0;  // (query, key) pairs the pattern allows
  double visited = 0;  // pairs in the visited blocks (block rounding included)
};
Work countWork(const Pattern &p, int64_t L);
// The block matrix of each part at length L (at most `maxBlocks` query blocks drawn): '#' a block
// visited with every pair allowed, '+' visited with an element mask at its edges, '.' skipped.
std::string picture(const Pattern &p, int64_t L, int64_t maxBlocks = 16);

}  // namespace kiln::sparse
