// CostReport.cpp - the cost report from each op's cost hook, and the schedule report from each
// kernel's typed schedule.
#include "kiln/Pipeline/CostReport.h"

#include <cstdio>
#include <sstream>

#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Pipeline/Phases.h"
#include "kiln/Transforms/Utils.h"
#include "kilnrt/api.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace kiln {

std::string humanUnits(double v, const char *unit) {
  const char *pre[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) v /= 1000, ++i;
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g %s%s", v, pre[i], unit);
  return buf;
}

std::string opLocation(Operation *op) {
  std::string loc;
  llvm::raw_string_ostream ls(loc);
  if (auto fl = dyn_cast<FileLineColLoc>(op->getLoc()))
    ls << llvm::sys::path::filename(fl.getFilename().getValue()) << ":" << fl.getLine();
  else if (auto fu = dyn_cast<FusedLoc>(op->getLoc()))
    if (auto fl = dyn_cast<FileLineColLoc>(fu.getLocations().front()))
      ls << llvm::sys::path::filename(fl.getFilename().getValue()) << ":" << fl.getLine() << "+";
  return loc;
}

int64_t arenaBytes(Operation *entry, ArrayRef<int64_t> lengths) {
  std::vector<kiln_buffer_info> bufs;
  for (auto slot : entry->getAttrOfType<ArrayAttr>("kiln.arena").getAsRange<ArenaSlotAttr>()) {
    ArrayRef<int64_t> p = slot.getPowers().asArrayRef();
    kiln_buffer_info bi{slot.getBytes(), {}, (int32_t)slot.getFirst(), (int32_t)slot.getLast()};
    for (size_t i = 0; i < p.size() && i < KILN_MAX_SYMS; ++i) bi.sym_pow[i] = (uint8_t)p[i];
    bufs.push_back(bi);
  }
  std::vector<int64_t> offs(bufs.size());
  int64_t arena = 0;
  if (kilnrt_arena_plan(bufs.data(), (int32_t)bufs.size(), lengths.data(), offs.data(), &arena) != KILNRT_OK) return INT64_MAX;
  return arena;
}

double paramBytesOf(ModuleOp module) {
  double bytes = 0;
  llvm::StringSet<> seen;
  module.walk([&](ParamOp p) {
    if (seen.insert(p.getName()).second) bytes += elementBytes(p.getResult()) * cast<RankedTensorType>(p.getType()).getNumElements();
  });
  return bytes;
}

