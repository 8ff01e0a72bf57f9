/* Pipeline schedules as data: the schedule object and its per-rank lists (creation,
 * appending, freeing), the names of generators and actions, the tag of a message,
 * and the checks of a schedule's sizes. Calls no other schedule file (see
 * schedule_impl.h); the semantics are in schedule.h. */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "parallel/schedule_impl.h"

/* p * m * v above this is refused: the lists would take gigabytes. */
#define SCHED_MAX_UNITS (1L << 20)

static const char *const kind_names[] = {
#define GAAW_SCHED_KIND_NAME(name, value, text) [value] = text,
  GAAW_SCHED_KIND_LIST(GAAW_SCHED_KIND_NAME)
#undef GAAW_SCHED_KIND_NAME
};

const char *const gaaw_sched_op_names[GAAW_SCHED_OP_COUNT] = {"F",        "B",        "W",         "BW",
                                                              "SEND_ACT", "RECV_ACT", "SEND_GRAD", "RECV_GRAD"};

/* ------------------------------------------------------------------ names */

const char *gaaw_sched_kind_name(int kind)
{
  return kind >= 0 && kind < GAAW_SCHED_KIND_COUNT ? kind_names[kind] : "?";
}

gaaw_status_t gaaw_sched_kind_parse(gaaw_context_t ctx, const char *name, gaaw_sched_kind_t *kind)
{
  GAAW_ARG_NOT_NULL(ctx, name);
  GAAW_ARG_NOT_NULL(ctx, kind);
  for (int k = 0; k < GAAW_SCHED_KIND_COUNT; k++)
    if (strcasecmp(name, kind_names[k]) == 0) return *kind = (gaaw_sched_kind_t)k, GAAW_SUCCESS;
  GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "no pipeline schedule named '%s' (gpipe, 1f1b, interleaved, zb-h1)", name);
}

void gaaw_sched_action_text(const gaaw_sched_action_t *a, char *text, size_t len)
{
  if (!text || len == 0) return;
  if (a->op < 0 || a->op >= GAAW_SCHED_OP_COUNT) {
    snprintf(text, len, "op %d mb %d chunk %d peer %d", a->op, a->mb, a->chunk, a->peer);
    return;
  }
  if (gaaw_sched_is_compute(a->op))
    snprintf(text, len, "%s mb %d chunk %d", gaaw_sched_op_names[a->op], a->mb, a->chunk);
  else
    snprintf(text, len, "%s mb %d chunk %d %s rank %d", gaaw_sched_op_names[a->op], a->mb, a->chunk,
             gaaw_sched_is_send(a->op) ? "to" : "from", a->peer);
}

/* ------------------------------------------------------------------ sizes */

