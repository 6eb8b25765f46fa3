// kiln-gpu-bench: kiln's kernels on an NVIDIA GPU (models compiled with --target=cuda), for a
// machine that has only the driver and libc: no baselines, no BLAS. Built on demand
// (`cmake --build build --target kiln-gpu-bench`, which tests/gpu/run.sh prepare does) with the
// C++ runtime linked statically. kiln-gpu-bench-opencl is the same program over the same cases
// compiled with --target=opencl; ctest runs it with --quick (small sizes) on PoCL's CPU device,
// which checks the program, not the GPU's speed.
//
// Prints kiln-bench's CSV columns with the baseline columns empty; `gflops` is the achieved
// GFLOP/s (TFLOP/s x 1000) and `peak_fraction` its fraction of the H200's dense FP32 peak
// (67 TFLOP/s; --peak-tflops changes it). Cases: the three GPT-2 linears at M = 512, attention
// dense and causal (12 heads, head dim 64) at L = 1024..16384, GPT-2 small forward (L = 512) and
// decode (ms per token at position 1023). Times are medians, in ms, of whole runs, the
// models compiled with --gpu-buffers=device: weights stay on the device, each run uploads its
// inputs and downloads its outputs. --quick: M = 64, L = 128 and 256, GPT-2 at L = 32.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "libgpu_attention_causal.h"
#include "libgpu_attention_dense.h"
#include "libgpu_gpt2_small.h"
#include "libgpu_linear_3072x768.h"
#include "libgpu_linear_768x3072.h"
#include "libgpu_linear_768x768.h"

namespace {
double g_peak = 67e12;
bool g_quick = false;

void die() {
  fprintf(stderr, "kiln-gpu-bench: %s\n", kilnrt_last_error());
  const char *e = kilnrt_last_error();
  exit(e && (strstr(e, "no CUDA driver") || strstr(e, "no OpenCL platform")) ? 1 : 2);
}

struct Run {
  kilnrt_session *s = nullptr;
  explicit Run(const kiln_model_info *m) {
    if (kilnrt_session_create(m, &s) || kilnrt_session_random_weights(s, 1)) die();
  }
  ~Run() { kilnrt_session_destroy(s); }
  void input(const char *name, std::vector<int64_t> shape, const void *data, kiln_dtype dt = KILN_F32) {
    kilnrt_tensor t{dt, (int32_t)shape.size(), {}, const_cast<void *>(data)};
    for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
    if (kilnrt_session_set_input(s, name, &t)) die();
  }
  double ms(const char *entry = "forward", int reps = 5) {
    if (kilnrt_session_run(s, entry)) die();  // warm-up: first-call module load and JIT
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      int64_t t0 = kilnrt_time_now_ns();
      if (kilnrt_session_run(s, entry)) die();
      t.push_back((kilnrt_time_now_ns() - t0) / 1e6);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

std::vector<float> randomVec(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float &f : v) f = u(g);
  return v;
}

void emit(const char *kase, long L, const std::string &density, double ms, double bytes, double flops) {
  double gflops = flops / (ms * 1e6);
  printf("%s,%ld,%s,%s,%.4f,,,,%.0f,,%.2f,%.4f\n", kase, L, density.c_str(), density.c_str(), ms, bytes, gflops,
         gflops * 1e9 / g_peak);
  fflush(stdout);
}

void linear(const kiln_model_info *m, const char *name, long M, long N, long K) {
  Run r(m);
  std::vector<float> x = randomVec(M * K, 1);
  r.input("x", {M, K}, x.data());
  emit(name, M, "", r.ms(), (double)kilnrt_session_arena_bytes(r.s), 2.0 * M * N * K);
}

void attention(const kiln_model_info *m, bool causal, long L) {
  const long H = 12, D = 64;
  Run r(m);
  std::vector<float> q = randomVec(H * L * D, 1), k = randomVec(H * L * D, 2), v = randomVec(H * L * D, 3);
  r.input("q", {H, L, D}, q.data());
  r.input("k", {H, L, D}, k.data());
  r.input("v", {H, L, D}, v.data());
  double density = causal ? (L + 1.0) / (2.0 * L) : 1.0;
  char ds[32];
  snprintf(ds, sizeof ds, "%.4f", density);
  emit(causal ? "attention_causal" : "attention_dense", L, ds, r.ms("forward", 3),
       (double)kilnrt_session_arena_bytes(r.s), 4.0 * H * D * (double)L * L * density);
}

std::vector<int32_t> ids(long n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> v(n);
  for (int32_t &x : v) x = (int32_t)(g() % 50257);
  return v;
}
}  // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--peak-tflops") && i + 1 < argc) g_peak = atof(argv[++i]) * 1e12;
    else if (!strcmp(argv[i], "--quick")) g_quick = true;
    else {
      fprintf(stderr, "usage: %s [--quick] [--peak-tflops T]\n", argv[0]);
      return 1;
    }
  const long M = g_quick ? 64 : 512, ctx = g_quick ? 32 : 512, past = g_quick ? 31 : 1023;
  const std::vector<long> lengths = g_quick ? std::vector<long>{128, 256} : std::vector<long>{1024, 2048, 4096, 8192, 16384};
  printf("case,L,density,computed_density,kiln_ms,baseline,baseline_ms,ratio,kiln_peak_bytes,baseline_peak_bytes,gflops,"
         "peak_fraction\n");
  auto lin = [&](const char *shape) { return "linear_" + std::to_string(M) + "x" + shape; };
  linear(&gpu_linear_768x768, lin("768x768").c_str(), M, 768, 768);
  linear(&gpu_linear_768x3072, lin("768x3072").c_str(), M, 3072, 768);
  linear(&gpu_linear_3072x768, lin("3072x768").c_str(), M, 768, 3072);
  for (long L : lengths) attention(&gpu_attention_dense, false, L);
  for (long L : lengths) attention(&gpu_attention_causal, true, L);
  const double d = 768, layers = 12, vocab = 50257;
  {
    Run r(&gpu_gpt2_small);
    std::vector<int32_t> t = ids(ctx, 7);
    r.input("tokens", {ctx}, t.data(), KILN_I32);
    const double L = (double)ctx;
    emit("gpt2_small_forward", ctx, "", r.ms("forward", 3), (double)kilnrt_session_arena_bytes(r.s),
         L * (2 * 12 * d * d * layers + 2 * d * vocab) + 2.0 * L * L * d * layers);
    std::vector<int32_t> prompt = ids(past, 8);
    r.input("tokens", {past}, prompt.data(), KILN_I32);
    if (kilnrt_session_run(r.s, "forward")) die();
    int32_t pos = (int32_t)past, tok = 1234;
    r.input("past", {1}, &pos, KILN_I32);
    r.input("token", {1}, &tok, KILN_I32);
    emit("gpt2_small_decode", past + 1, "", r.ms("decode", 5), (double)kilnrt_session_arena_bytes(r.s),
         2 * 12 * d * d * layers + 2 * d * vocab + 4.0 * (past + 1) * d * layers);
  }
  return 0;
}
