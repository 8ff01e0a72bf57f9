/* Pipeline schedules, the simulator: the timed run of every rank's list as the
 * executor does it, under blocking rendezvous semantics (the deadlock check and the
 * start times, ends and compute times of gaaw_sched_verify's steps 4 and 5), the
 * figures of the report (makespan, idle time, bubble, the peak of activations in
 * flight) and the text timeline of a verified run. Calls only schedule_data.c (see
 * schedule_impl.h); the semantics are in schedule.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "parallel/schedule_impl.h"

/* The end (one past) of the exchange that starts at action i of rank r. */
static int exchange_end(const gaaw_sched_rank_t *rk, int i)
{
  while (i < rk->count && !gaaw_sched_is_compute(rk->actions[i].op)) i++;
  return i;
}

/* ------------------------------------------------------------------ the timed run */

/* The state of one simulation, per rank and per message. */
typedef struct {
  int *pos;            /* per rank: its next action */
  int *resume;         /* per rank: where its exchange in progress goes on, -1 none */
  int *waiting;        /* per rank: the message it is stuck on, -1 none, -2 queued */
  int *queue;          /* ranks that may go on */
  int nq;
  double *t;           /* per rank: its clock */
  double *gend;        /* per rank: when its exchange in progress ends */
  double *posted_recv; /* per message: when its receive was posted, -1 not yet */
  double *sent;        /* per message: when its send was posted, -1 not yet (vf->sent) */
} sim_state;

static void sim_free(sim_state *run)
{
  free(run->pos);
  free(run->resume);
  free(run->waiting);
  free(run->queue);
  free(run->t);
  free(run->gend);
  free(run->posted_recv);
}

/* The tables of a run (every rank queued, nothing posted yet) and fresh start times
 * in every rank's list; vf->sent is replaced. */
static gaaw_status_t sim_alloc(gaaw_context_t ctx, gaaw_sched_t *s, gaaw_sched_verifier *vf, sim_state *run)
{
  int p = s->pp;
  run->pos = calloc((size_t)p, sizeof *run->pos);
  run->resume = malloc((size_t)p * sizeof *run->resume);
  run->waiting = malloc((size_t)p * sizeof *run->waiting);
  run->queue = malloc((size_t)p * sizeof *run->queue);
  run->t = calloc((size_t)p, sizeof *run->t);
  run->gend = calloc((size_t)p, sizeof *run->gend);
  run->posted_recv = malloc(((size_t)vf->nmsg + 1) * sizeof *run->posted_recv);
  free(vf->sent);
  run->sent = vf->sent = malloc(((size_t)vf->nmsg + 1) * sizeof *run->sent);
  if (!run->pos || !run->resume || !run->waiting || !run->queue || !run->t || !run->gend || !run->posted_recv ||
      !run->sent)
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the simulation");
  for (int i = 0; i < vf->nmsg; i++) run->sent[i] = run->posted_recv[i] = -1;
  for (int r = 0; r < p; r++) {
    gaaw_sched_rank_t *rk = &s->ranks[r];
    free(rk->start);
    rk->start = malloc(((size_t)rk->count + 1) * sizeof *rk->start);
    if (!rk->start) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate start times");
    rk->busy = 0;
    run->resume[r] = -1;
  }
  run->nq = 0;
  for (int r = 0; r < p; r++) {
    run->queue[run->nq++] = r;
    run->waiting[r] = -2;
  }
  return GAAW_SUCCESS;
}

/* Queues peer again if it is stuck on message msg. */
static void sim_wake(sim_state *run, int peer, int msg)
{
  if (run->waiting[peer] == msg) {
    run->waiting[peer] = -2;
    run->queue[run->nq++] = peer;
  }
}

/* Runs compute action pos[r] of rank r once the message its input comes by has been
 * sent (it arrives p2p after both ends are posted); 0 when it must wait for it. */
static int sim_compute(sim_state *run, gaaw_sched_t *s, const gaaw_sched_verifier *vf, const gaaw_sched_cost_t *c,
                       int r)
{
  gaaw_sched_rank_t *rk = &s->ranks[r];
  const gaaw_sched_action_t *a = &rk->actions[run->pos[r]];
  int w = vf->wait[vf->offset[r] + run->pos[r]];
  double ready = run->t[r];
  if (w >= 0) {
    if (run->sent[w] < 0) {
      run->waiting[r] = w;
      return 0;
    }
    double arrive = (run->sent[w] > run->posted_recv[w] ? run->sent[w] : run->posted_recv[w]) + c->p2p;
    if (arrive > ready) ready = arrive;
  }
  double d = gaaw_sched_cost_of(c, a->op);
  rk->start[run->pos[r]] = ready;
  run->t[r] = ready + d;
  rk->busy += d;
  run->pos[r]++;
  return 1;
}

/* The exchange at pos[r] of rank r: entered, it posts all its sends and receives
 * (waking the peers stuck on them); then, unless eager, it waits until the receiver
 * of each of its sends has posted the receive. 0 when it must wait for one (where it
 * goes on is kept in resume[r]); else the rank's clock moves to the exchange's end. */
