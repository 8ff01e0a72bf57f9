/* gaaw_init and gaaw_finalize: the runtime (backends/) plus the topology. */
#include "backends/agree.h"
#include "backends/runtime/config_impl.h"
#include "backends/runtime/log.h"
#include "backends/runtime/runtime.h"
#include "backends/runtime/trace.h"
#include "parallel/schedule.h"
#include "parallel/stages.h"
#include "parallel/topology_impl.h"

/* What this rank can check alone: the pipeline options (a schedule that takes
 * this pp, microbatches and virtual_stages, a well-formed pp_layout). */
static gaaw_status_t check_pipeline(gaaw_context_t ctx)
{
  int pp = (int)gaaw_ctx_int(ctx, "pp"), m = (int)gaaw_ctx_int(ctx, "microbatches");
  int v = (int)gaaw_ctx_int(ctx, "virtual_stages");
  gaaw_sched_kind_t kind;
  GAAW_CHECK(gaaw_sched_kind_parse(ctx, gaaw_ctx_string(ctx, "pp_schedule"), &kind));
  GAAW_CHECK(gaaw_sched_check(ctx, kind, pp, m, v));
  GAAW_CHECK(gaaw_stages_check_text(ctx, gaaw_ctx_string(ctx, "pp_layout"), pp, v));
  return GAAW_SUCCESS;
}

/* The options every rank must share: the grid, what decides how collectives
 * and ZeRO buckets are cut (ranks that differ there would pair unlike messages),
 * and peak_tflops (one MFU for the job; `measure` combines every rank's figure). */
static gaaw_status_t agree_on_options(gaaw_context_t ctx, gaaw_status_t local)
{
  const char *order = gaaw_ctx_string(ctx, "rank_order");
  gaaw_field fields[] = {
    GAAW_FIELD_INT("tp", gaaw_ctx_int(ctx, "tp")),
    GAAW_FIELD_INT("cp", gaaw_ctx_int(ctx, "cp")),
    GAAW_FIELD_TEXT("cp_kind", gaaw_ctx_string(ctx, "cp_kind")),
    GAAW_FIELD_INT("pp", gaaw_ctx_int(ctx, "pp")),
    GAAW_FIELD_INT("ep", gaaw_ctx_int(ctx, "ep")),
    GAAW_FIELD_INT("dp", gaaw_ctx_int(ctx, "dp")),
    GAAW_FIELD_TEXT("rank_order", order),
    GAAW_FIELD_INT("zero_bucket_bytes", gaaw_ctx_int(ctx, "zero_bucket_bytes")),
    GAAW_FIELD_INT("allreduce_ring_bytes", gaaw_ctx_int(ctx, "allreduce_ring_bytes")),
    GAAW_FIELD_INT("zero_keep_gathered", gaaw_ctx_bool(ctx, "zero_keep_gathered")),
    GAAW_FIELD_INT("nccl", gaaw_ctx_bool(ctx, "nccl")),
    GAAW_FIELD_REAL("comm_timeout", ctx->comm_timeout),
    GAAW_FIELD_TEXT("peak_tflops", gaaw_ctx_string(ctx, "peak_tflops")),
    GAAW_FIELD_INT("microbatches", gaaw_ctx_int(ctx, "microbatches")),
    GAAW_FIELD_TEXT("pp_schedule", gaaw_ctx_string(ctx, "pp_schedule")),
    GAAW_FIELD_INT("virtual_stages", gaaw_ctx_int(ctx, "virtual_stages")),
    GAAW_FIELD_TEXT("pp_layout", gaaw_ctx_string(ctx, "pp_layout")),
    GAAW_FIELD_INT("trace (on or off)", gaaw_ctx_string(ctx, "trace")[0] != '\0'),
    GAAW_FIELD_NAMED("recompute", gaaw_recompute_parse(gaaw_ctx_string(ctx, "recompute")),
                     gaaw_ctx_string(ctx, "recompute")),
  };
  GAAW_CHECK(gaaw_agree_world(ctx, local, "the gaaw_init options", fields, (int)(sizeof fields / sizeof fields[0])));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_init_version(MPI_Comm comm, gaaw_config_t cfg, gaaw_context_t *out, int header_version)
{
  GAAW_ARG_NOT_NULL(NULL, out);
  *out = NULL;
  gaaw_context_t ctx;
  GAAW_CHECK_CTX(NULL, gaaw_runtime_open(comm, cfg, header_version, &ctx));
  /* Planning is local and depends only on options and sizes; a rank whose options
   * are wrong or differ fails here, and the agreement makes every rank fail with it. */
  gaaw_status_t st = check_pipeline(ctx);
  if (st == GAAW_SUCCESS) st = gaaw_topology_plan(ctx, ctx->size, ctx->rank, &ctx->topo);
  st = agree_on_options(ctx, st);
  if (st == GAAW_SUCCESS) st = gaaw_agree_world(ctx, gaaw_topology_build(ctx), "building the topology", NULL, 0);
  if (st == GAAW_SUCCESS) st = gaaw_agree_world(ctx, gaaw_trace_open(ctx), "opening the trace", NULL, 0);
  if (st == GAAW_SUCCESS) st = gaaw_trace_sync_clock(ctx);
  if (st != GAAW_SUCCESS) {
    *gaaw_error_record_of(NULL) = ctx->error;
    gaaw_trace_close(ctx);
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
  gaaw_trace_close(*ctx);
  gaaw_topology_free(*ctx);
  gaaw_runtime_close(*ctx);
  *ctx = NULL;
  return GAAW_SUCCESS;
}
