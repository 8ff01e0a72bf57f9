/* Two ranks on one GPU (device=0 on both; needs one GPU, skipped without, exit 77):
 * NCCL does not support that, so gaaw_init keeps every group on the MPI backend
 * (with a warning in the log) instead of hanging or failing, and collectives on
 * CUDA tensors work through it. */
#include <mpi.h>
#include <string.h>

#include "tests/cuda/cuda_test_util.h"
#include "tests/harness/test_util.h"

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!cuda_test_gpus_everywhere(0) || size < 2) {
    if (rank == 0) fprintf(stderr, "test_nccl_shared_gpu_np2: needs a GPU and two ranks; skipped\n");
    MPI_Finalize();
    return TEST_SKIP;
  }
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=cuda device=0 nccl=yes comm_timeout=60");
  gaaw_comm_t world = NULL;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
  const char *backend = NULL;
  gaaw_comm_backend(world, &backend);
  expect_true(backend && !strcmp(backend, "mpi"), "ranks sharing GPU 0 talk through %s, expected mpi",
              backend ? backend : "(null)");
  enum { N = 4097 };
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, (int64_t[]){N}, GAAW_MEM_COMMUNICATION, &t));
  require_ok(ctx, gaaw_fill(ctx, &t, (float)(rank + 1)));
  expect_status_ctx(ctx, gaaw_comm_allreduce(world, &t, &t, GAAW_SUM), GAAW_SUCCESS);
  float got[N], want[N];
  require_ok(ctx, gaaw_buffer_read(ctx, t.buf, 0, got, sizeof got));
  for (int i = 0; i < N; i++) want[i] = (float)(size * (size + 1) / 2);
  expect_close(got, want, N, 0, "all-reduce over MPI between ranks on one GPU");
  if (rank == 0) printf("nccl_shared_gpu ranks=%d backend=%s\n", size, backend ? backend : "(null)");
  gaaw_buffer_free(ctx, &t.buf);
  require_ok(ctx, gaaw_finalize(&ctx));
  MPI_Finalize();
  return test_finish("test_nccl_shared_gpu_np2");
}
