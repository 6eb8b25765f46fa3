// kiln_forward_bench: the demo GPT-2 (2 layers, d_model 128, 4 heads, vocab 256), compiled by
// kiln into a library, against the plain-loop reference with the same weights, timed by Google
// Benchmark in one process. After the usual table it prints the reference/kiln time ratio and
// the largest difference between the two outputs for each length.
//
//   build/bin/kiln_forward_bench [--threads N] [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kilnrt/api.h"
#include "libgpt2_demo.h"
#include "models.h"

namespace {
kilnrt_session *g_session;
ref::Weights g_weights;
const int kLengths[] = {1, 8, 32, 128};

std::vector<int32_t> ids(int L) {
  std::vector<int32_t> v(L);
  for (int i = 0; i < L; ++i) v[i] = (i * 37 + 11) % 256;
  return v;
}

void setInput(int L) {
  std::vector<int32_t> v = ids(L);
  kilnrt_tensor in{KILN_I32, 1, {L}, v.data()};
  if (kilnrt_session_set_input(g_session, "tokens", &in)) fprintf(stderr, "%s\n", kilnrt_last_error());
}

void BM_kiln(benchmark::State &state) {
  int L = (int)state.range(0);
  setInput(L);
  for (auto _ : state)
    if (kilnrt_session_run(g_session, "forward")) state.SkipWithError(kilnrt_last_error());
}

void BM_reference(benchmark::State &state) {
  std::vector<int32_t> v = ids((int)state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(ref::gpt2_hf(g_weights, v, 2, 4, "transformer."));
}

// Records each run's time so the ratios can be printed after the table.
struct Recorder : benchmark::ConsoleReporter {
  std::map<std::string, double> ns;
  void ReportRuns(const std::vector<Run> &runs) override {
    for (const Run &r : runs) ns[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
};
}  // namespace

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!strcmp(argv[i], "--threads")) kilnrt_threads_set(atoi(argv[i + 1]));
  benchmark::Initialize(&argc, argv);
  if (kilnrt_session_create(&kiln_model, &g_session) || kilnrt_session_random_weights(g_session, 1)) {
    fprintf(stderr, "%s\n", kilnrt_last_error());
    return 2;
  }
  std::string wpath = "/tmp/kiln_bench_weights.safetensors";
  kilnrt_weights *wf;
  if (kilnrt_session_save_weights(g_session, wpath.c_str()) || kilnrt_weights_open(wpath.c_str(), &wf)) {
    fprintf(stderr, "%s\n", kilnrt_last_error());
    return 2;
  }
  for (int i = 0; i < kilnrt_weights_count(wf); ++i) {
    const char *name;
    kilnrt_tensor t;
    kilnrt_weights_get(wf, i, &name, &t);
    ref::T r(std::vector<int64_t>(t.shape, t.shape + t.rank));
    memcpy(r.v.data(), t.data, r.v.size() * 4);
    g_weights[name] = r;
  }
  kilnrt_weights_close(wf);
  for (int L : kLengths) {
    benchmark::RegisterBenchmark("kiln", BM_kiln)->Arg(L)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("reference", BM_reference)->Arg(L)->Unit(benchmark::kMillisecond);
  }
  Recorder rec;
  benchmark::RunSpecifiedBenchmarks(&rec);
  printf("\ndemo GPT-2 (2 layers, d_model 128, 4 heads, vocab 256), forward pass, one process:\n");
  printf("%6s %12s %14s %10s %12s\n", "L", "kiln ms", "reference ms", "ratio", "max |diff|");
  for (int L : kLengths) {
    std::string k = "kiln/" + std::to_string(L), r = "reference/" + std::to_string(L);
    if (!rec.ns.count(k) || !rec.ns.count(r)) continue;
    setInput(L);
    kilnrt_session_run(g_session, "forward");
    const kilnrt_tensor *o;
    kilnrt_session_output(g_session, "logits", &o);
    ref::T out = ref::gpt2_hf(g_weights, ids(L), 2, 4, "transformer.");
    double diff = 0;
    for (size_t i = 0; i < out.v.size(); ++i) diff = std::max(diff, (double)std::fabs(out.v[i] - ((float *)o->data)[i]));
    printf("%6d %12.3f %14.3f %9.1fx %12.2e\n", L, rec.ns[k], rec.ns[r], rec.ns[r] / rec.ns[k], diff);
  }
  kilnrt_session_destroy(g_session);
  return 0;
}
