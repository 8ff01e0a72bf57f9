/* The NCCL communicator backend: collectives and point-to-point on CUDA buffers,
 * among ranks that all run the CUDA backend (one GPU per rank).
 *
 * Communicators are non-blocking (ncclConfig_t.blocking = 0): creation and every
 * operation are polled (ncclCommGetAsyncError, cudaStreamQuery) against the
 * deadline ctx->comm_timeout; on expiry the NCCL communicator is aborted
 * (ncclCommAbort) and the call returns GAAW_ERR_TIMEOUT. Operations run on the
 * context's communication stream after the work queued so far on the compute stream,
 * and return when they are complete.
 *
 * Differences from the MPI backend: tags of send/recv are not matched (NCCL orders
 * point-to-point by call order); 16-bit reductions accumulate in NCCL's own way. */
#ifndef GAAW_NCCL_COMM_H
#define GAAW_NCCL_COMM_H

#include "backends/comm.h"

extern const gaaw_comm_ops gaaw_nccl_comm_ops;

/* An NCCL communicator (*nccl_comm, named name) over the members of mpi_comm, an
 * MPI-backed communicator of a context on the CUDA backend, with the same ranks.
 * Its rank 0 creates the NCCL unique id and broadcasts it over mpi_comm's MPI
 * communicator. Free it with gaaw_comm_destroy. Collective over mpi_comm. */
gaaw_status_t gaaw_nccl_comm_from_mpi(gaaw_comm_t mpi_comm, const char *name, gaaw_comm_t *nccl_comm);

#endif
