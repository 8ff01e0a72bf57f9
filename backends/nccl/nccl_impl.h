/* Insides of the NCCL communicator backend (see nccl_comm.h), shared by its files:
 * - nccl_watch.c:       the operations in flight (their records and events), the
 *                       polling of them against errors and deadlines, and the aborts;
 * - nccl_p2p.c:         begin and finish, which frame every operation on the
 *                       communication stream, and the point-to-point operations
 *                       (blocking, and the started ones, queued as one group);
 * - nccl_collectives.c: the collectives (blocking and started), all-to-all, barrier;
 * - nccl_comm.c:        the communicators' life cycle, and the backend's table.
 * They call one another one way only: nccl_comm.c -> nccl_collectives.c ->
 * nccl_p2p.c -> nccl_watch.c (each may also call any file to its right). */
#ifndef GAAW_BACKENDS_NCCL_IMPL_H
#define GAAW_BACKENDS_NCCL_IMPL_H

#include <nccl.h>

#include "backends/cuda/cuda.h"
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
  gaaw_comm_request_t *pending; /* started sends and receives not yet queued (see nccl_p2p.c) */
  int npending, pending_cap;
  int flushing;
} nccl_impl;

static inline nccl_impl *gaaw_nccl_impl_of(gaaw_comm_t comm)
{
  return (nccl_impl *)comm->impl;
}

static inline ncclDataType_t gaaw_nccl_type(gaaw_dtype_t dtype)
{
  switch (dtype) {
  case GAAW_BF16: return ncclBfloat16;
  case GAAW_F16: return ncclFloat16;
  case GAAW_I32: return ncclInt32;
  default: return ncclFloat32;
  }
}

static inline ncclRedOp_t gaaw_nccl_reduction(gaaw_reduce_op_t op)
{
  return op == GAAW_MAX ? ncclMax : ncclSum;
}

/* The communication stream reads or writes t: the allocator must not hand its
 * memory out again before the stream is past this use. */
static inline void gaaw_nccl_used_by_comm(const gaaw_tensor_t *t)
{
  gaaw_buffer_use_on_stream(t->buf, GAAW_STREAM_COMM);
}

/* ---------------------------------------------------------------- nccl_watch.c */

/* GAAW_ERR_COMM with NCCL's text (and its last message for the communicator). */
gaaw_status_t gaaw_nccl_error(gaaw_context_t ctx, ncclResult_t r, ncclComm_t comm, const char *file, int line,
                              const char *func, const char *call);
#define NCCL_FAIL(ctx, r, comm, call) return gaaw_nccl_error((ctx), (r), (comm), __FILE__, __LINE__, __func__, (call))

/* Frees one operation record that is in no list, with its event. */
void gaaw_nccl_drop_op(nccl_op *op);
/* Empties a list of records: their events are destroyed, the records freed but
 * those a started request owns (its completion frees them). */
void gaaw_nccl_free_ops(nccl_op **list);
/* Aborts the NCCL communicator of comm (once), dropping its operations in flight. */
void gaaw_nccl_abort_one(gaaw_comm_t comm);
/* Aborts first (NULL: none), then every other NCCL communicator of the context. */
void gaaw_nccl_abort_all(gaaw_context_t ctx, gaaw_comm_t first);
/* Seconds on the monotonic clock: the start of an operation's deadline. */
double gaaw_nccl_now(void);
/* Polls until comm has no operation in progress, under the deadline of the call that
 * began at start; aborts on error or at the deadline. */
gaaw_status_t gaaw_nccl_wait_ready(gaaw_comm_t comm, double start, const char *what);
/* Polls the operations in flight of every NCCL communicator of ctx (the CUDA
 * backend's comm_watch): done ones leave the lists, an error or a passed deadline
 * aborts. */
gaaw_status_t gaaw_nccl_watch(gaaw_context_t ctx);
/* Adds impl to (removes it from) the context's live communicators that are watched. */
void gaaw_nccl_watch_add(gaaw_context_t ctx, nccl_impl *impl);
void gaaw_nccl_watch_remove(gaaw_context_t ctx, nccl_impl *impl);
/* An operation record with its event, from the spare ones or new; back with
 * gaaw_nccl_give_back_op. */
gaaw_status_t gaaw_nccl_take_op(gaaw_comm_t comm, double start, nccl_op **out);
void gaaw_nccl_give_back_op(nccl_impl *impl, nccl_op *op);
/* Waits on the host for op's event, under op's deadline, watching NCCL. */
gaaw_status_t gaaw_nccl_wait_op(gaaw_comm_t comm, nccl_op *op);

/* ---------------------------------------------------------------- nccl_p2p.c */

/* How an operation ends on the host. */
typedef enum {
  END_EVENT,   /* the compute stream waits for it; the host learns of its end later */
  END_HOST,    /* the host waits for it too (barrier) */
  END_REQUEST  /* a started request keeps op; gaaw_comm_wait makes the compute stream wait */
} end_kind;

/* Before queueing an operation on comm: *s the stream, *op its record. */
gaaw_status_t gaaw_nccl_begin(gaaw_comm_t comm, cudaStream_t *s, nccl_op **op);
/* After queueing it with result r: the ending of kind end (op is taken over). */
gaaw_status_t gaaw_nccl_finish(gaaw_comm_t comm, nccl_op *op, ncclResult_t r, const char *what, end_kind end);

gaaw_status_t gaaw_nccl_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag);
gaaw_status_t gaaw_nccl_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag);
gaaw_status_t gaaw_nccl_p2p_start(gaaw_comm_t comm, gaaw_comm_request_t req);
gaaw_status_t gaaw_nccl_p2p_complete(gaaw_comm_t comm, gaaw_comm_request_t req);

/* ---------------------------------------------------------------- nccl_collectives.c */

gaaw_status_t gaaw_nccl_allreduce(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                  gaaw_reduce_op_t op);
gaaw_status_t gaaw_nccl_reduce_scatter(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                       gaaw_reduce_op_t op);
gaaw_status_t gaaw_nccl_allgather(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv);
gaaw_status_t gaaw_nccl_broadcast(gaaw_comm_t comm, gaaw_tensor_t *t, int root);
gaaw_status_t gaaw_nccl_alltoall(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv);
gaaw_status_t gaaw_nccl_alltoallv(gaaw_comm_t comm, const gaaw_tensor_t *send, const int64_t *send_counts,
                                  gaaw_tensor_t *recv, const int64_t *recv_counts);
gaaw_status_t gaaw_nccl_barrier(gaaw_comm_t comm);
gaaw_status_t gaaw_nccl_start(gaaw_comm_t comm, gaaw_comm_request_t req);
gaaw_status_t gaaw_nccl_complete(gaaw_comm_t comm, gaaw_comm_request_t req);

#endif
