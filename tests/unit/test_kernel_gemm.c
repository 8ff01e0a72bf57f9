/* GEMM and batched GEMM == a naive double-precision loop, for every transpose
 * combination and float dtype; the blocked C GEMM (the fallback without CBLAS) is
 * checked directly, so it is tested even in builds that use CBLAS; so is the split of
 * one CBLAS GEMM over OpenMP threads, and the option compute_slowdown. */
#include "tests/unit/test_kernel_util.h"
#include "backends/host/host.h"

/* c = alpha op(a) op(b) + beta c0, in double. */
static void ref_gemm(int ta, int tb, long m, long n, long k, double alpha, const float *a, const float *b,
                     double beta, const float *c0, double *c)
{
  for (long i = 0; i < m; i++)
    for (long j = 0; j < n; j++) {
      double s = 0;
      for (long p = 0; p < k; p++)
        s += (double)(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = alpha * s + (beta != 0 ? beta * c0[i * n + j] : 0);
    }
}

/* Public gemm (batch == 0) or gemm_batched on random data, against ref_gemm. */
static void check_gemm(gaaw_context_t ctx, gaaw_dtype_t dt, int ta, int tb, long batch, long m, long n, long k,
                       float alpha, float beta, uint64_t *seed)
{
  long B = batch ? batch : 1;
  float *a = malloc(sizeof(float) * B * m * k), *b = malloc(sizeof(float) * B * k * n);
  float *c0 = malloc(sizeof(float) * B * m * n);
  double *want = malloc(sizeof(double) * B * m * n);
  gaaw_tensor_t ta_t, tb_t, tc;
  int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  if (batch) {
    ta_t = kt_random_tensor(ctx, dt, 3, (int64_t[]){B, ar, ac}, -1, 1, seed, a);
    tb_t = kt_random_tensor(ctx, dt, 3, (int64_t[]){B, br, bc}, -1, 1, seed, b);
    tc = kt_random_tensor(ctx, dt, 3, (int64_t[]){B, m, n}, -1, 1, seed, c0);
  } else {
    ta_t = kt_random_tensor(ctx, dt, 2, (int64_t[]){ar, ac}, -1, 1, seed, a);
    tb_t = kt_random_tensor(ctx, dt, 2, (int64_t[]){br, bc}, -1, 1, seed, b);
    tc = kt_random_tensor(ctx, dt, 2, (int64_t[]){m, n}, -1, 1, seed, c0);
  }
  for (long i = 0; i < B; i++)
    ref_gemm(ta, tb, m, n, k, alpha, a + i * m * k, b + i * k * n, beta, c0 + i * m * n, want + i * m * n);
  gaaw_transpose_t oa = ta ? GAAW_OP_T : GAAW_OP_N, ob = tb ? GAAW_OP_T : GAAW_OP_N;
  if (batch)
    expect_status_ctx(ctx, gaaw_gemm_batched(ctx, oa, ob, alpha, &ta_t, &tb_t, beta, &tc), GAAW_SUCCESS);
  else
    expect_status_ctx(ctx, gaaw_gemm(ctx, oa, ob, alpha, &ta_t, &tb_t, beta, &tc), GAAW_SUCCESS);
  kt_expect(ctx, &tc, want, kt_tol(dt) * (k > 64 ? 4 : 1), "%s %s ta=%d tb=%d batch=%ld m=%ld n=%ld k=%ld",
            batch ? "gemm_batched" : "gemm", gaaw_dtype_name(dt), ta, tb, batch, m, n, k);
  kt_free(ctx, &ta_t);
  kt_free(ctx, &tb_t);
  kt_free(ctx, &tc);
  free(a);
  free(b);
  free(c0);
  free(want);
}

/* beta == 0 ignores c: nan in c must not reach the result (BLAS semantics). */
static void check_beta_zero_ignores_c(gaaw_context_t ctx, gaaw_dtype_t dt, uint64_t *seed)
{
  long m = 4, n = 3, k = 5;
  float a[20], b[15], c[12];
  double want[12];
  gaaw_tensor_t ta = kt_random_tensor(ctx, dt, 2, (int64_t[]){m, k}, -1, 1, seed, a);
  gaaw_tensor_t tb = kt_random_tensor(ctx, dt, 2, (int64_t[]){k, n}, -1, 1, seed, b);
  gaaw_tensor_t tc = KT_NEW(ctx, dt, m, n);
  require_ok(ctx, gaaw_fill(ctx, &tc, NAN));
  ref_gemm(0, 0, m, n, k, 1.0, a, b, 0.0, c, want);
  expect_status_ctx(ctx, gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &ta, &tb, 0.0f, &tc), GAAW_SUCCESS);
  kt_expect(ctx, &tc, want, kt_tol(dt), "gemm %s beta=0 over a nan-filled c", gaaw_dtype_name(dt));
  kt_free(ctx, &ta);
  kt_free(ctx, &tb);
  kt_free(ctx, &tc);
}

