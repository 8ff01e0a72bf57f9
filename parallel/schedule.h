/* Pipeline schedules as data, and their verifier. Pure C: no MPI, no device, no model.
 *
 * p ranks (pipeline stages) 0..p-1 each hold v model chunks; chunk c of rank r is
 * virtual stage vs = c*p + r of the p*v the model is cut into (Megatron-LM's layout:
 * with v = 1, virtual stage = rank). A schedule is, for every rank, an ordered list of
 * actions over the m microbatches of a step:
 *
 *   F(mb, c)          forward of chunk c on microbatch mb
 *   B(mb, c)          input gradient (backward without the weight gradient)
 *   W(mb, c)          weight gradient, after B(mb, c)
 *   BW(mb, c)         B and W fused, where the schedule does not split them
 *   SEND_ACT(mb, c)   send the output of F(mb, c) to the rank of virtual stage vs + 1
 *   RECV_ACT(mb, c)   receive the input of F(mb, c) from the rank of stage vs - 1
 *   SEND_GRAD(mb, c)  send the input gradient of B(mb, c) to the rank of stage vs - 1
 *   RECV_GRAD(mb, c)  receive the output gradient for B(mb, c) from stage vs + 1
 *
 * (mb, c) of a message are those of the action on this rank it serves; the two ends
 * of one message name the same microbatch and adjacent virtual stages, and
 * gaaw_sched_tag gives both ends the same tag. Between two stages on one rank (p = 1
 * with v > 1) no message is sent: the next chunk reads the previous one's output.
 *
 * Semantics (what the executor does, and what the verifier simulates):
 * - Actions run in list order. A maximal run of consecutive SEND/RECV actions is one
 *   exchange: the executor starts all of them at once (non-blocking send and receive;
 *   Megatron-LM's send_forward_recv_backward is such a run of two), then waits for its
 *   sends, and goes on. A receive is only posted there: the compute action that
 *   needs its data (F for RECV_ACT, B or BW for RECV_GRAD) waits for it first.
 * - Blocking rendezvous, the strictest semantics, for the deadlock check and for the
 *   times: a send completes only once its receiver has posted the receive (no
 *   buffering), and data can arrive only once both ends are posted. A schedule that
 *   cannot deadlock so cannot deadlock with any buffering either (buffering only lets
 *   operations complete sooner). With strict rendezvous the order matters: a rank
 *   blocked sending to a peer that is itself blocked sending back, because neither has
 *   posted the receive yet, deadlocks; the generators post receives early enough that
 *   this never happens (see gaaw_sched_create).
 * - Messages between an ordered pair of ranks are received in the order they are
 *   sent, whatever their tags (as NCCL matches them); the tag only checks it.
 * - Messages take no time (or costs.p2p from the moment both ends are posted).
 *
 * Definitions of the report:
 * - makespan: the time at which the last rank ends its last action (all start at 0);
 * - bubble: idle / (p * makespan), idle = p * makespan - the sum of every rank's
 *   compute time (time spent waiting for messages and after its own end counts as
 *   idle); with unit costs F = B = W = 1 (fused BW = 2) for a whole chunk;
 * - activations in flight on a rank: the (microbatch, chunk) pairs whose F has run and
 *   whose last backward action (W, or the fused BW) has not, as W still reads the
 *   layer inputs kept by F; counted in chunk units (one per microbatch with v = 1);
 *   the peak is the largest count along the rank's list.
 *
 * None of these functions is collective. Failures are recorded on ctx (NULL: the
 * thread's record, as gaaw_config_* does) and returned. */
#ifndef GAAW_PARALLEL_SCHEDULE_H
#define GAAW_PARALLEL_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "gaaw/context.h"

