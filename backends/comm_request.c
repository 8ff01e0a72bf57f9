/* Requests of the non-blocking collectives: the deferred list of backends without
 * a communication stream, and gaaw_comm_wait. (The start functions, which share
 * the argument checks of the blocking ones, are in backends/comm.c.) */
#include <stdlib.h>

#include "backends/comm.h"
#include "backends/runtime/runtime.h"

void gaaw_comm_defer(gaaw_comm_t comm, gaaw_comm_request_t req)
{
  req->next = NULL;
  if (comm->deferred_last)
    comm->deferred_last->next = req;
  else
    comm->deferred = req;
  comm->deferred_last = req;
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
  while (comm->deferred) {
    gaaw_comm_request_t r = comm->deferred;
    comm->deferred = r->next;
    if (!comm->deferred) comm->deferred_last = NULL;
    r->next = NULL;
    r->ran = 1;
    if (comm->aborted) {
      r->status = gaaw_error_raise(ctx, GAAW_ERR_COMM, __FILE__, __LINE__, __func__,
                                   "%s on communicator %s was not run: the communicator was aborted by an earlier "
                                   "failure", gaaw_comm_op_name(r->op), comm->name);
    } else {
      r->status = execute(comm, r);
      if (r->status != GAAW_SUCCESS) comm->aborted = 1; /* peers may be inside it: no retry */
    }
    if (first == GAAW_SUCCESS) first = r->status;
    if (r == upto) break;
  }
  if (first != GAAW_SUCCESS) return gaaw_error_trace(ctx, first, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

void gaaw_comm_orphan_requests(gaaw_comm_t comm)
{
  for (gaaw_comm_request_t r = comm->deferred, next; r; r = next) {
    next = r->next;
    r->next = NULL;
    r->comm = NULL;
  }
  comm->deferred = comm->deferred_last = NULL;
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
    st = comm->ops->complete(comm, r);
    if (st != GAAW_SUCCESS) comm->aborted = 1;
  } else {
    if (!r->ran) gaaw_comm_run_deferred(comm, r); /* an earlier one's failure fails r too */
    st = r->status;
  }
  free(r);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, gaaw_comm_op_name(op));
  return GAAW_SUCCESS;
}
