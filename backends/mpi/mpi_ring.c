/* Ring reduce-scatter and ring all-gather: p - 1 steps each, every rank sending one
 * block to its right neighbour and receiving one from its left per step, so each
 * rank moves (p - 1)/p of the tensor per phase, the bandwidth optimum. Partial sums
 * travel through two scratch slots that the communicator keeps, so no call touches
 * fresh memory (MPICH allocates temporaries per large MPI_Allreduce, and first
 * touch of their pages dominates on these machines). */
#include <string.h>

#include "backends/mpi/mpi_impl.h"

/* (a mod p) for any int a. */
static inline int wrap_rank(int a, int p)
{
  return ((a % p) + p) % p;
}

/* What a received segment of a reduce-scatter step is combined with. */
typedef struct {
  gaaw_dtype_t dtype;
  gaaw_reduce_op_t op;
  size_t es;
  const char *mine; /* this rank's contribution to the block */
  char *in;         /* the received partial */
  char *dst;        /* where the combination goes (in, or the output at the last step) */
} combine_args;

static void combine_segment(void *arg, int64_t off, int64_t cnt)
{
  combine_args *c = arg;
  size_t at = (size_t)off * c->es;
  gaaw_mpi_reduce(c->dtype, c->op, c->dst + at, c->mine + at, c->in + at, cnt);
}

gaaw_status_t gaaw_mpi_ring_reduce_scatter(gaaw_comm_t comm, const void *src, void *out, int64_t total,
                                           gaaw_dtype_t dtype, gaaw_reduce_op_t op)
{
  gaaw_context_t ctx = comm->ctx;
  const int p = comm->size, r = comm->rank;
  const size_t es = gaaw_dtype_size(dtype);
  const char *s = src;
  int64_t off;
  if (p == 1) {
    if (out != src) memcpy(out, src, (size_t)total * es);
    return GAAW_SUCCESS;
  }
  /* slot[0], slot[1]: ceil(total / p) elements each. */
  int64_t max_block = total / p + (total % p ? 1 : 0);
  char *slot[2];
  GAAW_CHECK(gaaw_mpi_scratch(comm, 2 * (size_t)max_block * es, (void **)&slot[0]));
  slot[1] = slot[0] + (size_t)max_block * es;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  /* Step k sends the partial of block r-k-1 and receives that of block r-k-2, adding
   * this rank's own contribution; after p-1 steps block r is complete. */
  for (int k = 0; k < p - 1; k++) {
    int send_block = wrap_rank(r - k - 1, p), recv_block = wrap_rank(r - k - 2, p);
    int64_t send_count, recv_off, recv_count;
    gaaw_mpi_block(total, p, send_block, &off, &send_count);
    const void *sbuf = k == 0 ? s + (size_t)off * es : slot[(k - 1) & 1];
    gaaw_mpi_block(total, p, recv_block, &recv_off, &recv_count);
    combine_args c = {dtype, op, es, s + (size_t)recv_off * es, slot[k & 1], k == p - 2 ? out : slot[k & 1]};
    GAAW_CHECK(gaaw_mpi_exchange(comm, sbuf, send_count, right, c.in, recv_count, left, dtype, combine_segment, &c,
                                 "ring reduce-scatter step"));
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_ring_allgather(gaaw_comm_t comm, void *buf, int64_t total, gaaw_dtype_t dtype)
{
  gaaw_context_t ctx = comm->ctx;
  const int p = comm->size, r = comm->rank;
  const size_t es = gaaw_dtype_size(dtype);
  char *b = buf;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  /* Step k forwards block r-k (this rank's own at k = 0) and receives block r-k-1. */
  for (int k = 0; k < p - 1; k++) {
    int64_t soff, scount, roff, rcount;
    gaaw_mpi_block(total, p, wrap_rank(r - k, p), &soff, &scount);
    gaaw_mpi_block(total, p, wrap_rank(r - k - 1, p), &roff, &rcount);
    GAAW_CHECK(gaaw_mpi_exchange(comm, b + (size_t)soff * es, scount, right, b + (size_t)roff * es, rcount, left,
                                 dtype, NULL, NULL, "ring all-gather step"));
  }
  return GAAW_SUCCESS;
}
