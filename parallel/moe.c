/* The mixture-of-experts MLP on one rank (parallel/moe.h). The routing maps are
 * built on the host from the chosen experts (a counting sort: by expert, then
 * token, then choice), which the per-expert GEMMs need as row ranges anyway. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/error.h"
#include "parallel/linear.h"
#include "parallel/moe.h"
#include "parallel/moe_dispatch.h"

#define SHAPE2(a, b) 2, (int64_t[]){(a), (b)}

static gaaw_status_t alloc(gaaw_context_t ctx, gaaw_dtype_t dt, int ndim, const int64_t *shape, gaaw_tensor_t *t)
{
  return gaaw_tensor_alloc(ctx, dt, ndim, shape, GAAW_MEM_ACTIVATIONS, t);
}

/* Kept tensor `which`, allocated where s keeps them. */
static gaaw_status_t keep(gaaw_context_t ctx, gaaw_moe_saved *s, int which, gaaw_dtype_t dt, int ndim,
                          const int64_t *shape)
{
  if (!s->keep) return alloc(ctx, dt, ndim, shape, &s->kept[which]);
  gaaw_tensor_t *t;
  return s->keep(s->user, which, dt, ndim, shape, &t);
}

/* Rows [lo, lo + n) of the 2-D tensor t. */
static gaaw_tensor_t rows(const gaaw_tensor_t *t, int64_t lo, int64_t n)
{
  gaaw_tensor_t v = *t;
  v.offset += (size_t)(lo * t->shape[1]) * gaaw_dtype_size(t->dtype);
  v.shape[0] = n;
  return v;
}

/* Expert e's matrix of t, (E, r, c) or (E r, c): (r, c). */
static gaaw_tensor_t matrix(const gaaw_tensor_t *t, int64_t E, int64_t e)
{
  int64_t r = t->ndim == 3 ? t->shape[1] : t->shape[0] / E, c = t->shape[t->ndim - 1];
  gaaw_tensor_t v = *t;
  v.offset += (size_t)(e * r * c) * gaaw_dtype_size(t->dtype);
  v.ndim = 2;
  v.shape[0] = r;
  v.shape[1] = c;
  return v;
}

/* counts (the kept rows) and offsets per expert from the chosen experts idx (P)
 * and, when not NULL, which assignments are kept (kept[i]); routed: every
 * assignment. */
static gaaw_status_t set_counts(gaaw_context_t ctx, int E, gaaw_moe_saved *s, const int32_t *idx,
                                const uint8_t *kept)
{
  free(s->counts);
  s->counts = calloc((size_t)(3 * E), sizeof(int64_t));
  if (!s->counts) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold the counts of %d experts", E);
  s->offsets = s->counts + E, s->routed = s->counts + 2 * E;
  for (int64_t i = 0; i < s->assignments; i++) {
    if (idx[i] < 0 || idx[i] >= E)
      GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "top-k chose expert %d of %d for assignment %lld", idx[i], E, (long long)i);
    s->routed[idx[i]]++;
    if (!kept || kept[i]) s->counts[idx[i]]++;
  }
  for (int e = 1; e < E; e++) s->offsets[e] = s->offsets[e - 1] + s->counts[e - 1];
  return GAAW_SUCCESS;
}

/* Reads n i32 or f32 values of t into host. */
static gaaw_status_t read_host(gaaw_context_t ctx, const gaaw_tensor_t *t, void *host, int64_t n)
{
  return gaaw_buffer_read(ctx, t->buf, t->offset, host, 4 * (size_t)n);
}

/* The counts again in backward, from the kept idx and pos (-1: dropped). */
static gaaw_status_t recount(gaaw_context_t ctx, int E, gaaw_moe_saved *s)
{
  const gaaw_tensor_t *it = &s->kept[GAAW_MOE_IDX];
  s->assignments = it->shape[0] * it->shape[1];
  const int64_t P = s->assignments;
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)(2 * P + 1)), *pos = idx ? idx + P : NULL;
  uint8_t *kept = malloc((size_t)P + 1);
  gaaw_status_t st = idx && kept ? GAAW_SUCCESS
                                 : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                    "cannot hold the routing of %lld assignments", (long long)P);
  if (st == GAAW_SUCCESS) st = read_host(ctx, it, idx, P);
  if (st == GAAW_SUCCESS) st = read_host(ctx, &s->kept[GAAW_MOE_POS], pos, P);
  for (int64_t i = 0; st == GAAW_SUCCESS && i < P; i++) kept[i] = pos[i] >= 0;
  if (st == GAAW_SUCCESS) st = set_counts(ctx, E, s, idx, kept);
  free(kept);
  free(idx);
  return st;
}

/* ---- capacity: which assignments each expert keeps, decided over the group */

typedef struct {
  float w;
  int64_t t;
} ranked;

/* By weight, largest first (nan last), then by token. */
static int by_weight(const void *pa, const void *pb)
{
  const ranked *a = pa, *b = pb;
  int an = isnan(a->w), bn = isnan(b->w);
  if (an != bn) return an - bn;
  if (!an && a->w != b->w) return a->w > b->w ? -1 : 1;
  return (a->t > b->t) - (a->t < b->t);
}

/* The group's chosen experts and weights (T_group, k), this rank's tokens from
 * *first on, and T_group: gathered over the group (idx travels as f32, exact),
 * every rank's tokens in its group rank's order. Fills *gidx and *gw (malloc'd). */
