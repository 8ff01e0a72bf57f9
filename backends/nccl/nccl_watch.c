/* The NCCL backend's operations in flight: their records (each with the event that
 * happens when the operation is done), the polling of them (watch: at the next NCCL
 * call and in the CUDA backend's host waits) against NCCL's asynchronous errors,
 * the context's abort state and each operation's deadline, and the aborts that end
 * every NCCL communicator of the context after a failure. Calls no other file of
 * the backend (see nccl_impl.h). */
#include <stdlib.h>
#include <time.h>

#include "backends/nccl/nccl_impl.h"
#include "backends/runtime/abort.h"

/* The context's live NCCL communicators (in the CUDA state's nccl_watch). */
typedef struct {
  nccl_impl *live;
} nccl_watch;

/* ---------------------------------------------------------------- errors and aborts */

/* GAAW_ERR_COMM with NCCL's text (and its last message for the communicator). */
gaaw_status_t gaaw_nccl_error(gaaw_context_t ctx, ncclResult_t r, ncclComm_t comm, const char *file, int line,
                              const char *func, const char *call)
{
  const char *last = ncclGetLastError(comm);
  return gaaw_error_raise(ctx, GAAW_ERR_COMM, file, line, func, "%s failed: %s%s%s", call, ncclGetErrorString(r),
                          last && *last ? ": " : "", last ? last : "");
}

/* Frees one operation record that is in no list, with its event. */
void gaaw_nccl_drop_op(nccl_op *op)
{
  if (op->done) cudaEventDestroy(op->done); /* one still pending is released once it happens */
  free(op);
}

void gaaw_nccl_free_ops(nccl_op **list)
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
void gaaw_nccl_abort_one(gaaw_comm_t comm)
{
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
  if (impl && impl->comm) {
    ncclCommAbort(impl->comm);
    impl->comm = NULL;
  }
  if (impl) {
    gaaw_nccl_free_ops(&impl->ops);
    gaaw_nccl_free_ops(&impl->spare);
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
void gaaw_nccl_abort_all(gaaw_context_t ctx, gaaw_comm_t first)
{
  if (first) gaaw_nccl_abort_one(first);
  nccl_watch *w = watch_of(ctx);
  for (nccl_impl *i = w ? w->live : NULL; i; i = i->next_live)
    if (i->comm) gaaw_nccl_abort_one(i->owner);
}

double gaaw_nccl_now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int past_deadline(gaaw_context_t ctx, double start)
{
  return ctx->comm_timeout > 0 && gaaw_nccl_now() - start > ctx->comm_timeout;
}

/* The checks of every poll of comm, which abort on failure: NCCL's asynchronous
 * state (in *state: ncclSuccess or ncclInProgress when it is not an error), and
 * whether another rank has failed. */
static gaaw_status_t check_async(gaaw_comm_t comm, const char *what, ncclResult_t *state)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
  if (!impl->comm) GAAW_FAIL(ctx, GAAW_ERR_COMM, "NCCL communicator %s was aborted", comm->name);
  ncclResult_t r = ncclCommGetAsyncError(impl->comm, state);
  if (r != ncclSuccess) *state = r;
  if (*state != ncclSuccess && *state != ncclInProgress) {
    gaaw_status_t st = gaaw_nccl_error(ctx, *state, impl->comm, __FILE__, __LINE__, __func__, what);
    gaaw_nccl_abort_all(ctx, comm);
    return st;
  }
  if (gaaw_context_check_live(ctx) != GAAW_SUCCESS) { /* another rank failed: this wait cannot end well */
    gaaw_nccl_abort_all(ctx, comm);
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
  gaaw_nccl_abort_all(ctx, comm);
  return st;
}

/* Polls until comm has no operation in progress (initialisation, split, a call
 * that returned ncclInProgress), under the deadline of the call that began at
 * start (one deadline for all its phases); aborts on error or at the deadline. */
gaaw_status_t gaaw_nccl_wait_ready(gaaw_comm_t comm, double start, const char *what)
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
gaaw_status_t gaaw_nccl_watch(gaaw_context_t ctx)
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
        gaaw_nccl_abort_all(ctx, impl->owner);
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

void gaaw_nccl_watch_add(gaaw_context_t ctx, nccl_impl *impl)
{
  gaaw_cuda_state *cs = gaaw_cuda_state_of(ctx);
  nccl_watch *w = cs->nccl_watch;
  if (!w) {
    w = calloc(1, sizeof *w);
    if (!w) return; /* unwatched: its failures surface at its own next call */
    cs->nccl_watch = w;
    cs->comm_watch = gaaw_nccl_watch;
  }
  impl->next_live = w->live;
  w->live = impl;
  impl->watched = 1;
}

void gaaw_nccl_watch_remove(gaaw_context_t ctx, nccl_impl *impl)
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
gaaw_status_t gaaw_nccl_take_op(gaaw_comm_t comm, double start, nccl_op **out)
{
  gaaw_context_t ctx = comm->ctx;
  nccl_impl *impl = gaaw_nccl_impl_of(comm);
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

void gaaw_nccl_give_back_op(nccl_impl *impl, nccl_op *op)
{
  op->next = impl->spare;
  impl->spare = op;
}

/* Waits on the host for op's event (barrier): under op's deadline, watching NCCL. */
gaaw_status_t gaaw_nccl_wait_op(gaaw_comm_t comm, nccl_op *op)
{
  gaaw_context_t ctx = comm->ctx;
  for (unsigned polls = 0;; polls++) {
    cudaError_t q = gaaw_cuda_poll(cudaEventQuery(op->done));
    if (q == cudaSuccess) return GAAW_SUCCESS;
    if (q != cudaErrorNotReady) {
      gaaw_status_t st = gaaw_cuda_error(ctx, q, __FILE__, __LINE__, __func__, op->what);
      gaaw_nccl_abort_all(ctx, comm);
      return st;
    }
    ncclResult_t state;
    GAAW_CHECK(check_async(comm, op->what, &state));
    if (past_deadline(ctx, op->start)) return timed_out(comm, op->what);
    gaaw_cuda_pause(polls);
  }
}
