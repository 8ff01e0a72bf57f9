/* Pipeline schedules: the generators (GPipe, 1F1B, interleaved 1F1B, ZB-H1), the
 * verifier and the timeline. See schedule.h for the semantics. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/runtime/error.h"
#include "gaaw/schedule.h"
#include "parallel/schedule.h"

/* Cleanup in one place: on failure, trace this frame and jump to label. */
#define SCHED_TRY(st, call, label)                                        \
  do {                                                                    \
    (st) = (call);                                                        \
    if ((st) != GAAW_SUCCESS) {                                           \
      (st) = gaaw_error_trace(ctx, (st), __FILE__, __LINE__, __func__);   \
      goto label;                                                         \
    }                                                                     \
  } while (0)

/* p * m * v above this is refused: the lists would take gigabytes. */
#define SCHED_MAX_UNITS (1L << 20)

static const char *const kind_names[] = {
#define GAAW_SCHED_KIND_NAME(name, value, text) [value] = text,
  GAAW_SCHED_KIND_LIST(GAAW_SCHED_KIND_NAME)
#undef GAAW_SCHED_KIND_NAME
};

static const char *const op_names[GAAW_SCHED_OP_COUNT] = {"F",        "B",        "W",         "BW",
                                                          "SEND_ACT", "RECV_ACT", "SEND_GRAD", "RECV_GRAD"};

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

static int is_compute(int op)
{
  return op == GAAW_SCHED_F || op == GAAW_SCHED_B || op == GAAW_SCHED_W || op == GAAW_SCHED_BW;
}

static int is_send(int op)
{
  return op == GAAW_SCHED_SEND_ACT || op == GAAW_SCHED_SEND_GRAD;
}

void gaaw_sched_action_text(const gaaw_sched_action_t *a, char *text, size_t len)
{
  if (!text || len == 0) return;
  if (a->op < 0 || a->op >= GAAW_SCHED_OP_COUNT) {
    snprintf(text, len, "op %d mb %d chunk %d peer %d", a->op, a->mb, a->chunk, a->peer);
    return;
  }
  if (is_compute(a->op))
    snprintf(text, len, "%s mb %d chunk %d", op_names[a->op], a->mb, a->chunk);
  else
    snprintf(text, len, "%s mb %d chunk %d %s rank %d", op_names[a->op], a->mb, a->chunk,
             is_send(a->op) ? "to" : "from", a->peer);
}

/* ------------------------------------------------------------------ creation */

static gaaw_status_t check_sizes(gaaw_context_t ctx, int p, int m, int v)
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
  GAAW_CHECK(check_sizes(ctx, p, m, v));
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
  GAAW_CHECK(check_sizes(ctx, p, m, v));
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

static gaaw_status_t reserve(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int count)
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
  GAAW_CHECK(reserve(ctx, rk, rk->count + 1));
  rk->actions[rk->count++] = (gaaw_sched_action_t){.op = op, .mb = mb, .chunk = chunk, .peer = peer};
  return GAAW_SUCCESS;
}

/* The compute order of each generator, on rank r. The lists hold compute actions
 * only; attach_messages adds the sends and receives. */
static gaaw_status_t push(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int op, int mb, int chunk)
{
  GAAW_CHECK(reserve(ctx, rk, rk->count + 1));
  rk->actions[rk->count++] = (gaaw_sched_action_t){.op = op, .mb = mb, .chunk = chunk, .peer = -1};
  return GAAW_SUCCESS;
}

static int min_int(int a, int b)
{
  return a < b ? a : b;
}

/* GPipe: every forward, then every backward (fused). m in flight. */
static gaaw_status_t order_gpipe(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int p, int r, int m)
{
  for (int i = 0; i < m; i++) GAAW_CHECK(push(ctx, rk, GAAW_SCHED_F, i, 0));
  for (int i = 0; i < m; i++) GAAW_CHECK(push(ctx, rk, GAAW_SCHED_BW, i, 0));
  return GAAW_SUCCESS;
}

/* 1F1B (PipeDream-flush): p-1-r forwards to warm up, then one forward and one
 * backward in turn, then the remaining backwards. min(p - r, m) in flight. */
static gaaw_status_t order_1f1b(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int p, int r, int m)
{
  int warm = min_int(p - 1 - r, m);
  for (int i = 0; i < warm; i++) GAAW_CHECK(push(ctx, rk, GAAW_SCHED_F, i, 0));
  for (int k = 0; k < m; k++) {
    if (warm + k < m) GAAW_CHECK(push(ctx, rk, GAAW_SCHED_F, warm + k, 0));
    GAAW_CHECK(push(ctx, rk, GAAW_SCHED_BW, k, 0));
  }
  return GAAW_SUCCESS;
}

/* ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", the memory-efficient
 * handcrafted schedule): the 1F1B order with the backward split into B and W, and
 * rank r's W passes started r microbatches late, so that every rank keeps
 * (p - 1 - r) + 1 + r = p microbatches in flight (1F1B's peak, on the first stage);
 * B reaches the earlier stages sooner and the delayed W fill the tail bubble. */
static gaaw_status_t order_zb_h1(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int p, int r, int m)
{
  int warm = min_int(p - 1 - r, m), delay = r, w_done = 0;
  for (int i = 0; i < warm; i++) GAAW_CHECK(push(ctx, rk, GAAW_SCHED_F, i, 0));
  for (int k = 0; k < m; k++) {
    if (warm + k < m) GAAW_CHECK(push(ctx, rk, GAAW_SCHED_F, warm + k, 0));
    GAAW_CHECK(push(ctx, rk, GAAW_SCHED_B, k, 0));
    if (k - delay >= 0) GAAW_CHECK(push(ctx, rk, GAAW_SCHED_W, w_done++, 0));
  }
  while (w_done < m) GAAW_CHECK(push(ctx, rk, GAAW_SCHED_W, w_done++, 0));
  return GAAW_SUCCESS;
}

/* Interleaved 1F1B, in Megatron-LM's order: the k-th forward of a rank is microbatch
 * (k / (p v)) p + k % p of chunk (k / p) % v (groups of p microbatches go through
 * every chunk in turn), the k-th backward the same microbatch of chunk v-1 - (k/p) % v;
 * (v-1) p + 2 (p-1-r) forwards warm up, then one forward and one backward in turn.
 * Needs m % p == 0 (gaaw_sched_check). */
static void interleaved_unit(int k, int p, int v, int *mb, int *chunk)
{
  *mb = (k / (p * v)) * p + k % p;
  *chunk = (k % (p * v)) / p;
}

