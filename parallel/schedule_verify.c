/* Pipeline schedules, the verifier: gaaw_sched_verify and its checks, each action on
 * its own (1), sends matched by receives in order with equal tags (2), every
 * action's dependencies on its rank and the activations in flight (3), and the
 * tables these checks fill for the timed run (4, 5: schedule_sim.c). Calls
 * schedule_sim.c and schedule_data.c (see schedule_impl.h); the semantics are in
 * schedule.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/schedule_impl.h"

void gaaw_sched_verifier_free(gaaw_sched_verifier *vf)
{
  free(vf->offset);
  free(vf->msg);
  free(vf->state);
  free(vf->in_msg);
  free(vf->wait);
  free(vf->sent);
}

/* The direction of a message from `from` to `to`: 0 towards from+1, 1 towards from-1
 * (with p = 2 both are the same rank, and the same direction 0). */
static int direction(int p, int from, int to)
{
  return to == (from + 1) % p ? 0 : 1;
}

/* ------------------------------------------------------------------ 1. actions */

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
                     r, i, SCHED_ACTION_TEXT(a, text));
      GAAW_ARG_CHECK(ctx, a->mb >= 0 && a->mb < m && a->chunk >= 0 && a->chunk < v,
                     "schedule: rank %d action %d (%s): microbatch not in 0..%d or chunk not in 0..%d", r, i,
                     SCHED_ACTION_TEXT(a, text), m - 1, v - 1);
      if (gaaw_sched_is_compute(a->op)) {
        GAAW_ARG_CHECK(ctx, a->peer == -1, "schedule: rank %d action %d (%s): a compute action has peer %d, not -1",
                       r, i, SCHED_ACTION_TEXT(a, text), a->peer);
        continue;
      }
      int vs = a->chunk * p + r;
      int other = a->op == GAAW_SCHED_SEND_ACT || a->op == GAAW_SCHED_RECV_GRAD ? vs + 1 : vs - 1;
      GAAW_ARG_CHECK(ctx, other >= 0 && other < nv,
                     "schedule: rank %d action %d (%s): virtual stage %d has no neighbour %d (stages 0..%d)", r, i,
                     SCHED_ACTION_TEXT(a, text), vs, other, nv - 1);
      GAAW_ARG_CHECK(ctx, other % p != r,
                     "schedule: rank %d action %d (%s): virtual stage %d is on this rank too; no message is needed",
                     r, i, SCHED_ACTION_TEXT(a, text), other);
      GAAW_ARG_CHECK(ctx, a->peer == other % p,
                     "schedule: rank %d action %d (%s): virtual stage %d is on rank %d, not on rank %d", r, i,
                     SCHED_ACTION_TEXT(a, text), other, other % p, a->peer);
    }
  }
  return GAAW_SUCCESS;
}

/* ------------------------------------------------------------------ 2. messages */

/* The sends and receives of each pair k = (from, direction) as bucket starts:
 * pair k's sends are nsend[k] .. nsend[k+1]-1 of the send list, and likewise its
 * receives (both 2p + 1 long, zeroed); *total_send and *total_recv count them. */
static void count_pairs(const gaaw_sched_t *s, long *nsend, long *nrecv, long *total_send, long *total_recv)
{
  int p = s->pp;
  for (int r = 0; r < p; r++)
    for (int i = 0; i < s->ranks[r].count; i++) {
      const gaaw_sched_action_t *a = &s->ranks[r].actions[i];
      if (gaaw_sched_is_compute(a->op)) continue;
      if (gaaw_sched_is_send(a->op))
        nsend[r * 2 + direction(p, r, a->peer) + 1]++, (*total_send)++;
      else
        nrecv[a->peer * 2 + direction(p, a->peer, r) + 1]++, (*total_recv)++;
    }
  for (int k = 1; k <= 2 * p; k++) nsend[k] += nsend[k - 1], nrecv[k] += nrecv[k - 1];
}

/* The global index of every send and receive into its pair's bucket, in list order
 * (fill_s and fill_r: copies of the bucket starts, moved on); vf->msg -1 for every
 * action, to be set for the messages matched. */
