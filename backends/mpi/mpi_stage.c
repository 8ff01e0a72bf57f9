/* Device tensors through host memory: MPI needs host addresses, so a tensor in
 * device memory (OpenCL cl_mem, CUDA without CUDA-aware MPI) is read into the
 * communicator's reused staging memory, the host algorithm runs on the copy, and
 * the output is written back. Host tensors pass straight through. The traffic
 * counters stay in comm.c, which calls each operation once. */
#include "backends/mpi/mpi_impl.h"

static size_t tensor_bytes(const gaaw_tensor_t *t)
{
  return t ? (size_t)gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype) : 0;
}

/* (mpi_impl.h) */
void *gaaw_mpi_host_addr(const gaaw_tensor_t *t)
{
  if (!t) return NULL;
  const gaaw_device_ops *dev = t->buf->ctx->device;
  return dev->host_ptr ? dev->host_ptr(t->buf->handle, t->offset) : NULL;
}

/* Whether a and b are non-empty ranges of the same buffer that overlap. */
static int share_memory(const gaaw_tensor_t *a, const gaaw_tensor_t *b)
{
  size_t ab = tensor_bytes(a), bb = tensor_bytes(b);
  return a && b && a->buf == b->buf && ab && bb && a->offset < b->offset + bb && b->offset < a->offset + ab;
}

/* in and out overlap in one buffer: their union is staged as one range, so the
 * host algorithm sees the same relative addresses (and checks them as on host). */
