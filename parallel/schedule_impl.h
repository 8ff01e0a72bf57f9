/* Insides of the pipeline schedules, shared by their files (parallel/schedule.h is
 * the API the rest of gaaw includes). The files call one another one way only:
 *   schedule_gen.c    -> schedule_verify.c -> schedule_sim.c -> schedule_data.c
 * (each may also call any file to its right), never back.
 * - schedule_data.c:   the schedule object and its lists, names, tags, size checks;
 * - schedule_sim.c:    the timed run under rendezvous semantics, the report, the timeline;
 * - schedule_verify.c: the checks of gaaw_sched_verify, and the verifier's tables;
 * - schedule_gen.c:    the generators and their messages, and the gaaw/schedule.h API. */
#ifndef GAAW_PARALLEL_SCHEDULE_IMPL_H
#define GAAW_PARALLEL_SCHEDULE_IMPL_H

#include <stddef.h>

#include "backends/runtime/error.h"
#include "parallel/schedule.h"

/* Cleanup in one place (backends/runtime/error.h). */
#define SCHED_TRY GAAW_CHECK_GOTO

/* An action as text in buf (a char array), for messages. */
#define SCHED_ACTION_TEXT(a, buf) (gaaw_sched_action_text((a), (buf), sizeof(buf)), (buf))

/* "F", "B", ..., "RECV_GRAD", indexed by gaaw_sched_op_t. */
extern const char *const gaaw_sched_op_names[GAAW_SCHED_OP_COUNT];

static inline int gaaw_sched_is_compute(int op)
{
  return op == GAAW_SCHED_F || op == GAAW_SCHED_B || op == GAAW_SCHED_W || op == GAAW_SCHED_BW;
}

static inline int gaaw_sched_is_send(int op)
{
  return op == GAAW_SCHED_SEND_ACT || op == GAAW_SCHED_SEND_GRAD;
}

/* What compute action op costs under c (fused BW: b + w); 0 for a message. */
static inline double gaaw_sched_cost_of(const gaaw_sched_cost_t *c, int op)
{
  switch (op) {
  case GAAW_SCHED_F: return c->f;
  case GAAW_SCHED_B: return c->b;
  case GAAW_SCHED_W: return c->w;
  case GAAW_SCHED_BW: return c->b + c->w;
  }
  return 0;
}

/* ---- schedule_data.c */

/* p, m, v >= 1 and p * m * v within the limit; GAAW_ERR_INVALID_ARG naming them. */
gaaw_status_t gaaw_sched_check_sizes(gaaw_context_t ctx, int p, int m, int v);
/* Room for count actions in rk's list. */
gaaw_status_t gaaw_sched_reserve(gaaw_context_t ctx, gaaw_sched_rank_t *rk, int count);

/* ---- the verifier's tables (filled by schedule_verify.c, read by the simulation
 * and by the generator's placing of receives). Messages are numbered pair by pair:
 * the k-th send from a to b is the k-th receive at b from a. */
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
} gaaw_sched_verifier;

/* ---- schedule_sim.c */

/* Steps 4 and 5 of gaaw_sched_verify on the tables of vf (see schedule_sim.c);
 * eager: sends complete when posted (buffered), which only the generators use. */
gaaw_status_t gaaw_sched_simulate(gaaw_context_t ctx, gaaw_sched_t *s, gaaw_sched_verifier *vf,
                                  const gaaw_sched_cost_t *c, int eager);
/* The figures of the last simulation of s, total actions over all ranks. */
void gaaw_sched_fill_report(const gaaw_sched_t *s, long total, gaaw_sched_report_t *report);

/* ---- schedule_verify.c */

/* Steps 1 to 5 of gaaw_sched_verify with costs (NULL: unit costs), eager as for
 * gaaw_sched_simulate; s->costs becomes the costs run with. The tables stay in *vf
 * (zeroed by the caller before) for the caller to read, and are freed with
 * gaaw_sched_verifier_free, after a failure too. */
gaaw_status_t gaaw_sched_verifier_run(gaaw_context_t ctx, gaaw_sched_t *s, const gaaw_sched_cost_t *costs, int eager,
                                      gaaw_sched_verifier *vf);
void gaaw_sched_verifier_free(gaaw_sched_verifier *vf);

#endif
