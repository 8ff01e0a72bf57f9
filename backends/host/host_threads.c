/* OpenMP thread count for host kernels. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include <stdlib.h>

#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"

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
  return GAAW_SUCCESS;
}