static gaaw_status_t order_interleaved(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int p, int r, int m, int v)
{
  int total = m * v, warm = min_int((v - 1) * p + 2 * (p - 1 - r), total), mb, c;
  for (int k = 0; k < warm; k++) {
    interleaved_unit(k, p, v, &mb, &c);
    GAAW_CHECK(push(ctx, rk, GAAW_SCHED_F, mb, c));
  }
  for (int k = 0; k < total; k++) {
    if (warm + k < total) {
      interleaved_unit(warm + k, p, v, &mb, &c);
      GAAW_CHECK(push(ctx, rk, GAAW_SCHED_F, mb, c));
    }
    interleaved_unit(k, p, v, &mb, &c);
    GAAW_CHECK(push(ctx, rk, GAAW_SCHED_BW, mb, v - 1 - c));
  }
  return GAAW_SUCCESS;
}

/* One message while the lists are built: where its receive goes. */
typedef struct {
  int dst;  /* receiving rank */
  int pos;  /* index, in dst's compute list, of the action that consumes it */
  int op;   /* RECV_ACT or RECV_GRAD */
  int mb, chunk, src;
} pending_recv;

/* Turns compute-only lists into full ones: each send right after the action that
 * produces it; each receive before the action that consumes it, moved earlier where
 * needed so that a rank receives from a peer in the order that peer sends (a receive
 * goes no later than any receive of a later message of the same pair). Sends after
 * one compute action and receives before the next one form one exchange. The timed
 * run of these lists then tells place_receives where the receives are posted. */
static gaaw_status_t attach_messages(gaaw_context_t ctx, gaaw_sched_t *s)
{
  gaaw_status_t st = GAAW_SUCCESS;
  int p = s->pp, v = s->virtual_stages, m = s->microbatches, nv = p * v;
  size_t units = (size_t)m * v;
  int *fpos = NULL, *bpos = NULL, *key = NULL;
  pending_recv *rv = NULL;
  gaaw_sched_rank_t *full = NULL;
  if (p == 1) return GAAW_SUCCESS; /* every stage on one rank: no messages */

  fpos = malloc((size_t)p * units * sizeof *fpos);
  bpos = malloc((size_t)p * units * sizeof *bpos);
  size_t nmsg_max = (size_t)p * units * 2;
  rv = malloc(nmsg_max * sizeof *rv);
  full = calloc((size_t)p, sizeof *full);
  if (!fpos || !bpos || !rv || !full) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                          "cannot allocate the message tables of a schedule (pp %d, microbatches %d)", p, m);
    goto out;
  }
  for (int r = 0; r < p; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    for (int i = 0; i < rk->count; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      size_t u = (size_t)r * units + (size_t)a->mb * v + a->chunk;
      if (a->op == GAAW_SCHED_F) fpos[u] = i;
      if (a->op == GAAW_SCHED_B || a->op == GAAW_SCHED_BW) bpos[u] = i;
    }
  }
  /* Every message, pair by pair in send order: pairs (src, towards src+1) and (src,
   * towards src-1); with p = 2 both are one pair, so walk each source's list once per
   * destination and take the messages going there. */
  size_t nmsg = 0;
  for (int src = 0; src < p; src++) {
    int dsts[2] = {(src + 1) % p, (src - 1 + p) % p};
    for (int d = 0; d < (dsts[0] == dsts[1] ? 1 : 2); d++) {
      size_t first = nmsg;
      const gaaw_sched_rank_t *rk = &s->ranks[src];
      for (int i = 0; i < rk->count; i++) {
        const gaaw_sched_action_t *a = &rk->actions[i];
        int vs = a->chunk * p + src, to, op;
        if (a->op == GAAW_SCHED_F && vs + 1 < nv)
          to = vs + 1, op = GAAW_SCHED_RECV_ACT;
        else if ((a->op == GAAW_SCHED_B || a->op == GAAW_SCHED_BW) && vs > 0)
          to = vs - 1, op = GAAW_SCHED_RECV_GRAD;
        else
          continue;
        if (to % p != dsts[d]) continue;
        size_t u = (size_t)(to % p) * units + (size_t)a->mb * v + to / p;
        rv[nmsg++] = (pending_recv){.dst = to % p, .pos = op == GAAW_SCHED_RECV_ACT ? fpos[u] : bpos[u],
                                    .op = op, .mb = a->mb, .chunk = to / p, .src = src};
      }
      /* no later than the receive of any later message of this pair */
      for (size_t j = nmsg; j-- > first + 1;)
        if (rv[j].pos < rv[j - 1].pos) rv[j - 1].pos = rv[j].pos;
    }
  }
  /* Receives in (destination, position) order, a stable counting sort, so that each
   * pair keeps its send order among receives placed before the same action. */
  int maxcount = 0;
  for (int r = 0; r < p; r++)
    if (s->ranks[r].count > maxcount) maxcount = s->ranks[r].count;
  size_t nkeys = (size_t)p * (size_t)(maxcount + 1);
  free(key);
  key = calloc(nkeys + 1 + nmsg, sizeof *key); /* nkeys+1 bucket starts, then the order */
  if (!key) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot sort %zu messages", nmsg);
    goto out;
  }
  int *order = key + nkeys + 1;
  for (size_t j = 0; j < nmsg; j++) key[(size_t)rv[j].dst * (maxcount + 1) + rv[j].pos + 1]++;
  for (size_t k = 1; k <= nkeys; k++) key[k] += key[k - 1];
  for (size_t j = 0; j < nmsg; j++) order[key[(size_t)rv[j].dst * (maxcount + 1) + rv[j].pos]++] = (int)j;
  size_t next = 0;
  for (int r = 0; r < p; r++) {
    const gaaw_sched_rank_t *rk = &s->ranks[r];
    gaaw_sched_rank_t *fr = &full[r];
    for (int i = 0; i < rk->count; i++) {
      for (; next < nmsg && rv[order[next]].dst == r && rv[order[next]].pos == i; next++) {
        const pending_recv *q = &rv[order[next]];
        SCHED_TRY(st, reserve(ctx, fr, fr->count + 1), out);
        fr->actions[fr->count++] =
            (gaaw_sched_action_t){.op = q->op, .mb = q->mb, .chunk = q->chunk, .peer = q->src};
      }
      const gaaw_sched_action_t *a = &rk->actions[i];
      SCHED_TRY(st, reserve(ctx, fr, fr->count + 2), out);
      fr->actions[fr->count++] = *a;
      int vs = a->chunk * p + r;
      if (a->op == GAAW_SCHED_F && vs + 1 < nv)
        fr->actions[fr->count++] = (gaaw_sched_action_t){
            .op = GAAW_SCHED_SEND_ACT, .mb = a->mb, .chunk = a->chunk, .peer = (vs + 1) % p};
      else if ((a->op == GAAW_SCHED_B || a->op == GAAW_SCHED_BW) && vs > 0)
        fr->actions[fr->count++] = (gaaw_sched_action_t){
            .op = GAAW_SCHED_SEND_GRAD, .mb = a->mb, .chunk = a->chunk, .peer = (vs - 1) % p};
    }
  }
  for (int r = 0; r < p; r++) {
    free(s->ranks[r].actions);
    s->ranks[r] = full[r];
    full[r] = (gaaw_sched_rank_t){0};
  }
