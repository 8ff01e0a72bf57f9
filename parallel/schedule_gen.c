/* Pipeline schedules, the generators: each one's compute order (GPipe, 1F1B,
 * interleaved 1F1B, ZB-H1), the sends and receives added to it (attach_messages),
 * the receives then moved to where a run with buffered sends posts them in time
 * (place_receives), and gaaw_sched_create, which generates and verifies; with them
 * the functions of the public gaaw/schedule.h, built on gaaw_sched_create. Calls
 * schedule_verify.c, schedule_sim.c and schedule_data.c (see schedule_impl.h); the
 * semantics are in schedule.h. */
#include <stdlib.h>
#include <string.h>

#include "gaaw/schedule.h"
#include "parallel/schedule_impl.h"

/* ------------------------------------------------------------------ compute orders */

/* The compute order of each generator, on rank r. The lists hold compute actions
 * only; attach_messages adds the sends and receives. */
static gaaw_status_t push(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int op, int mb, int chunk)
{
  GAAW_CHECK(gaaw_sched_reserve(ctx, rk, rk->count + 1));
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

/* ------------------------------------------------------------------ the messages */

/* Where each unit's F and B (or BW) stand in its rank's compute list: fpos[u] and
 * bpos[u], u = r * units + mb * v + chunk. */
static void index_compute(const gaaw_sched_t *s, size_t units, int *fpos, int *bpos)
{
  int v = s->virtual_stages;
  for (int r = 0; r < s->pp; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    for (int i = 0; i < rk->count; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      size_t u = (size_t)r * units + (size_t)a->mb * v + a->chunk;
      if (a->op == GAAW_SCHED_F) fpos[u] = i;
      if (a->op == GAAW_SCHED_B || a->op == GAAW_SCHED_BW) bpos[u] = i;
    }
  }
}

/* The messages from rank src to rank dst, in send order, into rv from rv[nmsg] on,
 * each receive going no later than the receive of any later message of the pair.
 * Returns the count of messages in rv afterwards. */
static size_t collect_pair(const gaaw_sched_t *s, int src, int dst, size_t units, const int *fpos, const int *bpos,
                           pending_recv *rv, size_t nmsg)
{
  int p = s->pp, v = s->virtual_stages, nv = p * v;
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
    if (to % p != dst) continue;
    size_t u = (size_t)(to % p) * units + (size_t)a->mb * v + to / p;
    rv[nmsg++] = (pending_recv){.dst = to % p, .pos = op == GAAW_SCHED_RECV_ACT ? fpos[u] : bpos[u],
                                .op = op, .mb = a->mb, .chunk = to / p, .src = src};
  }
  /* no later than the receive of any later message of this pair */
  for (size_t j = nmsg; j-- > first + 1;)
    if (rv[j].pos < rv[j - 1].pos) rv[j - 1].pos = rv[j].pos;
  return nmsg;
}

/* Every message into rv, pair by pair in send order: pairs (src, towards src+1) and
 * (src, towards src-1); with p = 2 both are one pair, so each source's list is walked
 * once per destination, taking the messages going there. Returns their count. */
static size_t collect_messages(const gaaw_sched_t *s, size_t units, const int *fpos, const int *bpos,
                               pending_recv *rv)
{
  int p = s->pp;
  size_t nmsg = 0;
  for (int src = 0; src < p; src++) {
    int dsts[2] = {(src + 1) % p, (src - 1 + p) % p};
    for (int d = 0; d < (dsts[0] == dsts[1] ? 1 : 2); d++)
      nmsg = collect_pair(s, src, dsts[d], units, fpos, bpos, rv, nmsg);
  }
  return nmsg;
}

/* The receives in (destination, position) order, a stable counting sort, so that
 * each pair keeps its send order among receives placed before the same action:
 * *order gets the indices into rv, inside *keys (the bucket starts, then the order),
 * which the caller frees. */
static gaaw_status_t sort_receives(gaaw_context_t ctx, const gaaw_sched_t *s, const pending_recv *rv, size_t nmsg,
                                   int **keys, int **order)
{
  int maxcount = 0;
  for (int r = 0; r < s->pp; r++)
    if (s->ranks[r].count > maxcount) maxcount = s->ranks[r].count;
  size_t nkeys = (size_t)s->pp * (size_t)(maxcount + 1);
  int *key = *keys = calloc(nkeys + 1 + nmsg, sizeof *key); /* nkeys+1 bucket starts, then the order */
  if (!key) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot sort %zu messages", nmsg);
  int *ord = *order = key + nkeys + 1;
  for (size_t j = 0; j < nmsg; j++) key[(size_t)rv[j].dst * (maxcount + 1) + rv[j].pos + 1]++;
  for (size_t k = 1; k <= nkeys; k++) key[k] += key[k - 1];
  for (size_t j = 0; j < nmsg; j++) ord[key[(size_t)rv[j].dst * (maxcount + 1) + rv[j].pos]++] = (int)j;
  return GAAW_SUCCESS;
}

