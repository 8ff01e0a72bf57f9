/* The blocked causal attention (gaaw_flash_attention_*) on the host, for every float
 * dtype and for sequences inside one tile, across tiles and with a partial last tile:
 *  - forward out and lse == a double reference; backward dq, dk, dv == the analytic
 *    double reference, added to non-zero starting gradients;
 *  - it agrees with the (T, T) matrix kernel (gaaw_attention_*) on the same inputs;
 *  - repeat runs, and runs on 1, 2, 3 and 5 threads, are bit-identical. */
#include "tests/unit/test_kernel_util.h"

/* One problem: q, k, v, dout (B, T, D) as doubles of the stored values. */
typedef struct {
  long B, T, D;
  const double *q, *k, *v, *dout;
} flash_ref;

/* Row (b, i)'s probabilities p[0..i] and log-sum-exp of the scaled scores. */
static double ref_row(const flash_ref *r, long b, long i, double *p)
{
  long T = r->T, D = r->D;
  double scale = 1 / sqrt((double)D), max = -INFINITY, sum = 0;
  for (long j = 0; j <= i; j++) {
    double acc = 0;
    for (long d = 0; d < D; d++) acc += r->q[(b * T + i) * D + d] * r->k[(b * T + j) * D + d];
    p[j] = scale * acc;
    max = fmax(max, p[j]);
  }
  for (long j = 0; j <= i; j++) sum += exp(p[j] - max);
  double lse = max + log(sum);
  for (long j = 0; j <= i; j++) p[j] = exp(p[j] - lse);
  return lse;
}

/* out (B, T, D), lse (B, T); with grads (dq, dk, dv (B, T, D)) also the backward. */
static void ref_flash(const flash_ref *r, double *out, double *lse, double *const *grads)
{
  long T = r->T, D = r->D;
  double scale = 1 / sqrt((double)D), *p = malloc(sizeof(double) * T), *ds = malloc(sizeof(double) * T);
  if (grads)
    for (int g = 0; g < 3; g++) memset(grads[g], 0, sizeof(double) * r->B * T * D);
  for (long b = 0; b < r->B; b++)
    for (long i = 0; i < T; i++) {
      const double *dor = r->dout + (b * T + i) * D;
      lse[b * T + i] = ref_row(r, b, i, p);
      for (long d = 0; d < D; d++) {
        double acc = 0;
        for (long j = 0; j <= i; j++) acc += p[j] * r->v[(b * T + j) * D + d];
        out[(b * T + i) * D + d] = acc;
      }
      if (!grads) continue;
      /* dp_j = dout_i . v_j;  ds_j = scale p_j (dp_j - sum_j p_j dp_j) */
      double dot = 0;
      for (long j = 0; j <= i; j++) {
        double dp = 0;
        for (long d = 0; d < D; d++) dp += dor[d] * r->v[(b * T + j) * D + d];
        ds[j] = dp;
        dot += p[j] * dp;
      }
      for (long j = 0; j <= i; j++) {
        ds[j] = scale * p[j] * (ds[j] - dot);
        for (long d = 0; d < D; d++) {
          grads[0][(b * T + i) * D + d] += ds[j] * r->k[(b * T + j) * D + d];
          grads[1][(b * T + j) * D + d] += ds[j] * r->q[(b * T + i) * D + d];
          grads[2][(b * T + j) * D + d] += p[j] * dor[d];
        }
      }
    }
  free(p);
  free(ds);
}

/* The tensors of one case. */
typedef struct {
  gaaw_tensor_t q, k, v, dout, out, lse, g[3];
  float *g0[3];
} flash_case;

/* out, lse and dq, dk, dv (reset to g0 first) from the blocked kernels. */
static void run_flash(gaaw_context_t ctx, flash_case *c)
{
  require_ok(ctx, gaaw_flash_attention_forward(ctx, &c->q, &c->k, &c->v, &c->out, &c->lse));
  for (int i = 0; i < 3; i++) kt_upload(ctx, &c->g[i], c->g0[i]);
  require_ok(ctx, gaaw_flash_attention_backward(ctx, &c->dout, &c->q, &c->k, &c->v, &c->out, &c->lse, &c->g[0],
                                                &c->g[1], &c->g[2]));
}

/* The bytes of out, lse, dq, dk, dv, one after the other. */
static char *outputs(gaaw_context_t ctx, flash_case *c, size_t *bytes)
{
  gaaw_tensor_t *t[5] = {&c->out, &c->lse, &c->g[0], &c->g[1], &c->g[2]};
  size_t n = 0;
  for (int i = 0; i < 5; i++) n += gaaw_tensor_numel(t[i]) * gaaw_dtype_size(t[i]->dtype);
  char *all = malloc(n), *at = all;
  for (int i = 0; i < 5; i++) {
    void *b = kt_bytes(ctx, t[i]);
    size_t len = gaaw_tensor_numel(t[i]) * gaaw_dtype_size(t[i]->dtype);
    memcpy(at, b, len);
    at += len;
    free(b);
  }
  *bytes = n;
  return all;
}