out:
  if (full)
    for (int r = 0; r < p; r++) free(full[r].actions);
  free(full);
  free(fpos);
  free(bpos);
  free(rv);
  free(key);
  return st;
}

static gaaw_status_t verify(gaaw_context_t ctx, gaaw_sched_t *s, const gaaw_sched_cost_t *costs,
                            gaaw_sched_report_t *report, int generating);

/* Generates and verifies with unit costs; *report (may be NULL) gets the figures. */
static gaaw_status_t create_verified(gaaw_context_t ctx, int kind, int p, int m, int v, gaaw_sched_t **out,
                                     gaaw_sched_report_t *report)
{
  gaaw_status_t st = GAAW_SUCCESS;
  gaaw_sched_t *s = NULL;
  GAAW_ARG_NOT_NULL(ctx, out);
  *out = NULL;
  GAAW_CHECK(gaaw_sched_check(ctx, kind, p, m, v));
  GAAW_CHECK(gaaw_sched_create_empty(ctx, p, m, v, &s));
  s->kind = kind;
  for (int r = 0; r < p; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    switch (kind) {
    case GAAW_SCHED_GPIPE: SCHED_TRY(st, order_gpipe(ctx, rk, p, r, m), out); break;
    case GAAW_SCHED_1F1B: SCHED_TRY(st, order_1f1b(ctx, rk, p, r, m), out); break;
    case GAAW_SCHED_INTERLEAVED: SCHED_TRY(st, order_interleaved(ctx, rk, p, r, m, v), out); break;
    case GAAW_SCHED_ZB_H1: SCHED_TRY(st, order_zb_h1(ctx, rk, p, r, m), out); break;
    }
  }
  SCHED_TRY(st, attach_messages(ctx, s), out);
  SCHED_TRY(st, verify(ctx, s, NULL, NULL, 1), out);
  SCHED_TRY(st, gaaw_sched_verify(ctx, s, NULL, report), out);
  *out = s;
  s = NULL;
out:
  gaaw_sched_destroy(&s);
  return st;
}

gaaw_status_t gaaw_sched_create(gaaw_context_t ctx, int kind, int p, int m, int v, gaaw_sched_t **out)
{
  GAAW_CHECK(create_verified(ctx, kind, p, m, v, out, NULL));
  return GAAW_SUCCESS;
}

/* ------------------------------------------------------------------ verifier */

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

/* Where the verifier keeps its tables. Messages are numbered pair by pair: the k-th
 * send from a to b is the k-th receive at b from a. */
typedef struct {
  int p, m, v, nv;
  long total;     /* actions over all ranks */
  long *offset;   /* p+1: rank r's actions are offset[r] .. offset[r+1]-1 below */
  int *msg;       /* per action: its message, -1 for compute */
  int nmsg;
  unsigned char *state; /* m * v per rank, reused */
  int *in_msg;          /* m * v: the message bringing a unit's activation, its gradient (2 each) */
  int *wait;            /* per action: the message a compute action waits for, -1 for none */
  double *sent;         /* per message: when its send was posted, in the last simulation */
} verifier;

static void verifier_free(verifier *vf)
{
  free(vf->offset);
  free(vf->msg);
  free(vf->state);
  free(vf->in_msg);
  free(vf->wait);
  free(vf->sent);
}

#define ACTION_TEXT(a, buf) (gaaw_sched_action_text((a), (buf), sizeof(buf)), (buf))

/* The direction of a message from `from` to `to`: 0 towards from+1, 1 towards from-1
 * (with p = 2 both are the same rank, and the same direction 0). */
static int direction(int p, int from, int to)
{
  return to == (from + 1) % p ? 0 : 1;
}

/* 1. Each action on its own. */
static gaaw_status_t check_actions(gaaw_context_t ctx, const gaaw_sched_t *s)
{
  int p = s->pp, m = s->microbatches, v = s->virtual_stages, nv = p * v;
  char text[96];
  for (int r = 0; r < p; r++) {
    const gaaw_sched_rank_t *rk = &s->ranks[r];
    for (int i = 0; i < rk->count; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      GAAW_ARG_CHECK(ctx, a->op >= 0 && a->op < GAAW_SCHED_OP_COUNT, "schedule: rank %d action %d (%s): unknown op",
                     r, i, ACTION_TEXT(a, text));
      GAAW_ARG_CHECK(ctx, a->mb >= 0 && a->mb < m && a->chunk >= 0 && a->chunk < v,
                     "schedule: rank %d action %d (%s): microbatch not in 0..%d or chunk not in 0..%d", r, i,
                     ACTION_TEXT(a, text), m - 1, v - 1);
      if (is_compute(a->op)) {
        GAAW_ARG_CHECK(ctx, a->peer == -1, "schedule: rank %d action %d (%s): a compute action has peer %d, not -1",
                       r, i, ACTION_TEXT(a, text), a->peer);
        continue;
      }
      int vs = a->chunk * p + r;
      int other = a->op == GAAW_SCHED_SEND_ACT || a->op == GAAW_SCHED_RECV_GRAD ? vs + 1 : vs - 1;
      GAAW_ARG_CHECK(ctx, other >= 0 && other < nv,
                     "schedule: rank %d action %d (%s): virtual stage %d has no neighbour %d (stages 0..%d)", r, i,
                     ACTION_TEXT(a, text), vs, other, nv - 1);
      GAAW_ARG_CHECK(ctx, other % p != r,
                     "schedule: rank %d action %d (%s): virtual stage %d is on this rank too; no message is needed",
                     r, i, ACTION_TEXT(a, text), other);
      GAAW_ARG_CHECK(ctx, a->peer == other % p,
                     "schedule: rank %d action %d (%s): virtual stage %d is on rank %d, not on rank %d", r, i,
                     ACTION_TEXT(a, text), other, other % p, a->peer);
    }
  }
  return GAAW_SUCCESS;
}