static void list_pairs(const gaaw_sched_t *s, gaaw_sched_verifier *vf, long *fill_s, long *fill_r, long *sends,
                       long *recvs)
{
  int p = s->pp;
  for (int r = 0; r < p; r++)
    for (int i = 0; i < s->ranks[r].count; i++) {
      const gaaw_sched_action_t *a = &s->ranks[r].actions[i];
      long g = vf->offset[r] + i;
      vf->msg[g] = -1;
      if (gaaw_sched_is_compute(a->op)) continue;
      if (gaaw_sched_is_send(a->op))
        sends[fill_s[r * 2 + direction(p, r, a->peer)]++] = g;
      else
        recvs[fill_r[a->peer * 2 + direction(p, a->peer, r)]++] = g;
    }
}

/* Global action index g as (rank, index in its list). */
static void rank_of(const gaaw_sched_verifier *vf, long g, int *rank, int *index)
{
  int rr = 0;
  while (vf->offset[rr + 1] <= g) rr++;
  *rank = rr;
  *index = (int)(g - vf->offset[rr]);
}

/* The lists of match_messages, per pair (from, direction). */
typedef struct {
  long *nsend, *nrecv; /* bucket starts (count_pairs) */
  long *sends, *recvs; /* global action indices (list_pairs) */
} pair_lists;

/* Matches the j-th send of pair (from, d) with its j-th receive, numbering the
 * messages in vf; GAAW_ERR_INVALID_ARG at the first pair of unequal tags, or at
 * the first send or receive left without its other end. */
static gaaw_status_t match_pair(gaaw_context_t ctx, const gaaw_sched_t *s, gaaw_sched_verifier *vf,
                                const pair_lists *pl, int from, int d)
{
  int p = s->pp, k = from * 2 + d;
  char t1[96], t2[96];
  long ns = pl->nsend[k + 1] - pl->nsend[k], nr = pl->nrecv[k + 1] - pl->nrecv[k];
  int to = d == 0 ? (from + 1) % p : (from - 1 + p) % p;
  for (long j = 0; j < (ns < nr ? ns : nr); j++) {
    long gs = pl->sends[pl->nsend[k] + j], gr = pl->recvs[pl->nrecv[k] + j];
    int ri, ii, rj, ij;
    rank_of(vf, gs, &ri, &ii);
    rank_of(vf, gr, &rj, &ij);
    const gaaw_sched_action_t *as = &s->ranks[ri].actions[ii], *ar = &s->ranks[rj].actions[ij];
    if (gaaw_sched_tag(s, ri, as) != gaaw_sched_tag(s, rj, ar))
      GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG,
                "schedule: rank %d action %d (%s) is message %ld from rank %d to rank %d, but rank "
                "%d's receive number %ld from rank %d is action %d (%s): receives must come in the "
                "order of the sends",
                ri, ii, SCHED_ACTION_TEXT(as, t1), j, from, to, rj, j, from, ij, SCHED_ACTION_TEXT(ar, t2));
    vf->msg[gs] = vf->msg[gr] = vf->nmsg;
    vf->nmsg++;
  }
  if (ns > nr) {
    int ri, ii;
    rank_of(vf, pl->sends[pl->nsend[k] + nr], &ri, &ii);
    GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG,
              "schedule: rank %d action %d (%s) has no matching receive on rank %d (rank %d sends "
              "%ld messages to rank %d, which posts %ld receives from it)",
              ri, ii, SCHED_ACTION_TEXT(&s->ranks[ri].actions[ii], t1), to, from, ns, to, nr);
  }
  if (nr > ns) {
    int rj, ij;
    rank_of(vf, pl->recvs[pl->nrecv[k] + ns], &rj, &ij);
    GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG,
              "schedule: rank %d action %d (%s) has no matching send on rank %d (rank %d posts %ld "
              "receives from rank %d, which sends %ld messages to it)",
              rj, ij, SCHED_ACTION_TEXT(&s->ranks[rj].actions[ij], t1), from, to, nr, from, ns);
  }
  return GAAW_SUCCESS;
}

