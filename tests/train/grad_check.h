// grad_check.h - how the training tests compare kiln's gradients with a PyTorch fixture's.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "harness.h"

namespace kt {
// max |got - want| / max |want| (the difference itself when want is all zeros); max |want| in
// *maxWant.
inline double maxRelDiff(const ref::T &want, const ref::T &got, double *maxWant = nullptr) {
  double maxRef = 0, maxDiff = 0;
  for (size_t i = 0; i < want.v.size(); ++i) {
    maxRef = std::max(maxRef, (double)std::abs(want.v[i]));
    maxDiff = std::max(maxDiff, (double)std::abs(want.v[i] - got.v[i]));
  }
  if (maxWant) *maxWant = maxRef;
  return maxRef > 0 ? maxDiff / maxRef : maxDiff;
}

// Every gradient of a fixture (parameter name -> tensor) against the grad.<name>.npy an entry
// wrote into `outDir`: the same shape, a reference that is not all zeros, and max |kiln - torch|
// <= 1e-4 max |torch|. Names `skip` accepts are the caller's to check.
inline void expectFixtureGradients(const std::map<std::string, ref::T> &want, const std::string &outDir,
                                   const std::function<bool(const std::string &)> &skip = {}) {
  for (auto &[name, g] : want) {
    if (skip && skip(name)) continue;
    ref::T got = loadNpy(outDir + "/grad." + name + ".npy");
    ASSERT_EQ(got.shape, g.shape) << name;
    double maxRef = 0, rel = maxRelDiff(g, got, &maxRef);
    EXPECT_GT(maxRef, 0.0) << name;
    EXPECT_LE(rel, 1e-4) << "grad." << name << ": max |kiln - torch| / max |torch| = " << rel << " (max |torch| " << maxRef << ")";
  }
}
}  // namespace kt