/* 2. Sends and receives pair up, in order, with equal tags. */
static gaaw_status_t match_messages(gaaw_context_t ctx, const gaaw_sched_t *s, verifier *vf)
{
  gaaw_status_t st = GAAW_SUCCESS;
  int p = s->pp;
  char t1[96], t2[96];
  /* per pair (from, direction): counts, then lists of global action indices */
  long *nsend = calloc((size_t)p * 2 + 1, sizeof *nsend), *nrecv = calloc((size_t)p * 2 + 1, sizeof *nrecv);
  long *sends = NULL, *recvs = NULL, *fill_s = NULL, *fill_r = NULL;
  if (!nsend || !nrecv) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate pair tables");
    goto out;
  }
  long total_send = 0, total_recv = 0;
  for (int r = 0; r < p; r++)
    for (int i = 0; i < s->ranks[r].count; i++) {
      const gaaw_sched_action_t *a = &s->ranks[r].actions[i];
      if (is_compute(a->op)) continue;
      if (is_send(a->op))
        nsend[r * 2 + direction(p, r, a->peer) + 1]++, total_send++;
      else
        nrecv[a->peer * 2 + direction(p, a->peer, r) + 1]++, total_recv++;
    }
  for (int k = 1; k <= 2 * p; k++) nsend[k] += nsend[k - 1], nrecv[k] += nrecv[k - 1];
  sends = malloc(((size_t)total_send + 1) * sizeof *sends);
  recvs = malloc(((size_t)total_recv + 1) * sizeof *recvs);
  fill_s = malloc((size_t)p * 2 * sizeof *fill_s);
  fill_r = malloc((size_t)p * 2 * sizeof *fill_r);
  if (!sends || !recvs || !fill_s || !fill_r) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate %ld messages",
                          total_send);
    goto out;
  }
  memcpy(fill_s, nsend, (size_t)p * 2 * sizeof *fill_s);
  memcpy(fill_r, nrecv, (size_t)p * 2 * sizeof *fill_r);
  for (int r = 0; r < p; r++)
    for (int i = 0; i < s->ranks[r].count; i++) {
      const gaaw_sched_action_t *a = &s->ranks[r].actions[i];
      long g = vf->offset[r] + i;
      vf->msg[g] = -1;
      if (is_compute(a->op)) continue;
      if (is_send(a->op))
        sends[fill_s[r * 2 + direction(p, r, a->peer)]++] = g;
      else
        recvs[fill_r[a->peer * 2 + direction(p, a->peer, r)]++] = g;
    }
  /* global index -> (rank, index) */
#define RANK_OF(g, rr, ii)                                         \
  do {                                                             \
    rr = 0;                                                        \
    while (vf->offset[rr + 1] <= (g)) rr++;                        \
    ii = (int)((g) - vf->offset[rr]);                              \
  } while (0)
  vf->nmsg = 0;
  for (int from = 0; from < p; from++)
    for (int d = 0; d < 2; d++) {
      int k = from * 2 + d;
      long ns = nsend[k + 1] - nsend[k], nr = nrecv[k + 1] - nrecv[k];
      int to = d == 0 ? (from + 1) % p : (from - 1 + p) % p;
      for (long j = 0; j < (ns < nr ? ns : nr); j++) {
        long gs = sends[nsend[k] + j], gr = recvs[nrecv[k] + j];
        int ri, ii, rj, ij;
        RANK_OF(gs, ri, ii);
        RANK_OF(gr, rj, ij);
        const gaaw_sched_action_t *as = &s->ranks[ri].actions[ii], *ar = &s->ranks[rj].actions[ij];
        if (gaaw_sched_tag(s, ri, as) != gaaw_sched_tag(s, rj, ar)) {
          st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                                "schedule: rank %d action %d (%s) is message %ld from rank %d to rank %d, but rank "
                                "%d's receive number %ld from rank %d is action %d (%s): receives must come in the "
                                "order of the sends",
                                ri, ii, ACTION_TEXT(as, t1), j, from, to, rj, j, from, ij, ACTION_TEXT(ar, t2));
          goto out;
        }
        vf->msg[gs] = vf->msg[gr] = vf->nmsg;
        vf->nmsg++;
      }
      if (ns > nr) {
        int ri, ii;
        RANK_OF(sends[nsend[k] + nr], ri, ii);
        st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                              "schedule: rank %d action %d (%s) has no matching receive on rank %d (rank %d sends "
                              "%ld messages to rank %d, which posts %ld receives from it)",
                              ri, ii, ACTION_TEXT(&s->ranks[ri].actions[ii], t1), to, from, ns, to, nr);
        goto out;
      }
      if (nr > ns) {
        int rj, ij;
        RANK_OF(recvs[nrecv[k] + ns], rj, ij);
        st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                              "schedule: rank %d action %d (%s) has no matching send on rank %d (rank %d posts %ld "
                              "receives from rank %d, which sends %ld messages to it)",
                              rj, ij, ACTION_TEXT(&s->ranks[rj].actions[ij], t1), from, to, nr, from, ns);
        goto out;
      }
    }
#undef RANK_OF
out:
  free(nsend);
  free(nrecv);
  free(sends);
  free(recvs);
  free(fill_s);
  free(fill_r);
  return st;
}

enum { ST_F = 1, ST_B = 2, ST_W = 4, ST_FUSED = 8, ST_ACT_IN = 16, ST_GRAD_IN = 32, ST_ACT_OUT = 64, ST_GRAD_OUT = 128 };

