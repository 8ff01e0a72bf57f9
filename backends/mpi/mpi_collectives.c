/* Collectives of the MPI backend. Large all-reduces, every reduce-scatter and
 * all-gather run gaaw's ring (mpi_ring.c) over reused scratch; small f32/i32
 * all-reduces, broadcast, all-to-all and barrier are MPI's non-blocking collectives.
 * Every wait has the communicator's deadline; a collective that times out is
 * abandoned (MPI cannot cancel one) and comm.c aborts the communicator. */
#include <string.h>

#include "backends/mpi/mpi_impl.h"

/* Send and recv are the same memory (in place, as backends/comm.c defines it for
 * each collective) or do not overlap at all: comm.c refuses every other overlap
 * before the call, for every backend, and staging keeps the relative positions. */

/* Waits for a collective request; on timeout it is left behind (see the top). */
static gaaw_status_t wait_coll(gaaw_comm_t comm, MPI_Request *req, const char *what)
{
  return gaaw_mpi_wait(comm->ctx, req, what);
}

static MPI_Op mpi_op(gaaw_reduce_op_t op)
{
  return op == GAAW_SUM ? MPI_SUM : MPI_MAX;
}

/* Small all-reduce through MPI_Iallreduce: f32 and i32 directly, 16-bit types
 * widened to f32 in scratch (so they too are combined in f32 and rounded once). */
static gaaw_status_t allreduce_small(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype,
                                     gaaw_reduce_op_t op)
{
  gaaw_context_t ctx = comm->ctx;
  MPI_Comm mc = gaaw_mpi_impl_of(comm)->comm;
  int count;
  GAAW_CHECK(gaaw_mpi_count(comm, n, &count));
  MPI_Request req;
  if (dtype == GAAW_F32 || dtype == GAAW_I32) {
    GAAW_MPI_CHECK(ctx, MPI_Iallreduce(s == r ? MPI_IN_PLACE : s, r, count, gaaw_mpi_type(dtype), mpi_op(op), mc,
                                       &req));
    GAAW_CHECK(wait_coll(comm, &req, "all-reduce"));
    return GAAW_SUCCESS;
  }
  float *w;
  GAAW_CHECK(gaaw_mpi_scratch(comm, (size_t)n * sizeof(float), (void **)&w));
  gaaw_mpi_to_f32(dtype, w, s, n);
  GAAW_MPI_CHECK(ctx, MPI_Iallreduce(MPI_IN_PLACE, w, count, MPI_FLOAT, mpi_op(op), mc, &req));
  GAAW_CHECK(wait_coll(comm, &req, "all-reduce"));
  gaaw_mpi_from_f32(dtype, r, w, n);
  return GAAW_SUCCESS;
}

size_t gaaw_mpi_scratch_bytes(gaaw_comm_op_t op, int64_t n, gaaw_dtype_t dtype, int p, int64_t ring_bytes)
{
  size_t es = gaaw_dtype_size(dtype);
  int64_t total = op == GAAW_COMM_REDUCE_SCATTER ? n * p : n;
  if (p <= 1 || n == 0) return 0;
  if (op == GAAW_COMM_ALLREDUCE && ((int64_t)(n * (int64_t)es) < ring_bytes || n < p)) /* allreduce_small */
    return dtype == GAAW_F32 || dtype == GAAW_I32 ? 0 : (size_t)n * sizeof(float);
  if (op != GAAW_COMM_ALLREDUCE && op != GAAW_COMM_REDUCE_SCATTER) return 0; /* the ring all-gather works in place */
  return 2 * (size_t)(total / p + (total % p ? 1 : 0)) * es; /* the ring's two slots */
}

