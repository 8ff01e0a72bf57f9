/* gaaw_plan_calibrate on 2 ranks: every figure measured and plausible, the same
 * bits on every rank (so that a planner fed with them chooses the same layout
 * everywhere), and a bad or differing model on one rank the same named error on
 * every rank, after which a good call works; the GEMM shapes it measures, on 2
 * ranks and on one rank alone (no link: 1 us and the memory bandwidth); all of it
 * inside 45 s. */
#include <math.h>
#include <mpi.h>
#include <string.h>

#include "tests/harness/test_util.h"

static int world_rank;

static int positive(double x) { return isfinite(x) && x > 0; }

static void check_figures(const gaaw_plan_cluster_t *c, const gaaw_gpt_config_t *g)
{
  expect_true(c->nodes == 1 && c->devices_per_node == 2, "one node of 2 devices, got %d x %d", c->nodes,
              c->devices_per_node);
  expect_true(c->device.gemm_points >= 4 && c->device.gemm_points <= GAAW_PLAN_GEMM_POINTS, "gemm points %d",
              c->device.gemm_points);
  double best = 0;
  int qkv = 0;
  for (int i = 0; i < c->device.gemm_points; i++) {
    const gaaw_plan_gemm_point_t *p = &c->device.gemm[i];
    expect_true(positive(p->tflops) && p->tflops < 100, "point %d: %g TFLOP/s", i, p->tflops);
    qkv += p->m == g->max_seq && p->n == 3.0 * g->dim && p->k == g->dim;
    best = fmax(best, p->tflops);
  }
  expect_true(qkv == 1, "one point has the QKV shape (seq, 3 dim, dim), found %d", qkv);
  expect_true(c->device.peak_tflops == best, "the peak %g is the best point %g", c->device.peak_tflops, best);
  expect_true(positive(c->device.memory_gbps) && c->device.memory_gbps < 10000, "memory %g GB/s",
              c->device.memory_gbps);
  expect_true(positive(c->host_update_gbps), "host update %g GB/s", c->host_update_gbps);
  /* shared memory between two processes: well under 10 TB/s */
  expect_true(positive(c->intra_node_gbps) && c->intra_node_gbps < 10000 && positive(c->intra_node_latency_us),
              "all-reduce %g GB/s, %g us", c->intra_node_gbps, c->intra_node_latency_us);
  expect_true(positive(c->device.memory_bytes), "device memory %g", c->device.memory_bytes);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  test_deadline(45, "four calibrations of a few seconds each (about 8 s in all on 2 cores)");
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host threads=1 comm_timeout=60");
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.dim = 64, g.max_seq = 32;
  gaaw_plan_cluster_t c, first;
  memset(&c, 0, sizeof c);
  expect_status_ctx(ctx, gaaw_plan_calibrate(ctx, &g, &c), GAAW_SUCCESS);
  check_figures(&c, &g);
  first = c;
  /* the same bits on both ranks */
  gaaw_plan_cluster_t root = c;
  MPI_Bcast(&root, sizeof root, MPI_BYTE, 0, MPI_COMM_WORLD);
  expect_true(memcmp(&root, &c, sizeof c) == 0, "rank %d's calibration differs from rank 0's", world_rank);

  /* rank 1 alone: a dim that heads does not divide, then NULL, then another dim */
  for (int k = 0; k < 3; k++) {
    gaaw_gpt_config_t bad = g;
    if (world_rank == 1 && k == 0) bad.dim = 63;
    if (world_rank == 1 && k == 2) bad.dim = 128;
    double t0 = MPI_Wtime();
    expect_status_ctx(ctx, gaaw_plan_calibrate(ctx, world_rank == 1 && k == 1 ? NULL : &bad, &c),
                      GAAW_ERR_INVALID_ARG);
    expect_true(MPI_Wtime() - t0 < 5, "case %d: the error took %.1f s", k, MPI_Wtime() - t0);
    const char *want = k == 0 ? "dim 63" : k == 1 ? "model must not be NULL" : "dim";
    expect_true(strstr(gaaw_last_error(ctx), want) != NULL, "case %d: the message names '%s': %s", k, want,
                gaaw_last_error(ctx));
  }
  /* and then a good call works again */
  memset(&c, 0, sizeof c);
  expect_status_ctx(ctx, gaaw_plan_calibrate(ctx, &g, &c), GAAW_SUCCESS);
  check_figures(&c, &g);
  expect_true(c.device.gemm_points == first.device.gemm_points, "the same shapes measured");
  /* the shapes: at 1 and 8 rows of seq tokens, QKV, attention output and MLP up at
   * tp 1 and at the largest tp (2), the LM head; one head's scores */
  expect_true(c.device.gemm_points == 2 * (3 * 2 + 1) + 1, "%d GEMM shapes on 2 ranks, not 15",
              c.device.gemm_points);
  gaaw_finalize(&ctx);

  /* each rank alone: tp 1 only (9 shapes), and no link to measure: the
   * documented 1 us and the memory bandwidth */
  ctx = test_context(MPI_COMM_SELF, "backend=host threads=1");
  memset(&c, 0, sizeof c);
  require_ok(ctx, gaaw_plan_calibrate(ctx, &g, &c));
  expect_true(c.nodes == 1 && c.devices_per_node == 1 && c.device.gemm_points == 2 * (3 + 1) + 1,
              "alone: %d x %d devices, %d GEMM shapes (not 1 x 1, 9)", c.nodes, c.devices_per_node,
              c.device.gemm_points);
  expect_true(c.intra_node_latency_us == 1.0 && c.intra_node_gbps == c.device.memory_gbps &&
                positive(c.intra_node_gbps), "alone: the link %g us, %g GB/s (memory %g GB/s)",
              c.intra_node_latency_us, c.intra_node_gbps, c.device.memory_gbps);
  gaaw_finalize(&ctx);
  return test_finish_mpi("test_plan_calibrate_np2");
}