/* Rank r's full list into fr: each compute action of its list preceded by the
 * receives placed before it (the sorted ones from order[*next] on) and followed by
 * the send of what it produces, where that goes to another stage. */
static gaaw_status_t merge_rank(gaaw_context_t ctx, const gaaw_sched_t *s, int r, const pending_recv *rv,
                                const int *order, size_t nmsg, size_t *next, gaaw_sched_rank_t *fr)
{
  int p = s->pp, nv = p * s->virtual_stages;
  const gaaw_sched_rank_t *rk = &s->ranks[r];
  for (int i = 0; i < rk->count; i++) {
    for (; *next < nmsg && rv[order[*next]].dst == r && rv[order[*next]].pos == i; ++*next) {
      const pending_recv *q = &rv[order[*next]];
      GAAW_CHECK(gaaw_sched_reserve(ctx, fr, fr->count + 1));
      fr->actions[fr->count++] = (gaaw_sched_action_t){.op = q->op, .mb = q->mb, .chunk = q->chunk, .peer = q->src};
    }
    const gaaw_sched_action_t *a = &rk->actions[i];
    GAAW_CHECK(gaaw_sched_reserve(ctx, fr, fr->count + 2));
    fr->actions[fr->count++] = *a;
    int vs = a->chunk * p + r;
    if (a->op == GAAW_SCHED_F && vs + 1 < nv)
      fr->actions[fr->count++] =
          (gaaw_sched_action_t){.op = GAAW_SCHED_SEND_ACT, .mb = a->mb, .chunk = a->chunk, .peer = (vs + 1) % p};
    else if ((a->op == GAAW_SCHED_B || a->op == GAAW_SCHED_BW) && vs > 0)
      fr->actions[fr->count++] =
          (gaaw_sched_action_t){.op = GAAW_SCHED_SEND_GRAD, .mb = a->mb, .chunk = a->chunk, .peer = (vs - 1) % p};
  }
  return GAAW_SUCCESS;
}

/* Turns compute-only lists into full ones: each send right after the action that
 * produces it; each receive before the action that consumes it, moved earlier where
 * needed so that a rank receives from a peer in the order that peer sends (a receive
 * goes no later than any receive of a later message of the same pair). Sends after
 * one compute action and receives before the next one form one exchange. The timed
 * run of these lists then tells place_receives where the receives are posted. */
