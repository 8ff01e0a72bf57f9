/* The mixture-of-experts kernels (include/gaaw/kernels.h's MoE section) on the host
 * backend against references in double computed here:
 *  - the router: softmax and sigmoid scores, each row's log-sum-exp, and dlogits
 *    against central differences of sum(dscores x scores) + zscale / 2 sum(lse^2);
 *  - top-k: the choice by a full sort here (bias moving the choice but not the
 *    weights, a row of equal scores choosing the lowest indices, a row of nan
 *    still choosing distinct experts), with and without renormalisation; dscores
 *    against the closed form, and against central differences where no tie is near;
 *  - the permutations, every float dtype: a counting sort by expert made here, one
 *    assignment dropped (pos -1), a src outside the tokens (a zero row); the
 *    backward's row of dy that no pos names left as it was;
 *  - bad shapes and k > E: GAAW_ERR_INVALID_ARG naming the tensor. */
#include <math.h>

#include "tests/unit/test_kernel_util.h"

enum { T = 6, E = 8, K = 3, C = 5 };

/* ---------------------------------------------------------------- router */

typedef struct {
  int sigmoid;
  double zscale;
} router_args;

/* out = (scores (T, E), zscale / 2 lse^2 (T)) of logits in[0] */
static void router_ref(const void *data, double *const *in, double *out)
{
  const router_args *a = data;
  for (int t = 0; t < T; t++) {
    const double *l = in[0] + t * E;
    double m = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) m = fmax(m, l[e]);
    for (int e = 0; e < E; e++) sum += exp(l[e] - m);
    double lse = m + log(sum);
    for (int e = 0; e < E; e++) out[t * E + e] = a->sigmoid ? 1 / (1 + exp(-l[e])) : exp(l[e] - m) / sum;
    out[T * E + t] = a->zscale / 2 * lse * lse;
  }
}

static void check_router(gaaw_context_t ctx, int sigmoid)
{
  float lv[T * E], dsv[T * E];
  uint64_t seed = 3 + (uint64_t)sigmoid;
  gaaw_tensor_t logits = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){T, E}, -3, 3, &seed, lv);
  gaaw_tensor_t ds = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){T, E}, -1, 1, &seed, dsv);
  gaaw_tensor_t scores = KT_NEW(ctx, GAAW_F32, T, E), lse = KT_NEW(ctx, GAAW_F32, T), dl = KT_NEW(ctx, GAAW_F32, T, E);
  router_args a = {sigmoid, 0.3};
  double *l = kt_dup(lv, T * E), out[T * E + T], lse_want[T], dy[T * E + T], grad[T * E];
  router_ref(&a, (double *const[]){l}, out);
  for (int t = 0; t < T; t++) lse_want[t] = sqrt(out[T * E + t] / (a.zscale / 2));
  expect_status_ctx(ctx, gaaw_moe_router_forward(ctx, &logits, sigmoid, &scores, &lse), GAAW_SUCCESS);
  kt_expect(ctx, &scores, out, 2e-6, "router scores, sigmoid %d", sigmoid);
  kt_expect(ctx, &lse, lse_want, 2e-6, "router lse, sigmoid %d", sigmoid);
  for (int i = 0; i < T * E; i++) dy[i] = dsv[i];
  for (int t = 0; t < T; t++) dy[T * E + t] = 1;
  kt_fd(router_ref, &a, (double *const[]){l}, 0, T * E, dy, T * E + T, grad);
  expect_status_ctx(ctx, gaaw_moe_router_backward(ctx, &logits, &scores, &lse, &ds, sigmoid, (float)a.zscale, &dl),
                    GAAW_SUCCESS);
  kt_expect(ctx, &dl, grad, 1e-4, "router dlogits against finite differences, sigmoid %d", sigmoid);
  /* bad input: lse of the wrong length */
  gaaw_tensor_t short_lse = KT_NEW(ctx, GAAW_F32, T - 1);
  expect_status_ctx(ctx, gaaw_moe_router_forward(ctx, &logits, sigmoid, &scores, &short_lse), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "lse") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_clear_error(ctx);
  gaaw_tensor_t *all[] = {&logits, &ds, &scores, &lse, &dl, &short_lse};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kt_free(ctx, all[i]);
  free(l);
}

/* ---------------------------------------------------------------- top-k */

