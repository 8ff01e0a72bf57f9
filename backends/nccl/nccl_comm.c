/* The NCCL communicator backend (see nccl_comm.h): non-blocking communicators,
 * operations polled against the comm_timeout deadline, abort on expiry. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cuda/cuda.h"
#include "backends/mpi/mpi_handle.h"
#include "backends/runtime/abort.h"
#include "backends/nccl/nccl_comm.h"
#include "backends/runtime/runtime.h"

typedef struct {
  ncclComm_t comm; /* NULL once aborted */
} nccl_impl;

static nccl_impl *impl_of(gaaw_comm_t comm)
{
  return (nccl_impl *)comm->impl;
}

/* ---------------------------------------------------------------- errors and waiting */

/* GAAW_ERR_COMM with NCCL's text (and its last message for the communicator). */
static gaaw_status_t nccl_error(gaaw_context_t ctx, ncclResult_t r, ncclComm_t comm, const char *file, int line,
                                const char *func, const char *call)
{
  const char *last = ncclGetLastError(comm);
  return gaaw_error_raise(ctx, GAAW_ERR_COMM, file, line, func, "%s failed: %s%s%s", call, ncclGetErrorString(r),
                          last && *last ? ": " : "", last ? last : "");
}
#define NCCL_FAIL(ctx, r, comm, call) return nccl_error((ctx), (r), (comm), __FILE__, __LINE__, __func__, (call))

/* Aborts the NCCL communicator of comm (once): no rank may wait on it again. */
static void abort_comm(gaaw_comm_t comm)
{
  nccl_impl *impl = impl_of(comm);
  if (impl && impl->comm) {
    ncclCommAbort(impl->comm);
    impl->comm = NULL;
  }
  gaaw_comm_mark_aborted(comm);
}

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void pause_briefly(unsigned polls)
{
  /* Spin first (collectives take microseconds), then let other ranks have the core. */
  if (polls < 1000) return;
  struct timespec pause = {0, polls < 100000 ? 1000 : 100000};
  nanosleep(&pause, NULL);
}

/* One poll's checks, which abort the communicator when they fail: NCCL's
 * asynchronous state of c (in *state: ncclSuccess or ncclInProgress when it is
 * not an error), and, while there is still something to wait for (c in progress,
 * or stream_busy), the deadline counted from start. */
static gaaw_status_t poll_state(gaaw_comm_t comm, ncclComm_t c, double start, int stream_busy, const char *what,
                                ncclResult_t *state)
{
  gaaw_context_t ctx = comm->ctx;
  double timeout = ctx->comm_timeout;
  ncclResult_t r = ncclCommGetAsyncError(c, state);
  if (r != ncclSuccess) *state = r;
  if (*state != ncclSuccess && *state != ncclInProgress) {
    gaaw_status_t st = nccl_error(ctx, *state, c, __FILE__, __LINE__, __func__, what);
    abort_comm(comm);
    return st;
  }
  if (gaaw_context_check_live(ctx) != GAAW_SUCCESS) { /* another rank failed: this wait cannot end well */
    abort_comm(comm);
    return gaaw_error_trace(ctx, GAAW_ERR_COMM, __FILE__, __LINE__, __func__);
  }
  int waiting = stream_busy || *state == ncclInProgress;
  if (waiting && timeout > 0 && now() - start > timeout) {
    abort_comm(comm);
    GAAW_FAIL(ctx, GAAW_ERR_TIMEOUT, "%s on communicator %s did not complete within comm_timeout = %g s; the NCCL "
              "communicator was aborted", what, comm->name, timeout);
  }
  return GAAW_SUCCESS;
}

/* Polls until c has no operation in progress (initialisation, split, a call that
 * returned ncclInProgress); aborts on error or at the deadline. */
static gaaw_status_t wait_ready(gaaw_comm_t comm, ncclComm_t c, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  double start = now();
  for (unsigned polls = 0;; polls++) {
    ncclResult_t state;
    GAAW_CHECK(poll_state(comm, c, start, 0, what, &state));
    if (state == ncclSuccess) return GAAW_SUCCESS;
    pause_briefly(polls);
  }
}

/* Waits until ev has happened (or, with ev NULL, until the communication stream is
 * idle), watching NCCL's asynchronous errors and the deadline. */
