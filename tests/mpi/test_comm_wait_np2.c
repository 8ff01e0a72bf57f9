/* comm_timeout = 0 means wait forever, and a deadline is not premature, on 2 ranks.
 *
 * With comm_timeout = 0, rank 1 sleeps 1.5 s before each operation; rank 0's
 * all-reduce (small: MPI_Iallreduce; large: gaaw's ring), non-blocking all-reduce
 * (start, then wait), receive and barrier must succeed with the right values after
 * that wait, not fail with GAAW_ERR_TIMEOUT. With comm_timeout = 1, a peer that is
 * 0.5 s late is still in time. (test_comm_timeout_np2 checks that a deadline does
 * expire.) */
#include <mpi.h>
#include <unistd.h>

#include "tests/harness/test_util.h"

static int rank;

/* 1 on rank 0 and 2 on rank 1 in every element of an n-float tensor */
static gaaw_tensor_t filled(gaaw_context_t ctx, int64_t n, float **x)
{
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_WORKSPACE, &t));
  require_ok(ctx, gaaw_buffer_host_ptr(t.buf, (void **)x));
  for (int64_t i = 0; i < n; i++) (*x)[i] = (float)(rank + 1);
  return t;
}

/* Rank 1 is late by `late` seconds to every operation; rank 0 must see each succeed
 * after about that long. */
static void late_peer(const char *timeout, double late)
{
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", "host"));
  require_ok(NULL, gaaw_config_set(cfg, "comm_timeout", timeout));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_comm_t world;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
  const int64_t sizes[2] = {3, 8192}; /* 12 bytes, and 32 KiB: above allreduce_ring_bytes */
  for (int op = 0; op < 5; op++) {
    int64_t n = sizes[op == 1];
    float *x;
    gaaw_tensor_t t = filled(ctx, n, &x);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) usleep((useconds_t)(late * 1e6));
    double t0 = MPI_Wtime();
    const char *what;
    float want = 3;
    if (op <= 1) {
      what = op == 0 ? "all-reduce of 3 floats" : "all-reduce of 8192 floats";
      expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_SUCCESS);
    } else if (op == 2) {
      what = "non-blocking all-reduce";
      gaaw_comm_request_t req = NULL;
      expect_status_ctx(ctx, gaaw_comm_allreduce_start(world, &t, &t, GAAW_SUM, &req), GAAW_SUCCESS);
      expect_status_ctx(ctx, gaaw_comm_wait(&req), GAAW_SUCCESS);
    } else if (op == 3) {
      what = "receive";
      want = 2;
      if (rank == 0)
        expect_status_ctx(ctx, gaaw_comm_recv(world, &t, 1, 7), GAAW_SUCCESS);
      else
        expect_status_ctx(ctx, gaaw_comm_send(world, &t, 0, 7), GAAW_SUCCESS);
    } else {
      what = "barrier";
      want = (float)(rank + 1);
      expect_status_ctx(ctx, gaaw_comm_barrier(world), GAAW_SUCCESS);
    }
    double elapsed = MPI_Wtime() - t0;
    if (rank == 0) {
      expect_true(elapsed >= 0.9 * late && elapsed < late + 10, "comm_timeout %s: the %s took %.2f s; the peer was %g s late",
                  timeout, what, elapsed, late);
      expect_true(x[0] == want && x[n - 1] == want, "comm_timeout %s: the %s gave %g, %g; expected %g", timeout, what,
                  x[0], x[n - 1], want);
    }
    require_ok(ctx, gaaw_buffer_free(ctx, &t.buf));
  }
  require_ok(ctx, gaaw_finalize(&ctx));
  require_ok(NULL, gaaw_config_destroy(&cfg));
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  late_peer("0", 1.5);
  late_peer("1", 0.5);
  char name[48];
  snprintf(name, sizeof name, "test_comm_wait_np2 rank %d", rank);
  int code = test_finish(name);
  MPI_Finalize();
  return code;
}