/* k == 0: c = beta c. */
static void check_empty_k(gaaw_context_t ctx, uint64_t *seed)
{
  float c0[6];
  double want[6];
  gaaw_tensor_t ta = KT_NEW(ctx, GAAW_F32, 2, 0), tb = KT_NEW(ctx, GAAW_F32, 0, 3);
  gaaw_tensor_t tc = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){2, 3}, -1, 1, seed, c0);
  for (int i = 0; i < 6; i++) want[i] = 0.5 * c0[i];
  expect_status_ctx(ctx, gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &ta, &tb, 0.5f, &tc), GAAW_SUCCESS);
  kt_expect(ctx, &tc, want, 1e-7, "gemm with k = 0 is c = beta c");
  kt_free(ctx, &ta);
  kt_free(ctx, &tb);
  kt_free(ctx, &tc);
}

/* The blocked GEMM on sizes that cross every block edge, each transpose, against the
 * reference; bit-identical for 1, 2 and 3 threads. */
static void check_blocked(gaaw_context_t ctx, uint64_t *seed)
{
  const long m = 70, n = 300, k = 260;
  float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n), *c0 = malloc(sizeof(float) * m * n);
  float *c = malloc(sizeof(float) * m * n), *c1 = malloc(sizeof(float) * m * n);
  double *want = malloc(sizeof(double) * m * n);
  float *w = malloc(sizeof(float) * m * n);
  kt_random(a, m * k, -1, 1, seed);
  kt_random(b, k * n, -1, 1, seed);
  kt_random(c0, m * n, -1, 1, seed);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      gaaw_transpose_t oa = ta ? GAAW_OP_T : GAAW_OP_N, ob = tb ? GAAW_OP_T : GAAW_OP_N;
      ref_gemm(ta, tb, m, n, k, 1.5, a, b, -0.5, c0, want);
      for (long i = 0; i < m * n; i++) w[i] = (float)want[i];
      kt_threads(2);
      memcpy(c, c0, sizeof(float) * m * n);
      expect_status_ctx(ctx, gaaw_host_gemm_blocked(ctx, oa, ob, m, n, k, 1.5f, a, b, -0.5f, c), GAAW_SUCCESS);
      char what[64];
      snprintf(what, sizeof what, "blocked gemm ta=%d tb=%d", ta, tb);
      expect_close(c, w, m * n, 4e-5, what);
      for (int threads = 1; threads <= 3; threads += 2) {
        kt_threads(threads);
        memcpy(c1, c0, sizeof(float) * m * n);
        gaaw_host_gemm_blocked(ctx, oa, ob, m, n, k, 1.5f, a, b, -0.5f, c1);
        expect_true(memcmp(c, c1, sizeof(float) * m * n) == 0,
                    "blocked gemm ta=%d tb=%d differs between 2 and %d threads", ta, tb, threads);
      }
    }
  kt_threads(2);
  /* beta == 0 over nan, and alpha == 0 (c = beta c, a and b not read). */
  for (long i = 0; i < m * n; i++) c[i] = NAN;
  ref_gemm(0, 0, m, n, k, 1.0, a, b, 0.0, c0, want);
  for (long i = 0; i < m * n; i++) w[i] = (float)want[i];
  gaaw_host_gemm_blocked(ctx, GAAW_OP_N, GAAW_OP_N, m, n, k, 1.0f, a, b, 0.0f, c);
  expect_close(c, w, m * n, 4e-5, "blocked gemm beta=0 over nan");
  memcpy(c, c0, sizeof(float) * m * n);
  for (long i = 0; i < m * n; i++) w[i] = 2.0f * c0[i];
  gaaw_host_gemm_blocked(ctx, GAAW_OP_N, GAAW_OP_N, m, n, k, 0.0f, a, b, 2.0f, c);
  expect_close(c, w, m * n, 0, "blocked gemm alpha=0");
  free(a);
  free(b);
  free(c0);
  free(c);
  free(c1);
  free(want);
  free(w);
}

/* The serial GEMMs on blocks of larger matrices (leading dimensions beyond the
 * block's row length, as the attention kernel uses them): the CBLAS path
 * (gaaw_host_sgemm_serial_ld) and the blocked one that stands in for it without
 * CBLAS, each transpose, against the reference; nothing outside C's block written. */
