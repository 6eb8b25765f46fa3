// KernelRegistry.h - the Halide pipeline of a kernel spec, built by its family.
#pragma once
#include "Builder.h"

namespace kiln::codegen {
// The kernel's output Func (its schedule applied and logged to B.log). Throws on a spec no
// family generates (a compiler bug).
Func generate(Builder &B);
}  // namespace kiln::codegen
