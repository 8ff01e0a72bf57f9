/* bf16 and f16 storage: conversions to and from f32 (round to nearest even), and
 * loads/stores of any float dtype as f32. Shared by every host-side computation
 * (host kernels, MPI reductions of 16-bit buffers). */
#ifndef GAAW_RUNTIME_HALF_H
#define GAAW_RUNTIME_HALF_H

#include <stdint.h>
#include <string.h>

#include "gaaw/tensor.h"

static inline uint32_t gaaw_f32_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float gaaw_bits_f32(uint32_t u)
{
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float gaaw_bf16_to_f32(uint16_t h)
{
  return gaaw_bits_f32((uint32_t)h << 16);
}

static inline uint16_t gaaw_f32_to_bf16(float f)
{
  uint32_t u = gaaw_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
  u += 0x7fffu + ((u >> 16) & 1u);                                          /* nearest even */
  return (uint16_t)(u >> 16);
}

static inline float gaaw_f16_to_f32(uint16_t h)
{
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return gaaw_bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, nan */
  if (exp == 0) {
    if (man == 0) return gaaw_bits_f32(sign);
    /* subnormal: man * 2^-24 */
    float f = (float)man * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  return gaaw_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t gaaw_f32_to_f16(float f)
{
  uint32_t u = gaaw_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;       /* nan */
  if (a >= 0x477ff000u) return sign | 0x7c00u;      /* rounds to >= 65520: inf */
  if (a < 0x38800000u) {                            /* below 2^-14: subnormal or zero */
    if (a < 0x33000000u) return sign;               /* below half the smallest subnormal */
    uint32_t exp = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;                     /* 14..24 */
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return sign | (uint16_t)half;
  }
  a += 0xfffu + ((a >> 13) & 1u);                   /* nearest even on the 13 dropped bits */
  return sign | (uint16_t)((a - 0x38000000u) >> 13);
}

/* Element i of a float buffer of the given dtype, as f32. */
static inline float gaaw_load_f32(const void *p, gaaw_dtype_t dtype, int64_t i)
{
  switch (dtype) {
  case GAAW_BF16: return gaaw_bf16_to_f32(((const uint16_t *)p)[i]);
  case GAAW_F16: return gaaw_f16_to_f32(((const uint16_t *)p)[i]);
  case GAAW_I32: return (float)((const int32_t *)p)[i];
  default: return ((const float *)p)[i];
  }
}

/* Stores v as element i of a buffer of the given dtype (i32: toward zero). */
static inline void gaaw_store_f32(void *p, gaaw_dtype_t dtype, int64_t i, float v)
{
  switch (dtype) {
  case GAAW_BF16: ((uint16_t *)p)[i] = gaaw_f32_to_bf16(v); break;
  case GAAW_F16: ((uint16_t *)p)[i] = gaaw_f32_to_f16(v); break;
  case GAAW_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  default: ((float *)p)[i] = v; break;
  }
}

#endif
