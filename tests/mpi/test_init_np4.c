/* gaaw_init on 4 ranks: the dp x pp x cp x tp grid and its groups, and
 * configurations that cannot work failing on every rank together, without a hang. */
#include <mpi.h>

#include "tests/harness/model_util.h"

static int world_rank;

static gaaw_config_t host_config(const char *options)
{
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", "host"));
  require_ok(NULL, gaaw_config_parse(cfg, options));
  return cfg;
}

static void expect_group(gaaw_context_t ctx, gaaw_group_t g, int want_rank, int want_size)
{
  int rank = -1, size = -1;
  expect_status_ctx(ctx, gaaw_topology_group_rank(ctx, g, &rank, &size), GAAW_SUCCESS);
  expect_true(rank == want_rank && size == want_size, "rank %d: group %s has rank %d size %d, expected %d of %d",
              world_rank, gaaw_group_name(g), rank, size, want_rank, want_size);
  gaaw_comm_t comm;
  expect_status_ctx(ctx, gaaw_topology_comm(ctx, g, &comm), GAAW_SUCCESS);
  const char *backend = NULL;
  expect_status_ctx(ctx, gaaw_comm_backend(comm, &backend), GAAW_SUCCESS);
  expect_true(backend && strcmp(backend, "mpi") == 0, "host ranks communicate through MPI, not %s", backend);
}

