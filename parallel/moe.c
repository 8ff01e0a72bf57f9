/* The mixture-of-experts MLP on one rank (parallel/moe.h). The routing maps are
 * built on the host from the chosen experts (a counting sort: by expert, then
 * token, then choice), which the per-expert GEMMs need as row ranges anyway. */
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/error.h"
#include "parallel/linear.h"
#include "parallel/moe.h"

#define SHAPE2(a, b) 2, (int64_t[]){(a), (b)}

static gaaw_status_t alloc(gaaw_context_t ctx, gaaw_dtype_t dt, int ndim, const int64_t *shape, gaaw_tensor_t *t)
{
  return gaaw_tensor_alloc(ctx, dt, ndim, shape, GAAW_MEM_ACTIVATIONS, t);
}

/* Rows [lo, lo + n) of the 2-D tensor t. */
static gaaw_tensor_t rows(const gaaw_tensor_t *t, int64_t lo, int64_t n)
{
  gaaw_tensor_t v = *t;
  v.offset += (size_t)(lo * t->shape[1]) * gaaw_dtype_size(t->dtype);
  v.shape[0] = n;
  return v;
}

/* Matrix e of the 3-D tensor t: (shape[1], shape[2]). */
static gaaw_tensor_t matrix(const gaaw_tensor_t *t, int64_t e)
{
  gaaw_tensor_t v = *t;
  v.offset += (size_t)(e * t->shape[1] * t->shape[2]) * gaaw_dtype_size(t->dtype);
  v.ndim = 2;
  v.shape[0] = t->shape[1];
  v.shape[1] = t->shape[2];
  return v;
}

/* idx (T, k) on the device -> counts, offsets, and the maps src (P) and pos (T, k)
 * uploaded into s. */
static gaaw_status_t route(gaaw_context_t ctx, int E, gaaw_moe_saved *s)
{
  const int64_t P = s->assignments, k = s->idx.shape[1];
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)(2 * P + 1)), *map = idx + P;
  s->counts = calloc((size_t)(2 * E), sizeof(int64_t));
  if (!idx || !s->counts) {
    free(idx);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold the routing of %lld assignments", (long long)P);
  }
  s->offsets = s->counts + E;
  gaaw_status_t st = gaaw_buffer_read(ctx, s->idx.buf, s->idx.offset, idx, sizeof(int32_t) * (size_t)P);
  for (int64_t i = 0; st == GAAW_SUCCESS && i < P; i++) {
    if (idx[i] < 0 || idx[i] >= E)
      st = gaaw_error_raise(ctx, GAAW_ERR_INTERNAL, __FILE__, __LINE__, __func__,
                            "top-k chose expert %d of %d for assignment %lld", idx[i], E, (long long)i);
    else
      s->counts[idx[i]]++;
  }
  for (int e = 1; e < E; e++) s->offsets[e] = s->offsets[e - 1] + s->counts[e - 1];
  int64_t *next = calloc((size_t)E, sizeof(int64_t));
  if (st == GAAW_SUCCESS && !next) st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                          "cannot hold %d expert cursors", E);
  int32_t *src = malloc(sizeof(int32_t) * (size_t)(P + 1));
  if (st == GAAW_SUCCESS && !src)
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot hold %lld rows' tokens",
                          (long long)P);
  for (int64_t i = 0; st == GAAW_SUCCESS && i < P; i++) { /* in order of i: stable */
    int64_t p = s->offsets[idx[i]] + next[idx[i]]++;
    map[i] = (int32_t)p;
    src[p] = (int32_t)(i / k);
  }
  if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, s->pos.buf, s->pos.offset, map, sizeof(int32_t) * (size_t)P);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, s->src.buf, s->src.offset, src, sizeof(int32_t) * (size_t)P);
  free(src);
  free(next);
  free(idx);
  return st;
}

/* The group's aux losses from the scores, lse and counts. */
static gaaw_status_t aux_losses(gaaw_context_t ctx, const gaaw_moe_spec *spec, gaaw_moe_saved *s,
                                gaaw_moe_losses *out)
{
  const int E = spec->experts;
  const double T = (double)s->scores.shape[0];
  gaaw_tensor_t colsum, sq;
  float sums[E + 1], zsum = 0;
  GAAW_CHECK(alloc(ctx, GAAW_F32, 1, (int64_t[]){E}, &colsum));
  gaaw_status_t st = alloc(ctx, GAAW_F32, 1, (int64_t[]){1}, &sq);
  if (st == GAAW_SUCCESS) st = gaaw_fill(ctx, &colsum, 0.0f);
  if (st == GAAW_SUCCESS) st = gaaw_bias_backward(ctx, &s->scores, &colsum);
  if (st == GAAW_SUCCESS) st = gaaw_sum_squares(ctx, &s->lse, &sq);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, colsum.buf, colsum.offset, sums, sizeof(float) * (size_t)E);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, sq.buf, sq.offset, &zsum, sizeof zsum);
  double aux = 0;
  for (int e = 0; e < E; e++) aux += (double)s->counts[e] / (double)s->assignments * sums[e] / T;
  out->aux = spec->aux_coef * E * aux;
  out->z = spec->z_coef * zsum / T;
  gaaw_buffer_free(ctx, &colsum.buf);
  gaaw_buffer_free(ctx, &sq.buf);
  return st;
}

