/* The communicator layer: a communicator backend is a table of functions (MPI, with
 * device tensors staged through host memory; NCCL among CUDA ranks). The public functions of
 * include/gaaw/comm.h (backends/comm.c) check arguments, enforce the abort state,
 * count traffic, and dispatch here; backends only move data, honouring the
 * deadline comm->ctx->comm_timeout (seconds, 0 = none) by returning
 * GAAW_ERR_TIMEOUT when it passes. */
#ifndef GAAW_BACKENDS_COMM_H
#define GAAW_BACKENDS_COMM_H

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
  gaaw_status_t (*barrier)(gaaw_comm_t comm);
} gaaw_comm_ops;

struct gaaw_comm_s {
  gaaw_context_t ctx;
  const gaaw_comm_ops *ops;
  void *impl;   /* the backend's state */
  int rank, size;
  int aborted;  /* set after a timeout or a failed collective: later calls fail */
  char name[16]; /* "world", "tp", ... for messages */
  uint64_t calls[GAAW_COMM_OP_COUNT];
  uint64_t bytes[GAAW_COMM_OP_COUNT];
};

/* The MPI communicator backend's table. */
extern const gaaw_comm_ops gaaw_mpi_comm_ops;

/* A communicator over every rank of ctx->world. Collective over world. */
gaaw_status_t gaaw_comm_create_world(gaaw_context_t ctx, const char *name, gaaw_comm_t *comm);
/* A communicator over the members of parent with the same color, ordered by key.
 * Collective over parent. */
gaaw_status_t gaaw_comm_split(gaaw_comm_t parent, int color, int key, const char *name, gaaw_comm_t *child);
/* Replaces an MPI-backed *comm by an NCCL communicator over the same ranks when
 * every member runs the CUDA backend, NCCL is built, and the option `nccl` is on;
 * leaves it as it is otherwise. Collective over *comm. */
gaaw_status_t gaaw_comm_prefer_nccl(gaaw_comm_t *comm);
/* Frees *comm and sets it to NULL; NULL is a no-op. */
void gaaw_comm_destroy(gaaw_comm_t *comm);

#endif
