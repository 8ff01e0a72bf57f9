/* Insides of the MPI communicator backend, shared by its files:
 *   mpi_comm.c         create, split, destroy, host memory, scratch, the ops table
 *   mpi_reduce.c       local reductions (f32, i32 natively; bf16, f16 in f32)
 *   mpi_ring.c         ring reduce-scatter and ring all-gather over reused scratch
 *   mpi_collectives.c  all-reduce, reduce-scatter, all-gather, broadcast, all-to-all, barrier
 *   mpi_p2p.c          send, recv, and the paired exchange the ring is built of
 *   mpi_stage.c        the tensor operations of the table: device tensors staged
 *                      through host memory around the host algorithms
 * The algorithms work on host addresses; tensors in device memory (OpenCL, CUDA)
 * are copied into reused host staging buffers around them. Every MPI call is
 * non-blocking and waited for with gaaw_mpi_waitall against the communicator
 * deadline. */
#ifndef GAAW_BACKENDS_MPI_IMPL_H
#define GAAW_BACKENDS_MPI_IMPL_H

#include <mpi.h>

#include "backends/comm.h"
#include "backends/runtime/runtime.h"

/* Plain host memory, grown (never shrunk) as needed and kept for reuse. */
typedef struct {
  void *p;
  size_t bytes;
} gaaw_mpi_host_block;

typedef struct {
  MPI_Comm comm;          /* user-visible traffic: send/recv (user tags) and MPI collectives */
  MPI_Comm ring;          /* gaaw's own point-to-point steps, apart from user tags */
  gaaw_buffer_t scratch;  /* work memory of the ring, kept and reused (GAAW_MEM_COMMUNICATION) */
  size_t scratch_bytes;
  int64_t ring_bytes;     /* option allreduce_ring_bytes */
  /* Set once a tensor of this context turned out to be device memory: from then on
   * the scratch comes from host_scratch, since the context's buffers have no host
   * address. */
  int device_memory;
  gaaw_mpi_host_block host_scratch;
  gaaw_mpi_host_block stage; /* host copies of device tensors (mpi_stage.c) */
} gaaw_mpi_impl;

static inline gaaw_mpi_impl *gaaw_mpi_impl_of(gaaw_comm_t comm)
{
  return (gaaw_mpi_impl *)comm->impl;
}

/* At least bytes of host memory in b, grown (never shrunk) as needed; contents are
 * not kept when it grows. */
gaaw_status_t gaaw_mpi_host_reserve(gaaw_comm_t comm, gaaw_mpi_host_block *b, size_t bytes, void **p);
void gaaw_mpi_host_release(gaaw_mpi_host_block *b);
/* At least bytes of host scratch memory (for the ring), grown (never shrunk) as needed. */
gaaw_status_t gaaw_mpi_scratch(gaaw_comm_t comm, size_t bytes, void **p);
/* The MPI datatype that carries dtype's bits, and n as an MPI count (int). */
MPI_Datatype gaaw_mpi_type(gaaw_dtype_t dtype);
gaaw_status_t gaaw_mpi_count(gaaw_comm_t comm, int64_t n, int *count);

/* dst[i] = a[i] op b[i] for i < n; dst may be a or b (exactly), not overlap them
 * otherwise. 16-bit types are combined in f32 and rounded once per call. */
void gaaw_mpi_reduce(gaaw_dtype_t dtype, gaaw_reduce_op_t op, void *dst, const void *a, const void *b, int64_t n);
/* Conversions between a 16-bit (or f32) buffer and f32. */
void gaaw_mpi_to_f32(gaaw_dtype_t dtype, float *dst, const void *src, int64_t n);
void gaaw_mpi_from_f32(gaaw_dtype_t dtype, void *dst, const float *src, int64_t n);

/* Block i of total elements split over p ranks: the first total % p blocks hold one
 * element more. */
static inline void gaaw_mpi_block(int64_t total, int p, int i, int64_t *offset, int64_t *count)
{
  int64_t q = total / p, rem = total % p;
  *offset = i * q + (i < rem ? i : rem);
  *count = q + (i < rem ? 1 : 0);
}

/* Ring reduce-scatter: src holds total elements as comm->size blocks (gaaw_mpi_block);
 * out gets this rank's block reduced over the group. out may be exactly this rank's
 * block of src. Deterministic: block b is always combined in the order of the ring
 * starting after its owner. Collective over comm. */
gaaw_status_t gaaw_mpi_ring_reduce_scatter(gaaw_comm_t comm, const void *src, void *out, int64_t total,
                                           gaaw_dtype_t dtype, gaaw_reduce_op_t op);
/* Ring all-gather: buf holds total elements as blocks; this rank's block is in place
 * and the others are filled in. Collective over comm. */
gaaw_status_t gaaw_mpi_ring_allgather(gaaw_comm_t comm, void *buf, int64_t total, gaaw_dtype_t dtype);

/* A message of the ring travels as up to GAAW_MPI_MAX_SEGMENTS segments of about
 * GAAW_MPI_SEGMENT_BYTES, so that the receiver reduces one while the next arrive.
 * Both sides derive the split from the element count alone. */
