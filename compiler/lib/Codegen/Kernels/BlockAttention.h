// BlockAttention.h - the online-softmax block engine shared by whole-sequence, sparse and LSH
// attention (BlockAttention.cpp).
//
// Queries and keys are visited in blocks of `block` rows (keys: `keyRows` when set), read
// through index maps (a permutation, a gather); for query block qo, slot j (< slotLimit(qo)) names key block
// keyBlock(qo, j). ok(qx, kx, ...) is the element mask on query and key indices, bias an extra
// score (undefined: none). All Funcs have a last var g (a head, or a head and a round). The
// engine returns P(e, x, g) = (o, lse) in query order; a row with no allowed key has o = 0 and
// lse = -1e30.
#pragma once
#include <functional>

#include "Kernels.h"

namespace kiln::codegen {

struct BlockAttention {
  int block = 64;                              // queries and keys per block
  int keyRows = 0;                             // keys per key block (0: block)
  float scale = 1.0f;                          // on q·k
  int valueWidth = 0;                          // E: V's row

  Expr nkb, slots;                             // key blocks; slots per query block (an upper bound)
  std::function<Expr(Expr qo)> slotLimit;      // visited slots of query block qo
  std::function<Expr(Expr qo, Expr j)> keyBlock;
  std::function<Expr(Expr qx, Expr g)> qrow;   // Q row of query index qx (clamped here)
  std::function<Expr(Expr kx, Expr g)> krow;   // K/V row of key index kx
  // true: qrow and krow are permutations or gathers, computed once per block into index
  // tables; false: both are the identity, inlined, so a tile's key rows are affine and their
  // addresses stay in scalar registers.
  bool gatherRows = true;
  // true: qrow is a permutation or a gather (not the identity): the query block's rows are read
  // whole and transposed in register tiles (a strided read per element is a scalar load each).
  bool gatherQueryRows = true;
  std::function<Expr(Expr g)> head;            // Q/K/V head of g
  std::function<Expr(Expr g)> kvHead;          // K/V head of g when not head's (grouped-query attention)
  // Element mask and extra score on the query and key indices and their rows (qrow, krow,
  // computed once per block, not per pair: a permutation's divisions stay out of the tile).
  std::function<Expr(Expr qx, Expr kx, Expr qrow, Expr krow, Expr g)> ok, bias;
  std::function<Expr(Expr krow, Expr g)> keyScale;  // a factor on each key (undefined: 1)
  // Read instead of the Q, K and V inputs when defined, with their arguments (mixed precision:
  // copies rounded to bfloat16).
  Func q, k, v;
};

// P is computed at out's `outVar` loop: a head (all query blocks, in parallel), or, when
// `perBlock`, one query block of out (out's rows in query order, split by the block); or,
// `atRoot`, at root (the query blocks of every head in parallel), for a kernel whose several
// outputs read it. `sfx`
// tells apart the Funcs of several engines in one kernel (the parts of a sparse pattern).
Func onlineBlockAttention(Builder &B, ImageParam Q, ImageParam K, ImageParam V, const BlockAttention &ba,
                          const std::string &sfx, Func out, Var outVar, bool perBlock = false, bool atRoot = false);

}  // namespace kiln::codegen
