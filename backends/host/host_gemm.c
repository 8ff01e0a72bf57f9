/* GEMM on the host: CBLAS sgemm on the tensors' own memory for f32 (split over the
 * OpenMP threads when OpenBLAS runs single-threaded, see host_threads.c), a cache-blocked
 * C GEMM without CBLAS, and bf16/f16 through f32 copies (host_stage). */
#include <limits.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"

#ifdef GAAW_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---------------------------------------------------------------- blocked GEMM */

/* Block sizes: a packed (MC x KC) slice of op(A) and (KC x NC) slice of op(B) fit
 * in L2 together (16 + 64 KiB) and live on each thread's stack. */
enum { MC = 32, KC = 128, NC = 128 };

/* c rows [0, mb) x cols [0, nb) += apack (mb x kb) * bpack (kb x nb); c has row stride ldc. */
static void block_kernel(int64_t mb, int64_t nb, int64_t kb, const float *apack, const float *bpack, float *c,
                         int64_t ldc)
{
  int64_t i = 0;
  for (; i + 4 <= mb; i += 4) { /* four rows of C share each row of B */
    float *c0 = c + i * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
    for (int64_t p = 0; p < kb; p++) {
      const float *brow = bpack + p * NC;
      float a0 = apack[i * KC + p], a1 = apack[(i + 1) * KC + p];
      float a2 = apack[(i + 2) * KC + p], a3 = apack[(i + 3) * KC + p];
      for (int64_t j = 0; j < nb; j++) {
        float bj = brow[j];
        c0[j] += a0 * bj;
        c1[j] += a1 * bj;
        c2[j] += a2 * bj;
        c3[j] += a3 * bj;
      }
    }
  }
  for (; i < mb; i++) {
    float *c0 = c + i * ldc;
    for (int64_t p = 0; p < kb; p++) {
      const float *brow = bpack + p * NC;
      float a0 = apack[i * KC + p];
      for (int64_t j = 0; j < nb; j++) c0[j] += a0 * brow[j];
    }
  }
}

/* Row block [i0, i0 + mb) of c = alpha op(a) op(b) + beta c, the matrices with
 * leading dimensions lda, ldb, ldc. Each element of c is summed in the order of p. */
static void gemm_row_block(gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t i0, int64_t mb, int64_t n, int64_t k,
                           float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                           float *c, int64_t ldc)
{
  float apack[MC * KC], bpack[KC * NC];
  for (int64_t i = i0; i < i0 + mb; i++) { /* c = beta c; beta == 0 ignores c (nan included) */
    float *crow = c + i * ldc;
    if (beta == 0.0f)
      memset(crow, 0, (size_t)n * sizeof(float));
    else if (beta != 1.0f)
      for (int64_t j = 0; j < n; j++) crow[j] *= beta;
  }
  if (alpha == 0.0f) return;
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    int64_t kb = k - p0 < KC ? k - p0 : KC;
    for (int64_t i = 0; i < mb; i++) /* apack[i][p] = alpha op(A)[i0 + i][p0 + p] */
      for (int64_t p = 0; p < kb; p++)
        apack[i * KC + p] = alpha * (ta == GAAW_OP_N ? a[(i0 + i) * lda + p0 + p] : a[(p0 + p) * lda + i0 + i]);
    for (int64_t j0 = 0; j0 < n; j0 += NC) {
      int64_t nb = n - j0 < NC ? n - j0 : NC;
      for (int64_t p = 0; p < kb; p++) { /* bpack[p][j] = op(B)[p0 + p][j0 + j] */
        if (tb == GAAW_OP_N)
          memcpy(bpack + p * NC, b + (p0 + p) * ldb + j0, (size_t)nb * sizeof(float));
        else
          for (int64_t j = 0; j < nb; j++) bpack[p * NC + j] = b[(j0 + j) * ldb + p0 + p];
      }
      block_kernel(mb, nb, kb, apack, bpack, c + i0 * ldc + j0, ldc);
    }
  }
}

/* Row-major leading dimensions of contiguous op(a) (m x k) and op(b) (k x n). */
static int64_t lead_a(gaaw_transpose_t ta, int64_t m, int64_t k)
{
  return ta == GAAW_OP_N ? k : m;
}

static int64_t lead_b(gaaw_transpose_t tb, int64_t n, int64_t k)
{
  return tb == GAAW_OP_N ? n : k;
}