/* 2. Sends and receives pair up, in order, with equal tags. */
static gaaw_status_t match_messages(gaaw_context_t ctx, const gaaw_sched_t *s, gaaw_sched_verifier *vf)
{
  gaaw_status_t st = GAAW_SUCCESS;
  int p = s->pp;
  /* per pair (from, direction): counts, then lists of global action indices */
  pair_lists pl = {.nsend = calloc((size_t)p * 2 + 1, sizeof *pl.nsend),
                   .nrecv = calloc((size_t)p * 2 + 1, sizeof *pl.nrecv)};
  long *fill_s = NULL, *fill_r = NULL;
  if (!pl.nsend || !pl.nrecv) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate pair tables");
    goto out;
  }
  long total_send = 0, total_recv = 0;
  count_pairs(s, pl.nsend, pl.nrecv, &total_send, &total_recv);
  pl.sends = malloc(((size_t)total_send + 1) * sizeof *pl.sends);
  pl.recvs = malloc(((size_t)total_recv + 1) * sizeof *pl.recvs);
  fill_s = malloc((size_t)p * 2 * sizeof *fill_s);
  fill_r = malloc((size_t)p * 2 * sizeof *fill_r);
  if (!pl.sends || !pl.recvs || !fill_s || !fill_r) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate %ld messages",
                          total_send);
    goto out;
  }
  memcpy(fill_s, pl.nsend, (size_t)p * 2 * sizeof *fill_s);
  memcpy(fill_r, pl.nrecv, (size_t)p * 2 * sizeof *fill_r);
  list_pairs(s, vf, fill_s, fill_r, pl.sends, pl.recvs);
  vf->nmsg = 0;
  for (int from = 0; from < p; from++)
    for (int d = 0; d < 2; d++) SCHED_TRY(st, match_pair(ctx, s, vf, &pl, from, d), out);
out:
  free(pl.nsend);
  free(pl.nrecv);
  free(pl.sends);
  free(pl.recvs);
  free(fill_s);
  free(fill_r);
  return st;
}

/* ------------------------------------------------------------------ 3. dependencies */

/* What a rank has done for one (microbatch, chunk) unit so far, in list order. */
enum { ST_F = 1, ST_B = 2, ST_W = 4, ST_FUSED = 8, ST_ACT_IN = 16, ST_GRAD_IN = 32, ST_ACT_OUT = 64, ST_GRAD_OUT = 128 };

/* F of rank r (unit states stt): its input comes from the previous chunk's F on this
 * rank, or from a received activation (the message *wait it waits for), or from
 * nothing on stage 0. What is wrong with it, or NULL. */
static const char *forward_problem(const gaaw_sched_t *s, const gaaw_sched_verifier *vf, int r,
                                   const gaaw_sched_action_t *a, unsigned char *stt, int *wait)
{
  int p = s->pp, v = s->virtual_stages, vs = a->chunk * p + r;
  size_t unit = (size_t)a->mb * v + a->chunk;
  unsigned char *u = &stt[unit];
  const char *why = NULL;
  if (*u & ST_F)
    why = "runs twice";
  else if (vs > 0 && (vs - 1) % p == r && !(stt[(size_t)a->mb * v + a->chunk - 1] & ST_F))
    why = "comes before the forward of the previous chunk on this rank";
  else if (vs > 0 && (vs - 1) % p != r && !(*u & ST_ACT_IN))
    why = "comes before the receive of its input activation";
  else if (vs > 0 && (vs - 1) % p != r)
    *wait = vf->in_msg[2 * unit];
  *u |= ST_F;
  return why;
}

/* B or BW of rank r: after the F of its unit, once, with its output gradient from
 * the next chunk's B on this rank, or received (*wait), or from nothing on the last
 * stage; a BW also after no W of its unit. What is wrong with it, or NULL. */