static gaaw_status_t gather_choices(gaaw_context_t ctx, gaaw_comm_t group, const int32_t *idx, const float *w, int64_t T,
                                    int64_t k, int32_t **gidx, float **gw, int64_t *first, int64_t *Tg)
{
  int n = 1, me = 0;
  if (group) GAAW_CHECK(gaaw_comm_size(group, &n));
  if (group) GAAW_CHECK(gaaw_comm_rank(group, &me));
  float sizes[n], mine = (float)T;
  gaaw_tensor_t one = {0}, all = {0}, send = {0}, recv = {0};
  gaaw_status_t st = GAAW_SUCCESS;
  if (group) {
    st = gaaw_tensor_alloc(ctx, GAAW_F32, 1, (int64_t[]){1}, GAAW_MEM_COMMUNICATION, &one);
    if (st == GAAW_SUCCESS) st = gaaw_tensor_alloc(ctx, GAAW_F32, 1, (int64_t[]){n}, GAAW_MEM_COMMUNICATION, &all);
    if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, one.buf, one.offset, &mine, sizeof mine);
    if (st == GAAW_SUCCESS) st = gaaw_comm_allgather(group, &one, &all);
    if (st == GAAW_SUCCESS) st = read_host(ctx, &all, sizes, n);
  } else
    sizes[0] = mine;
  int64_t most = 0, total = 0;
  for (int r = 0; r < n; r++) most = (int64_t)sizes[r] > most ? (int64_t)sizes[r] : most;
  for (int r = 0; r < n; r++) total += (int64_t)sizes[r];
  *first = 0;
  for (int r = 0; r < me; r++) *first += (int64_t)sizes[r];
  *Tg = total;
  const int64_t row = 2 * most * k; /* a rank's idx then weights, padded to the largest */
  float *pack = malloc(sizeof(float) * (size_t)(row * (n + 1) + 1)), *got = pack ? pack + row : NULL;
  *gidx = malloc(sizeof(int32_t) * (size_t)(total * k + 1));
  *gw = malloc(sizeof(float) * (size_t)(total * k + 1));
  if (st == GAAW_SUCCESS && (!pack || !*gidx || !*gw))
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                          "cannot hold the choices of the group's %lld tokens", (long long)total);
  for (int64_t i = 0; st == GAAW_SUCCESS && i < row; i++)
    pack[i] = i < T * k ? (float)idx[i] : i >= most * k && i - most * k < T * k ? w[i - most * k] : 0.0f;
  if (st == GAAW_SUCCESS && group) {
    st = gaaw_tensor_alloc(ctx, GAAW_F32, 1, &row, GAAW_MEM_COMMUNICATION, &send);
    if (st == GAAW_SUCCESS) st = gaaw_tensor_alloc(ctx, GAAW_F32, 1, (int64_t[]){row * n}, GAAW_MEM_COMMUNICATION, &recv);
    if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, send.buf, send.offset, pack, sizeof(float) * (size_t)row);
    if (st == GAAW_SUCCESS) st = gaaw_comm_allgather(group, &send, &recv);
    if (st == GAAW_SUCCESS) st = read_host(ctx, &recv, got, row * n);
  } else if (st == GAAW_SUCCESS)
    memcpy(got, pack, sizeof(float) * (size_t)row);
  for (int r = 0, at = 0; st == GAAW_SUCCESS && r < n; at += (int)sizes[r] * (int)k, r++)
    for (int64_t i = 0; i < (int64_t)sizes[r] * k; i++) {
      (*gidx)[at + i] = (int32_t)got[r * row + i];
      (*gw)[at + i] = got[r * row + most * k + i];
    }
  gaaw_tensor_t *tmp[] = {&one, &all, &send, &recv};
  for (int i = 0; i < 4; i++)
    if (tmp[i]->buf) gaaw_buffer_free(ctx, &tmp[i]->buf);
  free(pack);
  return st;
}

/* kept[i] for this rank's assignments under the capacity, and the group's dropped
 * count: every rank ranks the whole group's assignments alike. */
static gaaw_status_t choose_kept(gaaw_context_t ctx, const gaaw_moe_spec *spec, gaaw_moe_saved *s, const int32_t *idx,
                                 uint8_t *kept, int64_t *dropped)
{
  const int64_t T = s->kept[GAAW_MOE_IDX].shape[0], k = spec->top_k, E = spec->experts;
  float *w = malloc(sizeof(float) * (size_t)(T * k + 1)), *gw = NULL;
  int32_t *gidx = NULL;
  int64_t first = 0, Tg = 0, *used = calloc((size_t)E, sizeof(int64_t));
  gaaw_status_t st = w && used ? GAAW_SUCCESS
                               : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                  "cannot hold the weights of %lld tokens", (long long)T);
  if (st == GAAW_SUCCESS) st = read_host(ctx, &s->kept[GAAW_MOE_WEIGHTS], w, T * k);
  if (st == GAAW_SUCCESS && s->group[1])
    st = gaaw_error_raise(ctx, GAAW_ERR_UNSUPPORTED, __FILE__, __LINE__, __func__,
                          "capacity over a token group of two levels (tp, then dp x cp) is not built yet");
  if (st == GAAW_SUCCESS) st = gather_choices(ctx, s->group[0], idx, w, T, k, &gidx, &gw, &first, &Tg);
  ranked *order = st == GAAW_SUCCESS ? malloc(sizeof(ranked) * (size_t)(Tg + 1)) : NULL;
  if (st == GAAW_SUCCESS && !order)
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot rank %lld tokens",
                          (long long)Tg);
  const int64_t capacity = (int64_t)ceil((double)k * (double)Tg * spec->capacity_factor / (double)E);
  *dropped = 0;
  for (int64_t j = 0; st == GAAW_SUCCESS && j < k; j++) { /* first choices before second ones */
    for (int64_t t = 0; t < Tg; t++) order[t] = (ranked){gw[t * k + j], t};
    if (!spec->drop_position) qsort(order, (size_t)Tg, sizeof *order, by_weight);
    for (int64_t i = 0; i < Tg; i++) {
      int64_t t = order[i].t;
      int32_t e = gidx[t * k + j];
      int keep = e >= 0 && e < E && used[e] < capacity;
      if (keep) used[e]++;
      *dropped += !keep;
      if (t >= first && t < first + T) kept[(t - first) * k + j] = (uint8_t)keep;
    }
  }
  free(order);
  free(gidx);
  free(gw);
  free(used);
  free(w);
  return st;
}

