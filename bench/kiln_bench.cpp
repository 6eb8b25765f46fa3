// kiln-bench: kiln's compiled kernels against baselines, timed in one process.
//
//   build/bin/kiln-bench          text table
//   build/bin/kiln-bench --csv    case,L,density,computed_density,kiln_ms,baseline,baseline_ms,ratio,
//                                 kiln_peak_bytes,baseline_peak_bytes,gflops,peak_fraction,
//                                 bandwidth_fraction
//   build/bin/kiln-bench --quick  every case once at small sizes (the ctest smoke test)
//
// Whole models (the examples at their default sizes: GPT-2 small, BERT-base) run against
// `reference`, the plain-loop models of tests/reference with the same weights; their peak bytes
// are what the reference allocates while it runs (counted through operator new).
// Baselines: `naive` (plain loops; attention materializes the full score matrix), `unchunked`
// (kiln's FFN without kiln-chunk-ffn), `openblas` and `onednn` (Debian's libraries). OpenBLAS
// and libgomp read their environment before main, so a timing run re-executes itself with
// OPENBLAS_CORETYPE unset and OMP_WAIT_POLICY=passive. Times are medians; ratio = baseline /
// kiln. gflops and peak_fraction are kiln's, on the work the case allows, against the FMA peak
// this tool measures on both cores (the best of several trials); bandwidth_fraction (decode)
// is the bytes a token must read at the read bandwidth measured in the same run (all threads
// summing a 1 GiB array, the best of several passes), over kiln's time. A row above the FMA
// peak is an error (exit status 3: the peak was mismeasured); above the bandwidth, a warning
// (a few bytes may stay in the last level cache between tokens). Peak bytes are counted: kiln's arena plus its Halide
// scratch (kilnrt's scratch pool's peak in use), the naive baselines' own buffers.
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <malloc.h>

#include "kilnrt/api.h"
#include "libbench_attention_causal.h"
#include "libbench_attention_dense.h"
#include "libbench_attention_fixed128.h"
#include "libbench_attention_fixed64.h"
#include "libbench_attention_dense4.h"
#include "libbench_attention_lsh.h"
#include "libbench_attention_strided128.h"
#include "libbench_attention_strided64.h"
#include "libbench_bert_base.h"
#include "libbench_gpt2_small.h"
#include "libbench_universal.h"
#include "libbench_ut_layer.h"
#include "libbench_ffn_chunked.h"
#include "libbench_ffn_unchunked.h"
#include "libbench_linear_3072x768.h"
#include "libbench_linear_768x3072.h"
#include "libbench_linear_768x768.h"
#include "kiln/Support/SparsePattern.h"
#include "models.h"
#ifdef KILN_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef KILN_HAVE_ONEDNN
#include <dnnl.hpp>
#endif

// ---------------------------------------------------------------- counted operator new
// While g_count_new is set, the bytes live through operator new and their peak: the plain
// references' own allocations (weights are loaded before counting starts).
static std::atomic<bool> g_count_new{false};
static std::atomic<long> g_new_cur{0}, g_new_peak{0};
void *operator new(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  if (g_count_new) {
    long c = g_new_cur += (long)malloc_usable_size(p);
    long pk = g_new_peak;
    while (c > pk && !g_new_peak.compare_exchange_weak(pk, c)) {
    }
  }
  return p;
}
void operator delete(void *p) noexcept {
  if (p && g_count_new) g_new_cur -= (long)malloc_usable_size(p);
  free(p);
}
void operator delete(void *p, size_t) noexcept { operator delete(p); }

