/* The runtime part of a context: MPI world, options, logger, device backend and
 * allocator. gaaw_init (parallel/init.c) adds the topology on top. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/agree.h"
#include "backends/runtime/abort.h"
#include "backends/runtime/config_impl.h"
#include "backends/runtime/context_impl.h"
#include "backends/runtime/log.h"
#include "backends/runtime/runtime.h"

const char *gaaw_version(void)
{
  return GAAW_VERSION_STRING;
}

int gaaw_version_number(void)
{
  return GAAW_VERSION_NUMBER;
}

int64_t gaaw_ctx_int(gaaw_context_t ctx, const char *key)
{
  int64_t v = 0;
  gaaw_config_get_int(ctx->config, key, &v);
  return v;
}

double gaaw_ctx_double(gaaw_context_t ctx, const char *key)
{
  double v = 0;
  gaaw_config_get_double(ctx->config, key, &v);
  return v;
}

const char *gaaw_ctx_string(gaaw_context_t ctx, const char *key)
{
  const char *v = "";
  gaaw_config_describe(ctx->config, key, &v, NULL);
  return v;
}

int gaaw_ctx_bool(gaaw_context_t ctx, const char *key)
{
  int v = 0;
  gaaw_config_get_bool(ctx->config, key, &v);
  return v;
}

gaaw_status_t gaaw_mpi_status(gaaw_context_t ctx, int mpi_err, const char *file, int line, const char *func,
                              const char *call)
{
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(mpi_err, text, &len);
  return gaaw_error_raise(ctx, GAAW_ERR_COMM, file, line, func, "%s failed: %s", call, text);
}

gaaw_status_t gaaw_mpi_waitall(gaaw_context_t ctx, int n, MPI_Request *reqs, const char *what)
{
  double timeout = ctx->comm_timeout;
  double start = MPI_Wtime();
  for (unsigned spins = 1;; spins++) {
    /* MPI_Test sets each finished request to MPI_REQUEST_NULL, so on a timeout only
     * the unfinished ones are left. */
    int active = 0;
    for (int i = 0; i < n; i++) {
      if (reqs[i] == MPI_REQUEST_NULL) continue;
      int done = 0, err = MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS) return gaaw_mpi_status(ctx, err, __FILE__, __LINE__, __func__, "MPI_Test");
      active += !done;
    }
    if (!active) return GAAW_SUCCESS;
    if (spins % 16) continue;
    /* a peer that failed has told us: what we wait for may never come */
    GAAW_CHECK(gaaw_context_check_live(ctx));
    /* Every 16 polls, give the core away: with more ranks than cores (4 on 2 here)
     * the peer we wait for may need it, and sched_yield costs nothing when no one
     * else is runnable. Sleeping instead would stall MPI's large transfers, which
     * progress inside MPI_Test; only a wait that has already lasted 0.1 s (a slow
     * peer) sleeps, to stop burning a core. Collectives cannot be cancelled
     * (MPI_Cancel on one is erroneous): on a timeout the requests still active are
     * left to the caller. */
    double waited = MPI_Wtime() - start;
    if (timeout > 0 && waited > timeout)
      GAAW_FAIL(ctx, GAAW_ERR_TIMEOUT, "%s did not complete within comm_timeout = %g s", what, timeout);
    if (waited < 0.1) {
      sched_yield();
    } else {
      struct timespec pause = {0, 50000};
      nanosleep(&pause, NULL);
    }
  }
}

gaaw_status_t gaaw_mpi_wait(gaaw_context_t ctx, MPI_Request *req, const char *what)
{
  return gaaw_mpi_waitall(ctx, 1, req, what);
}

