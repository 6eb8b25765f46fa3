// kiln-outline-kernels: give every kernel op a kernel spec and a content-hashed kernel name.
//
// Algorithm:
//   1. For each kernel op (its hooks name a kernel), its spec (kiln/Dialect/KernelSpec.h): the
//      op kind, the semantic attributes its getKernelAttrs hook names, its schedule and its
//      operand and result types.
//   2. Write the canonical text as `kiln.kernel_spec` and the name kiln_<kind>_<hash(spec,
//      target)> as `kiln.kernel`. Equal specs give equal names: the kernel is generated once.
//      lsh_sort and all_reduce are served by the runtime (kiln::runtimeKernel).
//   3. An op that must be expanded first (lsh_attention, recurrent) is an error naming the pass.
#include "kiln/Dialect/KernelSpec.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct OutlineKernelsPass : kiln::impl::OutlineKernelsBase<OutlineKernelsPass> {
  using OutlineKernelsBase::OutlineKernelsBase;
  void runOnOperation() override {
    WalkResult r = getOperation().walk([&](Operation *op) {
      if (isa<kiln::LshAttentionOp, kiln::RecurrentOp>(op)) {
        op->emitError() << "expected no " << op->getName() << ": run "
                        << (isa<kiln::RecurrentOp>(op) ? "kiln-lower-act" : "kiln-lower-lsh-attention") << " first";
        return WalkResult::interrupt();
      }
      if (!kiln::isKernelOp(op)) return WalkResult::advance();
      if (StringRef rt = kiln::runtimeKernel(op); !rt.empty()) {
        op->setAttr("kiln.kernel", StringAttr::get(op->getContext(), rt));
        return WalkResult::advance();
      }
      kiln::KernelSpec spec = kiln::KernelSpec::of(op);
      op->setAttr("kiln.kernel_spec", StringAttr::get(op->getContext(), spec.text()));
      op->setAttr("kiln.kernel", StringAttr::get(op->getContext(), spec.name(target)));
      return WalkResult::advance();
    });
    if (r.wasInterrupted()) signalPassFailure();
  }
};
}  // namespace
