/* gaaw_init and gaaw_finalize: the runtime (backends/) plus the topology. */
#include "backends/runtime/log.h"
#include "backends/runtime/runtime.h"
#include "parallel/topology_impl.h"

gaaw_status_t gaaw_init_version(MPI_Comm comm, gaaw_config_t cfg, gaaw_context_t *out, int header_version)
{
  GAAW_ARG_NOT_NULL(NULL, out);
  *out = NULL;
  gaaw_context_t ctx;
  GAAW_CHECK_CTX(NULL, gaaw_runtime_open(comm, cfg, header_version, &ctx));
  /* Planning is local and depends only on options and sizes; a rank whose options
   * differ fails here, and the agreement makes every rank fail with it. */
  gaaw_status_t st = gaaw_world_agree(ctx, gaaw_topology_plan(ctx, ctx->size, ctx->rank, &ctx->topo));
  if (st == GAAW_SUCCESS) {
    int64_t mine[3] = {ctx->topo.dp, ctx->topo.pp, ctx->topo.tp};
    st = gaaw_world_agree_values(ctx, "dp, pp, tp", mine, 3);
  }
  if (st == GAAW_SUCCESS) st = gaaw_world_agree(ctx, gaaw_topology_build(ctx));
  if (st != GAAW_SUCCESS) {
    *gaaw_error_record_of(NULL) = ctx->error;
    gaaw_topology_free(ctx);
    gaaw_runtime_close(ctx);
    return gaaw_error_trace(NULL, st, __FILE__, __LINE__, __func__);
  }
  *out = ctx;
  return GAAW_SUCCESS;
}

/* Fortran's integer handle enters here, like every MPI communicator, through gaaw_init. */
gaaw_status_t gaaw_init_fortran(MPI_Fint comm, gaaw_config_t cfg, gaaw_context_t *ctx, int header_version)
{
  return gaaw_init_version(MPI_Comm_f2c(comm), cfg, ctx, header_version);
}

gaaw_status_t gaaw_finalize(gaaw_context_t *ctx)
{
  if (!ctx || !*ctx) return GAAW_SUCCESS;
  gaaw_topology_free(*ctx);
  gaaw_runtime_close(*ctx);
  *ctx = NULL;
  return GAAW_SUCCESS;
}
