/* Cross-entropy pieces over a vocabulary split in two slices, combined as the three
 * all-reduces would (max of maxes, sum of sums, sum of target logits), give the naive
 * log-softmax loss; their gradient matches finite differences of that loss; ignored
 * targets (< 0) add neither loss nor gradient. Embedding lookup and scatter-add on
 * vocabulary slices against naive loops, bit-identical across thread counts.
 * Regression losses (MSE, L1, Huber; with and without weights): elementwise loss
 * against double, gradient against finite differences of it. */
#include "tests/unit/test_kernel_util.h"

enum { N = 6, V = 13, SPLIT = 6 };
static const int32_t targets[N] = {2, 9, -1, 12, 0, 6}; /* row 2 ignored */

/* Mean over the non-ignored rows of log sum_v exp(l) - l[target], from full logits. */
static void ref_loss(const void *data, double *const *in, double *loss)
{
  (void)data;
  const double *l = in[0];
  double total = 0;
  int count = 0;
  for (int n = 0; n < N; n++) {
    if (targets[n] < 0) continue;
    double max = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) max = fmax(max, l[n * V + v]);
    for (int v = 0; v < V; v++) sum += exp(l[n * V + v] - max);
    total += log(sum) + max - l[n * V + targets[n]];
    count++;
  }
  *loss = total / count;
}

static void check_cross_entropy(gaaw_context_t ctx, gaaw_dtype_t dt, uint64_t *seed)
{
  const char *dn = gaaw_dtype_name(dt);
  const int64_t width[2] = {SPLIT, V - SPLIT}, start[2] = {0, SPLIT};
  float full[N * V], part[2][N * V], dl0[2][N * V], dlg[2][N * V];
  gaaw_tensor_t tl[2], tdl[2], tmax[2], tsum[2], ttgt[2];
  gaaw_tensor_t tt = KT_NEW(ctx, GAAW_I32, N), gmax_t = KT_NEW(ctx, GAAW_F32, N), gsum_t = KT_NEW(ctx, GAAW_F32, N);
  require_ok(ctx, gaaw_buffer_write(ctx, tt.buf, 0, targets, sizeof targets));
  for (int s = 0; s < 2; s++) {
    tl[s] = kt_random_tensor(ctx, dt, 2, (int64_t[]){N, width[s]}, -4, 4, seed, part[s]);
    tdl[s] = kt_random_tensor(ctx, dt, 2, (int64_t[]){N, width[s]}, -1, 1, seed, dl0[s]);
    tmax[s] = KT_NEW(ctx, GAAW_F32, N), tsum[s] = KT_NEW(ctx, GAAW_F32, N), ttgt[s] = KT_NEW(ctx, GAAW_F32, N);
    for (int n = 0; n < N; n++)
      for (int v = 0; v < width[s]; v++) full[n * V + start[s] + v] = part[s][n * width[s] + v];
  }
  /* the three reductions a vocab-parallel loss makes, done here by hand */
  float mx[2][N], se[2][N], tg[2][N], gmax[N], gsum[N];
  for (int s = 0; s < 2; s++) {
    expect_status_ctx(ctx, gaaw_row_max(ctx, &tl[s], &tmax[s]), GAAW_SUCCESS);
    kt_download(ctx, &tmax[s], mx[s]);
  }
  for (int n = 0; n < N; n++) gmax[n] = fmaxf(mx[0][n], mx[1][n]);
  require_ok(ctx, gaaw_buffer_write(ctx, gmax_t.buf, 0, gmax, sizeof gmax));
  for (int s = 0; s < 2; s++) {
    expect_status_ctx(ctx, gaaw_row_sum_exp(ctx, &tl[s], &gmax_t, &tsum[s]), GAAW_SUCCESS);
    expect_status_ctx(ctx, gaaw_target_logit(ctx, &tl[s], &tt, start[s], &ttgt[s]), GAAW_SUCCESS);
    kt_download(ctx, &tsum[s], se[s]);
    kt_download(ctx, &ttgt[s], tg[s]);
  }
  double loss = 0, want, *in[1] = {kt_dup(full, N * V)};
  int count = 0;
  for (int n = 0; n < N; n++) {
    gsum[n] = se[0][n] + se[1][n];
    if (targets[n] < 0) {
      expect_true(tg[0][n] == 0 && tg[1][n] == 0, "ignored row %d got target logits %g, %g", n, tg[0][n], tg[1][n]);
      continue;
    }
    loss += log((double)gsum[n]) + gmax[n] - (tg[0][n] + tg[1][n]);
    count++;
  }
  loss /= count;
  ref_loss(NULL, in, &want);
  expect_true(fabs(loss - want) <= 1e-5 * fmax(1, fabs(want)), "%s loss from the pieces %.9g, naive %.9g", dn, loss,
              want);

  /* gradient of the mean loss: dloss = 1 / count for every kept row */
  require_ok(ctx, gaaw_buffer_write(ctx, gsum_t.buf, 0, gsum, sizeof gsum));
  double one = 1, g[N * V];
  kt_fd(ref_loss, NULL, in, 0, N * V, &one, 1, g);
  for (int s = 0; s < 2; s++) {
    expect_status_ctx(ctx, gaaw_cross_entropy_backward(ctx, &tl[s], &gmax_t, &gsum_t, &tt, start[s], 1.0f / count,
                                                       &tdl[s]),
                      GAAW_SUCCESS);
    double want_g[N * V];
    for (int n = 0; n < N; n++)
      for (int v = 0; v < width[s]; v++)
        want_g[n * width[s] + v] = dl0[s][n * width[s] + v] + g[n * V + start[s] + v];
    kt_expect(ctx, &tdl[s], want_g, 2 * kt_tol(dt), "cross_entropy_backward %s slice %d (accumulated)", dn, s);
    kt_download(ctx, &tdl[s], dlg[s]);
    for (int v = 0; v < width[s]; v++)
      expect_true(dlg[s][2 * width[s] + v] == dl0[s][2 * width[s] + v], "ignored row 2 got a gradient at %d", v);
  }
  free(in[0]);
  for (int s = 0; s < 2; s++)
    kt_free(ctx, &tl[s]), kt_free(ctx, &tdl[s]), kt_free(ctx, &tmax[s]), kt_free(ctx, &tsum[s]), kt_free(ctx, &ttgt[s]);
  kt_free(ctx, &tt), kt_free(ctx, &gmax_t), kt_free(ctx, &gsum_t);
}