/* The maps src (P) and pos (T, k) from the chosen experts, uploaded into s: the
 * kept rows sorted by expert, then token, then choice; src -1 past them, pos -1
 * for a dropped assignment. *dropped: the group's dropped assignments. */
static gaaw_status_t route(gaaw_context_t ctx, const gaaw_moe_spec *spec, gaaw_moe_saved *s, int64_t *dropped)
{
  const int E = spec->experts;
  const gaaw_tensor_t *it = &s->kept[GAAW_MOE_IDX];
  const int64_t P = it->shape[0] * it->shape[1], k = it->shape[1];
  s->assignments = P;
  *dropped = 0;
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)(3 * P + 1)), *map = idx ? idx + P : NULL, *src = idx ? map + P : NULL;
  uint8_t *kept = malloc((size_t)P + 1);
  int64_t *next = calloc((size_t)E, sizeof(int64_t));
  gaaw_status_t st = idx && kept && next ? GAAW_SUCCESS
                                         : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                            "cannot hold the maps of %lld rows", (long long)P);
  if (st == GAAW_SUCCESS) st = read_host(ctx, it, idx, P);
  if (st == GAAW_SUCCESS) memset(kept, 1, (size_t)P);
  if (st == GAAW_SUCCESS && spec->capacity_factor > 0) st = choose_kept(ctx, spec, s, idx, kept, dropped);
  if (st == GAAW_SUCCESS) st = set_counts(ctx, E, s, idx, kept);
  int64_t rows = 0;
  for (int64_t i = 0; st == GAAW_SUCCESS && i < P; i++) { /* in order of i: stable */
    if (!kept[i]) {
      map[i] = -1;
      continue;
    }
    int64_t p = s->offsets[idx[i]] + next[idx[i]]++;
    map[i] = (int32_t)p;
    src[p] = (int32_t)(i / k);
    rows++;
  }
  for (int64_t p = rows; st == GAAW_SUCCESS && p < P; p++) src[p] = -1;
  const gaaw_tensor_t *pos = &s->kept[GAAW_MOE_POS], *sr = &s->kept[GAAW_MOE_SRC];
  if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, pos->buf, pos->offset, map, sizeof(int32_t) * (size_t)P);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, sr->buf, sr->offset, src, sizeof(int32_t) * (size_t)P);
  free(next);
  free(kept);
  free(idx);
  return st;
}

/* The smallest gap between the k-th and (k+1)-th score of a row (+inf at k = E). */
static gaaw_status_t smallest_margin(gaaw_context_t ctx, const gaaw_tensor_t *scores, int k, double *margin)
{
  const int64_t T = scores->shape[0], E = scores->shape[1];
  *margin = INFINITY;
  if (k >= E) return GAAW_SUCCESS;
  float *s = malloc(sizeof(float) * (size_t)(T * E));
  if (!s) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot read %lld router scores", (long long)(T * E));
  gaaw_status_t st = gaaw_buffer_read(ctx, scores->buf, scores->offset, s, sizeof(float) * (size_t)(T * E));
  for (int64_t t = 0; st == GAAW_SUCCESS && t < T; t++) {
    float *row = s + t * E;
    for (int j = 0; j <= k; j++) /* a partial selection sort: the k + 1 largest first */
      for (int64_t e = j + 1; e < E; e++)
        if (row[e] > row[j]) {
          float tmp = row[j];
          row[j] = row[e];
          row[e] = tmp;
        }
    *margin = fmin(*margin, (double)row[k - 1] - (double)row[k]);
  }
  free(s);
  return st;
}

/* The group's statistics: per expert its assignments and score sum, the sum of
 * lse^2 and the tokens, summed over the group (in f32: counts are exact below
 * 2^24 assignments). */
enum { STAT_COUNTS, STAT_SCORES };
static gaaw_status_t group_statistics(gaaw_context_t ctx, int E, gaaw_moe_saved *s, double *stats)
{
  gaaw_tensor_t colsum = {0}, sq = {0}, all = {0};
  const int64_t n = 2 * E + 2;
  float v[n];
  gaaw_status_t st = alloc(ctx, GAAW_F32, 1, (int64_t[]){E}, &colsum);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, 1, (int64_t[]){1}, &sq);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, 1, &n, &all);
  if (st == GAAW_SUCCESS) st = gaaw_fill(ctx, &colsum, 0.0f);
  if (st == GAAW_SUCCESS) st = gaaw_bias_backward(ctx, &s->kept[GAAW_MOE_SCORES], &colsum);
  if (st == GAAW_SUCCESS) st = gaaw_sum_squares(ctx, &s->kept[GAAW_MOE_LSE], &sq);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, colsum.buf, colsum.offset, v + E, sizeof(float) * (size_t)E);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, sq.buf, sq.offset, v + 2 * E, sizeof(float));
  for (int e = 0; e < E; e++) v[e] = (float)s->routed[e];
  v[2 * E + 1] = (float)s->kept[GAAW_MOE_SCORES].shape[0];
  if (st == GAAW_SUCCESS && s->group[0]) st = gaaw_buffer_write(ctx, all.buf, all.offset, v, sizeof(float) * (size_t)n);
  for (int g = 0; g < 2 && st == GAAW_SUCCESS; g++)
    if (s->group[g]) st = gaaw_comm_allreduce(s->group[g], &all, &all, GAAW_SUM);
  if (st == GAAW_SUCCESS && s->group[0]) st = gaaw_buffer_read(ctx, all.buf, all.offset, v, sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) stats[i] = v[i];
  gaaw_tensor_t *tmp[] = {&colsum, &sq, &all};
  for (int i = 0; i < 3; i++)
    if (tmp[i]->buf) gaaw_buffer_free(ctx, &tmp[i]->buf);
  return st;
}

