/* The dp x pp x tp rank grid and its communicators. */
#include <stdio.h>
#include <string.h>

#include "backends/comm.h"
#include "backends/runtime/context_impl.h"
#include "backends/runtime/log.h"
#include "parallel/topology_impl.h"

enum { DIM_TP = 0, DIM_DP = 1, DIM_PP = 2 };
static const char *const dim_names[3] = {"tp", "dp", "pp"};

const char *gaaw_group_name(gaaw_group_t group)
{
  static const char *const names[GAAW_GROUP_COUNT] = {"world", "tp", "dp", "pp", "mp"};
  return (unsigned)group < GAAW_GROUP_COUNT ? names[group] : "invalid";
}

/* Parses "tp-dp-pp" (any order of the three, fastest-varying first). */
static gaaw_status_t parse_order(gaaw_context_t ctx, const char *text, int order[3])
{
  char buf[32];
  GAAW_ARG_CHECK(ctx, strlen(text) < sizeof buf, "rank_order '%s' is too long", text);
  strcpy(buf, text);
  int seen = 0, n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, "-,", &save); tok; tok = strtok_r(NULL, "-,", &save)) {
    int d = -1;
    for (int k = 0; k < 3; k++)
      if (strcmp(tok, dim_names[k]) == 0) d = k;
    GAAW_ARG_CHECK(ctx, d >= 0 && n < 3 && !(seen & (1 << d)),
                   "rank_order '%s' must name tp, dp and pp once each, fastest first (e.g. tp-dp-pp)", text);
    seen |= 1 << d;
    order[n++] = d;
  }
  GAAW_ARG_CHECK(ctx, n == 3, "rank_order '%s' must name tp, dp and pp once each, fastest first (e.g. tp-dp-pp)",
                 text);
  return GAAW_SUCCESS;
}

/* Sizes indexed by dimension. */
static void dim_sizes(const gaaw_topology *t, int sizes[3])
{
  sizes[DIM_TP] = t->tp;
  sizes[DIM_DP] = t->dp;
  sizes[DIM_PP] = t->pp;
}

int gaaw_topology_rank_from_coords(const gaaw_topology *t, int dp_rank, int pp_rank, int tp_rank)
{
  int sizes[3], coords[3] = {tp_rank, dp_rank, pp_rank};
  dim_sizes(t, sizes);
  int rank = 0;
  for (int k = 2; k >= 0; k--) rank = rank * sizes[t->order[k]] + coords[t->order[k]];
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
  int64_t tp = 0, pp = 0, dp = 0;
  char order[64];
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "tp", &tp));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "pp", &pp));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "dp", &dp));
  GAAW_ARG_CHECK(ctx, gaaw_config_get_string(cfg, "rank_order", order, sizeof order) == GAAW_SUCCESS,
                 "rank_order is too long");
  GAAW_ARG_CHECK(ctx, tp >= 1 && tp <= world_size, "tp must be in 1..%d (the world size), got %lld", world_size,
                 (long long)tp);
  GAAW_ARG_CHECK(ctx, pp >= 1 && pp <= world_size, "pp must be in 1..%d (the world size), got %lld", world_size,
                 (long long)pp);
  GAAW_ARG_CHECK(ctx, dp >= 0 && dp <= world_size, "dp must be in 0..%d (0 = derived), got %lld", world_size,
                 (long long)dp);
  GAAW_ARG_CHECK(ctx, world_size % (tp * pp) == 0,
                 "the world size %d is not divisible by tp x pp = %lld x %lld = %lld", world_size, (long long)tp,
                 (long long)pp, (long long)(tp * pp));
  if (dp == 0) dp = world_size / (tp * pp);
  GAAW_ARG_CHECK(ctx, dp * tp * pp == world_size, "dp x pp x tp = %lld x %lld x %lld = %lld, but the world size is %d",
                 (long long)dp, (long long)pp, (long long)tp, (long long)(dp * pp * tp), world_size);
  memset(t, 0, sizeof *t);
  t->tp = (int)tp;
  t->pp = (int)pp;
  t->dp = (int)dp;
  GAAW_CHECK(parse_order(ctx, order, t->order));
  int sizes[3], coords[3], r = world_rank;
  dim_sizes(t, sizes);
  for (int k = 0; k < 3; k++) {
    coords[t->order[k]] = r % sizes[t->order[k]];
    r /= sizes[t->order[k]];
  }
  t->tp_rank = coords[DIM_TP];
  t->dp_rank = coords[DIM_DP];
  t->pp_rank = coords[DIM_PP];
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_topology_build(gaaw_context_t ctx)
{
  gaaw_topology *t = &ctx->topo;
  GAAW_CHECK(gaaw_topology_plan(ctx, ctx->size, ctx->rank, t));
  gaaw_comm_t world = NULL;
  GAAW_CHECK(gaaw_comm_create_world(ctx, "world", &world));
  t->comms[GAAW_GROUP_WORLD] = world;
  /* Each group: the members that share the other coordinates, ordered by their own. */
  struct { gaaw_group_t group; int color, key; } split[] = {
    {GAAW_GROUP_TP, t->pp_rank * t->dp + t->dp_rank, t->tp_rank},
    {GAAW_GROUP_DP, t->pp_rank * t->tp + t->tp_rank, t->dp_rank},
    {GAAW_GROUP_PP, t->dp_rank * t->tp + t->tp_rank, t->pp_rank},
    {GAAW_GROUP_MP, t->dp_rank, t->pp_rank * t->tp + t->tp_rank},
  };
  for (size_t i = 0; i < sizeof split / sizeof split[0]; i++)
    GAAW_CHECK(gaaw_comm_split(world, split[i].color, split[i].key, gaaw_group_name(split[i].group),
                               &t->comms[split[i].group]));
  /* groups whose members are all CUDA ranks talk through NCCL (the world last: the
   * others were split from it) */
  for (int g = GAAW_GROUP_COUNT - 1; g >= 0; g--) GAAW_CHECK(gaaw_comm_prefer_nccl(&t->comms[g]));
  gaaw_log(GAAW_LOG_INFO, "topology dp %d x pp %d x tp %d; this rank dp %d pp %d tp %d", t->dp, t->pp, t->tp,
           t->dp_rank, t->pp_rank, t->tp_rank);
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

gaaw_status_t gaaw_topology_rank_of(gaaw_context_t ctx, int dp_rank, int pp_rank, int tp_rank, int *world_rank)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, world_rank);
  const gaaw_topology *t = &ctx->topo;
  GAAW_ARG_CHECK(ctx, dp_rank >= 0 && dp_rank < t->dp, "dp_rank %d is not in 0..%d", dp_rank, t->dp - 1);
  GAAW_ARG_CHECK(ctx, pp_rank >= 0 && pp_rank < t->pp, "pp_rank %d is not in 0..%d", pp_rank, t->pp - 1);
  GAAW_ARG_CHECK(ctx, tp_rank >= 0 && tp_rank < t->tp, "tp_rank %d is not in 0..%d", tp_rank, t->tp - 1);
  *world_rank = gaaw_topology_rank_from_coords(t, dp_rank, pp_rank, tp_rank);
  return GAAW_SUCCESS;
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