static gaaw_status_t attach_messages(gaaw_context_t ctx, gaaw_sched_t *s)
{
  gaaw_status_t st = GAAW_SUCCESS;
  int p = s->pp, v = s->virtual_stages, m = s->microbatches;
  size_t units = (size_t)m * v;
  int *fpos = NULL, *bpos = NULL, *key = NULL, *order = NULL;
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
  index_compute(s, units, fpos, bpos);
  size_t nmsg = collect_messages(s, units, fpos, bpos, rv);
  SCHED_TRY(st, sort_receives(ctx, s, rv, nmsg, &key, &order), out);
  size_t next = 0;
  for (int r = 0; r < p; r++) SCHED_TRY(st, merge_rank(ctx, s, r, rv, order, nmsg, &next, &full[r]), out);
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

/* ------------------------------------------------------------------ placing the receives */

/* cstart[k]: when exchange k (the one before compute action k) starts in the last
 * run, that is when compute action k-1 ends (0 for k = 0). Returns the number of
 * compute actions. */
static int exchange_starts(const gaaw_sched_t *s, const gaaw_sched_rank_t *rk, double *cstart)
{
  int nc = 0;
  cstart[0] = 0;
  for (int i = 0; i < rk->count; i++)
    if (gaaw_sched_is_compute(rk->actions[i].op)) {
      nc++;
      cstart[nc] = rk->start[i] + gaaw_sched_cost_of(&s->costs, rk->actions[i].op);
    }
  return nc;
}

/* cons[msg]: the compute action of rank r (by its number among them) that waits for
 * message msg. */
static void consumers(const gaaw_sched_verifier *vf, int r, const gaaw_sched_rank_t *rk, int *cons)
{
  for (int i = 0, k = 0; i < rk->count; i++)
    if (gaaw_sched_is_compute(rk->actions[i].op)) {
      int w = vf->wait[vf->offset[r] + i];
      if (w >= 0) cons[w] = k;
      k++;
    }
}

/* The last exchange in 0..k starting at or before te (cstart ascending). */
static int last_exchange_by(const double *cstart, int k, double te)
{
  int lo = 0, hi = k;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (cstart[mid] <= te)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* target[i]: the exchange (by the number of the compute action after it) receive i
 * of rank r moves to: the last one starting no later than its send, or earlier, right
 * after the previous message from the same peer was consumed; counted in
 * bucket[target + 1]. */
static void receive_targets(const gaaw_sched_t *s, const gaaw_sched_verifier *vf, int r, const double *cstart,
                            const int *cons, int *target, int *bucket)
{
  const gaaw_sched_rank_t *rk = &s->ranks[r];
  int prev_k[2] = {0, 0}, prev_cons[2] = {-1, -1}; /* per peer (r+1, r-1) */
  for (int i = 0, k = 0; i < rk->count; i++) {
    const gaaw_sched_action_t *a = &rk->actions[i];
    if (gaaw_sched_is_compute(a->op)) {
      k++;
      continue;
    }
    if (gaaw_sched_is_send(a->op)) continue;
    int msg = vf->msg[vf->offset[r] + i], sl = a->peer == (r + 1) % s->pp ? 0 : 1;
    int lo = last_exchange_by(cstart, k, vf->sent[msg]);
    /* or earlier: right after the previous message from this peer was consumed, so
     * that other costs than unit ones rarely find a send without its receive */
    int after_previous = prev_k[sl] > prev_cons[sl] + 1 ? prev_k[sl] : prev_cons[sl] + 1;
    if (after_previous < lo) lo = after_previous;
    prev_k[sl] = lo;
    prev_cons[sl] = cons[msg];
    target[i] = lo;
    bucket[lo + 1]++;
  }
}

/* Rebuilds rk's list: its compute actions and sends in order, the receives of
 * bucket k (counted by receive_targets; nc compute actions) right before compute
 * action k, those of the last bucket at the end. recvs: room for the receives. */
static gaaw_status_t rebuild_list(gaaw_context_t ctx, gaaw_sched_rank_t *rk, const int *target, int *bucket, int nc,
                                  gaaw_sched_action_t *recvs)
{
  int n = rk->count;
  for (int k = 1; k <= nc + 1; k++) bucket[k] += bucket[k - 1];
  /* receives in list order into their buckets; then compute actions with the sends after them */
  int nrecv = bucket[nc + 1];
  for (int i = 0; i < n; i++)
    if (!gaaw_sched_is_compute(rk->actions[i].op) && !gaaw_sched_is_send(rk->actions[i].op))
      recvs[bucket[target[i]]++] = rk->actions[i];
  /* bucket[k] is now the end of bucket k; rebuild the list */
  gaaw_sched_action_t *list = malloc(((size_t)n + 1) * sizeof *list);
  if (!list) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot place receives");
  int len = 0, k = 0, from = 0;
  for (int i = 0; i < n; i++) {
    const gaaw_sched_action_t *a = &rk->actions[i];
    if (gaaw_sched_is_compute(a->op)) {
      for (; from < bucket[k]; from++) list[len++] = recvs[from];
      list[len++] = *a;
      k++;
    } else if (gaaw_sched_is_send(a->op))
      list[len++] = *a;
  }
  for (; from < nrecv; from++) list[len++] = recvs[from];
  free(rk->actions);
  rk->actions = list;
  rk->capacity = n + 1;
  return GAAW_SUCCESS;
}

/* Moves each receive of the generated lists (first placed right before the action
 * that needs it) to the last exchange that, in the run with buffered sends and unit
 * costs, starts no later than its send: every send then finds its receive posted, so
 * the rendezvous run takes exactly the times of the buffered one and cannot deadlock
 * (with receives posted only right before use, a rank blocked sending to a peer
 * that is blocked sending back deadlocks interleaved schedules). A receive moves no
 * earlier than needed, as its buffer is taken from the moment it is posted. */
static gaaw_status_t place_receives(gaaw_context_t ctx, gaaw_sched_t *s, gaaw_sched_verifier *vf)
{
  gaaw_status_t st = GAAW_SUCCESS;
  int *target = NULL, *bucket = NULL, *cons = malloc(((size_t)vf->nmsg + 1) * sizeof *cons);
  double *cstart = NULL;
  gaaw_sched_action_t *out = NULL;
  if (!cons) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot place %d receives", vf->nmsg);
  for (int r = 0; r < s->pp; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    int n = rk->count;
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
    int nc = exchange_starts(s, rk, cstart);
    consumers(vf, r, rk, cons);
    receive_targets(s, vf, r, cstart, cons, target, bucket);
    SCHED_TRY(st, rebuild_list(ctx, rk, target, bucket, nc, out), done);
  }
done:
  free(cons);
  free(cstart);
  free(target);
  free(bucket);
  free(out);
  return st;
}

/* ------------------------------------------------------------------ creation */

/* Runs the verifier on the lists of attach_messages with buffered sends and unit
 * costs, then places their receives (place_receives) from that run. */
static gaaw_status_t settle_receives(gaaw_context_t ctx, gaaw_sched_t *s)
{
  gaaw_status_t st = GAAW_SUCCESS;
  gaaw_sched_verifier vf = {0};
  SCHED_TRY(st, gaaw_sched_verifier_run(ctx, s, NULL, 1, &vf), out);
  SCHED_TRY(st, place_receives(ctx, s, &vf), out);
out:
  gaaw_sched_verifier_free(&vf);
  return st;
}

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
  SCHED_TRY(st, settle_receives(ctx, s), out);
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