static void check_flash(gaaw_context_t ctx, gaaw_dtype_t dt, long B, long T, long D, uint64_t *seed)
{
  long n = B * T * D;
  const char *dn = gaaw_dtype_name(dt);
  int64_t shape[3] = {B, T, D}, lshape[2] = {B, T}, pshape[3] = {B, T, T};
  float *in[4];
  flash_case c;
  gaaw_tensor_t *tin[4] = {&c.q, &c.k, &c.v, &c.dout};
  for (int i = 0; i < 4; i++) {
    in[i] = malloc(sizeof(float) * n);
    *tin[i] = kt_random_tensor(ctx, dt, 3, shape, i < 3 ? -1.5f : -1.0f, i < 3 ? 1.5f : 1.0f, seed, in[i]);
  }
  for (int i = 0; i < 3; i++) {
    c.g0[i] = malloc(sizeof(float) * n);
    c.g[i] = kt_random_tensor(ctx, dt, 3, shape, -1, 1, seed, c.g0[i]);
  }
  c.out = kt_new(ctx, dt, 3, shape);
  c.lse = kt_new(ctx, GAAW_F32, 2, lshape);
  double *d[4], *out = malloc(sizeof(double) * n), *lse = malloc(sizeof(double) * B * T), *g[3];
  for (int i = 0; i < 4; i++) d[i] = kt_dup(in[i], n);
  for (int i = 0; i < 3; i++) g[i] = malloc(sizeof(double) * n);
  flash_ref ref = {B, T, D, d[0], d[1], d[2], d[3]};
  ref_flash(&ref, out, lse, g);

  /* against the double reference */
  run_flash(ctx, &c);
  kt_expect(ctx, &c.out, out, kt_tol(dt), "flash forward %s out (B=%ld T=%ld D=%ld)", dn, B, T, D);
  kt_expect(ctx, &c.lse, lse, kt_tol(GAAW_F32), "flash forward %s lse (B=%ld T=%ld D=%ld)", dn, B, T, D);
  static const char *names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; i++) {
    for (long j = 0; j < n; j++) g[i][j] += c.g0[i][j];
    kt_expect(ctx, &c.g[i], g[i], 2 * kt_tol(dt), "flash backward %s %s (accumulated, B=%ld T=%ld D=%ld)", dn,
              names[i], B, T, D);
  }

  /* against the (T, T) matrix kernel on the same inputs */
  gaaw_tensor_t probs = kt_new(ctx, dt, 3, pshape), dprobs = kt_new(ctx, dt, 3, pshape), mout = kt_new(ctx, dt, 3, shape);
  gaaw_tensor_t mg[3];
  for (int i = 0; i < 3; i++) mg[i] = kt_new(ctx, dt, 3, shape), kt_upload(ctx, &mg[i], c.g0[i]);
  require_ok(ctx, gaaw_attention_forward(ctx, &c.q, &c.k, &c.v, &probs, &mout));
  require_ok(ctx, gaaw_attention_backward(ctx, &c.dout, &c.q, &c.k, &c.v, &probs, &dprobs, &mg[0], &mg[1], &mg[2]));
  float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
  kt_download(ctx, &c.out, a), kt_download(ctx, &mout, b);
  expect_close(a, b, n, kt_tol(dt), "flash vs matrix kernel: out");
  for (int i = 0; i < 3; i++) {
    char what[96];
    snprintf(what, sizeof what, "flash vs matrix kernel: %s %s (T=%ld)", dn, names[i], T);
    kt_download(ctx, &c.g[i], a), kt_download(ctx, &mg[i], b);
    expect_close(a, b, n, 2 * kt_tol(dt), what);
  }
  free(a), free(b);
  kt_free(ctx, &probs), kt_free(ctx, &dprobs), kt_free(ctx, &mout);
  for (int i = 0; i < 3; i++) kt_free(ctx, &mg[i]);

  /* bit-identical again, and on other thread counts */
  size_t bytes, again_bytes;
  char *first = outputs(ctx, &c, &bytes);
  static const int threads[] = {1, 2, 3, 5};
  for (int t = 0; t < 4; t++) {
    kt_threads(threads[t]);
    run_flash(ctx, &c);
    char *again = outputs(ctx, &c, &again_bytes);
    expect_true(again_bytes == bytes && memcmp(first, again, bytes) == 0,
                "flash %s (B=%ld T=%ld D=%ld): the run on %d threads differs from the first", dn, B, T, D,
                threads[t]);
    free(again);
  }
  kt_threads(4);
  free(first);

  for (int i = 0; i < 4; i++) kt_free(ctx, tin[i]), free(in[i]), free(d[i]);
  for (int i = 0; i < 3; i++) kt_free(ctx, &c.g[i]), free(c.g0[i]), free(g[i]);
  kt_free(ctx, &c.out), kt_free(ctx, &c.lse);
  free(out), free(lse);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 23;
  kt_threads(4);
  for (int d = 0; d < 3; d++) {
    check_flash(ctx, kt_float_dtypes[d], 3, 5, 4, &seed);   /* inside one tile */
    check_flash(ctx, kt_float_dtypes[d], 2, 130, 8, &seed); /* three tiles, the last of 2 rows */
  }
  check_flash(ctx, GAAW_F32, 1, 1, 8, &seed);    /* one row */
  check_flash(ctx, GAAW_F32, 2, 64, 16, &seed);  /* exactly one tile */
  check_flash(ctx, GAAW_F32, 3, 257, 24, &seed); /* five tiles, the last of one row */
  check_flash(ctx, GAAW_F32, 1, 96, 80, &seed);  /* D > 64 */
  return kt_finish(&ctx, "test_kernel_flash_attention");
}
