/* CPU Adam and SGD for offloaded optimizer state (cpu_update.h). One body, built
 * three times: plain (no vectorization), AVX2 and AVX-512, each through its own
 * target attribute. The pass goes chunk by chunk (CPU_CHUNK elements, on the
 * stack): the gradient converted to f32, the update, the weights converted out,
 * so each element is read and written once from memory. */
#include <math.h>
#include <string.h>

#include "backends/host/host_math.h" /* no FMA contraction, no trapping math: same bits in every version */
#include "backends/runtime/half.h"
#include "zero/cpu_update.h"

#define CPU_CHUNK 1024                 /* elements per pass through the three phases */
#define CPU_PARALLEL_MIN (64 * 1024)   /* fewer elements run on one thread */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CPU_HAVE_X86_VERSIONS 1
#define CPU_TARGET_AVX2 __attribute__((target("avx2")))
#define CPU_TARGET_AVX512 __attribute__((target("avx512f")))
#define CPU_NO_VECTORIZE __attribute__((optimize("no-tree-vectorize")))
#else
#define CPU_HAVE_X86_VERSIONS 0
#define CPU_NO_VECTORIZE
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
} update_job;

CPU_INLINE void update_range(int64_t lo, int64_t hi, const update_job *j)
{
  float g[CPU_CHUNK], copy[CPU_CHUNK];
  for (int64_t at = lo; at < hi; at += CPU_CHUNK) {
    int n = hi - at < CPU_CHUNK ? (int)(hi - at) : CPU_CHUNK;
    load_chunk(n, j->grad + (size_t)at * j->esize, j->dtype, g, j->c.vectorize);
    if (j->c.kind == GAAW_ADAMW) adamw_chunk(n, j->w + at, g, j->m1 + at, j->m2 + at, copy, &j->c);
    else sgd_chunk(n, j->w + at, g, j->m1 + at, copy, &j->c);
    store_chunk(n, copy, j->out + (size_t)at * j->esize, j->dtype, j->c.vectorize);
  }
}

typedef void (*range_fn)(int64_t lo, int64_t hi, const update_job *j);

CPU_NO_VECTORIZE static void range_scalar(int64_t lo, int64_t hi, const update_job *j)
{
  update_job scalar = *j;
  scalar.c.vectorize = 0;
  update_range(lo, hi, &scalar);
}
#if CPU_HAVE_X86_VERSIONS
CPU_TARGET_AVX2 static void range_avx2(int64_t lo, int64_t hi, const update_job *j)
{
  update_range(lo, hi, j);
}
CPU_TARGET_AVX512 static void range_avx512(int64_t lo, int64_t hi, const update_job *j)
{
  update_range(lo, hi, j);
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
                   (float)(1.0 - pow((double)p->beta2, (double)p->step)), a->momentum, a->kind, 1}};
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
