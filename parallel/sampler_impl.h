/* A sample buffer's state, for checkpoints (zero/checkpoint_*.c): what a replica's
 * buffer holds and how far its streams have gone. */
#ifndef GAAW_PARALLEL_SAMPLER_IMPL_H
#define GAAW_PARALLEL_SAMPLER_IMPL_H

#include "gaaw/sampler.h"

typedef struct {
  gaaw_sampler_config_t cfg;
  int64_t width;      /* floats per row: inputs + outputs */
  int64_t held, pushed;
  uint64_t drawn;
  const float *rows;  /* (held, width): the slots in use, in slot order */
  int dp_rank;        /* the replica it belongs to */
  int writer;         /* rank 0 of its model-parallel group (every rank of which holds the same buffer) */
} gaaw_sampler_state;

void gaaw_sampler_get_state(gaaw_sampler_t s, gaaw_sampler_state *st);
/* Replaces the buffer's rows [0, held) (copied from rows, (held, width)) and its
 * counters. held <= capacity. */
void gaaw_sampler_set_state(gaaw_sampler_t s, const float *rows, int64_t held, int64_t pushed, uint64_t drawn);

#endif
