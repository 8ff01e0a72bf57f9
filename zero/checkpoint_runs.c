/* What a rank owns, as runs of tensors over its host staging, and the copy of the
 * elements two runs share (row by row inside the boxes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/error.h"
#include "zero/checkpoint_impl.h"

const char *const gaaw_ckpt_field_names[CKPT_FIELDS] = {"values", "exp_avg", "exp_avg_sq"};

static int64_t min64(int64_t a, int64_t b)
{
  return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
  return a > b ? a : b;
}

void gaaw_ckpt_tensor_dims(int ndim, const int64_t shape[2], int64_t *rows, int64_t *cols)
{
  *rows = shape[0];
  *cols = ndim == 2 ? shape[1] : 1;
}

/* Box k of parameter p on tp rank r: its global rows and columns, and where it
 * starts among p's local elements. A fused parameter (split on axis 0) holds one
 * box per block, one after the other; any other one box. */
static void param_box(const gaaw_param *p, int tp_rank, int tp_size, int k, ckpt_run *box, int64_t *local_at)
{
  int64_t lrows = p->local_shape[0], lcols = p->ndim == 2 ? p->local_shape[1] : 1;
  memset(box, 0, sizeof *box);
  box->nr = lrows, box->nc = lcols;
  box->r0 = p->row0; /* experts split over ep: this rank's rows */
  *local_at = 0;
  if (p->split_axis == 0) {
    int64_t start = 0, count;
    for (int b = 0; b < k; b++) start += p->blocks.extent[b];
    box->nr = p->block_local[k];
    box->r0 = start + (int64_t)(tp_rank / gaaw_param_block_replicas(p, k, tp_size)) * box->nr;
    gaaw_param_block_span(p, k, local_at, &count);
  } else if (p->split_axis == 1) {
    box->c0 = (int64_t)tp_rank * lcols;
  }
}

/* Whether this rank writes p: one copy of each element in the whole job (dp
 * replicas are left out by the caller's ranges). */
static int writes_param(gaaw_model_t m, const gaaw_param *p)
{
  if (p->split_axis < 0 && m->tp_rank != 0) return 0;
  if (p->tied_peer >= 0 && p->tied_peer < m->pp_rank) return 0; /* the first stage's copy */
  return 1;
}

static gaaw_status_t append_run(gaaw_context_t ctx, ckpt_run **runs, int *n, int *cap, const ckpt_run *r)
{
  if (*n == *cap) {
    int grown_cap = *cap ? 2 * *cap : 64;
    ckpt_run *grown = realloc(*runs, sizeof *grown * (size_t)grown_cap);
    if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot grow the checkpoint's run list to %d", grown_cap);
    *runs = grown, *cap = grown_cap;
  }
  (*runs)[(*n)++] = *r;
  return GAAW_SUCCESS;
}

int64_t gaaw_ckpt_run_limit(void)
{
  const char *test = getenv("GAAW_TEST_CHECKPOINT_RUN_ELEMENTS");
  long long n = test ? atoll(test) : 0;
  return n > 0 ? (int64_t)n : CKPT_RUN_MAX_ELEMENTS;
}

