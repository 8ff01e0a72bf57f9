/* A rank that skips a collective on NCCL, with comm_timeout = 5 s (one GPU per
 * rank; skipped otherwise, exit 77). Rank 0's all-reduce returns at once (it
 * completes by event), and its next host wait, gaaw_synchronize, ends with
 * GAAW_ERR_TIMEOUT after about 5 s (not a hang, and not twice the timeout),
 * naming comm_timeout; the communicator is aborted, so the next collective fails
 * with GAAW_ERR_COMM at once. Rank 1, which skipped it, learns of the failure at
 * its next collective (GAAW_ERR_COMM, or GAAW_ERR_TIMEOUT if the notice is late).
 * Both finalize without hanging. */
#include <mpi.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/cuda/cuda_test_util.h"
#include "tests/harness/test_util.h"

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!cuda_test_gpus_everywhere(1) || size < 2) {
    if (rank == 0) fprintf(stderr, "test_nccl_timeout_np2: needs two ranks with a GPU each; skipped\n");
    MPI_Finalize();
    return TEST_SKIP;
  }
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=cuda comm_timeout=5");
  gaaw_comm_t world = NULL;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
  const char *backend = NULL;
  gaaw_comm_backend(world, &backend);
  expect_true(backend && !strcmp(backend, "nccl"), "world runs on %s, not nccl", backend ? backend : "(null)");
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, (int64_t[]){1 << 20}, GAAW_MEM_COMMUNICATION, &t));
  require_ok(ctx, gaaw_fill(ctx, &t, 1.0f));
  expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_SUCCESS); /* both take part */
  expect_status_ctx(ctx, gaaw_synchronize(ctx), GAAW_SUCCESS);
  double t0 = now();
  if (rank == 0) {
    expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_SUCCESS);
    expect_true(now() - t0 < 2, "the all-reduce took %.1f s to return: it waited on the host", now() - t0);
    expect_status_ctx(ctx, gaaw_synchronize(ctx), GAAW_ERR_TIMEOUT);
    double waited = now() - t0;
    expect_true(waited > 4 && waited < 9, "the timeout came after %.1f s, expected about 5", waited);
    expect_true(strstr(gaaw_last_error(ctx), "comm_timeout") != NULL, "message: %s", gaaw_last_error(ctx));
    double t1 = now();
    expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_ERR_COMM);
    expect_true(now() - t1 < 1, "the call after the abort took %.1f s", now() - t1);
    printf("nccl_timeout rank=0 status=timeout after_s=%.2f\n", waited);
  } else {
    sleep(8); /* skips the all-reduce */
    gaaw_status_t st = gaaw_comm_barrier(world);
    expect_true(st == GAAW_ERR_COMM || st == GAAW_ERR_TIMEOUT, "rank 1's next collective returned %s",
                gaaw_status_name(st));
    expect_true(now() - t0 < 20, "rank 1 learned of the failure after %.1f s", now() - t0);
  }
  gaaw_buffer_free(ctx, &t.buf);
  double t2 = now();
  gaaw_finalize(&ctx);
  expect_true(now() - t2 < 15, "finalize after the abort took %.1f s", now() - t2);
  MPI_Finalize();
  return test_finish("test_nccl_timeout_np2");
}
