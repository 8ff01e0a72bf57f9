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

/* An operation queued on the communication stream: its event happens when it is
 * done. Blocking operations return once the event is recorded and the compute
 * stream waits on it; the host learns of the end (or of a deadline passing, or an
 * asynchronous error) when it next polls: at the next NCCL call, or in the CUDA
 * backend's host waits (synchronize, buffer reads and writes), through watch. */
typedef struct nccl_op {
  cudaEvent_t done;
  double start;      /* when the call began: its deadline is start + comm_timeout */
  const char *what;
  int linked;        /* in its communicator's list of operations in flight */
  int request;       /* owned by a started request until gaaw_comm_wait completes it */
  struct nccl_op *next;
} nccl_op;

typedef struct nccl_impl {
  ncclComm_t comm;   /* NULL once aborted */
  gaaw_comm_t owner;
  nccl_op *ops;      /* in flight (queued, not yet seen done) */
  nccl_op *spare;    /* done, kept with their events for the next operations */
  int watched;       /* in the context's list of live communicators */
  struct nccl_impl *next_live;
  gaaw_comm_request_t *pending; /* started sends and receives not yet queued (see flush_p2p) */
  int npending, pending_cap;
  int flushing;
} nccl_impl;

/* The context's live NCCL communicators (in the CUDA state's nccl_watch). */
typedef struct {
  nccl_impl *live;
} nccl_watch;

static nccl_impl *impl_of(gaaw_comm_t comm)
{
  return (nccl_impl *)comm->impl;
}

/* ---------------------------------------------------------------- errors and aborts */

/* GAAW_ERR_COMM with NCCL's text (and its last message for the communicator). */
static gaaw_status_t nccl_error(gaaw_context_t ctx, ncclResult_t r, ncclComm_t comm, const char *file, int line,
                                const char *func, const char *call)
{
  const char *last = ncclGetLastError(comm);
  return gaaw_error_raise(ctx, GAAW_ERR_COMM, file, line, func, "%s failed: %s%s%s", call, ncclGetErrorString(r),
                          last && *last ? ": " : "", last ? last : "");
}
#define NCCL_FAIL(ctx, r, comm, call) return nccl_error((ctx), (r), (comm), __FILE__, __LINE__, __func__, (call))

/* Frees one operation record that is in no list, with its event. */
static void drop_op(nccl_op *op)
{
  if (op->done) cudaEventDestroy(op->done); /* one still pending is released once it happens */
  free(op);
}

static void free_ops(nccl_op **list)
{
  while (*list) {
    nccl_op *op = *list;
    *list = op->next;
    op->linked = 0;
    if (op->done) cudaEventDestroy(op->done); /* one still pending is released once it happens */
    op->done = NULL;
    if (!op->request) free(op); /* a request's op is freed by its completion */
  }
}

/* Aborts the NCCL communicator of comm (once): no rank may wait on it again. Its
 * operations in flight are dropped (ncclCommAbort ends them). */
static void abort_one(gaaw_comm_t comm)
{
  nccl_impl *impl = impl_of(comm);
  if (impl && impl->comm) {
    ncclCommAbort(impl->comm);
    impl->comm = NULL;
  }
  if (impl) {
    free_ops(&impl->ops);
    free_ops(&impl->spare);
  }
  gaaw_comm_mark_aborted(comm);
}

static nccl_watch *watch_of(gaaw_context_t ctx)
{
  return (nccl_watch *)gaaw_cuda_state_of(ctx)->nccl_watch;
}

/* After a failure of first (NULL: of another rank): first, then every other NCCL
 * communicator of the context is aborted. They share the communication stream, so
 * one stuck collective holds back all the others, and the context is aborted
 * anyway (gaaw_comm_mark_aborted): no communicator may be used again. */
static void abort_all(gaaw_context_t ctx, gaaw_comm_t first)
{
  if (first) abort_one(first);
  nccl_watch *w = watch_of(ctx);
  for (nccl_impl *i = w ? w->live : NULL; i; i = i->next_live)
    if (i->comm) abort_one(i->owner);
}

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int past_deadline(gaaw_context_t ctx, double start)
{
  return ctx->comm_timeout > 0 && now() - start > ctx->comm_timeout;
}

