// quant.cpp - ggml's block formats: Q8_0, Q4_0 and Q4_1 blocks of 32 weights along a row,
// decoded (dequantized) and made from f32 (quantized) the way llama.cpp's reference quantizer
// makes them, so a model quantized by kiln at load holds the blocks `llama-quantize` would write.
//
//   Q8_0 (34 bytes): f16 d, 32 x int8 q;          w = d·q,       d = max|x| / 127, q = round(x / d)
//   Q4_0 (18 bytes): f16 d, 16 bytes of nibbles;  w = d·(q - 8), d = -v / 8 where v is the value
//                    of largest magnitude (so v itself maps to q = 0), q = min(15, trunc(x / d + 8.5))
//   Q4_1 (20 bytes): f16 d, f16 m, 16 bytes;      w = d·q + m,   d = (max - min) / 15, m = min,
//                    q = min(15, trunc((x - min) / d + 0.5))
// Nibbles: weight j of a block in the low nibble of byte j, weight j + 16 in its high nibble.
// The codes are computed with the f32 scale (1/d), then d is stored rounded to f16.
#include <cmath>
#include <cstring>

#include "session_state.h"

namespace kilnrt {

int quant_block_bytes(kiln_dtype t) { return t == KILN_Q8_0 ? 34 : t == KILN_Q4_0 ? 18 : t == KILN_Q4_1 ? 20 : 0; }
bool is_quantized(kiln_dtype t) { return quant_block_bytes(t) > 0; }
size_t tensor_bytes(kiln_dtype t, int64_t numel) {
  return is_quantized(t) ? (size_t)(numel / 32) * quant_block_bytes(t) : (size_t)numel * dtype_size(t);
}

float half_to_float(uint16_t h) {
  float f;
  widen_half(KILN_F16, &h, &f, 1);
  return f;
}

// f32 to IEEE half, to nearest with ties to even; beyond the range, infinity; NaN stays NaN.
uint16_t float_to_half(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;           // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;          // rounds to >= 65536 (or is inf): inf
  if (a < 0x38800000u) {                                 // below 2^-14: a subnormal half (or zero)
    if (a < 0x33000000u) return sign;                    // under half the smallest subnormal: 0
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;      // the significand with its implicit bit
    const int shift = 126 - (int)(a >> 23);              // 14 + 23 - 10 - (e - 127) + ... : to units of 2^-24
    const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    return sign | (uint16_t)(q + (rem > halfway || (rem == halfway && (q & 1))));
  }
  const uint32_t e = (a >> 23) - 112, m = a & 0x7fffffu;  // rebias 127 -> 15
  uint32_t h = (e << 10) | (m >> 13);
  const uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // may carry into the exponent: correct
  return sign | (uint16_t)h;
}

void dequantize_blocks(kiln_dtype t, const uint8_t *src, float *dst, int64_t count) {
  const int bytes = quant_block_bytes(t);
  for (int64_t b = 0; b < count / 32; ++b, src += bytes, dst += 32) {
    uint16_t dh, mh;
    memcpy(&dh, src, 2);
    const float d = half_to_float(dh);
    if (t == KILN_Q8_0) {
      for (int j = 0; j < 32; ++j) dst[j] = d * (float)(int8_t)src[2 + j];
      continue;
    }
    memcpy(&mh, src + 2, 2);
    const float m = t == KILN_Q4_1 ? half_to_float(mh) : 0.0f;
    const uint8_t *q = src + (t == KILN_Q4_0 ? 2 : 4);
    for (int j = 0; j < 16; ++j) {
      if (t == KILN_Q4_0) {
        dst[j] = d * (float)((int)(q[j] & 15) - 8);
        dst[j + 16] = d * (float)((int)(q[j] >> 4) - 8);
      } else {
        dst[j] = d * (float)(q[j] & 15) + m;
        dst[j + 16] = d * (float)(q[j] >> 4) + m;
      }
    }
  }
}

void quantize_blocks(kiln_dtype t, const float *src, uint8_t *dst, int64_t count) {
  const int bytes = quant_block_bytes(t);
  for (int64_t b = 0; b < count / 32; ++b, src += 32, dst += bytes) {
    if (t == KILN_Q8_0) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[j]));
      const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
      const uint16_t dh = float_to_half(d);
      memcpy(dst, &dh, 2);
      for (int j = 0; j < 32; ++j) dst[2 + j] = (uint8_t)(int8_t)std::lround(src[j] * id);
    } else if (t == KILN_Q4_0) {
      float amax = 0, vmax = 0;
      for (int j = 0; j < 32; ++j)
        if (std::fabs(src[j]) > amax) amax = std::fabs(src[j]), vmax = src[j];
      const float d = vmax / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
      const uint16_t dh = float_to_half(d);
      memcpy(dst, &dh, 2);
      for (int j = 0; j < 16; ++j) {
        const int lo = std::min(15, (int)(int8_t)(src[j] * id + 8.5f)), hi = std::min(15, (int)(int8_t)(src[j + 16] * id + 8.5f));
        dst[2 + j] = (uint8_t)(lo | hi << 4);
      }
    } else {
      float lo = src[0], hi = src[0];
      for (int j = 1; j < 32; ++j) lo = std::min(lo, src[j]), hi = std::max(hi, src[j]);
      const float d = (hi - lo) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
      const uint16_t dh = float_to_half(d), mh = float_to_half(lo);
      memcpy(dst, &dh, 2);
      memcpy(dst + 2, &mh, 2);
      for (int j = 0; j < 16; ++j) {
        const int a = std::min(15, (int)(int8_t)((src[j] - lo) * id + 0.5f)), c = std::min(15, (int)(int8_t)((src[j + 16] - lo) * id + 0.5f));
        dst[4 + j] = (uint8_t)(a | c << 4);
      }
    }
  }
}

int64_t first_non_finite_block(kiln_dtype t, const uint8_t *src, int64_t count) {
  const int bytes = quant_block_bytes(t);
  for (int64_t b = 0; b < count / 32; ++b, src += bytes) {
    uint16_t h[2];
    memcpy(h, src, 4);
    if ((h[0] & 0x7c00u) == 0x7c00u || (t == KILN_Q4_1 && (h[1] & 0x7c00u) == 0x7c00u)) return b;
  }
  return -1;
}

}  // namespace kilnrt

extern "C" kilnrt_status kilnrt_tensor_to_f32(const kilnrt_tensor *t, float *out) {
  const int64_t n = kilnrt_tensor_numel(t);
  if (n < 0) return kilnrt::user_error("kilnrt_tensor_to_f32: a bad shape");
  switch (t->dtype) {
    case KILN_F32: memcpy(out, t->data, (size_t)n * 4); return KILNRT_OK;
    case KILN_F16:
    case KILN_BF16: kilnrt::widen_half(t->dtype, (const uint16_t *)t->data, out, n); return KILNRT_OK;
    case KILN_Q8_0:
    case KILN_Q4_0:
    case KILN_Q4_1: kilnrt::dequantize_blocks(t->dtype, (const uint8_t *)t->data, out, n); return KILNRT_OK;
    default: return kilnrt::user_error(std::string("kilnrt_tensor_to_f32: a tensor of ") + kilnrt::dtype_name(t->dtype));
  }
}