/* Per expert: u = xp w13^T, a = swiglu(u), yp = a w2^T over its rows. */
static gaaw_status_t experts_forward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                                     gaaw_moe_saved *s)
{
  for (int e = 0; e < spec->experts; e++) {
    int64_t lo = s->offsets[e], n = s->counts[e];
    if (n == 0) continue;
    gaaw_tensor_t xp = rows(&s->xp, lo, n), u = rows(&s->u, lo, n), yp = rows(&s->yp, lo, n), a = rows(&s->a, lo, n);
    gaaw_tensor_t w13 = matrix(w->w13, e), w2 = matrix(w->w2, e);
    GAAW_CHECK(gaaw_linear_forward(ctx, &xp, &w13, NULL, &u));
    GAAW_CHECK(gaaw_swiglu_forward(ctx, &u, &a));
    GAAW_CHECK(gaaw_linear_forward(ctx, &a, &w2, NULL, &yp));
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_forward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                               const gaaw_tensor_t *x, gaaw_tensor_t *y, gaaw_moe_saved *s, gaaw_moe_losses *losses)
{
  memset(s, 0, sizeof *s);
  const int64_t T = x->shape[0], C = x->shape[1], E = spec->experts, k = spec->top_k, F2 = w->w13->shape[1];
  GAAW_ARG_CHECK(ctx, x->dtype == GAAW_F32, "the MoE layer computes in f32 only for now, got %s",
                 gaaw_dtype_name(x->dtype));
  GAAW_ARG_CHECK(ctx, k >= 1 && k <= E, "top_k %lld must be in 1..experts (%lld)", (long long)k, (long long)E);
  const gaaw_tensor_t *r = w->router, *a = w->w13, *b = w->w2;
  GAAW_ARG_CHECK(ctx, r->ndim == 2 && r->shape[0] == E && r->shape[1] == C && a->ndim == 3 && a->shape[0] == E &&
                        a->shape[2] == C && F2 % 2 == 0 && b->ndim == 3 && b->shape[0] == E && b->shape[1] == C &&
                        b->shape[2] == F2 / 2,
                 "MoE weights of %lld experts on width %lld: router, w13 and w2 must be (E, C), (E, 2F, C) and "
                 "(E, C, F); got %lld-d, %lld-d and %lld-d tensors",
                 (long long)E, (long long)C, (long long)r->ndim, (long long)a->ndim, (long long)b->ndim);
  s->assignments = T * k;
  gaaw_status_t st = GAAW_SUCCESS;
  gaaw_tensor_t *f32s[] = {&s->logits, &s->scores};
  for (int i = 0; i < 2 && st == GAAW_SUCCESS; i++) st = alloc(ctx, GAAW_F32, SHAPE2(T, E), f32s[i]);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, 1, (int64_t[]){T}, &s->lse);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_I32, SHAPE2(T, k), &s->idx);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, k), &s->weights);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_I32, SHAPE2(T, k), &s->pos);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_I32, 1, (int64_t[]){T * k}, &s->src);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T * k, C), &s->xp);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T * k, F2), &s->u);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T * k, F2 / 2), &s->a);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T * k, C), &s->yp);
  if (st == GAAW_SUCCESS) st = gaaw_linear_forward(ctx, x, w->router, NULL, &s->logits);
  if (st == GAAW_SUCCESS) st = gaaw_moe_router_forward(ctx, &s->logits, spec->sigmoid, &s->scores, &s->lse);
  if (st == GAAW_SUCCESS) st = gaaw_moe_topk_forward(ctx, &s->scores, NULL, spec->renormalize, &s->idx, &s->weights);
  if (st == GAAW_SUCCESS) st = route(ctx, (int)E, s);
  if (st == GAAW_SUCCESS) st = gaaw_moe_permute(ctx, x, &s->src, &s->xp);
  if (st == GAAW_SUCCESS) st = experts_forward(ctx, spec, w, s);
  if (st == GAAW_SUCCESS) st = gaaw_moe_unpermute(ctx, &s->yp, &s->pos, &s->weights, y);
  if (st == GAAW_SUCCESS) st = aux_losses(ctx, spec, s, losses);
  if (st != GAAW_SUCCESS) {
    gaaw_moe_release(ctx, s);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

/* Per expert, over its rows: da = dyp w2, dw2 += dyp^T a; du = swiglu'(da); dxp =
 * du w13, dw13 += du^T xp (da, du, dxp: (P, .) scratch). */
static gaaw_status_t experts_backward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                                      gaaw_moe_saved *s, const gaaw_tensor_t *dyp, gaaw_tensor_t *da,
                                      gaaw_tensor_t *du, gaaw_tensor_t *dxp)
{
  GAAW_CHECK(gaaw_fill(ctx, du, 0.0f)); /* swiglu's backward adds */
  for (int e = 0; e < spec->experts; e++) {
    int64_t lo = s->offsets[e], n = s->counts[e];
    if (n == 0) continue;
    gaaw_tensor_t g = rows(dyp, lo, n), ge = rows(da, lo, n), gu = rows(du, lo, n), gx = rows(dxp, lo, n);
    gaaw_tensor_t a = rows(&s->a, lo, n), u = rows(&s->u, lo, n), xp = rows(&s->xp, lo, n);
    gaaw_tensor_t w2 = matrix(w->w2, e), w13 = matrix(w->w13, e), dw2 = matrix(w->d_w2, e);
    gaaw_tensor_t dw13 = matrix(w->d_w13, e);
    GAAW_CHECK(gaaw_linear_backward_input(ctx, &g, &w2, &ge));
    GAAW_CHECK(gaaw_linear_backward_weight(ctx, &g, &a, &dw2, NULL));
    GAAW_CHECK(gaaw_swiglu_backward(ctx, &ge, &u, &gu));
    GAAW_CHECK(gaaw_linear_backward_input(ctx, &gu, &w13, &gx));
    GAAW_CHECK(gaaw_linear_backward_weight(ctx, &gu, &xp, &dw13, NULL));
  }
  return GAAW_SUCCESS;
}