/* The K experts of row v (E values, bias b or NULL) by sorting (value desc, index asc), nan as -inf. */
static void choose_ref(const float *v, const float *b, int *idx)
{
  int order[E];
  double key[E];
  for (int e = 0; e < E; e++) {
    order[e] = e;
    key[e] = (double)v[e] + (b ? b[e] : 0);
    if (isnan(key[e])) key[e] = -INFINITY;
  }
  for (int i = 1; i < E; i++) /* insertion sort: stable, so equal keys keep index order */
    for (int j = i; j > 0 && key[order[j]] > key[order[j - 1]]; j--) {
      int tmp = order[j];
      order[j] = order[j - 1];
      order[j - 1] = tmp;
    }
  for (int j = 0; j < K; j++) idx[j] = order[j];
}

/* weights of chosen idx from scores v (renormalised or not) */
static void weights_ref(const double *v, const int *idx, int renormalize, double *w)
{
  double sum = 0;
  for (int j = 0; j < K; j++) sum += w[j] = v[idx[j]];
  if (renormalize)
    for (int j = 0; j < K; j++) w[j] /= sum;
}

typedef struct {
  const int *idx;
  int renormalize;
} topk_args;

/* out = weights (T, K) of scores in[0], the choice fixed */
static void topk_weights_fn(const void *data, double *const *in, double *out)
{
  const topk_args *a = data;
  for (int t = 0; t < T; t++) weights_ref(in[0] + t * E, a->idx + t * K, a->renormalize, out + t * K);
}

static void check_topk(gaaw_context_t ctx, int renormalize, int with_bias)
{
  float sv[T * E], bv[E], dwv[T * K], got[T * K];
  uint64_t seed = 17 + (uint64_t)(2 * renormalize + with_bias);
  kt_random(sv, T * E, 0.01f, 1, &seed);
  kt_random(bv, E, -0.5f, 0.5f, &seed);
  for (int e = 0; e < E; e++) sv[4 * E + e] = 0.25f;        /* row 4: all equal */
  sv[5 * E + 1] = NAN, sv[5 * E + 6] = NAN;                 /* row 5: two nan */
  gaaw_tensor_t scores = KT_NEW(ctx, GAAW_F32, T, E), bias = KT_NEW(ctx, GAAW_F32, E);
  kt_upload(ctx, &scores, sv);
  kt_upload(ctx, &bias, bv);
  gaaw_tensor_t idx = KT_NEW(ctx, GAAW_I32, T, K), w = KT_NEW(ctx, GAAW_F32, T, K), ds = KT_NEW(ctx, GAAW_F32, T, E);
  gaaw_tensor_t dw = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){T, K}, -1, 1, &seed, dwv);
  int want_idx[T * K];
  double *s = kt_dup(sv, T * E), want_w[T * K], want_ds[T * E];
  for (int t = 0; t < T; t++) {
    choose_ref(sv + t * E, with_bias ? bv : NULL, want_idx + t * K);
    weights_ref(s + t * E, want_idx + t * K, renormalize, want_w + t * K);
  }
  expect_status_ctx(ctx, gaaw_moe_topk_forward(ctx, &scores, with_bias ? &bias : NULL, renormalize, &idx, &w),
                    GAAW_SUCCESS);
  kt_download(ctx, &idx, got);
  int same = 1;
  for (int i = 0; i < T * K; i++) same &= (int)got[i] == want_idx[i];
  expect_true(same, "topk idx (renormalize %d, bias %d): row 0 got %g %g %g, want %d %d %d", renormalize, with_bias,
              got[0], got[1], got[2], want_idx[0], want_idx[1], want_idx[2]);
  expect_true(with_bias || ((int)got[4 * K] == 0 && (int)got[4 * K + 1] == 1 && (int)got[4 * K + 2] == 2),
              "equal scores must choose experts 0 1 2, got %g %g %g", got[4 * K], got[4 * K + 1], got[4 * K + 2]);
  /* row 5's weights hold its nan scores where chosen; compare rows 0..4 */
  kt_expect(ctx, &w, want_w, 2e-6, "topk weights (renormalize %d, bias %d)", renormalize, with_bias);
  /* backward: the closed form, and finite differences on rows 0..3 */
  for (int t = 0; t < T; t++) {
    const int *ix = want_idx + t * K;
    double sum = 0, dot = 0;
    for (int j = 0; j < K; j++) sum += s[t * E + ix[j]], dot += dwv[t * K + j] * want_w[t * K + j];
    for (int e = 0; e < E; e++) want_ds[t * E + e] = 0;
    for (int j = 0; j < K; j++)
      want_ds[t * E + ix[j]] = renormalize ? (dwv[t * K + j] - dot) / sum : dwv[t * K + j];
  }
  expect_status_ctx(ctx, gaaw_moe_topk_backward(ctx, &scores, &idx, &w, &dw, renormalize, &ds), GAAW_SUCCESS);
  kt_expect(ctx, &ds, want_ds, 2e-5, "topk dscores, closed form (renormalize %d, bias %d)", renormalize, with_bias);
  /* finite differences of the weights on rows 0..3 (no nan; the choice fixed) */
  float dsg[T * E], fd4[4 * E];
  double fd[T * E], dy[T * K];
  kt_download(ctx, &ds, dsg);
  for (int i = 0; i < T * K; i++) dy[i] = dwv[i];
  topk_args a = {want_idx, renormalize};
  kt_fd(topk_weights_fn, &a, (double *const[]){s}, 0, 4 * E, dy, T * K, fd);
  for (int i = 0; i < 4 * E; i++) fd4[i] = (float)fd[i];
  expect_close(dsg, fd4, 4 * E, 1e-4, "topk dscores against finite differences");
  /* bad input: k > E */
  gaaw_tensor_t wide = KT_NEW(ctx, GAAW_I32, T, E + 1), wide_w = KT_NEW(ctx, GAAW_F32, T, E + 1);
  expect_status_ctx(ctx, gaaw_moe_topk_forward(ctx, &scores, NULL, 0, &wide, &wide_w), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "idx has shape") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_clear_error(ctx);
  gaaw_tensor_t *all[] = {&scores, &bias, &idx, &w, &ds, &dw, &wide, &wide_w};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kt_free(ctx, all[i]);
  free(s);
}