namespace {

double nowMs() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median of timed runs after a warm-up: at least 3, and until ~0.3 s has been spent (at most
// 50). `once`: a single cold run (the quick mode, and the dense kernel at L >= 16384, seconds a
// run). Baselines are timed the same way as kiln; `warm`: the caller has run f already.
double timeMs(const std::function<void()> &f, bool once, bool warm = false) {
  if (once) {
    double t0 = nowMs();
    f();
    return nowMs() - t0;
  }
  if (!warm) f();  // warm up
  std::vector<double> t;
  double start = nowMs();
  do {
    double t0 = nowMs();
    f();
    t.push_back(nowMs() - t0);
  } while (t.size() < 3 || (nowMs() - start < 300 && t.size() < 50));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// ---------------------------------------------------------------- machine peak
// The sum of a vector's lanes (_mm512_reduce_add_ps trips a false GCC 12 -Wuninitialized in its
// header).
__attribute__((target("avx512f"))) double laneSum(__m512 v) {
  float lanes[16];
  _mm512_storeu_ps(lanes, v);
  double total = 0;
  for (float x : lanes) total += x;
  return total;
}
// Runs f(thread index) on every core at once and waits for all of them.
void onAllCores(unsigned n, const std::function<void(unsigned)> &f) {
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < n; ++i) ts.emplace_back(f, i);
  for (auto &t : ts) t.join();
}

__attribute__((target("avx512f,fma"))) double fmaLoop(long n) {
  __m512 a[16], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(0.01f * i);
  for (long k = 0; k < n; ++k) {
#define F(i) a[i] = _mm512_fmadd_ps(a[i], x, y);
    F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15)
#undef F
  }
  for (int i = 1; i < 16; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  return laneSum(a[0]);
}
// FMA peak of all cores together (GFLOP/s), measured with one 16-chain loop per core: the best
// of several trials of about 0.1 s each (one trial can land on a busy or down-clocked moment;
// the best is the machine's).
double measurePeak(bool quick) {
  if (!__builtin_cpu_supports("avx512f")) return 0;
  unsigned n = std::max(1u, std::thread::hardware_concurrency());
  long iters = quick ? 1000000 : 20000000;
  double best = 0;
  for (int trial = 0; trial < (quick ? 1 : 7); ++trial) {
    std::atomic<double> sink{0};
    double t0 = nowMs();
    onAllCores(n, [&](unsigned) { sink = sink + fmaLoop(iters); });
    double s = (nowMs() - t0) / 1e3;
    best = std::max(best, n * iters * 16.0 * 32 / s / 1e9);
  }
  return best;
}

__attribute__((target("avx512f"))) double sumLoop(const float *p, long n) {
  __m512 a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm512_setzero_ps();
  for (long k = 0; k + 128 <= n; k += 128)
    for (int i = 0; i < 8; ++i) a[i] = _mm512_add_ps(a[i], _mm512_loadu_ps(p + k + 16 * i));
  for (int i = 1; i < 8; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  return laneSum(a[0]);
}
// Read bandwidth of all cores together (GB/s): each thread sums its share of a 1 GiB array,
// the best of several passes.
double measureReadBandwidth(bool quick) {
  if (!__builtin_cpu_supports("avx512f")) return 0;
  unsigned n = std::max(1u, std::thread::hardware_concurrency());
  long floats = (quick ? 16L : 256L) << 20, share = floats / n / 128 * 128;
  // Cache-line aligned (a 64-byte load across two lines costs two), each share first touched
  // by the thread that reads it.
  float *a = static_cast<float *>(std::aligned_alloc(64, floats * sizeof(float)));
  if (!a) return 0;
  onAllCores(n, [&](unsigned i) { std::fill(a + i * share, a + (i + 1) * share, 1.0f); });
  double best = 0;
  std::atomic<double> sink{0};
  for (int trial = 0; trial < (quick ? 1 : 7); ++trial) {
    double t0 = nowMs();
    onAllCores(n, [&](unsigned i) { sink = sink + sumLoop(a + i * share, share); });
    best = std::max(best, 4.0 * share * n / ((nowMs() - t0) / 1e3) / 1e9);
  }
  std::free(a);
  return best;
}

// ---------------------------------------------------------------- kiln runs
bool g_csv = false, g_over_peak = false, g_disagrees = false;

// Resident memory of this process now (VmRSS), in bytes.
double residentBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) * 1024.0;
  return 0;
}

struct KilnRun {
  kilnrt_session *s = nullptr;
  double load_ms = -1, resident_after_load = 0;  // fromFile: the load's time and VmRSS after it
  // fromFile (whole models, as users run them): the random weights are written to a
  // safetensors file and a fresh session loads them from it (mapping, checks, the layouts of
  // kiln-prepack-weights), timed; the file is removed after loading.
  explicit KilnRun(const kiln_model_info *m, bool fromFile = false) {
    if (kilnrt_session_create(m, &s) || kilnrt_session_random_weights(s, 1)) die();
    if (!fromFile) return;
    std::string p = "/tmp/kiln_bench_load_" + std::to_string(getpid()) + ".safetensors";
    if (kilnrt_session_save_weights(s, p.c_str())) die();
    kilnrt_session_destroy(s);
    s = nullptr;
    malloc_trim(0);
    double t0 = nowMs();
    if (kilnrt_session_create(m, &s) || kilnrt_session_load_weights(s, p.c_str())) die();
    load_ms = nowMs() - t0;
    resident_after_load = residentBytes();
    unlink(p.c_str());
  }
  // One line under a whole model's rows: how its weights were loaded and what that held.
  void printLoad(const char *kase, long L) const {
    if (load_ms < 0) return;
    FILE *f = g_csv ? stderr : stdout;  // the CSV stays columns only
    fprintf(f, "%-22s %6ld   weights from a safetensors file: loaded in %.1f ms; resident after loading %.1f MiB\n", kase, L,
            load_ms, resident_after_load / 1048576.0);
  }
  ~KilnRun() { kilnrt_session_destroy(s); }
  static void die() {
    fprintf(stderr, "kiln-bench: %s\n", kilnrt_last_error());
    exit(2);
  }
  void input(const char *name, std::vector<int64_t> shape, const std::vector<float> &data) {
    kilnrt_tensor t{KILN_F32, (int32_t)shape.size(), {}, const_cast<float *>(data.data())};
    for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
    if (kilnrt_session_set_input(s, name, &t)) die();
  }
  void ids(const char *name, const std::vector<int32_t> &v) {
    kilnrt_tensor t{KILN_I32, 1, {(int64_t)v.size()}, const_cast<int32_t *>(v.data())};
    if (kilnrt_session_set_input(s, name, &t)) die();
  }
  void run(const char *entry = "forward") {
    if (kilnrt_session_run(s, entry)) die();
  }
  const float *output(const char *name) {
    const kilnrt_tensor *t;
    if (kilnrt_session_output(s, name, &t)) die();
    return (const float *)t->data;
  }
  // Arena plus Halide scratch during one run.
  double peakBytes(const char *entry = "forward") {
    kilnrt_scratch_stats st;
    kilnrt_scratch_reset_peak();
    kilnrt_scratch_get_stats(&st);
    int64_t before = st.in_use_bytes;
    run(entry);
    kilnrt_scratch_get_stats(&st);
    return (double)kilnrt_session_arena_bytes(s) + (double)(st.peak_in_use_bytes - before);
  }
  // Every parameter, for the plain reference (via save and load: the runtime's own copy).
  ref::Weights weights() {
    std::string p = "/tmp/kiln_bench_w_" + std::to_string(getpid()) + ".safetensors";
    kilnrt_weights *w;
    if (kilnrt_session_save_weights(s, p.c_str()) || kilnrt_weights_open(p.c_str(), &w)) die();
    ref::Weights out;
    for (int32_t i = 0; i < kilnrt_weights_count(w); ++i) {
      const char *name;
      kilnrt_tensor t;
      if (kilnrt_weights_get(w, i, &name, &t)) die();
      ref::T r(std::vector<int64_t>(t.shape, t.shape + t.rank));
      std::copy((float *)t.data, (float *)t.data + r.numel(), r.v.begin());
      out[name] = std::move(r);
    }
    kilnrt_weights_close(w);
    unlink(p.c_str());
    return out;
  }
  std::vector<float> weight(const char *name) {  // via save/load: the runtime's own copy
    std::string p = "/tmp/kiln_bench_w_" + std::to_string(getpid()) + ".safetensors";
    kilnrt_weights *w;
    kilnrt_tensor t;
    if (kilnrt_session_save_weights(s, p.c_str()) || kilnrt_weights_open(p.c_str(), &w) || kilnrt_weights_find(w, name, &t)) die();
    std::vector<float> v((float *)t.data, (float *)t.data + kilnrt_tensor_numel(&t));
    kilnrt_weights_close(w);
    unlink(p.c_str());
    return v;
  }
};

std::vector<float> randomVec(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float &f : v) f = u(g);
  return v;
}