static void check_embedding(gaaw_context_t ctx, gaaw_dtype_t dt, uint64_t *seed)
{
  enum { NT = 9, VT = 10, C = 5, CUT = 4 };
  const char *dn = gaaw_dtype_name(dt);
  const int32_t tokens[NT] = {3, 7, 3, 0, 9, 4, 7, 7, 12}; /* 12 is outside both slices */
  const int64_t rows[2] = {CUT, VT - CUT}, start[2] = {0, CUT};
  gaaw_tensor_t tt = KT_NEW(ctx, GAAW_I32, NT);
  require_ok(ctx, gaaw_buffer_write(ctx, tt.buf, 0, tokens, sizeof tokens));
  float dy[NT * C];
  gaaw_tensor_t tdy = kt_random_tensor(ctx, dt, 2, (int64_t[]){NT, C}, -1, 1, seed, dy);
  for (int s = 0; s < 2; s++) {
    float table[VT * C], dt0[VT * C];
    double want[VT * C];
    gaaw_tensor_t ttab = kt_random_tensor(ctx, dt, 2, (int64_t[]){rows[s], C}, -1, 1, seed, table);
    gaaw_tensor_t tdt = kt_random_tensor(ctx, dt, 2, (int64_t[]){rows[s], C}, -1, 1, seed, dt0);
    gaaw_tensor_t ty = KT_NEW(ctx, dt, NT, C);
    expect_status_ctx(ctx, gaaw_embedding_forward(ctx, &tt, &ttab, start[s], &ty), GAAW_SUCCESS);
    for (int n = 0; n < NT; n++) {
      int64_t r = tokens[n] - start[s];
      for (int c = 0; c < C; c++) want[n * C + c] = r >= 0 && r < rows[s] ? table[r * C + c] : 0;
    }
    kt_expect(ctx, &ty, want, 0, "embedding_forward %s slice %d", dn, s);
    expect_status_ctx(ctx, gaaw_embedding_backward(ctx, &tt, &tdy, start[s], &tdt), GAAW_SUCCESS);
    for (int i = 0; i < rows[s] * C; i++) want[i] = dt0[i];
    for (int n = 0; n < NT; n++) {
      int64_t r = tokens[n] - start[s];
      if (r >= 0 && r < rows[s])
        for (int c = 0; c < C; c++) want[r * C + c] += dy[n * C + c];
    }
    kt_expect(ctx, &tdt, want, 2 * kt_tol(dt), "embedding_backward %s slice %d (accumulated)", dn, s);
    kt_free(ctx, &ttab), kt_free(ctx, &tdt), kt_free(ctx, &ty);
  }
  kt_free(ctx, &tt), kt_free(ctx, &tdy);
}

/* Repeated tokens summed in a fixed order: the same bits for 1, 2 and 3 threads. */
static void check_embedding_threads(gaaw_context_t ctx, uint64_t *seed)
{
  enum { NT = 2000, VT = 50, C = 256 };
  static int32_t tokens[NT];
  static float dy[NT * C];
  for (int n = 0; n < NT; n++) tokens[n] = (n * 7919) % VT;
  gaaw_tensor_t tt = KT_NEW(ctx, GAAW_I32, NT), tdt = KT_NEW(ctx, GAAW_F32, VT, C);
  require_ok(ctx, gaaw_buffer_write(ctx, tt.buf, 0, tokens, sizeof tokens));
  gaaw_tensor_t tdy = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){NT, C}, -1, 1, seed, dy);
  void *first = NULL;
  for (int threads = 1; threads <= 3; threads++) {
    kt_threads(threads);
    require_ok(ctx, gaaw_fill(ctx, &tdt, 0.5f));
    require_ok(ctx, gaaw_embedding_backward(ctx, &tt, &tdy, 0, &tdt));
    void *bytes = kt_bytes(ctx, &tdt);
    if (!first)
      first = bytes;
    else {
      expect_true(memcmp(first, bytes, VT * C * 4) == 0, "embedding_backward differs between 1 and %d threads",
                  threads);
      free(bytes);
    }
  }
  kt_threads(2);
  free(first);
  kt_free(ctx, &tt), kt_free(ctx, &tdt), kt_free(ctx, &tdy);
}

