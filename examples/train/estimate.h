/* gaaw-train's memory estimate, before the model exists: gaaw_memory_estimate of
 * this job's GPT, layout, optimizer and microbatch (the largest rank's), the line
 * rank 0 prints, and the refusal of a job whose estimate exceeds option
 * device_memory_limit, naming the changes that would fit, each estimated too. */
#ifndef GAAW_TRAIN_ESTIMATE_H
#define GAAW_TRAIN_ESTIMATE_H

#include <stddef.h>
#include <stdint.h>

#include "examples/train/options.h"
#include "gaaw.h"

typedef struct {
  int ok;                     /* the estimate was computed; else reason says why not */
  gaaw_memory_estimate_t est; /* the largest rank's (options.rank -1) */
  uint64_t in_use;            /* device bytes this rank's context holds already, before the model */
  uint64_t need;              /* est.total[GAAW_SPACE_DEVICE] + in_use: what the cap must hold */
  uint64_t cap;               /* device_memory_limit in bytes, 0 = none */
  char reason[1024];
} train_estimate;

/* Estimates the job of opts on ctx's layout (its options and world). Returns
 * TRAIN_EXIT_OK, or TRAIN_EXIT_USAGE when the estimate exceeds device_memory_limit,
 * with err naming the estimate, the limit and the changes that fit (each one
 * re-estimated: a higher --zero, --offload-optimizer host, --offload-params host,
 * --recompute, fewer rows per microbatch, a larger --tp or --pp) and the limit
 * that would do. An estimate that cannot be made (e->ok = 0) refuses nothing: the
 * allocator still enforces the limit. Not collective: every rank computes the same
 * from the same options; the caller agrees on the verdict. */
int train_estimate_check(gaaw_context_t ctx, const train_options *opts, train_estimate *e, char *err, size_t len);

/* Rank 0's line on stdout, after the header; on stderr a warning when the
 * estimate is within the allocator's rounding (1/8) of the limit. */
void train_estimate_print(const train_estimate *e);

#endif
