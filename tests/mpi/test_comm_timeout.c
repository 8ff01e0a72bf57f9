/* The communicator deadline (comm_timeout = 1 s), on 2 ranks.
 *
 * Collective: rank 1 skips one all-reduce on world. Rank 0 must get GAAW_ERR_TIMEOUT
 * after about a second, then GAAW_ERR_COMM from every later call (aborted). The
 * abandoned operation is then drained so that both ranks end cleanly: MPI cannot
 * cancel a collective, so rank 0's MPI_Iallreduce stays posted; once rank 0 has seen
 * both errors it tells rank 1 through plain MPI on MPI_COMM_WORLD, and rank 1 makes
 * its all-reduce late, which matches the posted one (rank 0 drives it to completion
 * inside the MPI_Barrier that follows). Nothing is left pending at MPI_Finalize.
 *
 * Point-to-point: rank 0 receives on the dp group (both ranks) from rank 1, which
 * never sends; the receive times out, is cancelled and freed by the backend, so it
 * needs no draining. */
#include <mpi.h>

#include "tests/harness/test_util.h"

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", "host"));
  require_ok(NULL, gaaw_config_set(cfg, "comm_timeout", "1"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_comm_t world, dp;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_DP, &dp));
  int64_t shape[1] = {3};
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, shape, GAAW_MEM_WORKSPACE, &t));
  float *x;
  require_ok(ctx, gaaw_buffer_host_ptr(t.buf, (void **)&x));
  x[0] = x[1] = x[2] = (float)(rank + 1);
  expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_SUCCESS);
  expect_true(x[0] == 3 && x[2] == 3, "first all-reduce gave %g, %g; expected 3", x[0], x[2]);

  if (rank == 0) {
    double t0 = MPI_Wtime();
    expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_ERR_TIMEOUT);
    double elapsed = MPI_Wtime() - t0;
    expect_true(elapsed >= 0.9 && elapsed < 10, "the all-reduce timed out after %.2f s; comm_timeout is 1 s", elapsed);
    expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_ERR_COMM);
    expect_status_ctx(ctx, gaaw_comm_barrier(world), GAAW_ERR_COMM);
    expect_true(strstr(gaaw_last_error(ctx), "aborted") != NULL, "error text does not say aborted: %s",
                gaaw_last_error(ctx));
    int go = 1;
    MPI_Send(&go, 1, MPI_INT, 1, 99, MPI_COMM_WORLD);
  } else {
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    x[0] = x[1] = x[2] = 10;
    /* the late partner of rank 0's abandoned all-reduce (rank 0 holds 3) */
    expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_SUCCESS);
    expect_true(x[0] == 13 && x[2] == 13, "late all-reduce gave %g, %g; expected 13", x[0], x[2]);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == 0) {
    double t0 = MPI_Wtime();
    expect_status_ctx(ctx, gaaw_comm_recv(dp, &t, 1, 3), GAAW_ERR_TIMEOUT);
    double elapsed = MPI_Wtime() - t0;
    expect_true(elapsed >= 0.9 && elapsed < 10, "the recv timed out after %.2f s; comm_timeout is 1 s", elapsed);
    expect_status_ctx(ctx, gaaw_comm_recv(dp, &t, 1, 3), GAAW_ERR_COMM);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  require_ok(ctx, gaaw_buffer_free(ctx, &t.buf));
  require_ok(ctx, gaaw_finalize(&ctx));
  require_ok(NULL, gaaw_config_destroy(&cfg));
  char name[48];
  snprintf(name, sizeof name, "test_comm_timeout_np2 rank %d", rank);
  int code = test_finish(name);
  MPI_Finalize();
  return code;
}
