/* The NCCL backend's collectives: all-reduce, reduce-scatter and all-gather, blocking
 * or started (a request, completed by gaaw_comm_wait), broadcast, all-to-all (in
 * place too) and barrier, each queued on the communication stream between
 * gaaw_nccl_begin and gaaw_nccl_finish. Calls nccl_p2p.c and nccl_watch.c (see
 * nccl_impl.h). */
#include <stdint.h>

#include "backends/nccl/nccl_impl.h"

/* Queues one of the three collectives of a request on stream s. */
static ncclResult_t queue_collective(gaaw_comm_t comm, gaaw_comm_op_t op, const gaaw_tensor_t *send,
                                     gaaw_tensor_t *recv, gaaw_reduce_op_t reduce, cudaStream_t s)
{
  ncclComm_t c = gaaw_nccl_impl_of(comm)->comm;
  size_t n = (size_t)gaaw_tensor_numel(recv);
  ncclDataType_t type = gaaw_nccl_type(recv->dtype);
  gaaw_nccl_used_by_comm(send);
  gaaw_nccl_used_by_comm(recv);
  switch (op) {
  case GAAW_COMM_ALLREDUCE:
    return ncclAllReduce(gaaw_cuda_ptr(send), gaaw_cuda_ptr(recv), n, type, gaaw_nccl_reduction(reduce), c, s);
  case GAAW_COMM_REDUCE_SCATTER:
    return ncclReduceScatter(gaaw_cuda_ptr(send), gaaw_cuda_ptr(recv), n, type, gaaw_nccl_reduction(reduce), c, s);
  case GAAW_COMM_ALLGATHER:
    return ncclAllGather(gaaw_cuda_ptr(send), gaaw_cuda_ptr(recv), (size_t)gaaw_tensor_numel(send), type, c, s);
  default: return ncclInvalidArgument;
  }
}

/* A blocking collective: queued, and ordered before the compute stream's next work. */
static gaaw_status_t run_collective(gaaw_comm_t comm, gaaw_comm_op_t op, const gaaw_tensor_t *send,
                                    gaaw_tensor_t *recv, gaaw_reduce_op_t reduce)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(gaaw_nccl_begin(comm, &s, &rec));
  GAAW_CHECK(gaaw_nccl_finish(comm, rec, queue_collective(comm, op, send, recv, reduce, s), gaaw_comm_op_name(op),
                              END_EVENT));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_nccl_allreduce(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                  gaaw_reduce_op_t op)
{
  return run_collective(comm, GAAW_COMM_ALLREDUCE, send, recv, op);
}

gaaw_status_t gaaw_nccl_reduce_scatter(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                       gaaw_reduce_op_t op)
{
  return run_collective(comm, GAAW_COMM_REDUCE_SCATTER, send, recv, op);
}

