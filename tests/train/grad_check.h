// grad_check.h - how the training tests compare kiln's gradients with a PyTorch fixture's, and read a training log.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "harness.h"

namespace kt {
// [rows, cols] int32 ids as a .npy file (a batch of sequences).
inline void saveIdRows(const std::string &path, const std::vector<int32_t> &ids, int64_t rows) {
  std::string h = "{'descr': '<i4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                  std::to_string((int64_t)ids.size() / rows) + "), }";
  while ((10 + h.size() + 1) % 64) h.push_back(' ');
  h.push_back('\n');
  FILE *f = fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  uint16_t hl = (uint16_t)h.size();
  fwrite(&hl, 2, 1, f);
  fwrite(h.data(), 1, h.size(), f);
  fwrite(ids.data(), 4, ids.size(), f);
  fclose(f);
}

// Compiles examples/<model> with `flags` into dir/<model>; the path, or "" after a gtest failure.
inline std::string compileExample(const std::string &model, const std::string &flags, const std::string &dir) {
  auto c = run(std::string(KILN_BIN) + "/" + model + "-compile " + flags + " --quiet --cache-dir " KILN_TEST_CACHE +
               " -o " + dir + "/" + model);
  EXPECT_EQ(c.code, 0) << c.output;
  return c.code == 0 ? dir + "/" + model : "";
}

// A CSV file's rows of cells (a trailing comma: an empty last cell).
inline std::vector<std::vector<std::string>> readCsv(const std::string &path) {
  std::ifstream f(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(f, line);) {
    std::vector<std::string> row;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) row.push_back(cell);
    if (!line.empty() && line.back() == ',') row.push_back("");
    rows.push_back(row);
  }
  return rows;
}

// The loss column of a --log CSV (step,loss,...) that `./model --train` writes, one per step.
inline std::vector<double> trainLosses(const std::string &csv) {
  std::ifstream f(csv);
  std::string line;
  std::vector<double> l;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    size_t a = line.find(','), b = line.find(',', a + 1);
    if (a != std::string::npos) l.push_back(std::stod(line.substr(a + 1, b - a - 1)));
  }
  return l;
}

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

// The weights a `--train` run saved (`got`) against a PyTorch fixture's final.safetensors after
// the same steps, from its init.safetensors: each within 1e-4 of max |torch|, and each moved
// (else the comparison would prove nothing). GPT-2's c_attn key bias adds q·b_k to every
// score of a row, which softmax cancels: its exact gradient is zero and what either side
// computes is rounding noise that Adam scales to steps of up to lr, so its query and value
// thirds are compared.
inline void expectTrainedWeights(const std::string &fixtureDir, const std::string &got, const std::string &what) {
  std::map<std::string, ref::T> want = loadWeights(fixtureDir + "/final.safetensors"),
                                init = loadWeights(fixtureDir + "/init.safetensors"), have = loadWeights(got);
  for (auto &[name, wAll] : want) {
    std::string k = have.count(name) ? name : "transformer." + name;
    ASSERT_TRUE(have.count(k)) << name;
    ASSERT_EQ(have[k].shape, wAll.shape) << name;
    ref::T w = wAll;
    if (name.ends_with("attn.c_attn.bias")) {
      const size_t d = w.v.size() / 3;
      for (ref::T *t : {&w, &have[k], &init.at(name)}) t->v.erase(t->v.begin() + d, t->v.begin() + 2 * d);
    }
    double rel = maxRelDiff(w, have[k]);
    EXPECT_LE(rel, 1e-4) << name << " after " << what << ": max |kiln - torch| / max |torch| = " << rel;
    EXPECT_GT(maxRelDiff(w, init.at(name)), 1e-4) << name << " did not move: the comparison would prove nothing";
  }
}

// Every reference gradient (parameter name -> tensor: a PyTorch fixture's, finite differences)
// against the grad.<name>.npy an entry wrote into `outDir`: the same shape, a reference that is
// not all zeros, and max |kiln - ref| <= tolerance · max |ref|. Names `skip` accepts are the
// caller's to check. The default, 1e-5, sits near the errors measured (2026-12-07, AVX-512, 2
// threads: each fixture's worst gradient 9e-8 to 1.4e-6, the reversible stack of 16 positions
// 3.7e-6; printed as "[ measured ]" by every call): a gradient wrong in a few rows moves the
// worst by ~3e-5 and fails. It was 1e-4.
inline void expectFixtureGradients(const std::map<std::string, ref::T> &want, const std::string &outDir,
                                   const std::function<bool(const std::string &)> &skip = {}, double tolerance = 1e-5) {
  double worst = 0;
  std::string worstName;
  for (auto &[name, g] : want) {
    if (skip && skip(name)) continue;
    ref::T got = loadNpy(outDir + "/grad." + name + ".npy");
    ASSERT_EQ(got.shape, g.shape) << name;
    double maxRef = 0, rel = maxRelDiff(g, got, &maxRef);
    EXPECT_GT(maxRef, 0.0) << name;
    EXPECT_LE(rel, tolerance) << "grad." << name << ": max |kiln - ref| / max |ref| = " << rel << " (max |ref| " << maxRef << ")";
    if (rel >= worst) worst = rel, worstName = name;
  }
  fprintf(stderr, "[ measured ] %s: the worst gradient is grad.%s, max |kiln - ref| / max |ref| = %.3g (tolerance %.3g)\n",
          outDir.c_str(), worstName.c_str(), worst, tolerance);
}

// Runs `exe --entry <entry>` on the PyTorch fixture tests/fixtures/<fixture>: its
// weights.safetensors and, for each name in `inputs`, <name>.npy; the outputs go to `outDir`. The
// loss must match loss.npy within 1e-5; returns the fixture's gradients (grads.safetensors), or
// nothing after a failure.
inline std::map<std::string, ref::T> runFixtureGradients(const std::string &exe, const std::string &fixture,
                                                         const std::vector<std::string> &inputs, const std::string &outDir,
                                                         const std::string &entry = "gradients") {
  std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/" + fixture, args;
  for (const std::string &in : inputs) args += " --input " + in + "=" + fx + "/" + in + ".npy";
  auto r = run(exe + " --entry " + entry + " --weights " + fx + "/weights.safetensors" + args + " --output-dir " + outDir);
  EXPECT_EQ(r.code, 0) << r.output;
  if (r.code != 0) return {};
  float loss = loadNpy(outDir + "/loss.npy").v.at(0), want = loadNpy(fx + "/loss.npy").v.at(0);
  EXPECT_NEAR(loss, want, 1e-5 * std::abs(want)) << fixture << ": the loss";
  return loadWeights(fx + "/grads.safetensors");
}
}  // namespace kt
