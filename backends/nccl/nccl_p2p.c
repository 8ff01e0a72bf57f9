/* The NCCL backend's queueing on the communication stream and its point-to-point
 * operations: begin and finish, which frame every operation (checks, ordering after
 * the compute stream, the record and its event, the ending on the host); blocking
 * send and recv; and the started sends and receives, held until the first of them
 * is waited for or until the communicator's next operation, then queued as one
 * NCCL group. begin queues the held ones before anything else, hence both here.
 * Calls nccl_watch.c (see nccl_impl.h). */
#include <stdlib.h>

#include "backends/nccl/nccl_impl.h"

/* ---------------------------------------------------------------- begin and finish */

static gaaw_status_t flush_p2p(gaaw_comm_t comm);

/* Before queueing: what earlier operations have done is checked (errors, deadlines),
 * an operation record (with its event) is ready, and the communication stream
 * waits for the compute stream, so the send buffers are complete. */
gaaw_status_t gaaw_nccl_begin(gaaw_comm_t comm, cudaStream_t *s, nccl_op **op)
{
  gaaw_context_t ctx = comm->ctx;
  double start = gaaw_nccl_now();
  if (!gaaw_nccl_impl_of(comm)->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", comm->name);
  if (gaaw_nccl_impl_of(comm)->npending && !gaaw_nccl_impl_of(comm)->flushing)
    GAAW_CHECK(flush_p2p(comm)); /* started before this */
  GAAW_CHECK(gaaw_nccl_watch(ctx));
  if (!gaaw_nccl_impl_of(comm)->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", comm->name);
  GAAW_CHECK(gaaw_cuda_comm_after_compute(ctx));
  GAAW_CHECK(gaaw_nccl_take_op(comm, start, op));
  *s = gaaw_cuda_state_of(ctx)->comm;
  return GAAW_SUCCESS;
}

/* After queueing with result r: the enqueue finished (non-blocking communicators
 * may return ncclInProgress), the event recorded after the operation, then the
 * ending of kind `end`. Every failure aborts: the operation may be queued. */
gaaw_status_t gaaw_nccl_finish(gaaw_comm_t comm, nccl_op *op, ncclResult_t r, const char *what, end_kind end)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
  gaaw_cuda_state *cs = gaaw_cuda_state_of(ctx);
  gaaw_status_t st = GAAW_SUCCESS;
  op->what = what;
  if (r != ncclSuccess && r != ncclInProgress) {
    st = gaaw_nccl_error(ctx, r, impl->comm, __FILE__, __LINE__, __func__, what);
    gaaw_nccl_abort_all(ctx, comm);
    goto fail;
  }
  if (r == ncclInProgress && (st = gaaw_nccl_wait_ready(comm, op->start, what)) != GAAW_SUCCESS) goto fail;
  cudaError_t e = cudaEventRecord(op->done, cs->comm);
  if (e == cudaSuccess && end != END_REQUEST) e = cudaStreamWaitEvent(cs->compute, op->done, 0);
  if (e != cudaSuccess) {
    /* queued but not ordered: no one may use the communicator, or trust the buffers, again */
    st = gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaEventRecord/cudaStreamWaitEvent");
    gaaw_nccl_abort_all(ctx, comm);
    goto fail;
  }
  if (end == END_HOST) {
    st = gaaw_nccl_wait_op(comm, op);
    if (st != GAAW_SUCCESS) goto fail;
    if (impl->comm)
      gaaw_nccl_give_back_op(impl, op);
    else
      gaaw_nccl_drop_op(op);
    return GAAW_SUCCESS;
  }
  if (end == END_REQUEST) op->request = 1;
  op->linked = 1;
  op->next = impl->ops;
  impl->ops = op;
  return GAAW_SUCCESS;
fail:
  gaaw_nccl_drop_op(op);
  return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
}

/* ---------------------------------------------------------------- blocking send/recv */

gaaw_status_t gaaw_nccl_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  (void)tag; /* NCCL matches point-to-point by order, not by tag */
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(gaaw_nccl_begin(comm, &s, &rec));
  gaaw_nccl_used_by_comm(t);
  ncclResult_t r = ncclSend(gaaw_cuda_ptr(t), (size_t)gaaw_tensor_numel(t), gaaw_nccl_type(t->dtype), peer,
                            gaaw_nccl_impl_of(comm)->comm, s);
  GAAW_CHECK(gaaw_nccl_finish(comm, rec, r, "ncclSend", END_EVENT));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_nccl_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  (void)tag;
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(gaaw_nccl_begin(comm, &s, &rec));
  gaaw_nccl_used_by_comm(t);
  ncclResult_t r = ncclRecv(gaaw_cuda_ptr(t), (size_t)gaaw_tensor_numel(t), gaaw_nccl_type(t->dtype), peer,
                            gaaw_nccl_impl_of(comm)->comm, s);
  GAAW_CHECK(gaaw_nccl_finish(comm, rec, r, "ncclRecv", END_EVENT));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- started send/recv
 * Started sends and receives are held until the first of them is waited for, or
 * until the communicator's next operation; then all of them are queued as one NCCL
 * group (ncclGroupStart/End), so that a send to a peer and a receive from it, as a
 * pipeline exchange starts them, cannot block each other on the stream (ungrouped
 * NCCL point-to-point in both directions deadlocks). The group is one operation:
 * its event orders the compute stream after it, and its deadline and errors are
 * seen like those of the blocking operations (at the next NCCL call or host wait).
 * req->backend marks where a request stands. Compiled with CUDA here, not yet run on
 * a GPU. */
static char p2p_held, p2p_queued;

static gaaw_status_t flush_p2p(gaaw_comm_t comm)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
  cudaStream_t s;
  nccl_op *rec;
  impl->flushing = 1;
  gaaw_status_t st = gaaw_nccl_begin(comm, &s, &rec);
  impl->flushing = 0;
  int n = impl->npending;
  impl->npending = 0;
  if (st == GAAW_SUCCESS) {
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < n && r == ncclSuccess; i++) {
      gaaw_comm_request_t q = impl->pending[i];
      gaaw_tensor_t *t = q->op == GAAW_COMM_SEND ? &q->send : &q->recv;
      gaaw_nccl_used_by_comm(t);
      size_t count = (size_t)gaaw_tensor_numel(t);
      r = q->op == GAAW_COMM_SEND ? ncclSend(gaaw_cuda_ptr(t), count, gaaw_nccl_type(t->dtype), q->peer, impl->comm, s)
                                  : ncclRecv(gaaw_cuda_ptr(t), count, gaaw_nccl_type(t->dtype), q->peer, impl->comm, s);
    }
    ncclResult_t end = ncclGroupEnd();
    st = gaaw_nccl_finish(comm, rec, r != ncclSuccess ? r : end, "ncclSend/ncclRecv (pipeline exchange)", END_EVENT);
  }
  for (int i = 0; i < n; i++) {
    impl->pending[i]->backend = &p2p_queued;
    impl->pending[i]->status = st; /* each request of the group reports how it went */
  }
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_nccl_p2p_start(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
  if (!impl->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", comm->name);
  if (impl->npending == impl->pending_cap) {
    int cap = impl->pending_cap ? 2 * impl->pending_cap : 8;
    gaaw_comm_request_t *grown = realloc(impl->pending, (size_t)cap * sizeof *grown);
    if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold %d started sends and receives", cap);
    impl->pending = grown;
    impl->pending_cap = cap;
  }
  impl->pending[impl->npending++] = req;
  req->backend = &p2p_held;
  req->status = GAAW_SUCCESS;
  return GAAW_SUCCESS;
}

/* Drops req from the held ones (a cancel before anything was queued). */
static void unhold(nccl_impl *impl, gaaw_comm_request_t req)
{
  for (int i = 0; i < impl->npending; i++)
    if (impl->pending[i] == req) {
      impl->pending[i] = impl->pending[--impl->npending];
      return;
    }
}

gaaw_status_t gaaw_nccl_p2p_complete(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
  int held = req->backend == &p2p_held;
  req->backend = NULL;
  if (held && (!impl || !impl->comm)) {
    if (impl) unhold(impl, req);
    GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted before the %s was queued", comm->name,
              req->op == GAAW_COMM_SEND ? "send" : "receive");
  }
  if (held) GAAW_CHECK(flush_p2p(comm)); /* queues req with the others held */
  if (req->status != GAAW_SUCCESS) return gaaw_error_trace(ctx, req->status, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
