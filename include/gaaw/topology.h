/* gaaw topology: world = dp x pp x cp x tp, built by gaaw_init from the options tp,
 * cp, pp and dp (0 = world / (tp * cp * pp)). Default rank order as Megatron-LM's: tp
 * varies fastest, then cp, then dp, then pp:
 *   rank = ((pp_rank * dp + dp_rank) * cp + cp_rank) * tp + tp_rank,
 * so tensor-parallel groups stay inside a node (option rank_order, fastest first).
 * cp (context parallelism, doc/context-parallel.md) splits each sequence over its
 * ranks; they hold the same weights, so gradients and ZeRO shards reduce over dp x cp.
 * ep (expert parallelism, doc/moe.md) folds onto the same ranks: a stage's tp x cp x
 * dp ranks, counted tp fastest, form groups of ep consecutive ranks that split the
 * experts (GAAW_GROUP_EP); the ranks at one ep coordinate hold the same experts
 * (GAAW_GROUP_EDP, expert-dp), over which expert gradients and shards reduce. */
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
  GAAW_GROUP_MP = 4,    /* model-parallel: same dp and cp coordinates (tp x pp ranks) */
  GAAW_GROUP_CP = 5,    /* context-parallel: same tp, dp and pp coordinates */
  GAAW_GROUP_DP_CP = 6, /* the ranks that hold the same weights: same tp and pp coordinates
                           (dp x cp ranks, dp slowest) */
  GAAW_GROUP_EP = 7,    /* expert-parallel: the ep consecutive ranks of a stage's tp x cp x dp
                           ranks (counted tp fastest) that split the experts */
  GAAW_GROUP_EDP = 8    /* expert-dp: the ranks of a stage at the same ep coordinate, which
                           hold the same experts (tp x cp x dp / ep of them) */
} gaaw_group_t;
#define GAAW_GROUP_COUNT 9

/* Sizes of the dimensions dp, pp and tp (cp: gaaw_topology_cp). Not collective. */
gaaw_status_t gaaw_topology_sizes(gaaw_context_t ctx, int *dp, int *pp, int *tp);
/* This rank's coordinates on dp, pp and tp. Not collective. */
gaaw_status_t gaaw_topology_coords(gaaw_context_t ctx, int *dp_rank, int *pp_rank, int *tp_rank);
/* The context-parallel size and this rank's cp coordinate. Not collective. */
gaaw_status_t gaaw_topology_cp(gaaw_context_t ctx, int *cp, int *cp_rank);
/* The expert-parallel size (option ep) and this rank's ep coordinate: its index
 * among the stage's tp x cp x dp ranks (tp fastest, then cp, then dp), modulo ep.
 * Not collective. */
gaaw_status_t gaaw_topology_ep(gaaw_context_t ctx, int *ep, int *ep_rank);
/* World rank of the given coordinates, at this rank's own cp coordinate. Not collective. */
gaaw_status_t gaaw_topology_rank_of(gaaw_context_t ctx, int dp_rank, int pp_rank, int tp_rank,
                                    int *world_rank);
/* World rank of the given coordinates on all four axes. Not collective. */
gaaw_status_t gaaw_topology_rank_of_cp(gaaw_context_t ctx, int dp_rank, int pp_rank, int cp_rank, int tp_rank,
                                       int *world_rank);
/* The communicator of this rank's group (owned by the context: do not free).
 * Not collective. */
gaaw_status_t gaaw_topology_comm(gaaw_context_t ctx, gaaw_group_t group, gaaw_comm_t *comm);
/* This rank's index in its group and the group's size. Not collective. */
gaaw_status_t gaaw_topology_group_rank(gaaw_context_t ctx, gaaw_group_t group, int *rank, int *size);
/* "world", "tp", "dp", "pp", "mp", "cp", "dp-cp", "ep", "edp"; "invalid" otherwise. */
const char *gaaw_group_name(gaaw_group_t group);

#ifdef __cplusplus
}
#endif
#endif