std::string costReport(ModuleOp module) {
  std::ostringstream os;
  auto names = module->getAttrOfType<ArrayAttr>("kiln.seq_names");
  auto bounds = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
  SmallVector<int64_t> bnd(bounds.asArrayRef());
  double paramBytes = paramBytesOf(module);
  os << "kiln cost report: FLOPs, bytes read and written per op, and the buffer plan's peak\n";
  os << "(a loop body's ops are listed once, per step; totals count them at the loop's max_steps)\n";
  os << "parameters: " << humanUnits(paramBytes, "B") << "\n";
  for (int div : {1, 2, 4}) {
    SmallVector<int64_t> sv;
    std::string at;
    auto fa = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_factors");
    auto isRows = [&](size_t s) { return fa && 2 * s < fa.size() && fa[2 * s] >= 0; };
    for (size_t s = 0; s < bnd.size(); ++s) {
      sv.push_back(std::max<int64_t>(1, bnd[s] / div));
      bool batchOfOne = false;  // a batch of at most one sequence: the model's shapes are without it
      for (size_t r = 0; fa && 2 * r < fa.size(); ++r) batchOfOne |= bnd[s] == 1 && fa[2 * r] == (int64_t)s;
      if (!isRows(s) && !batchOfOne)
        at += (at.empty() ? "" : ", ") + cast<StringAttr>(names[s]).str() + " = " + std::to_string(sv.back());
    }
    while (sv.size() < KILN_MAX_SYMS) sv.push_back(1);
    for (size_t s = 0; s < bnd.size(); ++s)  // a batch's rows: B·L
      if (isRows(s)) sv[s] = sv[fa[2 * s]] * sv[fa[2 * s + 1]];
    for (auto f : module.getOps<func::FuncOp>()) {
      FailureOr<SeqLengths> lengths = SeqLengths::infer(f);
      if (failed(lengths)) return os.str();
      auto numel = [&](Value v) { return lengths->numel(v, sv); };
      os << "\n== entry " << f.getSymName().str() << " at " << at << (div == 1 ? " (the bound)" : "") << "\n";
      if (div == 1) {
        char hdr[160];
        snprintf(hdr, sizeof hdr, "%-4s %-20s %-44s %12s %12s %12s\n", "#", "op", "location", "FLOPs", "read", "written");
        os << hdr;
      }
      OpCost total;
      int k = 0;
      f.walk([&](Operation *op) {
        if (!isKernelOp(op)) return;
        OpCost c = cast<KilnOpInterface>(op).getCost(numel);
        // A loop body's kernels run up to max_steps times: the totals count every step.
        int64_t times = 1;
        for (auto loop = op->getParentOfType<LoopOp>(); loop; loop = loop->getParentOfType<LoopOp>())
          times *= (int64_t)loop.getMaxSteps();
        total.flops += times * c.flops, total.read += times * c.read, total.written += times * c.written;
        if (div == 1) {
          std::string loc = opLocation(op) + (times > 1 ? " (x" + std::to_string(times) + " steps)" : "");
          char line[200];
          snprintf(line, sizeof line, "%-4d %-20s %-44s %12s %12s %12s\n", k, op->getName().stripDialect().str().c_str(),
                   loc.c_str(), humanUnits(c.flops, "").c_str(), humanUnits(c.read, "B").c_str(),
                   humanUnits(c.written, "B").c_str());
          os << line;
        }
        ++k;
      });
      int64_t arena = arenaBytes(f, sv);
      size_t nbufs = f->getAttrOfType<ArrayAttr>("kiln.arena").size();
      double io = 0;
      for (unsigned i = 0; i < f.getNumArguments(); ++i) io += 4 * numel(f.getArgument(i));
      for (Value v : f.getBody().front().getTerminator()->getOperands()) io += 4 * numel(v);
      os << "total: " << humanUnits(total.flops, "FLOP") << ", " << humanUnits(total.read, "B") << " read, "
         << humanUnits(total.written, "B") << " written; peak memory " << humanUnits(paramBytes + io + arena, "B")
         << " (arena " << humanUnits(arena, "B") << " in " << nbufs << " buffers, inputs+outputs " << humanUnits(io, "B")
         << ", parameters " << humanUnits(paramBytes, "B") << ")\n";
      // A differentiated entry: what its backward keeps from the forward, and what it recomputes
      // (kiln-recompute-checkpoints measured both at the bounds).
      if (auto bw = f->getAttrOfType<DictionaryAttr>("kiln.backward"); bw && div == 1)
        if (auto saved = bw.getAs<IntegerAttr>("saved_bytes"))
          os << "backward: saved activations " << humanUnits((double)saved.getInt(), "B") << ", recomputed "
             << humanUnits(bw.getAs<FloatAttr>("recomputed_flops").getValueAsDouble(), "FLOP") << " in "
             << bw.getAs<IntegerAttr>("recomputed_ops").getInt() << " ops (checkpointed blocks, FFNs and reversible layers); peak of the buffer plan "
             << humanUnits((double)arena, "B") << "\n";
    }
  }
  return os.str();
}

std::string kernelScheduleText(const std::string &name, const KernelSpec &spec, const std::string &halideSchedule) {
  std::ostringstream os;
  os << "kernel " << name << "\nspec   " << spec.text() << "\nop     " << spec.kind;
  if (spec.source) os << " at " << opLocation(spec.source);
  os << "\nschedule (kiln.schedule, decided by the passes):\n";
  for (auto &[key, v] : spec.schedule.keyEntries()) os << "  " << key.substr(2) << " = " << v << "\n";
  if (spec.source)
    if (auto sp = spec.source->getAttrOfType<SparseScheduleAttr>("kiln.sparse")) {
      std::string text;
      llvm::raw_string_ostream ts(text);
      mlir::Attribute(sp).print(ts);
      os << "  sparse = " << text << "\n";
    }
  if (!halideSchedule.empty()) os << "\nHalide schedule (the calls applied, in order):\n" << halideSchedule;
  return os.str();
}

std::string scheduleReport(ModuleOp module) {
  std::string s;
  for (auto &k : collectKernels(module)) s += kernelScheduleText(k.name, k.spec, "") + "\n";
  return s;
}

}  // namespace kiln