/* The generators. X(name, value, text): text is the option value (pp_schedule). */
#define GAAW_SCHED_KIND_LIST(X)                                                     \
  X(GAAW_SCHED_GPIPE, 0, "gpipe")             /* all forwards, then all backwards */ \
  X(GAAW_SCHED_1F1B, 1, "1f1b")               /* PipeDream-flush / Megatron 1F1B */  \
  X(GAAW_SCHED_INTERLEAVED, 2, "interleaved") /* Megatron-LM interleaved 1F1B, v chunks */ \
  X(GAAW_SCHED_ZB_H1, 3, "zb-h1")             /* zero bubble H1: B and W split */
#define GAAW_SCHED_KIND_ENTRY(name, value, text) name = value,
typedef enum { GAAW_SCHED_KIND_LIST(GAAW_SCHED_KIND_ENTRY) } gaaw_sched_kind_t;
#undef GAAW_SCHED_KIND_ENTRY
#define GAAW_SCHED_KIND_COUNT 4

typedef enum {
  GAAW_SCHED_F = 0,
  GAAW_SCHED_B,
  GAAW_SCHED_W,
  GAAW_SCHED_BW,
  GAAW_SCHED_SEND_ACT,
  GAAW_SCHED_RECV_ACT,
  GAAW_SCHED_SEND_GRAD,
  GAAW_SCHED_RECV_GRAD
} gaaw_sched_op_t;
#define GAAW_SCHED_OP_COUNT 8

/* One action. peer: the other rank of a SEND/RECV, -1 for compute actions. */
typedef struct {
  int op; /* gaaw_sched_op_t */
  int mb;
  int chunk;
  int peer;
} gaaw_sched_action_t;

/* One rank's list, and what the last gaaw_sched_verify found for it. */
typedef struct {
  gaaw_sched_action_t *actions;
  int count, capacity;
  double *start;      /* per action: its start time under the costs last verified with */
  double end;         /* when this rank ends its last action */
  double busy;        /* its compute time */
  int peak_in_flight; /* in (microbatch, chunk) units */
} gaaw_sched_rank_t;

/* Costs of one chunk's actions (the time unit is the caller's). Fused BW costs b + w.
 * p2p: the time a message takes from its send's start to its receive. */
typedef struct {
  double f, b, w, p2p;
} gaaw_sched_cost_t;

typedef struct {
  int kind; /* gaaw_sched_kind_t, or -1 for a schedule built by hand */
  int pp, microbatches, virtual_stages;
  gaaw_sched_rank_t *ranks; /* pp of them */
  gaaw_sched_cost_t costs;  /* those of the last gaaw_sched_verify */
} gaaw_sched_t;

/* What gaaw_sched_verify reports (per rank: in the schedule's ranks[]). */
typedef struct {
  double makespan, busy, idle, bubble;
  int peak_in_flight; /* the largest over the ranks */
  long actions;       /* every rank's actions together */
} gaaw_sched_report_t;

/* The name of a generator ("1f1b"), or "?" for a value outside the list. */
const char *gaaw_sched_kind_name(int kind);
/* The generator of a name (case-insensitive); GAAW_ERR_INVALID_ARG naming the
 * known ones otherwise. */
gaaw_status_t gaaw_sched_kind_parse(gaaw_context_t ctx, const char *name, gaaw_sched_kind_t *kind);

/* Whether generator kind takes pp = p, microbatches = m, virtual_stages = v:
 * p, m, v >= 1; v = 1 unless interleaved; interleaved needs v >= 2 and m a multiple
 * of p; p * m * v at most 2^24. GAAW_ERR_INVALID_ARG names the numbers. The same
 * numbers give the same answer on every rank, so a refusal happens on all of them. */
gaaw_status_t gaaw_sched_check(gaaw_context_t ctx, int kind, int p, int m, int v);

/* A generated schedule, already verified with unit costs (*out: NULL on failure).
 * The generator orders the compute actions, puts each send right after the action
 * that produces it and each receive, per peer in the order of the sends, in the last
 * exchange that (unit costs, buffered sends) starts no later than its send, or earlier,
 * right after the previous message from that peer was used. With unit costs every
 * send then finds its receive posted, so the rendezvous times are those of a
 * dataflow run and no rank ever blocks on a send. */
