/* Host bytes between the ranks of world over the control communicator. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
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

/* Before a round whose buffers some rank may have failed to allocate (or to size):
 * every rank learns whether all can take part, so that none is left waiting in a
 * round another rank skips (a pending broadcast would meet the next collective out
 * of step). st: this rank's status, a failure to allocate (or to count) bytes. */
static gaaw_status_t ready(gaaw_context_t ctx, gaaw_status_t st, const char *what, size_t bytes)
{
  if (st != GAAW_SUCCESS)
    st = gaaw_error_raise(ctx, st, __FILE__, __LINE__, __func__, "%s: %zu bytes %s", what, bytes,
                          st == GAAW_ERR_NO_MEMORY ? "cannot be allocated" : "are too many for MPI");
  return gaaw_agree_world(ctx, st, what, NULL, 0);
}

gaaw_status_t gaaw_share_bytes(gaaw_context_t ctx, void **data, size_t *bytes, int root)
{
  if (ctx->size == 1) return GAAW_SUCCESS;
  MPI_Request req;
  uint64_t n = ctx->rank == root ? (uint64_t)*bytes : 0;
  GAAW_CHECK(finish(ctx, MPI_Ibcast(&n, 1, MPI_UINT64_T, root, ctx->control, &req), &req, "sharing a size"));
  if (n > INT_MAX) GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "sharing bytes: %llu bytes are too many for MPI",
                             (unsigned long long)n); /* every rank alike */
  void *mine = NULL;
  if (ctx->rank != root) mine = malloc(n ? (size_t)n : 1);
  gaaw_status_t st = ready(ctx, ctx->rank == root || mine ? GAAW_SUCCESS : GAAW_ERR_NO_MEMORY, "sharing bytes",
                           (size_t)n);
  if (st != GAAW_SUCCESS) {
    free(mine);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  if (ctx->rank != root) *data = mine, *bytes = (size_t)n;
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
  }
  int held = !me_root || (sizes && ints && displs && *counts);
  gaaw_status_t st = ready(ctx, held ? GAAW_SUCCESS : GAAW_ERR_NO_MEMORY, "gathering sizes",
                           sizeof *sizes * (size_t)ctx->size);
  MPI_Request req;
  if (st == GAAW_SUCCESS && ctx->size == 1) sizes[0] = mine;
  else if (st == GAAW_SUCCESS)
    st = finish(ctx, MPI_Igather(&mine, 1, MPI_INT64_T, sizes, 1, MPI_INT64_T, root, ctx->control, &req), &req,
                "gathering sizes");
  size_t total = 0;
  for (int r = 0; st == GAAW_SUCCESS && me_root && r < ctx->size; r++) {
    (*counts)[r] = (size_t)sizes[r];
    displs[r] = (int)total;
    ints[r] = (int)sizes[r];
    total += (size_t)sizes[r];
  }
  if (st == GAAW_SUCCESS) {
    /* every rank's part, and the root's whole, must fit MPI's int counts */
    gaaw_status_t fits = n > INT_MAX || (me_root && total > INT_MAX) ? GAAW_ERR_UNSUPPORTED : GAAW_SUCCESS;
    if (fits == GAAW_SUCCESS && me_root && !(*all = malloc(total ? total : 1))) fits = GAAW_ERR_NO_MEMORY;
    st = ready(ctx, fits, "gathering bytes", me_root ? total : n);
  }
  if (st == GAAW_SUCCESS && ctx->size == 1) {
    if (n) memcpy(*all, bytes, n);
  } else if (st == GAAW_SUCCESS) {
    st = finish(ctx, MPI_Igatherv(bytes, (int)n, MPI_BYTE, *all, ints, displs, MPI_BYTE, root, ctx->control, &req),
                &req, "gathering bytes");
  }
  free(sizes), free(ints), free(displs);
  if (st != GAAW_SUCCESS) {
    free(*all), free(*counts);
    *all = NULL, *counts = NULL;
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
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