void gaaw_host_gemm_blocked_serial_ld(gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n, int64_t k,
                                      float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                                      float beta, float *c, int64_t ldc)
{
  for (int64_t i0 = 0; i0 < m; i0 += MC)
    gemm_row_block(ta, tb, i0, m - i0 < MC ? m - i0 : MC, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

gaaw_status_t gaaw_host_gemm_blocked(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m,
                                     int64_t n, int64_t k, float alpha, const float *a, const float *b,
                                     float beta, float *c)
{
  (void)ctx;
  int64_t mblocks = (m + MC - 1) / MC, lda = lead_a(ta, m, k), ldb = lead_b(tb, n, k);
  /* Each element of c is summed in the order of p whatever the thread count. */
#pragma omp parallel for if (m * n * k > 4 * HOST_PARALLEL_MIN && mblocks > 1) schedule(static)
  for (int64_t ib = 0; ib < mblocks; ib++) {
    int64_t i0 = ib * MC, mb = m - i0 < MC ? m - i0 : MC;
    gemm_row_block(ta, tb, i0, mb, n, k, alpha, a, lda, b, ldb, beta, c, n);
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- dispatch on f32 pointers */

/* Multiply-adds from which a BLAS threads one GEMM itself (OpenBLAS: 2^18). */
#define SPLIT_MIN_BATCHED (1 << 18)

#ifdef GAAW_HAVE_CBLAS
/* One CBLAS call on row-major matrices with explicit leading dimensions. */
static void blas_call(gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
  cblas_sgemm(CblasRowMajor, ta == GAAW_OP_N ? CblasNoTrans : CblasTrans, tb == GAAW_OP_N ? CblasNoTrans : CblasTrans,
              (int)m, (int)n, (int)k, alpha, a, lda > 0 ? (int)lda : 1, b, ldb > 0 ? (int)ldb : 1, beta, c,
              ldc > 0 ? (int)ldc : 1);
}

/* GEMMs with fewer multiply-adds run on one thread (OpenBLAS's own threshold);
 * split blocks are multiples of SPLIT_ALIGN rows or columns. */
enum { SPLIT_MIN = 1 << 18, SPLIT_ALIGN = 16 };

/* The GEMM split over the OpenMP threads (gaaw_host_gemm_threads), one BLAS call
 * per thread on a block of C's rows (or of its columns when C is wider than tall).
 * Each element of C is computed whole by one call, so the result depends only on
 * the block sizes, fixed for a given thread count. */
static void blas_split(int parts, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c)
{
  int by_rows = m >= n;
  int64_t extent = by_rows ? m : n;
#pragma omp parallel num_threads(parts)
  {
    int t = 0, nt = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    nt = omp_get_num_threads();
#endif
    int64_t per = ((extent + nt - 1) / nt + SPLIT_ALIGN - 1) / SPLIT_ALIGN * SPLIT_ALIGN;
    int64_t lo = t * per, hi = lo + per < extent ? lo + per : extent;
    if (lo < hi && by_rows) /* rows lo..hi of op(A) and of C */
      blas_call(ta, tb, hi - lo, n, k, alpha, ta == GAAW_OP_N ? a + lo * lda : a + lo, lda, b, ldb, beta,
                c + lo * n, n);
    else if (lo < hi) /* columns lo..hi of op(B) and of C */
      blas_call(ta, tb, m, hi - lo, k, alpha, a, lda, tb == GAAW_OP_N ? b + lo : b + lo * ldb, ldb, beta, c + lo,
                n);
  }
}
#endif

static int in_parallel(void)
{
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return 1;
#endif
}

/* sgemm for matrices whose sizes fit BLAS's int (checked by the callers). */
static void sgemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, const float *b, float beta, float *c)
{
  if (m == 0 || n == 0) return;
#ifdef GAAW_HAVE_CBLAS
  if (k > 0) {
    int64_t lda = lead_a(ta, m, k), ldb = lead_b(tb, n, k);
    int parts = gaaw_host_gemm_threads();
    if (parts > 1 && m * n * k >= SPLIT_MIN && !in_parallel())
      blas_split(parts, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c);
    else
      blas_call(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
    return;
  }
#endif
  gaaw_host_gemm_blocked(ctx, ta, tb, m, n, k, alpha, a, b, beta, c);
}

gaaw_status_t gaaw_host_check_gemm_sizes(gaaw_context_t ctx, int64_t m, int64_t n, int64_t k)
{
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "GEMM sizes m=%lld n=%lld k=%lld exceed the BLAS int range", (long long)m,
              (long long)n, (long long)k);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_host_sgemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a, const float *b, float beta, float *c)
{
  GAAW_CHECK(gaaw_host_check_gemm_sizes(ctx, m, n, k));
  sgemm(ctx, ta, tb, m, n, k, alpha, a, b, beta, c);
  return GAAW_SUCCESS;
}

void gaaw_host_sgemm_serial_ld(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n,
                               int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                               float beta, float *c, int64_t ldc)
{
  (void)ctx;
  if (m == 0 || n == 0) return;
#ifdef GAAW_HAVE_CBLAS
  if (k > 0) {
    blas_call(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#endif
  gaaw_host_gemm_blocked_serial_ld(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gaaw_host_sgemm_serial(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n,
                            int64_t k, float alpha, const float *a, const float *b, float beta, float *c)
{
  gaaw_host_sgemm_serial_ld(ctx, ta, tb, m, n, k, alpha, a, lead_a(ta, m, k), b, lead_b(tb, n, k), beta, c, n);
}

gaaw_status_t gaaw_host_sgemm_batched(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t batch,
                                      int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                                      const float *b, float beta, float *c)
{
  GAAW_CHECK(gaaw_host_check_gemm_sizes(ctx, m, n, k));
  /* One matrix per thread when there are enough of them (each a one-thread call:
   * sgemm does not split inside a parallel region); otherwise each matrix split.
   * A BLAS that threads itself only gets the small matrices, which it would run
   * on one thread (below 2^18 multiply-adds). */
  int parts = gaaw_host_gemm_threads();
  int per_thread = parts > 1 ? batch >= parts : m * n * k < SPLIT_MIN_BATCHED;
#pragma omp parallel for if (per_thread && batch > 1 && batch * m * n * k > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < batch; i++)
    sgemm(ctx, ta, tb, m, n, k, alpha, a + i * m * k, b + i * k * n, beta, c + i * m * n);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- table entries */

/* Batch count, rows and columns of a tensor seen as (batch, rows, cols). */
static void matrix_dims(const gaaw_tensor_t *t, int64_t *batch, int64_t *rows, int64_t *cols)
{
  *cols = t->shape[t->ndim - 1];
  *rows = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
  *batch = 1;
  for (int i = 0; i < t->ndim - 2; i++) *batch *= t->shape[i];
}

/* The option compute_slowdown (benchmarks and tests of planners): a GEMM that took
 * t seconds is followed by a sleep of (factor - 1) t, so the rank computes as a
 * device factor times slower would, and a core it shares is the other ranks' meanwhile. */
static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void throttle(gaaw_context_t ctx, double t0)
{
  if (ctx->compute_slowdown <= 1) return;
  double wait = (ctx->compute_slowdown - 1) * (now() - t0);
  struct timespec d = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
  while (nanosleep(&d, &d) != 0) {} /* resumed after a signal */
}

gaaw_status_t host_gemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha, gaaw_cten a,
                        gaaw_cten b, float beta, gaaw_ten c)
{
  int64_t m = host_rows(c), n = host_cols(c), k = ta == GAAW_OP_N ? host_cols(a) : host_rows(a);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pa = host_in(&s, a), *pb = host_in(&s, b);
  float *pc = beta == 0.0f ? host_out(&s, c) : host_inout(&s, c);
  double t0 = now();
  if (s.status == GAAW_SUCCESS) s.status = gaaw_host_sgemm(ctx, ta, tb, m, n, k, alpha, pa, pb, beta, pc);
  throttle(ctx, t0);
  return host_stage_end(&s);
}

gaaw_status_t host_gemm_batched(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                                gaaw_cten a, gaaw_cten b, float beta, gaaw_ten c)
{
  int64_t batch, m, n, ar, ac;
  matrix_dims(c, &batch, &m, &n);
  matrix_dims(a, &batch, &ar, &ac);
  int64_t k = ta == GAAW_OP_N ? ac : ar;
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pa = host_in(&s, a), *pb = host_in(&s, b);
  float *pc = beta == 0.0f ? host_out(&s, c) : host_inout(&s, c);
  double t0 = now();
  if (s.status == GAAW_SUCCESS)
    s.status = gaaw_host_sgemm_batched(ctx, ta, tb, batch, m, n, k, alpha, pa, pb, beta, pc);
  throttle(ctx, t0);
  return host_stage_end(&s);
}