/* ---------------------------------------------------------------- permutations */

/* A routing of T tokens to K of E experts and its counting sort: src[p] the token of
 * sorted assignment p (by expert, then token, then choice), pos[t][j] the place of
 * (t, j) or -1 for the one assignment dropped; *P the assignments kept. */
static void route_ref(int *src, int *pos, int *P)
{
  int expert[T * K], n = 0;
  for (int t = 0; t < T; t++)
    for (int j = 0; j < K; j++) expert[t * K + j] = (t * 5 + j * 3) % E;
  for (int e = 0; e < E; e++)
    for (int i = 0; i < T * K; i++) {
      if (expert[i] != e) continue;
      if (i == 7) { /* dropped, as capacity would */
        pos[i] = -1;
        continue;
      }
      pos[i] = n;
      src[n++] = i / K;
    }
  *P = n;
}

static void check_permute(gaaw_context_t ctx, gaaw_dtype_t dt)
{
  int src[T * K], pos[T * K], P;
  route_ref(src, pos, &P);
  float xv[T * C], srcv[T * K + 1], posv[T * K], wv[T * K], yv[(T * K + 1) * C], dov[T * C], dyv[(T * K + 1) * C];
  uint64_t seed = 29 + (uint64_t)dt;
  for (int p = 0; p < P; p++) srcv[p] = (float)src[p];
  srcv[P] = (float)T; /* outside the tokens: a zero row */
  for (int i = 0; i < T * K; i++) posv[i] = (float)pos[i];
  gaaw_tensor_t x = kt_random_tensor(ctx, dt, 2, (int64_t[]){T, C}, -2, 2, &seed, xv);
  gaaw_tensor_t srct = KT_NEW(ctx, GAAW_I32, P + 1), post = KT_NEW(ctx, GAAW_I32, T, K);
  kt_upload(ctx, &srct, srcv);
  kt_upload(ctx, &post, posv);
  gaaw_tensor_t w = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){T, K}, 0, 1, &seed, wv);
  /* y, dy: P + 1 rows, the last one named by no pos */
  gaaw_tensor_t y = kt_random_tensor(ctx, dt, 2, (int64_t[]){P + 1, C}, -2, 2, &seed, yv);
  gaaw_tensor_t dout = kt_random_tensor(ctx, dt, 2, (int64_t[]){T, C}, -1, 1, &seed, dov);
  gaaw_tensor_t dy = kt_random_tensor(ctx, dt, 2, (int64_t[]){P + 1, C}, -1, 1, &seed, dyv);
  gaaw_tensor_t xp = KT_NEW(ctx, dt, P + 1, C), dx = KT_NEW(ctx, dt, T, C), out = KT_NEW(ctx, dt, T, C);
  gaaw_tensor_t dw = KT_NEW(ctx, GAAW_F32, T, K);
  double want_xp[(T * K + 1) * C], want_dx[T * C], want_out[T * C], want_dy[(T * K + 1) * C], want_dw[T * K];
  for (int p = 0; p <= P; p++)
    for (int c = 0; c < C; c++) want_xp[p * C + c] = p < P ? xv[src[p] * C + c] : 0;
  for (int i = 0; i < (P + 1) * C; i++) want_dy[i] = dyv[i];
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) {
      double g = 0, o = 0;
      for (int j = 0; j < K; j++) {
        int p = pos[t * K + j];
        if (p < 0) continue;
        g += yv[p * C + c]; /* permute's backward with dout = y's first P rows */
        o += (double)wv[t * K + j] * yv[p * C + c];
        want_dy[p * C + c] = (double)wv[t * K + j] * dov[t * C + c];
      }
      want_dx[t * C + c] = g, want_out[t * C + c] = o;
    }
  for (int i = 0; i < T * K; i++) {
    double d = 0;
    for (int c = 0; pos[i] >= 0 && c < C; c++) d += (double)dov[(i / K) * C + c] * yv[pos[i] * C + c];
    want_dw[i] = d;
  }
  double tol = kt_tol(dt);
  expect_status_ctx(ctx, gaaw_moe_permute(ctx, &x, &srct, &xp), GAAW_SUCCESS);
  kt_expect(ctx, &xp, want_xp, 0, "moe_permute %s", gaaw_dtype_name(dt));
  expect_status_ctx(ctx, gaaw_moe_permute_backward(ctx, &y, &post, &dx), GAAW_SUCCESS);
  kt_expect(ctx, &dx, want_dx, tol, "moe_permute_backward %s", gaaw_dtype_name(dt));
  expect_status_ctx(ctx, gaaw_moe_unpermute(ctx, &y, &post, &w, &out), GAAW_SUCCESS);
  kt_expect(ctx, &out, want_out, tol, "moe_unpermute %s", gaaw_dtype_name(dt));
  expect_status_ctx(ctx, gaaw_moe_unpermute_backward(ctx, &dout, &y, &post, &w, &dy, &dw), GAAW_SUCCESS);
  kt_expect(ctx, &dy, want_dy, tol, "moe_unpermute_backward dy (its last row untouched) %s", gaaw_dtype_name(dt));
  kt_expect(ctx, &dw, want_dw, dt == GAAW_F32 ? 2e-5 : 1e-5, "moe_unpermute_backward dweights %s",
            gaaw_dtype_name(dt));
  /* bad input: rows of another width, tokens of another dtype */
  gaaw_tensor_t narrow = KT_NEW(ctx, dt, P + 1, C - 1);
  expect_status_ctx(ctx, gaaw_moe_permute(ctx, &x, &srct, &narrow), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "must be (T, C) and (P, C)") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_clear_error(ctx);
  gaaw_tensor_t other = KT_NEW(ctx, dt == GAAW_F32 ? GAAW_BF16 : GAAW_F32, T, C);
  expect_status_ctx(ctx, gaaw_moe_unpermute(ctx, &y, &post, &w, &other), GAAW_ERR_INVALID_ARG);
  gaaw_clear_error(ctx);
  gaaw_tensor_t *all[] = {&x, &srct, &post, &w, &y, &dout, &dy, &xp, &dx, &out, &dw, &narrow, &other};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kt_free(ctx, all[i]);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  for (int sigmoid = 0; sigmoid <= 1; sigmoid++) check_router(ctx, sigmoid);
  for (int renormalize = 0; renormalize <= 1; renormalize++)
    for (int with_bias = 0; with_bias <= 1; with_bias++) check_topk(ctx, renormalize, with_bias);
  for (int d = 0; d < 3; d++) check_permute(ctx, kt_float_dtypes[d]);
  return kt_finish(&ctx, "test_kernel_moe");
}
