/* The communicator layer: a communicator backend is a table of functions (MPI, with
 * device tensors staged through host memory; NCCL among CUDA ranks). The public functions of
 * include/gaaw/comm.h (backends/comm.c) check arguments, enforce the abort state,
 * count traffic, and dispatch here; backends only move data, honouring the
 * deadline comm->ctx->comm_timeout (seconds, 0 = none) by returning
 * GAAW_ERR_TIMEOUT when it passes. */
#ifndef GAAW_BACKENDS_COMM_H
#define GAAW_BACKENDS_COMM_H

#include <mpi.h>

#include "gaaw/comm.h"

typedef struct gaaw_comm_ops {
  const char *name;
  /* Fills comm->impl, rank and size for every rank of ctx->world. Collective over world. */
  gaaw_status_t (*create_world)(gaaw_comm_t comm);
  /* Fills child (impl, rank, size) with the members of parent that pass the same
   * color, ordered by key. Collective over parent. */
  gaaw_status_t (*split)(gaaw_comm_t parent, int color, int key, gaaw_comm_t child);
  /* Frees comm->impl; after a timeout it must not wait for peers. */
  void (*destroy)(gaaw_comm_t comm);
  gaaw_status_t (*allreduce)(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                             gaaw_reduce_op_t op);
  gaaw_status_t (*reduce_scatter)(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                  gaaw_reduce_op_t op);
  gaaw_status_t (*allgather)(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv);
  gaaw_status_t (*broadcast)(gaaw_comm_t comm, gaaw_tensor_t *t, int root);
  gaaw_status_t (*send)(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag);
  gaaw_status_t (*recv)(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag);
  gaaw_status_t (*alltoall)(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv);
  /* Counts in elements, checked by comm.c (include/gaaw/comm.h). */
  gaaw_status_t (*alltoallv)(gaaw_comm_t comm, const gaaw_tensor_t *send, const int64_t *send_counts,
                             gaaw_tensor_t *recv, const int64_t *recv_counts);
  gaaw_status_t (*barrier)(gaaw_comm_t comm);
  /* Optional, for backends with a communication stream. start queues req's
   * operation and returns; complete orders the context's later work after it
   * (under the deadline) and frees what start kept in req->backend, also when it
   * fails. Without them, started operations are deferred: the blocking entries
   * above run them at the wait (backends/comm_request.c). */
  gaaw_status_t (*start)(gaaw_comm_t comm, gaaw_comm_request_t req);
  gaaw_status_t (*complete)(gaaw_comm_t comm, gaaw_comm_request_t req);
  /* Optional: non-blocking send/recv (req->op GAAW_COMM_SEND or _RECV, the tensor
   * in req->send or req->recv, req->peer, req->tag). p2p_start posts it;
   * p2p_complete waits for it under the deadline and frees req->backend, also when
   * it fails (a receive still pending is cancelled). */
  gaaw_status_t (*p2p_start)(gaaw_comm_t comm, gaaw_comm_request_t req);
  gaaw_status_t (*p2p_complete)(gaaw_comm_t comm, gaaw_comm_request_t req);
  /* Optional: 1 when req's send or receive has completed (p2p_complete then
   * returns at once), 0 while it still needs the peer; an error is left for
   * p2p_complete to report. Without it every request counts as complete, which
   * suits a backend whose wait only orders a stream (NCCL). */
  int (*p2p_test)(gaaw_comm_t comm, gaaw_comm_request_t req);
} gaaw_comm_ops;

/* A started collective (include/gaaw/comm.h). */
struct gaaw_comm_request_s {
  gaaw_comm_t comm;          /* NULL once the communicator was destroyed before the wait */
  gaaw_comm_op_t op;         /* GAAW_COMM_ALLREDUCE, _REDUCE_SCATTER, _ALLGATHER, _SEND or _RECV */
  int peer, tag;             /* _SEND, _RECV */
  gaaw_tensor_t send, recv;
  gaaw_reduce_op_t reduce;
  int queued;                /* taken by the backend's start (else deferred) */
  int ran;                   /* deferred: has run (successfully or not) */
  gaaw_status_t status;      /* deferred: how it ran */
  void *backend;             /* the backend's record of a queued operation */
  double started;            /* gaaw_clock_seconds at the start (the timeline) */
  uint64_t seq, bytes;       /* collectives: the communicator's sequence number; bytes counted */
  gaaw_comm_request_t next;  /* the communicator's live requests, in start order */
};

struct gaaw_comm_s {
  gaaw_context_t ctx;
  const gaaw_comm_ops *ops;
  void *impl;   /* the backend's state */
  int rank, size;
  int aborted;  /* set after a timeout or a failed collective: later calls fail */
  MPI_Comm control; /* over the same ranks, for agreements (backends/agree.c) */
  char name[16]; /* "world", "tp", ... for messages */
  int first_world_rank; /* the lowest world rank among its members: with name, the group's identity */
  uint64_t sequence;    /* collectives issued so far (the same order on every member) */
  uint64_t calls[GAAW_COMM_OP_COUNT];
  uint64_t bytes[GAAW_COMM_OP_COUNT];
  gaaw_comm_request_t requests, requests_last; /* started, not yet waited for */
  int deferred;                                /* of which not yet run (backends without start) */
};