gaaw_status_t gaaw_sched_create(gaaw_context_t ctx, int kind, int p, int m, int v, gaaw_sched_t **out);
/* An empty schedule, to fill by hand with gaaw_sched_append (kind -1). */
gaaw_status_t gaaw_sched_create_empty(gaaw_context_t ctx, int p, int m, int v, gaaw_sched_t **out);
/* Appends one action to rank's list (peer -1 for compute). Checks only that rank is
 * in range; gaaw_sched_verify checks everything else. */
gaaw_status_t gaaw_sched_append(gaaw_context_t ctx, gaaw_sched_t *s, int rank, int op, int mb, int chunk,
                                int peer);
void gaaw_sched_destroy(gaaw_sched_t **s);

/* Verifies s, in this order, stopping at the first failure (GAAW_ERR_INVALID_ARG with
 * a message naming the rank, the action's index in its list and the action):
 * 1. every action is well formed: a known op, mb in 0..m-1, chunk in 0..v-1, no
 *    message to or from a stage that does not exist or lives on this rank, the peer
 *    of a message the rank that holds the adjacent virtual stage;
 * 2. every send has its receive and every receive its send, in the same order for
 *    each ordered pair of ranks, with the same tag;
 * 3. on each rank, every action's dependencies come before it: F needs its input
 *    (received, or the previous chunk's F on this rank, or nothing on stage 0); a
 *    SEND_ACT its F; B or BW the F of the same (mb, c) and its output gradient
 *    (received, or the next chunk's B on this rank, or nothing on the last stage); a
 *    SEND_GRAD its B; W its B; nothing runs twice, B/W and BW are not mixed for one
 *    (mb, c), and every (mb, c) of the rank gets its F, B and W;
 * 4. run with blocking rendezvous semantics (see above) it cannot deadlock (the
 *    message names every waiting rank and the action it waits at);
 * 5. that same run, timed with costs (NULL: unit costs F = B = W = 1, p2p = 0), fills
 *    each rank's start[], end, busy and peak_in_flight, and *report (may be NULL).
 * Costs must be finite and >= 0. */
gaaw_status_t gaaw_sched_verify(gaaw_context_t ctx, gaaw_sched_t *s, const gaaw_sched_cost_t *costs,
                                gaaw_sched_report_t *report);

/* The virtual stage of chunk c on rank r: c * p + r. */
static inline int gaaw_sched_vstage(const gaaw_sched_t *s, int rank, int chunk)
{
  return chunk * s->pp + rank;
}

/* The tag both ends of a message carry: (mb * (p*v - 1) + edge) * 2 + (0 activation,
 * 1 gradient), edge = the lower virtual stage of the two it joins. -1 for a compute
 * action. Below 2 * m * p * v. */
int gaaw_sched_tag(const gaaw_sched_t *s, int rank, const gaaw_sched_action_t *a);

/* "SEND_ACT mb 3 chunk 1 to rank 2", "F mb 0 chunk 0", ... into text (always ended). */
void gaaw_sched_action_text(const gaaw_sched_action_t *a, char *text, size_t len);

/* The compute actions of the last verified run as a text timeline: a header, a ruler
 * of time slots, one row per rank ("rank 0 |F0 F1 .  B0 ..."), a cell per time unit
 * of the costs verified with (so use unit costs): Fm, Bm, Wm, BWm (two cells, the
 * second "~"), with ".c" for chunk c when v > 1, "." idle. *needed (may be NULL) gets
 * the bytes the text needs, its terminating NUL included; text may be NULL with len 0
 * to ask for that; a len too small is GAAW_ERR_INVALID_ARG. Times must be integers. */
gaaw_status_t gaaw_sched_timeline(gaaw_context_t ctx, const gaaw_sched_t *s, char *text, size_t len,
                                  size_t *needed);

#endif