double maxDiff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, (double)std::fabs(a[i] - b[i]));
  return m;
}

// ---------------------------------------------------------------- output
struct Row {
  std::string kase;
  long L;
  std::string density, computed;
  double kiln_ms;
  std::string baseline;
  double base_ms, kiln_peak, base_peak;  // base_peak < 0: not counted
  double flops;                          // allowed work
  double diff;                           // max |kiln - baseline|, < 0 when not compared
  double bytes_read = 0;                 // bandwidth-bound cases: bytes a run must read
};
double g_peak_gflops = 0, g_read_gbs = 0;

void emit(const Row &r) {
  double gflops = r.flops / (r.kiln_ms * 1e6);
  std::string frac = g_peak_gflops > 0 ? std::to_string(gflops / g_peak_gflops) : "";
  // The share of the read-bandwidth limit: the bytes a run must read at the measured bandwidth,
  // over its time.
  double bwFrac = r.bytes_read > 0 && g_read_gbs > 0 ? r.bytes_read / (g_read_gbs * 1e6) / r.kiln_ms : 0;
  std::string bw = bwFrac > 0 ? std::to_string(bwFrac) : "";
  if (g_csv) {
    printf("%s,%ld,%s,%s,%.4f,%s,%s,%s,%.0f,%s,%.2f,%s,%s\n", r.kase.c_str(), r.L, r.density.c_str(), r.computed.c_str(),
           r.kiln_ms, r.baseline.c_str(), r.base_ms > 0 ? std::to_string(r.base_ms).c_str() : "",
           r.base_ms > 0 ? std::to_string(r.base_ms / r.kiln_ms).c_str() : "", r.kiln_peak,
           r.base_peak >= 0 ? std::to_string((long long)r.base_peak).c_str() : "", gflops, frac.c_str(), bw.c_str());
  } else {
    printf("%-22s %6ld %8s %9s %10.3f  %-10s %10.3f %7.2fx %12.0f %12s %8.1f %6.1f%% %6s %9.1e\n", r.kase.c_str(), r.L,
           r.density.c_str(), r.computed.c_str(), r.kiln_ms, r.baseline.c_str(), r.base_ms,
           r.base_ms > 0 ? r.base_ms / r.kiln_ms : 0.0, r.kiln_peak,
           r.base_peak >= 0 ? std::to_string((long long)r.base_peak).c_str() : "-", gflops,
           g_peak_gflops > 0 ? 100 * gflops / g_peak_gflops : 0.0,
           bwFrac > 0 ? (std::to_string((int)std::lround(100 * bwFrac)) + "%").c_str() : "-", r.diff);
  }
  fflush(stdout);
  // Above the FMA peak measured in this run: the measurement was wrong.
  if (g_peak_gflops > 0 && gflops > g_peak_gflops) {
    fprintf(stderr, "kiln-bench: error: %s at L = %ld runs at %.1f GFLOP/s, above the FMA peak measured in this run (%.1f)\n",
            r.kase.c_str(), r.L, gflops, g_peak_gflops);
    g_over_peak = true;
  }
  // A row whose outputs disagree with its baseline's times nothing worth quoting: an error, at
  // every size (the rows' differences are float rounding, 1e-7 to 1e-5, where they agree).
  if (!(r.diff <= 1e-3)) {
    fprintf(stderr, "kiln-bench: error: %s at L = %ld differs from its baseline (%s) by %.3g (more than 1e-3)\n", r.kase.c_str(),
            r.L, r.baseline.c_str(), r.diff);
    g_disagrees = true;
  }
  // Above the bandwidth: possible without a mismeasurement (the last level cache can keep a few
  // of a token's bytes from one token to the next), so a warning.
  if (bwFrac > 1)
    fprintf(stderr, "kiln-bench: warning: %s at L = %ld reads %.1f GB/s, above the read bandwidth measured in this run (%.1f)\n",
            r.kase.c_str(), r.L, r.bytes_read / (r.kiln_ms * 1e6), g_read_gbs);
}

