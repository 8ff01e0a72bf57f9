/* gaaw schedule: the pipeline schedules gaaw runs, as figures and as a timeline, for
 * listings such as `gaaw-info --schedule`. A schedule is named by the pp_schedule
 * value ("gpipe", "1f1b", "interleaved", "zb-h1") and sized by pp (stages), the
 * step's microbatches and virtual_stages (model chunks per rank: >= 2 for
 * interleaved, which also needs microbatches to be a multiple of pp; 1 for the
 * others). Each function generates the schedule and runs the verifier on it (the one
 * every schedule passes before its first step: dependencies in order, sends matched
 * by receives in order, no deadlock under blocking rendezvous semantics); an unknown
 * name or an invalid (pp, microbatches, virtual_stages) is GAAW_ERR_INVALID_ARG, with
 * the numbers in gaaw_last_error(NULL).
 *
 * Figures use unit costs: a forward, an input gradient (B) and a weight gradient (W)
 * of one chunk each take 1, a fused backward 2; messages take no time.
 * - makespan: when the last rank ends; idle: pp x makespan - every rank's compute
 *   time; bubble: idle / (pp x makespan). GPipe and 1F1B give (p-1)/(m+p-1),
 *   interleaved (p-1)/(v m + p-1), ZB-H1 (m >= p) a third of 1F1B's idle time.
 * - activations in flight on a rank: the (microbatch, chunk) pairs whose forward ran
 *   and whose weight gradient has not, in chunk units.
 *
 * None of these needs a context or MPI; none is collective. */
#ifndef GAAW_SCHEDULE_H
#define GAAW_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "gaaw/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int pp, microbatches, virtual_stages;
  int peak_in_flight; /* the largest of the ranks' peaks */
  double makespan;    /* in unit-cost time */
  double idle;        /* pp x makespan - compute time, over all ranks */
  double bubble;      /* idle / (pp x makespan) */
  int64_t actions;    /* every rank's actions together, sends and receives included */
} gaaw_schedule_summary_t;

/* The figures of schedule name for (pp, microbatches, virtual_stages). */
gaaw_status_t gaaw_schedule_summary(const char *name, int pp, int microbatches, int virtual_stages,
                                    gaaw_schedule_summary_t *summary);

/* Each rank's peak number of activations in flight: peak[r] for r in 0..pp-1;
 * len (the entries of peak) must be >= pp. */
gaaw_status_t gaaw_schedule_peak_in_flight(const char *name, int pp, int microbatches, int virtual_stages,
                                           int *peak, int len);

/* The schedule as text: a header, a time ruler and one row per rank with a cell per
 * unit of time ("F3", "B3", "W3", "BW3" then "~", ".chunk" appended when
 * virtual_stages > 1, "." idle), each line ended by '\n'. *needed (may be NULL) gets
 * the bytes it takes, the terminating NUL included; text may be NULL with len 0 to ask
 * only that; a smaller len is GAAW_ERR_INVALID_ARG (text then holds a truncated,
 * terminated beginning). */
gaaw_status_t gaaw_schedule_timeline(const char *name, int pp, int microbatches, int virtual_stages, char *text,
                                     size_t len, size_t *needed);

#ifdef __cplusplus
}
#endif
#endif
