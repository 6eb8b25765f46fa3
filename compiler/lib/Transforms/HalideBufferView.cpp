// HalideBufferView.cpp - the LLVM types of Halide's buffer descriptor, checked against
// HalideRuntime.h (see HalideBufferView.h).
#include "HalideBufferView.h"

#include <HalideRuntime.h>

#include <cstddef>

using namespace mlir;

namespace kiln {
namespace {
// The LLVM struct built below, field for field: its C layout must be halide_buffer_t's.
struct BufferLayout {
  uint64_t device;
  const void *device_interface;
  uint8_t *host;
  uint64_t flags;
  uint32_t type;  // halide_type_t: code, bits, lanes (u8, u8, u16)
  int32_t dimensions;
  void *dim;
  void *padding;
};
struct DimLayout {
  int32_t min, extent, stride;
  uint32_t flags;
};
static_assert(sizeof(BufferLayout) == sizeof(halide_buffer_t));
static_assert(offsetof(BufferLayout, device) == offsetof(halide_buffer_t, device));
static_assert(offsetof(BufferLayout, device_interface) == offsetof(halide_buffer_t, device_interface));
static_assert(offsetof(BufferLayout, host) == offsetof(halide_buffer_t, host));
static_assert(offsetof(BufferLayout, flags) == offsetof(halide_buffer_t, flags));
static_assert(offsetof(BufferLayout, type) == offsetof(halide_buffer_t, type) && sizeof(halide_type_t) == 4);
static_assert(offsetof(BufferLayout, dimensions) == offsetof(halide_buffer_t, dimensions));
static_assert(offsetof(BufferLayout, dim) == offsetof(halide_buffer_t, dim));
static_assert(offsetof(BufferLayout, padding) == offsetof(halide_buffer_t, padding));
static_assert(sizeof(DimLayout) == sizeof(halide_dimension_t));
static_assert(offsetof(DimLayout, min) == offsetof(halide_dimension_t, min));
static_assert(offsetof(DimLayout, extent) == offsetof(halide_dimension_t, extent));
static_assert(offsetof(DimLayout, stride) == offsetof(halide_dimension_t, stride));
static_assert(offsetof(DimLayout, flags) == offsetof(halide_dimension_t, flags));
static_assert((int)HalideBufferView::Field::Padding == 7 && (int)HalideBufferView::DimField::Flags == 3);
}  // namespace

const uint64_t HalideBufferView::kHostDirty = halide_buffer_flag_host_dirty;
const uint64_t HalideBufferView::kDeviceDirty = halide_buffer_flag_device_dirty;

HalideBufferView::HalideBufferView(MLIRContext *ctx) {
  Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
  ptr_ = LLVM::LLVMPointerType::get(ctx);
  buffer_ = LLVM::LLVMStructType::getLiteral(ctx, {i64, ptr_, ptr_, i64, i32, i32, ptr_, ptr_});
  dim_ = LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32});
  view_ = LLVM::LLVMStructType::getLiteral(ctx, {buffer_, LLVM::LLVMArrayType::get(dim_, kMaxDims)});
}

Value HalideBufferView::field(OpBuilder &b, Location loc, Value view, Field f) const {
  return LLVM::GEPOp::create(b, loc, ptr_, view_, view, ArrayRef<LLVM::GEPArg>{0, 0, (int32_t)f});
}

Value HalideBufferView::dimField(OpBuilder &b, Location loc, Value view, int d, DimField f) const {
  return LLVM::GEPOp::create(b, loc, ptr_, view_, view, ArrayRef<LLVM::GEPArg>{0, 1, d, (int32_t)f});
}

Value HalideBufferView::dims(OpBuilder &b, Location loc, Value view) const {
  return LLVM::GEPOp::create(b, loc, ptr_, view_, view, ArrayRef<LLVM::GEPArg>{0, 1});
}

int32_t HalideBufferView::typeCode(Type element) {
  halide_type_t t(element.isF32() ? halide_type_float : halide_type_int, 32, 1);
  if (element.isBF16()) t = halide_type_t(halide_type_bfloat, 16, 1);
  if (element.isInteger(8)) t = halide_type_t(halide_type_uint, 8, 1);  // a quantized weight's bytes
  int32_t packed;
  static_assert(sizeof(t) == sizeof(packed));
  __builtin_memcpy(&packed, &t, sizeof t);
  return packed;
}

}  // namespace kiln