static gaaw_status_t wait_stream(gaaw_comm_t comm, cudaEvent_t ev, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s = gaaw_cuda_state_of(ctx)->comm;
  double start = now();
  for (unsigned polls = 0;; polls++) {
    cudaError_t q = ev ? cudaEventQuery(ev) : cudaStreamQuery(s);
    if (q == cudaSuccess) return GAAW_SUCCESS;
    if (q != cudaErrorNotReady) {
      abort_comm(comm);
      return gaaw_cuda_error(ctx, q, __FILE__, __LINE__, __func__, what);
    }
    ncclResult_t state;
    GAAW_CHECK(poll_state(comm, impl_of(comm)->comm, start, 1, what, &state));
    pause_briefly(polls);
  }
}

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
  comm->impl = impl;
  comm->rank = rank;
  comm->size = size;
  ncclConfig_t config = nonblocking_config();
  ncclResult_t r = ncclCommInitRankConfig(&impl->comm, size, msg.id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    impl->comm = NULL;
    NCCL_FAIL(ctx, r, NULL, "ncclCommInitRankConfig");
  }
  GAAW_CHECK(wait_ready(comm, impl->comm, "NCCL communicator initialisation"));
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_create_world(gaaw_comm_t comm)
{
  GAAW_CHECK_CTX(comm->ctx, init_over_mpi(comm, comm->ctx->world));
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_split(gaaw_comm_t parent, int color, int key, gaaw_comm_t child)
{
  gaaw_context_t ctx = parent->ctx;
  GAAW_CHECK(require_cuda(ctx));
  nccl_impl *impl = calloc(1, sizeof *impl);
  if (!impl) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate NCCL communicator state");
  child->impl = impl;
  ncclConfig_t config = nonblocking_config();
  ncclResult_t r = ncclCommSplit(impl_of(parent)->comm, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, key, &impl->comm,
                                 &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    impl->comm = NULL;
    NCCL_FAIL(ctx, r, impl_of(parent)->comm, "ncclCommSplit");
  }
  /* A negative color leaves this rank out (NCCL returns no communicator). */
  if (!impl->comm) GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "color %d left this rank out of the split", color);
  GAAW_CHECK(wait_ready(child, impl->comm, "ncclCommSplit"));
  ncclResult_t rr = ncclCommUserRank(impl->comm, &child->rank);
  if (rr == ncclSuccess) rr = ncclCommCount(impl->comm, &child->size);
  if (rr != ncclSuccess) NCCL_FAIL(ctx, rr, impl->comm, "ncclCommUserRank/ncclCommCount");
  return GAAW_SUCCESS;
}

