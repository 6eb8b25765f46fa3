// kiln-lower-lsh-attention: kiln.lsh_attention -> lsh_hash, lsh_sort, lsh_chunk_attention.
//
// Algorithm, for each kiln.lsh_attention:
//   1. %b = kiln.lsh_hash %qk, %rot: i32 [H, hashes, L], the bucket of every position per round.
//   2. %s = kiln.lsh_sort %b: i32 [H, hashes, 2, L], the positions in (bucket, position) order
//      and the inverse permutation (a counting sort, linear in L).
//   3. %o = kiln.lsh_chunk_attention %qk, %v, %b, %s with the chunk, causal flag and scale.
// The three carry the op's kiln.* marks.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERLSHATTENTION
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct LowerLshAttentionPass : kiln::impl::LowerLshAttentionBase<LowerLshAttentionPass> {
  using LowerLshAttentionBase::LowerLshAttentionBase;
  void runOnOperation() override {
    SmallVector<kiln::LshAttentionOp> ops;
    getOperation().walk([&](kiln::LshAttentionOp op) { ops.push_back(op); });
    for (kiln::LshAttentionOp op : ops) {  // the gradient rule lowers with the same LshAttentionOp::lower
      OpBuilder b(op);
      op.lower(b);
      op.erase();
    }
  }
};
}  // namespace
