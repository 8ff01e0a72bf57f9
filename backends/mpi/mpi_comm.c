/* The MPI communicator backend: life cycle, reused host and scratch memory, and
 * the table of operations. */
#include <limits.h>
#include <stdlib.h>

#include "backends/mpi/mpi_handle.h"
#include "backends/mpi/mpi_impl.h"

/* Takes ownership of mc: wraps it, and a duplicate for the ring's own traffic. */
static gaaw_status_t wrap(gaaw_comm_t comm, MPI_Comm mc)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_impl *impl = calloc(1, sizeof *impl);
  if (!impl) {
    MPI_Comm_free(&mc);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate MPI communicator state");
  }
  MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
  int err = MPI_Comm_dup(mc, &impl->ring);
  if (err != MPI_SUCCESS) {
    MPI_Comm_free(&mc);
    free(impl);
    return gaaw_mpi_status(ctx, err, __FILE__, __LINE__, __func__, "MPI_Comm_dup(ring)");
  }
  impl->comm = mc;
  impl->ring_bytes = gaaw_ctx_int(ctx, "allreduce_ring_bytes");
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
  GAAW_MPI_CHECK(ctx, MPI_Comm_split(gaaw_mpi_impl_of(parent)->comm, color, key, &mc));
  GAAW_CHECK(wrap(child, mc));
  return GAAW_SUCCESS;
}

static void mpi_destroy(gaaw_comm_t comm)
{
  gaaw_mpi_impl *impl = comm->impl;
  if (!impl) return;
  /* After a timeout the MPI communicators are abandoned: freeing them could wait on
   * the peer that never came. The scratch and staging memory are abandoned with
   * them (not returned), since a late message may still land in them. */
  if (!comm->aborted) {
    MPI_Comm_free(&impl->ring);
    MPI_Comm_free(&impl->comm);
    gaaw_buffer_free(comm->ctx, &impl->scratch);
    gaaw_mpi_host_release(&impl->host_scratch);
    gaaw_mpi_host_release(&impl->stage);
  }
  free(impl);
  comm->impl = NULL;
}

gaaw_status_t gaaw_mpi_host_reserve(gaaw_comm_t comm, gaaw_mpi_host_block *b, size_t bytes, void **p)
{
  if (b->bytes < bytes || !b->p) {
    /* whole pages, 64-byte aligned (aligned_alloc needs a multiple of the alignment) */
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    if (rounded == 0) rounded = 4096;
    void *fresh = aligned_alloc(64, rounded);
    if (!fresh)
      GAAW_FAIL(comm->ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %zu bytes of host memory for communicator %s",
                rounded, comm->name);
    free(b->p);
    b->p = fresh;
    b->bytes = rounded;
  }
  *p = b->p;
  return GAAW_SUCCESS;
}

void gaaw_mpi_host_release(gaaw_mpi_host_block *b)
{
  free(b->p);
  b->p = NULL;
  b->bytes = 0;
}

gaaw_status_t gaaw_mpi_scratch(gaaw_comm_t comm, size_t bytes, void **p)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_impl *impl = gaaw_mpi_impl_of(comm);
  if (impl->device_memory) {
    GAAW_CHECK(gaaw_mpi_host_reserve(comm, &impl->host_scratch, bytes, p));
    return GAAW_SUCCESS;
  }
  if (bytes == 0) bytes = 1;
  if (impl->scratch_bytes < bytes) {
    GAAW_CHECK(gaaw_buffer_free(ctx, &impl->scratch));
    impl->scratch_bytes = 0;
    GAAW_CHECK(gaaw_buffer_alloc(ctx, bytes, GAAW_MEM_COMMUNICATION, &impl->scratch));
    impl->scratch_bytes = bytes;
  }
  GAAW_CHECK(gaaw_buffer_host_ptr(impl->scratch, p));
  return GAAW_SUCCESS;
}

MPI_Datatype gaaw_mpi_type(gaaw_dtype_t dtype)
{
  switch (dtype) {
  case GAAW_F32: return MPI_FLOAT;
  case GAAW_I32: return MPI_INT32_T;
  default: return MPI_UINT16_T; /* bf16, f16: moved as bits */
  }
}

gaaw_status_t gaaw_mpi_count(gaaw_comm_t comm, int64_t n, int *count)
{
  if (n > INT_MAX)
    GAAW_FAIL(comm->ctx, GAAW_ERR_UNSUPPORTED, "%lld elements exceed MPI's int count (%d) in one message",
              (long long)n, INT_MAX);
  *count = (int)n;
  return GAAW_SUCCESS;
}

const gaaw_comm_ops gaaw_mpi_comm_ops = {
  .name = "mpi",
  .create_world = mpi_create_world,
  .split = mpi_split,
  .destroy = mpi_destroy,
  .allreduce = gaaw_mpi_allreduce,
  .reduce_scatter = gaaw_mpi_reduce_scatter,
  .allgather = gaaw_mpi_allgather,
  .broadcast = gaaw_mpi_broadcast,
  .send = gaaw_mpi_send,
  .recv = gaaw_mpi_recv,
  .alltoall = gaaw_mpi_alltoall,
  .alltoallv = gaaw_mpi_alltoallv,
  .barrier = gaaw_mpi_barrier,
  .p2p_start = gaaw_mpi_p2p_start,
  .p2p_complete = gaaw_mpi_p2p_complete,
  .p2p_test = gaaw_mpi_p2p_test,
};

MPI_Comm gaaw_mpi_comm_handle(gaaw_comm_t comm)
{
  if (!comm || comm->ops != &gaaw_mpi_comm_ops || !comm->impl) return MPI_COMM_NULL;
  return gaaw_mpi_impl_of(comm)->comm;
}
