/* bench/probes/q4_1_gemv.c: what one CPU can do at best for the decode step's quantized GEMV
 * with f32 activations (kiln's default path), written plainly with AVX-512 intrinsics: a Q4_1
 * matrix of SmolLM2's FFN size ([1536, 576]: 18 blocks of 20 bytes a row), each block's codes
 * widened to two 16-lane vectors, converted, multiplied by the activations and scaled by the
 * block's f16 scale, q4_1's minimum as m times the block's sum of activations. Not a kiln
 * kernel (those are Halide's): a yardstick for them.
 *
 *   cc -O2 -march=native -pthread bench/probes/q4_1_gemv.c -o /tmp/q4_1_gemv && /tmp/q4_1_gemv
 *
 * Prints ns per block per core for one thread on one matrix (cache-resident: the arithmetic
 * alone), one thread over 60 matrices (98 MB, from memory), and two threads splitting the
 * columns of each of the 60. */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { K = 576, NCOL = 1536, NB = K / 32, NMAT = 60, BLOCK = 20 };
static const size_t kMatrix = (size_t)NCOL * NB * BLOCK;
static uint8_t *W;
static float *act, *out;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static void gemv(const uint8_t *w, int j0, int j1) {
  const __m128i low = _mm_set1_epi8(15);
  for (int j = j0; j < j1; j++) {
    const uint8_t *row = w + (size_t)j * NB * BLOCK;
    __m512 acc = _mm512_setzero_ps();
    float mt = 0;
    for (int b = 0; b < NB; b++) {
      const uint8_t *blk = row + b * BLOCK;
      float d = _cvtsh_ss(*(const uint16_t *)blk), m = _cvtsh_ss(*(const uint16_t *)(blk + 2));
      __m128i q = _mm_loadu_si128((const __m128i *)(blk + 4));
      __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(q, low)));
      __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), low)));
      __m512 dot = _mm512_fmadd_ps(lo, _mm512_loadu_ps(act + b * 32), _mm512_mul_ps(hi, _mm512_loadu_ps(act + b * 32 + 16)));
      acc = _mm512_fmadd_ps(_mm512_set1_ps(d), dot, acc);
      mt += m * act[K + b];
    }
    out[j] = _mm512_reduce_add_ps(acc) + mt;
  }
}
typedef struct { int j0, j1, mats; } Part;
static void *run(void *p) {
  Part *r = p;
  for (int m = 0; m < r->mats; m++) gemv(W + (r->mats > 1 ? m * kMatrix : 0), r->j0, r->j1);
  return 0;
}
int main(void) {
  W = aligned_alloc(64, kMatrix * NMAT);
  for (size_t i = 0; i < kMatrix * NMAT; i++) W[i] = (uint8_t)rand();
  for (size_t i = 0; i < (size_t)NCOL * NB * NMAT; i++) *(uint16_t *)(W + i * BLOCK) = *(uint16_t *)(W + i * BLOCK + 2) = 0x3c00;
  act = aligned_alloc(64, 4 * (K + NB + 16));
  out = aligned_alloc(64, 4 * NCOL);
  for (int i = 0; i < K + NB; i++) act[i] = 1.0f / (1 + i % 7);
  const double blocks = (double)NCOL * NB;
  for (int rep = 0; rep < 3; rep++) {
    Part one = {0, NCOL, 1};
    double t = now();
    for (int i = 0; i < NMAT; i++) run(&one);
    double resident = (now() - t) / NMAT / blocks * 1e9;
    Part all = {0, NCOL, NMAT};
    t = now();
    run(&all);
    double t1 = now() - t;
    Part a = {0, NCOL / 2, NMAT}, b = {NCOL / 2, NCOL, NMAT};
    pthread_t th;
    t = now();
    pthread_create(&th, 0, run, &b);
    run(&a);
    pthread_join(th, 0);
    double t2 = now() - t;
    printf("q4_1 GEMV [%d, %d]: 1 thread, cache-resident %.2f ns/block; 1 thread from memory %.2f ns/block (%.1f GB/s); "
           "2 threads from memory %.2f ns/block/core (%.1f GB/s)\n",
           NCOL, K, resident, t1 / NMAT / blocks * 1e9, kMatrix * NMAT / t1 / 1e9, 2 * t2 / NMAT / blocks * 1e9,
           kMatrix * NMAT / t2 / 1e9);
  }
  return 0;
}