static gaaw_status_t stage_union(gaaw_comm_t comm, const gaaw_tensor_t *in, const gaaw_tensor_t *out,
                                 gaaw_mpi_staged *st)
{
  gaaw_context_t ctx = comm->ctx;
  size_t lo = in->offset < out->offset ? in->offset : out->offset;
  size_t in_end = in->offset + tensor_bytes(in), out_end = out->offset + tensor_bytes(out);
  size_t hi = in_end > out_end ? in_end : out_end;
  char *base;
  GAAW_CHECK(gaaw_mpi_host_reserve(comm, &gaaw_mpi_impl_of(comm)->stage, hi - lo, (void **)&base));
  GAAW_CHECK(gaaw_buffer_read(ctx, in->buf, lo, base, hi - lo));
  st->in = base + (in->offset - lo);
  st->out = base + (out->offset - lo);
  st->write_back = out;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_stage(gaaw_comm_t comm, const gaaw_tensor_t *in, const gaaw_tensor_t *out,
                             gaaw_mpi_staged *st)
{
  gaaw_context_t ctx = comm->ctx;
  void *in_host = gaaw_mpi_host_addr(in), *out_host = gaaw_mpi_host_addr(out);
  int stage_in = in && !in_host, stage_out = out && !out_host;
  st->in = in_host;
  st->out = out_host;
  st->write_back = NULL;
  if (!stage_in && !stage_out) return GAAW_SUCCESS;
  gaaw_mpi_impl_of(comm)->device_memory = 1; /* scratch from host memory from now on */
  if (stage_in && stage_out && share_memory(in, out)) {
    GAAW_CHECK(stage_union(comm, in, out, st));
    return GAAW_SUCCESS;
  }
  /* staging memory: [input copy, padded to 64 bytes][output copy] */
  size_t in_room = stage_in ? (tensor_bytes(in) + 63) / 64 * 64 : 0;
  char *base;
  GAAW_CHECK(gaaw_mpi_host_reserve(comm, &gaaw_mpi_impl_of(comm)->stage, in_room + (stage_out ? tensor_bytes(out) : 0),
                                   (void **)&base));
  if (stage_in) {
    GAAW_CHECK(gaaw_buffer_read(ctx, in->buf, in->offset, base, tensor_bytes(in)));
    st->in = base;
  }
  if (stage_out) {
    st->out = base + in_room;
    st->write_back = out;
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_unstage(gaaw_comm_t comm, const gaaw_mpi_staged *st)
{
  gaaw_context_t ctx = comm->ctx;
  const gaaw_tensor_t *t = st->write_back;
  if (t) GAAW_CHECK(gaaw_buffer_write(ctx, t->buf, t->offset, st->out, tensor_bytes(t)));
  return GAAW_SUCCESS;
}

/* Each operation: its input and output tensors staged, the host algorithm, the
 * output written back. In place (send == recv) stays in place on the copy. */

gaaw_status_t gaaw_mpi_allreduce(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                 gaaw_reduce_op_t op)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_staged st;
  GAAW_CHECK(gaaw_mpi_stage(comm, send, recv, &st));
  GAAW_CHECK(gaaw_mpi_host_allreduce(comm, st.in, st.out, gaaw_tensor_numel(recv), recv->dtype, op));
  GAAW_CHECK(gaaw_mpi_unstage(comm, &st));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_reduce_scatter(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                      gaaw_reduce_op_t op)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_staged st;
  GAAW_CHECK(gaaw_mpi_stage(comm, send, recv, &st));
  GAAW_CHECK(gaaw_mpi_host_reduce_scatter(comm, st.in, st.out, gaaw_tensor_numel(recv), recv->dtype, op));
  GAAW_CHECK(gaaw_mpi_unstage(comm, &st));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_allgather(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_staged st;
  GAAW_CHECK(gaaw_mpi_stage(comm, send, recv, &st));
  GAAW_CHECK(gaaw_mpi_host_allgather(comm, st.in, st.out, gaaw_tensor_numel(send), send->dtype));
  GAAW_CHECK(gaaw_mpi_unstage(comm, &st));
  return GAAW_SUCCESS;
}

/* The root only reads t, the others only write it. */
gaaw_status_t gaaw_mpi_broadcast(gaaw_comm_t comm, gaaw_tensor_t *t, int root)
{
  gaaw_context_t ctx = comm->ctx;
  int is_root = comm->rank == root;
  gaaw_mpi_staged st;
  GAAW_CHECK(gaaw_mpi_stage(comm, is_root ? t : NULL, is_root ? NULL : t, &st));
  void *p = is_root ? (void *)st.in : st.out;
  GAAW_CHECK(gaaw_mpi_host_broadcast(comm, p, gaaw_tensor_numel(t), t->dtype, root));
  GAAW_CHECK(gaaw_mpi_unstage(comm, &st));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_alltoall(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_staged st;
  GAAW_CHECK(gaaw_mpi_stage(comm, send, recv, &st));
  GAAW_CHECK(gaaw_mpi_host_alltoall(comm, st.in, st.out, gaaw_tensor_numel(send), send->dtype));
  GAAW_CHECK(gaaw_mpi_unstage(comm, &st));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_alltoallv(gaaw_comm_t comm, const gaaw_tensor_t *send, const int64_t *send_counts,
                                 gaaw_tensor_t *recv, const int64_t *recv_counts)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_staged st;
  GAAW_CHECK(gaaw_mpi_stage(comm, send, recv, &st));
  GAAW_CHECK(gaaw_mpi_host_alltoallv(comm, st.in, send_counts, st.out, recv_counts, send->dtype));
  GAAW_CHECK(gaaw_mpi_unstage(comm, &st));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_staged st;
  GAAW_CHECK(gaaw_mpi_stage(comm, t, NULL, &st));
  GAAW_CHECK(gaaw_mpi_host_send(comm, st.in, gaaw_tensor_numel(t), t->dtype, peer, tag));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_mpi_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  gaaw_mpi_staged st;
  GAAW_CHECK(gaaw_mpi_stage(comm, NULL, t, &st));
  GAAW_CHECK(gaaw_mpi_host_recv(comm, st.out, gaaw_tensor_numel(t), t->dtype, peer, tag));
  GAAW_CHECK(gaaw_mpi_unstage(comm, &st));
  return GAAW_SUCCESS;
}