/* The runs of table range g that lie in parameter p, each of at most limit elements. */
static gaaw_status_t param_runs(gaaw_model_t m, const gaaw_param *p, int tensor, const ckpt_range *g, int save,
                                int64_t limit, ckpt_run **runs, int *n, int *cap)
{
  gaaw_context_t ctx = m->ctx;
  int boxes = p->split_axis == 0 ? p->blocks.n : 1;
  for (int k = 0; k < boxes; k++) {
    ckpt_run r;
    int64_t local_at;
    /* a replicated block (kv heads over more tp ranks) is written by its first holder */
    if (save && p->split_axis == 0 && m->tp_rank % gaaw_param_block_replicas(p, k, m->tp_size)) continue;
    param_box(p, m->tp_rank, m->tp_size, k, &r, &local_at);
    int64_t box_lo = p->offset + local_at, box_hi = box_lo + r.nr * r.nc;
    int64_t lo = max64(box_lo, g->lo), hi = min64(box_hi, g->lo + g->len);
    if (lo >= hi) continue;
    r.tensor = tensor;
    r.field = CKPT_VALUES;
    for (int64_t from = lo, to; from < hi; from = to) {
      to = hi - from > limit ? from + limit : hi; /* limit may be INT64_MAX */
      r.a = from - box_lo, r.b = to - box_lo;
      r.at = g->at + (from - g->lo);
      GAAW_CHECK(append_run(ctx, runs, n, cap, &r));
    }
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ckpt_owned_runs(gaaw_model_t m, const ckpt_range *ranges, int nranges, int save, ckpt_run **runs,
                                   int *nruns)
{
  gaaw_context_t ctx = m->ctx;
  int cap = 0;
  *runs = NULL, *nruns = 0;
  for (int i = 0; i < nranges; i++) {
    for (int k = 0; k < m->params.count; k++) {
      const gaaw_param *p = &m->params.items[k];
      if (p->offset >= ranges[i].lo + ranges[i].len || p->offset + p->local_numel <= ranges[i].lo) continue;
      if (save && !writes_param(m, p)) continue;
      GAAW_ARG_CHECK(ctx, p->blocks.n == 1 || p->split_axis == 0,
                     "parameter %s: fused blocks on axis %d cannot be checkpointed", p->name, p->split_axis);
      const gaaw_param_entry *e = gaaw_model_catalog_find(m, p->name);
      if (!e) GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "parameter %s is not in the model's catalog", p->name);
      int64_t limit = save ? gaaw_ckpt_run_limit() : INT64_MAX;
      gaaw_status_t st = param_runs(m, p, (int)(e - m->catalog), &ranges[i], save, limit, runs, nruns, &cap);
      if (st != GAAW_SUCCESS) {
        free(*runs);
        *runs = NULL, *nruns = 0;
        return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
      }
    }
  }
  return GAAW_SUCCESS;
}

/* The rows [*lo, *hi) of the tensor that both runs may touch. */
static void shared_rows(const ckpt_run *s, const ckpt_run *w, int64_t rows, int64_t *lo, int64_t *hi)
{
  *lo = max64(max64(s->r0 + s->a / s->nc, w->r0 + w->a / w->nc), 0);
  *hi = min64(min64(s->r0 + (s->b - 1) / s->nc + 1, w->r0 + (w->b - 1) / w->nc + 1), rows);
}

/* Row g's columns [*lo, *hi) inside run r's flat range (and the tensor); the
 * element (g, c) is r's box-flat element base + c. */
static void row_span(const ckpt_run *r, int64_t g, int64_t cols, int64_t *base, int64_t *lo, int64_t *hi)
{
  *base = (g - r->r0) * r->nc - r->c0;
  *lo = max64(max64(r->c0, r->a - *base), *lo);
  *hi = min64(min64(min64(r->c0 + r->nc, r->b - *base), cols), *hi);
}

int64_t gaaw_ckpt_copy_overlap(const ckpt_run *s, const float *src, const ckpt_run *w, float *dst, int64_t rows,
                               int64_t cols)
{
  int64_t glo, ghi, copied = 0;
  shared_rows(s, w, rows, &glo, &ghi);
  for (int64_t g = glo; g < ghi; g++) {
    if (g < s->r0 || g >= s->r0 + s->nr || g < w->r0 || g >= w->r0 + w->nr) continue;
    int64_t sbase, wbase, lo = 0, hi = cols;
    row_span(s, g, cols, &sbase, &lo, &hi);
    row_span(w, g, cols, &wbase, &lo, &hi);
    if (lo >= hi) continue;
    if (src) memcpy(dst + w->at + (wbase + lo - w->a), src + (sbase + lo - s->a), sizeof(float) * (size_t)(hi - lo));
    copied += hi - lo;
  }
  return copied;
}

int gaaw_ckpt_runs_meet(const ckpt_run *s, const ckpt_run *w, int64_t rows, int64_t cols)
{
  if (s->r0 >= w->r0 + w->nr || w->r0 >= s->r0 + s->nr || s->c0 >= w->c0 + w->nc || w->c0 >= s->c0 + s->nc)
    return 0;
  return gaaw_ckpt_copy_overlap(s, NULL, w, NULL, rows, cols) > 0;
}

int64_t gaaw_ckpt_real_elements(const ckpt_run *w, int64_t rows, int64_t cols)
{
  return gaaw_ckpt_copy_overlap(w, NULL, w, NULL, rows, cols);
}
