/* The rank grid without MPI ranks: for many world sizes and layouts, coordinates
 * follow Megatron-LM's order (tp fastest, then cp, dp, pp), every rank gets a
 * distinct cell, an order that leaves cp out puts it right after tp, and sizes that
 * do not factor are errors naming the numbers. */
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

static void set_layout(gaaw_context_t ctx, int tp, int cp, int pp, const char *order)
{
  gaaw_config_t c = cfg_of(ctx);
  gaaw_config_set_int(c, "tp", tp);
  gaaw_config_set_int(c, "cp", cp);
  gaaw_config_set_int(c, "pp", pp);
  gaaw_config_set_int(c, "dp", 0);
  gaaw_config_set_string(c, "rank_order", order);
}

/* Every rank of a world of `size` gets a distinct cell and rank_from_coords inverts it. */
static void check_grid(gaaw_context_t ctx, int size, int tp, int cp, int pp, const char *order)
{
  set_layout(ctx, tp, cp, pp, order);
  int dp = size / (tp * cp * pp);
  char seen[256] = {0};
  for (int r = 0; r < size; r++) {
    gaaw_topology t;
    expect_status_ctx(ctx, gaaw_topology_plan(ctx, size, r, &t), GAAW_SUCCESS);
    expect_true(t.tp == tp && t.cp == cp && t.pp == pp && t.dp == dp, "sizes %d %d %d %d", t.dp, t.pp, t.cp, t.tp);
    int cell = ((t.pp_rank * dp + t.dp_rank) * cp + t.cp_rank) * tp + t.tp_rank;
    expect_true(cell >= 0 && cell < size && !seen[cell], "rank %d lands on cell %d twice", r, cell);
    if (cell >= 0 && cell < size) seen[cell] = 1;
    expect_true(gaaw_topology_rank_from_coords(&t, t.dp_rank, t.pp_rank, t.cp_rank, t.tp_rank) == r,
                "rank_from_coords does not invert rank %d (order %s)", r, order);
    if (strcmp(order, "tp-cp-dp-pp") == 0)
      expect_true(cell == r, "Megatron order: rank %d has (pp %d, dp %d, cp %d, tp %d)", r, t.pp_rank, t.dp_rank,
                  t.cp_rank, t.tp_rank);
  }
}

