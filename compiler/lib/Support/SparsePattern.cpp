// SparsePattern.cpp - counting a sparse pattern's work and drawing its block schedule.
#include "kiln/Support/SparsePattern.h"

#include <sstream>

namespace kiln::sparse {
namespace {

const char *orderName(Order o) {
  switch (o) {
    case Order::Identity: return "sequence order";
    case Order::StrideTranspose: return "stride transpose (positions viewed as [ceil(L/s), s], transposed)";
    case Order::SummaryGather: return "summary gather (the last t positions of every block, compacted)";
  }
  return "";
}
const char *predName(Pred p) {
  switch (p) {
    case Pred::Window: return "window: i - w < j <= i";
    case Pred::StridedLocal: return "strided local: i - s < j <= i";
    case Pred::StridedGlobal: return "strided global: j <= i, (i - j) % s == 0";
    case Pred::FixedLocal: return "fixed local: j / c == i / c, j <= i";
    case Pred::FixedGlobal: return "fixed global: j % c >= c - t, j <= i";
    case Pred::Layout: return "user block layout";
    case Pred::None: return "none";
  }
  return "";
}

// Key blocks visited by query block qo of part pt: [lo, hi] or the table's list.
std::vector<int64_t> visitedBlocks(const Pattern &p, const Math<IntOps> &m, const Part &pt, int64_t qo) {
  if (pt.rule == Rule::Table) return tableBlocks(p, qo);
  std::vector<int64_t> out;
  int64_t nk = m.blocks(pt.k);
  for (int64_t kb = std::max<int64_t>(0, m.lo(pt, qo)); kb <= std::min(m.hi(pt, qo), nk - 1); ++kb) out.push_back(kb);
  return out;
}

// Keys row i may see, in closed form (the union's shared keys counted once).
double rowCount(const Pattern &p, int64_t i, int64_t L) {
  int64_t s = p.size, t = p.summary;
  auto ownSummary = [&] { return std::clamp<int64_t>(i % s - (s - t) + 1, 0, t); };
  if (p.kind == Kind::Window) return (double)std::min(i + 1, s);
  if (p.kind == Kind::Strided) {
    double local = (double)std::min(i + 1, s), global = (double)(i / s + 1);
    return p.part == Half::Local ? local : p.part == Half::Global ? global : local + global - 1;
  }
  if (p.kind == Kind::Fixed) {
    double local = (double)(i % s + 1), global = (double)((i / s) * t + ownSummary());
    return p.part == Half::Local ? local : p.part == Half::Global ? global : local + global - (double)ownSummary();
  }
  double n = 0;  // layout
  for (int64_t c = 0; c < (int64_t)p.layout.size(); ++c) {
    if (!p.layoutAt(i / s, c)) continue;
    int64_t end = std::min((c + 1) * s, L);
    if (p.causal) end = std::min(end, i + 1);
    n += (double)std::max<int64_t>(0, end - c * s);
  }
  return n;
}

}  // namespace

Work countWork(const Pattern &p, int64_t L) {
  Work w;
  for (int64_t i = 0; i < L; ++i) w.allowed += rowCount(p, i, L);
  IntOps ops{&p};
  Math<IntOps> m{p, ops, L};
  for (const Part &pt : p.parts())
    for (int64_t qo = 0; qo < m.blocks(pt.q); ++qo)
      w.visited += (double)visitedBlocks(p, m, pt, qo).size() * (double)(p.block * p.block);
  return w;
}

std::string picture(const Pattern &p, int64_t L, int64_t maxBlocks) {
  IntOps ops{&p};
  Math<IntOps> m{p, ops, L};
  std::ostringstream os;
  std::vector<Part> parts = p.parts();
  for (size_t k = 0; k < parts.size(); ++k) {
    const Part &pt = parts[k];
    int64_t nq = m.blocks(pt.q), nk = m.blocks(pt.k), B = p.block;
    os << "part " << k << ": " << predName(pt.mask);
    if (pt.exclude != Pred::None) os << ", minus " << predName(pt.exclude) << " (counted by part 0)";
    os << "\n  queries in " << orderName(pt.q) << ", keys in " << orderName(pt.k) << "\n  block matrix at L = " << L
       << " (" << nq << " x " << nk << " blocks of " << B << "; '#' all pairs allowed, '+' element mask, '.' skipped)";
    if (nq > maxBlocks || nk > maxBlocks) os << ", the first " << std::min(nq, maxBlocks) << " x " << std::min(nk, maxBlocks);
    os << ":\n";
    for (int64_t qo = 0; qo < std::min(nq, maxBlocks); ++qo) {
      std::string row(std::min(nk, maxBlocks), '.');
      for (int64_t kb : visitedBlocks(p, m, pt, qo)) {
        if (kb >= (int64_t)row.size()) continue;
        bool all = true;
        for (int64_t a = qo * B; a < qo * B + B && all; ++a)
          for (int64_t b = kb * B; b < kb * B + B && all; ++b)
            all = m.valid(pt.q, a) && m.valid(pt.k, b) && m.allowedPart(pt, m.pos(pt.q, a), m.pos(pt.k, b));
        row[kb] = all ? '#' : '+';
      }
      os << "    " << row << "\n";
    }
  }
  Work w = countWork(p, L);
  os << "work at L = " << L << ": " << w.visited << " pairs computed for " << w.allowed << " allowed (density "
     << w.allowed / ((double)L * (double)L) << ", computed " << w.visited / ((double)L * (double)L) << ")\n";
  return os.str();
}

}  // namespace kiln::sparse