static void check_strided(gaaw_context_t ctx, uint64_t *seed)
{
  const long m = 45, n = 70, k = 150, pad = 7, big = (k > n ? k : n) + pad;
  float *a = malloc(sizeof(float) * big * big), *b = malloc(sizeof(float) * big * big);
  float *c0 = malloc(sizeof(float) * m * n), *c = malloc(sizeof(float) * m * big), *w = malloc(sizeof(float) * m * n);
  float *ac = malloc(sizeof(float) * m * k), *bc = malloc(sizeof(float) * k * n);
  double *want = malloc(sizeof(double) * m * n);
  kt_random(a, big * big, -1, 1, seed);
  kt_random(b, big * big, -1, 1, seed);
  kt_random(c0, m * n, -1, 1, seed);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      gaaw_transpose_t oa = ta ? GAAW_OP_T : GAAW_OP_N, ob = tb ? GAAW_OP_T : GAAW_OP_N;
      /* op(a) is m x k, stored (m, k) or (k, m) in rows of big; b likewise */
      long arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
      for (long i = 0; i < arows; i++) memcpy(ac + i * acols, a + i * big, sizeof(float) * acols);
      for (long i = 0; i < brows; i++) memcpy(bc + i * bcols, b + i * big, sizeof(float) * bcols);
      ref_gemm(ta, tb, m, n, k, 1.5, ac, bc, -0.5, c0, want);
      for (long i = 0; i < m * n; i++) w[i] = (float)want[i];
      for (int path = 0; path < 2; path++) {
        for (long i = 0; i < m * big; i++) c[i] = 1234.5f;
        for (long i = 0; i < m; i++) memcpy(c + i * big, c0 + i * n, sizeof(float) * n);
        if (path == 0)
          gaaw_host_sgemm_serial_ld(ctx, oa, ob, m, n, k, 1.5f, a, big, b, big, -0.5f, c, big);
        else
          gaaw_host_gemm_blocked_serial_ld(oa, ob, m, n, k, 1.5f, a, big, b, big, -0.5f, c, big);
        long outside = 0;
        for (long i = 0; i < m; i++) {
          for (long j = n; j < big; j++) outside += c[i * big + j] != 1234.5f;
          memmove(c + i * n, c + i * big, sizeof(float) * n);
        }
        char what[96];
        snprintf(what, sizeof what, "%s gemm on blocks ta=%d tb=%d", path == 0 ? "serial" : "blocked serial", ta, tb);
        expect_close(c, w, m * n, 4e-5, what);
        expect_true(outside == 0, "%s: %ld elements outside C's block written", what, outside);
      }
    }
  free(a);
  free(b);
  free(c0);
  free(c);
  free(w);
  free(ac);
  free(bc);
  free(want);
}

/* The CBLAS GEMM split over 1, 2 and 3 OpenMP threads (host_gemm.c: by rows when C
 * is taller than wide, else by columns; blocks of 16 that do not divide the sizes)
 * == the reference, for each transpose; each thread count twice gives the same bits. */
static void check_split(gaaw_context_t ctx, uint64_t *seed)
{
  const long shapes[2][3] = {{150, 37, 64}, {37, 150, 64}}; /* >= 2^18 multiply-adds: split */
  for (int sh = 0; sh < 2; sh++) {
    long m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n), *c0 = malloc(sizeof(float) * m * n);
    float *c = malloc(sizeof(float) * m * n), *c1 = malloc(sizeof(float) * m * n), *w = malloc(sizeof(float) * m * n);
    double *want = malloc(sizeof(double) * m * n);
    kt_random(a, m * k, -1, 1, seed);
    kt_random(b, k * n, -1, 1, seed);
    kt_random(c0, m * n, -1, 1, seed);
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        gaaw_transpose_t oa = ta ? GAAW_OP_T : GAAW_OP_N, ob = tb ? GAAW_OP_T : GAAW_OP_N;
        ref_gemm(ta, tb, m, n, k, 1.5, a, b, -0.5, c0, want);
        for (long i = 0; i < m * n; i++) w[i] = (float)want[i];
        for (int threads = 1; threads <= 3; threads++) {
          kt_threads(threads);
          char what[96];
          snprintf(what, sizeof what, "gemm m=%ld n=%ld k=%ld ta=%d tb=%d on %d threads", m, n, k, ta, tb, threads);
          memcpy(c, c0, sizeof(float) * m * n);
          expect_status_ctx(ctx, gaaw_host_sgemm(ctx, oa, ob, m, n, k, 1.5f, a, b, -0.5f, c), GAAW_SUCCESS);
          expect_close(c, w, m * n, 4e-5, what);
          memcpy(c1, c0, sizeof(float) * m * n);
          gaaw_host_sgemm(ctx, oa, ob, m, n, k, 1.5f, a, b, -0.5f, c1);
          expect_true(memcmp(c, c1, sizeof(float) * m * n) == 0, "%s: two calls differ", what);
        }
      }
    kt_threads(2);
    free(a);
    free(b);
    free(c0);
    free(c);
    free(c1);
    free(w);
    free(want);
  }
}