/* 3. Dependencies on each rank, in list order; counts the activations in flight. */
static gaaw_status_t check_dependencies(gaaw_context_t ctx, gaaw_sched_t *s, verifier *vf)
{
  int p = s->pp, m = s->microbatches, v = s->virtual_stages, nv = p * v;
  char text[96];
  for (int r = 0; r < p; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    unsigned char *stt = vf->state;
    memset(stt, 0, (size_t)m * v);
    int in_flight = 0, peak = 0;
    for (int i = 0; i < rk->count; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      size_t unit = (size_t)a->mb * v + a->chunk;
      unsigned char *u = &stt[unit];
      long g = vf->offset[r] + i;
      vf->wait[g] = -1;
      int vs = a->chunk * p + r;
      const char *why = NULL;
      switch (a->op) {
      case GAAW_SCHED_F:
        if (*u & ST_F)
          why = "runs twice";
        else if (vs > 0 && (vs - 1) % p == r && !(stt[(size_t)a->mb * v + a->chunk - 1] & ST_F))
          why = "comes before the forward of the previous chunk on this rank";
        else if (vs > 0 && (vs - 1) % p != r && !(*u & ST_ACT_IN))
          why = "comes before the receive of its input activation";
        else if (vs > 0 && (vs - 1) % p != r)
          vf->wait[g] = vf->in_msg[2 * unit];
        *u |= ST_F;
        if (++in_flight > peak) peak = in_flight;
        break;
      case GAAW_SCHED_B:
      case GAAW_SCHED_BW:
        if (!(*u & ST_F))
          why = "comes before the forward of its microbatch";
        else if (*u & ST_B)
          why = "computes the input gradient of this microbatch and chunk a second time";
        else if (vs + 1 < nv && (vs + 1) % p == r && !(stt[(size_t)a->mb * v + a->chunk + 1] & ST_B))
          why = "comes before the input gradient of the next chunk on this rank";
        else if (vs + 1 < nv && (vs + 1) % p != r && !(*u & ST_GRAD_IN))
          why = "comes before the receive of its output gradient";
        else if (vs + 1 < nv && (vs + 1) % p != r)
          vf->wait[g] = vf->in_msg[2 * unit + 1];
        *u |= ST_B;
        if (a->op == GAAW_SCHED_BW) {
          if (!why && (*u & ST_W)) why = "comes after this microbatch's weight gradient";
          *u |= ST_W | ST_FUSED;
          in_flight--;
        }
        break;
      case GAAW_SCHED_W:
        if (*u & ST_FUSED)
          why = "repeats the weight gradient of a fused BW";
        else if (*u & ST_W)
          why = "runs twice";
        else if (!(*u & ST_B))
          why = "comes before its B (input gradient)";
        *u |= ST_W;
        in_flight--;
        break;
      case GAAW_SCHED_SEND_ACT:
      case GAAW_SCHED_SEND_GRAD: {
        int act = a->op == GAAW_SCHED_SEND_ACT;
        unsigned char made = act ? ST_F : ST_B, sent = act ? ST_ACT_OUT : ST_GRAD_OUT;
        if (!(*u & made))
          why = act ? "comes before the forward that produces it" : "comes before the backward that produces it";
        else if (*u & sent)
          why = "sends twice";
        *u |= sent;
        break;
      }
      case GAAW_SCHED_RECV_ACT:
      case GAAW_SCHED_RECV_GRAD: {
        int grad = a->op == GAAW_SCHED_RECV_GRAD;
        unsigned char got = grad ? ST_GRAD_IN : ST_ACT_IN;
        if (*u & got) why = "receives twice";
        *u |= got;
        vf->in_msg[2 * unit + grad] = vf->msg[g];
        break;
      }
      }
      if (why)
        GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "schedule: rank %d action %d (%s) %s", r, i, ACTION_TEXT(a, text), why);
    }
    for (int mb = 0; mb < m; mb++)
      for (int c = 0; c < v; c++) {
        unsigned char u = stt[(size_t)mb * v + c];
        const char *missing = !(u & ST_F) ? "F" : !(u & ST_B) ? "B" : !(u & ST_W) ? "W" : NULL;
        GAAW_ARG_CHECK(ctx, missing == NULL, "schedule: rank %d never runs %s mb %d chunk %d (%d actions)", r,
                       missing, mb, c, rk->count);
      }
    rk->peak_in_flight = peak;
  }
  return GAAW_SUCCESS;
}

/* The end (one past) of the exchange that starts at action i of rank r. */
static int exchange_end(const gaaw_sched_rank_t *rk, int i)
{
  while (i < rk->count && !is_compute(rk->actions[i].op)) i++;
  return i;
}

static double cost_of(const gaaw_sched_cost_t *c, int op)
{
  switch (op) {
  case GAAW_SCHED_F: return c->f;
  case GAAW_SCHED_B: return c->b;
  case GAAW_SCHED_W: return c->w;
  case GAAW_SCHED_BW: return c->b + c->w;
  }
  return 0;
}

/* 4 and 5. Runs every rank's list as the executor does (see schedule.h): a compute
 * action waits for the message its input comes by; an exchange posts its receives
 * and sends, then waits until the receiver of each of its sends has posted the
 * receive (blocking rendezvous; eager: sends complete when posted, as a buffered
 * send would, which only the generators use). A data transfer starts once both ends
 * are posted and takes p2p. A rank that can never go on is a deadlock, named with
 * the action each waiting rank is stuck at. */
static gaaw_status_t simulate(gaaw_context_t ctx, gaaw_sched_t *s, verifier *vf, const gaaw_sched_cost_t *c,
                              int eager)
{
  gaaw_status_t st = GAAW_SUCCESS;
  int p = s->pp;
  int *pos = calloc((size_t)p, sizeof *pos), *resume = malloc((size_t)p * sizeof *resume);
  int *waiting = malloc((size_t)p * sizeof *waiting), *queue = malloc((size_t)p * sizeof *queue);
  double *t = calloc((size_t)p, sizeof *t), *gend = calloc((size_t)p, sizeof *gend);
  double *posted_recv = malloc(((size_t)vf->nmsg + 1) * sizeof *posted_recv);
  free(vf->sent);
  double *sent = vf->sent = malloc(((size_t)vf->nmsg + 1) * sizeof *sent);
  if (!pos || !resume || !waiting || !queue || !t || !gend || !posted_recv || !sent) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate the simulation");
    goto out;
  }
  for (int i = 0; i < vf->nmsg; i++) sent[i] = posted_recv[i] = -1;
  for (int r = 0; r < p; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    free(rk->start);
    rk->start = malloc(((size_t)rk->count + 1) * sizeof *rk->start);
    if (!rk->start) {
      st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate start times");
      goto out;
    }
    rk->busy = 0;
    resume[r] = -1;
  }
  /* queue: ranks that may go on; waiting[r]: the message r is stuck on, -1 none, -2 queued */
  int nq = 0;
  for (int r = 0; r < p; r++) {
    queue[nq++] = r;
    waiting[r] = -2;
  }