static int sim_exchange(sim_state *run, gaaw_sched_t *s, const gaaw_sched_verifier *vf, int r, int eager)
{
  gaaw_sched_rank_t *rk = &s->ranks[r];
  const long off = vf->offset[r];
  int e = exchange_end(rk, run->pos[r]), i;
  if (run->resume[r] < 0) { /* entering: post everything */
    run->gend[r] = run->t[r];
    for (i = run->pos[r]; i < e; i++) {
      int msg = vf->msg[off + i], peer = rk->actions[i].peer;
      rk->start[i] = run->t[r];
      if (gaaw_sched_is_send(rk->actions[i].op))
        run->sent[msg] = run->t[r];
      else
        run->posted_recv[msg] = run->t[r];
      sim_wake(run, peer, msg);
    }
    run->resume[r] = run->pos[r];
  }
  for (i = run->resume[r]; i < e && !eager; i++) {
    if (!gaaw_sched_is_send(rk->actions[i].op)) continue;
    int msg = vf->msg[off + i];
    if (run->posted_recv[msg] < 0) break;
    if (run->posted_recv[msg] > run->gend[r]) run->gend[r] = run->posted_recv[msg];
  }
  if (i < e && !eager) {
    run->resume[r] = i;
    run->waiting[r] = vf->msg[off + i];
    return 0;
  }
  run->resume[r] = -1;
  run->t[r] = run->gend[r];
  run->pos[r] = e;
  return 1;
}

/* How many ranks did not reach the end of their list; list (size bytes) names the
 * first 8 and the action each waits at. */
static int stuck_ranks(const gaaw_sched_t *s, const sim_state *run, char *list, size_t size)
{
  int stuck = 0;
  size_t len = 0;
  list[0] = '\0';
  for (int r = 0; r < s->pp; r++) {
    const gaaw_sched_rank_t *rk = &s->ranks[r];
    if (run->pos[r] >= rk->count) continue;
    int i = run->resume[r] >= 0 ? run->resume[r] : run->pos[r];
    char text[96];
    if (++stuck <= 8 && len < size - 1) {
      int n = snprintf(list + len, size - len, "%srank %d waits at action %d (%s)", stuck > 1 ? ", " : "", r, i,
                       SCHED_ACTION_TEXT(&rk->actions[i], text));
      if (n > 0) len += (size_t)n < size - len ? (size_t)n : size - len - 1;
    }
  }
  return stuck;
}

/* 4 and 5. Runs every rank's list as the executor does (see schedule.h): a compute
 * action waits for the message its input comes by; an exchange posts its receives
 * and sends, then waits until the receiver of each of its sends has posted the
 * receive (blocking rendezvous; eager: sends complete when posted, as a buffered
 * send would, which only the generators use). A data transfer starts once both ends
 * are posted and takes p2p. A rank that can never go on is a deadlock, named with
 * the action each waiting rank is stuck at. */
gaaw_status_t gaaw_sched_simulate(gaaw_context_t ctx, gaaw_sched_t *s, gaaw_sched_verifier *vf,
                                  const gaaw_sched_cost_t *c, int eager)
{
  gaaw_status_t st = GAAW_SUCCESS;
  sim_state run = {0};
  SCHED_TRY(st, sim_alloc(ctx, s, vf, &run), out);
  while (run.nq > 0) {
    int r = run.queue[--run.nq];
    const gaaw_sched_rank_t *rk = &s->ranks[r];
    run.waiting[r] = -1;
    while (run.pos[r] < rk->count) {
      int went_on = gaaw_sched_is_compute(rk->actions[run.pos[r]].op) ? sim_compute(&run, s, vf, c, r)
                                                                    : sim_exchange(&run, s, vf, r, eager);
      if (!went_on) break;
    }
  }
  char list[1024];
  int stuck = stuck_ranks(s, &run, list, sizeof list);
  if (stuck) {
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "schedule: deadlock under blocking rendezvous: %s%s", list, stuck > 8 ? ", ..." : "");
    goto out;
  }
  for (int r = 0; r < s->pp; r++) s->ranks[r].end = run.t[r];
out:
  sim_free(&run);
  return st;
}

/* ------------------------------------------------------------------ the report */

void gaaw_sched_fill_report(const gaaw_sched_t *s, long total, gaaw_sched_report_t *report)
{
  gaaw_sched_report_t rep = {0};
  for (int r = 0; r < s->pp; r++) {
    if (s->ranks[r].end > rep.makespan) rep.makespan = s->ranks[r].end;
    rep.busy += s->ranks[r].busy;
    if (s->ranks[r].peak_in_flight > rep.peak_in_flight) rep.peak_in_flight = s->ranks[r].peak_in_flight;
  }
  rep.idle = s->pp * rep.makespan - rep.busy;
  rep.bubble = rep.makespan > 0 ? rep.idle / (s->pp * rep.makespan) : 0;
  rep.actions = total;
  *report = rep;
}

/* ------------------------------------------------------------------ the timeline */

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
  if (s->virtual_stages > 1) return snprintf(text, len, "%s%d.%d", gaaw_sched_op_names[a->op], a->mb, a->chunk);
  return snprintf(text, len, "%s%d", gaaw_sched_op_names[a->op], a->mb);
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
      if (!gaaw_sched_is_compute(a->op)) continue;
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
    GAAW_ARG_CHECK(ctx, gaaw_sched_cost_of(&s->costs, op) == floor(gaaw_sched_cost_of(&s->costs, op)),
                   "timeline: the costs verified with are not whole time units (%s costs %g)", gaaw_sched_op_names[op],
                   gaaw_sched_cost_of(&s->costs, op));
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
      if (!gaaw_sched_is_compute(a->op)) continue;
      long t0 = (long)rk->start[i], d = (long)gaaw_sched_cost_of(&s->costs, a->op);
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