/* Node-local rank and size, from the ranks that share memory with this one. */
static gaaw_status_t find_local_rank(gaaw_context_t ctx)
{
  MPI_Comm node;
  GAAW_MPI_CHECK(ctx, MPI_Comm_split_type(ctx->world, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &ctx->local_rank);
  MPI_Comm_size(node, &ctx->local_size);
  MPI_Comm_free(&node);
  return GAAW_SUCCESS;
}

/* Picks the device backend named by the option `backend` (auto: the first in the
 * list cuda > opencl > host with an accelerator; host otherwise) and opens a device on it. */
static gaaw_status_t open_device(gaaw_context_t ctx)
{
  const char *want = gaaw_ctx_string(ctx, "backend");
  int n_backends = 0;
  const gaaw_device_ops *const *all = gaaw_device_backends(&n_backends);
  const gaaw_device_ops *chosen = NULL;
  int count = 0;
  if (strcmp(want, "auto") == 0) {
    /* the first backend with an accelerator; the host backend (last) otherwise */
    for (int i = 0; i < n_backends && !chosen; i++) {
      int accelerators = 0;
      gaaw_status_t (*count_fn)(int *) = all[i]->accelerator_count ? all[i]->accelerator_count : all[i]->device_count;
      if (i == n_backends - 1 || (count_fn(&accelerators) == GAAW_SUCCESS && accelerators > 0)) chosen = all[i];
    }
    GAAW_CHECK(chosen->device_count(&count));
    if (count < 1) GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "the %s backend sees no device", chosen->name);
  } else {
    chosen = gaaw_device_backend(want);
    if (!chosen) {
      char names[128] = "";
      for (int i = 0; i < n_backends; i++) {
        strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, all[i]->name, sizeof names - strlen(names) - 1);
      }
      GAAW_FAIL(ctx, strcmp(want, "host") && strcmp(want, "opencl") && strcmp(want, "cuda") ? GAAW_ERR_INVALID_ARG
                                                                                            : GAAW_ERR_UNSUPPORTED,
                "backend '%s' is not built into this gaaw (built: %s)", want, names);
    }
    GAAW_CHECK(chosen->device_count(&count));
    if (count < 1) GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "backend '%s' finds no device on this node", want);
  }
  int64_t index = gaaw_ctx_int(ctx, "device");
  if (index < 0) index = ctx->local_rank % count;
  GAAW_ARG_CHECK(ctx, index < count, "device %lld does not exist: the %s backend sees %d device(s)",
                 (long long)index, chosen->name, count);
  ctx->device = chosen;
  ctx->device_index = (int)index;
  GAAW_CHECK(chosen->open(ctx, (int)index));
  gaaw_log(GAAW_LOG_INFO, "device backend %s, device %d of %d", chosen->name, (int)index, count);
  return GAAW_SUCCESS;
}