gaaw_status_t gaaw_sched_check_sizes(gaaw_context_t ctx, int p, int m, int v)
{
  GAAW_ARG_CHECK(ctx, p >= 1, "pipeline schedule: pp must be >= 1 (got pp %d, microbatches %d, virtual_stages %d)",
                 p, m, v);
  GAAW_ARG_CHECK(ctx, m >= 1,
                 "pipeline schedule: microbatches must be >= 1 (got pp %d, microbatches %d, virtual_stages %d)", p, m,
                 v);
  GAAW_ARG_CHECK(ctx, v >= 1,
                 "pipeline schedule: virtual_stages must be >= 1 (got pp %d, microbatches %d, virtual_stages %d)", p,
                 m, v);
  GAAW_ARG_CHECK(ctx, p <= SCHED_MAX_UNITS && m <= SCHED_MAX_UNITS && v <= SCHED_MAX_UNITS &&
                          (long)p * m * v <= SCHED_MAX_UNITS,
                 "pipeline schedule: pp %d x microbatches %d x virtual_stages %d is above %ld", p, m, v,
                 SCHED_MAX_UNITS);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sched_check(gaaw_context_t ctx, int kind, int p, int m, int v)
{
  GAAW_ARG_CHECK(ctx, kind >= 0 && kind < GAAW_SCHED_KIND_COUNT, "pipeline schedule %d is not in 0..%d", kind,
                 GAAW_SCHED_KIND_COUNT - 1);
  GAAW_CHECK(gaaw_sched_check_sizes(ctx, p, m, v));
  if (kind == GAAW_SCHED_INTERLEAVED) {
    GAAW_ARG_CHECK(ctx, v >= 2,
                   "pipeline schedule interleaved needs virtual_stages >= 2 (got %d; with pp %d, microbatches %d; "
                   "one chunk per rank is 1f1b)",
                   v, p, m);
    GAAW_ARG_CHECK(ctx, m % p == 0,
                   "pipeline schedule interleaved needs microbatches (%d) to be a multiple of pp (%d) "
                   "(virtual_stages %d)",
                   m, p, v);
  } else {
    GAAW_ARG_CHECK(ctx, v == 1,
                   "pipeline schedule %s takes virtual_stages 1 (got %d, with pp %d, microbatches %d); only "
                   "interleaved has several chunks per rank",
                   kind_names[kind], v, p, m);
  }
  return GAAW_SUCCESS;
}

/* ------------------------------------------------------------------ the object and its lists */

void gaaw_sched_destroy(gaaw_sched_t **s)
{
  if (!s || !*s) return;
  gaaw_sched_t *t = *s;
  if (t->ranks)
    for (int r = 0; r < t->pp; r++) {
      free(t->ranks[r].actions);
      free(t->ranks[r].start);
    }
  free(t->ranks);
  free(t);
  *s = NULL;
}

gaaw_status_t gaaw_sched_create_empty(gaaw_context_t ctx, int p, int m, int v, gaaw_sched_t **out)
{
  GAAW_ARG_NOT_NULL(ctx, out);
  *out = NULL;
  GAAW_CHECK(gaaw_sched_check_sizes(ctx, p, m, v));
  gaaw_sched_t *s = calloc(1, sizeof *s);
  if (s) s->ranks = calloc((size_t)p, sizeof *s->ranks);
  if (!s || !s->ranks) {
    free(s);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a schedule of %d ranks", p);
  }
  s->kind = -1;
  s->pp = p;
  s->microbatches = m;
  s->virtual_stages = v;
  *out = s;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sched_reserve(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int count)
{
  if (count <= rk->capacity) return GAAW_SUCCESS;
  int cap = rk->capacity ? rk->capacity : 16;
  while (cap < count) cap *= 2;
  gaaw_sched_action_t *a = realloc(rk->actions, (size_t)cap * sizeof *a);
  if (!a) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot grow a schedule's list to %d actions", cap);
  rk->actions = a;
  rk->capacity = cap;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sched_append(gaaw_context_t ctx, gaaw_sched_t *s, int rank, int op, int mb, int chunk, int peer)
{
  GAAW_ARG_NOT_NULL(ctx, s);
  GAAW_ARG_CHECK(ctx, rank >= 0 && rank < s->pp, "rank %d is not in 0..%d", rank, s->pp - 1);
  gaaw_sched_rank_t *rk = &s->ranks[rank];
  GAAW_CHECK(gaaw_sched_reserve(ctx, rk, rk->count + 1));
  rk->actions[rk->count++] = (gaaw_sched_action_t){.op = op, .mb = mb, .chunk = chunk, .peer = peer};
  return GAAW_SUCCESS;
}

/* ------------------------------------------------------------------ messages */

int gaaw_sched_tag(const gaaw_sched_t *s, int rank, const gaaw_sched_action_t *a)
{
  int nv = s->pp * s->virtual_stages, vs = a->chunk * s->pp + rank, edge;
  switch (a->op) {
  case GAAW_SCHED_SEND_ACT: edge = vs; break;
  case GAAW_SCHED_RECV_ACT: edge = vs - 1; break;
  case GAAW_SCHED_SEND_GRAD: edge = vs - 1; break;
  case GAAW_SCHED_RECV_GRAD: edge = vs; break;
  default: return -1;
  }
  int grad = a->op == GAAW_SCHED_SEND_GRAD || a->op == GAAW_SCHED_RECV_GRAD;
  return (a->mb * (nv - 1) + edge) * 2 + grad;
}
