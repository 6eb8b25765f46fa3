// kiln-npy-compare: the shared comparison for two .npy files, for machines without the test
// suite (tests/gpu/run.sh on the GPU machine). Exit 0 when every element satisfies
// |got - want| <= tol |want| + tol max|want| (same shape, same dtype; max over finite values;
// equal infinities and NaN against NaN match), 1 otherwise.
//
//   kiln-npy-compare WANT.npy GOT.npy [TOL]      (TOL default 1e-4; reordered GPU sums: 2e-4)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kilnrt/api.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: kiln-npy-compare WANT.npy GOT.npy [TOL]\n");
    return 2;
  }
  double tol = argc > 3 ? atof(argv[3]) : 1e-4;
  kilnrt_tensor a, b;
  if (kilnrt_npy_read(argv[1], &a) || kilnrt_npy_read(argv[2], &b)) {
    fprintf(stderr, "kiln-npy-compare: %s\n", kilnrt_last_error());
    return 2;
  }
  bool same = a.dtype == b.dtype && a.rank == b.rank;
  for (int i = 0; same && i < a.rank; ++i) same = a.shape[i] == b.shape[i];
  if (!same) {
    fprintf(stderr, "kiln-npy-compare: %s and %s differ in shape or dtype\n", argv[1], argv[2]);
    return 1;
  }
  int64_t n = kilnrt_tensor_numel(&a);
  auto at = [](const kilnrt_tensor &t, int64_t i) {
    return t.dtype == KILN_I32 ? (double)((const int32_t *)t.data)[i] : (double)((const float *)t.data)[i];
  };
  double scale = 0, worst = 0;
  // The scale is over finite values; equal values (the same infinity, e.g. a fully masked row's
  // log-sum-exp) and NaN against NaN match; an infinity or NaN against anything else does not.
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(at(a, i))) scale = std::max(scale, std::fabs(at(a, i)));
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    double w = at(a, i), g = at(b, i);
    if (w == g || (std::isnan(w) && std::isnan(g))) continue;
    double d = std::fabs(g - w);
    worst = std::max(worst, std::isnan(d) ? INFINITY : d);
    if (!std::isfinite(w) || !std::isfinite(g) || !(d <= tol * std::fabs(w) + tol * scale)) bad += 1, first = first < 0 ? i : first;
  }
  printf("%s: %lld elements, max |diff| %.3g (max |want| %.3g), %lld outside tolerance %.1g\n", argv[2], (long long)n,
         worst, scale, (long long)bad, tol);
  if (bad) printf("  first at flat index %lld: want %.9g got %.9g\n", (long long)first, at(a, first), at(b, first));
  kilnrt_tensor_free(&a);
  kilnrt_tensor_free(&b);
  return bad ? 1 : 0;
}
