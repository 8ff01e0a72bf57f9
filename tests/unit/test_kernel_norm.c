/* LayerNorm and RMSNorm: forward == a double reference, backward == central finite
 * differences of L = sum(dy * y) added to non-zero starting gradients, for every
 * float dtype; dw/db bit-identical for 1, 2 and 3 threads. */
#include "tests/unit/test_kernel_util.h"

typedef struct {
  long N, C;
  double eps;
  int rms;
} norm_shape;

/* in: x (N, C), w (C), b (C) (layernorm only)   out: y (N, C) */
static void ref_norm(const void *data, double *const *in, double *y)
{
  const norm_shape *s = data;
  for (long n = 0; n < s->N; n++) {
    const double *x = in[0] + n * s->C;
    double mean = 0, var = 0;
    if (!s->rms) {
      for (long c = 0; c < s->C; c++) mean += x[c];
      mean /= s->C;
    }
    for (long c = 0; c < s->C; c++) var += (x[c] - mean) * (x[c] - mean);
    double rstd = 1 / sqrt(var / s->C + s->eps);
    for (long c = 0; c < s->C; c++)
      y[n * s->C + c] = (x[c] - mean) * rstd * in[1][c] + (s->rms ? 0 : in[2][c]);
  }
}

/* Row statistics of the reference: mean (layernorm) and rstd. */
static void ref_stats(const norm_shape *s, const double *x, double *mean, double *rstd)
{
  for (long n = 0; n < s->N; n++) {
    double m = 0, var = 0;
    if (!s->rms) {
      for (long c = 0; c < s->C; c++) m += x[n * s->C + c];
      m /= s->C;
    }
    for (long c = 0; c < s->C; c++) var += (x[n * s->C + c] - m) * (x[n * s->C + c] - m);
    mean[n] = m;
    rstd[n] = 1 / sqrt(var / s->C + s->eps);
  }
}

static void check_norm(gaaw_context_t ctx, gaaw_dtype_t dt, int rms, long N, long C, uint64_t *seed)
{
  norm_shape s = {N, C, 1e-5, rms};
  const char *name = rms ? "rmsnorm" : "layernorm";
  double tol = kt_tol(dt);
  float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * C), *b = malloc(sizeof(float) * C);
  float *dy = malloc(sizeof(float) * N * C), *dx0 = malloc(sizeof(float) * N * C);
  float *dw0 = malloc(sizeof(float) * C), *db0 = malloc(sizeof(float) * C);
  gaaw_tensor_t tx = kt_random_tensor(ctx, dt, 2, (int64_t[]){N, C}, -2, 2, seed, x);
  gaaw_tensor_t tw = kt_random_tensor(ctx, dt, 1, (int64_t[]){C}, 0.5f, 1.5f, seed, w);
  gaaw_tensor_t tb = kt_random_tensor(ctx, dt, 1, (int64_t[]){C}, -0.5f, 0.5f, seed, b);
  gaaw_tensor_t ty = KT_NEW(ctx, dt, N, C), tmean = KT_NEW(ctx, GAAW_F32, N), trstd = KT_NEW(ctx, GAAW_F32, N);
  gaaw_tensor_t tdy = kt_random_tensor(ctx, dt, 2, (int64_t[]){N, C}, -1, 1, seed, dy);
  gaaw_tensor_t tdx = kt_random_tensor(ctx, dt, 2, (int64_t[]){N, C}, -1, 1, seed, dx0);
  gaaw_tensor_t tdw = kt_random_tensor(ctx, dt, 1, (int64_t[]){C}, -1, 1, seed, dw0);
  gaaw_tensor_t tdb = kt_random_tensor(ctx, dt, 1, (int64_t[]){C}, -1, 1, seed, db0);
  double *in[3] = {kt_dup(x, N * C), kt_dup(w, C), kt_dup(b, C)};
  double *y = malloc(sizeof(double) * N * C), *mean = malloc(sizeof(double) * N), *rstd = malloc(sizeof(double) * N);
  double *ddy = kt_dup(dy, N * C), *g = malloc(sizeof(double) * N * C);

  if (rms)
    expect_status_ctx(ctx, gaaw_rmsnorm_forward(ctx, &tx, &tw, 1e-5f, &ty, &trstd), GAAW_SUCCESS);
  else
    expect_status_ctx(ctx, gaaw_layernorm_forward(ctx, &tx, &tw, &tb, 1e-5f, &ty, &tmean, &trstd), GAAW_SUCCESS);
  ref_norm(&s, in, y);
  ref_stats(&s, in[0], mean, rstd);
  kt_expect(ctx, &ty, y, tol, "%s forward %s y", name, gaaw_dtype_name(dt));
  kt_expect(ctx, &trstd, rstd, kt_tol(GAAW_F32), "%s forward %s rstd", name, gaaw_dtype_name(dt));
  if (!rms) kt_expect(ctx, &tmean, mean, kt_tol(GAAW_F32), "layernorm forward %s mean", gaaw_dtype_name(dt));

  if (rms)
    expect_status_ctx(ctx, gaaw_rmsnorm_backward(ctx, &tdy, &tx, &tw, &trstd, &tdx, &tdw), GAAW_SUCCESS);
  else
    expect_status_ctx(ctx, gaaw_layernorm_backward(ctx, &tdy, &tx, &tw, &tmean, &trstd, &tdx, &tdw, &tdb),
                      GAAW_SUCCESS);
  /* Backward tolerances: twice the forward's, for the extra f32 sums. */
  kt_fd(ref_norm, &s, in, 0, N * C, ddy, N * C, g);
  for (long i = 0; i < N * C; i++) g[i] += dx0[i];
  kt_expect(ctx, &tdx, g, 2 * tol, "%s backward %s dx (accumulated)", name, gaaw_dtype_name(dt));
  kt_fd(ref_norm, &s, in, 1, C, ddy, N * C, g);
  for (long i = 0; i < C; i++) g[i] += dw0[i];
  kt_expect(ctx, &tdw, g, 2 * tol, "%s backward %s dw (accumulated)", name, gaaw_dtype_name(dt));
  if (!rms) {
    kt_fd(ref_norm, &s, in, 2, C, ddy, N * C, g);
    for (long i = 0; i < C; i++) g[i] += db0[i];
    kt_expect(ctx, &tdb, g, 2 * tol, "layernorm backward %s db (accumulated)", gaaw_dtype_name(dt));
  }
  gaaw_tensor_t *all[] = {&tx, &tw, &tb, &ty, &tmean, &trstd, &tdy, &tdx, &tdw, &tdb};
  for (int i = 0; i < 10; i++) kt_free(ctx, all[i]);
  for (int i = 0; i < 3; i++) free(in[i]);
  free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0);
  free(y), free(mean), free(rstd), free(ddy), free(g);
}

