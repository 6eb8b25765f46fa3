// MemoryLimit.cpp - each entry's peak memory at the bounds against --max-memory.
#include "kiln/Pipeline/MemoryLimit.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Pipeline/CostReport.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace kiln {

LogicalResult checkMemoryLimit(ModuleOp module, int64_t limit) {
  if (limit <= 0) return success();
  auto bounds = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
  SmallVector<int64_t> sv(bounds.asArrayRef());
  while (sv.size() < 8) sv.push_back(1);  // KILN_MAX_SYMS
  double params = paramBytesOf(module);
  for (auto f : module.getOps<func::FuncOp>()) {
    FailureOr<SeqLengths> lengths = SeqLengths::infer(f);
    if (failed(lengths)) return failure();
    auto bytes = [&](Value v) { return 4 * lengths->numel(v, sv); };
    struct Buf {
      double bytes;
      std::string what;
    };
    std::vector<Buf> bufs;
    double io = 0;
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      io += bytes(f.getArgument(i));
      bufs.push_back({bytes(f.getArgument(i)), "input '" + f.getArgAttrOfType<StringAttr>(i, "kiln.name").str() + "'"});
    }
    f.walk([&](Operation *op) {
      if (!isKernelOp(op)) return;
      bufs.push_back({bytes(op->getResult(0)), op->getName().stripDialect().str() + " at " + opLocation(op)});
    });
    for (Value v : f.getBody().front().getTerminator()->getOperands()) io += bytes(v);
    double peak = params + io + (double)arenaBytes(f, sv);
    if (peak <= (double)limit) continue;
    std::sort(bufs.begin(), bufs.end(), [](const Buf &a, const Buf &b) { return a.bytes > b.bytes; });
    auto d = f.emitError() << "the buffer plan of entry '" << f.getSymName() << "' needs " << humanUnits(peak, "B")
                           << " at the sequence-length bounds, more than the memory limit of "
                           << humanUnits((double)limit, "B") << " (--max-memory); parameters " << humanUnits(params, "B")
                           << "; largest buffers:";
    for (size_t i = 0; i < bufs.size() && i < 3; ++i)
      d << " " << bufs[i].what << " " << humanUnits(bufs[i].bytes, "B") << (i < 2 ? ";" : "");
    return failure();
  }
  return success();
}

}  // namespace kiln