#define GAAW_MPI_MAX_SEGMENTS 8
#define GAAW_MPI_SEGMENT_BYTES ((int64_t)1 << 20)
static inline int gaaw_mpi_segments(int64_t count, gaaw_dtype_t dtype)
{
  int64_t s = count * (int64_t)gaaw_dtype_size(dtype) / GAAW_MPI_SEGMENT_BYTES;
  return s < 1 ? 1 : s > GAAW_MPI_MAX_SEGMENTS ? GAAW_MPI_MAX_SEGMENTS : (int)s;
}
/* Called with each received segment: elements [offset, offset + count) of rbuf. */
typedef void (*gaaw_mpi_segment_fn)(void *arg, int64_t offset, int64_t count);

/* Sends scount elements to dst and receives rcount from src at once, on the ring
 * communicator, calling on_segment (may be NULL) as each received segment lands.
 * Not collective (dst and src must make the matching call). */
gaaw_status_t gaaw_mpi_exchange(gaaw_comm_t comm, const void *sbuf, int64_t scount, int dst, void *rbuf,
                                int64_t rcount, int src, gaaw_dtype_t dtype, gaaw_mpi_segment_fn on_segment,
                                void *arg, const char *what);

/* The operations on host addresses (mpi_collectives.c, mpi_p2p.c), with the
 * element counts of include/gaaw/comm.h: n per member for reduce-scatter (s holds
 * n * size) and all-gather (r holds n * size), the whole tensor otherwise. Send and
 * recv must be the same memory as the public function allows (in place) or not
 * overlap: anything else is GAAW_ERR_INVALID_ARG, before any traffic. */
gaaw_status_t gaaw_mpi_host_allreduce(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype,
                                      gaaw_reduce_op_t op);
gaaw_status_t gaaw_mpi_host_reduce_scatter(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype,
                                           gaaw_reduce_op_t op);
gaaw_status_t gaaw_mpi_host_allgather(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype);
gaaw_status_t gaaw_mpi_host_broadcast(gaaw_comm_t comm, void *p, int64_t n, gaaw_dtype_t dtype, int root);
gaaw_status_t gaaw_mpi_host_alltoall(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype);
gaaw_status_t gaaw_mpi_host_alltoallv(gaaw_comm_t comm, const void *s, const int64_t *send_counts, void *r,
                                      const int64_t *recv_counts, gaaw_dtype_t dtype);
gaaw_status_t gaaw_mpi_host_send(gaaw_comm_t comm, const void *p, int64_t n, gaaw_dtype_t dtype, int peer, int tag);
gaaw_status_t gaaw_mpi_host_recv(gaaw_comm_t comm, void *p, int64_t n, gaaw_dtype_t dtype, int peer, int tag);
gaaw_status_t gaaw_mpi_barrier(gaaw_comm_t comm);

/* Host addresses for one operation: its input (read) and output (written) tensor,
 * either may be NULL. A tensor with a host address is used in place; a device
 * tensor is copied into the communicator's staging memory (the input read in, the
 * output written back by gaaw_mpi_unstage). When input and output share memory
 * their union is staged as one range, so in place stays in place on the copy. */
/* t's host address, or NULL when t is NULL or device memory (asked of the backend
 * directly: gaaw_buffer_host_ptr would record an error for every device tensor). */
void *gaaw_mpi_host_addr(const gaaw_tensor_t *t);

/* Non-blocking send/recv of the table (mpi_p2p.c). */
gaaw_status_t gaaw_mpi_p2p_start(gaaw_comm_t comm, gaaw_comm_request_t req);
gaaw_status_t gaaw_mpi_p2p_complete(gaaw_comm_t comm, gaaw_comm_request_t req);
int gaaw_mpi_p2p_test(gaaw_comm_t comm, gaaw_comm_request_t req);

typedef struct {
  const void *in;
  void *out;
  const gaaw_tensor_t *write_back; /* the output, when out is a staged copy */
} gaaw_mpi_staged;
gaaw_status_t gaaw_mpi_stage(gaaw_comm_t comm, const gaaw_tensor_t *in, const gaaw_tensor_t *out,
                             gaaw_mpi_staged *st);
gaaw_status_t gaaw_mpi_unstage(gaaw_comm_t comm, const gaaw_mpi_staged *st);

/* The tensor operations of the table (mpi_stage.c): gaaw_mpi_stage, the host
 * algorithm, gaaw_mpi_unstage. */
gaaw_status_t gaaw_mpi_allreduce(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                 gaaw_reduce_op_t op);
gaaw_status_t gaaw_mpi_reduce_scatter(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                      gaaw_reduce_op_t op);
gaaw_status_t gaaw_mpi_allgather(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv);
gaaw_status_t gaaw_mpi_broadcast(gaaw_comm_t comm, gaaw_tensor_t *t, int root);
gaaw_status_t gaaw_mpi_alltoall(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv);
gaaw_status_t gaaw_mpi_alltoallv(gaaw_comm_t comm, const gaaw_tensor_t *send, const int64_t *send_counts,
                                 gaaw_tensor_t *recv, const int64_t *recv_counts);
gaaw_status_t gaaw_mpi_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag);
gaaw_status_t gaaw_mpi_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag);

#endif
