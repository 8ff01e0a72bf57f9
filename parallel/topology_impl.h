/* Topology internals: planning the grid (pure, testable without MPI) and building
 * its communicators. */
#ifndef GAAW_PARALLEL_TOPOLOGY_IMPL_H
#define GAAW_PARALLEL_TOPOLOGY_IMPL_H

#include "backends/runtime/context_impl.h"

/* Sizes and this rank's coordinates from the options tp, cp, pp, dp and rank_order;
 * an error names the numbers that do not fit. Not collective. */
gaaw_status_t gaaw_topology_plan(gaaw_context_t ctx, int world_size, int world_rank, gaaw_topology *t);
/* The same from the options of cfg (the memory estimate's layout); errors go to ctx. */
gaaw_status_t gaaw_topology_plan_from(gaaw_context_t ctx, gaaw_config_t cfg, int world_size, int world_rank,
                                      gaaw_topology *t);
/* World rank of coordinates under t's order. */
int gaaw_topology_rank_from_coords(const gaaw_topology *t, int dp_rank, int pp_rank, int cp_rank, int tp_rank);
/* Plans ctx->topo and creates its communicators. Collective over world. */
gaaw_status_t gaaw_topology_build(gaaw_context_t ctx);
/* Frees the communicators. */
void gaaw_topology_free(gaaw_context_t ctx);

#endif
