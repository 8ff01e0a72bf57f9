/* The communicator deadline (comm_timeout = 1 s) and the aborted state, on 2 ranks.
 *
 * Collective: rank 1 skips one all-reduce on world (sleeping 3 s). Rank 0 gets GAAW_ERR_TIMEOUT
 * after about a second; its context is then aborted and rank 1 is told. From then
 * on every collective, on any communicator of the context, returns GAAW_ERR_COMM on
 * both ranks at once (well within the deadline), naming the original failure, and
 * gaaw_finalize still works. (Rank 0's abandoned MPI operation stays posted on a
 * communicator that gaaw never frees; MPI_Finalize does not wait for it.)
 *
 * Point-to-point, on a second context: rank 0 receives from rank 1, which never
 * sends; the receive times out, and that context is aborted too. */
#include <mpi.h>
#include <unistd.h>

#include "tests/harness/test_util.h"

static int rank;

static gaaw_context_t context(void)
{
  return test_context(MPI_COMM_WORLD, "backend=host comm_timeout=1");
}

/* The call must fail with GAAW_ERR_COMM at once, naming the first failure. */
#define expect_aborted(ctx, call)                                                                                     \
  do {                                                                                                              \
    double t0_ = MPI_Wtime();                                                                                       \
    expect_status_ctx(ctx, call, GAAW_ERR_COMM);                                                                    \
    expect_true(MPI_Wtime() - t0_ < 0.5, "rank %d: %s took %.2f s to fail", rank, #call, MPI_Wtime() - t0_);         \
    expect_true(strstr(gaaw_last_error(ctx), "comm_timeout = 1 s") != NULL,                                        \
                "rank %d: the error does not name the original failure: %s", rank, gaaw_last_error(ctx));          \
  } while (0)

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gaaw_context_t ctx = context();
  gaaw_comm_t world, dp, tp;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_DP, &dp));
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_TP, &tp));
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
  } else {
    usleep(3000 * 1000); /* skips the call; rank 0 times out meanwhile (after 1 s; 2 s to spare) */
  }
  /* every later collective, on every rank and every communicator, fails at once */
  expect_aborted(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM));
  expect_aborted(ctx, gaaw_comm_barrier(dp));
  expect_aborted(ctx, gaaw_comm_allgather(tp, &t, &t));
  if (rank == 1)
    expect_true(strstr(gaaw_last_error(ctx), "on world rank 0") != NULL, "rank 1 does not say who failed: %s",
                gaaw_last_error(ctx));
  require_ok(ctx, gaaw_buffer_free(ctx, &t.buf));
  expect_status_ctx(ctx, gaaw_finalize(&ctx), GAAW_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);

  ctx = context();
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_DP, &dp));
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, shape, GAAW_MEM_WORKSPACE, &t));
  if (rank == 0) {
    double t0 = MPI_Wtime();
    expect_status_ctx(ctx, gaaw_comm_recv(dp, &t, 1, 3), GAAW_ERR_TIMEOUT);
    double elapsed = MPI_Wtime() - t0;
    expect_true(elapsed >= 0.9 && elapsed < 10, "the recv timed out after %.2f s; comm_timeout is 1 s", elapsed);
    expect_aborted(ctx, gaaw_comm_recv(dp, &t, 1, 3));
  } else {
    usleep(3000 * 1000); /* rank 0 times out after 1 s: 2 s to spare */
    expect_aborted(ctx, gaaw_comm_barrier(dp));
  }
  require_ok(ctx, gaaw_buffer_free(ctx, &t.buf));
  expect_status_ctx(ctx, gaaw_finalize(&ctx), GAAW_SUCCESS);

  char name[48];
  snprintf(name, sizeof name, "test_comm_timeout_np2 rank %d", rank);
  int code = test_finish(name);
  MPI_Finalize();
  return code;
}
