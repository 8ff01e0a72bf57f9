/* The dp x pp x cp x tp rank grid and its communicators. */
#include <stdio.h>
#include <string.h>

#include "backends/comm.h"
#include "backends/runtime/config_impl.h"
#include "backends/runtime/context_impl.h"
#include "backends/runtime/log.h"
#include "parallel/topology_impl.h"

/* Group ranks and colors count the axes slowest first: pp, dp, cp, tp. */
static const int slow_to_fast[GAAW_AXIS_COUNT] = {GAAW_AXIS_PP, GAAW_AXIS_DP, GAAW_AXIS_CP, GAAW_AXIS_TP};

const char *gaaw_group_name(gaaw_group_t group)
{
  static const char *const names[GAAW_GROUP_COUNT] = {"world", "tp", "dp", "pp", "mp", "cp", "dp-cp", "ep", "edp"};
  return (unsigned)group < GAAW_GROUP_COUNT ? names[group] : "invalid";
}

/* Sizes indexed by gaaw_grid_axis. */
static void axis_sizes(const gaaw_topology *t, int sizes[GAAW_AXIS_COUNT])
{
  sizes[GAAW_AXIS_TP] = t->tp;
  sizes[GAAW_AXIS_CP] = t->cp;
  sizes[GAAW_AXIS_DP] = t->dp;
  sizes[GAAW_AXIS_PP] = t->pp;
}

int gaaw_topology_rank_from_coords(const gaaw_topology *t, int dp_rank, int pp_rank, int cp_rank, int tp_rank)
{
  int sizes[GAAW_AXIS_COUNT], coords[GAAW_AXIS_COUNT];
  axis_sizes(t, sizes);
  coords[GAAW_AXIS_TP] = tp_rank, coords[GAAW_AXIS_CP] = cp_rank;
  coords[GAAW_AXIS_DP] = dp_rank, coords[GAAW_AXIS_PP] = pp_rank;
  int rank = 0;
  for (int k = GAAW_AXIS_COUNT - 1; k >= 0; k--) rank = rank * sizes[t->order[k]] + coords[t->order[k]];
  return rank;
}

gaaw_status_t gaaw_topology_plan(gaaw_context_t ctx, int world_size, int world_rank, gaaw_topology *t)
{
  GAAW_CHECK(gaaw_topology_plan_from(ctx, ctx->config, world_size, world_rank, t));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_topology_plan_from(gaaw_context_t ctx, gaaw_config_t cfg, int world_size, int world_rank,
                                      gaaw_topology *t)
{
  int64_t tp = 0, cp = 0, pp = 0, dp = 0, ep = 0;
  char order[64];
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "ep", &ep));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "tp", &tp));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "cp", &cp));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "pp", &pp));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "dp", &dp));
  GAAW_ARG_CHECK(ctx, gaaw_config_get_string(cfg, "rank_order", order, sizeof order) == GAAW_SUCCESS,
                 "rank_order is too long");
  GAAW_ARG_CHECK(ctx, tp >= 1 && tp <= world_size, "tp must be in 1..%d (the world size), got %lld", world_size,
                 (long long)tp);
  GAAW_ARG_CHECK(ctx, cp >= 1 && cp <= world_size, "cp must be in 1..%d (the world size), got %lld", world_size,
                 (long long)cp);
  GAAW_ARG_CHECK(ctx, pp >= 1 && pp <= world_size, "pp must be in 1..%d (the world size), got %lld", world_size,
                 (long long)pp);
  GAAW_ARG_CHECK(ctx, dp >= 0 && dp <= world_size, "dp must be in 0..%d (0 = derived), got %lld", world_size,
                 (long long)dp);
  int64_t model = tp * cp * pp; /* < 2^63: each factor is at most the world size */
  GAAW_ARG_CHECK(ctx, world_size % model == 0,
                 "the world size %d is not divisible by tp x cp x pp = %lld x %lld x %lld = %lld", world_size,
                 (long long)tp, (long long)cp, (long long)pp, (long long)model);
  if (dp == 0) dp = world_size / model;
  GAAW_ARG_CHECK(ctx, dp * model == world_size,
                 "dp x pp x cp x tp = %lld x %lld x %lld x %lld = %lld, but the world size is %d", (long long)dp,
                 (long long)pp, (long long)cp, (long long)tp, (long long)(dp * model), world_size);
  GAAW_ARG_CHECK(ctx, ep >= 1 && (tp * cp * dp) % ep == 0,
                 "ep %lld does not fold onto a stage's tp x cp x dp = %lld x %lld x %lld = %lld ranks (it must "
                 "divide them)", (long long)ep, (long long)tp, (long long)cp, (long long)dp, (long long)(tp * cp * dp));
  memset(t, 0, sizeof *t);
  t->ep = (int)ep;
  t->tp = (int)tp;
  t->cp = (int)cp;
  t->pp = (int)pp;
  t->dp = (int)dp;
  GAAW_ARG_CHECK(ctx, gaaw_rank_order_parse(order, t->order),
                 "rank_order '%s' must name tp, cp, dp and pp once each (cp may be left out), fastest first "
                 "(e.g. tp-cp-dp-pp)", order);
  int sizes[GAAW_AXIS_COUNT], coords[GAAW_AXIS_COUNT], r = world_rank;
  axis_sizes(t, sizes);
  for (int k = 0; k < GAAW_AXIS_COUNT; k++) {
    coords[t->order[k]] = r % sizes[t->order[k]];
    r /= sizes[t->order[k]];
  }
  t->tp_rank = coords[GAAW_AXIS_TP];
  t->cp_rank = coords[GAAW_AXIS_CP];
  t->dp_rank = coords[GAAW_AXIS_DP];
  t->pp_rank = coords[GAAW_AXIS_PP];
  const int stage_index = (t->dp_rank * t->cp + t->cp_rank) * t->tp + t->tp_rank;
  t->ep_rank = stage_index % t->ep;
  t->edp_rank = stage_index / t->ep;
  return GAAW_SUCCESS;
}

