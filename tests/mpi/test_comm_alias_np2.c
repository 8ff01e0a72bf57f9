/* The alias rule of backends/comm.c, which holds for every communicator backend,
 * checked on the MPI backend with host tensors on two ranks: views of one buffer
 * that overlap are accepted only in place (all-reduce and all-to-all: recv is send;
 * reduce-scatter: recv is this rank's block of send; all-gather: send is this
 * rank's block of recv) and give the right result there; any other overlap is
 * refused with GAAW_ERR_INVALID_ARG and a message saying "overlap", blocking or
 * started, and leaves the communicator usable. In-place all-to-all is supported
 * on every backend (NCCL stages the send blocks through scratch). */
#include <mpi.h>
#include <string.h>

#include "tests/harness/test_util.h"

enum { M = 5 }; /* elements per rank block */

static gaaw_tensor_t view(gaaw_buffer_t buf, int64_t first, int64_t n)
{
  gaaw_tensor_t t;
  require_ok(NULL, gaaw_tensor_view(buf, (size_t)first * sizeof(float), GAAW_F32, 1, (int64_t[]){n}, &t));
  return t;
}

static void put(gaaw_context_t ctx, gaaw_buffer_t buf, int64_t first, const float *v, int64_t n)
{
  require_ok(ctx, gaaw_buffer_write(ctx, buf, (size_t)first * sizeof(float), v, (size_t)n * sizeof(float)));
}

static void expect_range(gaaw_context_t ctx, gaaw_buffer_t buf, int64_t first, const float *want, int64_t n,
                         const char *what)
{
  float got[64];
  require_ok(ctx, gaaw_buffer_read(ctx, buf, (size_t)first * sizeof(float), got, (size_t)n * sizeof(float)));
  expect_close(got, want, (long)n, 0, what);
}

/* A refused call: the named error, and a message about the overlap. */
#define expect_overlap(ctx, call)                                                                  \
  do {                                                                                             \
    expect_status_ctx(ctx, call, GAAW_ERR_INVALID_ARG);                                            \
    expect_true(strstr(gaaw_last_error(ctx), "overlap") != NULL, "message: %s", gaaw_last_error(ctx)); \
  } while (0)

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host comm_timeout=60");
  gaaw_comm_t c = NULL;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &c));
  int rank = 0, size = 0;
  gaaw_comm_rank(c, &rank);
  gaaw_comm_size(c, &size);
  const int64_t n = (int64_t)M * size; /* a full tensor: size blocks of M */
  gaaw_buffer_t buf = NULL;
  require_ok(ctx, gaaw_buffer_alloc(ctx, (size_t)(3 * n) * sizeof(float), GAAW_MEM_COMMUNICATION, &buf));
  float v[64], want[64];

  /* all-reduce: in place correct; recv one element after send refused */
  for (int64_t i = 0; i < n; i++) v[i] = (float)(rank + 1) * (float)i;
  put(ctx, buf, 0, v, n);
  gaaw_tensor_t a = view(buf, 0, n), shifted = view(buf, 1, n);
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &a, &a, GAAW_SUM), GAAW_SUCCESS);
  for (int64_t i = 0; i < n; i++) want[i] = (float)(size * (size + 1) / 2) * (float)i;
  expect_range(ctx, buf, 0, want, n, "all-reduce in place");
  expect_overlap(ctx, gaaw_comm_allreduce(c, &a, &shifted, GAAW_SUM));
  gaaw_comm_request_t req = NULL;
  expect_overlap(ctx, gaaw_comm_allreduce_start(c, &a, &shifted, GAAW_SUM, &req));
  expect_true(req == NULL, "a refused start left a request");

  /* reduce-scatter: recv at this rank's block of send works; at another block not */
  for (int64_t i = 0; i < n; i++) v[i] = (float)(rank * 100 + i);
  put(ctx, buf, 0, v, n);
  gaaw_tensor_t all = view(buf, 0, n), own = view(buf, (int64_t)rank * M, M);
  gaaw_tensor_t other = view(buf, (int64_t)((rank + 1) % size) * M, M), off = view(buf, (int64_t)rank * M + 1, M);
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter(c, &all, &own, GAAW_SUM), GAAW_SUCCESS);
  for (int i = 0; i < M; i++) want[i] = (float)(100 * size * (size - 1) / 2 + size * (rank * M + i));
  expect_range(ctx, buf, (int64_t)rank * M, want, M, "reduce-scatter in place");
  expect_overlap(ctx, gaaw_comm_reduce_scatter(c, &all, &other, GAAW_SUM));
  expect_overlap(ctx, gaaw_comm_reduce_scatter(c, &all, &off, GAAW_SUM));
  expect_overlap(ctx, gaaw_comm_reduce_scatter_start(c, &all, &off, GAAW_SUM, &req));

  /* all-gather: send at this rank's block of recv works; elsewhere not */
  for (int i = 0; i < M; i++) v[i] = (float)(rank * 10 + i);
  put(ctx, buf, (int64_t)rank * M, v, M);
  expect_status_ctx(ctx, gaaw_comm_allgather(c, &own, &all), GAAW_SUCCESS);
  for (int q = 0; q < size; q++)
    for (int i = 0; i < M; i++) want[q * M + i] = (float)(q * 10 + i);
  expect_range(ctx, buf, 0, want, n, "all-gather in place");
  expect_overlap(ctx, gaaw_comm_allgather(c, &other, &all));
  expect_overlap(ctx, gaaw_comm_allgather(c, &off, &all));
  expect_overlap(ctx, gaaw_comm_allgather_start(c, &off, &all, &req));

  /* all-to-all: in place correct; a shifted recv refused; disjoint views of one buffer fine */
  for (int q = 0; q < size; q++)
    for (int i = 0; i < M; i++) v[q * M + i] = (float)(1000 * rank + 10 * q + i);
  put(ctx, buf, 0, v, n);
  expect_status_ctx(ctx, gaaw_comm_alltoall(c, &a, &a), GAAW_SUCCESS);
  for (int q = 0; q < size; q++)
    for (int i = 0; i < M; i++) want[q * M + i] = (float)(1000 * q + 10 * rank + i);
  expect_range(ctx, buf, 0, want, n, "all-to-all in place");
  expect_overlap(ctx, gaaw_comm_alltoall(c, &a, &shifted));
  put(ctx, buf, 0, v, n);
  gaaw_tensor_t far = view(buf, 2 * n, n);
  expect_status_ctx(ctx, gaaw_comm_alltoall(c, &a, &far), GAAW_SUCCESS);
  expect_range(ctx, buf, 2 * n, want, n, "all-to-all between disjoint views of one buffer");

  /* the refusals came before any traffic: the communicator still works */
  for (int64_t i = 0; i < n; i++) v[i] = 1.0f, want[i] = (float)size;
  put(ctx, buf, 0, v, n);
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &a, &a, GAAW_SUM), GAAW_SUCCESS);
  expect_range(ctx, buf, 0, want, n, "all-reduce after the refusals");

  gaaw_buffer_free(ctx, &buf);
  require_ok(ctx, gaaw_finalize(&ctx));
  MPI_Finalize();
  return test_finish("test_comm_alias_np2");
}
