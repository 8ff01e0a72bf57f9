/* CPU Adam and SGD for offloaded optimizer state (cpu_update.h). One body, built
 * three times: plain (no vectorization), AVX2 and AVX-512, each through its own
 * target attribute. The pass goes chunk by chunk (CPU_CHUNK elements, on the
 * stack): the gradient converted to f32, the update, the weights converted out,
 * so each element is read and written once from memory; on a large piece the
 * vector versions write out with non-temporal stores. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/host/host_math.h" /* no FMA contraction, no trapping math: same bits in every version */
#include "backends/runtime/half.h"
#include "zero/cpu_update.h"

#define CPU_CHUNK 1024                 /* elements per pass through the three phases */
#define CPU_PARALLEL_MIN (64 * 1024)   /* fewer elements run on one thread */
/* From this many bytes of traffic (w, m, v, grad, out, each way) on, the output is
 * written with non-temporal stores: a piece this much larger than the caches has left
 * them by the time anyone reads it, and a plain store would first read each line of
 * it from memory (write-allocate), 4 more bytes of traffic per element on top of
 * 32 (f32), 2 on top of 28 (bf16). */
#define CPU_STREAM_MIN_BYTES ((int64_t)64 << 20)

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#define CPU_HAVE_X86_VERSIONS 1
#define CPU_TARGET_AVX2 __attribute__((target("avx2")))
#define CPU_TARGET_AVX512 __attribute__((target("avx512f")))
#else
#define CPU_HAVE_X86_VERSIONS 0
#endif
#define CPU_INLINE static inline __attribute__((always_inline))

static const char *const simd_names[GAAW_CPU_SIMD_COUNT] = {"scalar", "avx2", "avx512"};

const char *gaaw_cpu_simd_name(gaaw_cpu_simd simd)
{
  return simd >= 0 && simd < GAAW_CPU_SIMD_COUNT ? simd_names[simd] : "?";
}

int gaaw_cpu_simd_runs(gaaw_cpu_simd simd)
{
  if (simd == GAAW_CPU_SIMD_SCALAR) return 1;
#if CPU_HAVE_X86_VERSIONS
  __builtin_cpu_init();
  if (simd == GAAW_CPU_SIMD_AVX2) return __builtin_cpu_supports("avx2");
  if (simd == GAAW_CPU_SIMD_AVX512) return __builtin_cpu_supports("avx512f");
#endif
  return 0;
}

int gaaw_cpu_simd_parse(const char *name)
{
  if (strcmp(name, "auto") == 0) {
    int best = GAAW_CPU_SIMD_COUNT - 1;
    while (best > 0 && !gaaw_cpu_simd_runs((gaaw_cpu_simd)best)) best--;
    return best;
  }
  for (int s = 0; s < GAAW_CPU_SIMD_COUNT; s++)
    if (strcmp(name, simd_names[s]) == 0) return s;
  return -1;
}

/* ---------------------------------------------------------------- the body */

/* The per-call constants: bias corrections once, in double (b^step underflows
 * gracefully), exactly as the host backend's AdamW. */
typedef struct {
  float lr, b1, b2, eps, wd, gs, bc1, bc2, momentum;
  gaaw_optimizer_kind_t kind;
  int vectorize; /* 0 in the scalar version: `omp simd if` keeps its loops scalar */
} update_consts;

CPU_INLINE void load_chunk(int n, const void *src, gaaw_dtype_t dtype, float *dst, int vectorize)
{
  if (dtype == GAAW_F32) {
    memcpy(dst, src, sizeof(float) * (size_t)n);
  } else if (dtype == GAAW_BF16) {
    const uint16_t *h = src;
#pragma omp simd if (simd : vectorize)
    for (int i = 0; i < n; i++) dst[i] = gaaw_bf16_to_f32(h[i]);
  } else {
    const uint16_t *h = src;
#pragma omp simd if (simd : vectorize)
    for (int i = 0; i < n; i++) dst[i] = gaaw_f16_to_f32(h[i]);
  }
}

/* Copies bytes from src to dst: memcpy, or the version's non-temporal stores. */
typedef void (*put_fn)(void *dst, const void *src, size_t bytes);

static void put_plain(void *dst, const void *src, size_t bytes)
{
  memcpy(dst, src, bytes);
}