/* dscores += the load-balancing loss's gradient: aux_scale coef E f_i / T for every
 * token's score of expert i. */
static gaaw_status_t aux_gradient(gaaw_context_t ctx, const gaaw_moe_spec *spec, gaaw_moe_saved *s, float aux_scale,
                                  gaaw_tensor_t *dscores)
{
  const int E = spec->experts;
  const double T = (double)s->scores.shape[0];
  float g[E + 1];
  for (int e = 0; e < E; e++)
    g[e] = (float)(aux_scale * spec->aux_coef * E * ((double)s->counts[e] / (double)s->assignments) / T);
  gaaw_tensor_t gt;
  GAAW_CHECK(alloc(ctx, GAAW_F32, 1, (int64_t[]){E}, &gt));
  gaaw_status_t st = gaaw_buffer_write(ctx, gt.buf, gt.offset, g, sizeof(float) * (size_t)E);
  if (st == GAAW_SUCCESS) st = gaaw_bias_add(ctx, dscores, &gt);
  gaaw_buffer_free(ctx, &gt.buf);
  return st;
}

gaaw_status_t gaaw_moe_backward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                                gaaw_moe_saved *s, const gaaw_tensor_t *x, const gaaw_tensor_t *dy, float aux_scale,
                                gaaw_tensor_t *dx)
{
  const int64_t T = x->shape[0], C = x->shape[1], E = spec->experts, k = spec->top_k, P = s->assignments;
  const int64_t F2 = w->w13->shape[1];
  gaaw_tensor_t dyp = {0}, dwt = {0}, da = {0}, du = {0}, dxp = {0}, ds = {0}, dl = {0}, dxr = {0};
  gaaw_status_t st = alloc(ctx, x->dtype, SHAPE2(P, C), &dyp);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, k), &dwt);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(P, F2 / 2), &da);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(P, F2), &du);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(P, C), &dxp);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, E), &ds);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, E), &dl);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T, C), &dxr);
  if (st == GAAW_SUCCESS) st = gaaw_moe_unpermute_backward(ctx, dy, &s->yp, &s->pos, &s->weights, &dyp, &dwt);
  if (st == GAAW_SUCCESS) st = experts_backward(ctx, spec, w, s, &dyp, &da, &du, &dxp);
  if (st == GAAW_SUCCESS) st = gaaw_moe_permute_backward(ctx, &dxp, &s->pos, dx);
  if (st == GAAW_SUCCESS)
    st = gaaw_moe_topk_backward(ctx, &s->scores, &s->idx, &s->weights, &dwt, spec->renormalize, &ds);
  if (st == GAAW_SUCCESS) st = aux_gradient(ctx, spec, s, aux_scale, &ds);
  float zscale = (float)(aux_scale * 2.0 * spec->z_coef / (double)T);
  if (st == GAAW_SUCCESS)
    st = gaaw_moe_router_backward(ctx, &s->logits, &s->scores, &s->lse, &ds, spec->sigmoid, zscale, &dl);
  if (st == GAAW_SUCCESS) st = gaaw_linear_backward_input(ctx, &dl, w->router, &dxr);
  if (st == GAAW_SUCCESS) st = gaaw_add(ctx, dx, &dxr, dx);
  if (st == GAAW_SUCCESS) st = gaaw_linear_backward_weight(ctx, &dl, x, w->d_router, NULL);
  gaaw_tensor_t *tmp[] = {&dyp, &dwt, &da, &du, &dxp, &ds, &dl, &dxr};
  for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) gaaw_buffer_free(ctx, &tmp[i]->buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

void gaaw_moe_release(gaaw_context_t ctx, gaaw_moe_saved *s)
{
  gaaw_tensor_t *all[] = {&s->logits, &s->scores, &s->lse, &s->idx, &s->weights, &s->src,
                          &s->pos,    &s->xp,     &s->u,   &s->a,   &s->yp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]->buf) gaaw_buffer_free(ctx, &all[i]->buf);
  free(s->counts);
  s->counts = s->offsets = NULL;
}
