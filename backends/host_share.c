/* Host bytes between the ranks of world over the control communicator. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/host_share.h"
#include "backends/runtime/abort.h"
#include "backends/runtime/error.h"
#include "backends/runtime/runtime.h"

/* A started collective waited for under the deadline; one that fails aborts ctx
 * (its peers may be out of step now). */
static gaaw_status_t finish(gaaw_context_t ctx, int mpi_err, MPI_Request *req, const char *what)
{
  gaaw_status_t st = mpi_err == MPI_SUCCESS ? gaaw_mpi_wait(ctx, req, what)
                                            : gaaw_mpi_status(ctx, mpi_err, __FILE__, __LINE__, __func__, what);
  if (st != GAAW_SUCCESS) {
    gaaw_context_abort(ctx);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

/* A rank that cannot take part in a round it was due in leaves its peers waiting:
 * it aborts the context, which tells them. */
static gaaw_status_t drop_out(gaaw_context_t ctx, gaaw_status_t st, const char *what, size_t bytes)
{
  gaaw_status_t raised = gaaw_error_raise(ctx, st, __FILE__, __LINE__, __func__, "%s: %zu bytes %s", what, bytes,
                                          st == GAAW_ERR_NO_MEMORY ? "cannot be allocated" : "are too many for MPI");
  gaaw_context_abort(ctx);
  return raised;
}

gaaw_status_t gaaw_share_bytes(gaaw_context_t ctx, void **data, size_t *bytes, int root)
{
  if (ctx->size == 1) return GAAW_SUCCESS;
  MPI_Request req;
  uint64_t n = ctx->rank == root ? (uint64_t)*bytes : 0;
  GAAW_CHECK(finish(ctx, MPI_Ibcast(&n, 1, MPI_UINT64_T, root, ctx->control, &req), &req, "sharing a size"));
  if (n > INT_MAX) return drop_out(ctx, GAAW_ERR_UNSUPPORTED, "sharing bytes", (size_t)n);
  if (ctx->rank != root) {
    *data = malloc(n ? (size_t)n : 1);
    if (!*data) return drop_out(ctx, GAAW_ERR_NO_MEMORY, "sharing bytes", (size_t)n);
    *bytes = (size_t)n;
  }
  GAAW_CHECK(finish(ctx, MPI_Ibcast(*data, (int)n, MPI_BYTE, root, ctx->control, &req), &req, "sharing bytes"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_gather_bytes(gaaw_context_t ctx, const void *bytes, size_t n, int root, void **all,
                                size_t **counts)
{
  *all = NULL;
  *counts = NULL;
  int me_root = ctx->rank == root;
  int64_t mine = (int64_t)n, *sizes = NULL;
  int *ints = NULL, *displs = NULL;
  if (me_root) {
    sizes = malloc(sizeof *sizes * (size_t)ctx->size);
    ints = malloc(sizeof *ints * (size_t)ctx->size);
    displs = malloc(sizeof *displs * (size_t)ctx->size);
    *counts = malloc(sizeof **counts * (size_t)ctx->size);
    if (!sizes || !ints || !displs || !*counts) {
      free(sizes), free(ints), free(displs), free(*counts);
      *counts = NULL;
      return drop_out(ctx, GAAW_ERR_NO_MEMORY, "gathering bytes", sizeof *sizes * (size_t)ctx->size);
    }
  }
  gaaw_status_t st = GAAW_SUCCESS;
  MPI_Request req;
  if (ctx->size == 1) sizes[0] = mine;
  else
    GAAW_CHECK_GOTO(st, finish(ctx, MPI_Igather(&mine, 1, MPI_INT64_T, sizes, 1, MPI_INT64_T, root, ctx->control, &req),
                               &req, "gathering sizes"), out);
  if (n > INT_MAX) {
    st = drop_out(ctx, GAAW_ERR_UNSUPPORTED, "gathering bytes", n);
    goto out;
  }
  size_t total = 0;
  for (int r = 0; me_root && r < ctx->size; r++) {
    (*counts)[r] = (size_t)sizes[r];
    displs[r] = (int)total;
    ints[r] = (int)sizes[r];
    total += (size_t)sizes[r];
  }
  if (me_root && total > INT_MAX) {
    st = drop_out(ctx, GAAW_ERR_UNSUPPORTED, "gathering bytes", total);
    goto out;
  }
  if (me_root && !(*all = malloc(total ? total : 1))) {
    st = drop_out(ctx, GAAW_ERR_NO_MEMORY, "gathering bytes", total);
    goto out;
  }
  if (ctx->size == 1) {
    if (n) memcpy(*all, bytes, n);
  } else
    GAAW_CHECK_GOTO(st, finish(ctx, MPI_Igatherv(bytes, (int)n, MPI_BYTE, *all, ints, displs, MPI_BYTE, root,
                                                 ctx->control, &req), &req, "gathering bytes"), out);
out:
  free(sizes), free(ints), free(displs);
  if (st != GAAW_SUCCESS) {
    free(*all), free(*counts);
    *all = NULL, *counts = NULL;
  }
  return st;
}

gaaw_status_t gaaw_all_true(gaaw_context_t ctx, int flag, int *all)
{
  *all = flag != 0;
  if (ctx->size == 1) return GAAW_SUCCESS;
  MPI_Request req;
  int mine = flag != 0;
  GAAW_CHECK(finish(ctx, MPI_Iallreduce(&mine, all, 1, MPI_INT, MPI_LAND, ctx->control, &req), &req,
                    "agreeing on a flag"));
  return GAAW_SUCCESS;
}
