/* gaaw communicators: collectives and point-to-point on tensors, over one group of
 * ranks (get one from gaaw_topology_comm). Implemented by a communicator backend
 * (MPI, staging device tensors through host memory; NCCL among CUDA ranks). Every
 * call has a deadline (tunable comm_timeout, GAAW_COMM_TIMEOUT, seconds; 0 = none):
 * when a peer does not take part in time the call returns GAAW_ERR_TIMEOUT instead
 * of hanging. After a timeout or any other failed collective the ranks are out of
 * step, so the communicator and its whole context are aborted: every rank of the
 * context is told at once, and every later collective or send/recv, on any
 * communicator of the context and on every rank, fails with GAAW_ERR_COMM naming
 * the original failure. gaaw_finalize still works. (Wrong arguments refused before
 * any traffic abort nothing.)
 *
 * Every collective is collective over the communicator's group: all members call it
 * in the same order with the same counts, dtype, op and root. */
#ifndef GAAW_COMM_H
#define GAAW_COMM_H

#include <stdint.h>
#include "gaaw/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gaaw_comm_s *gaaw_comm_t;

typedef enum { GAAW_SUM = 0, GAAW_MAX = 1 } gaaw_reduce_op_t;

/* Operations, for the traffic counters. */
#define GAAW_COMM_OP_LIST(X)          \
  X(GAAW_COMM_ALLREDUCE, 0, "allreduce")          \
  X(GAAW_COMM_REDUCE_SCATTER, 1, "reduce_scatter") \
  X(GAAW_COMM_ALLGATHER, 2, "allgather")          \
  X(GAAW_COMM_BROADCAST, 3, "broadcast")          \
  X(GAAW_COMM_SEND, 4, "send")                    \
  X(GAAW_COMM_RECV, 5, "recv")                    \
  X(GAAW_COMM_ALLTOALL, 6, "alltoall")            \
  X(GAAW_COMM_BARRIER, 7, "barrier")              \
  X(GAAW_COMM_ALLTOALLV, 8, "alltoallv")
#define GAAW_COMM_OP_ENTRY(name, value, text) name = value,
typedef enum { GAAW_COMM_OP_LIST(GAAW_COMM_OP_ENTRY) } gaaw_comm_op_t;
#undef GAAW_COMM_OP_ENTRY
#define GAAW_COMM_OP_COUNT 9

/* The alias rule, on every backend: send and recv of a collective are disjoint, or
 * in place as each collective below defines it; any other overlap of views of one
 * buffer is GAAW_ERR_INVALID_ARG (saying "overlap"), before any traffic.
 *
 * recv = reduction over the group of send (numel n each). send == recv (same buffer
 * and offset) is in place. Sum for f32/bf16/f16/i32 (16-bit types reduced in f32),
 * max likewise. */
gaaw_status_t gaaw_comm_allreduce(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                  gaaw_reduce_op_t op);
/* send: n * size elements; recv: n. Member r gets the reduction of block r. In
 * place: recv is block r of send. */
gaaw_status_t gaaw_comm_reduce_scatter(gaaw_comm_t comm, const gaaw_tensor_t *send,
                                       gaaw_tensor_t *recv, gaaw_reduce_op_t op);
/* send: n elements; recv: n * size, block r from member r. In place: send is
 * block r of recv. */
gaaw_status_t gaaw_comm_allgather(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv);
/* t on root is copied to t on every member. */
gaaw_status_t gaaw_comm_broadcast(gaaw_comm_t comm, gaaw_tensor_t *t, int root);
/* Point-to-point; peer is a rank in this communicator, tag >= 0. Not collective:
 * the matching recv/send must be posted by peer. */
gaaw_status_t gaaw_comm_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag);
gaaw_status_t gaaw_comm_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag);
/* send and recv: n * size elements; block j of send goes to member j, block i of recv
 * comes from member i. In place: send == recv (NCCL stages send through scratch). */
gaaw_status_t gaaw_comm_alltoall(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv);
/* The all-to-all of variable blocks. send holds one block per member, one after the
 * other from its start in member order: send_counts[j] elements for member j; recv
 * receives them likewise, recv_counts[i] elements from member i. The counts must
 * agree pairwise (what member i sends member j is what j expects from i): exchange
 * them first with gaaw_comm_alltoall_counts. Counts >= 0, their sums within send and
 * recv; send and recv must not overlap (no in-place form). */
gaaw_status_t gaaw_comm_alltoallv(gaaw_comm_t comm, const gaaw_tensor_t *send, const int64_t *send_counts,
                                  gaaw_tensor_t *recv, const int64_t *recv_counts);
