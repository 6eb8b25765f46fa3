// kiln-lower-to-llvm: each entry function becomes an LLVM function that calls its kernels.
//
// Algorithm, per func.func @NAME (after kiln-plan-buffers):
//   1. Create llvm.func @<prefix>NAME (prefix kiln_entry_ by default)(%buffers: !llvm.ptr, %syms: !llvm.ptr, %failed: !llvm.ptr)
//      -> i32, with one halide_buffer_t view (+4 dims) per kernel argument slot as entry-block
//      allocas, reused by every call.
//   2. Load each sequence length once from %syms (i64, truncated to Halide's i32 extents).
//   3. For each kernel op, in order: for each operand and the result, fill a view (host pointer
//      = %buffers[kiln.buffer], extents static or from the lengths, dense row-major strides in
//      Halide's innermost-first order); call the kernel (declared once per name); on a non-zero
//      status store the kernel's index to %failed and return the status.
//   4. A kiln.loop becomes a host loop: a header block takes the step number (i32), stores it
//      in the step's buffer and runs the body's kernels; at the yield the next carried value is
//      copied into the carried buffer (memcpy), and the loop repeats while the yielded flag is
//      non-zero and fewer than max_steps steps ran.
//   5. With `gpu` (cuda or opencl), every view is marked host-dirty (Halide copies it to the device when a GPU
//      stage reads it) and after each call the result is copied back (halide_copy_to_host) and
//      the call's device copies are freed: correct for any mix of GPU and host kernels, at the
//      price of a copy per operand per call (device-resident buffers are the next step).
//   6. With `resident` (--gpu-buffers=device), the runtime passes each buffer's device
//      pointer after the host table (bufs[nbufs + slot]); views carry it with the GPU API's
//      device interface and no dirty flag. Only host decisions copy: a host kernel's operands down and
//      its result up (lsh_sort), each step's number up and the loop's flag down; the loop's
//      carry is copied on the device.
//   7. Erase the func.func and the kiln ops; drop kiln.* module attributes.
#include <functional>