// ---------------------------------------------------------------- cases
void linearCase(const kiln_model_info *model, long M, long N, long K, bool quick) {
  if (quick) M = 8;
  KilnRun k(model);
  std::vector<float> x = randomVec(M * K, 3);
  k.input("x", {M, K}, x);
  std::vector<float> w = k.weight("w");  // [N, K]
  double kt = timeMs([&] { k.run(); }, quick);
  double kpeak = k.peakBytes();
  const float *y = k.output("y");
  std::string name = "linear_" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  double flops = 2.0 * M * N * K;
  std::vector<float> out(M * N);
  auto naive = [&] {
    for (long i = 0; i < M; ++i)
      for (long j = 0; j < N; ++j) {
        float s = 0;
        for (long kk = 0; kk < K; ++kk) s += x[i * K + kk] * w[j * K + kk];
        out[i * N + j] = s;
      }
  };
  double nt = timeMs(naive, quick);
  emit({name, M, "", "", kt, "naive", nt, kpeak, 0, flops, maxDiff(y, out.data(), out.size())});
#ifdef KILN_HAVE_OPENBLAS
  double bt = timeMs([&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x.data(), K, w.data(), K, 0.0f, out.data(), N); }, quick);
  emit({name, M, "", "", kt, "openblas", bt, kpeak, -1, flops, maxDiff(y, out.data(), out.size())});
