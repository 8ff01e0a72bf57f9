/* The host's mixture-of-experts kernels (include/gaaw/kernels.h, MoE section): the
 * router's scores and log-sum-exp, top-k with ties to the lower index, and the
 * permutations of token rows into the experts' order and back. Every sum runs in a
 * fixed order in f32, each output element written once. */
#include <math.h>

#include "backends/host/host.h"

/* ---------------------------------------------------------------- router */

/* scores, lse of one row of E logits l */
static void router_row(int64_t E, const float *l, int sigmoid, float *s, float *lse)
{
  float m = -INFINITY, sum = 0;
  for (int64_t e = 0; e < E; e++) m = fmaxf(m, l[e]);
  for (int64_t e = 0; e < E; e++) sum += expf(l[e] - m);
  *lse = m + logf(sum);
  for (int64_t e = 0; e < E; e++) s[e] = sigmoid ? 1.0f / (1.0f + expf(-l[e])) : expf(l[e] - m) / sum;
}

gaaw_status_t host_moe_router(gaaw_context_t ctx, gaaw_cten logits, int sigmoid, gaaw_ten scores, gaaw_ten lse)
{
  host_stage st;
  host_stage_init(&st, ctx);
  const float *l = host_in(&st, logits);
  float *s = host_out(&st, scores), *z = host_out(&st, lse);
  const int64_t T = logits->shape[0], E = logits->shape[1];
  if (st.status == GAAW_SUCCESS)
#pragma omp parallel for if (T * E > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t t = 0; t < T; t++) router_row(E, l + t * E, sigmoid, s + t * E, z + t);
  return host_stage_end(&st);
}

/* dlogits of one row: the scores' backward, and the z-loss's zscale lse softmax */
static void router_row_backward(int64_t E, const float *l, const float *s, float lse, const float *ds, int sigmoid,
                                float zscale, float *dl)
{
  float dot = 0;
  if (!sigmoid)
    for (int64_t e = 0; e < E; e++) dot += s[e] * ds[e];
  for (int64_t e = 0; e < E; e++) {
    float g = sigmoid ? ds[e] * s[e] * (1.0f - s[e]) : s[e] * (ds[e] - dot);
    dl[e] = g + zscale * lse * expf(l[e] - lse);
  }
}

gaaw_status_t host_moe_router_backward(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten scores, gaaw_cten lse,
                                       gaaw_cten dscores, int sigmoid, float zscale, gaaw_ten dlogits)
{
  host_stage st;
  host_stage_init(&st, ctx);
  const float *l = host_in(&st, logits), *s = host_in(&st, scores), *z = host_in(&st, lse), *ds = host_in(&st, dscores);
  float *dl = host_out(&st, dlogits);
  const int64_t T = logits->shape[0], E = logits->shape[1];
  if (st.status == GAAW_SUCCESS)
#pragma omp parallel for if (T * E > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t t = 0; t < T; t++)
      router_row_backward(E, l + t * E, s + t * E, z[t], ds + t * E, sigmoid, zscale, dl + t * E);
  return host_stage_end(&st);
}

/* ---------------------------------------------------------------- top-k */

/* The k largest of v[e] + b[e] (b NULL: 0; nan counts as -inf), ties to the lower
 * index, largest first: each pick is the largest (value, -index) below the one
 * before, so nothing needs marking. */
static void topk_row(int64_t E, int64_t k, const float *v, const float *b, int32_t *idx)
{
  float prev_v = INFINITY;
  int64_t prev_e = -1;
  for (int64_t j = 0; j < k; j++) {
    float best_v = -INFINITY;
    int64_t best_e = -1;
    for (int64_t e = 0; e < E; e++) {
      float x = v[e] + (b ? b[e] : 0.0f);
      if (x != x) x = -INFINITY;
      int below = x < prev_v || (x == prev_v && e > prev_e);
      if (below && (best_e < 0 || x > best_v)) best_v = x, best_e = e;
    }
    idx[j] = (int32_t)best_e;
    prev_v = best_v, prev_e = best_e;
  }
}

gaaw_status_t host_moe_topk(gaaw_context_t ctx, gaaw_cten scores, gaaw_cten bias, int renormalize, gaaw_ten idx,
                            gaaw_ten weights)
{
  host_stage st;
  host_stage_init(&st, ctx);
  const float *s = host_in(&st, scores), *b = host_in(&st, bias);
  int32_t *ix = host_raw(&st, idx);
  float *w = host_out(&st, weights);
  const int64_t T = scores->shape[0], E = scores->shape[1], k = idx->shape[1];
  if (st.status == GAAW_SUCCESS)
#pragma omp parallel for if (T * E * k > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t t = 0; t < T; t++) {
      topk_row(E, k, s + t * E, b, ix + t * k);
      float sum = 0;
      for (int64_t j = 0; j < k; j++) sum += w[t * k + j] = s[t * E + ix[t * k + j]];
      if (renormalize)
        for (int64_t j = 0; j < k; j++) w[t * k + j] = sum > 0 ? w[t * k + j] / sum : 0.0f;
    }
  return host_stage_end(&st);
}