CPU_INLINE void store_chunk(int n, const float *src, void *dst, gaaw_dtype_t dtype, int vectorize)
{
  if (dtype == GAAW_F32) {
    memcpy(dst, src, sizeof(float) * (size_t)n);
  } else if (dtype == GAAW_BF16) {
    uint16_t *h = dst;
#pragma omp simd if (simd : vectorize)
    for (int i = 0; i < n; i++) h[i] = gaaw_f32_to_bf16(src[i]);
  } else {
    uint16_t *h = dst;
#pragma omp simd if (simd : vectorize)
    for (int i = 0; i < n; i++) h[i] = gaaw_f32_to_f16(src[i]);
  }
}

/* g: (n) the gradient, in f32; w, m, v updated; copy[i] = the new w[i]. The
 * formula of include/gaaw/kernels.h, in the host backend's order. */
CPU_INLINE void adamw_chunk(int n, float *w, const float *g, float *m, float *v, float *copy, const update_consts *c)
{
  float b1 = c->b1, b2 = c->b2, lr = c->lr, eps = c->eps, wd = c->wd, gs = c->gs, bc1 = c->bc1, bc2 = c->bc2;
#pragma omp simd if (simd : c->vectorize)
  for (int i = 0; i < n; i++) {
    float p = host_adamw_element(w[i], g[i] * gs, &m[i], &v[i], b1, b2, lr, eps, wd, bc1, bc2);
    w[i] = p;
    copy[i] = p;
  }
}

/* SGD with momentum, in zero/step.c's order of kernels: g = grad * scale (+ wd * p);
 * mom = mom * momentum + g; p = p + (-lr) * mom. */
CPU_INLINE void sgd_chunk(int n, float *w, const float *g, float *mom, float *copy, const update_consts *c)
{
  float gs = c->gs, wd = c->wd, mu = c->momentum, neg_lr = -c->lr;
#pragma omp simd if (simd : c->vectorize)
  for (int i = 0; i < n; i++) {
    float gi = g[i] * gs;
    if (wd != 0) gi = gi + wd * w[i];
    float mi = mom[i] * mu + gi;
    float p = w[i] + neg_lr * mi;
    mom[i] = mi;
    w[i] = p;
    copy[i] = p;
  }
}

/* Elements [lo, hi) of the update. */
typedef struct {
  float *w, *m1, *m2;
  const char *grad;
  char *out;
  gaaw_dtype_t dtype;
  size_t esize;
  update_consts c;
  int stream; /* write out through the version's put (non-temporal stores) */
} update_job;

/* put: how the version writes out when j->stream (through a buffer on the stack,
 * in out's dtype). */
CPU_INLINE void update_range(int64_t lo, int64_t hi, const update_job *j, put_fn put)
{
  float g[CPU_CHUNK], copy[CPU_CHUNK];
  uint16_t half[CPU_CHUNK];
  for (int64_t at = lo; at < hi; at += CPU_CHUNK) {
    int n = hi - at < CPU_CHUNK ? (int)(hi - at) : CPU_CHUNK;
    load_chunk(n, j->grad + (size_t)at * j->esize, j->dtype, g, j->c.vectorize);
    if (j->c.kind == GAAW_ADAMW) adamw_chunk(n, j->w + at, g, j->m1 + at, j->m2 + at, copy, &j->c);
    else sgd_chunk(n, j->w + at, g, j->m1 + at, copy, &j->c);
    char *out = j->out + (size_t)at * j->esize;
    if (!j->stream) {
      store_chunk(n, copy, out, j->dtype, j->c.vectorize);
    } else if (j->dtype == GAAW_F32) {
      put(out, copy, sizeof(float) * (size_t)n);
    } else {
      store_chunk(n, copy, half, j->dtype, j->c.vectorize);
      put(out, half, sizeof(uint16_t) * (size_t)n);
    }
  }
}

typedef void (*range_fn)(int64_t lo, int64_t hi, const update_job *j);

/* The scalar version writes out with plain stores (it is bound by its divisions,
 * not by memory). Its loops stay scalar through `omp simd if (simd: 0)`; it has no
 * optimize attribute, which would keep the per-element helpers from being inlined
 * into it (a call per element and per conversion: 1.1-1.5x slower here). */