/* An all-to-all of host integers: send (n * size) holds n for each member (block j
 * goes to member j), recv (n * size) gets block i from member i. Over MPI on the
 * host whatever the communicator's backend (the counts that precede an alltoallv,
 * under the same deadline); counted as an all-to-all of 8 n size bytes. */
gaaw_status_t gaaw_comm_alltoall_counts(gaaw_comm_t comm, int64_t n, const int64_t *send, int64_t *recv);
gaaw_status_t gaaw_comm_barrier(gaaw_comm_t comm);

/* Non-blocking collectives: the same operations, started now and completed by
 * gaaw_comm_wait, so that communication can overlap the computation queued in
 * between. Until the wait, the caller must not write send or read recv. Members
 * start them in the same order, interleaved with the blocking calls on the same
 * communicator in the same way.
 *   NCCL queues the operation on the device's communication stream, behind what
 *   the compute stream has queued so far, and returns; the wait orders the
 *   compute stream after it and returns too. Its end is seen later, as for
 *   NCCL's blocking operations (which also return once queued and ordered): the
 *   next NCCL call and the host waits (gaaw_synchronize, buffer reads and writes)
 *   poll what is in flight against its deadline and NCCL's asynchronous errors.
 *   MPI runs it when it is waited for, or when the communicator is next used by a
 *   blocking call, in the order the operations were started: the host backend is
 *   synchronous, so there is no overlap there, but the contract is the same.
 * Traffic counters count an operation when it is started. A request must be waited
 * for before its communicator is destroyed. Collective over the communicator's
 * group (start and wait alike). */
typedef struct gaaw_comm_request_s *gaaw_comm_request_t;
gaaw_status_t gaaw_comm_allreduce_start(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                        gaaw_reduce_op_t op, gaaw_comm_request_t *req);
gaaw_status_t gaaw_comm_reduce_scatter_start(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                             gaaw_reduce_op_t op, gaaw_comm_request_t *req);
gaaw_status_t gaaw_comm_allgather_start(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                        gaaw_comm_request_t *req);
/* Non-blocking point-to-point, for pipelines: the send or receive is posted now
 * and completed by gaaw_comm_wait, so that both neighbours can post before either
 * waits. Until the wait the caller must not write a send's tensor or read a
 * receive's. The deadline (comm_timeout) runs from the wait: a peer that never
 * posts the matching call is GAAW_ERR_TIMEOUT naming the peer and tag, and aborts
 * the context like any failed collective. Not collective: only the two peers take
 * part. The MPI backend stages device tensors through host memory of their own;
 * the NCCL backend holds started sends and receives until the first of them is
 * waited for (or the communicator's next operation) and queues them then as one
 * NCCL group, so that both directions of an exchange cannot block each other
 * (compiled, not yet run on a GPU). */
gaaw_status_t gaaw_comm_send_start(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag,
                                   gaaw_comm_request_t *req);
gaaw_status_t gaaw_comm_recv_start(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag, gaaw_comm_request_t *req);
/* Completes *req (recv is then usable by everything this context runs next) and
 * sets *req to NULL; *req == NULL is a no-op. A failed operation reports its error
 * here (on NCCL: here or at the next call that polls it, see above), and the
 * communicator is aborted. */
gaaw_status_t gaaw_comm_wait(gaaw_comm_request_t *req);

/* This rank's index in the group and the group's size. Not collective. */
gaaw_status_t gaaw_comm_rank(gaaw_comm_t comm, int *rank);
gaaw_status_t gaaw_comm_size(gaaw_comm_t comm, int *size);
/* Name of the communicator backend ("mpi", "nccl"). Not collective. */
gaaw_status_t gaaw_comm_backend(gaaw_comm_t comm, const char **name);

/* Traffic counters of this rank on this communicator since creation or the last
 * reset: calls and bytes of the op. Bytes count the logical volume of the tensor
 * the collective is about (DESIGN.md section 10): an all-reduce of n elements counts
 * as the reduce-scatter plus all-gather it equals (2 n), a reduce-scatter or
 * all-gather the full n * size tensor, a broadcast, send or recv its tensor, an
 * all-to-all its send tensor, an alltoallv the elements it sends (its own block
 * included). Not collective. */
gaaw_status_t gaaw_comm_stats(gaaw_comm_t comm, gaaw_comm_op_t op, uint64_t *calls, uint64_t *bytes);
gaaw_status_t gaaw_comm_stats_reset(gaaw_comm_t comm);
const char *gaaw_comm_op_name(gaaw_comm_op_t op);

#ifdef __cplusplus
}
#endif
#endif