/* The group's aux losses, and the coefficients of their gradients into COEFS. */
static gaaw_status_t aux_losses(gaaw_context_t ctx, const gaaw_moe_spec *spec, gaaw_moe_saved *s,
                                gaaw_moe_losses *out)
{
  const int E = spec->experts;
  double stats[2 * E + 2];
  GAAW_CHECK(group_statistics(ctx, E, s, stats));
  const double T = stats[2 * E + 1], P = T * spec->top_k;
  double aux = 0;
  float coefs[E + 1];
  for (int e = 0; e < E; e++) {
    double f = stats[STAT_COUNTS * E + e] / P;
    aux += f * stats[STAT_SCORES * E + e] / T;
    coefs[e] = (float)(spec->aux_coef * E * f / T);
    if (out->counts) out->counts[e] = (int64_t)stats[e];
  }
  coefs[E] = (float)(2.0 * spec->z_coef / T);
  out->aux = spec->aux_coef * E * aux;
  out->z = spec->z_coef * stats[2 * E] / T;
  out->tokens = (int64_t)T;
  const gaaw_tensor_t *c = &s->kept[GAAW_MOE_COEFS];
  GAAW_CHECK(gaaw_buffer_write(ctx, c->buf, c->offset, coefs, sizeof(float) * (size_t)(E + 1)));
  return GAAW_SUCCESS;
}

/* Which rows of the experts' tensors belong to which of the n experts here. */
typedef struct {
  int n;
  const int64_t *counts, *offsets;
} expert_rows;

/* Per expert: u = xe w13^T, a = swiglu(u), ye = a w2^T over its rows. */
static gaaw_status_t experts_forward(gaaw_context_t ctx, const gaaw_moe_weights *w, expert_rows r,
                                     const gaaw_tensor_t *xe, gaaw_tensor_t *u, gaaw_tensor_t *a, gaaw_tensor_t *ye)
{
  for (int e = 0; e < r.n; e++) {
    int64_t lo = r.offsets[e], n = r.counts[e];
    if (n == 0) continue;
    gaaw_tensor_t xv = rows(xe, lo, n), uv = rows(u, lo, n), yv = rows(ye, lo, n), av = rows(a, lo, n);
    gaaw_tensor_t w13 = matrix(w->w13, r.n, e), w2 = matrix(w->w2, r.n, e);
    GAAW_CHECK(gaaw_linear_forward(ctx, &xv, &w13, NULL, &uv));
    GAAW_CHECK(gaaw_swiglu_forward(ctx, &uv, &av));
    GAAW_CHECK(gaaw_linear_forward(ctx, &av, &w2, NULL, &yv));
  }
  return GAAW_SUCCESS;
}

/* Kept tensor `which`, (rows, cols) (rows may be 0: one row is allocated). */
static gaaw_status_t keep_rows(gaaw_context_t ctx, gaaw_moe_saved *s, int which, gaaw_dtype_t dt, int64_t n,
                               int64_t cols)
{
  GAAW_CHECK(keep(ctx, s, which, dt, SHAPE2(n > 0 ? n : 1, cols)));
  s->kept[which].shape[0] = n;
  return GAAW_SUCCESS;
}

/* The experts over the kept rows: here (XP, U, A (P, .)), or with expert
 * parallelism on their ep ranks (XP, U, A the rows this rank's experts receive),
 * their output into YP (P, C) either way. */
static gaaw_status_t experts_apply(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                                   gaaw_moe_saved *s, const gaaw_tensor_t *x)
{
  gaaw_tensor_t *k = s->kept, xp = {0}, ye = {0};
  const int64_t P = s->assignments, C = x->shape[1];
  expert_rows r = {spec->experts, s->counts, s->offsets};
  gaaw_status_t st = GAAW_SUCCESS;
  if (s->ep) { /* xp: the source side's permuted rows, sent to the experts' ranks */
    st = alloc(ctx, x->dtype, SHAPE2(P, C), &xp);
    if (st == GAAW_SUCCESS) st = gaaw_moe_permute(ctx, x, &k[GAAW_MOE_SRC], &xp);
    if (st == GAAW_SUCCESS) st = gaaw_moe_dispatch_plan(ctx, s->ep, spec->experts, s->counts, &s->dispatch);
    if (st == GAAW_SUCCESS) r = (expert_rows){s->dispatch.local, s->dispatch.counts, s->dispatch.offsets};
  }
  const int64_t n = s->ep ? s->dispatch.rows : P, f2 = matrix(w->w13, r.n, 0).shape[0]; /* rows, 2F */
  if (st == GAAW_SUCCESS) st = keep_rows(ctx, s, GAAW_MOE_XP, x->dtype, n, C);
  if (st == GAAW_SUCCESS) st = keep_rows(ctx, s, GAAW_MOE_U, x->dtype, n, f2);
  if (st == GAAW_SUCCESS) st = keep_rows(ctx, s, GAAW_MOE_A, x->dtype, n, f2 / 2);
  if (st == GAAW_SUCCESS && !s->ep) st = gaaw_moe_permute(ctx, x, &k[GAAW_MOE_SRC], &k[GAAW_MOE_XP]);
  if (st == GAAW_SUCCESS && s->ep) st = gaaw_moe_dispatch_send(ctx, &s->dispatch, &xp, &k[GAAW_MOE_XP]);
  if (st == GAAW_SUCCESS && s->ep) st = alloc(ctx, x->dtype, SHAPE2(n > 0 ? n : 1, C), &ye);
  ye.shape[0] = n;
  if (st == GAAW_SUCCESS)
    st = experts_forward(ctx, w, r, &k[GAAW_MOE_XP], &k[GAAW_MOE_U], &k[GAAW_MOE_A], s->ep ? &ye : &k[GAAW_MOE_YP]);
  if (st == GAAW_SUCCESS && s->ep) st = gaaw_moe_dispatch_return(ctx, &s->dispatch, &ye, &k[GAAW_MOE_YP]);
  if (xp.buf) gaaw_buffer_free(ctx, &xp.buf);
  if (ye.buf) gaaw_buffer_free(ctx, &ye.buf);
  return st;
}

