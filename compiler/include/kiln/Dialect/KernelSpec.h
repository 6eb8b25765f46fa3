// KernelSpec.h - what one kernel computes and how it is scheduled: an op's kind, operand and
// result types, semantic attributes (its getKernelAttrs hook) and typed schedule. Its
// canonical text keys the kernel cache: equal text, same kernel, generated once per target.
//
//   linear;act=gelu_tanh;layout=in_out;s.parallel=1;s.tile_m=4;s.tile_n=64;s.vec=16|?x128:f32,128x512:f32,512:f32->?x512:f32
//
// A strided operand or result (kiln-fold-views) adds its strides: `12x?x64:f32/64,2304,1`.
// Further results follow the first after commas: `...->4x?x64:f32,4x?:f32`.
//
// The code generator reads the typed attributes of `source` (one of the ops sharing the spec)
// and the `schedule` fields; the text is only the key.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/Dialect/KilnDialect.h"

namespace kiln {

struct TensorDesc {
  std::vector<int64_t> dims;  // -1: dynamic (a sequence length)
  bool is_int = false;        // i32 (token ids) or f32
  bool is_bf16 = false;       // bfloat16 (a weight kept in bf16, kiln-assign-precision)
  bool is_u8 = false;         // bytes (a quantized weight's blocks, kiln-quantize-weights)
  std::vector<int64_t> strides;  // a strided view (#kiln.view), tensor order; empty: dense
  // One sequence of a batch (kiln.per_sequence): a dense tensor's dims outside the innermost
  // have the whole batch's strides, which the kernel takes at run time.
  bool per_sequence = false;
  std::string text() const;
};

struct KernelSpec {
  std::string kind;                          // the op's name without "kiln.": linear, attention, ...
  KernelFamily family = KernelFamily::None;  // the kernel family (KilnInterfaces.h)
  mlir::Operation *source = nullptr;         // an op with this spec
  std::map<std::string, std::string> attrs;  // its semantic attributes (the getKernelAttrs hook)
  ScheduleFields schedule;                   // its kiln.schedule
  std::vector<TensorDesc> inputs;
  TensorDesc output;                     // the first result
  std::vector<TensorDesc> more_outputs;  // further results (an attention's lse), after it in the kernel's arguments

  // The spec of a kernel op (KilnOpInterface with a KernelFamily other than None).
  static KernelSpec of(mlir::Operation *op);
  std::string text() const;
  // "kiln_<kind>_<16 hex digits of FNV-1a(text + "@" + target)>"
  std::string name(const std::string &target) const;
};

uint64_t fnv1a(const std::string &s);

}  // namespace kiln
