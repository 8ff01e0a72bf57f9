/* Point-to-point on the MPI backend: the user's send and recv, and the paired
 * exchange that the ring collectives are made of. */
#include "backends/mpi/mpi_impl.h"

/* Waits for point-to-point requests; on failure cancels and frees those still
 * active, so nothing waits on them later (a transfer already under way may still
 * complete into its buffer: the communicator is aborted and keeps its scratch). */
static gaaw_status_t wait_p2p(gaaw_comm_t comm, int n, MPI_Request *reqs, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_status_t st = gaaw_mpi_waitall(ctx, n, reqs, what);
  if (st != GAAW_SUCCESS) {
    for (int i = 0; i < n; i++)
      if (reqs[i] != MPI_REQUEST_NULL) {
        MPI_Cancel(&reqs[i]);
        MPI_Request_free(&reqs[i]);
      }
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_exchange(gaaw_comm_t comm, const void *sbuf, int64_t scount, int dst, void *rbuf,
                                int64_t rcount, int src, gaaw_dtype_t dtype, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  MPI_Comm mc = gaaw_mpi_impl_of(comm)->ring;
  int sc, rc;
  GAAW_CHECK(gaaw_mpi_count(comm, scount, &sc));
  GAAW_CHECK(gaaw_mpi_count(comm, rcount, &rc));
  MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  GAAW_MPI_CHECK(ctx, MPI_Irecv(rbuf, rc, gaaw_mpi_type(dtype), src, 0, mc, &reqs[0]));
  int err = MPI_Isend(sbuf, sc, gaaw_mpi_type(dtype), dst, 0, mc, &reqs[1]);
  if (err != MPI_SUCCESS) {
    MPI_Cancel(&reqs[0]);
    MPI_Request_free(&reqs[0]);
    return gaaw_mpi_status(ctx, err, __FILE__, __LINE__, __func__, "MPI_Isend");
  }
  GAAW_CHECK(wait_p2p(comm, 2, reqs, what));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  void *p;
  int count;
  GAAW_CHECK(gaaw_mpi_host_addr(comm, t, "send", &p));
  GAAW_CHECK(gaaw_mpi_count(comm, gaaw_tensor_numel(t), &count));
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Isend(p, count, gaaw_mpi_type(t->dtype), peer, tag, gaaw_mpi_impl_of(comm)->comm, &req));
  GAAW_CHECK(wait_p2p(comm, 1, &req, "send"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  void *p;
  int count;
  GAAW_CHECK(gaaw_mpi_host_addr(comm, t, "recv", &p));
  GAAW_CHECK(gaaw_mpi_count(comm, gaaw_tensor_numel(t), &count));
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Irecv(p, count, gaaw_mpi_type(t->dtype), peer, tag, gaaw_mpi_impl_of(comm)->comm, &req));
  GAAW_CHECK(wait_p2p(comm, 1, &req, "recv"));
  return GAAW_SUCCESS;
}