#endif
#ifdef KILN_HAVE_ONEDNN
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  memory::desc src({M, K}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc wei({K, N}, memory::data_type::f32, memory::format_tag::ba);  // W [N, K] read as [K, N]
  memory::desc dst({M, N}, memory::data_type::f32, memory::format_tag::ab);
  matmul::primitive_desc pd(matmul::desc(src, wei, dst), eng);
  matmul mm(pd);
  memory ms(src, eng, x.data()), mw(wei, eng, w.data()), md(dst, eng, out.data());
  double dt = timeMs([&] {
    mm.execute(st, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    st.wait();
  }, quick);
  emit({name, M, "", "", kt, "onednn", dt, kpeak, -1, flops, maxDiff(y, out.data(), out.size())});
#endif
}

// Naive attention: per head, the full [L, L] score matrix, then softmax and P.V.
void naiveAttention(const std::vector<float> &q, const std::vector<float> &k, const std::vector<float> &v, float *o,
                    long H, long L, long D, bool causal, double *peak) {
  std::vector<float> S(L * L);
  *peak = (double)S.size() * 4;
  float scale = 1.0f / std::sqrt((float)D);
  for (long h = 0; h < H; ++h) {
    const float *qh = &q[h * L * D], *kh = &k[h * L * D], *vh = &v[h * L * D];
    for (long i = 0; i < L; ++i) {
      float m = -INFINITY;
      for (long j = 0; j < L; ++j) {
        float s = 0;
        for (long c = 0; c < D; ++c) s += qh[i * D + c] * kh[j * D + c];
        S[i * L + j] = (causal && j > i) ? -INFINITY : s * scale;
        m = std::max(m, S[i * L + j]);
      }
      float sum = 0;
      for (long j = 0; j < L; ++j) sum += (S[i * L + j] = std::exp(S[i * L + j] - m));
      for (long c = 0; c < D; ++c) {
        float a = 0;
        for (long j = 0; j < L; ++j) a += S[i * L + j] * vh[j * D + c];
        o[(h * L + i) * D + c] = a / sum;
      }
    }
  }
}

void attentionCase(const kiln_model_info *model, bool causal, long L, bool quick) {
  const long H = 12, D = 64;
  KilnRun k(model);
  std::vector<float> q = randomVec(H * L * D, 1), kk = randomVec(H * L * D, 2), v = randomVec(H * L * D, 3);
  k.input("q", {H, L, D}, q);
  k.input("k", {H, L, D}, kk);
  k.input("v", {H, L, D}, v);
  double kt = timeMs([&] { k.run(); }, quick);
  double kpeak = k.peakBytes();
  const float *o = k.output("o");
  double density = causal ? (L + 1.0) / (2.0 * L) : 1.0, computed = density;
  if (causal) {  // kiln's kernel scores the key blocks up to the diagonal block of each 64-row query block
    double c = 0;
    for (long qo = 0; qo * 64 < L; ++qo) c += 64.0 * 64.0 * (double)(qo + 1);
    computed = c / ((double)L * L);
  }
  double flops = 4.0 * H * D * (double)L * L * density;
  std::vector<float> out(H * L * D);
  double bpeak = 0;
  // The plain loops materialize L x L scores: warm medians up to L = 2048; run once, as the
  // oracle only, up to 8192 (a minute a run); beyond, not run.
  double nt = 0, diff = -1;
  if (quick || L <= 8192) {
    double t = timeMs([&] { naiveAttention(q, kk, v, out.data(), H, L, D, causal, &bpeak); }, quick || L > 2048);
    if (quick || L <= 2048) nt = t;
    diff = maxDiff(o, out.data(), out.size());
  }
  char ds[32], cs[32];
  snprintf(ds, sizeof ds, "%.4f", density);
  snprintf(cs, sizeof cs, "%.4f", computed);
  emit({causal ? "attention_causal" : "attention_dense", L, ds, cs, kt, "naive", nt, kpeak, bpeak + 4.0 * L, flops, diff});
}

// Sparse attention (both halves of the pattern, one merged head; the stride or block s is a
// multiple of the 64-row block near sqrt(L)): kiln's block-sparse kernel against `naive`, plain
// code that materializes each head's [L, L] score matrix with the masked entries at -inf
// (scores are dot products only where allowed, so it stays affordable at L = 16384), and
// against `dense_fused`, kiln's own fused causal kernel at the same length.
void sparseAttentionCase(const char *name, bool fixed, long L, bool quick) {
  const long H = 12, D = 64, s = quick ? 64 : std::max(64L, 64 * std::lround(std::sqrt((double)L) / 64)), t = 8;
  const kiln_model_info *model = fixed ? (s == 64 ? &bench_attention_fixed64 : &bench_attention_fixed128)
                                       : (s == 64 ? &bench_attention_strided64 : &bench_attention_strided128);
  if (s != 64 && s != 128) {  // the strides compiled into bench libraries
    fprintf(stderr, "kiln-bench: no sparse bench library with stride %ld (L = %ld)\n", s, L);
    exit(2);
  }
  auto allowed = [&](long i, long j) {
    return j <= i && (fixed ? (j / s == i / s || j % s >= s - t) : (i - j < s || (i - j) % s == 0));
  };
  KilnRun k(model), c(&bench_attention_causal);
  std::vector<float> q = randomVec(H * L * D, 1), kk = randomVec(H * L * D, 2), v = randomVec(H * L * D, 3);
  for (KilnRun *r : {&k, &c}) {
    r->input("q", {H, L, D}, q);
    r->input("k", {H, L, D}, kk);
    r->input("v", {H, L, D}, v);
  }
  double kt = timeMs([&] { k.run(); }, quick), kpeak = k.peakBytes();
  double ct = timeMs([&] { c.run(); }, quick), cpeak = c.peakBytes();
  const float *o = k.output("o");
  std::vector<float> out(H * L * D);
  double pairs = 0;
  const float scale = 1.0f / std::sqrt((float)D);
  double nt = timeMs([&] {
    std::vector<float> S(L * L);
    pairs = 0;
    for (long h = 0; h < H; ++h) {
      for (long i = 0; i < L; ++i)
        for (long j = 0; j < L; ++j) {
          float dot = -INFINITY;
          if (allowed(i, j)) {
            dot = 0;
            for (long e = 0; e < D; ++e) dot += q[(h * L + i) * D + e] * kk[(h * L + j) * D + e];
            dot *= scale;
            pairs += 1;
          }
          S[i * L + j] = dot;
        }
      for (long i = 0; i < L; ++i) {
        float *row = &S[i * L], m = *std::max_element(row, row + L);
        double sum = 0;
        for (long j = 0; j < L; ++j) sum += (row[j] = std::isinf(row[j]) ? 0.0f : std::exp(row[j] - m));
        std::vector<double> a(D, 0.0);
        for (long j = 0; j < L; ++j)
          if (row[j] != 0.0f)
            for (long e = 0; e < D; ++e) a[e] += row[j] * v[(h * L + j) * D + e];
        for (long e = 0; e < D; ++e) out[(h * L + i) * D + e] = (float)(a[e] / sum);
      }
    }
  }, quick || L > 4096);  // the plain loops: warm medians up to L = 4096, one run beyond
  if (L > 4096 && !quick) nt = 0;  // computed once as the oracle, not timed
  pairs /= H;
  kiln::sparse::Pattern p{.kind = fixed ? kiln::sparse::Kind::Fixed : kiln::sparse::Kind::Strided, .size = s, .summary = fixed ? t : 0, .block = 64};
  double visited = kiln::sparse::countWork(p, L).visited;
  char ds[32], cs[32];
  snprintf(ds, sizeof ds, "%.4f", pairs / ((double)L * L));
  snprintf(cs, sizeof cs, "%.4f", visited / ((double)L * L));
  double flops = 4.0 * H * D * pairs;
  emit({name, L, ds, cs, kt, "naive", nt, kpeak, 4.0 * L * L, flops, maxDiff(o, out.data(), out.size())});
  emit({name, L, ds, cs, kt, "dense_fused", ct, kpeak, cpeak, flops, maxDiff(o, out.data(), out.size())});
  if (!g_csv)
    printf("%-22s %6ld   s = %ld%s; dense_fused x computed/0.5 = %.3f ms (kiln / that = %.2f)\n", "", L, s,
           fixed ? ", t = 8" : "", ct * (visited / ((double)L * L)) / 0.5, kt / (ct * (visited / ((double)L * L)) / 0.5));
}

// LSH attention (examples/reformer's: 4 heads, head dim 64, 64 buckets, 2 rounds, chunks of
// 64) against kiln's dense fused attention (non-causal, the same heads) up to L = 16384, where
// the dense kernel's L^2 work already costs seconds; time and peak bytes.
void lshAttentionCase(long L, bool quick) {
  const long H = 4, D = 64, rounds = 2, chunk = 64, half = 32;  // as bench_attention_lsh was compiled
  KilnRun k(&bench_attention_lsh);
  std::vector<float> q = randomVec(H * L * D, 1), v = randomVec(H * L * D, 3);
  k.input("qk", {H, L, D}, q);
  k.input("v", {H, L, D}, v);
  double kt = timeMs([&] { k.run(); }, quick), kpeak = k.peakBytes();
  // Each query scores 2 chunks of keys per round (q.k and p.v), plus the hashing x.R.
  double flops = (double)H * rounds * L * 2 * chunk * (4.0 * D) + 2.0 * H * rounds * L * D * half;
  if (L > 16384) {
    emit({"attention_lsh", L, "", "", kt, "dense_fused", 0, kpeak, -1, flops, -1});
    return;
  }
  KilnRun dn(&bench_attention_dense4);
  dn.input("q", {H, L, D}, q);
  dn.input("k", {H, L, D}, q);
  dn.input("v", {H, L, D}, v);
  double dt = timeMs([&] { dn.run(); }, quick || L >= 16384), dpeak = dn.peakBytes();  // seconds each: one run
  emit({"attention_lsh", L, "", "", kt, "dense_fused", dt, kpeak, dpeak, flops, -1});
}

void ffnCase(long L, bool quick) {
  const long d = 768, dff = 3072;
  if (quick) L = 40;
  KilnRun a(&bench_ffn_chunked), b(&bench_ffn_unchunked);
  std::vector<float> x = randomVec(L * d, 5);
  a.input("x", {L, d}, x);
  b.input("x", {L, d}, x);
  double at = timeMs([&] { a.run(); }, quick), bt = timeMs([&] { b.run(); }, quick);
  double ap = a.peakBytes(), bp = b.peakBytes();
  emit({"ffn_chunked", L, "", "", at, "unchunked", bt, ap, bp, 4.0 * L * d * dff,
        maxDiff(a.output("y"), b.output("y"), L * d)});
}

// ---------------------------------------------------------------- whole models
// Runs `f` once with operator new counted (setting *peak to the bytes it allocated at most at
// once), then times it warm like kiln (the counted run is the warm-up); `once`: the counted
// run's time.
double timeCounted(const std::function<void()> &f, double *peak, bool once) {
  g_new_cur = 0;
  g_new_peak = 0;
  g_count_new = true;
  double t = timeMs(f, true);
  g_count_new = false;
  *peak = (double)g_new_peak;
  return once ? t : timeMs(f, false, true);
}

std::vector<int32_t> randomIds(long n, int vocab, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> v(n);
  for (int32_t &x : v) x = (int32_t)(g() % vocab);
  return v;
}

const long kGpt2Layers = 12, kGpt2D = 768, kGpt2Vocab = 50257;

// GPT-2 small forward over L tokens: kiln's examples/gpt2 at its defaults against the plain
// reference model.
void gpt2ForwardCase(long L, bool quick) {
  KilnRun k(&bench_gpt2_small, true);
  std::vector<int32_t> ids = randomIds(L, kGpt2Vocab, 7);
  k.ids("tokens", ids);
  double kt = timeMs([&] { k.run(); }, quick), kpeak = k.peakBytes();
  ref::Weights w = k.weights();
  ref::T want;
  double rpeak, rt = timeCounted([&] { want = ref::gpt2_hf(w, ids, kGpt2Layers, 12, "transformer."); }, &rpeak, quick);
  double d = kGpt2D, flops = L * (2 * 12 * d * d * kGpt2Layers + 2 * d * kGpt2Vocab) + 2.0 * L * L * d * kGpt2Layers;
  emit({"gpt2_small_forward", L, "", "", kt, "reference", rt, kpeak, rpeak, flops,
        maxDiff(k.output("logits"), want.v.data(), want.v.size())});
  k.printLoad("gpt2_small_forward", L);
}

// GPT-2 small decode: ms per token at position ctx - 1, the KV cache filled by a prefill of
// ctx - 1 tokens. The reference decodes the same token with a copy of kiln's cache.
void gpt2DecodeCase(long ctx, bool quick) {
  KilnRun k(&bench_gpt2_small, true);
  long past = ctx - 1;
  k.ids("tokens", randomIds(past, kGpt2Vocab, 8));
  k.run();
  int32_t pos = (int32_t)past;
  std::vector<int32_t> tok{1234};
  kilnrt_tensor p{KILN_I32, 1, {1}, &pos};
  if (kilnrt_session_set_input(k.s, "past", &p)) KilnRun::die();
  k.ids("token", tok);
  double kt = timeMs([&] { k.run("decode"); }, quick), kpeak = k.peakBytes("decode");
  ref::Weights w = k.weights();
  ref::KvCache cache;
  const long H = 12, hd = kGpt2D / H;
  for (long i = 0; i < kGpt2Layers; ++i)
    for (const char *kv : {"k", "v"}) {
      kilnrt_tensor st;  // [H, ctx, hd] -> rows [past, d]
      if (kilnrt_session_state(k.s, ("cache." + std::string(kv) + "." + std::to_string(i)).c_str(), &st)) KilnRun::die();
      ref::T r({past, kGpt2D});
      const float *src = (const float *)st.data;
      for (long h = 0; h < H; ++h)
        for (long j = 0; j < past; ++j)
          for (long c = 0; c < hd; ++c) r.at(j, h * hd + c) = src[(h * st.shape[1] + j) * hd + c];
      (kv[0] == 'k' ? cache.k : cache.v).push_back(std::move(r));
    }
  ref::T want;
  // The reference appends the token's keys and values to the cache it is given; each timed run
  // drops them again, so every run (the baseline is timed warm, several times) decodes at `past`.
  double rpeak, rt = timeCounted(
                    [&] {
                      want = ref::gpt2_hf_cached(w, tok, cache, kGpt2Layers, H, "transformer.");
                      for (auto *side : {&cache.k, &cache.v})
                        for (ref::T &t : *side) t.v.resize((size_t)past * kGpt2D), t.shape[0] = past;
                    },
                    &rpeak, quick);
  double d = kGpt2D, flops = 2 * 12 * d * d * kGpt2Layers + 2 * d * kGpt2Vocab + 4.0 * ctx * d * kGpt2Layers;
  // Bytes a token must read: every weight once (of the position table, its one row) and the
  // valid keys and values of every layer (past + 1 rows each).
  double bytes = 0;
  for (auto &[name, t] : w) bytes += name.find("wpe") != std::string::npos ? 4.0 * d : 4.0 * t.v.size();
  bytes += 2.0 * kGpt2Layers * (past + 1) * d * 4;
  Row row{"gpt2_small_decode", ctx, "", "", kt, "reference", rt, kpeak, rpeak, flops,
          maxDiff(k.output("next_logits"), want.v.data(), want.v.size())};
  row.bytes_read = bytes;
  emit(row);
  k.printLoad("gpt2_small_decode", ctx);
}

// BERT-base forward over L tokens (token types 0).
void bertForwardCase(long L, bool quick) {
  KilnRun k(&bench_bert_base, true);
  std::vector<int32_t> ids = randomIds(L, 30522, 9);
  k.ids("tokens", ids);
  double kt = timeMs([&] { k.run(); }, quick), kpeak = k.peakBytes();
  ref::Weights w = k.weights();
  ref::T want;
  double rpeak, rt = timeCounted([&] { want = ref::bert_hf(w, ids, std::vector<int32_t>(L, 0), 12, 12, "bert."); }, &rpeak, quick);
  double d = 768, flops = L * 2 * 12 * d * d * 12 + 4.0 * L * L * d * 12;
  emit({"bert_base_forward", L, "", "", kt, "reference", rt, kpeak, rpeak, flops,
        maxDiff(k.output("hidden"), want.v.data(), want.v.size())});
  k.printLoad("bert_base_forward", L);
}

// The Universal Transformer (examples/universal at its defaults: d 256, 4 heads, 8 steps) at
// L = 512: ms per recurrent step, every position made to run all 8 steps (the halting bias set
// to -30 in a copy of the weights), against the same block compiled once without the loop.
void utStepCase(long L, bool quick) {
  const long d = 256, T = 8;
  KilnRun k(&bench_universal);
  {  // the halting bias, patched in a saved copy of the weights
    std::string p = "/tmp/kiln_bench_ut_" + std::to_string(getpid()) + ".safetensors";
    if (kilnrt_session_save_weights(k.s, p.c_str())) KilnRun::die();
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t n = 0;
    f.read((char *)&n, 8);
    std::string hdr(n, ' ');
    f.read(hdr.data(), (std::streamsize)n);
    auto off = nlohmann::json::parse(hdr).at("ut.halt.bias").at("data_offsets").at(0).get<uint64_t>();
    float bias = -30.0f;
    f.seekp((std::streamoff)(8 + n + off));
    f.write((const char *)&bias, 4);
    f.close();
    if (kilnrt_session_load_weights(k.s, p.c_str())) KilnRun::die();
    unlink(p.c_str());
  }
  k.ids("tokens", randomIds(L, 256, 11));
  double kt = timeMs([&] { k.run(); }, quick), kpeak = k.peakBytes();
  const kilnrt_tensor *steps;
  if (kilnrt_session_output(k.s, "steps", &steps)) KilnRun::die();
  long ran = 0;
  for (long i = 0; i < L; ++i) ran = std::max<long>(ran, ((const int32_t *)steps->data)[i]);
  if (ran != T) {
    fprintf(stderr, "kiln-bench: ut_step expected every position to run %ld steps, the loop ran %ld\n", T, ran);
    exit(2);
  }
  KilnRun one(&bench_ut_layer);
  one.input("x", {L, d}, randomVec(L * d, 12));
  double bt = timeMs([&] { one.run(); }, quick), bpeak = one.peakBytes();
  double flops = 2.0 * L * d * d * 4 + 4.0 * L * L * d + 2.0 * 2 * L * d * 4 * d;
  emit({"ut_step", L, "", "", kt / T, "one_layer", bt, kpeak, bpeak, flops, -1});
}

}  // namespace

