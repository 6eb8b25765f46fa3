// kiln-lower-to-llvm: each entry function becomes an LLVM function that calls its kernels.
//
// Algorithm, per func.func @NAME (after kiln-plan-buffers):
//   1. Create llvm.func @<prefix>NAME (prefix kiln_entry_ by default)(%buffers: !llvm.ptr, %syms: !llvm.ptr, %failed: !llvm.ptr)
//      -> i32, with one halide_buffer_t view (+4 dims, HalideBufferView.h) per kernel argument
//      slot as entry-block allocas, reused by every call.
//   2. Load each sequence length once from %syms (i64, truncated to Halide's i32 extents; the
//      bounds are at most 2^24 and kiln-plan-buffers keeps every tensor under 2^31 elements).
//   3. For each kernel op, in order (callKernel): for each operand and result, fill a view
//      (host pointer = %buffers[kiln.buffer], extents static or from the lengths, dense
//      row-major strides in Halide's innermost-first order, or a #kiln.view's offset and
//      strides); call the kernel (declared once per name; an op that also writes operands in
//      place, kiln::alsoWritten, passes their views again as further outputs after the result);
//      on a non-zero status store the kernel's index to %failed and return the status.
//   4. A kiln.loop becomes a host loop (emitLoop): a header block takes the step number (i32),
//      stores it in the step's buffer and runs the body's kernels; at the yield the next carried
//      value is copied into the carried buffer (memcpy), and the loop repeats while the yielded
//      flag is non-zero and fewer than max_steps steps ran.
//   5. With `gpu` (cuda or opencl) and buffers on the host, every view is marked host-dirty
//      (Halide copies it to the device when a GPU stage reads it) and after each call the result
//      is copied back (halide_copy_to_host) and the call's device copies are freed: correct for
//      any mix of GPU and host kernels, at the price of a copy per operand per call.
//   6. With `resident` (--gpu-buffers=device), the runtime passes each buffer's device pointer
//      after the host table (bufs[nbufs + slot]); views carry it with the GPU API's device
//      interface and no dirty flag. Only host decisions copy (the device synchronisation
//      functions): a host kernel's operands down and its result up (lsh_sort), each step's
//      number up and the loop's flag down; the loop's carry is copied on the device.
//   7. A kernel op marked kiln.per_sequence = B (kiln-loop-sequences) is called once per
//      sequence of the batch B, in a host loop over b < B: each of its views shows sequence b
//      only (a dim of the batch's rows B·L: extent L, the host pointer b·L rows further; a dim
//      of B itself: extent 1, b further), with the whole buffer's strides; a state kept per
//      sequence of B (a KV cache): sequence b's value, b values further.
//   8. Erase the func.func and the kiln ops; drop kiln.* module attributes.
#include <functional>

#include "HalideBufferView.h"
#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERTOLLVM
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;
using Field = kiln::HalideBufferView::Field;
using DimField = kiln::HalideBufferView::DimField;

namespace {

// The lowering of one entry function.
class EntryLowering {
 public:
  EntryLowering(ModuleOp module, func::FuncOp f, const kiln::SeqLengths &lengths, StringRef prefix, StringRef gpu,
                bool resident, llvm::StringMap<LLVM::LLVMFuncOp> &decls)
      : module_(module), f_(f), lengths_(lengths), gpu_(gpu), resident_(resident), decls_(decls),
        b_(module.getContext()), view_(module.getContext()), loc_(f.getLoc()), prefix_(prefix) {
    MLIRContext *ctx = module.getContext();
    i32_ = b_.getI32Type();
    i64_ = b_.getI64Type();
    ptr_ = LLVM::LLVMPointerType::get(ctx);
  }

  LogicalResult run() {
    createEntry();
    if (failed(emitBlock(f_.getBody().front()))) return failure();
    LLVM::ReturnOp::create(b_, loc_, c32(0));
    return success();
  }

 private:
  Value c32(int64_t v) { return LLVM::ConstantOp::create(b_, loc_, i32_, b_.getI32IntegerAttr(v)).getResult(); }
  Value c64(int64_t v) { return LLVM::ConstantOp::create(b_, loc_, i64_, b_.getI64IntegerAttr(v)).getResult(); }
  Value null(Location loc) { return LLVM::ZeroOp::create(b_, loc, ptr_); }