/* pos (T, 1) i32 = t: the combine kernel as a per-token scaling. */
static gaaw_status_t identity_rows(gaaw_context_t ctx, int64_t T, gaaw_tensor_t *pos)
{
  int32_t *v = malloc(sizeof(int32_t) * (size_t)(T + 1));
  if (!v) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold %lld row indices", (long long)T);
  for (int64_t t = 0; t < T; t++) v[t] = (int32_t)t;
  gaaw_status_t st = alloc(ctx, GAAW_I32, SHAPE2(T, 1), pos);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, pos->buf, pos->offset, v, sizeof(int32_t) * (size_t)T);
  free(v);
  return st;
}

/* y += the shared expert of x: so = swiglu(x s13^T) s2^T, scaled per token by
 * sigmoid(x sgate^T) when gated. */
static gaaw_status_t shared_forward(gaaw_context_t ctx, const gaaw_moe_weights *w, gaaw_moe_saved *s,
                                    const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  const int64_t T = x->shape[0], C = x->shape[1], S2 = w->s13->shape[0];
  const int gated = w->sgate != NULL;
  gaaw_tensor_t *k = s->kept, pos = {0}, scaled = {0};
  GAAW_CHECK(keep(ctx, s, GAAW_MOE_SU, x->dtype, SHAPE2(T, S2)));
  GAAW_CHECK(keep(ctx, s, GAAW_MOE_SA, x->dtype, SHAPE2(T, S2 / 2)));
  GAAW_CHECK(keep(ctx, s, GAAW_MOE_SO, x->dtype, SHAPE2(T, C)));
  GAAW_CHECK(gaaw_linear_forward(ctx, x, w->s13, NULL, &k[GAAW_MOE_SU]));
  GAAW_CHECK(gaaw_swiglu_forward(ctx, &k[GAAW_MOE_SU], &k[GAAW_MOE_SA]));
  GAAW_CHECK(gaaw_linear_forward(ctx, &k[GAAW_MOE_SA], w->s2, NULL, &k[GAAW_MOE_SO]));
  if (!gated) return gaaw_add(ctx, y, &k[GAAW_MOE_SO], y);
  GAAW_CHECK(keep(ctx, s, GAAW_MOE_GL, GAAW_F32, SHAPE2(T, 1)));
  GAAW_CHECK(keep(ctx, s, GAAW_MOE_GS, GAAW_F32, SHAPE2(T, 1)));
  GAAW_CHECK(keep(ctx, s, GAAW_MOE_GLSE, GAAW_F32, 1, (int64_t[]){T}));
  GAAW_CHECK(gaaw_linear_forward(ctx, x, w->sgate, NULL, &k[GAAW_MOE_GL]));
  GAAW_CHECK(gaaw_moe_router_forward(ctx, &k[GAAW_MOE_GL], 1, &k[GAAW_MOE_GS], &k[GAAW_MOE_GLSE]));
  gaaw_status_t st = identity_rows(ctx, T, &pos);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T, C), &scaled);
  if (st == GAAW_SUCCESS) st = gaaw_moe_unpermute(ctx, &k[GAAW_MOE_SO], &pos, &k[GAAW_MOE_GS], &scaled);
  if (st == GAAW_SUCCESS) st = gaaw_add(ctx, y, &scaled, y);
  gaaw_tensor_t *tmp[] = {&pos, &scaled};
  for (int i = 0; i < 2; i++)
    if (tmp[i]->buf) gaaw_buffer_free(ctx, &tmp[i]->buf);
  return st;
}