/* The same gemm twice gives the same bits. */
static void check_repeat(gaaw_context_t ctx, uint64_t *seed)
{
  float a[64 * 48], b[48 * 40];
  gaaw_tensor_t ta = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){64, 48}, -1, 1, seed, a);
  gaaw_tensor_t tb = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){48, 40}, -1, 1, seed, b);
  gaaw_tensor_t tc = KT_NEW(ctx, GAAW_F32, 64, 40);
  require_ok(ctx, gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &ta, &tb, 0.0f, &tc));
  void *first = kt_bytes(ctx, &tc);
  require_ok(ctx, gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &ta, &tb, 0.0f, &tc));
  void *second = kt_bytes(ctx, &tc);
  expect_true(memcmp(first, second, 64 * 40 * 4) == 0, "two identical gemm calls differ");
  free(first);
  free(second);
  kt_free(ctx, &ta);
  kt_free(ctx, &tb);
  kt_free(ctx, &tc);
}

/* Seconds of one 192^3 gemm on ctx (after one untimed), and its result's bytes. */
static double timed_gemm(gaaw_context_t ctx, uint64_t seed, void **bytes)
{
  enum { N = 192 };
  float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N);
  gaaw_tensor_t ta = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){N, N}, -1, 1, &seed, a);
  gaaw_tensor_t tb = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){N, N}, -1, 1, &seed, b);
  gaaw_tensor_t tc = KT_NEW(ctx, GAAW_F32, N, N);
  require_ok(ctx, gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &ta, &tb, 0.0f, &tc));
  double t0 = MPI_Wtime();
  require_ok(ctx, gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &ta, &tb, 0.0f, &tc));
  double took = MPI_Wtime() - t0;
  *bytes = kt_bytes(ctx, &tc);
  kt_free(ctx, &ta);
  kt_free(ctx, &tb);
  kt_free(ctx, &tc);
  free(a);
  free(b);
  return took;
}

/* Option compute_slowdown 4: a gemm takes about 4 times as long, with the same bits.
 * Of 7 alternating pairs the fastest of each side are compared (at least 2.5 times):
 * the fastest run is the one no other process slowed, which a median of ratios is
 * not on a loaded 2-core machine (CI once saw 1.62 there). */
static void check_slowdown(gaaw_context_t ctx)
{
  gaaw_context_t slow = test_context(MPI_COMM_SELF, "backend=host compute_slowdown=4");
  double plain_min = HUGE_VAL, slow_min = HUGE_VAL;
  for (int i = 0; i < 7; i++) {
    void *plain_bytes, *slow_bytes;
    double plain_s = timed_gemm(ctx, 7, &plain_bytes), slow_s = timed_gemm(slow, 7, &slow_bytes);
    plain_min = fmin(plain_min, plain_s);
    slow_min = fmin(slow_min, slow_s);
    expect_true(memcmp(plain_bytes, slow_bytes, sizeof(float) * 192 * 192) == 0, "compute_slowdown changed a gemm's bits");
    free(plain_bytes);
    free(slow_bytes);
  }
  expect_true(slow_min >= 2.5 * plain_min, "compute_slowdown 4: the fastest gemm took %.2f times as long (%.3g s, %.3g s)",
              slow_min / plain_min, slow_min, plain_min);
  require_ok(slow, gaaw_finalize(&slow));
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 42;
  for (int d = 0; d < 3; d++) {
    gaaw_dtype_t dt = kt_float_dtypes[d];
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        check_gemm(ctx, dt, ta, tb, 0, 7, 5, 9, 0.75f, 0.5f, &seed);
        check_gemm(ctx, dt, ta, tb, 0, 33, 70, 131, 1.0f, 1.0f, &seed);
        check_gemm(ctx, dt, ta, tb, 3, 6, 4, 5, -1.25f, 0.25f, &seed);
        check_gemm(ctx, dt, ta, tb, 2, 40, 72, 96, 1.0f, 0.0f, &seed);
        check_gemm(ctx, dt, ta, tb, 3, 100, 50, 64, 0.5f, 1.0f, &seed); /* 3 matrices on 2 threads */
        check_gemm(ctx, dt, ta, tb, 1, 100, 50, 64, 0.5f, 1.0f, &seed); /* one matrix, split */
      }
    check_beta_zero_ignores_c(ctx, dt, &seed);
  }
  check_empty_k(ctx, &seed);
  check_blocked(ctx, &seed);
  check_split(ctx, &seed);
  check_strided(ctx, &seed);
  check_repeat(ctx, &seed);
  check_slowdown(ctx);
  return kt_finish(&ctx, "test_kernel_gemm");
}
