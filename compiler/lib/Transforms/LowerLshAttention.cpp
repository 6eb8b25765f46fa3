// kiln-lower-lsh-attention: kiln.lsh_attention -> lsh_hash, lsh_sort, lsh_chunk_attention.
//
// Algorithm, for each kiln.lsh_attention:
//   1. %b = kiln.lsh_hash %qk, %rot: i32 [H, hashes, L], the bucket of every position per round.
//   2. %s = kiln.lsh_sort %b: i32 [H, hashes, 2, L], the positions in (bucket, position) order
//      and the inverse permutation (a counting sort, linear in L).
//   3. %o = kiln.lsh_chunk_attention %qk, %v, %b, %s with the chunk, causal flag and scale.
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
    for (kiln::LshAttentionOp op : ops) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      auto qt = cast<RankedTensorType>(op.getQk().getType());
      int64_t H = qt.getDimSize(0), L = qt.getDimSize(1), R = (int64_t)op.getHashes();
      auto i32 = b.getI32Type();
      auto bt = RankedTensorType::get({H, R, L}, i32), st = RankedTensorType::get({H, R, 2, L}, i32);
      Value buckets = kiln::LshHashOp::create(b, loc, bt, op.getQk(), op.getRotations());
      Value sorted = kiln::LshSortOp::create(b, loc, st, buckets);
      Value out = kiln::LshChunkAttentionOp::create(b, loc, op.getType(), op.getQk(), op.getValue(), buckets, sorted,
                                                    op.getChunkAttr(), op.getCausalAttr(), op.getScaleAttr());
      op.replaceAllUsesWith(out);
      op.erase();
    }
  }
};
}  // namespace
