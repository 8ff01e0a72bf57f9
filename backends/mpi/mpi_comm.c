/* The MPI communicator backend on host buffers. */
#include <stdlib.h>

#include "backends/comm.h"
#include "backends/mpi/mpi_handle.h"
#include "backends/runtime/runtime.h"

typedef struct {
  MPI_Comm comm;
} mpi_impl;

static gaaw_status_t wrap(gaaw_comm_t comm, MPI_Comm mc)
{
  gaaw_context_t ctx = comm->ctx;
  mpi_impl *impl = calloc(1, sizeof *impl);
  if (!impl) {
    MPI_Comm_free(&mc);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate MPI communicator state");
  }
  impl->comm = mc;
  MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
  MPI_Comm_rank(mc, &comm->rank);
  MPI_Comm_size(mc, &comm->size);
  comm->impl = impl;
  return GAAW_SUCCESS;
}

static gaaw_status_t mpi_create_world(gaaw_comm_t comm)
{
  gaaw_context_t ctx = comm->ctx;
  MPI_Comm mc;
  GAAW_MPI_CHECK(ctx, MPI_Comm_dup(ctx->world, &mc));
  GAAW_CHECK(wrap(comm, mc));
  return GAAW_SUCCESS;
}

static gaaw_status_t mpi_split(gaaw_comm_t parent, int color, int key, gaaw_comm_t child)
{
  gaaw_context_t ctx = parent->ctx;
  MPI_Comm mc;
  GAAW_MPI_CHECK(ctx, MPI_Comm_split(((mpi_impl *)parent->impl)->comm, color, key, &mc));
  GAAW_CHECK(wrap(child, mc));
  return GAAW_SUCCESS;
}

static void mpi_destroy(gaaw_comm_t comm)
{
  mpi_impl *impl = comm->impl;
  if (!impl) return;
  /* After a timeout the MPI communicator is abandoned: freeing it could wait on
   * the peer that never came. */
  if (!comm->aborted) MPI_Comm_free(&impl->comm);
  free(impl);
  comm->impl = NULL;
}

const gaaw_comm_ops gaaw_mpi_comm_ops = {
  .name = "mpi",
  .create_world = mpi_create_world,
  .split = mpi_split,
  .destroy = mpi_destroy,
};

MPI_Comm gaaw_mpi_comm_handle(gaaw_comm_t comm)
{
  if (!comm || comm->ops != &gaaw_mpi_comm_ops || !comm->impl) return MPI_COMM_NULL;
  return ((mpi_impl *)comm->impl)->comm;
}