static const char *backward_problem(const gaaw_sched_t *s, const gaaw_sched_verifier *vf, int r,
                                    const gaaw_sched_action_t *a, unsigned char *stt, int *wait)
{
  int p = s->pp, v = s->virtual_stages, nv = p * v, vs = a->chunk * p + r;
  size_t unit = (size_t)a->mb * v + a->chunk;
  unsigned char *u = &stt[unit];
  const char *why = NULL;
  if (!(*u & ST_F))
    why = "comes before the forward of its microbatch";
  else if (*u & ST_B)
    why = "computes the input gradient of this microbatch and chunk a second time";
  else if (vs + 1 < nv && (vs + 1) % p == r && !(stt[(size_t)a->mb * v + a->chunk + 1] & ST_B))
    why = "comes before the input gradient of the next chunk on this rank";
  else if (vs + 1 < nv && (vs + 1) % p != r && !(*u & ST_GRAD_IN))
    why = "comes before the receive of its output gradient";
  else if (vs + 1 < nv && (vs + 1) % p != r)
    *wait = vf->in_msg[2 * unit + 1];
  *u |= ST_B;
  if (a->op == GAAW_SCHED_BW) {
    if (!why && (*u & ST_W)) why = "comes after this microbatch's weight gradient";
    *u |= ST_W | ST_FUSED;
  }
  return why;
}

/* W of unit state *u: once, after its B, not after a fused BW. */
static const char *weight_problem(unsigned char *u)
{
  const char *why = NULL;
  if (*u & ST_FUSED)
    why = "repeats the weight gradient of a fused BW";
  else if (*u & ST_W)
    why = "runs twice";
  else if (!(*u & ST_B))
    why = "comes before its B (input gradient)";
  *u |= ST_W;
  return why;
}

/* A send: once, after the F (activation) or the B (gradient) that produces it. */
static const char *send_problem(const gaaw_sched_action_t *a, unsigned char *u)
{
  const char *why = NULL;
  int act = a->op == GAAW_SCHED_SEND_ACT;
  unsigned char made = act ? ST_F : ST_B, sent = act ? ST_ACT_OUT : ST_GRAD_OUT;
  if (!(*u & made))
    why = act ? "comes before the forward that produces it" : "comes before the backward that produces it";
  else if (*u & sent)
    why = "sends twice";
  *u |= sent;
  return why;
}

/* A receive: once; its unit's compute action waits for its message (global index g). */
static const char *receive_problem(gaaw_sched_verifier *vf, const gaaw_sched_action_t *a, long g, size_t unit,
                                   unsigned char *u)
{
  const char *why = NULL;
  int grad = a->op == GAAW_SCHED_RECV_GRAD;
  unsigned char got = grad ? ST_GRAD_IN : ST_ACT_IN;
  if (*u & got) why = "receives twice";
  *u |= got;
  vf->in_msg[2 * unit + grad] = vf->msg[g];
  return why;
}

/* Action a of rank r (global index g) against what the rank did before it, counting
 * the activations in flight (*in_flight, and its *peak). What is wrong, or NULL. */
static const char *dependency_problem(const gaaw_sched_t *s, gaaw_sched_verifier *vf, int r,
                                      const gaaw_sched_action_t *a, long g, int *in_flight, int *peak)
{
  unsigned char *stt = vf->state;
  size_t unit = (size_t)a->mb * s->virtual_stages + a->chunk;
  unsigned char *u = &stt[unit];
  const char *why = NULL;
  switch (a->op) {
  case GAAW_SCHED_F:
    why = forward_problem(s, vf, r, a, stt, &vf->wait[g]);
    if (++*in_flight > *peak) *peak = *in_flight;
    break;
  case GAAW_SCHED_B:
  case GAAW_SCHED_BW:
    why = backward_problem(s, vf, r, a, stt, &vf->wait[g]);
    if (a->op == GAAW_SCHED_BW) --*in_flight;
    break;
  case GAAW_SCHED_W:
    why = weight_problem(u);
    --*in_flight;
    break;
  case GAAW_SCHED_SEND_ACT:
  case GAAW_SCHED_SEND_GRAD: why = send_problem(a, u); break;
  case GAAW_SCHED_RECV_ACT:
  case GAAW_SCHED_RECV_GRAD: why = receive_problem(vf, a, g, unit, u); break;
  }
  return why;
}

