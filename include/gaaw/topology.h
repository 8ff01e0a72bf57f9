/* gaaw topology: world = dp x pp x tp, built by gaaw_init from the options tp, pp
 * and dp (0 = world / (tp * pp)). Default rank order as Megatron-LM's: tp varies
 * fastest, then dp, then pp: rank = (pp_rank * dp + dp_rank) * tp + tp_rank, so
 * tensor-parallel groups stay inside a node (option rank_order, fastest first). */
#ifndef GAAW_TOPOLOGY_H
#define GAAW_TOPOLOGY_H

#include "gaaw/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GAAW_GROUP_WORLD = 0, /* every rank */
  GAAW_GROUP_TP = 1,    /* same dp and pp coordinates */
  GAAW_GROUP_DP = 2,    /* same tp and pp coordinates */
  GAAW_GROUP_PP = 3,    /* same tp and dp coordinates */
  GAAW_GROUP_MP = 4     /* model-parallel: same dp coordinate (tp x pp ranks) */
} gaaw_group_t;
#define GAAW_GROUP_COUNT 5

/* Sizes of the three dimensions. Not collective. */
gaaw_status_t gaaw_topology_sizes(gaaw_context_t ctx, int *dp, int *pp, int *tp);
/* This rank's coordinates. Not collective. */
gaaw_status_t gaaw_topology_coords(gaaw_context_t ctx, int *dp_rank, int *pp_rank, int *tp_rank);
/* World rank of the given coordinates. Not collective. */
gaaw_status_t gaaw_topology_rank_of(gaaw_context_t ctx, int dp_rank, int pp_rank, int tp_rank,
                                    int *world_rank);
/* The communicator of this rank's group (owned by the context: do not free).
 * Not collective. */
gaaw_status_t gaaw_topology_comm(gaaw_context_t ctx, gaaw_group_t group, gaaw_comm_t *comm);
/* This rank's index in its group and the group's size. Not collective. */
gaaw_status_t gaaw_topology_group_rank(gaaw_context_t ctx, gaaw_group_t group, int *rank, int *size);
/* "world", "tp", "dp", "pp", "mp"; "invalid" otherwise. */
const char *gaaw_group_name(gaaw_group_t group);

#ifdef __cplusplus
}
#endif
#endif
