// SparseExpr.h - kiln/Support/SparsePattern.h's arithmetic on Halide expressions, shared by the
// block-sparse attention (SparseAttention.cpp) and its gradients (SparseAttentionGrad.cpp).
#pragma once
#include "Kernels.h"
#include "kiln/Support/SparsePattern.h"

namespace kiln::codegen {

struct ExprOps {
  using I = Expr;
  using B = Expr;
  Func table;  // the user layout: 1 where (query block, key block) is visited
  int n = 0;   // layout rows
  Expr lit(int64_t v) const { return Expr((int)v); }
  Expr truth(bool b) const { return b ? Internal::const_true() : Internal::const_false(); }
  Expr sel(Expr c, Expr a, Expr b) const { return select(c, a, b); }
  Expr min(Expr a, Expr b) const { return Halide::min(a, b); }
  Expr max(Expr a, Expr b) const { return Halide::max(a, b); }
  Expr layout(Expr r, Expr c) const {
    return r >= 0 && c >= 0 && r < n && c < n && table(clamp(c, 0, n - 1), clamp(r, 0, n - 1)) != 0;
  }
};

// A user layout's table (ops.table, ops.n) from the pattern; no-op for other kinds.
inline void setLayoutTable(ExprOps &ops, const sparse::Pattern &p) {
  if (p.kind != sparse::Kind::Layout) return;
  ops.n = (int)p.layout.size();
  Buffer<uint8_t> t(ops.n, ops.n, "layout");
  for (int r = 0; r < ops.n; ++r)
    for (int c = 0; c < ops.n; ++c) t(c, r) = p.layoutAt(r, c);
  ops.table(Var("c0"), Var("c1")) = t(Var("c0"), Var("c1"));
}

// Block lists as constant tables: for each of `rows` blocks, the blocks it visits (cnt(r) of
// them, idx(s, r) the s-th). slots: the longest list (at least 1).
struct BlockTable {
  Buffer<int32_t> idx, cnt;
  int rows = 0, slots = 1;
};
inline BlockTable blockTable(const std::vector<std::vector<int64_t>> &lists, const std::string &name) {
  BlockTable t;
  t.rows = (int)lists.size();
  for (auto &l : lists) t.slots = std::max(t.slots, (int)l.size());
  t.idx = Buffer<int32_t>(t.slots, std::max(1, t.rows), "idx_" + name);
  t.cnt = Buffer<int32_t>(std::max(1, t.rows), "cnt_" + name);
  t.idx.fill(0);
  t.cnt.fill(0);
  for (int r = 0; r < t.rows; ++r) {
    t.cnt(r) = (int32_t)lists[r].size();
    for (size_t s = 0; s < lists[r].size(); ++s) t.idx((int)s, r) = (int32_t)lists[r][s];
  }
  return t;
}

}  // namespace kiln::codegen
