/* Scaled causal softmax and causal attention: forward == double reference, backward ==
 * central finite differences of L = sum(dy * y), added to non-zero starting gradients,
 * for every float dtype; repeat runs bit-identical. */
#include "tests/unit/test_kernel_util.h"

typedef struct {
  long B, T, D; /* softmax: (B, T, T); attention: (B, T, D) */
  double scale;
} att_shape;

/* y = causal softmax of scale * x, each (T, T) matrix. */
static void ref_softmax_rows(long B, long T, double scale, const double *x, double *y)
{
  for (long r = 0; r < B * T; r++) {
    long t = r % T;
    double max = -INFINITY, sum = 0;
    for (long j = 0; j <= t; j++) max = fmax(max, scale * x[r * T + j]);
    for (long j = 0; j < T; j++) {
      y[r * T + j] = j <= t ? exp(scale * x[r * T + j] - max) : 0;
      sum += y[r * T + j];
    }
    for (long j = 0; j < T; j++) y[r * T + j] /= sum;
  }
}

static void ref_softmax(const void *data, double *const *in, double *y)
{
  const att_shape *s = data;
  ref_softmax_rows(s->B, s->T, s->scale, in[0], y);
}

/* probs (B, T, T) of q, k. */
static void ref_probs(const att_shape *s, double *const *in, double *p)
{
  long B = s->B, T = s->T, D = s->D;
  for (long b = 0; b < B; b++)
    for (long i = 0; i < T; i++)
      for (long j = 0; j < T; j++) {
        double acc = 0;
        for (long d = 0; d < D; d++) acc += in[0][(b * T + i) * D + d] * in[1][(b * T + j) * D + d];
        p[(b * T + i) * T + j] = acc;
      }
  ref_softmax_rows(B, T, 1 / sqrt((double)D), p, p);
}

/* in: q, k, v (B, T, D)   out (B, T, D) = probs v */
static void ref_attention(const void *data, double *const *in, double *out)
{
  const att_shape *s = data;
  long B = s->B, T = s->T, D = s->D;
  double *p = malloc(sizeof(double) * B * T * T);
  ref_probs(s, in, p);
  for (long b = 0; b < B; b++)
    for (long i = 0; i < T; i++)
      for (long d = 0; d < D; d++) {
        double acc = 0;
        for (long j = 0; j < T; j++) acc += p[(b * T + i) * T + j] * in[2][(b * T + j) * D + d];
        out[(b * T + i) * D + d] = acc;
      }
  free(p);
}

static void check_softmax(gaaw_context_t ctx, gaaw_dtype_t dt, uint64_t *seed)
{
  att_shape s = {2, 6, 0, 0.7};
  long n = s.B * s.T * s.T;
  const char *dn = gaaw_dtype_name(dt);
  float *x = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n), *dx0 = malloc(sizeof(float) * n);
  int64_t shape[3] = {s.B, s.T, s.T};
  gaaw_tensor_t tx = kt_random_tensor(ctx, dt, 3, shape, -3, 3, seed, x), ty = kt_new(ctx, dt, 3, shape);
  gaaw_tensor_t tdy = kt_random_tensor(ctx, dt, 3, shape, -1, 1, seed, dy);
  gaaw_tensor_t tdx = kt_random_tensor(ctx, dt, 3, shape, -1, 1, seed, dx0);
  double *in[1] = {kt_dup(x, n)}, *y = malloc(sizeof(double) * n), *ddy = kt_dup(dy, n), *g = malloc(sizeof(double) * n);
  expect_status_ctx(ctx, gaaw_causal_softmax_forward(ctx, (float)s.scale, &tx, &ty), GAAW_SUCCESS);
  ref_softmax(&s, in, y);
  kt_expect(ctx, &ty, y, kt_tol(dt), "causal softmax forward %s", dn);
  /* backward from the stored y (as a caller would), against differences of the reference */
  expect_status_ctx(ctx, gaaw_causal_softmax_backward(ctx, (float)s.scale, &ty, &tdy, &tdx), GAAW_SUCCESS);
  kt_fd(ref_softmax, &s, in, 0, n, ddy, n, g);
  for (long i = 0; i < n; i++) g[i] += dx0[i];
  kt_expect(ctx, &tdx, g, 2 * kt_tol(dt), "causal softmax backward %s dx (accumulated)", dn);
  kt_free(ctx, &tx), kt_free(ctx, &ty), kt_free(ctx, &tdy), kt_free(ctx, &tdx);
  free(x), free(dy), free(dx0), free(in[0]), free(y), free(ddy), free(g);
}