/* Everything of gaaw_runtime_open that can fail after the context exists. */
static gaaw_status_t setup(gaaw_context_t ctx, MPI_Comm comm, gaaw_config_t cfg)
{
  GAAW_CHECK(gaaw_config_copy(cfg, &ctx->config));
  GAAW_MPI_CHECK(ctx, MPI_Comm_dup(comm, &ctx->world));
  MPI_Comm_set_errhandler(ctx->world, MPI_ERRORS_RETURN);
  GAAW_MPI_CHECK(ctx, MPI_Comm_dup(ctx->world, &ctx->control));
  MPI_Comm_set_errhandler(ctx->control, MPI_ERRORS_RETURN);
  MPI_Comm_rank(ctx->world, &ctx->rank);
  MPI_Comm_size(ctx->world, &ctx->size);
  GAAW_CHECK(find_local_rank(ctx)); /* collective: before anything that may fail on one rank */
  /* every option's value, by gaaw_config_check's rules (after the duplicates, so
   * that the ranks can agree when only one has a bad option) */
  if (gaaw_config_check(ctx->config) != GAAW_SUCCESS) {
    ctx->error = *gaaw_error_record_of(NULL);
    return gaaw_error_trace(ctx, ctx->error.status, __FILE__, __LINE__, __func__);
  }
  GAAW_CHECK(gaaw_log_configure(gaaw_log_level_parse(gaaw_ctx_string(ctx, "log")), gaaw_ctx_string(ctx, "log_file"),
                                ctx->rank));
  ctx->comm_timeout = gaaw_ctx_double(ctx, "comm_timeout");
  ctx->compute_slowdown = gaaw_ctx_double(ctx, "compute_slowdown");
  ctx->allocator.cache_enabled = gaaw_ctx_bool(ctx, "allocator_cache");
  gaaw_bytes_parse(gaaw_ctx_string(ctx, "device_memory_limit"), &ctx->allocator.limit); /* checked above */
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_runtime_open(MPI_Comm comm, gaaw_config_t cfg, int header_version, gaaw_context_t *out)
{
  GAAW_ARG_NOT_NULL(NULL, out);
  *out = NULL;
  if (header_version != GAAW_VERSION_NUMBER)
    GAAW_FAIL(NULL, GAAW_ERR_VERSION, "the program was compiled against gaaw.h version %d but linked with "
              "libgaaw version %d; rebuild it against the installed headers", header_version, GAAW_VERSION_NUMBER);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    GAAW_FAIL(NULL, GAAW_ERR_STATE, "MPI is %s: call MPI_Init before gaaw_init and MPI_Finalize after "
              "gaaw_finalize", finalized ? "already finalized" : "not initialized");
  GAAW_ARG_CHECK(NULL, comm != MPI_COMM_NULL, "comm is MPI_COMM_NULL");
  gaaw_context_t ctx = calloc(1, sizeof *ctx);
  if (!ctx) GAAW_FAIL(NULL, GAAW_ERR_NO_MEMORY, "cannot allocate a context (%zu bytes)", sizeof *ctx);
  ctx->world = ctx->control = MPI_COMM_NULL;
  ctx->comm_timeout = 300;
  ctx->compute_slowdown = 1;
  gaaw_status_t st = setup(ctx, comm, cfg);
  if (ctx->control != MPI_COMM_NULL) {
    /* From here on every rank fails together, so no rank waits for a dead peer. */
    if (st == GAAW_SUCCESS) st = open_device(ctx);
    st = gaaw_agree_world(ctx, st, "opening the device", NULL, 0);
  }
  if (st != GAAW_SUCCESS) {
    /* Hand the report to the thread record: the caller gets no context to ask. */
    gaaw_error_record *thread = gaaw_error_record_of(NULL);
    *thread = ctx->error;
    gaaw_runtime_close(ctx);
    return gaaw_error_trace(NULL, st, __FILE__, __LINE__, __func__);
  }
  *out = ctx;
  return GAAW_SUCCESS;
}

void gaaw_runtime_close(gaaw_context_t ctx)
{
  if (!ctx) return;
  if (ctx->device) {
    gaaw_allocator_release_cached(ctx);
    ctx->device->close(ctx);
  }
  gaaw_host_blocks_release(ctx);
  gaaw_context_abort_release(ctx);
  /* after an abort, freeing could wait on a peer that never comes: abandoned */
  if (ctx->control != MPI_COMM_NULL && !ctx->aborted) MPI_Comm_free(&ctx->control);
  if (ctx->world != MPI_COMM_NULL) MPI_Comm_free(&ctx->world);
  gaaw_config_destroy(&ctx->config);
  free(ctx);
}

gaaw_status_t gaaw_world_rank(gaaw_context_t ctx, int *rank)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, rank);
  *rank = ctx->rank;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_world_size(gaaw_context_t ctx, int *size)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, size);
  *size = ctx->size;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_backend_name(gaaw_context_t ctx, const char **name)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, name);
  *name = ctx->device->name;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_context_config(gaaw_context_t ctx, gaaw_config_t *cfg)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, cfg);
  *cfg = ctx->config;
  return GAAW_SUCCESS;
}
