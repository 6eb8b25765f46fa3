// kiln_forward_bench: the demo GPT-2 (2 layers, d_model 128, 4 heads, vocab 256), compiled by
// kiln into a library, against the plain-loop reference with the same weights, in one process.
// Prints median times, their ratio and the largest difference between the two outputs.
//
//   build/bin/kiln_forward_bench [--threads N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kilnrt/api.h"
#include "libgpt2_demo.h"
#include "models.h"

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!strcmp(argv[i], "--threads")) kilnrt_threads_set(atoi(argv[i + 1]));
  kilnrt_session *s;
  if (kilnrt_session_create(&kiln_model, &s) || kilnrt_session_random_weights(s, 1)) {
    fprintf(stderr, "%s\n", kilnrt_last_error());
    return 2;
  }
  std::string wpath = "/tmp/kiln_bench_weights.safetensors";
  kilnrt_session_save_weights(s, wpath.c_str());
  kilnrt_weights *wf;
  kilnrt_weights_open(wpath.c_str(), &wf);
  ref::Weights w;
  for (int i = 0; i < kilnrt_weights_count(wf); ++i) {
    const char *name;
    kilnrt_tensor t;
    kilnrt_weights_get(wf, i, &name, &t);
    ref::T r(std::vector<int64_t>(t.shape, t.shape + t.rank));
    memcpy(r.v.data(), t.data, r.v.size() * 4);
    w[name] = r;
  }
  printf("demo GPT-2 (2 layers, d_model 128, 4 heads, vocab 256): forward pass, median of repeated runs\n");
  printf("%6s %12s %14s %10s %12s\n", "L", "kiln ms", "reference ms", "speedup", "max |diff|");
  for (int L : {1, 8, 32, 128}) {
    std::vector<int32_t> ids(L);
    for (int i = 0; i < L; ++i) ids[i] = (i * 37 + 11) % 256;
    kilnrt_tensor in{KILN_I32, 1, {L}, ids.data()};
    kilnrt_session_set_input(s, "tokens", &in);
    std::vector<double> tk, tr;
    for (int r = 0; r < 50; ++r) {
      int64_t t0 = kilnrt_time_now_ns();
      if (kilnrt_session_run(s, "forward")) {
        fprintf(stderr, "%s\n", kilnrt_last_error());
        return 2;
      }
      tk.push_back((kilnrt_time_now_ns() - t0) / 1e6);
    }
    ref::T out;
    for (int r = 0; r < 3; ++r) {
      int64_t t0 = kilnrt_time_now_ns();
      out = ref::gpt2(w, ids, 2, 4);
      tr.push_back((kilnrt_time_now_ns() - t0) / 1e6);
    }
    const kilnrt_tensor *o;
    kilnrt_session_output(s, "logits", &o);
    double diff = 0;
    for (size_t i = 0; i < out.v.size(); ++i) diff = std::max(diff, (double)std::fabs(out.v[i] - ((float *)o->data)[i]));
    printf("%6d %12.3f %14.3f %9.1fx %12.2e\n", L, median(tk), median(tr), median(tr) / median(tk), diff);
  }
  kilnrt_weights_close(wf);
  kilnrt_session_destroy(s);
  return 0;
}
