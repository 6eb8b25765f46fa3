// HalideKernels.h - kiln's kernels: one Halide algorithm per op kind plus a CPU schedule derived
// from the pass decisions in the kernel spec, AOT-compiled to object code and cached on disk.
//
// Every Halide::Error is caught here and returned as a message: callers never see an exception.
#pragma once
#include <string>

#include "kiln/Codegen/KernelSpec.h"

namespace kiln {

struct KernelArtifacts {
  std::string object;    // <cache>/<name>.o
  std::string stmt;      // <cache>/<name>.stmt (Halide's lowered statement)
  std::string schedule;  // the Halide schedule applied, as text
  std::string ptx;       // <cache>/<name>.ptx: the GPU code embedded in the object (CUDA targets; empty if none)
  bool cached = false;   // reused from the cache
};

// Generates (or reuses) kernel `name` for `spec` and the Halide target string. Returns false
// and sets `error` on failure.
bool buildKernel(const std::string &name, const KernelSpec &spec, const std::string &halideTarget,
                 const std::string &cacheDir, KernelArtifacts *out, std::string *error);

// The Halide runtime for the target, as one object shared by all kernels.
bool buildHalideRuntime(const std::string &halideTarget, const std::string &cacheDir, std::string *objectPath,
                        std::string *error);

}  // namespace kiln
