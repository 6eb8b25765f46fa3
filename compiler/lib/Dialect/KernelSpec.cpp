// KernelSpec.cpp - a kernel op's spec from its hooks, and its canonical text and name.
#include "kiln/Dialect/KernelSpec.h"

#include <cstdio>

using namespace mlir;

namespace kiln {

std::string TensorDesc::text() const {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + (dims[i] < 0 ? std::string("?") : std::to_string(dims[i]));
  s += is_int ? ":i32" : is_bf16 ? ":bf16" : is_u8 ? ":u8" : ":f32";
  for (size_t i = 0; i < strides.size(); ++i) s += (i ? "," : "/") + std::to_string(strides[i]);
  if (per_sequence && strides.empty()) s += "/seq";
  return s;
}

// A value's type and, where it is a strided view (not a dense one kiln-fold-views placed),
// its strides.
static TensorDesc desc(Value v) {
  auto rt = cast<RankedTensorType>(v.getType());
  TensorDesc d;
  for (int64_t s : rt.getShape()) d.dims.push_back(ShapedType::isDynamic(s) ? -1 : s);
  d.is_int = rt.getElementType().isInteger(32);
  d.is_bf16 = rt.getElementType().isBF16();
  d.is_u8 = rt.getElementType().isInteger(8);
  if (ViewAttr view = viewOf(v); view && view.getKind() != ViewKind::placed) {
    ArrayRef<int64_t> strides = view.getStrides().asArrayRef();
    d.strides.assign(strides.begin(), strides.end());
  }
  return d;
}

KernelSpec KernelSpec::of(Operation *op) {
  KernelSpec k;
  auto hooks = cast<KilnOpInterface>(op);
  k.kind = op->getName().stripDialect().str();
  k.family = hooks.getKernelFamily();
  k.source = op;
  KernelAttrs attrs;
  hooks.getKernelAttrs(attrs);
  k.attrs = attrs.entries();
  k.schedule = scheduleOf(op);
  for (Value v : op->getOperands()) k.inputs.push_back(desc(v));
  k.output = desc(op->getResult(0));
  for (unsigned i = 1; i < op->getNumResults(); ++i) k.more_outputs.push_back(desc(op->getResult(i)));
  if (op->hasAttr("kiln.per_sequence")) {
    for (TensorDesc &d : k.inputs) d.per_sequence = true;
    k.output.per_sequence = true;
    for (TensorDesc &d : k.more_outputs) d.per_sequence = true;
  }
  return k;
}

std::string KernelSpec::text() const {
  std::map<std::string, std::string> all = attrs;
  for (auto &[key, v] : schedule.keyEntries()) all[key] = v;
  std::string s = kind;
  for (auto &[key, v] : all) s += ";" + key + "=" + v;
  s += "|";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? "," : "") + inputs[i].text();
  s += "->" + output.text();
  for (const TensorDesc &d : more_outputs) s += "," + d.text();
  return s;
}

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

std::string KernelSpec::name(const std::string &target) const {
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", (unsigned long long)fnv1a(text() + "@" + target));
  return "kiln_" + kind + "_" + buf;
}

}  // namespace kiln
