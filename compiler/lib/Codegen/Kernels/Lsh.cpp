// Lsh.cpp - the Reformer's LSH attention kernels:
//   * lsh_hash: out(i, r, h) = argmax over b of [x·R_r ; -x·R_r](b);
//   * lsh_chunk_attention: q·kᵀ within each sorted chunk and the previous one, per hash round,
//     on the online block engine, the rounds merged by log-sum-exp. Inputs: qk (d, i, h),
//     v (e, i, h), buckets (i, r, h), sorted (p, 0 = order | 1 = inverse, r, h).
#include "BlockAttention.h"

namespace kiln::codegen {

Func buildLshHash(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam QK = B.in[0], ROT = B.in[1];
  const int D = (int)k.inputs[0].dims[2], half = (int)k.inputs[1].dims[2];
  Var c("c"), i("i"), r("r"), h("h"), io("io"), ii("ii");

  /* THE ALGORITHM */
  // Mixed precision (precision = bf16): qk rounded to bfloat16 as read, as the chunked
  // attention reads it (the buckets are those of the rounded vectors); rotations and sums in f32.
  Func proj("proj"), out("out");
  RDom rd(0, D, "rd");
  proj(c, i, r, h) = 0.0f;
  proj(c, i, r, h) += gemmOperand(B, QK(rd, i, h)) * ROT(c, rd, r);
  RDom rb(0, 2 * half, "rb");
  Expr pc = proj(clamp(rb % half, 0, half - 1), i, r, h);
  out(i, r, h) = argmax(rb, select(rb < half, pc, -pc))[0];

  /* THE SCHEDULE: GPU: a thread per (position, round), lsh_tile positions per block, its
   * projections in local memory. */
  const int tile = B.need(B.sch.lsh_tile, "lsh_tile");
  if (B.gpu) {
    B.s(out).gpu_tile(i, io, ii, tile, TailStrategy::GuardWithIf).gpu_blocks(io, r, h);
    B.s(proj).compute_at(out, ii);
    return out;
  }
  /* THE SCHEDULE: CPU: lsh_tile positions at a time, projections vectorized over positions;
   * tasks over heads and position tiles. */
  B.s(out).split(i, io, ii, tile, TailStrategy::GuardWithIf);
  if (B.parallel()) B.s(out).parallel(h).parallel(io);
  B.s(proj).compute_at(out, io).reorder(i, c);
  B.s(proj.update()).reorder(i, c, rd);
  int w = B.vec();
  if (w > 1) B.s(proj).vectorize(i, w, TailStrategy::GuardWithIf), B.s(proj.update()).vectorize(i, w, TailStrategy::GuardWithIf);
  return out;
}

Func buildLshChunkAttention(Builder &B) {
  const KernelSpec &k = B.k;
  LshChunkAttentionOp op = B.op<LshChunkAttentionOp>();
  ImageParam QK = B.in[0], BK = B.in[2], SO = B.in[3];
  const int C = (int)op.getChunk(), R = (int)k.inputs[2].dims[1], D = (int)k.inputs[0].dims[2];
  const int E = (int)k.inputs[1].dims[2];
  const bool causal = op.getCausal();
  Expr L = QK.dim(1).extent();
  Var e("e"), i("i"), h("h"), c("c");

  /* THE ALGORITHM */
  // Mixed precision (precision = bf16): qk and v rounded to bfloat16 once (the hashing read
  // the same rounded qk), the norms, scores, softmax and sums in f32.
  Func QKin = attentionOperand(B, QK, D, "QKr"), Vin = attentionOperand(B, B.in[1], E, "Vr");
  // Keys are the unit-normalized queries (shared QK).
  Func knorm("knorm");
  RDom rd(0, D, "rd");
  Expr n2 = sum(QKin(rd, c, h) * QKin(rd, c, h));
  knorm(c, h) = select(n2 > 0.0f, 1.0f / sqrt(n2), 0.0f);
  auto perm = [=](Expr p, Expr g) { return SO(clamp(p, 0, L - 1), 0, g % R, g / R); };
  BlockAttention ba;
  ba.block = C;  // the op's chunk: a query chunk attends to key chunks of the same size
  ba.scale = op.getScale().convertToFloat();
  ba.valueWidth = E;
  ba.q = QKin, ba.k = QKin, ba.v = Vin;
  ba.nkb = (L + C - 1) / C;
  ba.slots = Expr(2);
  ba.keyBlock = [](Expr qo, Expr j) { return qo - 1 + j; };  // the previous chunk, then its own
  ba.slotLimit = [](Expr) { return Expr(2); };
  ba.qrow = perm;
  ba.krow = perm;
  ba.head = [=](Expr g) { return g / R; };
  ba.keyScale = [=](Expr kp, Expr g) { return knorm(kp, g / R); };
  ba.ok = [=](Expr qx, Expr kx, Expr qp, Expr kp, Expr g) {
    Expr same = BK(clamp(qp, 0, L - 1), g % R, g / R) == BK(clamp(kp, 0, L - 1), g % R, g / R);
    Expr allowed = qx < L && kx < L && same;
    return causal ? (allowed && kp <= qp) : allowed;
  };
  // A query sees itself only when no other key is available: a score of -1e9 loses to any
  // other key (its weight underflows to 0) and wins alone.
  ba.bias = [=](Expr, Expr, Expr qp, Expr kp, Expr) { return select(qp == kp, -1e9f, 0.0f); };
  Func out("out");
  Func P = onlineBlockAttention(B, QK, QK, B.in[1], ba, "", out, h);
  // Combine the rounds: o = sum_r softmax_r(lse_r) o_r, each read at the position's sorted slot.
  std::vector<Expr> o(R), s(R);
  for (int r = 0; r < R; ++r) {
    Expr slot = clamp(SO(i, 1, r, h), 0, L - 1), g = h * R + r;
    o[r] = P(e, slot, g)[0];
    s[r] = P(e, slot, g)[1];
  }
  Expr mx = s[0];
  for (int r = 1; r < R; ++r) mx = max(mx, s[r]);
  Expr num = 0.0f, den = 0.0f;
  for (int r = 0; r < R; ++r) num = num + o[r] * exp(s[r] - mx), den = den + exp(s[r] - mx);
  out(e, i, h) = num / den;

  /* THE SCHEDULE: GPU: knorm with gpu_tile_n positions per block; out one block per row. */
  if (B.gpu) {
    Var bo("bo"), ti("ti");
    B.s(knorm).compute_root().gpu_tile(c, bo, ti, B.need(B.sch.gpu_tile_n, "gpu_tile_n"), TailStrategy::GuardWithIf);
    B.gpuRows(out, {e, i, h});
    return out;
  }
  /* THE SCHEDULE: CPU: heads as tasks; 1/|k| per position once per head. */
  if (B.parallel()) B.s(out).parallel(h);
  B.s(knorm).compute_at(out, h);
  int we = largestDivisor(E, B.vec());
  if (we > 1) B.s(out).vectorize(e, we);
  return out;
}

}  // namespace kiln::codegen
