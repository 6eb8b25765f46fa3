// llama_session.h - what the tests of examples/llama compiled as a library share: a session on
// the Llama checkpoint transformers wrote (tests/fixtures/hf_llama), and the error measure.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kilnrt/api.h"

namespace kiln_test {

inline const std::string kLlamaWeights = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/hf_llama/model.safetensors";

// A session of `model` with the fixture's weights loaded.
struct LlamaSession {
  kilnrt_session *s = nullptr;
  explicit LlamaSession(const kiln_model_info &model) {
    EXPECT_EQ(kilnrt_session_create(&model, &s), KILNRT_OK) << kilnrt_last_error();
    EXPECT_EQ(kilnrt_session_load_weights(s, kLlamaWeights.c_str()), KILNRT_OK) << kilnrt_last_error();
  }
  ~LlamaSession() { kilnrt_session_destroy(s); }
  LlamaSession(const LlamaSession &) = delete;
  LlamaSession &operator=(const LlamaSession &) = delete;
  kilnrt_status set(const char *name, const std::vector<int32_t> &v) {
    kilnrt_tensor t{KILN_I32, 1, {(int64_t)v.size()}, const_cast<int32_t *>(v.data())};
    return kilnrt_session_set_input(s, name, &t);
  }
  // `entry` run, then `output` copied out (empty on failure, which the test reports).
  std::vector<float> run(const char *entry, const char *output) {
    EXPECT_EQ(kilnrt_session_run(s, entry), KILNRT_OK) << kilnrt_last_error();
    const kilnrt_tensor *out = nullptr;
    EXPECT_EQ(kilnrt_session_output(s, output, &out), KILNRT_OK) << kilnrt_last_error();
    if (!out) return {};
    const float *p = (const float *)out->data;
    return std::vector<float>(p, p + kilnrt_tensor_numel(out));
  }
};

// The largest |a - b| over the largest |b|.
inline double relErr(const float *a, const float *b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; ++i) {
    d = std::max(d, (double)std::abs(a[i] - b[i]));
    m = std::max(m, (double)std::abs(b[i]));
  }
  return d / m;
}

}  // namespace kiln_test
