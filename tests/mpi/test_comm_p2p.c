/* Non-blocking send/recv (gaaw_comm_send_start / recv_start + gaaw_comm_wait), on 2
 * ranks, host tensors and (when OpenCL is usable) device tensors staged through
 * host memory:
 *  - both ranks post a 1 MB send and a receive to each other before waiting (what
 *    a pipeline's neighbours do), in either wait order, and get each other's data;
 *  - several messages in flight on one pair keep their tags apart;
 *  - gaaw_comm_test: a receive whose send has not been posted is not complete, and
 *    is once the data arrived (the wait then returns it at once); NULL is complete;
 *  - bad arguments are refused before anything is posted;
 *  - a receive from a peer that never sends times out at the wait (comm_timeout
 *    = 1 s) naming the peer and the tag, and the context is aborted on both ranks. */
#include <mpi.h>
#include <unistd.h>

#include "backends/comm.h"
#include "tests/harness/test_util.h"

enum { N = 1 << 18 };

static int rank;

static void exchange(gaaw_context_t ctx, gaaw_comm_t comm, const char *what)
{
  int64_t n = N;
  gaaw_tensor_t out[2], in[2];
  float *host = malloc(sizeof(float) * N);
  for (int k = 0; k < 2; k++) {
    require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &out[k]));
    require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &in[k]));
    for (long i = 0; i < N; i++) host[i] = (float)(1000 * rank + 100 * k) + (float)(i % 97);
    require_ok(ctx, gaaw_buffer_write(ctx, out[k].buf, 0, host, sizeof(float) * N));
  }
  int peer = 1 - rank;
  gaaw_comm_request_t sends[2], recvs[2];
  /* tags 5 and 6 in flight together, posted in opposite orders on the two ranks */
  for (int k = 0; k < 2; k++) {
    int j = rank == 0 ? k : 1 - k;
    expect_status_ctx(ctx, gaaw_comm_recv_start(comm, &in[j], peer, 5 + j, &recvs[j]), GAAW_SUCCESS);
    expect_status_ctx(ctx, gaaw_comm_send_start(comm, &out[j], peer, 5 + j, &sends[j]), GAAW_SUCCESS);
  }
  for (int k = 0; k < 2; k++) { /* rank 0 waits for its receives first, rank 1 for its sends */
    expect_status_ctx(ctx, gaaw_comm_wait(rank == 0 ? &recvs[k] : &sends[k]), GAAW_SUCCESS);
    expect_status_ctx(ctx, gaaw_comm_wait(rank == 0 ? &sends[k] : &recvs[k]), GAAW_SUCCESS);
  }
  for (int k = 0; k < 2; k++) {
    require_ok(ctx, gaaw_buffer_read(ctx, in[k].buf, 0, host, sizeof(float) * N));
    long bad = -1;
    for (long i = 0; i < N && bad < 0; i++)
      if (host[i] != (float)(1000 * peer + 100 * k) + (float)(i % 97)) bad = i;
    expect_true(bad < 0, "%s: message with tag %d, element %ld is %g", what, 5 + k, bad, bad < 0 ? 0.0 : host[bad]);
    gaaw_buffer_free(ctx, &out[k].buf);
    gaaw_buffer_free(ctx, &in[k].buf);
  }
  free(host);
}

/* Rank 0 receives 1 MB that rank 1 sends only after a barrier: before it the
 * receive cannot have completed; then gaaw_comm_test turns true (polled, within the
 * deadline) and the wait returns the data. */
static void test_progress(gaaw_context_t ctx, gaaw_comm_t comm)
{
  int64_t n = N;
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &t));
  float *host = calloc(N, sizeof *host);
  for (long i = 0; i < N; i++) host[i] = (float)(i % 89);
  if (rank == 1) require_ok(ctx, gaaw_buffer_write(ctx, t.buf, 0, host, sizeof(float) * N));
  gaaw_comm_request_t req = NULL;
  expect_true(gaaw_comm_test(NULL), "a NULL request counts as complete");
  if (rank == 0) {
    require_ok(ctx, gaaw_comm_recv_start(comm, &t, 1, 11, &req));
    expect_true(!gaaw_comm_test(req), "a receive whose send was not posted yet is complete");
  }
  require_ok(ctx, gaaw_comm_barrier(comm));
  if (rank == 1) {
    require_ok(ctx, gaaw_comm_send_start(comm, &t, 0, 11, &req));
    require_ok(ctx, gaaw_comm_wait(&req));
  } else {
    double t0 = MPI_Wtime();
    int done = 0;
    while (!done && MPI_Wtime() - t0 < 10) done = gaaw_comm_test(req);
    expect_true(done, "the receive did not complete within 10 s of its send");
    require_ok(ctx, gaaw_comm_wait(&req));
    float *got = malloc(sizeof(float) * N);
    require_ok(ctx, gaaw_buffer_read(ctx, t.buf, 0, got, sizeof(float) * N));
    expect_true(memcmp(got, host, sizeof(float) * N) == 0, "the tested receive's data differ");
    free(got);
  }
  free(host);
  gaaw_buffer_free(ctx, &t.buf);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host comm_timeout=1");
  gaaw_comm_t dp;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_DP, &dp));
  exchange(ctx, dp, "host");
  test_progress(ctx, dp);

  /* refused before anything is posted: the communicator stays usable */
  int64_t n = 4;
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &t));
  gaaw_comm_request_t req = (gaaw_comm_request_t)1;
  expect_status_ctx(ctx, gaaw_comm_send_start(dp, &t, rank, 1, &req), GAAW_ERR_INVALID_ARG); /* to itself */
  expect_true(req == NULL, "no request after a refusal");
  expect_status_ctx(ctx, gaaw_comm_recv_start(dp, &t, 1 - rank, -1, &req), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_comm_recv_start(dp, NULL, 1 - rank, 1, &req), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_comm_send_start(dp, &t, 1 - rank, 1, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_comm_barrier(dp), GAAW_SUCCESS);

  /* a receive whose send never comes */
  if (rank == 0) {
    expect_status_ctx(ctx, gaaw_comm_recv_start(dp, &t, 1, 9, &req), GAAW_SUCCESS);
    double t0 = MPI_Wtime();
    expect_status_ctx(ctx, gaaw_comm_wait(&req), GAAW_ERR_TIMEOUT);
    double took = MPI_Wtime() - t0;
    expect_true(took >= 0.9 && took < 10, "the receive timed out after %.2f s; comm_timeout is 1 s", took);
    expect_true(strstr(gaaw_last_error(ctx), "receive from rank 1 (tag 9)") != NULL, "%s", gaaw_last_error(ctx));
  } else {
    usleep(3000 * 1000); /* rank 0 times out after 1 s: 2 s to spare */
  }
  expect_status_ctx(ctx, gaaw_comm_barrier(dp), GAAW_ERR_COMM);
  expect_true(strstr(gaaw_last_error(ctx), "receive from rank 1 (tag 9)") != NULL, "rank %d: %s", rank,
              gaaw_last_error(ctx));
  gaaw_buffer_free(ctx, &t.buf);
  gaaw_finalize(&ctx);

  if (test_on_every_rank(MPI_COMM_WORLD, test_backend_usable("opencl"))) {
    ctx = test_context(MPI_COMM_WORLD, "backend=opencl comm_timeout=60");
    require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_DP, &dp));
    exchange(ctx, dp, "opencl");
    gaaw_finalize(&ctx);
  }
  return test_finish_mpi("test_comm_p2p_np2");
}
