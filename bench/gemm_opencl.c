/* bench/gemm_opencl: square f32 GEMM through gaaw_gemm on the OpenCL backend against
 * CLBlastSgemm called directly on the same cl_mem buffers and queue, alternating,
 * median of several repeats (each timed to completion). One line per size:
 *   bench=gemm_opencl n=N dtype=f32 backend=opencl device=NAME openblas_coretype=X
 *   value=GFLOPS unit=GFLOP/s peer=clblast_sgemm peer_value=GFLOPS ratio=gaaw/peer
 * Run: bench/gemm_opencl (singleton) or mpiexec -n 1 bench/gemm_opencl. */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gaaw.h"

#if defined(GAAW_HAVE_OPENCL) && defined(GAAW_HAVE_CLBLAST)
#include <clblast_c.h>

#include "backends/opencl/opencl.h"
#include "bench/bench_util.h"

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    gaaw_status_t st_ = (call);                                                                            \
    if (st_ != GAAW_SUCCESS) {                                                                             \
      fprintf(stderr, "bench/gemm_opencl: %s failed: %s\n%s\n", #call, gaaw_status_name(st_), gaaw_last_error(ctx)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                        \
    }                                                                                                      \
  } while (0)

/* The peer: CLBlast directly on the tensors' buffers, waited for. */
static int direct_sgemm(cl_command_queue queue, size_t n, const gaaw_tensor_t *a, const gaaw_tensor_t *b,
                        gaaw_tensor_t *c)
{
  CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f,
                                      (cl_mem)a->buf->handle, a->offset / 4, n, (cl_mem)b->buf->handle,
                                      b->offset / 4, n, 0.0f, (cl_mem)c->buf->handle, c->offset / 4, n, &queue, NULL);
  return st == CLBlastSuccess && clFinish(queue) == CL_SUCCESS ? 0 : (int)st;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_config_t cfg;
  gaaw_context_t ctx = NULL;
  gaaw_config_create(&cfg);
  gaaw_config_set(cfg, "backend", "opencl");
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  ocl_state *s = ocl_of(ctx);
  char device[128];
  snprintf(device, sizeof device, "%s", s->device_name);
  for (char *p = device; *p; p++)
    if (*p == ' ') *p = '_';
  const char *coretype = getenv("OPENBLAS_CORETYPE");
  const int sizes[] = {256, 512, 1024, 2048};
  for (int si = 0; si < 4; si++) {
    int64_t n = sizes[si];
    int repeats = n >= 2048 ? 6 : n >= 1024 ? 10 : 16;
    gaaw_tensor_t a, b, c;
    CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){n, n}, GAAW_MEM_ACTIVATIONS, &a));
    CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){n, n}, GAAW_MEM_ACTIVATIONS, &b));
    CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){n, n}, GAAW_MEM_ACTIVATIONS, &c));
    CHECK(gaaw_fill(ctx, &a, 0.5f));
    CHECK(gaaw_fill(ctx, &b, 0.25f));
    CHECK(gaaw_synchronize(ctx));
    /* warm-up: CLBlast compiles its kernels on first use */
    CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &a, &b, 0.0f, &c));
    CHECK(gaaw_synchronize(ctx));
    if (direct_sgemm(s->queue, (size_t)n, &a, &b, &c)) {
      fprintf(stderr, "bench/gemm_opencl: CLBlastSgemm failed\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double *tg = malloc(sizeof(double) * (size_t)repeats), *tp = malloc(sizeof(double) * (size_t)repeats);
    for (int r = 0; r < repeats; r++) {
      /* who goes first alternates too, so that neither always follows the other */
      for (int side = 0; side < 2; side++) {
        double t0 = now();
        if ((side + r) % 2 == 0) {
          CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &a, &b, 0.0f, &c));
          CHECK(gaaw_synchronize(ctx));
          tg[r] = now() - t0;
        } else {
          direct_sgemm(s->queue, (size_t)n, &a, &b, &c);
          tp[r] = now() - t0;
        }
      }
    }
    double flops = 2.0 * (double)n * (double)n * (double)n;
    double g = flops / bench_median(tg, repeats) * 1e-9, p = flops / bench_median(tp, repeats) * 1e-9;
    printf("bench=gemm_opencl n=%lld dtype=f32 backend=opencl device=%s openblas_coretype=%s value=%.2f "
           "unit=GFLOP/s peer=clblast_sgemm peer_value=%.2f ratio=%.3f\n",
           (long long)n, device, coretype ? coretype : "unset", g, p, g / p);
    fflush(stdout);
    free(tg);
    free(tp);
    gaaw_buffer_free(ctx, &a.buf);
    gaaw_buffer_free(ctx, &b.buf);
    gaaw_buffer_free(ctx, &c.buf);
  }
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return 0;
}
#else
int main(void)
{
  fprintf(stderr, "bench/gemm_opencl: this gaaw was built without OpenCL and CLBlast\n");
  return 0;
}
#endif
