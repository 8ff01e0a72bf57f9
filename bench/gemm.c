/* bench/gemm: square f32 GEMM through gaaw_gemm (host backend) against cblas_sgemm
 * called directly on the same host arrays, alternating, median of several repeats.
 * One line per size:
 *   bench=gemm n=N dtype=f32 backend=host threads=T openblas_coretype=X value=GFLOPS
 *   unit=GFLOP/s peer=cblas_sgemm peer_value=GFLOPS ratio=gaaw/peer
 * Run: mpiexec -n 1 bench/gemm [N ...] (or as a singleton); the sizes default to 256,
 * 512, 1024 and 2048.
 * Fairness: with a pthreads OpenBLAS, gaaw sets OpenBLAS to one thread per call and
 * splits each GEMM over its OpenMP threads (backends/host/host_threads.c); the peer
 * gets OpenBLAS's own thread pool of the same size for its calls. Each side's idle
 * threads spin for a while after its calls (libgomp briefly, OpenBLAS for up to
 * ~0.1 s), so the sides alternate in blocks of calls separated by an untimed
 * 0.3 s pause, and the first call of each block is not timed: neither side is timed
 * against the other's spinning threads, and each runs in its steady state. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gaaw.h"
#include "bench/bench_util.h"

#ifdef GAAW_HAVE_CBLAS
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* OpenBLAS's thread control, weak: NULL with another BLAS. */
extern void openblas_set_num_threads(int) __attribute__((weak));

/* The peer's threads: OpenBLAS's own pool of `threads`; gaaw's: one per call. */
static void blas_threads(int threads)
{
  if (openblas_set_num_threads) openblas_set_num_threads(threads);
}

static void settle(void)
{
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
}

#define CHECK(call)                                                                                      \
  do {                                                                                                   \
    gaaw_status_t st_ = (call);                                                                          \
    if (st_ != GAAW_SUCCESS) {                                                                           \
      fprintf(stderr, "bench/gemm: %s failed: %s\n%s\n", #call, gaaw_status_name(st_), gaaw_last_error(ctx)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                      \
    }                                                                                                    \
  } while (0)

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_config_t cfg;
  gaaw_context_t ctx = NULL;
  gaaw_config_create(&cfg);
  gaaw_config_set(cfg, "backend", "host");
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  const char *coretype = getenv("OPENBLAS_CORETYPE");
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  int64_t sizes[8] = {256, 512, 1024, 2048};
  int nsizes = 4;
  if (argc > 1) nsizes = 0;
  for (int i = 1; i < argc; i++) {
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < 1 || v > 16384 || nsizes == 8) {
      fprintf(stderr, "bench/gemm: sizes are at most 8 integers in 1..16384, not '%s'\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    sizes[nsizes++] = v;
  }
  for (int si = 0; si < nsizes; si++) {
    int64_t n = sizes[si];
    int repeats;
    gaaw_tensor_t a, b, c;
    CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){n, n}, GAAW_MEM_ACTIVATIONS, &a));
    CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){n, n}, GAAW_MEM_ACTIVATIONS, &b));
    CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){n, n}, GAAW_MEM_ACTIVATIONS, &c));
    float *pa, *pb, *pc; /* the very same host arrays for the peer */
    CHECK(gaaw_buffer_host_ptr(a.buf, (void **)&pa));
    CHECK(gaaw_buffer_host_ptr(b.buf, (void **)&pb));
    CHECK(gaaw_buffer_host_ptr(c.buf, (void **)&pc));
    for (int64_t i = 0; i < n * n; i++) {
      pa[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
      pb[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
      pc[i] = 0.0f;
    }
    enum { ROUNDS = 5, PER_BLOCK = 4 };
    double t_gaaw[ROUNDS * PER_BLOCK], t_peer[ROUNDS * PER_BLOCK];
    int timed = 0;
    for (int r = 0; r < ROUNDS; r++) {
      blas_threads(1);
      settle();
      for (int k = -1; k < PER_BLOCK; k++) { /* k = -1: untimed first call of the block */
        double t0 = MPI_Wtime();
        CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &a, &b, 0.0f, &c));
        if (k >= 0) t_gaaw[timed + k] = MPI_Wtime() - t0;
      }
      blas_threads(threads);
      settle();
      for (int k = -1; k < PER_BLOCK; k++) {
        double t0 = MPI_Wtime();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, pa, (int)n, pb,
                    (int)n, 0.0f, pc, (int)n);
        if (k >= 0) t_peer[timed + k] = MPI_Wtime() - t0;
      }
      timed += PER_BLOCK;
    }
    blas_threads(1);
    repeats = timed;
    double flops = 2.0 * n * n * n;
    double g = flops / bench_median(t_gaaw, repeats) * 1e-9, p = flops / bench_median(t_peer, repeats) * 1e-9;
    printf("bench=gemm n=%lld dtype=f32 backend=host threads=%d openblas_coretype=%s repeats=%d value=%.1f "
           "unit=GFLOP/s peer=cblas_sgemm peer_value=%.1f ratio=%.3f\n",
           (long long)n, threads, coretype ? coretype : "unset", repeats, g, p, g / p);
    fflush(stdout);
    gaaw_buffer_free(ctx, &a.buf);
    gaaw_buffer_free(ctx, &b.buf);
    gaaw_buffer_free(ctx, &c.buf);
  }
  CHECK(gaaw_finalize(&ctx));
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return 0;
}
#else
int main(void)
{
  printf("bench=gemm skipped: this build has no CBLAS (configure found none), so there is no peer to compare\n");
  return 0;
}
#endif