typedef struct {
  gaaw_loss_t kind;
  double delta;
  long n;
  const double *target, *w; /* w may be NULL */
} regression_case;

/* out[i] = w[i] l(pred[i] - target[i]) in double (in[0]: pred). */
static void ref_regression(const void *data, double *const *in, double *out)
{
  const regression_case *c = data;
  for (long i = 0; i < c->n; i++) {
    double d = in[0][i] - c->target[i], a = fabs(d), l;
    if (c->kind == GAAW_LOSS_MSE)
      l = d * d;
    else if (c->kind == GAAW_LOSS_L1)
      l = a;
    else
      l = a < c->delta ? 0.5 * d * d : c->delta * (a - 0.5 * c->delta);
    out[i] = (c->w ? c->w[i] : 1.0) * l;
  }
}

static void check_regression(gaaw_context_t ctx, gaaw_dtype_t dt, gaaw_loss_t kind, int weighted, uint64_t *seed)
{
  enum { R = 7, C = 5, n = R * C };
  static const char *const names[] = {"mse", "l1", "huber"};
  float pred[n], target[n], w[n], junk[n];
  gaaw_tensor_t tp = kt_random_tensor(ctx, dt, 2, (int64_t[]){R, C}, -2, 2, seed, pred);
  gaaw_tensor_t tt = kt_random_tensor(ctx, dt, 2, (int64_t[]){R, C}, -2, 2, seed, target);
  gaaw_tensor_t tw = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){R, C}, 0, 2, seed, w);
  for (long i = 0; i < n; i += 4) w[i] = 0.0f; /* masked out */
  kt_upload(ctx, &tw, w);
  /* both outputs start as junk: the kernel overwrites them */
  gaaw_tensor_t tl = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){R, C}, -9, 9, seed, junk);
  gaaw_tensor_t tg = kt_random_tensor(ctx, dt, 2, (int64_t[]){R, C}, -9, 9, seed, junk);
  double *dp = kt_dup(pred, n), *dt_ = kt_dup(target, n), *dw = kt_dup(w, n), ones[n], want[n], grad[n];
  for (long i = 0; i < n; i++) ones[i] = 1.0;
  regression_case c = {kind, 0.7, n, dt_, weighted ? dw : NULL};
  expect_status_ctx(ctx, gaaw_regression_loss(ctx, kind, 0.7f, &tp, &tt, weighted ? &tw : NULL, &tl, &tg),
                    GAAW_SUCCESS);
  double *in[1] = {dp};
  ref_regression(&c, in, want);
  kt_expect(ctx, &tl, want, kt_tol(dt), "%s loss %s%s", names[kind], gaaw_dtype_name(dt), weighted ? " weighted" : "");
  kt_fd(ref_regression, &c, in, 0, n, ones, n, grad);
  kt_expect(ctx, &tg, grad, 2 * kt_tol(dt), "%s grad %s%s (finite differences)", names[kind], gaaw_dtype_name(dt),
            weighted ? " weighted" : "");
  /* bad arguments */
  expect_status_ctx(ctx, gaaw_regression_loss(ctx, (gaaw_loss_t)GAAW_LOSS_COUNT, 1.0f, &tp, &tt, NULL, &tl, &tg),
                    GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_regression_loss(ctx, kind, 0.0f, &tp, &tt, NULL, &tl, &tg), GAAW_ERR_INVALID_ARG);
  gaaw_tensor_t short_w = KT_NEW(ctx, GAAW_F32, 3);
  expect_status_ctx(ctx, gaaw_regression_loss(ctx, kind, 1.0f, &tp, &tt, &short_w, &tl, &tg), GAAW_ERR_INVALID_ARG);
  kt_free(ctx, &short_w);
  kt_free(ctx, &tp), kt_free(ctx, &tt), kt_free(ctx, &tw), kt_free(ctx, &tl), kt_free(ctx, &tg);
  free(dp), free(dt_), free(dw);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 5;
  for (int d = 0; d < 3; d++) {
    check_cross_entropy(ctx, kt_float_dtypes[d], &seed);
    check_embedding(ctx, kt_float_dtypes[d], &seed);
    for (int k = 0; k < GAAW_LOSS_COUNT; k++)
      for (int weighted = 0; weighted < 2; weighted++)
        check_regression(ctx, kt_float_dtypes[d], (gaaw_loss_t)k, weighted, &seed);
  }
  check_embedding_threads(ctx, &seed);
  return kt_finish(&ctx, "test_kernel_loss");
}