/* A completed collective's span on the timeline (comm.c): on the row "comm NAME",
 * with the group, its sequence number and its bytes (nothing for messages). */
void gaaw_comm_trace(gaaw_comm_t comm, gaaw_comm_op_t op, uint64_t seq, uint64_t bytes, double started);

/* The MPI communicator backend's table. */
extern const gaaw_comm_ops gaaw_mpi_comm_ops;

/* A communicator over every rank of ctx->world. Collective over world. */
gaaw_status_t gaaw_comm_create_world(gaaw_context_t ctx, const char *name, gaaw_comm_t *comm);
/* A communicator over the members of parent with the same color, ordered by key.
 * Collective over parent. */
gaaw_status_t gaaw_comm_split(gaaw_comm_t parent, int color, int key, const char *name, gaaw_comm_t *child);
/* Replaces an MPI-backed *comm by an NCCL communicator over the same ranks when
 * every member runs the CUDA backend, NCCL is built, the option `nccl` is on, and
 * no two members on one node use the same GPU (NCCL does not support that and may
 * hang; such a group stays on MPI, with a warning in the log); leaves it as it is
 * otherwise. Collective over *comm. */
gaaw_status_t gaaw_comm_prefer_nccl(gaaw_comm_t *comm);
/* Whether gaaw_comm_wait(&req) would return without waiting for a peer: a
 * started send or receive that has completed (or one on a backend whose waits
 * never hold the host, NCCL), or NULL. Not collective. */
int gaaw_comm_test(gaaw_comm_request_t req);
/* Completes a request the backend queued (its start or p2p_start took it). */
gaaw_status_t gaaw_comm_complete_queued(gaaw_comm_t comm, gaaw_comm_request_t req);

/* The NCCL decision, as pure functions (tested with faked layouts). */
#define GAAW_DEVICE_ID_BYTES 16 /* a device identity: a CUDA device's UUID */
typedef enum {
  GAAW_NCCL_USE,           /* every member wants NCCL, one GPU each */
  GAAW_NCCL_NOT_WANTED,    /* some member is not on CUDA, lacks NCCL, or set nccl=no: MPI */
  GAAW_NCCL_SHARED_DEVICE  /* all want it, but two members share a GPU: MPI, with a warning */
} gaaw_nccl_choice;
/* Whether two of the n identities (id_bytes each, one per node-local member) are
 * equal; *first < *second receive the first such pair (either may be NULL). */
int gaaw_comm_devices_shared(int n, const void *ids, size_t id_bytes, int *first, int *second);
/* The choice from what every member wants (all_want: the minimum over members) and
 * whether any node has a shared device (any_shared: the maximum). */
gaaw_nccl_choice gaaw_comm_nccl_choice(int all_want, int any_shared);
/* Appends a started request to comm's live requests. Not collective. */
void gaaw_comm_track(gaaw_comm_t comm, gaaw_comm_request_t req);
/* Runs the deferred operations of comm in start order, up to and including upto
 * (all of them when upto is NULL). Returns the first failure; after one, the
 * communicator is aborted and the later operations fail with GAAW_ERR_COMM.
 * Collective over comm, like the operations it runs. */
gaaw_status_t gaaw_comm_run_deferred(gaaw_comm_t comm, gaaw_comm_request_t upto);
/* Drops *req without running it if it is deferred (every member must drop the
 * same ones), or waits for it (under the deadline) if the backend queued it, and
 * sets *req to NULL. For engines tearing down after a failure. Not collective. */
void gaaw_comm_cancel(gaaw_comm_request_t *req);
/* At destroy: queued requests are waited for (under the deadline), and every live
 * request is detached, so that waiting for it later reports an error. */
void gaaw_comm_orphan_requests(gaaw_comm_t comm);

/* Gives comm its control communicator, a duplicate of base (the MPI communicator
 * over the same ranks). Collective over base. */
gaaw_status_t gaaw_comm_attach_control(gaaw_comm_t comm, MPI_Comm base);
/* After a failure that leaves comm's members out of step: comm and its context are
 * aborted (runtime/abort.h), and every rank is told. Not collective. */
void gaaw_comm_mark_aborted(gaaw_comm_t comm);

/* Frees *comm and sets it to NULL; NULL is a no-op. */
void gaaw_comm_destroy(gaaw_comm_t *comm);

/* The scratch the MPI communicator keeps in device memory (category
 * communication) after operation op of n elements (a reduce-scatter's n: the
 * output, per rank) of dtype over p ranks, with option allreduce_ring_bytes
 * ring_bytes, on a device whose memory is host memory (the host backend; other
 * devices stage in host memory instead): the rule of mpi_collectives.c and
 * mpi_ring.c, for the memory estimate. The communicator keeps the largest asked
 * for. */
size_t gaaw_mpi_scratch_bytes(gaaw_comm_op_t op, int64_t n, gaaw_dtype_t dtype, int p, int64_t ring_bytes);

#endif