static void check_attention(gaaw_context_t ctx, gaaw_dtype_t dt, long B, long T, long D, uint64_t *seed)
{
  att_shape s = {B, T, D, 0};
  long n = B * T * D, np = B * T * T;
  const char *dn = gaaw_dtype_name(dt);
  int64_t shape[3] = {B, T, D}, pshape[3] = {B, T, T};
  float *v[3], *dout = malloc(sizeof(float) * n), *g0[3];
  gaaw_tensor_t tin[3], tg[3];
  for (int i = 0; i < 3; i++) {
    v[i] = malloc(sizeof(float) * n);
    g0[i] = malloc(sizeof(float) * n);
    tin[i] = kt_random_tensor(ctx, dt, 3, shape, -1.5f, 1.5f, seed, v[i]);
    tg[i] = kt_random_tensor(ctx, dt, 3, shape, -1, 1, seed, g0[i]);
  }
  gaaw_tensor_t tp = kt_new(ctx, dt, 3, pshape), tdp = kt_new(ctx, dt, 3, pshape), to = kt_new(ctx, dt, 3, shape);
  gaaw_tensor_t tdo = kt_random_tensor(ctx, dt, 3, shape, -1, 1, seed, dout);
  double *in[3] = {kt_dup(v[0], n), kt_dup(v[1], n), kt_dup(v[2], n)};
  double *p = malloc(sizeof(double) * np), *out = malloc(sizeof(double) * n), *ddo = kt_dup(dout, n);
  double *g = malloc(sizeof(double) * n);
  expect_status_ctx(ctx, gaaw_attention_forward(ctx, &tin[0], &tin[1], &tin[2], &tp, &to), GAAW_SUCCESS);
  ref_probs(&s, in, p);
  ref_attention(&s, in, out);
  kt_expect(ctx, &tp, p, kt_tol(dt), "attention forward %s probs (B=%ld T=%ld D=%ld)", dn, B, T, D);
  kt_expect(ctx, &to, out, kt_tol(dt), "attention forward %s out (B=%ld T=%ld D=%ld)", dn, B, T, D);
  require_ok(ctx, gaaw_fill(ctx, &tdp, NAN)); /* a workspace: its contents must not matter */
  expect_status_ctx(ctx, gaaw_attention_backward(ctx, &tdo, &tin[0], &tin[1], &tin[2], &tp, &tdp, &tg[0], &tg[1],
                                                 &tg[2]),
                    GAAW_SUCCESS);
  static const char *names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; i++) {
    kt_fd(ref_attention, &s, in, i, n, ddo, n, g);
    for (long j = 0; j < n; j++) g[j] += g0[i][j];
    kt_expect(ctx, &tg[i], g, 2 * kt_tol(dt), "attention backward %s %s (accumulated, B=%ld T=%ld D=%ld)", dn,
              names[i], B, T, D);
  }
  /* the same forward again gives the same bits */
  void *first = kt_bytes(ctx, &to);
  require_ok(ctx, gaaw_attention_forward(ctx, &tin[0], &tin[1], &tin[2], &tp, &to));
  void *second = kt_bytes(ctx, &to);
  expect_true(memcmp(first, second, n * gaaw_dtype_size(dt)) == 0, "attention forward %s repeat differs", dn);
  free(first), free(second);
  for (int i = 0; i < 3; i++) {
    kt_free(ctx, &tin[i]), kt_free(ctx, &tg[i]);
    free(v[i]), free(g0[i]), free(in[i]);
  }
  kt_free(ctx, &tp), kt_free(ctx, &tdp), kt_free(ctx, &to), kt_free(ctx, &tdo);
  free(dout), free(p), free(out), free(ddo), free(g);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 11;
  for (int d = 0; d < 3; d++) {
    check_softmax(ctx, kt_float_dtypes[d], &seed);
    check_attention(ctx, kt_float_dtypes[d], 3, 5, 4, &seed);
  }
  check_attention(ctx, GAAW_F32, 2, 17, 8, &seed);
  return kt_finish(&ctx, "test_kernel_attention");
}
