/* OpenMP thread count for host kernels. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"

gaaw_status_t gaaw_host_threads_configure(gaaw_context_t ctx)
{
  int64_t threads = gaaw_ctx_int(ctx, "threads");
  GAAW_ARG_CHECK(ctx, threads >= 0 && threads <= 4096, "option threads must be in 0..4096, got %lld",
                 (long long)threads);
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads((int)threads);
#endif
  return GAAW_SUCCESS;
}