/* This rank's index among the cells that differ from it only on the axes in `axes`
 * (a bit per gaaw_grid_axis), slowest axis first. */
static int index_on(const gaaw_topology *t, unsigned axes)
{
  int sizes[GAAW_AXIS_COUNT], coords[GAAW_AXIS_COUNT] = {t->tp_rank, t->cp_rank, t->dp_rank, t->pp_rank};
  axis_sizes(t, sizes);
  int index = 0;
  for (int k = 0; k < GAAW_AXIS_COUNT; k++)
    if (axes & (1u << slow_to_fast[k])) index = index * sizes[slow_to_fast[k]] + coords[slow_to_fast[k]];
  return index;
}

gaaw_status_t gaaw_topology_build(gaaw_context_t ctx)
{
  gaaw_topology *t = &ctx->topo;
  GAAW_CHECK(gaaw_topology_plan(ctx, ctx->size, ctx->rank, t));
  gaaw_comm_t world = NULL;
  GAAW_CHECK(gaaw_comm_create_world(ctx, "world", &world));
  t->comms[GAAW_GROUP_WORLD] = world;
  /* Each group: the members that share the other coordinates, ordered by their own. */
  enum { TP = 1u << GAAW_AXIS_TP, CP = 1u << GAAW_AXIS_CP, DP = 1u << GAAW_AXIS_DP, PP = 1u << GAAW_AXIS_PP };
  static const struct { gaaw_group_t group; unsigned axes; } groups[] = {
    {GAAW_GROUP_TP, TP}, {GAAW_GROUP_DP, DP}, {GAAW_GROUP_PP, PP}, {GAAW_GROUP_MP, PP | TP},
    {GAAW_GROUP_CP, CP}, {GAAW_GROUP_DP_CP, DP | CP},
  };
  struct { gaaw_group_t group; int color, key; } split[sizeof groups / sizeof groups[0]];
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
    split[i].group = groups[i].group, split[i].color = index_on(t, (TP | CP | DP | PP) & ~groups[i].axes),
    split[i].key = index_on(t, groups[i].axes);
  for (size_t i = 0; i < sizeof split / sizeof split[0]; i++)
    GAAW_CHECK(gaaw_comm_split(world, split[i].color, split[i].key, gaaw_group_name(split[i].group),
                               &t->comms[split[i].group]));
  /* ep and expert-dp fold onto a stage's tp x cp x dp ranks (the plan's ep_rank, edp_rank) */
  GAAW_CHECK(gaaw_comm_split(world, t->pp_rank * (t->dp * t->cp * t->tp / t->ep) + t->edp_rank, t->ep_rank, "ep",
                             &t->comms[GAAW_GROUP_EP]));
  GAAW_CHECK(gaaw_comm_split(world, t->pp_rank * t->ep + t->ep_rank, t->edp_rank, "edp", &t->comms[GAAW_GROUP_EDP]));
  /* groups whose members are all CUDA ranks talk through NCCL (the world last: the
   * others were split from it) */
  for (int g = GAAW_GROUP_COUNT - 1; g >= 0; g--) GAAW_CHECK(gaaw_comm_prefer_nccl(&t->comms[g]));
  gaaw_log(GAAW_LOG_INFO, "topology dp %d x pp %d x cp %d x tp %d; this rank dp %d pp %d cp %d tp %d", t->dp, t->pp,
           t->cp, t->tp, t->dp_rank, t->pp_rank, t->cp_rank, t->tp_rank);
  return GAAW_SUCCESS;
}