/* Every rank must fail gaaw_init with `want` under options (some rank-specific). */
static void expect_init_fails(gaaw_config_t cfg, gaaw_status_t want, const char *what)
{
  gaaw_context_t ctx = NULL;
  double start = MPI_Wtime();
  gaaw_status_t st = gaaw_init(MPI_COMM_WORLD, cfg, &ctx);
  expect_true(st == want, "rank %d: %s: gaaw_init returned %s, expected %s (%s)", world_rank, what,
              gaaw_status_name(st), gaaw_status_name(want), gaaw_last_error(NULL));
  expect_true(ctx == NULL, "rank %d: %s: a context came back from a failed init", world_rank, what);
  expect_true(MPI_Wtime() - start < 30, "%s took %.1f s", what, MPI_Wtime() - start);
  if (ctx) gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int world_size;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size != 4) {
    fprintf(stderr, "test_init_np4 needs 4 ranks, has %d\n", world_size);
    MPI_Finalize();
    return 1;
  }

  /* tp 2 x dp 2, Megatron order: rank = dp_rank * 2 + tp_rank */
  gaaw_config_t cfg = host_config("tp=2");
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  int dp, pp, tp, dp_rank, pp_rank, tp_rank, r;
  gaaw_topology_sizes(ctx, &dp, &pp, &tp);
  gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank);
  expect_true(dp == 2 && pp == 1 && tp == 2, "sizes dp %d pp %d tp %d", dp, pp, tp);
  expect_true(tp_rank == world_rank % 2 && dp_rank == world_rank / 2 && pp_rank == 0,
              "rank %d has dp %d pp %d tp %d", world_rank, dp_rank, pp_rank, tp_rank);
  expect_group(ctx, GAAW_GROUP_WORLD, world_rank, 4);
  expect_group(ctx, GAAW_GROUP_TP, tp_rank, 2);
  expect_group(ctx, GAAW_GROUP_DP, dp_rank, 2);
  expect_group(ctx, GAAW_GROUP_PP, 0, 1);
  expect_group(ctx, GAAW_GROUP_MP, tp_rank, 2);
  for (int d = 0; d < 2; d++)
    for (int t = 0; t < 2; t++) {
      expect_status_ctx(ctx, gaaw_topology_rank_of(ctx, d, 0, t, &r), GAAW_SUCCESS);
      expect_true(r == d * 2 + t, "rank_of(dp %d, tp %d) = %d", d, t, r);
    }
  int size;
  gaaw_world_size(ctx, &size);
  expect_true(size == 4, "world size %d", size);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);

  /* pp 2 x tp 2: the pipeline groups join ranks 0-2 and 1-3 */
  cfg = host_config("tp=2 pp=2 dp=1");
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank);
  expect_true(pp_rank == world_rank / 2 && tp_rank == world_rank % 2, "pp 2: rank %d has pp %d tp %d", world_rank,
              pp_rank, tp_rank);
  expect_group(ctx, GAAW_GROUP_PP, world_rank / 2, 2);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);

  /* a pipeline schedule that does not take (pp, microbatches, virtual_stages) is
   * refused on every rank, naming the numbers; so is one rank's differing value */
  cfg = host_config("tp=2 pp=2 pp_schedule=interleaved virtual_stages=2 microbatches=3");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "interleaved with microbatches 3, pp 2");
  expect_true(strstr(gaaw_last_error(NULL), "interleaved needs microbatches (3) to be a multiple of pp (2)") != NULL,
              "rank %d: %s", world_rank, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);
  cfg = host_config(world_rank == 2 ? "pp=2 microbatches=8" : "pp=2 microbatches=4");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "microbatches differ");
  expect_true(strstr(gaaw_last_error(NULL), "microbatches: 4 on ranks 0") != NULL &&
                strstr(gaaw_last_error(NULL), "8 on rank 2") != NULL,
              "rank %d: %s", world_rank, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);
  cfg = host_config("pp=2 pp_layout=1:2:3");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "pp_layout of 3 stages at pp 2");
  expect_true(strstr(gaaw_last_error(NULL), "pp_layout '1:2:3' must list pp x virtual_stages = 2 x 1 = 2") != NULL,
              "rank %d: %s", world_rank, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);

  /* dp fastest: rank = tp_rank * 2 + dp_rank */
  cfg = host_config("tp=2 rank_order=dp-tp-pp");
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank);
  expect_true(dp_rank == world_rank % 2 && tp_rank == world_rank / 2, "dp-tp-pp: rank %d has dp %d tp %d", world_rank,
              dp_rank, tp_rank);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);

  /* cp 2 x tp 2, Megatron order: rank = cp_rank * 2 + tp_rank; the ranks that hold
   * the same weights (dp x cp) are the cp group here */
  cfg = host_config("tp=2 cp=2");
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  int cp = 0, cp_rank = -1;
  gaaw_topology_sizes(ctx, &dp, &pp, &tp);
  gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank);
  expect_status_ctx(ctx, gaaw_topology_cp(ctx, &cp, &cp_rank), GAAW_SUCCESS);
  expect_true(dp == 1 && pp == 1 && cp == 2 && tp == 2, "cp 2 x tp 2: sizes dp %d pp %d cp %d tp %d", dp, pp, cp, tp);
  expect_true(tp_rank == world_rank % 2 && cp_rank == world_rank / 2 && dp_rank == 0,
              "cp 2 x tp 2: rank %d has dp %d cp %d tp %d", world_rank, dp_rank, cp_rank, tp_rank);
  expect_group(ctx, GAAW_GROUP_TP, tp_rank, 2);
  expect_group(ctx, GAAW_GROUP_CP, cp_rank, 2);
  expect_group(ctx, GAAW_GROUP_DP, 0, 1);
  expect_group(ctx, GAAW_GROUP_DP_CP, cp_rank, 2);
  expect_group(ctx, GAAW_GROUP_MP, tp_rank, 2);
  for (int c = 0; c < 2; c++)
    for (int t = 0; t < 2; t++) {
      expect_status_ctx(ctx, gaaw_topology_rank_of_cp(ctx, 0, 0, c, t, &r), GAAW_SUCCESS);
      expect_true(r == c * 2 + t, "rank_of_cp(cp %d, tp %d) = %d", c, t, r);
    }
  /* gaaw_topology_rank_of stays on this rank's cp coordinate */
  expect_status_ctx(ctx, gaaw_topology_rank_of(ctx, 0, 0, 1 - tp_rank, &r), GAAW_SUCCESS);
  expect_true(r == cp_rank * 2 + 1 - tp_rank, "rank %d: rank_of(tp %d) = %d", world_rank, 1 - tp_rank, r);
  /* an MLP has no sequences to split: every rank refuses it by name */
  gaaw_mlp_config_t mc = {.nsizes = 3, .sizes = {4, 8, 2}, .activation = GAAW_ACT_GELU};
  gaaw_model_t model = NULL;
  expect_status_ctx(ctx, gaaw_model_create_mlp(ctx, &mc, &model), GAAW_ERR_UNSUPPORTED);
  expect_true(model == NULL && strstr(gaaw_last_error(ctx), "cp=2: an MLP has no sequences") != NULL,
              "rank %d: %s", world_rank, gaaw_last_error(ctx));
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);

  /* ep 2 folded onto tp 2 x dp 2: ep pairs are consecutive ranks (the tp pairs
   * here), expert-dp the ranks at one ep coordinate; ep 3 does not fold */
  cfg = host_config("tp=2 ep=2");
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  int ep = 0, ep_rank = -1;
  expect_status_ctx(ctx, gaaw_topology_ep(ctx, &ep, &ep_rank), GAAW_SUCCESS);
  expect_true(ep == 2 && ep_rank == world_rank % 2, "ep 2: rank %d has ep rank %d of %d", world_rank, ep_rank, ep);
  expect_group(ctx, GAAW_GROUP_EP, world_rank % 2, 2);
  expect_group(ctx, GAAW_GROUP_EDP, world_rank / 2, 2);
  gaaw_comm_t epc, tpc;
  gaaw_topology_comm(ctx, GAAW_GROUP_EP, &epc);
  gaaw_topology_comm(ctx, GAAW_GROUP_TP, &tpc);
  expect_true(epc != tpc, "the ep group is a communicator of its own");
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  cfg = host_config("ep=4");
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  expect_group(ctx, GAAW_GROUP_EP, world_rank, 4);
  expect_group(ctx, GAAW_GROUP_EDP, 0, 1);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  cfg = host_config("ep=3");
  expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
  gaaw_config_destroy(&cfg);

  /* cp 2 x dp 2: the weights' group dp x cp is the world, dp slowest */
  cfg = host_config("cp=2");
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank);
  gaaw_topology_cp(ctx, &cp, &cp_rank);
  expect_true(cp_rank == world_rank % 2 && dp_rank == world_rank / 2, "cp 2 x dp 2: rank %d has dp %d cp %d",
              world_rank, dp_rank, cp_rank);
  expect_group(ctx, GAAW_GROUP_DP, dp_rank, 2);
  expect_group(ctx, GAAW_GROUP_CP, cp_rank, 2);
  expect_group(ctx, GAAW_GROUP_DP_CP, dp_rank * 2 + cp_rank, 4);
  expect_group(ctx, GAAW_GROUP_MP, 0, 1);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);

  /* cp fastest: rank = tp_rank * 2 + cp_rank; and an order without cp puts it after tp */
  const char *cp_orders[] = {"cp-tp-dp-pp", "dp-pp-tp"};
  for (int o = 0; o < 2; o++) {
    char options[64];
    snprintf(options, sizeof options, "tp=2 cp=2 rank_order=%s", cp_orders[o]);
    cfg = host_config(options);
    require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
    gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank);
    gaaw_topology_cp(ctx, &cp, &cp_rank);
    int fast = o == 0 ? cp_rank : tp_rank, slow = o == 0 ? tp_rank : cp_rank;
    expect_true(fast == world_rank % 2 && slow == world_rank / 2, "%s: rank %d has cp %d tp %d", cp_orders[o],
                world_rank, cp_rank, tp_rank);
    gaaw_finalize(&ctx);
    gaaw_config_destroy(&cfg);
  }

  /* 4 ranks do not factor as tp 3: every rank says so */
  cfg = host_config("tp=3");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "tp=3 on 4 ranks");
  expect_true(strstr(gaaw_last_error(NULL), "world size 4 is not divisible by tp x cp x pp = 3 x 1 x 1 = 3") != NULL,
              "rank %d: %s", world_rank, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);

  /* ranks that disagree on the layout all fail, naming the disagreement */
  cfg = host_config(world_rank == 1 ? "cp=2" : "cp=1");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "cp differs across ranks");
  expect_true(strstr(gaaw_last_error(NULL), "cp: 1 on ranks 0,2-3, 2 on rank 1") != NULL, "rank %d: %s", world_rank,
              gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);
  cfg = host_config("cp=3");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "cp=3 on 4 ranks");
  expect_true(strstr(gaaw_last_error(NULL), "not divisible by tp x cp x pp = 1 x 3 x 1 = 3") != NULL, "rank %d: %s",
              world_rank, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);
  cfg = host_config(world_rank == 0 ? "tp=4" : "tp=2");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "tp differs across ranks");
  expect_true(strstr(gaaw_last_error(NULL), "tp: 4 on rank 0, 2 on ranks 1-3") != NULL, "rank %d: %s", world_rank,
              gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);

  /* one rank's local failure (a device that does not exist) fails every rank */
  cfg = host_config(world_rank == 3 ? "device=7" : "");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "device=7 on rank 3");
  if (world_rank != 3)
    expect_true(strstr(gaaw_last_error(NULL), "world rank 3 failed") != NULL, "rank %d: %s", world_rank,
                gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);

  /* a bad option value on one rank only (checked before the device is opened) */
  cfg = host_config(world_rank == 1 ? "log=chatty" : "");
  expect_init_fails(cfg, GAAW_ERR_INVALID_ARG, "log=chatty on rank 1");
  expect_true(strstr(gaaw_last_error(NULL), "option log must be none, error, warn, info, debug or trace") != NULL &&
                (world_rank == 1 || strstr(gaaw_last_error(NULL), "world rank 1 failed") != NULL),
              "rank %d: %s", world_rank, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);

  /* and the job goes on: a good init after the failures */
  cfg = host_config("");
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);

  int failures = test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total && !failures) return 1; /* another rank failed */
  return test_finish("test_init_np4");
}
