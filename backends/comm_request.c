/* Requests of the non-blocking collectives: each communicator's live requests in
 * start order, the deferred ones of backends without a communication stream, and
 * gaaw_comm_wait. (The start functions, which share the argument checks of the
 * blocking ones, are in backends/comm.c.) */
#include <stdlib.h>

#include "backends/comm.h"
#include "backends/runtime/runtime.h"

gaaw_status_t gaaw_comm_complete_queued(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  int p2p = req->op == GAAW_COMM_SEND || req->op == GAAW_COMM_RECV;
  return p2p ? comm->ops->p2p_complete(comm, req) : comm->ops->complete(comm, req);
}

void gaaw_comm_track(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  req->next = NULL;
  if (comm->requests_last)
    comm->requests_last->next = req;
  else
    comm->requests = req;
  comm->requests_last = req;
  if (!req->queued) comm->deferred++;
}

static void untrack(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  gaaw_comm_request_t prev = NULL;
  for (gaaw_comm_request_t r = comm->requests; r; prev = r, r = r->next) {
    if (r != req) continue;
    if (prev)
      prev->next = r->next;
    else
      comm->requests = r->next;
    if (comm->requests_last == r) comm->requests_last = prev;
    break;
  }
  req->next = NULL;
  if (!req->queued && !req->ran) comm->deferred--;
}

/* Runs one deferred operation through the backend's blocking entry. */
static gaaw_status_t execute(gaaw_comm_t comm, gaaw_comm_request_t r)
{
  switch (r->op) {
  case GAAW_COMM_ALLREDUCE: return comm->ops->allreduce(comm, &r->send, &r->recv, r->reduce);
  case GAAW_COMM_REDUCE_SCATTER: return comm->ops->reduce_scatter(comm, &r->send, &r->recv, r->reduce);
  case GAAW_COMM_ALLGATHER: return comm->ops->allgather(comm, &r->send, &r->recv);
  default:
    GAAW_FAIL(comm->ctx, GAAW_ERR_INTERNAL, "operation %s cannot be deferred", gaaw_comm_op_name(r->op));
  }
}

gaaw_status_t gaaw_comm_run_deferred(gaaw_comm_t comm, gaaw_comm_request_t upto)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_status_t first = GAAW_SUCCESS;
  for (gaaw_comm_request_t r = comm->requests; r && comm->deferred > 0; r = r->next) {
    if (r->queued || r->ran) continue;
    r->ran = 1;
    comm->deferred--;
    if (comm->aborted) {
      r->status = gaaw_error_raise(ctx, GAAW_ERR_COMM, __FILE__, __LINE__, __func__,
                                   "%s on communicator %s was not run: the communicator was aborted by an earlier "
                                   "failure", gaaw_comm_op_name(r->op), comm->name);
    } else {
      r->status = execute(comm, r);
      if (r->status != GAAW_SUCCESS) gaaw_comm_mark_aborted(comm); /* peers may be inside it: no retry */
    }
    if (first == GAAW_SUCCESS) first = r->status;
    if (r == upto) break;
  }
  if (first != GAAW_SUCCESS) return gaaw_error_trace(ctx, first, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

void gaaw_comm_orphan_requests(gaaw_comm_t comm)
{
  for (gaaw_comm_request_t r = comm->requests, next; r; r = next) {
    next = r->next;
    if (r->queued) gaaw_comm_complete_queued(comm, r); /* its memory may be freed right after */
    r->queued = 0;
    r->ran = 1;
    r->next = NULL;
    r->comm = NULL;
  }
  comm->requests = comm->requests_last = NULL;
  comm->deferred = 0;
}

void gaaw_comm_cancel(gaaw_comm_request_t *req)
{
  if (!req || !*req) return;
  gaaw_comm_request_t r = *req;
  *req = NULL;
  if (r->comm) {
    untrack(r->comm, r);
    if (r->queued) gaaw_comm_complete_queued(r->comm, r);
  }
  free(r);
}

int gaaw_comm_test(gaaw_comm_request_t req)
{
  if (!req) return 1;
  gaaw_comm_t comm = req->comm;
  int p2p = req->op == GAAW_COMM_SEND || req->op == GAAW_COMM_RECV;
  if (!comm || !req->queued || !p2p || !comm->ops->p2p_test) return 1;
  return comm->ops->p2p_test(comm, req);
}

gaaw_status_t gaaw_comm_wait(gaaw_comm_request_t *req)
{
  GAAW_ARG_NOT_NULL(NULL, req);
  gaaw_comm_request_t r = *req;
  if (!r) return GAAW_SUCCESS;
  *req = NULL;
  gaaw_comm_t comm = r->comm;
  if (!comm) {
    free(r);
    GAAW_FAIL(NULL, GAAW_ERR_STATE, "the request's communicator was destroyed before the request was waited for");
  }
  gaaw_context_t ctx = comm->ctx;
  gaaw_comm_op_t op = r->op;
  gaaw_status_t st;
  if (r->queued) {
    untrack(comm, r);
    st = gaaw_comm_complete_queued(comm, r);
    if (st != GAAW_SUCCESS) gaaw_comm_mark_aborted(comm);
  } else {
    if (!r->ran) gaaw_comm_run_deferred(comm, r); /* an earlier one's failure fails r too */
    untrack(comm, r);
    st = r->status;
  }
  if (st == GAAW_SUCCESS) gaaw_comm_trace(comm, op, r->seq, r->bytes, r->started);
  free(r);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, gaaw_comm_op_name(op));
  return GAAW_SUCCESS;
}