/* dx += the shared expert's part of dx from dy, and its weights' gradients. */
static gaaw_status_t shared_backward(gaaw_context_t ctx, const gaaw_moe_weights *w, gaaw_moe_saved *s,
                                     const gaaw_tensor_t *x, const gaaw_tensor_t *dy, gaaw_tensor_t *dx)
{
  const int64_t T = x->shape[0], C = x->shape[1], S2 = w->s13->shape[0];
  gaaw_tensor_t *k = s->kept, pos = {0}, dso = {0}, dgs = {0}, dgl = {0}, dsa = {0}, dsu = {0}, dxs = {0};
  const gaaw_tensor_t *g = dy;
  gaaw_status_t st = alloc(ctx, x->dtype, SHAPE2(T, C), &dxs);
  if (st == GAAW_SUCCESS && w->sgate) { /* dso = gs dy, dgs = dy . so; dgl = sigmoid'(dgs); the gate's gradients */
    st = identity_rows(ctx, T, &pos);
    if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T, C), &dso);
    if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, 1), &dgs);
    if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, 1), &dgl);
    if (st == GAAW_SUCCESS)
      st = gaaw_moe_unpermute_backward(ctx, dy, &k[GAAW_MOE_SO], &pos, &k[GAAW_MOE_GS], &dso, &dgs);
    if (st == GAAW_SUCCESS)
      st = gaaw_moe_router_backward(ctx, &k[GAAW_MOE_GL], &k[GAAW_MOE_GS], &k[GAAW_MOE_GLSE], &dgs, 1, 0.0f, &dgl);
    if (st == GAAW_SUCCESS) st = gaaw_linear_backward_weight(ctx, &dgl, x, w->d_sgate, NULL);
    if (st == GAAW_SUCCESS) st = gaaw_linear_backward_input(ctx, &dgl, w->sgate, &dxs);
    if (st == GAAW_SUCCESS) st = gaaw_add(ctx, dx, &dxs, dx);
    g = &dso;
  }
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T, S2 / 2), &dsa);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T, S2), &dsu);
  if (st == GAAW_SUCCESS) st = gaaw_linear_backward_input(ctx, g, w->s2, &dsa);
  if (st == GAAW_SUCCESS) st = gaaw_linear_backward_weight(ctx, g, &k[GAAW_MOE_SA], w->d_s2, NULL);
  if (st == GAAW_SUCCESS) st = gaaw_fill(ctx, &dsu, 0.0f); /* swiglu's backward adds */
  if (st == GAAW_SUCCESS) st = gaaw_swiglu_backward(ctx, &dsa, &k[GAAW_MOE_SU], &dsu);
  if (st == GAAW_SUCCESS) st = gaaw_linear_backward_weight(ctx, &dsu, x, w->d_s13, NULL);
  if (st == GAAW_SUCCESS) st = gaaw_linear_backward_input(ctx, &dsu, w->s13, &dxs);
  if (st == GAAW_SUCCESS) st = gaaw_add(ctx, dx, &dxs, dx);
  gaaw_tensor_t *tmp[] = {&pos, &dso, &dgs, &dgl, &dsa, &dsu, &dxs};
  for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++)
    if (tmp[i]->buf) gaaw_buffer_free(ctx, &tmp[i]->buf);
  return st;
}

