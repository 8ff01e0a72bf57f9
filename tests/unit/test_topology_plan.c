/* The rank grid without MPI ranks: for many world sizes and layouts, coordinates
 * follow Megatron-LM's order (tp fastest, then dp, then pp), every rank gets a
 * distinct cell, and sizes that do not factor are errors naming the numbers. */
#include <mpi.h>

#include "backends/runtime/context_impl.h"
#include "parallel/topology_impl.h"
#include "test_util.h"

static gaaw_config_t cfg_of(gaaw_context_t ctx)
{
  gaaw_config_t c;
  gaaw_context_config(ctx, &c);
  return c;
}

/* Every rank of a world of `size` gets a distinct cell and rank_from_coords inverts it. */
static void check_grid(gaaw_context_t ctx, int size, int tp, int pp, const char *order)
{
  gaaw_config_t c = cfg_of(ctx);
  gaaw_config_set_int(c, "tp", tp);
  gaaw_config_set_int(c, "pp", pp);
  gaaw_config_set_int(c, "dp", 0);
  gaaw_config_set_string(c, "rank_order", order);
  int dp = size / (tp * pp);
  char seen[256] = {0};
  for (int r = 0; r < size; r++) {
    gaaw_topology t;
    expect_status_ctx(ctx, gaaw_topology_plan(ctx, size, r, &t), GAAW_SUCCESS);
    expect_true(t.tp == tp && t.pp == pp && t.dp == dp, "sizes %d %d %d", t.dp, t.pp, t.tp);
    int cell = (t.pp_rank * dp + t.dp_rank) * tp + t.tp_rank;
    expect_true(cell >= 0 && cell < size && !seen[cell], "rank %d lands on cell %d twice", r, cell);
    if (cell >= 0 && cell < size) seen[cell] = 1;
    expect_true(gaaw_topology_rank_from_coords(&t, t.dp_rank, t.pp_rank, t.tp_rank) == r,
                "rank_from_coords does not invert rank %d (order %s)", r, order);
    if (strcmp(order, "tp-dp-pp") == 0)
      expect_true(cell == r, "Megatron order: rank %d has (pp %d, dp %d, tp %d)", r, t.pp_rank, t.dp_rank,
                  t.tp_rank);
  }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", "host"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));

  const char *orders[] = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "pp,dp,tp"};
  int layouts[][3] = {{1, 1, 1}, {8, 1, 1}, {8, 2, 1}, {8, 2, 2}, {8, 1, 4}, {12, 3, 2}, {16, 4, 2}, {6, 2, 3}};
  for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++)
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
      check_grid(ctx, layouts[l][0], layouts[l][1], layouts[l][2], orders[o]);

  /* rank 5 of 8 with tp 2, pp 2: tp 1, dp 0, pp 1 */
  gaaw_config_t c = cfg_of(ctx);
  gaaw_topology t;
  gaaw_config_parse(c, "tp=2 pp=2 dp=0 rank_order=tp-dp-pp");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 5, &t), GAAW_SUCCESS);
  expect_true(t.tp_rank == 1 && t.dp_rank == 0 && t.pp_rank == 1, "rank 5: tp %d dp %d pp %d", t.tp_rank,
              t.dp_rank, t.pp_rank);

  /* sizes that do not fit are errors naming the numbers */
  gaaw_config_parse(c, "tp=3 pp=1 dp=0");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "world size 8 is not divisible by tp x pp = 3 x 1 = 3") != NULL, "%s",
              gaaw_last_error(ctx));
  gaaw_config_parse(c, "tp=2 pp=1 dp=3");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "dp x pp x tp = 3 x 1 x 2 = 6, but the world size is 8") != NULL, "%s",
              gaaw_last_error(ctx));
  gaaw_config_parse(c, "tp=2 pp=1 dp=4");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_SUCCESS);
  gaaw_config_parse(c, "tp=0 dp=0");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  gaaw_config_parse(c, "tp=16");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  gaaw_config_parse(c, "tp=1 pp=-1");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  gaaw_config_parse(c, "pp=1 dp=-2");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  gaaw_config_parse(c, "dp=0");
  const char *bad_orders[] = {"tp-dp", "tp-tp-pp", "tp-dp-pp-tp", "tp-dp-ep", "", "a-very-long-order-string-that-is-wrong"};
  for (size_t i = 0; i < sizeof bad_orders / sizeof bad_orders[0]; i++) {
    gaaw_config_set_string(c, "rank_order", bad_orders[i]);
    expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  }
  gaaw_config_set_string(c, "rank_order", "tp-dp-pp");

  /* one rank: every group is this rank alone */
  int dp, pp, tp, rank, size;
  expect_status_ctx(ctx, gaaw_topology_sizes(ctx, &dp, &pp, &tp), GAAW_SUCCESS);
  expect_true(dp == 1 && pp == 1 && tp == 1, "sizes %d %d %d", dp, pp, tp);
  for (int g = 0; g < GAAW_GROUP_COUNT; g++) {
    expect_status_ctx(ctx, gaaw_topology_group_rank(ctx, (gaaw_group_t)g, &rank, &size), GAAW_SUCCESS);
    expect_true(rank == 0 && size == 1, "group %s: rank %d size %d", gaaw_group_name((gaaw_group_t)g), rank, size);
  }
  expect_true(strcmp(gaaw_group_name(GAAW_GROUP_MP), "mp") == 0, "name");
  expect_true(strcmp(gaaw_group_name((gaaw_group_t)9), "invalid") == 0, "bad name");

  /* bad input of the topology API */
  gaaw_comm_t comm;
  expect_status(gaaw_topology_sizes(NULL, &dp, &pp, &tp), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_topology_coords(NULL, &dp, &pp, &tp), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_topology_rank_of(NULL, 0, 0, 0, &rank), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_rank_of(ctx, 1, 0, 0, &rank), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "dp_rank 1 is not in 0..0") != NULL, "%s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_topology_rank_of(ctx, 0, -1, 0, &rank), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_rank_of(ctx, 0, 0, 2, &rank), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_rank_of(ctx, 0, 0, 0, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_topology_comm(NULL, GAAW_GROUP_TP, &comm), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_comm(ctx, (gaaw_group_t)5, &comm), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_TP, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_group_rank(ctx, (gaaw_group_t)-1, &rank, &size), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_topology_group_rank(NULL, GAAW_GROUP_TP, &rank, &size), GAAW_ERR_INVALID_ARG);

  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return test_finish("test_topology_plan");
}