static void range_scalar(int64_t lo, int64_t hi, const update_job *j)
{
  update_job scalar = *j;
  scalar.c.vectorize = 0;
  scalar.stream = 0;
  update_range(lo, hi, &scalar, put_plain);
}
#if CPU_HAVE_X86_VERSIONS
/* Non-temporal copies: plain stores up to dst's first 32 (64)-byte boundary and
 * after its last, whole aligned vectors in between; an sfence ends the range. */
CPU_TARGET_AVX2 static void put_avx2(void *dst, const void *src, size_t bytes)
{
  char *d = dst;
  const char *s = src;
  size_t head = (size_t)(-(uintptr_t)d & 31u);
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  size_t at = head;
  for (; at + 32 <= bytes; at += 32) _mm256_stream_si256((__m256i *)(d + at), _mm256_loadu_si256((const __m256i *)(s + at)));
  memcpy(d + at, s + at, bytes - at);
}
CPU_TARGET_AVX512 static void put_avx512(void *dst, const void *src, size_t bytes)
{
  char *d = dst;
  const char *s = src;
  size_t head = (size_t)(-(uintptr_t)d & 63u);
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  size_t at = head;
  for (; at + 64 <= bytes; at += 64) _mm512_stream_si512((void *)(d + at), _mm512_loadu_si512((const void *)(s + at)));
  memcpy(d + at, s + at, bytes - at);
}
CPU_TARGET_AVX2 static void range_avx2(int64_t lo, int64_t hi, const update_job *j)
{
  update_range(lo, hi, j, put_avx2);
  if (j->stream) _mm_sfence();
}
CPU_TARGET_AVX512 static void range_avx512(int64_t lo, int64_t hi, const update_job *j)
{
  update_range(lo, hi, j, put_avx512);
  if (j->stream) _mm_sfence();
}
static const range_fn versions[GAAW_CPU_SIMD_COUNT] = {range_scalar, range_avx2, range_avx512};
#else
static const range_fn versions[GAAW_CPU_SIMD_COUNT] = {range_scalar, range_scalar, range_scalar};
#endif

void gaaw_cpu_update(gaaw_cpu_simd simd, int64_t n, float *w, float *m1, float *m2, const void *grad, void *out,
                     gaaw_dtype_t dtype, const gaaw_cpu_update_args *a)
{
  const gaaw_adamw_args_t *p = &a->adam;
  update_job j = {w, m1, m2, grad, out, dtype, gaaw_dtype_size(dtype),
                  {p->lr, p->beta1, p->beta2, p->eps, p->weight_decay, p->grad_scale,
                   (float)(1.0 - pow((double)p->beta1, (double)p->step)),
                   (float)(1.0 - pow((double)p->beta2, (double)p->step)), a->momentum, a->kind, 1},
                  n * (int64_t)(2 * (12 + gaaw_dtype_size(dtype))) >= CPU_STREAM_MIN_BYTES};
  range_fn run = versions[simd >= 0 && simd < GAAW_CPU_SIMD_COUNT ? simd : 0];
  int64_t blocks = (n + 16 * CPU_CHUNK - 1) / (16 * CPU_CHUNK); /* threads take 16 chunks at a time */
#pragma omp parallel for if (n > CPU_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < blocks; k++) {
    int64_t lo = k * 16 * CPU_CHUNK, hi = lo + 16 * CPU_CHUNK < n ? lo + 16 * CPU_CHUNK : n;
    run(lo, hi, &j);
  }
}

void gaaw_cpu_to_f32(int64_t n, const void *src, gaaw_dtype_t dtype, float *dst)
{
  size_t esize = gaaw_dtype_size(dtype);
  for (int64_t at = 0; at < n; at += CPU_CHUNK)
    load_chunk(n - at < CPU_CHUNK ? (int)(n - at) : CPU_CHUNK, (const char *)src + (size_t)at * esize, dtype, dst + at, 1);
}

void gaaw_cpu_from_f32(int64_t n, const float *src, void *dst, gaaw_dtype_t dtype)
{
  size_t esize = gaaw_dtype_size(dtype);
  for (int64_t at = 0; at < n; at += CPU_CHUNK)
    store_chunk(n - at < CPU_CHUNK ? (int)(n - at) : CPU_CHUNK, src + at, (char *)dst + (size_t)at * esize, dtype, 1);
}