  LLVM::LLVMFuncOp declare(StringRef name, Type result, ArrayRef<Type> args, Location loc) {
    auto it = decls_.find(name);
    if (it != decls_.end()) return it->second;
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToEnd(module_.getBody());
    auto fn = LLVM::LLVMFuncOp::create(b_, loc, name, LLVM::LLVMFunctionType::get(result, args));
    decls_[name] = fn;
    return fn;
  }
  // A function of the kernels' ABI: i32 status from `nargs` pointers (kernels, Halide's runtime).
  LLVM::LLVMFuncOp declareCall(StringRef name, unsigned nargs, Location loc) {
    return declare(name, i32_, SmallVector<Type>(nargs, ptr_), loc);
  }
  Value call(StringRef name, ValueRange args, Location loc) {
    return LLVM::CallOp::create(b_, loc, declareCall(name, args.size(), loc), args).getResult();
  }

  // 1-2. The function, its fail block, the views and the lengths.
  void createEntry() {
    b_.setInsertionPointToEnd(module_.getBody());
    entry_ = LLVM::LLVMFuncOp::create(b_, loc_, (prefix_ + f_.getSymName()).str(),
                                      LLVM::LLVMFunctionType::get(i32_, {ptr_, ptr_, ptr_}));
    Block *body = entry_.addEntryBlock(b_);
    bufs_ = body->getArgument(0);
    Value symsPtr = body->getArgument(1), failed = body->getArgument(2);
    failBlock_ = b_.createBlock(&entry_.getBody(), entry_.getBody().end(), {i32_, i32_}, {loc_, loc_});
    b_.setInsertionPointToStart(failBlock_);
    LLVM::StoreOp::create(b_, loc_, failBlock_->getArgument(1), failed);
    LLVM::ReturnOp::create(b_, loc_, failBlock_->getArgument(0));

    b_.setInsertionPointToStart(body);
    for (unsigned a = 0; a < f_.getNumArguments(); ++a)
      if (f_.getArgAttr(a, "kiln.cache_slots")) slots_ = f_.getArgument(a);
    f_.walk([&](Operation *op) {
      if (kiln::isKernelOp(op)) kernelIndex_[op] = (int64_t)kernelIndex_.size();
    });
    unsigned maxArgs = 2;  // the loop latch uses two views
    for (auto &[op, i] : kernelIndex_)
      maxArgs = std::max(maxArgs, op->getNumOperands() + op->getNumResults() + (unsigned)kiln::alsoWritten(op).size());
    for (unsigned i = 0; i < maxArgs; ++i) views_.push_back(LLVM::AllocaOp::create(b_, loc_, ptr_, view_.viewType(), c32(1), 16));
    if (auto f = module_->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_factors")) factors_.assign(f.asArrayRef().begin(), f.asArrayRef().end());
    for (int s = 0; s < kMaxSyms; ++s) {
      Value p = LLVM::GEPOp::create(b_, loc_, ptr_, i64_, symsPtr, ArrayRef<LLVM::GEPArg>{s});
      symVals_.push_back(LLVM::TruncOp::create(b_, loc_, i32_, LLVM::LoadOp::create(b_, loc_, i64_, p)));
    }
    if (resident_) {  // the device table follows the host table: bufs[nbufs + slot]
      for (const char *a : {"kiln.params", "kiln.io", "kiln.states"})
        if (auto arr = module_->getAttrOfType<ArrayAttr>(a)) nbufs_ += arr.size();
      nbufs_ += f_->getAttrOfType<ArrayAttr>("kiln.arena").size();
      std::string ifaceName = "halide_" + gpu_.str() + "_device_interface";
      iface_ = LLVM::CallOp::create(b_, loc_, declare(ifaceName, ptr_, {}, loc_), ValueRange{}).getResult();
    }
  }

  // The buffer id of a value: its own, its loop's carry or step, or its argument's.
  int64_t slotOf(Value v) {
    if (auto ba = dyn_cast<BlockArgument>(v)) {
      if (auto loop = dyn_cast<kiln::LoopOp>(ba.getOwner()->getParentOp()))
        return ba.getArgNumber() == 0 ? slotOf(loop.getInit()) : loop->getAttrOfType<IntegerAttr>("kiln.step_buffer").getInt();
      return f_.getArgAttrOfType<IntegerAttr>(ba.getArgNumber(), "kiln.buffer").getInt();
    }
    auto r = cast<OpResult>(v);
    if (r.getResultNumber() > 0)  // a further result (an attention's lse)
      return r.getOwner()->getAttrOfType<DenseI64ArrayAttr>("kiln.more_buffers")[r.getResultNumber() - 1];
    return r.getOwner()->getAttrOfType<IntegerAttr>("kiln.buffer").getInt();
  }
  Value hostOf(Value v, Location loc) {
    Value slotPtr = LLVM::GEPOp::create(b_, loc, ptr_, ptr_, bufs_, ArrayRef<LLVM::GEPArg>{(int32_t)slotOf(v)});
    return LLVM::LoadOp::create(b_, loc, ptr_, slotPtr).getResult();
  }
  Value extentOf(Value v, int64_t d) {
    const kiln::Syms &s = lengths_.of(v);
    auto rt = cast<RankedTensorType>(v.getType());
    return s[d] >= 0 ? symVals_[s[d]] : c32(rt.getDimSize(d));
  }
  void storeFlags(Value view, uint64_t flags, Location loc) {
    LLVM::StoreOp::create(b_, loc, c64((int64_t)flags), view_.field(b_, loc, view, Field::Flags));
  }

  // 7. The per-sequence state slot (i64) of sequence `seq` (i32) of the entry: slots[seq] with a
  // kiln.cache_slots input (the runtime checked each id against the batch's bound and that no
  // two are one), else `seq` itself.
  Value cacheSlot(Value seq, Location loc) {
    if (slots_) {
      Value at = LLVM::GEPOp::create(b_, loc, ptr_, i32_, hostOf(slots_, loc), ValueRange{seq});
      seq = LLVM::LoadOp::create(b_, loc, i32_, at);
    }
    return LLVM::SExtOp::create(b_, loc, i64_, seq);
  }

  // The length symbol of the batch's rows `sym` of batch `batch`, or -1.
  int64_t rowsLength(int64_t sym, int64_t batch) const {
    return sym >= 0 && 2 * sym + 1 < (int64_t)factors_.size() && factors_[2 * sym] == batch ? factors_[2 * sym + 1] : -1;
  }

  // 3. A view of v: host pointer, device pointer and interface (resident), type, dims, strides;
  // with `seq` (7.), sequence `seq` of batch `batch` only.
  void fillView(Value view, Value v, Location loc, Value seq = Value(), int64_t batch = -1) {
    auto rt = cast<RankedTensorType>(v.getType());
    LLVM::StoreOp::create(b_, loc, c64(0), view_.field(b_, loc, view, Field::Device));
    LLVM::StoreOp::create(b_, loc, null(loc), view_.field(b_, loc, view, Field::DeviceInterface));
    kiln::ViewAttr strided = kiln::viewOf(v);  // kiln-fold-views: an offset into the buffer, static strides
    Value host = hostOf(v, loc);
    if (strided && strided.getOffset())
      host = LLVM::GEPOp::create(b_, loc, ptr_, rt.getElementType(), host, ArrayRef<LLVM::GEPArg>{(int32_t)strided.getOffset()});
    if (strided && strided.getLastSym() >= 0) {  // a sequence's last row: (L - 1) * stride further
      Value rows = LLVM::SubOp::create(b_, loc, symVals_[strided.getLastSym()], c32(1));
      Value off = LLVM::MulOp::create(b_, loc, rows, c32(strided.getLastStride()));
      host = LLVM::GEPOp::create(b_, loc, ptr_, rt.getElementType(), host, ValueRange{off});
    }
    const kiln::Syms &sy = lengths_.of(v);
    auto symOf = [&](int64_t d) { return d < (int64_t)sy.size() ? sy[d] : (int64_t)-1; };
    if (seq) {  // 7. sequence `seq`: b·L rows (or b) further along each dim of the batch
      Value off = c64(0), stride = c64(1), b64 = LLVM::SExtOp::create(b_, loc, i64_, seq);
      for (int64_t d = rt.getRank() - 1; d >= 0; --d) {
        Value st = strided ? c64(strided.getStrides()[d]) : stride;
        Value step;
        if (int64_t len = rowsLength(symOf(d), batch); len >= 0)
          step = LLVM::MulOp::create(b_, loc, st, LLVM::SExtOp::create(b_, loc, i64_, symVals_[len]).getResult());
        else if (symOf(d) == batch)
          step = st;
        if (step) off = LLVM::AddOp::create(b_, loc, off, LLVM::MulOp::create(b_, loc, step, b64).getResult());
        stride = LLVM::MulOp::create(b_, loc, stride, LLVM::SExtOp::create(b_, loc, i64_, extentOf(v, d)).getResult());
      }
      if (kiln::StateOp st = kiln::perSequenceState(v); st && (int64_t)*st.getBatch() == batch) {  // its sequence's cache
        Value slot = cacheSlot(seq, loc), n = c64(rt.getNumElements());
        off = LLVM::AddOp::create(b_, loc, off, LLVM::MulOp::create(b_, loc, n, slot).getResult());
      }
      host = LLVM::GEPOp::create(b_, loc, ptr_, rt.getElementType(), host, ValueRange{off});
    } else if (kiln::StateOp st = kiln::perSequenceState(v); st && slots_) {  // one sequence: its slot's cache
      Value slot = cacheSlot(c32(0), loc), n = c64(rt.getNumElements());
      host = LLVM::GEPOp::create(b_, loc, ptr_, rt.getElementType(), host, ValueRange{LLVM::MulOp::create(b_, loc, n, slot).getResult()});
    }
    LLVM::StoreOp::create(b_, loc, host, view_.field(b_, loc, view, Field::Host));
    // Host-dirty for GPU kernels on host buffers, so each call copies its operands to the
    // device; nothing on device-resident buffers, whose device copy is current.
    storeFlags(view, !gpu_.empty() && !resident_ ? kiln::HalideBufferView::kHostDirty : 0, loc);
    if (resident_) {
      Value dptr = LLVM::GEPOp::create(b_, loc, ptr_, ptr_, bufs_, ArrayRef<LLVM::GEPArg>{(int32_t)(nbufs_ + slotOf(v))});
      Value dev = LLVM::PtrToIntOp::create(b_, loc, i64_, LLVM::LoadOp::create(b_, loc, ptr_, dptr));
      LLVM::StoreOp::create(b_, loc, dev, view_.field(b_, loc, view, Field::Device));
      LLVM::StoreOp::create(b_, loc, iface_, view_.field(b_, loc, view, Field::DeviceInterface));
    }
    LLVM::StoreOp::create(b_, loc, c32(kiln::HalideBufferView::typeCode(rt.getElementType())),
                          view_.field(b_, loc, view, Field::Type));
    LLVM::StoreOp::create(b_, loc, c32(rt.getRank()), view_.field(b_, loc, view, Field::Dimensions));
    LLVM::StoreOp::create(b_, loc, view_.dims(b_, loc, view), view_.field(b_, loc, view, Field::Dim));
    LLVM::StoreOp::create(b_, loc, null(loc), view_.field(b_, loc, view, Field::Padding));
    Value stride = c32(1);
    for (int64_t k = 0; k < rt.getRank(); ++k) {  // Halide dim k is tensor dim rank-1-k
      int64_t d = rt.getRank() - 1 - k;
      Value extent = extentOf(v, d), shown = extent;  // the buffer's extent; the view's
      if (seq) {
        if (int64_t len = rowsLength(symOf(d), batch); len >= 0)
          shown = symVals_[len];
        else if (symOf(d) == batch)
          shown = c32(1);
      }
      LLVM::StoreOp::create(b_, loc, c32(0), view_.dimField(b_, loc, view, (int)k, DimField::Min));
      LLVM::StoreOp::create(b_, loc, shown, view_.dimField(b_, loc, view, (int)k, DimField::Extent));
      Value dimStride = strided ? c32(strided.getStrides()[rt.getRank() - 1 - k]) : stride;
      LLVM::StoreOp::create(b_, loc, dimStride, view_.dimField(b_, loc, view, (int)k, DimField::Stride));
      LLVM::StoreOp::create(b_, loc, c32(0), view_.dimField(b_, loc, view, (int)k, DimField::Flags));
      stride = LLVM::MulOp::create(b_, loc, stride, extent);
    }
  }

  Block *newBlock(TypeRange args, Location loc) {
    SmallVector<Location> locs(args.size(), loc);
    return b_.createBlock(&entry_.getBody(), std::prev(entry_.getBody().end()), args, locs);
  }
  // A non-zero status returns it, with a kernel index (-1: none), through the fail block.
  void onFailure(Value status, int64_t kernel, Location loc) {
    Value bad = LLVM::ICmpOp::create(b_, loc, LLVM::ICmpPredicate::ne, status, c32(0));
    Block *cur = b_.getInsertionBlock();
    Block *next = newBlock({}, loc);
    b_.setInsertionPointToEnd(cur);
    LLVM::CondBrOp::create(b_, loc, bad, failBlock_, ValueRange{status, c32(kernel)}, next, ValueRange{});
    b_.setInsertionPointToStart(next);
  }

  // 6. Device synchronisation around a host decision: the view's device copy down to the host,
  // or its host copy up to the device.
  void toHost(Value view, int64_t kernel, Location loc) {
    storeFlags(view, kiln::HalideBufferView::kDeviceDirty, loc);
    onFailure(call("halide_copy_to_host", {null(loc), view}, loc), kernel, loc);
  }
  void toDevice(Value view, int64_t kernel, Location loc) {
    storeFlags(view, kiln::HalideBufferView::kHostDirty, loc);
    onFailure(call("halide_copy_to_device", {null(loc), view, iface_}, loc), kernel, loc);
  }

  // A host loop's header block, entered with 0: returns its counter (i32); the body follows.
  Value openLoop(Location loc) {
    Block *cur = b_.getInsertionBlock();
    Block *header = newBlock({i32_}, loc);
    b_.setInsertionPointToEnd(cur);
    LLVM::BrOp::create(b_, loc, ValueRange{c32(0)}, header);
    b_.setInsertionPointToStart(header);
    return header->getArgument(0);
  }
  // The latch: back to the header of `counter` with `next` while `more`, else on after the loop.
  void closeLoop(Value counter, Value next, Value more, Location loc) {
    Block *header = cast<BlockArgument>(counter).getOwner();
    Block *latch = b_.getInsertionBlock();
    Block *exit = newBlock({}, loc);
    b_.setInsertionPointToEnd(latch);
    LLVM::CondBrOp::create(b_, loc, more, header, ValueRange{next}, exit, ValueRange{});
    b_.setInsertionPointToStart(exit);
  }

  // 3, 5, 6, 7. One kernel call, or one per sequence.
  LogicalResult callKernel(Operation *op) {
    Location loc = op->getLoc();
    auto perSeq = op->getAttrOfType<IntegerAttr>("kiln.per_sequence");
    if (!perSeq) return callKernelOnce(op, Value(), -1);
    int64_t batch = perSeq.getInt();
    if (batch < 0 || batch >= (int64_t)symVals_.size()) return op->emitError("kiln.per_sequence names no symbol");
    Value seq = openLoop(loc);
    if (failed(callKernelOnce(op, seq, batch))) return failure();
    Value seq1 = LLVM::AddOp::create(b_, loc, seq, c32(1));
    closeLoop(seq, seq1, LLVM::ICmpOp::create(b_, loc, LLVM::ICmpPredicate::slt, seq1, symVals_[batch]), loc);
    return success();
  }
  LogicalResult callKernelOnce(Operation *op, Value seq, int64_t batch) {
    Location loc = op->getLoc();
    unsigned n = op->getNumOperands(), nr = op->getNumResults();
    for (unsigned i = 0; i < n; ++i) fillView(views_[i], op->getOperand(i), loc, seq, batch);
    for (unsigned i = 0; i < nr; ++i) fillView(views_[n + i], op->getResult(i), loc, seq, batch);
    auto name = op->getAttrOfType<StringAttr>("kiln.kernel");
    if (!name) return op->emitError("expected kiln.kernel: run kiln-outline-kernels first");
    int64_t index = kernelIndex_[op];
    bool onHost = resident_ && !kiln::runtimeKernel(op).empty();  // a host kernel: operands down, result up
    if (onHost)
      for (unsigned i = 0; i < n; ++i) toHost(views_[i], index, loc);
    SmallVector<Value> args(views_.begin(), views_.begin() + n + nr);
    for (unsigned i : kiln::alsoWritten(op)) args.push_back(views_[i]);  // further outputs: operands' own views
    onFailure(call(name.getValue(), args, loc), index, loc);
    if (onHost) toDevice(views_[n], index, loc);
    if (!gpu_.empty() && !resident_) {  // the results back to the host, the call's device copies freed
      SmallVector<Value> rcs;
      for (unsigned i = 0; i < nr; ++i) rcs.push_back(call("halide_copy_to_host", {null(loc), views_[n + i]}, loc));
      for (unsigned i = 0; i < n + nr; ++i) call("halide_device_free", {null(loc), views_[i]}, loc);
      for (Value rc : rcs) onFailure(rc, index, loc);
    }
    return success();
  }

  // 4, 6. A host loop.
  LogicalResult emitLoop(kiln::LoopOp loop) {
    Location loc = loop.getLoc();
    Block &body = loop.getBody().front();
    Value step = openLoop(loc);
    LLVM::StoreOp::create(b_, loc, step, hostOf(body.getArgument(1), loc));
    if (resident_) {  // the step number up to the device, where the body's kernels read it
      fillView(views_[0], body.getArgument(1), loc);
      toDevice(views_[0], -1, loc);
    }
    if (failed(emitBlock(body))) return failure();
    auto yield = cast<kiln::YieldOp>(body.getTerminator());
    Value next = yield.getValues()[1];
    Operation *flagOp = yield.getValues()[0].getDefiningOp();
    int64_t flagKernel = flagOp && kernelIndex_.count(flagOp) ? kernelIndex_[flagOp] : -1;
    if (resident_) {  // the flag down to the host; the next carry copied on the device
      fillView(views_[0], yield.getValues()[0], loc);
      toHost(views_[0], flagKernel, loc);
      fillView(views_[0], next, loc);
      fillView(views_[1], body.getArgument(0), loc);
      onFailure(call("halide_buffer_copy", {null(loc), views_[0], iface_, views_[1]}, loc), flagKernel, loc);
    }
    Value flag = LLVM::LoadOp::create(b_, loc, i32_, hostOf(yield.getValues()[0], loc));
    if (!resident_ && slotOf(next) != slotOf(body.getArgument(0))) {  // the next carry, on the host
      auto nt = cast<RankedTensorType>(next.getType());
      Value bytes = c64(4);
      for (int64_t d = 0; d < nt.getRank(); ++d)
        bytes = LLVM::MulOp::create(b_, loc, bytes, LLVM::ZExtOp::create(b_, loc, i64_, extentOf(next, d)).getResult());
      LLVM::MemcpyOp::create(b_, loc, hostOf(body.getArgument(0), loc), hostOf(next, loc), bytes, false);
    }
    Value step1 = LLVM::AddOp::create(b_, loc, step, c32(1));
    Value more = LLVM::AndOp::create(
        b_, loc, LLVM::ICmpOp::create(b_, loc, LLVM::ICmpPredicate::ne, flag, c32(0)),
        LLVM::ICmpOp::create(b_, loc, LLVM::ICmpPredicate::slt, step1, c32((int64_t)loop.getMaxSteps())));
    closeLoop(step, step1, more, loc);
    return success();
  }

  LogicalResult emitBlock(Block &blk) {
    for (Operation &op : blk) {
      if (isa<kiln::RecurrentOp>(op)) return op.emitError("expected no kiln.recurrent: run kiln-lower-act first");
      if (kiln::isKernelOp(&op)) {
        if (failed(callKernel(&op))) return failure();
      } else if (auto loop = dyn_cast<kiln::LoopOp>(op)) {
        if (failed(emitLoop(loop))) return failure();
      }
    }
    return success();
  }

  ModuleOp module_;
  func::FuncOp f_;
  Value slots_;  // the entry's kiln.cache_slots input, if any
  const kiln::SeqLengths &lengths_;
  StringRef gpu_;
  bool resident_;
  llvm::StringMap<LLVM::LLVMFuncOp> &decls_;
  OpBuilder b_;
  kiln::HalideBufferView view_;
  Location loc_;
  StringRef prefix_;
  Type i32_, i64_, ptr_;
  LLVM::LLVMFuncOp entry_;
  Block *failBlock_ = nullptr;
  Value bufs_, iface_;
  int64_t nbufs_ = 0;
  SmallVector<Value> views_, symVals_;
  SmallVector<int64_t> factors_;             // kiln.seq_factors: per symbol, its batch and length (rows), or -1
  static constexpr int kMaxSyms = 8;          // KILN_MAX_SYMS: the entry's %syms holds this many
  llvm::MapVector<Operation *, int64_t> kernelIndex_;
};

struct LowerToLLVMPass : kiln::impl::LowerToLLVMBase<LowerToLLVMPass> {
  using LowerToLLVMBase::LowerToLLVMBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringMap<LLVM::LLVMFuncOp> decls;
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp f : funcs) {
      FailureOr<kiln::SeqLengths> lengths = kiln::SeqLengths::infer(f);
      if (failed(lengths)) return signalPassFailure();
      EntryLowering entry(module, f, *lengths, prefix, gpu, resident, decls);
      if (failed(entry.run())) return signalPassFailure();
      f.erase();
    }
    SmallVector<StringAttr> drop;
    for (NamedAttribute a : module->getAttrs())
      if (a.getName().getValue().starts_with("kiln.")) drop.push_back(a.getName());
    for (StringAttr a : drop) module->removeAttr(a);
  }
};
}  // namespace