static void nccl_destroy(gaaw_comm_t comm)
{
  nccl_impl *impl = impl_of(comm);
  if (!impl) return;
  if (impl->comm && comm->aborted) {
    ncclCommAbort(impl->comm); /* after a failure: do not wait for peers */
  } else if (impl->comm) {
    /* Flush, then free; the finalisation is non-blocking and bounded by the deadline
     * (wait_ready aborts the communicator when it passes). */
    ncclResult_t r = ncclCommFinalize(impl->comm);
    if ((r == ncclSuccess || r == ncclInProgress) && wait_ready(comm, impl->comm, "ncclCommFinalize") == GAAW_SUCCESS)
      ncclCommDestroy(impl->comm);
    else if (impl->comm)
      ncclCommAbort(impl->comm);
  }
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

/* ---------------------------------------------------------------- operations */

static ncclDataType_t nccl_type(gaaw_dtype_t dtype)
{
  switch (dtype) {
  case GAAW_BF16: return ncclBfloat16;
  case GAAW_F16: return ncclFloat16;
  case GAAW_I32: return ncclInt32;
  default: return ncclFloat32;
  }
}

static ncclRedOp_t nccl_op(gaaw_reduce_op_t op)
{
  return op == GAAW_MAX ? ncclMax : ncclSum;
}

/* Before queueing: the communication stream waits for the compute stream, so the
 * send buffers are complete. */
static gaaw_status_t begin(gaaw_comm_t comm, cudaStream_t *s)
{
  gaaw_context_t ctx = comm->ctx;
  if (!impl_of(comm)->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", comm->name);
  GAAW_CHECK(gaaw_cuda_comm_after_compute(ctx));
  *s = gaaw_cuda_state_of(ctx)->comm;
  return GAAW_SUCCESS;
}

/* After queueing with result r: wait for the enqueue (non-blocking) and for the
 * stream, under the deadline. */
static gaaw_status_t finish(gaaw_comm_t comm, ncclResult_t r, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  if (r != ncclSuccess && r != ncclInProgress) {
    gaaw_status_t st = nccl_error(ctx, r, impl_of(comm)->comm, __FILE__, __LINE__, __func__, what);
    abort_comm(comm);
    return st;
  }
  if (r == ncclInProgress) GAAW_CHECK(wait_ready(comm, impl_of(comm)->comm, what));
  GAAW_CHECK(wait_stream(comm, NULL, what));
  return GAAW_SUCCESS;
}

/* Queues one of the three collectives of a request on stream s. */
static ncclResult_t queue_collective(gaaw_comm_t comm, gaaw_comm_op_t op, const gaaw_tensor_t *send,
                                     gaaw_tensor_t *recv, gaaw_reduce_op_t reduce, cudaStream_t s)
{
  ncclComm_t c = impl_of(comm)->comm;
  size_t n = (size_t)gaaw_tensor_numel(recv);
  ncclDataType_t type = nccl_type(recv->dtype);
  switch (op) {
  case GAAW_COMM_ALLREDUCE: return ncclAllReduce(gaaw_cuda_ptr(send), gaaw_cuda_ptr(recv), n, type, nccl_op(reduce), c, s);
  case GAAW_COMM_REDUCE_SCATTER:
    return ncclReduceScatter(gaaw_cuda_ptr(send), gaaw_cuda_ptr(recv), n, type, nccl_op(reduce), c, s);
  case GAAW_COMM_ALLGATHER:
    return ncclAllGather(gaaw_cuda_ptr(send), gaaw_cuda_ptr(recv), (size_t)gaaw_tensor_numel(send), type, c, s);
  default: return ncclInvalidArgument;
  }
}

/* A blocking collective: queued, then waited for. */
static gaaw_status_t run_collective(gaaw_comm_t comm, gaaw_comm_op_t op, const gaaw_tensor_t *send,
                                    gaaw_tensor_t *recv, gaaw_reduce_op_t reduce)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  GAAW_CHECK(begin(comm, &s));
  GAAW_CHECK(finish(comm, queue_collective(comm, op, send, recv, reduce, s), gaaw_comm_op_name(op)));
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_allreduce(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                    gaaw_reduce_op_t op)
{
  return run_collective(comm, GAAW_COMM_ALLREDUCE, send, recv, op);
}

static gaaw_status_t nccl_reduce_scatter(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                         gaaw_reduce_op_t op)
{
  return run_collective(comm, GAAW_COMM_REDUCE_SCATTER, send, recv, op);
}

static gaaw_status_t nccl_allgather(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
{
  return run_collective(comm, GAAW_COMM_ALLGATHER, send, recv, GAAW_SUM);
}

/* Non-blocking: queued behind the compute stream's work, with an event recorded
 * after it on the communication stream; the wait polls the event under the
 * deadline and makes the compute stream wait for it. */
static gaaw_status_t nccl_start(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  GAAW_CHECK(begin(comm, &s));
  cudaEvent_t ev; /* made first: once the collective is queued, nothing may fail quietly */
  GAAW_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  const char *what = gaaw_comm_op_name(req->op);
  ncclResult_t r = queue_collective(comm, req->op, &req->send, &req->recv, req->reduce, s);
  gaaw_status_t st = GAAW_SUCCESS;
  if (r != ncclSuccess && r != ncclInProgress) {
    st = nccl_error(ctx, r, impl_of(comm)->comm, __FILE__, __LINE__, __func__, what);
    abort_comm(comm);
  }
  if (st == GAAW_SUCCESS && r == ncclInProgress) st = wait_ready(comm, impl_of(comm)->comm, what);
  if (st == GAAW_SUCCESS) {
    cudaError_t e = cudaEventRecord(ev, s);
    if (e != cudaSuccess) {
      /* the collective is queued but cannot be waited for: no one may use the
       * communicator, or trust the buffers, again */
      abort_comm(comm);
      st = gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaEventRecord");
    }
  }
  if (st != GAAW_SUCCESS) {
    cudaEventDestroy(ev);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  req->backend = ev;
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_complete(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  cudaEvent_t ev = req->backend;
  req->backend = NULL;
  gaaw_status_t st = GAAW_SUCCESS;
  if (!impl_of(comm)->comm)
    st = gaaw_error_raise(ctx, GAAW_ERR_COMM, __FILE__, __LINE__, __func__, "NCCL communicator %s was aborted",
                          comm->name);
  if (st == GAAW_SUCCESS) st = wait_stream(comm, ev, gaaw_comm_op_name(req->op));
  if (st == GAAW_SUCCESS) {
    cudaError_t e = cudaStreamWaitEvent(gaaw_cuda_state_of(ctx)->compute, ev, 0);
    if (e != cudaSuccess) st = gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaStreamWaitEvent");
  }
  cudaEventDestroy(ev);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_broadcast(gaaw_comm_t comm, gaaw_tensor_t *t, int root)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  GAAW_CHECK(begin(comm, &s));
  void *p = gaaw_cuda_ptr(t);
  ncclResult_t r = ncclBroadcast(p, p, (size_t)gaaw_tensor_numel(t), nccl_type(t->dtype), root, impl_of(comm)->comm, s);
  GAAW_CHECK(finish(comm, r, "ncclBroadcast"));
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  (void)tag; /* NCCL matches point-to-point by order, not by tag */
  cudaStream_t s;
  GAAW_CHECK(begin(comm, &s));
  ncclResult_t r = ncclSend(gaaw_cuda_ptr(t), (size_t)gaaw_tensor_numel(t), nccl_type(t->dtype), peer,
                            impl_of(comm)->comm, s);
  GAAW_CHECK(finish(comm, r, "ncclSend"));
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  (void)tag;
  cudaStream_t s;
  GAAW_CHECK(begin(comm, &s));
  ncclResult_t r = ncclRecv(gaaw_cuda_ptr(t), (size_t)gaaw_tensor_numel(t), nccl_type(t->dtype), peer,
                            impl_of(comm)->comm, s);
  GAAW_CHECK(finish(comm, r, "ncclRecv"));
  return GAAW_SUCCESS;
}

/* Block j of send to member j, block i of recv from member i, as one NCCL group. */
static gaaw_status_t nccl_alltoall(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  GAAW_CHECK(begin(comm, &s));
  size_t block = (size_t)gaaw_tensor_numel(send) / (size_t)comm->size;
  size_t bytes = block * gaaw_dtype_size(send->dtype);
  ncclDataType_t type = nccl_type(send->dtype);
  ncclComm_t c = impl_of(comm)->comm;
  ncclResult_t r = ncclGroupStart();
  for (int p = 0; p < comm->size && r == ncclSuccess; p++) {
    r = ncclSend((const char *)gaaw_cuda_ptr(send) + p * bytes, block, type, p, c, s);
    if (r == ncclSuccess) r = ncclRecv((char *)gaaw_cuda_ptr(recv) + p * bytes, block, type, p, c, s);
  }
  ncclResult_t end = ncclGroupEnd();
  GAAW_CHECK(finish(comm, r != ncclSuccess ? r : end, "ncclSend/ncclRecv (all-to-all)"));
  return GAAW_SUCCESS;
}

/* An all-reduce of one device integer. */
static gaaw_status_t nccl_barrier(gaaw_comm_t comm)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_buffer_t buf = NULL;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, sizeof(int32_t), GAAW_MEM_COMMUNICATION, &buf));
  cudaStream_t s;
  gaaw_status_t st = begin(comm, &s);
  if (st == GAAW_SUCCESS)
    st = finish(comm, ncclAllReduce(buf->handle, buf->handle, 1, ncclInt32, ncclSum, impl_of(comm)->comm, s),
                "ncclAllReduce (barrier)");
  /* After an abort the buffer is abandoned: a late peer's data may still land in it. */
  if (impl_of(comm)->comm) gaaw_buffer_free(ctx, &buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

const gaaw_comm_ops gaaw_nccl_comm_ops = {
  .name = "nccl",
  .create_world = nccl_create_world,
  .split = nccl_split,
  .destroy = nccl_destroy,
  .allreduce = nccl_allreduce,
  .reduce_scatter = nccl_reduce_scatter,
  .allgather = nccl_allgather,
  .broadcast = nccl_broadcast,
  .send = nccl_send,
  .recv = nccl_recv,
  .alltoall = nccl_alltoall,
  .barrier = nccl_barrier,
  .start = nccl_start,
  .complete = nccl_complete,
};