/* Backward outputs (dx, dw, db) are the same bits for 1, 2 and 3 threads, on a size
 * large enough to run in parallel. */
static void check_norm_threads(gaaw_context_t ctx, int rms, uint64_t *seed)
{
  const long N = 1000, C = 64;
  float *v = malloc(sizeof(float) * N * C);
  gaaw_tensor_t tx = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){N, C}, -2, 2, seed, v);
  gaaw_tensor_t tdy = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){N, C}, -1, 1, seed, v);
  gaaw_tensor_t tw = kt_random_tensor(ctx, GAAW_F32, 1, (int64_t[]){C}, 0.5f, 1.5f, seed, v);
  gaaw_tensor_t tb = kt_random_tensor(ctx, GAAW_F32, 1, (int64_t[]){C}, -0.5f, 0.5f, seed, v);
  gaaw_tensor_t ty = KT_NEW(ctx, GAAW_F32, N, C), tmean = KT_NEW(ctx, GAAW_F32, N), trstd = KT_NEW(ctx, GAAW_F32, N);
  gaaw_tensor_t tdx = KT_NEW(ctx, GAAW_F32, N, C), tdw = KT_NEW(ctx, GAAW_F32, C), tdb = KT_NEW(ctx, GAAW_F32, C);
  gaaw_tensor_t *outs[3] = {&tdx, &tdw, &tdb};
  void *first[3] = {0};
  for (int threads = 1; threads <= 3; threads++) {
    kt_threads(threads);
    for (int i = 0; i < 3; i++) require_ok(ctx, gaaw_fill(ctx, outs[i], 0.25f));
    if (rms) {
      require_ok(ctx, gaaw_rmsnorm_forward(ctx, &tx, &tw, 1e-5f, &ty, &trstd));
      require_ok(ctx, gaaw_rmsnorm_backward(ctx, &tdy, &tx, &tw, &trstd, &tdx, &tdw));
    } else {
      require_ok(ctx, gaaw_layernorm_forward(ctx, &tx, &tw, &tb, 1e-5f, &ty, &tmean, &trstd));
      require_ok(ctx, gaaw_layernorm_backward(ctx, &tdy, &tx, &tw, &tmean, &trstd, &tdx, &tdw, &tdb));
    }
    for (int i = 0; i < (rms ? 2 : 3); i++) {
      void *bytes = kt_bytes(ctx, outs[i]);
      if (!first[i])
        first[i] = bytes;
      else {
        expect_true(memcmp(first[i], bytes, gaaw_tensor_numel(outs[i]) * 4) == 0,
                    "%s backward output %d differs between 1 and %d threads", rms ? "rmsnorm" : "layernorm", i,
                    threads);
        free(bytes);
      }
    }
  }
  kt_threads(2);
  for (int i = 0; i < 3; i++) free(first[i]);
  gaaw_tensor_t *all[] = {&tx, &tw, &tb, &ty, &tmean, &trstd, &tdy, &tdx, &tdw, &tdb};
  for (int i = 0; i < 10; i++) kt_free(ctx, all[i]);
  free(v);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 7;
  for (int d = 0; d < 3; d++)
    for (int rms = 0; rms < 2; rms++) {
      check_norm(ctx, kt_float_dtypes[d], rms, 5, 8, &seed);
      check_norm(ctx, kt_float_dtypes[d], rms, 70, 33, &seed); /* several row chunks */
    }
  for (int rms = 0; rms < 2; rms++) check_norm_threads(ctx, rms, &seed);
  return kt_finish(&ctx, "test_kernel_norm");
}
