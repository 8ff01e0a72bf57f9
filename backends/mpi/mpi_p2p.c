/* Point-to-point on the MPI backend: the user's send and recv, and the paired
 * exchange that the ring collectives are made of. */
#include <stdio.h>
#include <stdlib.h>

#include "backends/mpi/mpi_impl.h"

/* Cancels and frees the point-to-point requests still active (after a failure). */
static void drop_p2p(int n, MPI_Request *reqs)
{
  for (int i = 0; i < n; i++)
    if (reqs[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&reqs[i]);
      MPI_Request_free(&reqs[i]);
    }
}

/* Waits for point-to-point requests; on failure cancels and frees those still
 * active, so nothing waits on them later (a transfer already under way may still
 * complete into its buffer: the communicator is aborted and keeps its scratch). */
static gaaw_status_t wait_p2p(gaaw_comm_t comm, int n, MPI_Request *reqs, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_status_t st = gaaw_mpi_waitall(ctx, n, reqs, what);
  if (st != GAAW_SUCCESS) {
    drop_p2p(n, reqs);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_exchange(gaaw_comm_t comm, const void *sbuf, int64_t scount, int dst, void *rbuf,
                                int64_t rcount, int src, gaaw_dtype_t dtype, gaaw_mpi_segment_fn on_segment,
                                void *arg, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  MPI_Comm mc = gaaw_mpi_impl_of(comm)->ring;
  MPI_Datatype type = gaaw_mpi_type(dtype);
  const size_t es = gaaw_dtype_size(dtype);
  int ns = gaaw_mpi_segments(scount, dtype), nr = gaaw_mpi_segments(rcount, dtype), c;
  GAAW_CHECK(gaaw_mpi_count(comm, scount, &c)); /* so every segment fits too */
  GAAW_CHECK(gaaw_mpi_count(comm, rcount, &c));
  MPI_Request reqs[2 * GAAW_MPI_MAX_SEGMENTS]; /* receives, then sends */
  for (int i = 0; i < 2 * GAAW_MPI_MAX_SEGMENTS; i++) reqs[i] = MPI_REQUEST_NULL;
  int err = MPI_SUCCESS;
  const char *call = "MPI_Irecv";
  for (int j = 0; j < nr && err == MPI_SUCCESS; j++) {
    int64_t off, cnt;
    gaaw_mpi_block(rcount, nr, j, &off, &cnt);
    err = MPI_Irecv((char *)rbuf + (size_t)off * es, (int)cnt, type, src, j, mc, &reqs[j]);
  }
  for (int j = 0; j < ns && err == MPI_SUCCESS; j++) {
    int64_t off, cnt;
    gaaw_mpi_block(scount, ns, j, &off, &cnt);
    call = "MPI_Isend";
    err = MPI_Isend((const char *)sbuf + (size_t)off * es, (int)cnt, type, dst, j, mc, &reqs[GAAW_MPI_MAX_SEGMENTS + j]);
  }
  if (err != MPI_SUCCESS) {
    drop_p2p(2 * GAAW_MPI_MAX_SEGMENTS, reqs);
    return gaaw_mpi_status(ctx, err, __FILE__, __LINE__, __func__, call);
  }
  /* Segment j is handed on while the later ones are still arriving. */
  for (int j = 0; j < nr; j++) {
    gaaw_status_t st = gaaw_mpi_wait(ctx, &reqs[j], what);
    if (st != GAAW_SUCCESS) {
      drop_p2p(2 * GAAW_MPI_MAX_SEGMENTS, reqs);
      return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
    }
    if (on_segment) {
      int64_t off, cnt;
      gaaw_mpi_block(rcount, nr, j, &off, &cnt);
      on_segment(arg, off, cnt);
    }
  }
  GAAW_CHECK(wait_p2p(comm, ns, reqs + GAAW_MPI_MAX_SEGMENTS, what));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_host_send(gaaw_comm_t comm, const void *p, int64_t n, gaaw_dtype_t dtype, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  int count;
  GAAW_CHECK(gaaw_mpi_count(comm, n, &count));
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Isend(p, count, gaaw_mpi_type(dtype), peer, tag, gaaw_mpi_impl_of(comm)->comm, &req));
  GAAW_CHECK(wait_p2p(comm, 1, &req, "send"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_host_recv(gaaw_comm_t comm, void *p, int64_t n, gaaw_dtype_t dtype, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  int count;
  GAAW_CHECK(gaaw_mpi_count(comm, n, &count));
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Irecv(p, count, gaaw_mpi_type(dtype), peer, tag, gaaw_mpi_impl_of(comm)->comm, &req));
  GAAW_CHECK(wait_p2p(comm, 1, &req, "recv"));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- non-blocking */

/* A posted send or receive: its MPI request and, for a device tensor, the host
 * copy it moves through (its own: several may be in flight at once). */
typedef struct {
  MPI_Request req;
  gaaw_mpi_host_block stage;
} mpi_p2p;

static gaaw_status_t post(gaaw_comm_t comm, gaaw_comm_request_t r, mpi_p2p *p)
{
  gaaw_context_t ctx = comm->ctx;
  int sending = r->op == GAAW_COMM_SEND;
  const gaaw_tensor_t *t = sending ? &r->send : &r->recv;
  size_t bytes = (size_t)gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype);
  int count;
  GAAW_CHECK(gaaw_mpi_count(comm, gaaw_tensor_numel(t), &count));
  void *host = gaaw_mpi_host_addr(t);
  if (!host) {
    GAAW_CHECK(gaaw_mpi_host_reserve(comm, &p->stage, bytes, &host));
    if (sending) GAAW_CHECK(gaaw_buffer_read(ctx, t->buf, t->offset, host, bytes));
  }
  MPI_Comm mc = gaaw_mpi_impl_of(comm)->comm;
  MPI_Datatype type = gaaw_mpi_type(t->dtype);
  if (sending)
    GAAW_MPI_CHECK(ctx, MPI_Isend(host, count, type, r->peer, r->tag, mc, &p->req));
  else
    GAAW_MPI_CHECK(ctx, MPI_Irecv(host, count, type, r->peer, r->tag, mc, &p->req));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_p2p_start(gaaw_comm_t comm, gaaw_comm_request_t r)
{
  gaaw_context_t ctx = comm->ctx;
  mpi_p2p *p = calloc(1, sizeof *p);
  if (!p) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a send/recv record");
  p->req = MPI_REQUEST_NULL;
  gaaw_status_t st = post(comm, r, p);
  if (st != GAAW_SUCCESS) {
    gaaw_mpi_host_release(&p->stage);
    free(p);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  r->backend = p;
  return GAAW_SUCCESS;
}

/* MPI_Test completes a finished request and sets it to MPI_REQUEST_NULL, which
 * p2p_complete's wait then passes at once; a failure is reported there. */
int gaaw_mpi_p2p_test(gaaw_comm_t comm, gaaw_comm_request_t r)
{
  (void)comm;
  mpi_p2p *p = r->backend;
  if (!p || p->req == MPI_REQUEST_NULL) return 1;
  int done = 0;
  if (MPI_Test(&p->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 1;
  return done;
}

gaaw_status_t gaaw_mpi_p2p_complete(gaaw_comm_t comm, gaaw_comm_request_t r)
{
  gaaw_context_t ctx = comm->ctx;
  mpi_p2p *p = r->backend;
  r->backend = NULL;
  char what[96];
  snprintf(what, sizeof what, "the %s rank %d (tag %d) on communicator %s",
           r->op == GAAW_COMM_SEND ? "send to" : "receive from", r->peer, r->tag, comm->name);
  gaaw_status_t st = wait_p2p(comm, 1, &p->req, what);
  /* a staged receive lands in the device tensor now */
  if (st == GAAW_SUCCESS && r->op == GAAW_COMM_RECV && p->stage.p)
    st = gaaw_buffer_write(ctx, r->recv.buf, r->recv.offset, p->stage.p,
                           (size_t)gaaw_tensor_numel(&r->recv) * gaaw_dtype_size(r->recv.dtype));
  /* after a failure a late message may still land in the copy: it is abandoned */
  if (st == GAAW_SUCCESS) gaaw_mpi_host_release(&p->stage);
  free(p);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
