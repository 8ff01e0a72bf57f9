/* Threads of the host kernels: OpenMP for our loops, and who threads the GEMMs.
 *
 * With a pthreads OpenBLAS (Debian's default) BLAS calls run on OpenBLAS's own
 * thread pool while our loops run on OpenMP's: after each region the idle workers
 * of one pool keep spinning (OpenBLAS in sched_yield, libgomp in its spin wait)
 * and steal cores from the other. Profiles of the GPT spent half their samples
 * there. So when the BLAS is OpenBLAS we set it to one thread and split each GEMM
 * over the OpenMP threads ourselves (host_gemm.c): one pool, one wait policy. An
 * OpenMP or sequential OpenBLAS already runs one thread inside our regions. Any
 * other BLAS keeps its own threading and our GEMMs call it unsplit. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include <stdlib.h>

#include "config.h"

#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"
#include "backends/runtime/log.h"

/* OpenBLAS's controls; weak, so NULL when the BLAS is not OpenBLAS. */
extern void openblas_set_num_threads(int) __attribute__((weak));
extern int openblas_get_parallel(void) __attribute__((weak));

/* libgaaw_ompwait's record of the OpenMP wait policy (backends/host/omp_wait.c). */
const char *gaaw_omp_wait_choice(void);

/* Set once per process by the first context; every context agrees. */
static int gemm_split = 0;

int gaaw_host_gemm_threads(void)
{
#ifdef _OPENMP
  return gemm_split ? omp_get_max_threads() : 1;
#else
  return 1;
#endif
}

gaaw_status_t gaaw_host_threads_configure(gaaw_context_t ctx)
{
  int64_t threads = gaaw_ctx_int(ctx, "threads");
  GAAW_ARG_CHECK(ctx, threads >= 0 && threads <= 4096, "option threads must be in 0..4096, got %lld",
                 (long long)threads);
#ifdef _OPENMP
  /* By default the cores are shared among this node's ranks, so that 4 ranks on 2
   * cores do not run 8 spinning threads; OMP_NUM_THREADS, when set, decides. */
  if (threads == 0 && !getenv("OMP_NUM_THREADS")) {
    threads = omp_get_num_procs() / (ctx->local_size > 0 ? ctx->local_size : 1);
    if (threads < 1) threads = 1;
  }
  if (threads > 0) omp_set_num_threads((int)threads);
#endif
#ifdef _OPENMP
  const char *wait = gaaw_omp_wait_choice();
  gaaw_log(GAAW_LOG_DEBUG, "host: OpenMP threads wait %s", wait[0] ? wait : "as the environment says (static build)");
#endif
#ifdef GAAW_HAVE_CBLAS
  if (openblas_set_num_threads && openblas_get_parallel) {
    int kind = openblas_get_parallel(); /* 0 sequential, 1 pthreads, 2 OpenMP */
    if (kind == 1) openblas_set_num_threads(1);
    gemm_split = 1;
    gaaw_log(GAAW_LOG_DEBUG, "host: OpenBLAS (%s) runs one thread per call; GEMMs are split over %d OpenMP threads",
             kind == 1 ? "pthreads, set to 1 thread" : kind == 2 ? "OpenMP" : "sequential", gaaw_host_gemm_threads());
  }
#endif
  return GAAW_SUCCESS;
}