void gaaw_topology_free(gaaw_context_t ctx)
{
  for (int g = GAAW_GROUP_COUNT - 1; g >= 0; g--) gaaw_comm_destroy(&ctx->topo.comms[g]);
}

gaaw_status_t gaaw_topology_sizes(gaaw_context_t ctx, int *dp, int *pp, int *tp)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  if (dp) *dp = ctx->topo.dp;
  if (pp) *pp = ctx->topo.pp;
  if (tp) *tp = ctx->topo.tp;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_topology_coords(gaaw_context_t ctx, int *dp_rank, int *pp_rank, int *tp_rank)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  if (dp_rank) *dp_rank = ctx->topo.dp_rank;
  if (pp_rank) *pp_rank = ctx->topo.pp_rank;
  if (tp_rank) *tp_rank = ctx->topo.tp_rank;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_topology_cp(gaaw_context_t ctx, int *cp, int *cp_rank)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  if (cp) *cp = ctx->topo.cp;
  if (cp_rank) *cp_rank = ctx->topo.cp_rank;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_topology_ep(gaaw_context_t ctx, int *ep, int *ep_rank)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  if (ep) *ep = ctx->topo.ep;
  if (ep_rank) *ep_rank = ctx->topo.ep_rank;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_topology_rank_of_cp(gaaw_context_t ctx, int dp_rank, int pp_rank, int cp_rank, int tp_rank,
                                       int *world_rank)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, world_rank);
  const gaaw_topology *t = &ctx->topo;
  GAAW_ARG_CHECK(ctx, dp_rank >= 0 && dp_rank < t->dp, "dp_rank %d is not in 0..%d", dp_rank, t->dp - 1);
  GAAW_ARG_CHECK(ctx, pp_rank >= 0 && pp_rank < t->pp, "pp_rank %d is not in 0..%d", pp_rank, t->pp - 1);
  GAAW_ARG_CHECK(ctx, cp_rank >= 0 && cp_rank < t->cp, "cp_rank %d is not in 0..%d", cp_rank, t->cp - 1);
  GAAW_ARG_CHECK(ctx, tp_rank >= 0 && tp_rank < t->tp, "tp_rank %d is not in 0..%d", tp_rank, t->tp - 1);
  *world_rank = gaaw_topology_rank_from_coords(t, dp_rank, pp_rank, cp_rank, tp_rank);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_topology_rank_of(gaaw_context_t ctx, int dp_rank, int pp_rank, int tp_rank, int *world_rank)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  return gaaw_topology_rank_of_cp(ctx, dp_rank, pp_rank, ctx->topo.cp_rank, tp_rank, world_rank);
}

gaaw_status_t gaaw_topology_comm(gaaw_context_t ctx, gaaw_group_t group, gaaw_comm_t *comm)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, comm);
  GAAW_ARG_CHECK(ctx, (unsigned)group < GAAW_GROUP_COUNT, "group %d is not a gaaw_group_t", (int)group);
  *comm = ctx->topo.comms[group];
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_topology_group_rank(gaaw_context_t ctx, gaaw_group_t group, int *rank, int *size)
{
  gaaw_comm_t comm;
  GAAW_CHECK(gaaw_topology_comm(ctx, group, &comm));
  if (rank) *rank = comm->rank;
  if (size) *size = comm->size;
  return GAAW_SUCCESS;
}