#define WAKE(peer, msg)                     \
  do {                                      \
    if (waiting[peer] == (msg)) {           \
      waiting[peer] = -2;                   \
      queue[nq++] = (peer);                 \
    }                                       \
  } while (0)
  while (nq > 0) {
    int r = queue[--nq];
    gaaw_sched_rank_t *rk = &s->ranks[r];
    const long off = vf->offset[r];
    waiting[r] = -1;
    while (pos[r] < rk->count) {
      const gaaw_sched_action_t *a = &rk->actions[pos[r]];
      if (is_compute(a->op)) {
        int w = vf->wait[off + pos[r]];
        double ready = t[r];
        if (w >= 0) {
          if (sent[w] < 0) {
            waiting[r] = w;
            break;
          }
          double arrive = (sent[w] > posted_recv[w] ? sent[w] : posted_recv[w]) + c->p2p;
          if (arrive > ready) ready = arrive;
        }
        double d = cost_of(c, a->op);
        rk->start[pos[r]] = ready;
        t[r] = ready + d;
        rk->busy += d;
        pos[r]++;
        continue;
      }
      int e = exchange_end(rk, pos[r]), i;
      if (resume[r] < 0) { /* entering: post everything */
        gend[r] = t[r];
        for (i = pos[r]; i < e; i++) {
          int msg = vf->msg[off + i], peer = rk->actions[i].peer;
          rk->start[i] = t[r];
          if (is_send(rk->actions[i].op))
            sent[msg] = t[r];
          else
            posted_recv[msg] = t[r];
          WAKE(peer, msg);
        }
        resume[r] = pos[r];
      }
      for (i = resume[r]; i < e && !eager; i++) {
        if (!is_send(rk->actions[i].op)) continue;
        int msg = vf->msg[off + i];
        if (posted_recv[msg] < 0) break;
        if (posted_recv[msg] > gend[r]) gend[r] = posted_recv[msg];
      }
      if (i < e && !eager) {
        resume[r] = i;
        waiting[r] = vf->msg[off + i];
        break;
      }
      resume[r] = -1;
      t[r] = gend[r];
      pos[r] = e;
    }
  }
#undef WAKE
  int stuck = 0;
  char list[1024];
  size_t len = 0;
  list[0] = '\0';
  for (int r = 0; r < p; r++) {
    const gaaw_sched_rank_t *rk = &s->ranks[r];
    if (pos[r] >= rk->count) continue;
    int i = resume[r] >= 0 ? resume[r] : pos[r];
    char text[96];
    if (++stuck <= 8 && len < sizeof list - 1) {
      int n = snprintf(list + len, sizeof list - len, "%srank %d waits at action %d (%s)", stuck > 1 ? ", " : "", r,
                       i, ACTION_TEXT(&rk->actions[i], text));
      if (n > 0) len += (size_t)n < sizeof list - len ? (size_t)n : sizeof list - len - 1;
    }
  }
  if (stuck) {
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "schedule: deadlock under blocking rendezvous: %s%s", list, stuck > 8 ? ", ..." : "");
    goto out;
  }
  for (int r = 0; r < p; r++) s->ranks[r].end = t[r];
out:
  free(pos);
  free(resume);
  free(waiting);
  free(queue);
  free(t);
  free(gend);
  free(posted_recv);
  return st;
}

/* Moves each receive of the generated lists (first placed right before the action
 * that needs it) to the last exchange that, in the run with buffered sends and unit
 * costs, starts no later than its send: every send then finds its receive posted, so
 * the rendezvous run takes exactly the times of the buffered one and cannot deadlock
 * (with receives posted only right before use, a rank blocked sending to a peer
 * that is blocked sending back deadlocks interleaved schedules). A receive moves no
 * earlier than needed, as its buffer is taken from the moment it is posted. */
static gaaw_status_t place_receives(gaaw_context_t ctx, gaaw_sched_t *s, verifier *vf)
{
  gaaw_status_t st = GAAW_SUCCESS;
  int *target = NULL, *bucket = NULL, *cons = malloc(((size_t)vf->nmsg + 1) * sizeof *cons);
  double *cstart = NULL;
  gaaw_sched_action_t *out = NULL;
  if (!cons) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot place %d receives", vf->nmsg);
  for (int r = 0; r < s->pp; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    int n = rk->count, nc = 0;
    free(cstart);
    free(target);
    free(bucket);
    free(out);
    cstart = malloc(((size_t)n + 1) * sizeof *cstart);
    target = malloc(((size_t)n + 1) * sizeof *target);
    bucket = calloc((size_t)n + 2, sizeof *bucket);
    out = malloc(((size_t)n + 1) * sizeof *out);
    if (!cstart || !target || !bucket || !out) {
      st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot place receives");
      goto done;
    }
    /* cstart[k]: when exchange k (the one before compute action k) starts, that is
     * when compute action k-1 ends (0 for k = 0) */
    cstart[0] = 0;
    for (int i = 0; i < n; i++)
      if (is_compute(rk->actions[i].op)) {
        nc++;
        cstart[nc] = rk->start[i] + cost_of(&s->costs, rk->actions[i].op);
      }
    /* cons[msg]: the compute action (by number) that waits for message msg */
    for (int i = 0, k = 0; i < n; i++)
      if (is_compute(rk->actions[i].op)) {
        int w = vf->wait[vf->offset[r] + i];
        if (w >= 0) cons[w] = k;
        k++;
      }
    int prev_k[2] = {0, 0}, prev_cons[2] = {-1, -1}; /* per peer (r+1, r-1) */
    /* target[i]: the compute action (by its number among them) a receive goes before */
    for (int i = 0, k = 0; i < n; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      if (is_compute(a->op)) {
        k++;
        continue;
      }
      if (is_send(a->op)) continue;
      int msg = vf->msg[vf->offset[r] + i], sl = a->peer == (r + 1) % s->pp ? 0 : 1;
      double te = vf->sent[msg];
      int lo = 0, hi = k; /* the last exchange in 0..k starting at or before te */
      while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (cstart[mid] <= te)
          lo = mid;
        else
          hi = mid - 1;
      }
      /* or earlier: right after the previous message from this peer was consumed, so
       * that other costs than unit ones rarely find a send without its receive */
      int after_previous = prev_k[sl] > prev_cons[sl] + 1 ? prev_k[sl] : prev_cons[sl] + 1;
      if (after_previous < lo) lo = after_previous;
      prev_k[sl] = lo;
      prev_cons[sl] = cons[msg];
      target[i] = lo;
      bucket[lo + 1]++;
    }
    for (int k = 1; k <= nc + 1; k++) bucket[k] += bucket[k - 1];
    /* receives in list order into their buckets; then compute actions with the sends after them */
    int nrecv = bucket[nc + 1];
    gaaw_sched_action_t *recvs = out;
    for (int i = 0; i < n; i++)
      if (!is_compute(rk->actions[i].op) && !is_send(rk->actions[i].op)) recvs[bucket[target[i]]++] = rk->actions[i];
    /* bucket[k] is now the end of bucket k; rebuild the list */
    gaaw_sched_action_t *list = malloc(((size_t)n + 1) * sizeof *list);
    if (!list) {
      st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot place receives");
      goto done;
    }
    int len = 0, k = 0, from = 0;
    for (int i = 0; i < n; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      if (is_compute(a->op)) {
        for (; from < bucket[k]; from++) list[len++] = recvs[from];
        list[len++] = *a;
        k++;
      } else if (is_send(a->op))
        list[len++] = *a;
    }
    for (; from < nrecv; from++) list[len++] = recvs[from];
    free(rk->actions);
    rk->actions = list;
    rk->capacity = n + 1;
  }