/* 3. Dependencies on each rank, in list order; counts the activations in flight. */
static gaaw_status_t check_dependencies(gaaw_context_t ctx, gaaw_sched_t *s, gaaw_sched_verifier *vf)
{
  int p = s->pp, m = s->microbatches, v = s->virtual_stages;
  char text[96];
  for (int r = 0; r < p; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    unsigned char *stt = vf->state;
    memset(stt, 0, (size_t)m * v);
    int in_flight = 0, peak = 0;
    for (int i = 0; i < rk->count; i++) {
      const gaaw_sched_action_t *a = &rk->actions[i];
      long g = vf->offset[r] + i;
      vf->wait[g] = -1;
      const char *why = dependency_problem(s, vf, r, a, g, &in_flight, &peak);
      if (why)
        GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "schedule: rank %d action %d (%s) %s", r, i,
                  SCHED_ACTION_TEXT(a, text), why);
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

/* ------------------------------------------------------------------ the verifier */

/* The verifier's tables for s: each rank's offset among all actions, and the
 * per-action, per-unit and per-message arrays the checks fill. */
static gaaw_status_t verifier_alloc(gaaw_context_t ctx, const gaaw_sched_t *s, gaaw_sched_verifier *vf)
{
  vf->p = s->pp;
  vf->m = s->microbatches;
  vf->v = s->virtual_stages;
  vf->nv = vf->p * vf->v;
  vf->offset = malloc(((size_t)vf->p + 1) * sizeof *vf->offset);
  if (!vf->offset) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the verifier");
  vf->offset[0] = 0;
  for (int r = 0; r < vf->p; r++) {
    if (s->ranks[r].count > 0 && !s->ranks[r].actions)
      GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "schedule: rank %d has %d actions but no list", r, s->ranks[r].count);
    vf->offset[r + 1] = vf->offset[r] + s->ranks[r].count;
  }
  vf->total = vf->offset[vf->p];
  vf->msg = malloc(((size_t)vf->total + 1) * sizeof *vf->msg);
  vf->state = malloc((size_t)vf->m * vf->v);
  vf->in_msg = malloc((size_t)vf->m * vf->v * 2 * sizeof *vf->in_msg);
  vf->wait = malloc(((size_t)vf->total + 1) * sizeof *vf->wait);
  if (!vf->msg || !vf->state || !vf->in_msg || !vf->wait)
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the verifier (%ld actions)", vf->total);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sched_verifier_run(gaaw_context_t ctx, gaaw_sched_t *s, const gaaw_sched_cost_t *costs, int eager,
                                      gaaw_sched_verifier *vf)
{
  const gaaw_sched_cost_t unit = {.f = 1, .b = 1, .w = 1, .p2p = 0};
  GAAW_ARG_NOT_NULL(ctx, s);
  GAAW_CHECK(gaaw_sched_check_sizes(ctx, s->pp, s->microbatches, s->virtual_stages));
  GAAW_ARG_NOT_NULL(ctx, s->ranks);
  const gaaw_sched_cost_t *c = costs ? costs : &unit;
  GAAW_ARG_CHECK(ctx,
                 isfinite(c->f) && isfinite(c->b) && isfinite(c->w) && isfinite(c->p2p) && c->f >= 0 && c->b >= 0 &&
                     c->w >= 0 && c->p2p >= 0,
                 "schedule costs must be finite and >= 0 (f %g, b %g, w %g, p2p %g)", c->f, c->b, c->w, c->p2p);
  GAAW_CHECK(verifier_alloc(ctx, s, vf));
  GAAW_CHECK(check_actions(ctx, s));
  GAAW_CHECK(match_messages(ctx, s, vf));
  GAAW_CHECK(check_dependencies(ctx, s, vf));
  GAAW_CHECK(gaaw_sched_simulate(ctx, s, vf, c, eager));
  s->costs = *c;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sched_verify(gaaw_context_t ctx, gaaw_sched_t *s, const gaaw_sched_cost_t *costs,
                                gaaw_sched_report_t *report)
{
  gaaw_status_t st = GAAW_SUCCESS;
  gaaw_sched_verifier vf = {0};
  SCHED_TRY(st, gaaw_sched_verifier_run(ctx, s, costs, 0, &vf), out);
  if (report) gaaw_sched_fill_report(s, vf.total, report);
out:
  gaaw_sched_verifier_free(&vf);
  return st;
}