/* An order without cp is the order with cp right after tp. */
static void check_cp_left_out(gaaw_context_t ctx, int size, int tp, int cp, int pp, const char *without,
                              const char *with)
{
  for (int r = 0; r < size; r++) {
    gaaw_topology a, b;
    set_layout(ctx, tp, cp, pp, without);
    expect_status_ctx(ctx, gaaw_topology_plan(ctx, size, r, &a), GAAW_SUCCESS);
    set_layout(ctx, tp, cp, pp, with);
    expect_status_ctx(ctx, gaaw_topology_plan(ctx, size, r, &b), GAAW_SUCCESS);
    expect_true(a.tp_rank == b.tp_rank && a.cp_rank == b.cp_rank && a.dp_rank == b.dp_rank && a.pp_rank == b.pp_rank,
                "rank %d: order %s is not %s", r, without, with);
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

  const char *orders[] = {"tp-cp-dp-pp", "tp-dp-pp", "tp-pp-cp-dp", "dp-tp-pp", "pp,dp,tp,cp", "cp-pp-tp-dp"};
  int layouts[][4] = {{1, 1, 1, 1},  {8, 1, 1, 1},  {8, 2, 1, 1},   {8, 2, 1, 2},  {8, 1, 1, 4}, {12, 3, 1, 2},
                      {16, 4, 1, 2}, {6, 2, 1, 3},  {8, 1, 2, 1},   {8, 2, 2, 1},  {16, 2, 2, 2}, {24, 2, 3, 2},
                      {12, 1, 4, 3}, {8, 1, 8, 1}};
  for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++)
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
      check_grid(ctx, layouts[l][0], layouts[l][1], layouts[l][2], layouts[l][3], orders[o]);
  check_cp_left_out(ctx, 16, 2, 2, 2, "tp-dp-pp", "tp-cp-dp-pp");
  check_cp_left_out(ctx, 24, 2, 3, 2, "dp-pp-tp", "dp-pp-tp-cp");
  check_cp_left_out(ctx, 12, 1, 3, 2, "pp,tp,dp", "pp,tp,cp,dp");

  /* rank 5 of 8 with tp 2, pp 2: tp 1, dp 0, pp 1 */
  gaaw_config_t c = cfg_of(ctx);
  gaaw_topology t;
  gaaw_config_parse(c, "tp=2 pp=2 cp=1 dp=0 rank_order=tp-dp-pp");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 5, &t), GAAW_SUCCESS);
  expect_true(t.tp_rank == 1 && t.dp_rank == 0 && t.pp_rank == 1, "rank 5: tp %d dp %d pp %d", t.tp_rank,
              t.dp_rank, t.pp_rank);
  /* rank 13 of 16 with tp 2, cp 2, dp 2, pp 2 (Megatron order): tp 1, cp 0, dp 1, pp 1 */
  gaaw_config_parse(c, "tp=2 pp=2 cp=2 dp=0 rank_order=tp-cp-dp-pp");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 16, 13, &t), GAAW_SUCCESS);
  expect_true(t.tp_rank == 1 && t.cp_rank == 0 && t.dp_rank == 1 && t.pp_rank == 1, "rank 13: tp %d cp %d dp %d pp %d",
              t.tp_rank, t.cp_rank, t.dp_rank, t.pp_rank);
  gaaw_config_parse(c, "tp=2 pp=1 cp=3 dp=0");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "world size 8 is not divisible by tp x cp x pp = 2 x 3 x 1 = 6") != NULL,
              "%s", gaaw_last_error(ctx));
  gaaw_config_parse(c, "tp=1 cp=9");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "cp must be in 1..8 (the world size), got 9") != NULL, "%s",
              gaaw_last_error(ctx));
  gaaw_config_parse(c, "cp=1");
  /* ep folds onto a stage's tp x cp x dp ranks, tp fastest: rank 13 of 16 (tp 2, cp
   * 2, dp 2, pp 2) is stage index 5, ep rank 1 of 4; ep 3 does not fold */
  gaaw_config_parse(c, "tp=2 pp=2 cp=2 dp=0 ep=4 rank_order=tp-cp-dp-pp");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 16, 13, &t), GAAW_SUCCESS);
  expect_true(t.ep == 4 && t.ep_rank == 1 && t.edp_rank == 1, "rank 13: ep rank %d of %d, expert-dp rank %d", t.ep_rank,
              t.ep, t.edp_rank);
  gaaw_config_parse(c, "ep=3");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 16, 13, &t), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "ep 3 does not fold onto a stage's tp x cp x dp = 2 x 2 x 2 = 8") != NULL,
              "%s", gaaw_last_error(ctx));
  gaaw_config_parse(c, "tp=1 pp=1 cp=1 ep=1");

  /* sizes that do not fit are errors naming the numbers */
  gaaw_config_parse(c, "tp=3 pp=1 dp=0");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "world size 8 is not divisible by tp x cp x pp = 3 x 1 x 1 = 3") != NULL, "%s",
              gaaw_last_error(ctx));
  gaaw_config_parse(c, "tp=2 pp=1 dp=3");
  expect_status_ctx(ctx, gaaw_topology_plan(ctx, 8, 0, &t), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "dp x pp x cp x tp = 3 x 1 x 1 x 2 = 6, but the world size is 8") != NULL, "%s",
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
  const char *bad_orders[] = {"tp-dp",    "tp-tp-pp", "tp-dp-pp-tp", "tp-dp-ep",
                              "",         "a-very-long-order-string-that-is-wrong",
                              "tp-cp-dp", "cp-cp-tp-dp-pp"};
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
  expect_true(strcmp(gaaw_group_name(GAAW_GROUP_DP_CP), "dp-cp") == 0, "name");
  expect_true(strcmp(gaaw_group_name(GAAW_GROUP_EDP), "edp") == 0, "name");
  expect_true(strcmp(gaaw_group_name((gaaw_group_t)GAAW_GROUP_COUNT), "invalid") == 0, "bad name");

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
  expect_status_ctx(ctx, gaaw_topology_comm(ctx, (gaaw_group_t)GAAW_GROUP_COUNT, &comm), GAAW_ERR_INVALID_ARG);
  int cp = 0, cp_rank = -1;
  expect_status_ctx(ctx, gaaw_topology_cp(ctx, &cp, &cp_rank), GAAW_SUCCESS);
  expect_true(cp == 1 && cp_rank == 0, "cp %d, cp rank %d", cp, cp_rank);
  expect_status(gaaw_topology_cp(NULL, &cp, &cp_rank), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_topology_rank_of_cp(NULL, 0, 0, 0, 0, &rank), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_rank_of_cp(ctx, 0, 0, 1, 0, &rank), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "cp_rank 1 is not in 0..0") != NULL, "%s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_topology_rank_of_cp(ctx, 0, 0, 0, 0, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_rank_of_cp(ctx, 0, 0, 0, 0, &rank), GAAW_SUCCESS);
  expect_true(rank == 0, "rank_of_cp gives %d", rank);
  expect_status_ctx(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_TP, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_topology_group_rank(ctx, (gaaw_group_t)-1, &rank, &size), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_topology_group_rank(NULL, GAAW_GROUP_TP, &rank, &size), GAAW_ERR_INVALID_ARG);

  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return test_finish("test_topology_plan");
}