/* ep: the ep group's size (1 without one): w13 and w2 hold E / ep experts. */
static gaaw_status_t check_shapes(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                                  const gaaw_tensor_t *x, int ep)
{
  const int64_t C = x->shape[1], E = spec->experts, k = spec->top_k, El = E / ep;
  GAAW_ARG_CHECK(ctx, x->dtype == GAAW_F32, "the MoE layer computes in f32 only for now, got %s",
                 gaaw_dtype_name(x->dtype));
  GAAW_ARG_CHECK(ctx, k >= 1 && k <= E, "top_k %lld must be in 1..experts (%lld)", (long long)k, (long long)E);
  GAAW_ARG_CHECK(ctx, E % ep == 0, "%lld experts do not divide over an ep group of %d", (long long)E, ep);
  const gaaw_tensor_t *r = w->router, *a = w->w13, *b = w->w2;
  gaaw_tensor_t a0 = matrix(a, El, 0), b0 = matrix(b, El, 0);
  int64_t F2 = a0.shape[0];
  int three = a->ndim == 3 && a->shape[0] == El && b->ndim == 3 && b->shape[0] == El;
  int two = a->ndim == 2 && a->shape[0] % El == 0 && b->ndim == 2 && b->shape[0] % El == 0;
  GAAW_ARG_CHECK(ctx, r->ndim == 2 && r->shape[0] == E && r->shape[1] == C && (three || two) && a0.shape[1] == C &&
                        F2 % 2 == 0 && b0.shape[0] == C && b0.shape[1] == F2 / 2,
                 "MoE weights of %lld experts (%lld here) on width %lld: router, w13 and w2 must be (E, C), "
                 "(El, 2F, C) and (El, C, F); got %lld-d, %lld-d and %lld-d tensors",
                 (long long)E, (long long)El, (long long)C, (long long)r->ndim, (long long)a->ndim,
                 (long long)b->ndim);
  const gaaw_tensor_t *s13 = w->s13, *s2 = w->s2, *sg = w->sgate;
  GAAW_ARG_CHECK(ctx, !s13 || (s2 && s13->ndim == 2 && s13->shape[1] == C && s13->shape[0] % 2 == 0 && s2->ndim == 2 &&
                               s2->shape[0] == C && s2->shape[1] == s13->shape[0] / 2 &&
                               (!sg || (sg->ndim == 2 && sg->shape[0] == 1 && sg->shape[1] == C))),
                 "the shared expert on width %lld: s13, s2 and sgate must be (2S, C), (C, S) and (1, C)", (long long)C);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_forward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                               const gaaw_tensor_t *x, gaaw_tensor_t *y, gaaw_moe_saved *s, gaaw_moe_losses *losses)
{
  int ep = 1;
  if (s->ep) GAAW_CHECK(gaaw_comm_size(s->ep, &ep));
  GAAW_CHECK(check_shapes(ctx, spec, w, x, ep));
  if (!s->keep) s->kept = s->own;
  const int64_t T = x->shape[0], C = x->shape[1], E = spec->experts, k = spec->top_k;
  gaaw_dtype_t dt = x->dtype;
  struct {
    int which;
    gaaw_dtype_t dt;
    int64_t d0, d1;
  } shapes[] = {{GAAW_MOE_LOGITS, GAAW_F32, T, E}, {GAAW_MOE_SCORES, GAAW_F32, T, E}, {GAAW_MOE_LSE, GAAW_F32, T, 0},
                {GAAW_MOE_IDX, GAAW_I32, T, k},    {GAAW_MOE_WEIGHTS, GAAW_F32, T, k}, {GAAW_MOE_POS, GAAW_I32, T, k},
                {GAAW_MOE_SRC, GAAW_I32, T * k, 0}, {GAAW_MOE_YP, dt, T * k, C}, {GAAW_MOE_COEFS, GAAW_F32, E + 1, 0}};
  gaaw_status_t st = GAAW_SUCCESS;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && st == GAAW_SUCCESS; i++)
    st = keep(ctx, s, shapes[i].which, shapes[i].dt, shapes[i].d1 ? 2 : 1, (int64_t[]){shapes[i].d0, shapes[i].d1});
  gaaw_tensor_t *kt = s->kept;
  if (st == GAAW_SUCCESS) st = gaaw_linear_forward(ctx, x, w->router, NULL, &kt[GAAW_MOE_LOGITS]);
  if (st == GAAW_SUCCESS)
    st = gaaw_moe_router_forward(ctx, &kt[GAAW_MOE_LOGITS], spec->sigmoid, &kt[GAAW_MOE_SCORES], &kt[GAAW_MOE_LSE]);
  if (st == GAAW_SUCCESS)
    st = gaaw_moe_topk_forward(ctx, &kt[GAAW_MOE_SCORES], NULL, spec->renormalize, &kt[GAAW_MOE_IDX],
                               &kt[GAAW_MOE_WEIGHTS]);
  int64_t dropped = 0;
  if (st == GAAW_SUCCESS) st = route(ctx, spec, s, &dropped);
  if (st == GAAW_SUCCESS) st = experts_apply(ctx, spec, w, s, x);
  if (st == GAAW_SUCCESS)
    st = gaaw_moe_unpermute(ctx, &kt[GAAW_MOE_YP], &kt[GAAW_MOE_POS], &kt[GAAW_MOE_WEIGHTS], y);
  if (st == GAAW_SUCCESS && w->s13) st = shared_forward(ctx, w, s, x, y);
  if (st == GAAW_SUCCESS) st = aux_losses(ctx, spec, s, losses);
  losses->dropped = dropped;
  losses->margin = INFINITY;
  if (st == GAAW_SUCCESS && s->margins) st = smallest_margin(ctx, &kt[GAAW_MOE_SCORES], (int)k, &losses->margin);
  if (st != GAAW_SUCCESS) {
    gaaw_moe_release(ctx, s);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

/* Per expert, over its rows: da = dye w2, dw2 += dye^T a; du = swiglu'(da); dxe =
 * du w13, dw13 += du^T xe (da, du, dxe: scratch with the rows of dye). */
static gaaw_status_t experts_backward(gaaw_context_t ctx, const gaaw_moe_weights *w, expert_rows r,
                                      const gaaw_moe_saved *s, const gaaw_tensor_t *dye, gaaw_tensor_t *da,
                                      gaaw_tensor_t *du, gaaw_tensor_t *dxe)
{
  const gaaw_tensor_t *k = s->kept;
  GAAW_CHECK(gaaw_fill(ctx, du, 0.0f)); /* swiglu's backward adds */
  for (int e = 0; e < r.n; e++) {
    int64_t lo = r.offsets[e], n = r.counts[e];
    if (n == 0) continue;
    gaaw_tensor_t g = rows(dye, lo, n), ge = rows(da, lo, n), gu = rows(du, lo, n), gx = rows(dxe, lo, n);
    gaaw_tensor_t a = rows(&k[GAAW_MOE_A], lo, n), u = rows(&k[GAAW_MOE_U], lo, n), xe = rows(&k[GAAW_MOE_XP], lo, n);
    gaaw_tensor_t w2 = matrix(w->w2, r.n, e), w13 = matrix(w->w13, r.n, e), dw2 = matrix(w->d_w2, r.n, e);
    gaaw_tensor_t dw13 = matrix(w->d_w13, r.n, e);
    GAAW_CHECK(gaaw_linear_backward_input(ctx, &g, &w2, &ge));
    GAAW_CHECK(gaaw_linear_backward_weight(ctx, &g, &a, &dw2, NULL));
    GAAW_CHECK(gaaw_swiglu_backward(ctx, &ge, &u, &gu));
    GAAW_CHECK(gaaw_linear_backward_input(ctx, &gu, &w13, &gx));
    GAAW_CHECK(gaaw_linear_backward_weight(ctx, &gu, &xe, &dw13, NULL));
  }
  return GAAW_SUCCESS;
}

/* dxp (P, C) from dyp (P, C) through the experts, here or (expert parallelism) on
 * their ep ranks: dyp's rows go where the forward's went and dxp's come back. */
static gaaw_status_t experts_unapply(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                                     gaaw_moe_saved *s, const gaaw_tensor_t *dyp, gaaw_tensor_t *dxp)
{
  const int64_t C = dyp->shape[1];
  expert_rows r = {spec->experts, s->counts, s->offsets};
  gaaw_status_t st = GAAW_SUCCESS;
  if (s->ep && !s->dispatch.send_rows) /* a caller's kept tensors: plan the exchange again */
    st = gaaw_moe_dispatch_plan(ctx, s->ep, spec->experts, s->counts, &s->dispatch);
  if (s->ep) r = (expert_rows){s->dispatch.local, s->dispatch.counts, s->dispatch.offsets};
  const int64_t n = s->kept[GAAW_MOE_XP].shape[0], f2 = s->kept[GAAW_MOE_U].shape[1], m = n > 0 ? n : 1;
  gaaw_tensor_t dye = {0}, da = {0}, du = {0}, dxe = {0};
  if (st == GAAW_SUCCESS) st = alloc(ctx, dyp->dtype, SHAPE2(m, f2 / 2), &da);
  if (st == GAAW_SUCCESS) st = alloc(ctx, dyp->dtype, SHAPE2(m, f2), &du);
  if (st == GAAW_SUCCESS && s->ep) st = alloc(ctx, dyp->dtype, SHAPE2(m, C), &dye);
  if (st == GAAW_SUCCESS && s->ep) st = alloc(ctx, dyp->dtype, SHAPE2(m, C), &dxe);
  gaaw_tensor_t *tmp[] = {&dye, &da, &du, &dxe};
  for (int i = 0; i < 4; i++) tmp[i]->shape[0] = n;
  if (st == GAAW_SUCCESS && s->ep) st = gaaw_moe_dispatch_send(ctx, &s->dispatch, dyp, &dye);
  if (st == GAAW_SUCCESS) st = experts_backward(ctx, w, r, s, s->ep ? &dye : dyp, &da, &du, s->ep ? &dxe : dxp);
  if (st == GAAW_SUCCESS && s->ep) st = gaaw_moe_dispatch_return(ctx, &s->dispatch, &dxe, dxp);
  for (int i = 0; i < 4; i++)
    if (tmp[i]->buf) gaaw_buffer_free(ctx, &tmp[i]->buf);
  return st;
}

/* dscores += the load-balancing loss's gradient, aux_scale COEFS[i] on every
 * token's score of expert i; *zscale = aux_scale COEFS[E], the z-loss's. */
static gaaw_status_t aux_gradient(gaaw_context_t ctx, const gaaw_moe_spec *spec, gaaw_moe_saved *s, float aux_scale,
                                  gaaw_tensor_t *dscores, float *zscale)
{
  const int E = spec->experts;
  const gaaw_tensor_t *c = &s->kept[GAAW_MOE_COEFS];
  float g[E + 1];
  GAAW_CHECK(gaaw_buffer_read(ctx, c->buf, c->offset, g, sizeof(float) * (size_t)(E + 1)));
  for (int e = 0; e <= E; e++) g[e] *= aux_scale;
  *zscale = g[E];
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
  if (!s->keep) s->kept = s->own;
  if (!s->counts) GAAW_CHECK(recount(ctx, spec->experts, s)); /* a caller's kept tensors, from another call */
  gaaw_tensor_t *kt = s->kept;
  const int64_t T = x->shape[0], C = x->shape[1], E = spec->experts, k = spec->top_k, P = s->assignments;
  gaaw_tensor_t dyp = {0}, dwt = {0}, dxp = {0}, ds = {0}, dl = {0}, dxr = {0};
  float zscale = 0;
  gaaw_status_t st = alloc(ctx, x->dtype, SHAPE2(P, C), &dyp);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, k), &dwt);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(P, C), &dxp);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, E), &ds);
  if (st == GAAW_SUCCESS) st = alloc(ctx, GAAW_F32, SHAPE2(T, E), &dl);
  if (st == GAAW_SUCCESS) st = alloc(ctx, x->dtype, SHAPE2(T, C), &dxr);
  if (st == GAAW_SUCCESS)
    st = gaaw_moe_unpermute_backward(ctx, dy, &kt[GAAW_MOE_YP], &kt[GAAW_MOE_POS], &kt[GAAW_MOE_WEIGHTS], &dyp, &dwt);
  if (st == GAAW_SUCCESS) st = experts_unapply(ctx, spec, w, s, &dyp, &dxp);
  if (st == GAAW_SUCCESS) st = gaaw_moe_permute_backward(ctx, &dxp, &kt[GAAW_MOE_POS], dx);
  if (st == GAAW_SUCCESS)
    st = gaaw_moe_topk_backward(ctx, &kt[GAAW_MOE_SCORES], &kt[GAAW_MOE_IDX], &kt[GAAW_MOE_WEIGHTS], &dwt,
                                spec->renormalize, &ds);
  if (st == GAAW_SUCCESS) st = aux_gradient(ctx, spec, s, aux_scale, &ds, &zscale);
  if (st == GAAW_SUCCESS)
    st = gaaw_moe_router_backward(ctx, &kt[GAAW_MOE_LOGITS], &kt[GAAW_MOE_SCORES], &kt[GAAW_MOE_LSE], &ds,
                                  spec->sigmoid, zscale, &dl);
  if (st == GAAW_SUCCESS) st = gaaw_linear_backward_input(ctx, &dl, w->router, &dxr);
  if (st == GAAW_SUCCESS) st = gaaw_add(ctx, dx, &dxr, dx);
  if (st == GAAW_SUCCESS) st = gaaw_linear_backward_weight(ctx, &dl, x, w->d_router, NULL);
  if (st == GAAW_SUCCESS && w->s13) st = shared_backward(ctx, w, s, x, dy, dx);
  gaaw_tensor_t *tmp[] = {&dyp, &dwt, &dxp, &ds, &dl, &dxr};
  for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++)
    if (tmp[i]->buf) gaaw_buffer_free(ctx, &tmp[i]->buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

void gaaw_moe_release(gaaw_context_t ctx, gaaw_moe_saved *s)
{
  for (int i = 0; !s->keep && i < GAAW_MOE_KEPT; i++)
    if (s->own[i].buf) gaaw_buffer_free(ctx, &s->own[i].buf);
  free(s->counts);
  s->counts = s->offsets = s->routed = NULL;
  gaaw_moe_dispatch_free(ctx, &s->dispatch);
}
