/* Math for the host kernels' inner loops: e^x and the logistic sigmoid written so
 * that the compiler vectorizes the loops that call them (libm's expf and tanhf are
 * one call per element; GELU spent as long in tanhf as the GEMMs of its MLP), and
 * the wider builds of such loops. */
#ifndef GAAW_HOST_MATH_H
#define GAAW_HOST_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* GCC does not turn the range checks below into vector selects while it must keep
 * the floating-point exception flags of every comparison exact (-ftrapping-math,
 * its default; clang's default is off). The kernels never read those flags; the
 * values computed are the same either way. No contraction of a * b + c into one
 * fused multiply-add either, so that the wider clones below (AVX-512 has FMA)
 * round every operation as the baseline build does. Applies to the functions of
 * each file that includes this header, after the include (one set of options, so
 * the helpers below still inline into them). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__INTEL_LLVM_COMPILER)
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif

/* Marks an elementwise loop's function to be built also for AVX-512 and AVX2, the
 * copy run picked by the CPU when the library loads (GCC's target_clones, through
 * an ifunc: glibc on x86-64). The baseline build has 4 lanes; these 16 and 8. The
 * results are the same bits: same operations, no FMA (above), no reordering. Such
 * a function holds the `omp simd` loop itself: OpenMP's outlined parallel bodies
 * are not cloned, so the threaded loop calls it on blocks (HOST_VECTOR_BLOCK). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__INTEL_LLVM_COMPILER) && defined(__x86_64__) && \
  defined(__gnu_linux__)
#define HOST_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HOST_VECTOR_CLONES
#endif
#define HOST_VECTOR_BLOCK 4096

/* Sums for HOST_VECTOR_CLONES functions: HOST_SUM_LANES interleaved partial sums
 * (element j into lane j % HOST_SUM_LANES, the lanes added in order at the end) are
 * a fixed order that the 4-, 8- and 16-lane builds all keep, where an `omp simd`
 * reduction would sum in the order of the vector width, different on each CPU. */
#define HOST_SUM_LANES 16

static inline float host_lanes_total(const float *part)
{
  float sum = 0.0f;
  for (int l = 0; l < HOST_SUM_LANES; l++) sum += part[l];
  return sum;
}

/* sum_j a[j] for j in [0, n), in the lanes' order. */
static inline float host_lanes_sum(int64_t n, const float *a)
{
  float part[HOST_SUM_LANES] = {0};
  int64_t full = n / HOST_SUM_LANES * HOST_SUM_LANES;
  for (int64_t j0 = 0; j0 < full; j0 += HOST_SUM_LANES)
#pragma omp simd
    for (int l = 0; l < HOST_SUM_LANES; l++) part[l] += a[j0 + l];
  for (int64_t j = full; j < n; j++) part[j - full] += a[j];
  return host_lanes_total(part);
}

/* sum_j a[j] b[j] for j in [0, n), in the lanes' order. */
static inline float host_lanes_dot(int64_t n, const float *a, const float *b)
{
  float part[HOST_SUM_LANES] = {0};
  int64_t full = n / HOST_SUM_LANES * HOST_SUM_LANES;
  for (int64_t j0 = 0; j0 < full; j0 += HOST_SUM_LANES)
#pragma omp simd
    for (int l = 0; l < HOST_SUM_LANES; l++) part[l] += a[j0 + l] * b[j0 + l];
  for (int64_t j = full; j < n; j++) part[j - full] += a[j] * b[j];
  return host_lanes_total(part);
}

/* e^x within 2 ulp for x already in [-87, 88] (no range checks).
 * x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so r is exact), e^r by its
 * Taylor series to r^7 (remainder < 1e-8 relative), times 2^n built in the exponent
 * bits. n comes from adding 1.5 * 2^23, which leaves round(x / ln2) in the low
 * mantissa bits: no rounding call, so the loop vectorizes. */
static inline float host_exp_in_range(float x)
{
  float t = x * 1.44269504f + 12582912.0f, n = t - 12582912.0f;
  float r = (x - n * 0.693359375f) + n * 2.12194440e-4f; /* ln2 = 0.693359375 - 2.12194440e-4 */
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  /* Unsigned: for a nan x the bits of t are not those of a small n, and signed
   * arithmetic on them would overflow (undefined); the result is nan then anyway (p is). */
  uint32_t bits, scale_bits;
  memcpy(&bits, &t, sizeof bits);
  scale_bits = (bits - 0x4B400000u + 127u) << 23; /* bits - 0x4B400000 = n in -126..127 */
  float scale;
  memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

/* x limited to [lo, hi]; nan stays nan (quiet comparisons, which the compiler may
 * turn into vector min and max). */
static inline float host_clampf(float x, float lo, float hi)
{
  float y = isless(x, lo) ? lo : x;
  return isgreater(y, hi) ? hi : y;
}

/* e^x within 2 ulp for x in [-87, 88]; +inf above 88 (e^88 ~ 1.7e38 is near the top
 * of f32), 0 below -87 (no subnormals); nan stays nan. */
static inline float host_expf(float x)
{
  float y = host_exp_in_range(host_clampf(x, -87.0f, 88.0f));
  return isgreater(x, 88.0f) ? INFINITY : isless(x, -87.0f) ? 0.0f : y;
}

/* One AdamW element, the formula of include/gaaw/kernels.h in the order every
 * host-side update uses (the host backend's kernel, CPU Adam of zero/): g the
 * scaled gradient, *m and *v updated, the new weight returned. */
static inline float host_adamw_element(float p, float g, float *m, float *v, float b1, float b2, float lr, float eps,
                                       float wd, float bc1, float bc2)
{
  float mi = b1 * *m + (1.0f - b1) * g;
  float vi = b2 * *v + (1.0f - b2) * g * g;
  *m = mi;
  *v = vi;
  return p - lr * (mi / bc1 / (sqrtf(vi / bc2) + eps) + wd * p);
}

/* 1 / (1 + e^-x) within 3 ulp for x in [-87, 87]; beyond, the value at the end
 * (1 above 87 as the exact function rounds, 1.6e-38 below -87 where it is smaller
 * still): e^-x is limited to [e^-87, e^87] instead of being checked for 0 and inf,
 * which saves the two selects per element of GELU, SiLU and SwiGLU. Every result is
 * normal, so a product with it (x sigma(x)) never turns subnormal, slow on some CPUs. */
static inline float host_sigmoidf(float x)
{
  return 1.0f / (1.0f + host_exp_in_range(host_clampf(-x, -87.0f, 87.0f)));
}

#endif