gaaw_status_t gaaw_mpi_host_allreduce(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype,
                                      gaaw_reduce_op_t op)
{
  gaaw_context_t ctx = comm->ctx;
  if (n == 0) return GAAW_SUCCESS;
  /* The ring moves 2 (p-1)/p of the tensor per rank in 2 (p-1) steps; below the
   * threshold the step count matters more, and MPI's algorithms win (measured on 2
   * cores with bench/allreduce: MPI ahead at 4 KiB, even at 16 KiB, the ring ahead
   * from 64 KiB). */
  if ((int64_t)(n * gaaw_dtype_size(dtype)) < gaaw_mpi_impl_of(comm)->ring_bytes || n < comm->size) {
    GAAW_CHECK(allreduce_small(comm, s, r, n, dtype, op));
    return GAAW_SUCCESS;
  }
  /* (n) = reduce-scatter into this rank's block of recv, then all-gather of recv. */
  int64_t off, cnt;
  gaaw_mpi_block(n, comm->size, comm->rank, &off, &cnt);
  GAAW_CHECK(gaaw_mpi_ring_reduce_scatter(comm, s, (char *)r + (size_t)off * gaaw_dtype_size(dtype), n, dtype, op));
  GAAW_CHECK(gaaw_mpi_ring_allgather(comm, r, n, dtype));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_host_reduce_scatter(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype,
                                           gaaw_reduce_op_t op)
{
  gaaw_context_t ctx = comm->ctx;
  if (n == 0) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_mpi_ring_reduce_scatter(comm, s, r, n * comm->size, dtype, op));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_host_allgather(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype)
{
  gaaw_context_t ctx = comm->ctx;
  size_t es = gaaw_dtype_size(dtype), own = (size_t)comm->rank * (size_t)n * es; /* r: (size, n) */
  if (n == 0) return GAAW_SUCCESS;
  if (s != (const char *)r + own) memcpy((char *)r + own, s, (size_t)n * es);
  GAAW_CHECK(gaaw_mpi_ring_allgather(comm, r, n * comm->size, dtype));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_host_broadcast(gaaw_comm_t comm, void *p, int64_t n, gaaw_dtype_t dtype, int root)
{
  gaaw_context_t ctx = comm->ctx;
  int count;
  GAAW_CHECK(gaaw_mpi_count(comm, n, &count));
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Ibcast(p, count, gaaw_mpi_type(dtype), root, gaaw_mpi_impl_of(comm)->comm, &req));
  GAAW_CHECK(wait_coll(comm, &req, "broadcast"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_host_alltoall(gaaw_comm_t comm, const void *s, void *r, int64_t n, gaaw_dtype_t dtype)
{
  gaaw_context_t ctx = comm->ctx;
  int count;
  GAAW_CHECK(gaaw_mpi_count(comm, n / comm->size, &count));
  MPI_Datatype type = gaaw_mpi_type(dtype);
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Ialltoall(s == r ? MPI_IN_PLACE : s, count, type, r, count, type,
                                    gaaw_mpi_impl_of(comm)->comm, &req));
  GAAW_CHECK(wait_coll(comm, &req, "all-to-all"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_host_alltoallv(gaaw_comm_t comm, const void *s, const int64_t *send_counts, void *r,
                                      const int64_t *recv_counts, gaaw_dtype_t dtype)
{
  gaaw_context_t ctx = comm->ctx;
  const int p = comm->size;
  int sc[p], sd[p], rc[p], rd[p];
  int64_t at_s = 0, at_r = 0;
  for (int j = 0; j < p; j++) { /* counts and displacements in MPI's int */
    GAAW_CHECK(gaaw_mpi_count(comm, send_counts[j], &sc[j]));
    GAAW_CHECK(gaaw_mpi_count(comm, at_s, &sd[j]));
    GAAW_CHECK(gaaw_mpi_count(comm, recv_counts[j], &rc[j]));
    GAAW_CHECK(gaaw_mpi_count(comm, at_r, &rd[j]));
    at_s += send_counts[j], at_r += recv_counts[j];
  }
  MPI_Datatype type = gaaw_mpi_type(dtype);
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Ialltoallv(s, sc, sd, type, r, rc, rd, type, gaaw_mpi_impl_of(comm)->comm, &req));
  GAAW_CHECK(wait_coll(comm, &req, "all-to-all (variable)"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_barrier(gaaw_comm_t comm)
{
  gaaw_context_t ctx = comm->ctx;
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Ibarrier(gaaw_mpi_impl_of(comm)->comm, &req));
  GAAW_CHECK(wait_coll(comm, &req, "barrier"));
  return GAAW_SUCCESS;
}