/* The checks of every poll of comm, which abort on failure: NCCL's asynchronous
 * state (in *state: ncclSuccess or ncclInProgress when it is not an error), and
 * whether another rank has failed. */
static gaaw_status_t check_async(gaaw_comm_t comm, const char *what, ncclResult_t *state)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = impl_of(comm);
  if (!impl->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", comm->name);
  ncclResult_t r = ncclCommGetAsyncError(impl->comm, state);
  if (r != ncclSuccess) *state = r;
  if (*state != ncclSuccess && *state != ncclInProgress) {
    gaaw_status_t st = nccl_error(ctx, *state, impl->comm, __FILE__, __LINE__, __func__, what);
    abort_all(ctx, comm);
    return st;
  }
  if (gaaw_context_check_live(ctx) != GAAW_SUCCESS) { /* another rank failed: this wait cannot end well */
    abort_all(ctx, comm);
    return gaaw_error_trace(ctx, GAAW_ERR_COMM, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t timed_out(gaaw_comm_t comm, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_status_t st = gaaw_error_raise(ctx, GAAW_ERR_TIMEOUT, __FILE__, __LINE__, __func__,
                                      "%s on communicator %s did not complete within comm_timeout = %g s; the NCCL "
                                      "communicators of this rank were aborted", what, comm->name, ctx->comm_timeout);
  abort_all(ctx, comm);
  return st;
}

/* Polls until comm has no operation in progress (initialisation, split, a call
 * that returned ncclInProgress), under the deadline of the call that began at
 * start (one deadline for all its phases); aborts on error or at the deadline. */
static gaaw_status_t wait_ready(gaaw_comm_t comm, double start, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  for (unsigned polls = 0;; polls++) {
    ncclResult_t state;
    GAAW_CHECK(check_async(comm, what, &state));
    if (state == ncclSuccess) return GAAW_SUCCESS;
    if (past_deadline(ctx, start)) return timed_out(comm, what);
    gaaw_cuda_pause(polls);
  }
}

/* ---------------------------------------------------------------- operations in flight */

/* Done operations leave the lists; one past its deadline, or an error, aborts.
 * Among the operations past their deadline the oldest is the stuck one (the
 * others queue behind it on the one communication stream): the error names it. */
static gaaw_status_t watch(gaaw_context_t ctx)
{
  nccl_watch *w = watch_of(ctx);
  nccl_impl *stuck = NULL;
  nccl_op *stuck_op = NULL;
  for (nccl_impl *impl = w ? w->live : NULL; impl; impl = impl->next_live) {
    if (!impl->comm) continue;
    ncclResult_t state;
    GAAW_CHECK(check_async(impl->owner, "an NCCL operation in flight", &state));
    for (nccl_op **p = &impl->ops; *p;) {
      nccl_op *op = *p;
      cudaError_t q = gaaw_cuda_poll(cudaEventQuery(op->done));
      if (q == cudaSuccess) {
        *p = op->next;
        op->linked = 0;
        if (!op->request) {
          op->next = impl->spare;
          impl->spare = op;
        }
        continue;
      }
      if (q != cudaErrorNotReady) {
        gaaw_status_t st = gaaw_cuda_error(ctx, q, __FILE__, __LINE__, __func__, op->what);
        abort_all(ctx, impl->owner);
        return st;
      }
      if (past_deadline(ctx, op->start) && (!stuck_op || op->start < stuck_op->start)) {
        stuck = impl;
        stuck_op = op;
      }
      p = &op->next;
    }
  }
  if (stuck) return timed_out(stuck->owner, stuck_op->what);
  return GAAW_SUCCESS;
}

static void watch_add(gaaw_context_t ctx, nccl_impl *impl)
{
  gaaw_cuda_state *cs = gaaw_cuda_state_of(ctx);
  nccl_watch *w = cs->nccl_watch;
  if (!w) {
    w = calloc(1, sizeof *w);
    if (!w) return; /* unwatched: its failures surface at its own next call */
    cs->nccl_watch = w;
    cs->comm_watch = watch;
  }
  impl->next_live = w->live;
  w->live = impl;
  impl->watched = 1;
}

static void watch_remove(gaaw_context_t ctx, nccl_impl *impl)
{
  gaaw_cuda_state *cs = gaaw_cuda_state_of(ctx);
  nccl_watch *w = cs ? cs->nccl_watch : NULL;
  if (!w || !impl->watched) return;
  for (nccl_impl **p = &w->live; *p; p = &(*p)->next_live)
    if (*p == impl) {
      *p = impl->next_live;
      break;
    }
  impl->watched = 0;
  if (!w->live) {
    free(w);
    cs->nccl_watch = NULL;
    cs->comm_watch = NULL;
  }
}

/* An operation record with its event, from the spare ones or new. */
static gaaw_status_t take_op(gaaw_comm_t comm, double start, nccl_op **out)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = impl_of(comm);
  nccl_op *op = impl->spare;
  if (op) {
    impl->spare = op->next;
  } else {
    op = calloc(1, sizeof *op);
    if (!op) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate an NCCL operation record");
    cudaError_t e = cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      free(op);
      return gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaEventCreateWithFlags");
    }
  }
  op->start = start;
  op->what = NULL;
  op->linked = op->request = 0;
  op->next = NULL;
  *out = op;
  return GAAW_SUCCESS;
}

static void give_back_op(nccl_impl *impl, nccl_op *op)
{
  op->next = impl->spare;
  impl->spare = op;
}

/* Waits on the host for op's event (barrier): under op's deadline, watching NCCL. */
static gaaw_status_t wait_op(gaaw_comm_t comm, nccl_op *op)
{
  gaaw_context_t ctx = comm->ctx;
  for (unsigned polls = 0;; polls++) {
    cudaError_t q = gaaw_cuda_poll(cudaEventQuery(op->done));
    if (q == cudaSuccess) return GAAW_SUCCESS;
    if (q != cudaErrorNotReady) {
      gaaw_status_t st = gaaw_cuda_error(ctx, q, __FILE__, __LINE__, __func__, op->what);
      abort_all(ctx, comm);
      return st;
    }
    ncclResult_t state;
    GAAW_CHECK(check_async(comm, op->what, &state));
    if (past_deadline(ctx, op->start)) return timed_out(comm, op->what);
    gaaw_cuda_pause(polls);
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
  double start = now();
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
    gaaw_status_t st = nccl_error(ctx, r, NULL, __FILE__, __LINE__, __func__, "ncclCommInitRankConfig");
    gaaw_comm_mark_aborted(comm); /* the other ranks may be inside the initialisation */
    return st;
  }
  GAAW_CHECK(wait_ready(comm, start, "NCCL communicator initialisation"));
  watch_add(ctx, impl);
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
  double start = now();
  GAAW_CHECK(require_cuda(ctx));
  if (!impl_of(parent)->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", parent->name);
  nccl_impl *impl = calloc(1, sizeof *impl);
  if (!impl) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate NCCL communicator state");
  impl->owner = child;
  child->impl = impl;
  gaaw_status_t st = GAAW_SUCCESS;
  ncclConfig_t config = nonblocking_config();
  ncclResult_t r = ncclCommSplit(impl_of(parent)->comm, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, key, &impl->comm,
                                 &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    st = nccl_error(ctx, r, impl_of(parent)->comm, __FILE__, __LINE__, __func__, "ncclCommSplit");
    abort_one(parent);
    goto out;
  }
  /* A negative color leaves this rank out (NCCL returns no communicator). */
  if (!impl->comm) {
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "color %d left this rank out of the split", color);
    goto out;
  }
  st = wait_ready(child, start, "ncclCommSplit"); /* aborts (child and the context's others) on failure */
  if (st != GAAW_SUCCESS) goto out;
  ncclResult_t rr = ncclCommUserRank(impl->comm, &child->rank);
  if (rr == ncclSuccess) rr = ncclCommCount(impl->comm, &child->size);
  if (rr != ncclSuccess) {
    st = nccl_error(ctx, rr, impl->comm, __FILE__, __LINE__, __func__, "ncclCommUserRank/ncclCommCount");
    abort_all(ctx, child);
    goto out;
  }
  watch_add(ctx, impl);
out:
  if (st != GAAW_SUCCESS) {
    if (impl->comm) ncclCommAbort(impl->comm);
    free_ops(&impl->ops);
    free_ops(&impl->spare);
    free(impl);
    child->impl = NULL;
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

static void nccl_destroy(gaaw_comm_t comm)
{
  nccl_impl *impl = impl_of(comm);
  if (!impl) return;
  watch_remove(comm->ctx, impl);
  if (impl->comm && comm->aborted) {
    ncclCommAbort(impl->comm); /* after a failure: do not wait for peers */
  } else if (impl->comm) {
    /* Flush (the operations in flight end), then free; the finalisation is
     * non-blocking and bounded by the deadline (wait_ready aborts the communicator
     * when it passes). */
    ncclResult_t r = ncclCommFinalize(impl->comm);
    if ((r == ncclSuccess || r == ncclInProgress) && wait_ready(comm, now(), "ncclCommFinalize") == GAAW_SUCCESS)
      ncclCommDestroy(impl->comm);
    else if (impl->comm)
      ncclCommAbort(impl->comm);
  }
  impl->comm = NULL;
  free_ops(&impl->ops);
  free_ops(&impl->spare);
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

static ncclRedOp_t nccl_reduction(gaaw_reduce_op_t op)
{
  return op == GAAW_MAX ? ncclMax : ncclSum;
}

/* The communication stream reads or writes t: the allocator must not hand its
 * memory out again before the stream is past this use. */
static void used_by_comm(const gaaw_tensor_t *t)
{
  gaaw_buffer_use_on_stream(t->buf, GAAW_STREAM_COMM);
}

/* Before queueing: what earlier operations have done is checked (errors, deadlines),
 * an operation record (with its event) is ready, and the communication stream
 * waits for the compute stream, so the send buffers are complete. */
static gaaw_status_t flush_p2p(gaaw_comm_t comm);

static gaaw_status_t begin(gaaw_comm_t comm, cudaStream_t *s, nccl_op **op)
{
  gaaw_context_t ctx = comm->ctx;
  double start = now();
  if (!impl_of(comm)->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", comm->name);
  if (impl_of(comm)->npending && !impl_of(comm)->flushing) GAAW_CHECK(flush_p2p(comm)); /* started before this */
  GAAW_CHECK(watch(ctx));
  if (!impl_of(comm)->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", comm->name);
  GAAW_CHECK(gaaw_cuda_comm_after_compute(ctx));
  GAAW_CHECK(take_op(comm, start, op));
  *s = gaaw_cuda_state_of(ctx)->comm;
  return GAAW_SUCCESS;
}

/* How an operation ends on the host. */
typedef enum {
  END_EVENT,   /* the compute stream waits for it; the host learns of its end later */
  END_HOST,    /* the host waits for it too (barrier) */
  END_REQUEST  /* a started request keeps op; gaaw_comm_wait makes the compute stream wait */
} end_kind;

/* After queueing with result r: the enqueue finished (non-blocking communicators
 * may return ncclInProgress), the event recorded after the operation, then the
 * ending of kind `end`. Every failure aborts: the operation may be queued. */
static gaaw_status_t finish(gaaw_comm_t comm, nccl_op *op, ncclResult_t r, const char *what, end_kind end)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = impl_of(comm);
  gaaw_cuda_state *cs = gaaw_cuda_state_of(ctx);
  gaaw_status_t st = GAAW_SUCCESS;
  op->what = what;
  if (r != ncclSuccess && r != ncclInProgress) {
    st = nccl_error(ctx, r, impl->comm, __FILE__, __LINE__, __func__, what);
    abort_all(ctx, comm);
    goto fail;
  }
  if (r == ncclInProgress && (st = wait_ready(comm, op->start, what)) != GAAW_SUCCESS) goto fail;
  cudaError_t e = cudaEventRecord(op->done, cs->comm);
  if (e == cudaSuccess && end != END_REQUEST) e = cudaStreamWaitEvent(cs->compute, op->done, 0);
  if (e != cudaSuccess) {
    /* queued but not ordered: no one may use the communicator, or trust the buffers, again */
    st = gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaEventRecord/cudaStreamWaitEvent");
    abort_all(ctx, comm);
    goto fail;
  }
  if (end == END_HOST) {
    st = wait_op(comm, op);
    if (st != GAAW_SUCCESS) goto fail;
    if (impl->comm)
      give_back_op(impl, op);
    else
      drop_op(op);
    return GAAW_SUCCESS;
  }
  if (end == END_REQUEST) op->request = 1;
  op->linked = 1;
  op->next = impl->ops;
  impl->ops = op;
  return GAAW_SUCCESS;
fail:
  drop_op(op);
  return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
}

/* Queues one of the three collectives of a request on stream s. */
static ncclResult_t queue_collective(gaaw_comm_t comm, gaaw_comm_op_t op, const gaaw_tensor_t *send,
                                     gaaw_tensor_t *recv, gaaw_reduce_op_t reduce, cudaStream_t s)
{
  ncclComm_t c = impl_of(comm)->comm;
  size_t n = (size_t)gaaw_tensor_numel(recv);
  ncclDataType_t type = nccl_type(recv->dtype);
  used_by_comm(send);
  used_by_comm(recv);
  switch (op) {
  case GAAW_COMM_ALLREDUCE: return ncclAllReduce(gaaw_cuda_ptr(send), gaaw_cuda_ptr(recv), n, type, nccl_reduction(reduce), c, s);
  case GAAW_COMM_REDUCE_SCATTER:
    return ncclReduceScatter(gaaw_cuda_ptr(send), gaaw_cuda_ptr(recv), n, type, nccl_reduction(reduce), c, s);
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
  GAAW_CHECK(begin(comm, &s, &rec));
  GAAW_CHECK(finish(comm, rec, queue_collective(comm, op, send, recv, reduce, s), gaaw_comm_op_name(op), END_EVENT));
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
 * after it; the wait makes the compute stream wait for the event (the host learns
 * of the end, an error or the deadline later, as for blocking operations). */
static gaaw_status_t nccl_start(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(begin(comm, &s, &rec));
  ncclResult_t r = queue_collective(comm, req->op, &req->send, &req->recv, req->reduce, s);
  GAAW_CHECK(finish(comm, rec, r, gaaw_comm_op_name(req->op), END_REQUEST));
  req->backend = rec;
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_complete(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = impl_of(comm);
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
      abort_all(ctx, comm);
    }
  }
  op->request = 0;
  if (!op->linked) { /* seen done by watch, or dropped by an abort */
    if (op->done && impl && impl->comm)
      give_back_op(impl, op);
    else
      drop_op(op);
  } /* else it stays in flight: watch hands it back once done */
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_broadcast(gaaw_comm_t comm, gaaw_tensor_t *t, int root)
{
  gaaw_context_t ctx = comm->ctx;
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(begin(comm, &s, &rec));
  void *p = gaaw_cuda_ptr(t);
  used_by_comm(t);
  ncclResult_t r = ncclBroadcast(p, p, (size_t)gaaw_tensor_numel(t), nccl_type(t->dtype), root, impl_of(comm)->comm, s);
  GAAW_CHECK(finish(comm, rec, r, "ncclBroadcast", END_EVENT));
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  (void)tag; /* NCCL matches point-to-point by order, not by tag */
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(begin(comm, &s, &rec));
  used_by_comm(t);
  ncclResult_t r = ncclSend(gaaw_cuda_ptr(t), (size_t)gaaw_tensor_numel(t), nccl_type(t->dtype), peer,
                            impl_of(comm)->comm, s);
  GAAW_CHECK(finish(comm, rec, r, "ncclSend", END_EVENT));
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  (void)tag;
  cudaStream_t s;
  nccl_op *rec;
  GAAW_CHECK(begin(comm, &s, &rec));
  used_by_comm(t);
  ncclResult_t r = ncclRecv(gaaw_cuda_ptr(t), (size_t)gaaw_tensor_numel(t), nccl_type(t->dtype), peer,
                            impl_of(comm)->comm, s);
  GAAW_CHECK(finish(comm, rec, r, "ncclRecv", END_EVENT));
  return GAAW_SUCCESS;
}

/* Block j of send to member j, block i of recv from member i, as one NCCL group.
 * In place (send is recv, which comm.c allows), the receive into block p would
 * race with the send reading block p: send is first copied to scratch on the
 * communication stream, and the scratch returned to the allocator, which keeps it
 * until the stream is past the all-to-all. */
static gaaw_status_t nccl_alltoall(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
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
  gaaw_status_t st = begin(comm, &s, &rec);
  if (st != GAAW_SUCCESS) goto out;
  if (scratch) {
    cudaError_t e = cudaMemcpyAsync(scratch->handle, src, bytes * (size_t)comm->size, cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess) {
      st = gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaMemcpyAsync (all-to-all staging)");
      drop_op(rec);
      goto out;
    }
    src = scratch->handle;
  }
  used_by_comm(send);
  used_by_comm(recv);
  ncclDataType_t type = nccl_type(send->dtype);
  ncclComm_t c = impl_of(comm)->comm;
  ncclResult_t r = ncclGroupStart();
  for (int p = 0; p < comm->size && r == ncclSuccess; p++) {
    r = ncclSend(src + p * bytes, block, type, p, c, s);
    if (r == ncclSuccess) r = ncclRecv((char *)gaaw_cuda_ptr(recv) + p * bytes, block, type, p, c, s);
  }
  ncclResult_t end = ncclGroupEnd();
  st = finish(comm, rec, r != ncclSuccess ? r : end, "ncclSend/ncclRecv (all-to-all)", END_EVENT);
out:
  gaaw_buffer_free(ctx, &scratch);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* An all-reduce of one device integer, waited for on the host: when it returns,
 * every member has reached it. */
static gaaw_status_t nccl_barrier(gaaw_comm_t comm)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_buffer_t buf = NULL;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, sizeof(int32_t), GAAW_MEM_COMMUNICATION, &buf));
  gaaw_buffer_use_on_stream(buf, GAAW_STREAM_COMM);
  cudaStream_t s;
  nccl_op *rec;
  gaaw_status_t st = begin(comm, &s, &rec);
  if (st == GAAW_SUCCESS)
    st = finish(comm, rec, ncclAllReduce(buf->handle, buf->handle, 1, ncclInt32, ncclSum, impl_of(comm)->comm, s),
                "ncclAllReduce (barrier)", END_HOST);
  /* After an abort the buffer is abandoned: a late peer's data may still land in it. */
  if (impl_of(comm)->comm) gaaw_buffer_free(ctx, &buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- send/recv
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
  nccl_impl *impl = impl_of(comm);
  cudaStream_t s;
  nccl_op *rec;
  impl->flushing = 1;
  gaaw_status_t st = begin(comm, &s, &rec);
  impl->flushing = 0;
  int n = impl->npending;
  impl->npending = 0;
  if (st == GAAW_SUCCESS) {
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < n && r == ncclSuccess; i++) {
      gaaw_comm_request_t q = impl->pending[i];
      gaaw_tensor_t *t = q->op == GAAW_COMM_SEND ? &q->send : &q->recv;
      used_by_comm(t);
      r = q->op == GAAW_COMM_SEND ? ncclSend(gaaw_cuda_ptr(t), (size_t)gaaw_tensor_numel(t), nccl_type(t->dtype), q->peer, impl->comm, s)
                                  : ncclRecv(gaaw_cuda_ptr(t), (size_t)gaaw_tensor_numel(t), nccl_type(t->dtype), q->peer, impl->comm, s);
    }
    ncclResult_t end = ncclGroupEnd();
    st = finish(comm, rec, r != ncclSuccess ? r : end, "ncclSend/ncclRecv (pipeline exchange)", END_EVENT);
  }
  for (int i = 0; i < n; i++) {
    impl->pending[i]->backend = &p2p_queued;
    impl->pending[i]->status = st; /* each request of the group reports how it went */
  }
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t nccl_p2p_start(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = impl_of(comm);
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

static gaaw_status_t nccl_p2p_complete(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = impl_of(comm);
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
  .p2p_start = nccl_p2p_start,
  .p2p_complete = nccl_p2p_complete,
};