int main(int argc, char **argv) {
  bool quick = false, peakOnly = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--csv")) g_csv = true;
    else if (!strcmp(argv[i], "--quick")) quick = true;
    else if (!strcmp(argv[i], "--peak")) peakOnly = true;  // the FMA peak and read bandwidth alone (bench/peers)
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr,
              "usage: kiln-bench [--csv] [--quick] [--peak] [--only linear|attention_dense|attention_causal|attention_strided|attention_fixed|ffn|gpt2|bert|ut_step]\n");
      return 1;
    }
  }
  auto want = [&](const char *c) { return only.empty() || std::string(c).rfind(only, 0) == 0; };
  if (!quick && !getenv("KILN_BENCH_CHILD")) {  // re-execute with the baselines' environment set
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_L2_SIZE");
    setenv("OMP_WAIT_POLICY", "passive", 1);
    setenv("KILN_BENCH_CHILD", "1", 1);
    execv("/proc/self/exe", argv);
    perror("kiln-bench: re-exec");
  }
  g_peak_gflops = measurePeak(quick);
  g_read_gbs = measureReadBandwidth(quick);
  fprintf(g_csv ? stderr : stdout,
          "kiln-bench: measured on %u cores: FMA peak %.1f GFLOP/s (best of %d trials), read bandwidth %.1f GB/s (best of %d "
          "passes over %d MiB)\n",
          std::thread::hardware_concurrency(), g_peak_gflops, quick ? 1 : 7, g_read_gbs, quick ? 1 : 7, quick ? 64 : 1024);
  if (peakOnly) return 0;
  if (g_csv)
    printf("case,L,density,computed_density,kiln_ms,baseline,baseline_ms,ratio,kiln_peak_bytes,baseline_peak_bytes,gflops,"
           "peak_fraction,bandwidth_fraction\n");
  else
    printf("%-22s %6s %8s %9s %10s  %-10s %10s %8s %12s %12s %8s %7s %6s %9s\n", "case", "L", "density", "computed", "kiln_ms",
           "baseline", "base_ms", "ratio", "kiln_peak_B", "base_peak_B", "GFLOP/s", "peak", "bw", "max_diff");
  if (want("linear")) {
    linearCase(&bench_linear_768x768, 512, 768, 768, quick);
    linearCase(&bench_linear_768x3072, 512, 768, 3072, quick);
    linearCase(&bench_linear_3072x768, 512, 3072, 768, quick);
    // BERT-base's and GPT-2 small's shapes at L = 128 (22 register blocks of 6 rows; not quick:
    // the quick run's 8 rows are one block either way).
    if (!quick) {
      linearCase(&bench_linear_768x768, 128, 768, 768, quick);
      linearCase(&bench_linear_768x3072, 128, 768, 3072, quick);
      linearCase(&bench_linear_3072x768, 128, 3072, 768, quick);
    }
  }
  std::vector<long> Ls = quick ? std::vector<long>{37} : std::vector<long>{512, 1024, 2048, 4096, 8192};
  if (want("attention_dense"))
    for (long L : Ls) attentionCase(&bench_attention_dense, false, L, quick);
  if (want("attention_causal"))
    for (long L : Ls) attentionCase(&bench_attention_causal, true, L, quick);
  std::vector<long> sparseLs = quick ? std::vector<long>{37} : std::vector<long>{1024, 2048, 4096, 8192, 16384};
  if (want("attention_strided"))
    for (long L : sparseLs) sparseAttentionCase("attention_strided", false, L, quick);
  if (want("attention_fixed"))
    for (long L : sparseLs) sparseAttentionCase("attention_fixed", true, L, quick);
  if (want("attention_lsh"))
    for (long L : quick ? std::vector<long>{37} : std::vector<long>{512, 1024, 2048, 4096, 16384, 65536}) lshAttentionCase(L, quick);
  if (want("ffn")) ffnCase(4096, quick);
  if (want("gpt2_small_forward")) gpt2ForwardCase(quick ? 4 : 512, quick);
  if (want("gpt2_small_decode")) gpt2DecodeCase(quick ? 5 : 1024, quick);
  if (want("bert_base_forward"))
    for (long L : quick ? std::vector<long>{4} : std::vector<long>{128, 512}) bertForwardCase(L, quick);
  if (want("ut_step")) utStepCase(quick ? 9 : 512, quick);
  if (g_disagrees) {
    fprintf(stderr, "kiln-bench: error: a row's outputs differ from its baseline's\n");
    return 4;
  }
  // A fraction above 1 means the peak was mismeasured; at --quick's sizes the
  // measurements are too short to hold anyone to them.
  if (g_over_peak && !quick) {
    fprintf(stderr, "kiln-bench: error: a row exceeds what this run measured the machine can do; rerun on an idle machine\n");
    return 3;
  }
  return 0;
}