gaaw_status_t gaaw_nccl_allgather(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
{
  return run_collective(comm, GAAW_COMM_ALLGATHER, send, recv, GAAW_SUM);
}

/* Non-blocking: queued behind the compute stream's work, with an event recorded
 * after it; the wait makes the compute stream wait for the event (the host learns
 * of the end, an error or the deadline later, as for blocking operations). */
gaaw_status_t gaaw_nccl_start(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(gaaw_nccl_begin(comm, &s, &rec));
  ncclResult_t r = queue_collective(comm, req->op, &req->send, &req->recv, req->reduce, s);
  GAAW_CHECK(gaaw_nccl_finish(comm, rec, r, gaaw_comm_op_name(req->op), END_REQUEST));
  req->backend = rec;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_nccl_complete(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
  nccl_op *op = req->backend;
  req->backend = NULL;
  gaaw_status_t st = GAAW_SUCCESS;
  if (!impl || !impl->comm || !op->done) {
    st = gaaw_error_raise(ctx, GAAW_ERR_COMM, __FILE__, __LINE__, __func__, "NCCL communicator %s was aborted",
                          comm->name);
  } else {
    cudaError_t e = cudaStreamWaitEvent(gaaw_cuda_state_of(ctx)->compute, op->done, 0);
    if (e != cudaSuccess) {
      st = gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaStreamWaitEvent");
      gaaw_nccl_abort_all(ctx, comm);
    }
  }
  op->request = 0;
  if (!op->linked) { /* seen done by watch, or dropped by an abort */
    if (op->done && impl && impl->comm)
      gaaw_nccl_give_back_op(impl, op);
    else
      gaaw_nccl_drop_op(op);
  } /* else it stays in flight: watch hands it back once done */
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_nccl_broadcast(gaaw_comm_t comm, gaaw_tensor_t *t, int root)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(gaaw_nccl_begin(comm, &s, &rec));
  void *p = gaaw_cuda_ptr(t);
  gaaw_nccl_used_by_comm(t);
  ncclResult_t r = ncclBroadcast(p, p, (size_t)gaaw_tensor_numel(t), gaaw_nccl_type(t->dtype), root,
                                 gaaw_nccl_impl_of(comm)->comm, s);
  GAAW_CHECK(gaaw_nccl_finish(comm, rec, r, "ncclBroadcast", END_EVENT));
  return GAAW_SUCCESS;
}

/* Block j of send to member j, block i of recv from member i, as one NCCL group.
 * In place (send is recv, which comm.c allows), the receive into block p would
 * race with the send reading block p: send is first copied to scratch on the
 * communication stream, and the scratch returned to the allocator, which keeps it
 * until the stream is past the all-to-all. */
gaaw_status_t gaaw_nccl_alltoall(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
{
  gaaw_context_t ctx = comm->ctx;
  size_t block = (size_t)gaaw_tensor_numel(send) / (size_t)comm->size;
  size_t bytes = block * gaaw_dtype_size(send->dtype);
  const char *src = gaaw_cuda_ptr(send);
  gaaw_buffer_t scratch = NULL;
  if (send->buf == recv->buf && send->offset == recv->offset && bytes > 0) {
    GAAW_CHECK(gaaw_buffer_alloc(ctx, bytes * (size_t)comm->size, GAAW_MEM_COMMUNICATION, &scratch));
    gaaw_buffer_use_on_stream(scratch, GAAW_STREAM_COMM);
  }
  cudaStream_t s;
  nccl_op *rec = NULL;
  gaaw_status_t st = gaaw_nccl_begin(comm, &s, &rec);
  if (st != GAAW_SUCCESS) goto out;
  if (scratch) {
    cudaError_t e = cudaMemcpyAsync(scratch->handle, src, bytes * (size_t)comm->size, cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess) {
      st = gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaMemcpyAsync (all-to-all staging)");
      gaaw_nccl_drop_op(rec);
      goto out;
    }
    src = scratch->handle;
  }
  gaaw_nccl_used_by_comm(send);
  gaaw_nccl_used_by_comm(recv);
  ncclDataType_t type = gaaw_nccl_type(send->dtype);
  ncclComm_t c = gaaw_nccl_impl_of(comm)->comm;
  ncclResult_t r = ncclGroupStart();
  for (int p = 0; p < comm->size && r == ncclSuccess; p++) {
    r = ncclSend(src + p * bytes, block, type, p, c, s);
    if (r == ncclSuccess) r = ncclRecv((char *)gaaw_cuda_ptr(recv) + p * bytes, block, type, p, c, s);
  }
  ncclResult_t end = ncclGroupEnd();
  st = gaaw_nccl_finish(comm, rec, r != ncclSuccess ? r : end, "ncclSend/ncclRecv (all-to-all)", END_EVENT);
out:
  gaaw_buffer_free(ctx, &scratch);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* An all-reduce of one device integer, waited for on the host: when it returns,
 * every member has reached it. */
gaaw_status_t gaaw_nccl_barrier(gaaw_comm_t comm)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_buffer_t buf = NULL;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, sizeof(int32_t), GAAW_MEM_COMMUNICATION, &buf));
  gaaw_buffer_use_on_stream(buf, GAAW_STREAM_COMM);
  cudaStream_t s;
  nccl_op *rec;
  gaaw_status_t st = gaaw_nccl_begin(comm, &s, &rec);
  if (st == GAAW_SUCCESS) {
    ncclComm_t c = gaaw_nccl_impl_of(comm)->comm;
    st = gaaw_nccl_finish(comm, rec, ncclAllReduce(buf->handle, buf->handle, 1, ncclInt32, ncclSum, c, s),
                          "ncclAllReduce (barrier)", END_HOST);
  }
  /* After an abort the buffer is abandoned: a late peer's data may still land in it. */
  if (gaaw_nccl_impl_of(comm)->comm) gaaw_buffer_free(ctx, &buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Block j (send_counts[j] elements) of send to member j, recv_counts[i] from member i,
 * as one NCCL group of sends and receives; empty blocks are skipped. comm.c refuses
 * overlapping send and recv, so no staging is needed. */
gaaw_status_t gaaw_nccl_alltoallv(gaaw_comm_t comm, const gaaw_tensor_t *send, const int64_t *send_counts,
                                  gaaw_tensor_t *recv, const int64_t *recv_counts)
{
  gaaw_context_t ctx = comm->ctx;
  size_t es = gaaw_dtype_size(send->dtype);
  cudaStream_t s;
  nccl_op *rec = NULL;
  GAAW_CHECK(gaaw_nccl_begin(comm, &s, &rec));
  gaaw_nccl_used_by_comm(send);
  gaaw_nccl_used_by_comm(recv);
  ncclDataType_t type = gaaw_nccl_type(send->dtype);
  ncclComm_t c = gaaw_nccl_impl_of(comm)->comm;
  const char *src = gaaw_cuda_ptr(send);
  char *dst = gaaw_cuda_ptr(recv);
  ncclResult_t r = ncclGroupStart();
  for (int64_t p = 0, so = 0, ro = 0; p < comm->size && r == ncclSuccess; p++) {
    if (send_counts[p] > 0) r = ncclSend(src + (size_t)so * es, (size_t)send_counts[p], type, (int)p, c, s);
    if (r == ncclSuccess && recv_counts[p] > 0)
      r = ncclRecv(dst + (size_t)ro * es, (size_t)recv_counts[p], type, (int)p, c, s);
    so += send_counts[p], ro += recv_counts[p];
  }
  ncclResult_t end = ncclGroupEnd();
  GAAW_CHECK(gaaw_nccl_finish(comm, rec, r != ncclSuccess ? r : end, "ncclSend/ncclRecv (alltoallv)", END_EVENT));
  return GAAW_SUCCESS;
}