done:
  free(cons);
  free(cstart);
  free(target);
  free(bucket);
  free(out);
  return st;
}

/* The checks of gaaw_sched_verify; with generating set, simulates with buffered sends
 * and places the receives (see place_receives) instead of reporting. */
static gaaw_status_t verify(gaaw_context_t ctx, gaaw_sched_t *s, const gaaw_sched_cost_t *costs,
                            gaaw_sched_report_t *report, int generating)
{
  gaaw_status_t st = GAAW_SUCCESS;
  verifier vf = {0};
  const gaaw_sched_cost_t unit = {.f = 1, .b = 1, .w = 1, .p2p = 0};
  GAAW_ARG_NOT_NULL(ctx, s);
  GAAW_CHECK(check_sizes(ctx, s->pp, s->microbatches, s->virtual_stages));
  GAAW_ARG_NOT_NULL(ctx, s->ranks);
  const gaaw_sched_cost_t *c = costs ? costs : &unit;
  GAAW_ARG_CHECK(ctx,
                 isfinite(c->f) && isfinite(c->b) && isfinite(c->w) && isfinite(c->p2p) && c->f >= 0 && c->b >= 0 &&
                     c->w >= 0 && c->p2p >= 0,
                 "schedule costs must be finite and >= 0 (f %g, b %g, w %g, p2p %g)", c->f, c->b, c->w, c->p2p);
  vf.p = s->pp;
  vf.m = s->microbatches;
  vf.v = s->virtual_stages;
  vf.nv = vf.p * vf.v;
  vf.offset = malloc(((size_t)vf.p + 1) * sizeof *vf.offset);
  if (!vf.offset) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate the verifier");
    goto out;
  }
  vf.offset[0] = 0;
  for (int r = 0; r < vf.p; r++) {
    if (s->ranks[r].count > 0 && !s->ranks[r].actions) {
      st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                            "schedule: rank %d has %d actions but no list", r, s->ranks[r].count);
      goto out;
    }
    vf.offset[r + 1] = vf.offset[r] + s->ranks[r].count;
  }
  vf.total = vf.offset[vf.p];
  vf.msg = malloc(((size_t)vf.total + 1) * sizeof *vf.msg);
  vf.state = malloc((size_t)vf.m * vf.v);
  vf.in_msg = malloc((size_t)vf.m * vf.v * 2 * sizeof *vf.in_msg);
  vf.wait = malloc(((size_t)vf.total + 1) * sizeof *vf.wait);
  if (!vf.msg || !vf.state || !vf.in_msg || !vf.wait) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                          "cannot allocate the verifier (%ld actions)", vf.total);
    goto out;
  }
  SCHED_TRY(st, check_actions(ctx, s), out);
  SCHED_TRY(st, match_messages(ctx, s, &vf), out);
  SCHED_TRY(st, check_dependencies(ctx, s, &vf), out);
  SCHED_TRY(st, simulate(ctx, s, &vf, c, generating), out);
  s->costs = *c;
  if (generating) {
    SCHED_TRY(st, place_receives(ctx, s, &vf), out);
    goto out;
  }
  if (report) {
    gaaw_sched_report_t rep = {0};
    for (int r = 0; r < vf.p; r++) {
      if (s->ranks[r].end > rep.makespan) rep.makespan = s->ranks[r].end;
      rep.busy += s->ranks[r].busy;
      if (s->ranks[r].peak_in_flight > rep.peak_in_flight) rep.peak_in_flight = s->ranks[r].peak_in_flight;
    }
    rep.idle = vf.p * rep.makespan - rep.busy;
    rep.bubble = rep.makespan > 0 ? rep.idle / (vf.p * rep.makespan) : 0;
    rep.actions = vf.total;
    *report = rep;
  }
out:
  verifier_free(&vf);
  return st;
}

gaaw_status_t gaaw_sched_verify(gaaw_context_t ctx, gaaw_sched_t *s, const gaaw_sched_cost_t *costs,
                                gaaw_sched_report_t *report)
{
  GAAW_CHECK(verify(ctx, s, costs, report, 0));
  return GAAW_SUCCESS;
}

/* ------------------------------------------------------------------ timeline */

/* Text that counts what does not fit. */
typedef struct {
  char *buf;
  size_t len, n;
} writer;

static void out_printf(writer *w, const char *fmt, ...) GAAW_PRINTF(2, 3);
static void out_printf(writer *w, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  size_t room = w->buf && w->n < w->len ? w->len - w->n : 0;
  int k = vsnprintf(room ? w->buf + w->n : NULL, room, fmt, ap);
  va_end(ap);
  if (k > 0) w->n += (size_t)k;
}

static int label(const gaaw_sched_t *s, const gaaw_sched_action_t *a, char *text, size_t len)
{
  if (s->virtual_stages > 1) return snprintf(text, len, "%s%d.%d", op_names[a->op], a->mb, a->chunk);
  return snprintf(text, len, "%s%d", op_names[a->op], a->mb);
}