gaaw_status_t host_moe_topk_backward(gaaw_context_t ctx, gaaw_cten scores, gaaw_cten idx, gaaw_cten weights,
                                     gaaw_cten dweights, int renormalize, gaaw_ten dscores)
{
  host_stage st;
  host_stage_init(&st, ctx);
  const float *s = host_in(&st, scores), *w = host_in(&st, weights), *dw = host_in(&st, dweights);
  const int32_t *ix = host_raw(&st, idx);
  float *ds = host_out(&st, dscores);
  const int64_t T = scores->shape[0], E = scores->shape[1], k = idx->shape[1];
  if (st.status == GAAW_SUCCESS)
#pragma omp parallel for if (T * E > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t t = 0; t < T; t++) {
      float sum = 0, dot = 0;
      for (int64_t j = 0; j < k; j++) {
        int64_t e = ix[t * k + j];
        sum += e >= 0 && e < E ? s[t * E + e] : 0.0f;
        dot += dw[t * k + j] * w[t * k + j];
      }
      for (int64_t e = 0; e < E; e++) ds[t * E + e] = 0;
      for (int64_t j = 0; j < k; j++) {
        int64_t e = ix[t * k + j];
        if (e < 0 || e >= E) continue;
        float g = dw[t * k + j];
        ds[t * E + e] = renormalize ? (sum > 0 ? (g - dot) / sum : 0.0f) : g;
      }
    }
  return host_stage_end(&st);
}

/* ---------------------------------------------------------------- permutations */

gaaw_status_t host_moe_permute(gaaw_context_t ctx, gaaw_cten x, gaaw_cten src, gaaw_ten out)
{
  host_stage st;
  host_stage_init(&st, ctx);
  const float *px = host_in(&st, x);
  const int32_t *sr = host_raw(&st, src);
  float *po = host_out(&st, out);
  const int64_t T = x->shape[0], C = x->shape[1], P = out->shape[0];
  if (st.status == GAAW_SUCCESS)
#pragma omp parallel for if (P * C > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t p = 0; p < P; p++) {
      int64_t t = sr[p];
      for (int64_t c = 0; c < C; c++) po[p * C + c] = t >= 0 && t < T ? px[t * C + c] : 0.0f;
    }
  return host_stage_end(&st);
}

/* out[t] = sum over j of w[t][j] (w NULL: 1) y[pos[t][j]], pos in [0, P): the
 * weighted combine, and with weights 1 the permutation's backward. */
static gaaw_status_t combine(gaaw_context_t ctx, gaaw_cten y, gaaw_cten pos, gaaw_cten weights, gaaw_ten out)
{
  host_stage st;
  host_stage_init(&st, ctx);
  const float *py = host_in(&st, y), *w = host_in(&st, weights);
  const int32_t *ps = host_raw(&st, pos);
  float *po = host_out(&st, out);
  const int64_t T = out->shape[0], C = out->shape[1], P = y->shape[0], k = pos->shape[1];
  if (st.status == GAAW_SUCCESS)
#pragma omp parallel for if (T * C > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t t = 0; t < T; t++)
      for (int64_t c = 0; c < C; c++) {
        float acc = 0;
        for (int64_t j = 0; j < k; j++) {
          int64_t p = ps[t * k + j];
          if (p >= 0 && p < P) acc += (w ? w[t * k + j] : 1.0f) * py[p * C + c];
        }
        po[t * C + c] = acc;
      }
  return host_stage_end(&st);
}

gaaw_status_t host_moe_permute_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten pos, gaaw_ten dx)
{
  return combine(ctx, dout, pos, NULL, dx);
}

gaaw_status_t host_moe_unpermute(gaaw_context_t ctx, gaaw_cten y, gaaw_cten pos, gaaw_cten weights, gaaw_ten out)
{
  return combine(ctx, y, pos, weights, out);
}

gaaw_status_t host_moe_unpermute_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten y, gaaw_cten pos,
                                          gaaw_cten weights, gaaw_ten dy, gaaw_ten dweights)
{
  host_stage st;
  host_stage_init(&st, ctx);
  const float *d = host_in(&st, dout), *py = host_in(&st, y), *w = host_in(&st, weights);
  const int32_t *ps = host_raw(&st, pos);
  float *pdy = host_inout(&st, dy), *dw = host_out(&st, dweights);
  const int64_t T = dout->shape[0], C = dout->shape[1], P = y->shape[0], k = pos->shape[1];
  if (st.status == GAAW_SUCCESS)
#pragma omp parallel for if (T * C * k > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t t = 0; t < T; t++)
      for (int64_t j = 0; j < k; j++) {
        int64_t p = ps[t * k + j];
        float dot = 0;
        if (p >= 0 && p < P)
          for (int64_t c = 0; c < C; c++) {
            dot += d[t * C + c] * py[p * C + c];
            pdy[p * C + c] = w[t * k + j] * d[t * C + c];
          }
        dw[t * k + j] = dot;
      }
  return host_stage_end(&st);
}
