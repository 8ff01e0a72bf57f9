/* The NCCL communicator backend (see nccl_comm.h): the life cycle of its
 * communicators (non-blocking ones, over the ranks of an MPI communicator or split
 * from another, destroyed after a flush or aborted) and its table of operations,
 * which the other files implement. Calls nccl_collectives.c, nccl_p2p.c and
 * nccl_watch.c (see nccl_impl.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/mpi/mpi_handle.h"
#include "backends/nccl/nccl_impl.h"

/* ---------------------------------------------------------------- life cycle */

static gaaw_status_t require_cuda(gaaw_context_t ctx)
{
  if (!gaaw_cuda_is_context(ctx))
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "NCCL communicators need a context on the cuda backend; this one runs on %s",
              ctx->device ? ctx->device->name : "no device");
  GAAW_CUDA_CHECK(ctx, cudaSetDevice(gaaw_cuda_state_of(ctx)->device));
  return GAAW_SUCCESS;
}

static ncclConfig_t nonblocking_config(void)
{
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

/* Fills comm (impl, rank, size) with an NCCL communicator over the ranks of mc. */
static gaaw_status_t init_over_mpi(gaaw_comm_t comm, MPI_Comm mc)
{
  gaaw_context_t ctx = comm->ctx;
  double start = gaaw_nccl_now();
  GAAW_CHECK(require_cuda(ctx));
  int rank, size;
  GAAW_MPI_CHECK(ctx, MPI_Comm_rank(mc, &rank));
  GAAW_MPI_CHECK(ctx, MPI_Comm_size(mc, &size));
  /* Rank 0's unique id, with its status, so that a failure there fails every rank. */
  struct {
    int result;
    ncclUniqueId id;
  } msg;
  memset(&msg, 0, sizeof msg);
  if (rank == 0) msg.result = ncclGetUniqueId(&msg.id);
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Ibcast(&msg, (int)sizeof msg, MPI_BYTE, 0, mc, &req));
  GAAW_CHECK(gaaw_mpi_wait(ctx, &req, "the broadcast of the NCCL unique id"));
  if (msg.result != ncclSuccess) NCCL_FAIL(ctx, (ncclResult_t)msg.result, NULL, "ncclGetUniqueId (on rank 0)");
  nccl_impl *impl = calloc(1, sizeof *impl);
  if (!impl) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate NCCL communicator state");
  impl->owner = comm;
  comm->impl = impl; /* freed by nccl_destroy, also after a failure below */
  comm->rank = rank;
  comm->size = size;
  ncclConfig_t config = nonblocking_config();
  ncclResult_t r = ncclCommInitRankConfig(&impl->comm, size, msg.id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (impl->comm) ncclCommAbort(impl->comm);
    impl->comm = NULL;
    gaaw_status_t st = gaaw_nccl_error(ctx, r, NULL, __FILE__, __LINE__, __func__, "ncclCommInitRankConfig");
    gaaw_comm_mark_aborted(comm); /* the other ranks may be inside the initialisation */
    return st;
  }
  GAAW_CHECK(gaaw_nccl_wait_ready(comm, start, "NCCL communicator initialisation"));
  gaaw_nccl_watch_add(ctx, impl);
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_create_world(gaaw_comm_t comm)
{
  GAAW_CHECK_CTX(comm->ctx, init_over_mpi(comm, comm->ctx->world));
  return GAAW_SUCCESS;
}

/* One exit: on any failure the child's NCCL communicator is aborted and its state
 * freed here (child->impl left NULL), and a failure of NCCL itself aborts the
 * parent too, whose other members may be inside the split. */
static gaaw_status_t nccl_split(gaaw_comm_t parent, int color, int key, gaaw_comm_t child)
{
  gaaw_context_t ctx = parent->ctx;
  double start = gaaw_nccl_now();
  GAAW_CHECK(require_cuda(ctx));
  if (!gaaw_nccl_impl_of(parent)->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", parent->name);
  nccl_impl *impl = calloc(1, sizeof *impl);
  if (!impl) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate NCCL communicator state");
  impl->owner = child;
  child->impl = impl;
  gaaw_status_t st = GAAW_SUCCESS;
  ncclConfig_t config = nonblocking_config();
  ncclResult_t r = ncclCommSplit(gaaw_nccl_impl_of(parent)->comm, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, key,
                                 &impl->comm, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    st = gaaw_nccl_error(ctx, r, gaaw_nccl_impl_of(parent)->comm, __FILE__, __LINE__, __func__, "ncclCommSplit");
    gaaw_nccl_abort_one(parent);
    goto out;
  }
  /* A negative color leaves this rank out (NCCL returns no communicator). */
  if (!impl->comm) {
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "color %d left this rank out of the split", color);
    goto out;
  }
  st = gaaw_nccl_wait_ready(child, start, "ncclCommSplit"); /* aborts (child and the context's others) on failure */
  if (st != GAAW_SUCCESS) goto out;
  ncclResult_t rr = ncclCommUserRank(impl->comm, &child->rank);
  if (rr == ncclSuccess) rr = ncclCommCount(impl->comm, &child->size);
  if (rr != ncclSuccess) {
    st = gaaw_nccl_error(ctx, rr, impl->comm, __FILE__, __LINE__, __func__, "ncclCommUserRank/ncclCommCount");
    gaaw_nccl_abort_all(ctx, child);
    goto out;
  }
  gaaw_nccl_watch_add(ctx, impl);
out:
  if (st != GAAW_SUCCESS) {
    if (impl->comm) ncclCommAbort(impl->comm);
    gaaw_nccl_free_ops(&impl->ops);
    gaaw_nccl_free_ops(&impl->spare);
    free(impl);
    child->impl = NULL;
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

static void nccl_destroy(gaaw_comm_t comm)
{
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
  if (!impl) return;
  gaaw_nccl_watch_remove(comm->ctx, impl);
  if (impl->comm && comm->aborted) {
    ncclCommAbort(impl->comm); /* after a failure: do not wait for peers */
  } else if (impl->comm) {
    /* Flush (the operations in flight end), then free; the finalisation is
     * non-blocking and bounded by the deadline (wait_ready aborts the communicator
     * when it passes). */
    ncclResult_t r = ncclCommFinalize(impl->comm);
    if ((r == ncclSuccess || r == ncclInProgress) &&
        gaaw_nccl_wait_ready(comm, gaaw_nccl_now(), "ncclCommFinalize") == GAAW_SUCCESS)
      ncclCommDestroy(impl->comm);
    else if (impl->comm)
      ncclCommAbort(impl->comm);
  }
  impl->comm = NULL;
  gaaw_nccl_free_ops(&impl->ops);
  gaaw_nccl_free_ops(&impl->spare);
  free(impl->pending);
  free(impl);
  comm->impl = NULL;
}

gaaw_status_t gaaw_nccl_comm_from_mpi(gaaw_comm_t mpi_comm, const char *name, gaaw_comm_t *nccl_comm)
{
  GAAW_ARG_NOT_NULL(NULL, mpi_comm);
  gaaw_context_t ctx = mpi_comm->ctx;
  GAAW_ARG_NOT_NULL(ctx, nccl_comm);
  *nccl_comm = NULL;
  MPI_Comm mc = gaaw_mpi_comm_handle(mpi_comm);
  GAAW_ARG_CHECK(ctx, mc != MPI_COMM_NULL, "mpi_comm (%s) is a %s communicator, not an MPI-backed one",
                 mpi_comm->name, mpi_comm->ops->name);
  GAAW_CHECK(require_cuda(ctx));
  gaaw_comm_t c = calloc(1, sizeof *c);
  if (!c) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a communicator");
  c->ctx = ctx;
  c->ops = &gaaw_nccl_comm_ops;
  c->control = MPI_COMM_NULL;
  snprintf(c->name, sizeof c->name, "%s", name ? name : mpi_comm->name);
  gaaw_status_t st = init_over_mpi(c, mc);
  if (st == GAAW_SUCCESS) st = gaaw_comm_attach_control(c, mc);
  if (st != GAAW_SUCCESS) {
    gaaw_comm_destroy(&c);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  *nccl_comm = c;
  return GAAW_SUCCESS;
}

const gaaw_comm_ops gaaw_nccl_comm_ops = {
  .name = "nccl",
  .create_world = nccl_create_world,
  .split = nccl_split,
  .destroy = nccl_destroy,
  .allreduce = gaaw_nccl_allreduce,
  .reduce_scatter = gaaw_nccl_reduce_scatter,
  .allgather = gaaw_nccl_allgather,
  .broadcast = gaaw_nccl_broadcast,
  .send = gaaw_nccl_send,
  .recv = gaaw_nccl_recv,
  .alltoall = gaaw_nccl_alltoall,
  .alltoallv = gaaw_nccl_alltoallv,
  .barrier = gaaw_nccl_barrier,
  .start = gaaw_nccl_start,
  .complete = gaaw_nccl_complete,
  .p2p_start = gaaw_nccl_p2p_start,
  .p2p_complete = gaaw_nccl_p2p_complete,
};