gaaw_status_t gaaw_sched_timeline(gaaw_context_t ctx, const gaaw_sched_t *s, char *text, size_t len, size_t *needed)
{
  GAAW_ARG_NOT_NULL(ctx, s);
  GAAW_ARG_CHECK(ctx, text != NULL || len == 0, "timeline: text is NULL but len is %zu", len);
  int p = s->pp;
  double makespan = 0;
  int width = 2;
  char cell[32];
  for (int r = 0; r < p; r++) {
    const gaaw_sched_rank_t *rk = &s->ranks[r];
    GAAW_ARG_CHECK(ctx, rk->count == 0 || rk->start, "timeline: rank %d has no times (verify the schedule first)", r);
    for (int i = 0; i < rk->count; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      if (!is_compute(a->op)) continue;
      GAAW_ARG_CHECK(ctx, rk->start[i] == floor(rk->start[i]) && rk->start[i] < 1e8,
                     "timeline: rank %d action %d starts at %g, not a whole time unit (verify with integer costs)", r,
                     i, rk->start[i]);
      int k = label(s, a, cell, sizeof cell);
      if (k + 1 > width) width = k + 1;
    }
    if (rk->end > makespan) makespan = rk->end;
  }
  GAAW_ARG_CHECK(ctx, makespan == floor(makespan), "timeline: the makespan %g is not a whole number of time units",
                 makespan);
  for (int op = GAAW_SCHED_F; op <= GAAW_SCHED_BW; op++)
    GAAW_ARG_CHECK(ctx, cost_of(&s->costs, op) == floor(cost_of(&s->costs, op)),
                   "timeline: the costs verified with are not whole time units (%s costs %g)", op_names[op],
                   cost_of(&s->costs, op));
  long slots = (long)makespan;
  int *row = malloc(((size_t)slots + 1) * sizeof *row);
  if (!row) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "timeline: cannot allocate %ld slots", slots);
  int rdig = snprintf(NULL, 0, "%d", p - 1);
  writer w = {.buf = text, .len = len, .n = 0};
  out_printf(&w, "schedule %s: pp %d, microbatches %d, virtual stages %d; one column per time unit\n",
             s->kind >= 0 ? gaaw_sched_kind_name(s->kind) : "(by hand)", p, s->microbatches, s->virtual_stages);
  out_printf(&w,
             "F forward, B input gradient, W weight gradient, BW both (fused), then the microbatch%s; ~ the same "
             "action continues, . idle\n",
             s->virtual_stages > 1 ? " and .chunk" : "");
  out_printf(&w, "%-*s |", rdig + 5, "time");
  for (long t = 0, col = 0; t < slots; t += 5) {
    long at = t * width;
    if (col > at) continue;
    int k = snprintf(cell, sizeof cell, "%ld", t);
    out_printf(&w, "%*s%s", (int)(at - col), "", cell);
    col = at + k;
  }
  out_printf(&w, "\n");
  for (int r = 0; r < p; r++) {
    const gaaw_sched_rank_t *rk = &s->ranks[r];
    for (long t = 0; t < slots; t++) row[t] = -1;
    for (int i = 0; i < rk->count; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      if (!is_compute(a->op)) continue;
      long t0 = (long)rk->start[i], d = (long)cost_of(&s->costs, a->op);
      for (long t = t0; t < t0 + d && t < slots; t++) row[t] = t == t0 ? i : -2;
    }
    out_printf(&w, "rank %*d |", rdig, r);
    for (long t = 0; t < slots; t++) {
      if (row[t] >= 0)
        label(s, &rk->actions[row[t]], cell, sizeof cell);
      else
        snprintf(cell, sizeof cell, "%s", row[t] == -2 ? "~" : ".");
      out_printf(&w, "%-*s", t + 1 < slots ? width : 0, cell); /* no blanks at the end */
    }
    out_printf(&w, "\n");
  }
  free(row);
  if (needed) *needed = w.n + 1;
  if (len > 0 && w.n + 1 > len)
    GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "timeline: the text needs %zu bytes, the buffer has %zu", w.n + 1, len);
  return GAAW_SUCCESS;
}

/* ------------------------------------------------------------------ public API */

static gaaw_status_t create_named(const char *name, int pp, int m, int v, gaaw_sched_t **s,
                                  gaaw_sched_report_t *report)
{
  gaaw_context_t ctx = NULL; /* the thread's record, as gaaw_config_* */
  gaaw_sched_kind_t kind;
  GAAW_CHECK(gaaw_sched_kind_parse(ctx, name, &kind));
  GAAW_CHECK(create_verified(ctx, kind, pp, m, v, s, report));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_schedule_summary(const char *name, int pp, int microbatches, int virtual_stages,
                                    gaaw_schedule_summary_t *summary)
{
  gaaw_context_t ctx = NULL;
  gaaw_sched_t *s = NULL;
  gaaw_sched_report_t rep;
  GAAW_ARG_NOT_NULL(ctx, summary);
  memset(summary, 0, sizeof *summary);
  GAAW_CHECK(create_named(name, pp, microbatches, virtual_stages, &s, &rep));
  *summary = (gaaw_schedule_summary_t){.pp = pp,
                                       .microbatches = microbatches,
                                       .virtual_stages = virtual_stages,
                                       .peak_in_flight = rep.peak_in_flight,
                                       .makespan = rep.makespan,
                                       .idle = rep.idle,
                                       .bubble = rep.bubble,
                                       .actions = rep.actions};
  gaaw_sched_destroy(&s);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_schedule_peak_in_flight(const char *name, int pp, int microbatches, int virtual_stages, int *peak,
                                           int len)
{
  gaaw_context_t ctx = NULL;
  gaaw_sched_t *s = NULL;
  GAAW_ARG_NOT_NULL(ctx, peak);
  GAAW_ARG_CHECK(ctx, len >= pp, "peak has %d entries, fewer than pp (%d)", len, pp);
  GAAW_CHECK(create_named(name, pp, microbatches, virtual_stages, &s, NULL));
  for (int r = 0; r < pp; r++) peak[r] = s->ranks[r].peak_in_flight;
  gaaw_sched_destroy(&s);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_schedule_timeline(const char *name, int pp, int microbatches, int virtual_stages, char *text,
                                     size_t len, size_t *needed)
{
  gaaw_context_t ctx = NULL;
  gaaw_sched_t *s = NULL;
  if (needed) *needed = 0;
  if (text && len > 0) text[0] = '\0';
  GAAW_ARG_CHECK(ctx, text != NULL || len == 0, "timeline: text is NULL but len is %zu", len);
  GAAW_CHECK(create_named(name, pp, microbatches, virtual_stages, &s, NULL));
  gaaw_status_t st = gaaw_sched_timeline(ctx, s, text, len, needed);
  gaaw_sched_destroy(&s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