#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERTOLLVM
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct LowerToLLVMPass : kiln::impl::LowerToLLVMBase<LowerToLLVMPass> {
  using LowerToLLVMBase::LowerToLLVMBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    Type i32 = b.getI32Type(), i64 = b.getI64Type(), ptr = LLVM::LLVMPointerType::get(ctx);
    Type bufTy = LLVM::LLVMStructType::getLiteral(ctx, {i64, ptr, ptr, i64, i32, i32, ptr, ptr});
    Type dimTy = LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32});
    Type viewTy = LLVM::LLVMStructType::getLiteral(ctx, {bufTy, LLVM::LLVMArrayType::get(dimTy, 4)});

    llvm::StringMap<LLVM::LLVMFuncOp> decls;
    auto kernelDecl = [&](StringRef name, unsigned nargs, Location loc) {
      auto it = decls.find(name);
      if (it != decls.end()) return it->second;
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToEnd(module.getBody());
      SmallVector<Type> args(nargs, ptr);
      auto f = LLVM::LLVMFuncOp::create(b, loc, name, LLVM::LLVMFunctionType::get(i32, args));
      decls[name] = f;
      return f;
    };

    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp f : funcs) {
      Location floc = f.getLoc();
      b.setInsertionPointToEnd(module.getBody());
      auto entry = LLVM::LLVMFuncOp::create(b, floc, (prefix + f.getSymName()).str(),
                                            LLVM::LLVMFunctionType::get(i32, {ptr, ptr, ptr}));
      Block *body = entry.addEntryBlock(b);
      Value bufs = body->getArgument(0), symsPtr = body->getArgument(1), failed = body->getArgument(2);
      Block *failBlock = b.createBlock(&entry.getBody(), entry.getBody().end(), {i32, i32}, {floc, floc});
      b.setInsertionPointToStart(failBlock);
      LLVM::StoreOp::create(b, floc, failBlock->getArgument(1), failed);
      LLVM::ReturnOp::create(b, floc, failBlock->getArgument(0));

      b.setInsertionPointToStart(body);
      auto c32 = [&](int64_t v) { return LLVM::ConstantOp::create(b, floc, i32, b.getI32IntegerAttr(v)).getResult(); };
      auto c64 = [&](int64_t v) { return LLVM::ConstantOp::create(b, floc, i64, b.getI64IntegerAttr(v)).getResult(); };
      SmallVector<Operation *> kernels;
      f.walk([&](Operation *op) {
        if (kiln::isKernelOp(op)) kernels.push_back(op);
      });
      unsigned maxArgs = 2;  // the loop latch uses two views
      for (Operation *op : kernels) maxArgs = std::max(maxArgs, op->getNumOperands() + 1);
      SmallVector<Value> views;
      for (unsigned i = 0; i < maxArgs; ++i)
        views.push_back(LLVM::AllocaOp::create(b, floc, ptr, viewTy, c32(1), 16));
      SmallVector<Value> symVals;
      for (int s = 0; s < 4; ++s) {
        Value p = LLVM::GEPOp::create(b, floc, ptr, i64, symsPtr, ArrayRef<LLVM::GEPArg>{s});
        symVals.push_back(LLVM::TruncOp::create(b, floc, i32, LLVM::LoadOp::create(b, floc, i64, p)));
      }
      Value nullp = LLVM::ZeroOp::create(b, floc, ptr);
      // Device-resident buffers: the device table follows the host table (bufs[nbufs + slot]);
      // every view carries its device pointer and the GPU API's device interface.
      Value iface;
      int64_t nbufs = 0;
      if (resident) {
        for (const char *a : {"kiln.params", "kiln.io", "kiln.states"})
          if (auto arr = module->getAttrOfType<ArrayAttr>(a)) nbufs += arr.size();
        nbufs += f->getAttrOfType<ArrayAttr>("kiln.arena").size();
        std::string ifaceName = "halide_" + gpu + "_device_interface";
        auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(ifaceName);
        if (!fn) {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToEnd(module.getBody());
          fn = LLVM::LLVMFuncOp::create(b, floc, ifaceName, LLVM::LLVMFunctionType::get(ptr, {}));
        }
        iface = LLVM::CallOp::create(b, floc, fn, ValueRange{}).getResult();
      }

      static const int64_t kStatic[] = {-1};
      std::function<int64_t(Value)> slotOf = [&](Value v) -> int64_t {
        if (auto ba = dyn_cast<BlockArgument>(v)) {
          if (auto loop = dyn_cast<kiln::LoopOp>(ba.getOwner()->getParentOp()))
            return ba.getArgNumber() == 0 ? slotOf(loop.getInit())
                                          : loop->getAttrOfType<IntegerAttr>("kiln.step_buffer").getInt();
          return f.getArgAttrOfType<IntegerAttr>(ba.getArgNumber(), "kiln.buffer").getInt();
        }
        return v.getDefiningOp()->getAttrOfType<IntegerAttr>("kiln.buffer").getInt();
      };
      std::function<ArrayRef<int64_t>(Value)> symsOf = [&](Value v) -> ArrayRef<int64_t> {
        if (auto ba = dyn_cast<BlockArgument>(v)) {
          if (auto loop = dyn_cast<kiln::LoopOp>(ba.getOwner()->getParentOp()))
            return ba.getArgNumber() == 0 ? symsOf(loop.getInit()) : ArrayRef<int64_t>(kStatic);
          return f.getArgAttrOfType<DenseI64ArrayAttr>(ba.getArgNumber(), "kiln.syms").asArrayRef();
        }
        return v.getDefiningOp()->getAttrOfType<DenseI64ArrayAttr>("kiln.syms").asArrayRef();
      };
      auto hostOf = [&](Value v, Location loc) {
        Value slotPtr = LLVM::GEPOp::create(b, loc, ptr, ptr, bufs, ArrayRef<LLVM::GEPArg>{(int32_t)slotOf(v)});
        return LLVM::LoadOp::create(b, loc, ptr, slotPtr).getResult();
      };
      auto field = [&](Value view, ArrayRef<LLVM::GEPArg> idx) {
        return LLVM::GEPOp::create(b, floc, ptr, viewTy, view, idx).getResult();
      };
      auto fillView = [&](Value view, Value v, Location loc) {
        auto rt = cast<RankedTensorType>(v.getType());
        Value host = hostOf(v, loc);
        // halide_type_t {code, bits, lanes}: float = 2, int = 0; 32 bits; 1 lane.
        int64_t code = rt.getElementType().isF32() ? 2 : 0;
        LLVM::StoreOp::create(b, loc, c64(0), field(view, {0, 0, 0}));
        LLVM::StoreOp::create(b, loc, nullp, field(view, {0, 0, 1}));
        LLVM::StoreOp::create(b, loc, host, field(view, {0, 0, 2}));
        // flags: host-dirty for CUDA kernels on host buffers, so each call copies its operands
        // to the device; none on device-resident buffers, whose device copy is current.
        LLVM::StoreOp::create(b, loc, c64(!gpu.empty() && !resident ? 1 : 0), field(view, {0, 0, 3}));
        if (resident) {
          Value dptr = LLVM::GEPOp::create(b, loc, ptr, ptr, bufs, ArrayRef<LLVM::GEPArg>{(int32_t)(nbufs + slotOf(v))});
          Value dev = LLVM::PtrToIntOp::create(b, loc, i64, LLVM::LoadOp::create(b, loc, ptr, dptr));
          LLVM::StoreOp::create(b, loc, dev, field(view, {0, 0, 0}));
          LLVM::StoreOp::create(b, loc, iface, field(view, {0, 0, 1}));
        }
        LLVM::StoreOp::create(b, loc, c32(code | (32 << 8) | (1 << 16)), field(view, {0, 0, 4}));
        LLVM::StoreOp::create(b, loc, c32(rt.getRank()), field(view, {0, 0, 5}));
        LLVM::StoreOp::create(b, loc, field(view, {0, 1}), field(view, {0, 0, 6}));
        LLVM::StoreOp::create(b, loc, nullp, field(view, {0, 0, 7}));
        ArrayRef<int64_t> syms = symsOf(v);
        Value stride = c32(1);
        for (int64_t k = 0; k < rt.getRank(); ++k) {  // Halide dim k is tensor dim rank-1-k
          int64_t d = rt.getRank() - 1 - k;
          Value extent = syms[d] >= 0 ? symVals[syms[d]] : c32(rt.getDimSize(d));
          int32_t kk = (int32_t)k;
          LLVM::StoreOp::create(b, loc, c32(0), field(view, {0, 1, kk, 0}));
          LLVM::StoreOp::create(b, loc, extent, field(view, {0, 1, kk, 1}));
          LLVM::StoreOp::create(b, loc, stride, field(view, {0, 1, kk, 2}));
          LLVM::StoreOp::create(b, loc, c32(0), field(view, {0, 1, kk, 3}));
          stride = LLVM::MulOp::create(b, loc, stride, extent);
        }
      };
      llvm::DenseMap<Operation *, int64_t> kernelIndex;
      for (auto [idx, op] : llvm::enumerate(kernels)) kernelIndex[op] = (int64_t)idx;
      auto newBlock = [&](TypeRange args, Location loc) {
        SmallVector<Location> locs(args.size(), loc);
        return b.createBlock(&entry.getBody(), std::prev(entry.getBody().end()), args, locs);
      };
      // A non-zero status returns it, with a kernel index (-1: none), through the fail block.
      auto onFailure = [&](Value status, int64_t kernel, Location loc) {
        Value bad = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, status, c32(0));
        Block *cur = b.getInsertionBlock();
        Block *next = newBlock({}, loc);
        b.setInsertionPointToEnd(cur);
        LLVM::CondBrOp::create(b, loc, bad, failBlock, ValueRange{status, c32(kernel)}, next, ValueRange{});
        b.setInsertionPointToStart(next);
      };
      auto callKernel = [&](Operation *op) -> LogicalResult {
        Location loc = op->getLoc();
        unsigned n = op->getNumOperands();
        for (unsigned i = 0; i < n; ++i) fillView(views[i], op->getOperand(i), loc);
        fillView(views[n], op->getResult(0), loc);
        auto name = op->getAttrOfType<StringAttr>("kiln.kernel");
        if (!name) return op->emitError("expected kiln.kernel: run kiln-outline-kernels first");
        auto callee = kernelDecl(name.getValue(), n + 1, loc);
        SmallVector<Value> args(views.begin(), views.begin() + n + 1);
        auto check = [&](Value status) { onFailure(status, kernelIndex[op], loc); };
        Value nullCtx = LLVM::ZeroOp::create(b, loc, ptr);
        bool onHost = resident && isa<kiln::LshSortOp>(op);  // a host kernel: operands down, result up
        if (onHost)
          for (unsigned i = 0; i < n; ++i) {
            LLVM::StoreOp::create(b, loc, c64(2), field(views[i], {0, 0, 3}));  // device-dirty
            check(LLVM::CallOp::create(b, loc, kernelDecl("halide_copy_to_host", 2, loc), ValueRange{nullCtx, views[i]})
                          .getResult());
          }
        check(LLVM::CallOp::create(b, loc, callee, args).getResult());
        if (onHost) {
          LLVM::StoreOp::create(b, loc, c64(1), field(views[n], {0, 0, 3}));  // host-dirty
          check(LLVM::CallOp::create(b, loc, kernelDecl("halide_copy_to_device", 3, loc),
                                         ValueRange{nullCtx, views[n], iface})
                        .getResult());
        }
        if (!gpu.empty() && !resident) {  // the result back to the host, the call's device copies freed
          Value rc = LLVM::CallOp::create(b, loc, kernelDecl("halide_copy_to_host", 2, loc), ValueRange{nullCtx, views[n]})
                         .getResult();
          for (unsigned i = 0; i <= n; ++i)
            LLVM::CallOp::create(b, loc, kernelDecl("halide_device_free", 2, loc), ValueRange{nullCtx, views[i]});
          check(rc);
        }
        return success();
      };
      std::function<LogicalResult(Block &)> emitBlock = [&](Block &blk) -> LogicalResult {
        for (Operation &op : blk) {
          if (isa<kiln::RecurrentOp>(op)) return op.emitError("expected no kiln.recurrent: run kiln-lower-act first");
          if (kiln::isKernelOp(&op)) {
            if (mlir::failed(callKernel(&op))) return failure();
            continue;
          }
          auto loop = dyn_cast<kiln::LoopOp>(op);
          if (!loop) continue;
          Location loc = loop.getLoc();
          Block &body = loop.getBody().front();
          Block *cur = b.getInsertionBlock();
          Block *header = newBlock({i32}, loc);
          b.setInsertionPointToEnd(cur);
          LLVM::BrOp::create(b, loc, ValueRange{c32(0)}, header);
          b.setInsertionPointToStart(header);
          Value step = header->getArgument(0);
          LLVM::StoreOp::create(b, loc, step, hostOf(body.getArgument(1), loc));
          if (resident) {  // the step number up to the device, where the body's kernels read it
            fillView(views[0], body.getArgument(1), loc);
            LLVM::StoreOp::create(b, loc, c64(1), field(views[0], {0, 0, 3}));  // host-dirty
            Value up = LLVM::CallOp::create(b, loc, kernelDecl("halide_copy_to_device", 3, loc),
                                            ValueRange{LLVM::ZeroOp::create(b, loc, ptr), views[0], iface})
                           .getResult();
            onFailure(up, -1, loc);
          }
          if (mlir::failed(emitBlock(body))) return failure();
          auto yield = cast<kiln::YieldOp>(body.getTerminator());
          Value next = yield.getValues()[1];
          Operation *flagOp = yield.getValues()[0].getDefiningOp();
          int64_t flagKernel = flagOp && kernelIndex.count(flagOp) ? kernelIndex[flagOp] : -1;
          auto check = [&](Value status) { onFailure(status, flagKernel, loc); };
          if (resident) {  // the flag down to the host; the next carry copied on the device
            Value nullCtx = LLVM::ZeroOp::create(b, loc, ptr);
            fillView(views[0], yield.getValues()[0], loc);
            LLVM::StoreOp::create(b, loc, c64(2), field(views[0], {0, 0, 3}));
            check(LLVM::CallOp::create(b, loc, kernelDecl("halide_copy_to_host", 2, loc), ValueRange{nullCtx, views[0]})
                      .getResult());
            fillView(views[0], next, loc);
            fillView(views[1], body.getArgument(0), loc);
            check(LLVM::CallOp::create(b, loc, kernelDecl("halide_buffer_copy", 4, loc),
                                       ValueRange{nullCtx, views[0], iface, views[1]})
                      .getResult());
          }
          Value flag = LLVM::LoadOp::create(b, loc, i32, hostOf(yield.getValues()[0], loc));
          if (!resident && slotOf(next) != slotOf(body.getArgument(0))) {  // the next carry, on the host
            auto nt = cast<RankedTensorType>(next.getType());
            ArrayRef<int64_t> syms = symsOf(next);
            Value bytes = c64(4);
            for (int64_t d = 0; d < nt.getRank(); ++d)
              bytes = LLVM::MulOp::create(b, loc, bytes,
                                          syms[d] >= 0 ? LLVM::ZExtOp::create(b, loc, i64, symVals[syms[d]]).getResult()
                                                       : c64(nt.getDimSize(d)));
            LLVM::MemcpyOp::create(b, loc, hostOf(body.getArgument(0), loc), hostOf(next, loc), bytes, false);
          }
          Value step1 = LLVM::AddOp::create(b, loc, step, c32(1));
          Value more = LLVM::AndOp::create(
              b, loc, LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, flag, c32(0)),
              LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, step1, c32((int64_t)loop.getMaxSteps())));
          Block *latch = b.getInsertionBlock();
          Block *exit = newBlock({}, loc);
          b.setInsertionPointToEnd(latch);
          LLVM::CondBrOp::create(b, loc, more, header, ValueRange{step1}, exit, ValueRange{});
          b.setInsertionPointToStart(exit);
        }
        return success();
      };
      if (mlir::failed(emitBlock(f.getBody().front()))) return signalPassFailure();
      LLVM::ReturnOp::create(b, floc, c32(0));
      f.erase();
    }
    SmallVector<StringAttr> drop;
    for (NamedAttribute a : module->getAttrs())
      if (a.getName().getValue().starts_with("kiln.")) drop.push_back(a.getName());
    for (StringAttr a : drop) module->removeAttr(a);
  }
};
}  // namespace
