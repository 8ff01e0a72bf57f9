/* The NCCL communicator backend: collectives and point-to-point on CUDA buffers,
 * among ranks that all run the CUDA backend (one GPU per rank).
 *
 * Communicators are non-blocking (ncclConfig_t.blocking = 0). Operations run on the
 * context's communication stream after the work queued so far on the compute
 * stream; a blocking one returns once it is queued, an event recorded after it and
 * the compute stream made to wait for that event, so the GPU is never drained:
 * later kernels and buffer reads see its result. Its buffers are marked as used by
 * the communication stream, so the caching allocator keeps them until the stream
 * is past them. Barrier alone also waits on the host.
 *
 * Each operation has one deadline, ctx->comm_timeout after its call began, over
 * every phase (enqueue, completion). The operations in flight are polled
 * (cudaEventQuery, ncclCommGetAsyncError, the context's abort state) at the next
 * NCCL call and in the CUDA backend's host waits (gaaw_synchronize, buffer reads
 * and writes), so an error or a passed deadline is reported there: the oldest
 * operation past its deadline is named as the stuck one, and every NCCL
 * communicator of the context is aborted (ncclCommAbort; they share one stream)
 * through gaaw_comm_mark_aborted, which aborts the context and tells every rank.
 *
 * Differences from the MPI backend: tags of send/recv are not matched (NCCL orders
 * point-to-point by call order); 16-bit reductions accumulate in NCCL's own way. */
#ifndef GAAW_NCCL_COMM_H
#define GAAW_NCCL_COMM_H

#include "backends/comm.h"

extern const gaaw_comm_ops gaaw_nccl_comm_ops;

/* All-to-all in place (send is recv) is correct: the send blocks are copied to
 * scratch first.
 *
 * An NCCL communicator (*nccl_comm, named name) over the members of mpi_comm, an
 * MPI-backed communicator of a context on the CUDA backend, with the same ranks.
 * Its rank 0 creates the NCCL unique id and broadcasts it over mpi_comm's MPI
 * communicator. Free it with gaaw_comm_destroy. Collective over mpi_comm. */
gaaw_status_t gaaw_nccl_comm_from_mpi(gaaw_comm_t mpi_comm, const char *name, gaaw_comm_t *nccl_comm);

#endif
