// HalideBufferView.h - Halide's buffer descriptor (halide_buffer_t with four
// halide_dimension_t) as LLVM IR, for the entry functions kiln-lower-to-llvm builds: the
// struct types, and stores to its fields by name. The layout is checked against Halide's own
// header (HalideRuntime.h) by static_asserts in HalideBufferView.cpp.
#pragma once
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace kiln {

class HalideBufferView {
 public:
  // halide_buffer_t's fields, in order.
  enum class Field { Device, DeviceInterface, Host, Flags, Type, Dimensions, Dim, Padding };
  // halide_dimension_t's fields, in order.
  enum class DimField { Min, Extent, Stride, Flags };
  static constexpr int kMaxDims = 4;
  // halide_buffer_t.flags: the host copy, or the device copy, is newer than the other.
  static const uint64_t kHostDirty, kDeviceDirty;

  explicit HalideBufferView(mlir::MLIRContext *ctx);
  // The view: a halide_buffer_t followed by its dims (buffer.dim points at them).
  mlir::Type viewType() const { return view_; }
  // A pointer to a field of the view at `view`.
  mlir::Value field(mlir::OpBuilder &b, mlir::Location loc, mlir::Value view, Field f) const;
  mlir::Value dimField(mlir::OpBuilder &b, mlir::Location loc, mlir::Value view, int dim, DimField f) const;
  // The dims array of the view (what buffer.dim points at).
  mlir::Value dims(mlir::OpBuilder &b, mlir::Location loc, mlir::Value view) const;
  // halide_type_t {code, bits, lanes} packed as the i32 it is in memory: f32, i32, bf16 or u8 (i8 tensors: a quantized weight's bytes), one lane.
  static int32_t typeCode(mlir::Type element);

 private:
  mlir::Type buffer_, dim_, view_, ptr_;
};

}  // namespace kiln
