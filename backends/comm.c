/* The public communicator functions: argument checks, the aborted state, traffic
 * counters, then the backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "backends/comm.h"
#include "backends/mpi/mpi_handle.h"
#include "backends/runtime/abort.h"
#include "backends/runtime/context_impl.h"
#include "backends/runtime/runtime.h"
#include "backends/runtime/log.h"
#include "backends/runtime/trace.h"
#ifdef GAAW_HAVE_NCCL
#include "backends/cuda/cuda.h"
#include "backends/nccl/nccl_comm.h"
#endif

const char *gaaw_comm_op_name(gaaw_comm_op_t op)
{
#define GAAW_COMM_OP_NAME_CASE(name, value, text) \
  case value: return text;
  switch ((int)op) { GAAW_COMM_OP_LIST(GAAW_COMM_OP_NAME_CASE) }
#undef GAAW_COMM_OP_NAME_CASE
  return "invalid";
}

static gaaw_status_t new_comm(gaaw_context_t ctx, const gaaw_comm_ops *ops, const char *name, gaaw_comm_t *out)
{
  gaaw_comm_t c = calloc(1, sizeof *c);
  if (!c) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a communicator");
  c->ctx = ctx;
  c->ops = ops;
  c->control = MPI_COMM_NULL;
  strncpy(c->name, name ? name : "", sizeof c->name - 1);
  *out = c;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_attach_control(gaaw_comm_t comm, MPI_Comm base)
{
  GAAW_MPI_CHECK(comm->ctx, MPI_Comm_dup(base, &comm->control));
  MPI_Comm_set_errhandler(comm->control, MPI_ERRORS_RETURN);
  return GAAW_SUCCESS;
}

/* The child's control communicator: the parent's, split the same way. */
static gaaw_status_t split_control(gaaw_comm_t parent, int color, int key, gaaw_comm_t child)
{
  GAAW_MPI_CHECK(parent->ctx, MPI_Comm_split(parent->control, color, key, &child->control));
  MPI_Comm_set_errhandler(child->control, MPI_ERRORS_RETURN);
  return GAAW_SUCCESS;
}

void gaaw_comm_mark_aborted(gaaw_comm_t comm)
{
  comm->aborted = 1;
  gaaw_context_abort(comm->ctx);
}

gaaw_status_t gaaw_comm_create_world(gaaw_context_t ctx, const char *name, gaaw_comm_t *comm)
{
  GAAW_CHECK(new_comm(ctx, &gaaw_mpi_comm_ops, name, comm));
  gaaw_status_t st = (*comm)->ops->create_world(*comm);
  if (st == GAAW_SUCCESS) st = gaaw_comm_attach_control(*comm, ctx->world);
  if (st != GAAW_SUCCESS) {
    gaaw_comm_destroy(comm);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_split(gaaw_comm_t parent, int color, int key, const char *name, gaaw_comm_t *child)
{
  gaaw_context_t ctx = parent->ctx;
  GAAW_CHECK(new_comm(ctx, parent->ops, name, child));
  gaaw_status_t st = parent->ops->split(parent, color, key, *child);
  if (st == GAAW_SUCCESS) st = split_control(parent, color, key, *child);
  int err = st == GAAW_SUCCESS ? MPI_Allreduce(&ctx->rank, &(*child)->first_world_rank, 1, MPI_INT, MPI_MIN,
                                               (*child)->control)
                               : MPI_SUCCESS;
  if (err != MPI_SUCCESS) st = gaaw_mpi_status(ctx, err, __FILE__, __LINE__, __func__, "naming the group");
  if (st != GAAW_SUCCESS) {
    gaaw_comm_destroy(child);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

int gaaw_comm_devices_shared(int n, const void *ids, size_t id_bytes, int *first, int *second)
{
  const unsigned char *p = ids;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (memcmp(p + (size_t)i * id_bytes, p + (size_t)j * id_bytes, id_bytes) == 0) {
        if (first) *first = i;
        if (second) *second = j;
        return 1;
      }
  return 0;
}

gaaw_nccl_choice gaaw_comm_nccl_choice(int all_want, int any_shared)
{
  if (!all_want) return GAAW_NCCL_NOT_WANTED;
  return any_shared ? GAAW_NCCL_SHARED_DEVICE : GAAW_NCCL_USE;
}

/* This rank's device identity for the shared-device check: the GPU's UUID on the
 * CUDA backend (so ranks that see different GPUs as device 0 through
 * CUDA_VISIBLE_DEVICES differ), zeros elsewhere (such ranks never want NCCL). */
static void device_identity(gaaw_context_t ctx, unsigned char id[GAAW_DEVICE_ID_BYTES])
{
  memset(id, 0, GAAW_DEVICE_ID_BYTES);
#ifdef GAAW_HAVE_NCCL
  if (gaaw_cuda_is_context(ctx) && gaaw_cuda_device_uuid(ctx, id) != GAAW_SUCCESS) {
    /* no UUID: the device index stands in for it */
    memset(id, 0, GAAW_DEVICE_ID_BYTES);
    memcpy(id, &ctx->device_index, sizeof ctx->device_index);
  }
#else
  (void)ctx;
#endif
}

/* Whether two members of mc on this node that want NCCL use one device
 * (collective over mc: every member takes part, whatever it wants; one that does
 * not want NCCL decides for MPI anyway, so its device is not compared). */
static gaaw_status_t shared_on_node(gaaw_context_t ctx, gaaw_comm_t comm, MPI_Comm mc, int want, int *shared)
{
  MPI_Comm node;
  GAAW_MPI_CHECK(ctx, MPI_Comm_split_type(mc, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int n = 1, me = 0;
  MPI_Comm_size(node, &n);
  MPI_Comm_rank(node, &me);
  unsigned char mine[GAAW_DEVICE_ID_BYTES];
  device_identity(ctx, mine);
  if (!want) { /* an identity no device has, unique to this member */
    memset(mine, 0xff, GAAW_DEVICE_ID_BYTES);
    memcpy(mine, &me, sizeof me);
  }
  unsigned char *all = malloc((size_t)n * GAAW_DEVICE_ID_BYTES);
  if (!all) {
    MPI_Comm_free(&node);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d device identities", n);
  }
  MPI_Request req;
  gaaw_status_t st = GAAW_SUCCESS;
  int rc = MPI_Iallgather(mine, GAAW_DEVICE_ID_BYTES, MPI_BYTE, all, GAAW_DEVICE_ID_BYTES, MPI_BYTE, node, &req);
  if (rc != MPI_SUCCESS)
    st = gaaw_error_raise(ctx, GAAW_ERR_COMM, __FILE__, __LINE__, __func__, "MPI_Iallgather of device identities failed");
  else
    st = gaaw_mpi_wait(ctx, &req, "the exchange of device identities");
  int first = -1, second = -1;
  *shared = st == GAAW_SUCCESS && gaaw_comm_devices_shared(n, all, GAAW_DEVICE_ID_BYTES, &first, &second);
  if (*shared && want && me == first)
    gaaw_log(GAAW_LOG_WARN, "communicator %s: node-local members %d and %d use the same GPU (device %d); NCCL needs "
             "one rank per GPU, so %s communicates over MPI (give each rank its own GPU, or set nccl=no)",
             comm->name, first, second, ctx->device_index, comm->name);
  free(all);
  MPI_Comm_free(&node);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_prefer_nccl(gaaw_comm_t *comm)
{
  gaaw_context_t ctx = (*comm)->ctx;
  MPI_Comm mc = gaaw_mpi_comm_handle(*comm);
  if (mc == MPI_COMM_NULL) return GAAW_SUCCESS; /* not MPI-backed: nothing to decide */
  /* every member must agree, so every member asks (even without NCCL in its build) */
#ifdef GAAW_HAVE_NCCL
  int want = gaaw_ctx_bool(ctx, "nccl") && strcmp(ctx->device->name, "cuda") == 0;
#else
  int want = 0;
#endif
  int shared = 0;
  GAAW_CHECK(shared_on_node(ctx, *comm, mc, want, &shared));
  int mine[2] = {want, !shared}, all[2] = {0, 0};
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Iallreduce(mine, all, 2, MPI_INT, MPI_MIN, mc, &req));
  GAAW_CHECK(gaaw_mpi_wait(ctx, &req, "the choice of NCCL"));
  gaaw_nccl_choice choice = gaaw_comm_nccl_choice(all[0], !all[1]);
  if (choice == GAAW_NCCL_SHARED_DEVICE && (*comm)->rank == 0)
    gaaw_log(GAAW_LOG_WARN, "communicator %s falls back from NCCL to MPI: two of its ranks share a GPU", (*comm)->name);
#ifdef GAAW_HAVE_NCCL
  if (choice == GAAW_NCCL_USE) {
    gaaw_comm_t nccl;
    GAAW_CHECK(gaaw_nccl_comm_from_mpi(*comm, (*comm)->name, &nccl));
    nccl->first_world_rank = (*comm)->first_world_rank;
    gaaw_comm_destroy(comm);
    *comm = nccl;
  }
#endif
  return GAAW_SUCCESS;
}

void gaaw_comm_destroy(gaaw_comm_t *comm)
{
  if (!comm || !*comm) return;
  gaaw_comm_orphan_requests(*comm);
  if ((*comm)->ops->destroy && (*comm)->impl) (*comm)->ops->destroy(*comm);
  /* after a failure, freeing could wait on a peer that never comes: abandoned */
  if ((*comm)->control != MPI_COMM_NULL && !(*comm)->aborted) MPI_Comm_free(&(*comm)->control);
  free(*comm);
  *comm = NULL;
}

/* Common checks of every operation: a live communicator and well-formed tensors. */
static gaaw_status_t check_live(gaaw_comm_t comm)
{
  GAAW_ARG_NOT_NULL(NULL, comm);
  gaaw_context_t ctx = comm->ctx;
  if (comm->aborted)
    GAAW_FAIL(ctx, GAAW_ERR_COMM, "communicator %s was aborted after an earlier failure (%s); no further "
              "communication is possible on it", comm->name, ctx->aborted ? ctx->abort_reason : "see the log");
  GAAW_CHECK(gaaw_context_check_live(ctx));
  return GAAW_SUCCESS;
}

/* Before a blocking collective: a live communicator whose deferred operations have
 * run (they come first in every member's order). Point-to-point calls do not run
 * them: only two members take part. */
static gaaw_status_t check_comm(gaaw_comm_t comm)
{
  GAAW_CHECK_CTX(NULL, check_live(comm));
  gaaw_context_t ctx = comm->ctx;
  if (comm->deferred > 0) GAAW_CHECK(gaaw_comm_run_deferred(comm, NULL));
  return GAAW_SUCCESS;
}

static gaaw_status_t check_tensor(gaaw_comm_t comm, const gaaw_tensor_t *t, const char *what)
{
  gaaw_context_t ctx = comm->ctx;
  GAAW_ARG_CHECK(ctx, t != NULL, "%s tensor must not be NULL", what);
  GAAW_ARG_CHECK(ctx, t->buf != NULL, "%s tensor has no buffer", what);
  GAAW_ARG_CHECK(ctx, (unsigned)t->dtype < GAAW_DTYPE_COUNT, "%s tensor dtype %d is invalid", what, (int)t->dtype);
  GAAW_ARG_CHECK(ctx, t->ndim >= 1 && t->ndim <= GAAW_MAX_DIMS, "%s tensor ndim %d is not in 1..%d", what, t->ndim,
                 GAAW_MAX_DIMS);
  size_t bytes;
  GAAW_CHECK(gaaw_buffer_size(t->buf, &bytes));
  uint64_t need = (uint64_t)gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype);
  GAAW_ARG_CHECK(ctx, gaaw_tensor_numel(t) >= 0 && t->offset <= bytes && need <= bytes - t->offset,
                 "%s tensor (%llu bytes at offset %zu) overruns its %zu-byte buffer", what,
                 (unsigned long long)need, t->offset, bytes);
  return GAAW_SUCCESS;
}

/* The alias rule of every collective, on every backend (NCCL has no check of its
 * own, MPI and the ring need it): send and recv are either disjoint or "in place",
 * which means recv is send exactly (all-reduce, all-to-all), recv is this rank's
 * block of send (reduce-scatter), or send is this rank's block of recv
 * (all-gather). Any other overlap is refused before any traffic. Tensors of
 * different buffers never overlap: a buffer is one allocation. */
typedef enum { ALIAS_SAME, ALIAS_RECV_IN_SEND, ALIAS_SEND_IN_RECV } alias_kind;

static gaaw_status_t check_alias(gaaw_comm_t comm, const gaaw_tensor_t *send, const gaaw_tensor_t *recv,
                                 alias_kind kind)
{
  gaaw_context_t ctx = comm->ctx;
  uint64_t sb = (uint64_t)gaaw_tensor_numel(send) * gaaw_dtype_size(send->dtype);
  uint64_t rb = (uint64_t)gaaw_tensor_numel(recv) * gaaw_dtype_size(recv->dtype);
  if (send->buf != recv->buf || sb == 0 || rb == 0) return GAAW_SUCCESS;
  uint64_t so = send->offset, ro = recv->offset;
  if (so + sb <= ro || ro + rb <= so) return GAAW_SUCCESS; /* disjoint */
  uint64_t block = (kind == ALIAS_RECV_IN_SEND ? rb : sb) * (uint64_t)comm->rank;
  const char *rule = kind == ALIAS_SAME ? "recv must be send itself"
                     : kind == ALIAS_RECV_IN_SEND ? "recv must be this rank's block of send"
                                                  : "send must be this rank's block of recv";
  int in_place = kind == ALIAS_SAME ? so == ro && sb == rb
                 : kind == ALIAS_RECV_IN_SEND ? ro == so + block
                                              : so == ro + block;
  GAAW_ARG_CHECK(ctx, in_place,
                 "send (%llu bytes at offset %llu) and recv (%llu bytes at offset %llu) of one buffer overlap "
                 "without being in place (%s, at byte offset %llu, on rank %d of %s)",
                 (unsigned long long)sb, (unsigned long long)so, (unsigned long long)rb, (unsigned long long)ro, rule,
                 (unsigned long long)(kind == ALIAS_SEND_IN_RECV ? ro + block : so + (kind == ALIAS_SAME ? 0 : block)),
                 comm->rank, comm->name);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_pair(gaaw_comm_t comm, const gaaw_tensor_t *send, const gaaw_tensor_t *recv,
                                int64_t send_factor, int64_t recv_factor, alias_kind alias)
{
  gaaw_context_t ctx = comm->ctx;
  GAAW_CHECK(check_tensor(comm, send, "send"));
  GAAW_CHECK(check_tensor(comm, recv, "recv"));
  GAAW_ARG_CHECK(ctx, send->dtype == recv->dtype, "send is %s but recv is %s", gaaw_dtype_name(send->dtype),
                 gaaw_dtype_name(recv->dtype));
  int64_t ns = gaaw_tensor_numel(send), nr = gaaw_tensor_numel(recv);
  GAAW_ARG_CHECK(ctx, ns * recv_factor == nr * send_factor,
                 "send has %lld elements and recv %lld; on a group of %d they must be in the ratio %lld:%lld",
                 (long long)ns, (long long)nr, comm->size, (long long)send_factor, (long long)recv_factor);
  GAAW_CHECK(check_alias(comm, send, recv, alias));
  return GAAW_SUCCESS;
}

static gaaw_status_t check_reduce_op(gaaw_comm_t comm, gaaw_reduce_op_t op)
{
  GAAW_ARG_CHECK(comm->ctx, op == GAAW_SUM || op == GAAW_MAX, "op %d is not GAAW_SUM or GAAW_MAX", (int)op);
  return GAAW_SUCCESS;
}

/* Runs a backend operation: counts it, and aborts the communicator on failure so
 * that no rank waits on a group that is already broken. Arguments a backend
 * rejects (invalid, or memory it cannot address) are refused before any traffic,
 * so they leave the communicator usable. */
static int is_p2p(gaaw_comm_op_t op)
{
  return op == GAAW_COMM_SEND || op == GAAW_COMM_RECV;
}

void gaaw_comm_trace(gaaw_comm_t comm, gaaw_comm_op_t op, uint64_t seq, uint64_t bytes, double started)
{
  gaaw_context_t ctx = comm->ctx;
  if (!gaaw_trace_on(ctx) || is_p2p(op)) return; /* messages: the pipeline traces its own */
  char lane[32];
  snprintf(lane, sizeof lane, "comm %s", comm->name);
  gaaw_trace_span(ctx, gaaw_trace_lane(ctx, lane), gaaw_comm_op_name(op), started,
                  "\"group\":\"%s\",\"group_first_rank\":%d,\"group_size\":%d,\"seq\":%llu,\"bytes\":%llu",
                  comm->name, comm->first_world_rank, comm->size, (unsigned long long)seq, (unsigned long long)bytes);
}

/* Counts a completed operation; started >= 0 (a blocking one): its span on the
 * timeline. Collectives take the communicator's next sequence number. */
static gaaw_status_t run(gaaw_comm_t comm, gaaw_comm_op_t op, uint64_t bytes, double started, gaaw_status_t st)
{
  gaaw_context_t ctx = comm->ctx;
  if (st != GAAW_SUCCESS) {
    if (st != GAAW_ERR_INVALID_ARG && st != GAAW_ERR_UNSUPPORTED) gaaw_comm_mark_aborted(comm);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, gaaw_comm_op_name(op));
  }
  comm->calls[op]++;
  comm->bytes[op] += bytes;
  if (started >= 0 && !is_p2p(op)) gaaw_comm_trace(comm, op, comm->sequence++, bytes, started);
  return GAAW_SUCCESS;
}

static uint64_t tensor_bytes(const gaaw_tensor_t *t)
{
  return (uint64_t)gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype);
}

#define GAAW_COMM_REQUIRE_OP(comm, opname)                                                          \
  do {                                                                                              \
    if (!(comm)->ops->opname)                                                                       \
      GAAW_FAIL((comm)->ctx, GAAW_ERR_UNSUPPORTED, "the %s communicator backend has no %s", (comm)->ops->name, #opname); \
  } while (0)

/* The checks of the three collectives that also start non-blocking (their tensor
 * ratios, the reduction, the backend's entry), and the bytes they count. */
static gaaw_status_t check_collective(gaaw_comm_t comm, gaaw_comm_op_t op, const gaaw_tensor_t *send,
                                      const gaaw_tensor_t *recv, gaaw_reduce_op_t reduce, uint64_t *bytes)
{
  gaaw_context_t ctx = comm->ctx;
  switch (op) {
  case GAAW_COMM_ALLREDUCE:
    GAAW_CHECK(check_pair(comm, send, recv, 1, 1, ALIAS_SAME));
    GAAW_CHECK(check_reduce_op(comm, reduce));
    GAAW_COMM_REQUIRE_OP(comm, allreduce);
    *bytes = 2 * tensor_bytes(recv);
    return GAAW_SUCCESS;
  case GAAW_COMM_REDUCE_SCATTER:
    GAAW_CHECK(check_pair(comm, send, recv, comm->size, 1, ALIAS_RECV_IN_SEND));
    GAAW_CHECK(check_reduce_op(comm, reduce));
    GAAW_COMM_REQUIRE_OP(comm, reduce_scatter);
    *bytes = tensor_bytes(send);
    return GAAW_SUCCESS;
  case GAAW_COMM_ALLGATHER:
    GAAW_CHECK(check_pair(comm, send, recv, 1, comm->size, ALIAS_SEND_IN_RECV));
    GAAW_COMM_REQUIRE_OP(comm, allgather);
    *bytes = tensor_bytes(recv);
    return GAAW_SUCCESS;
  default:
    GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "%s is not a collective with a non-blocking form", gaaw_comm_op_name(op));
  }
}

gaaw_status_t gaaw_comm_allreduce(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                  gaaw_reduce_op_t op)
{
  GAAW_CHECK_CTX(NULL, check_comm(comm));
  gaaw_context_t ctx = comm->ctx;
  uint64_t bytes;
  GAAW_CHECK(check_collective(comm, GAAW_COMM_ALLREDUCE, send, recv, op, &bytes));
  double t0 = gaaw_clock_seconds();
  return run(comm, GAAW_COMM_ALLREDUCE, bytes, t0, comm->ops->allreduce(comm, send, recv, op));
}

gaaw_status_t gaaw_comm_reduce_scatter(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                       gaaw_reduce_op_t op)
{
  GAAW_CHECK_CTX(NULL, check_comm(comm));
  gaaw_context_t ctx = comm->ctx;
  uint64_t bytes;
  GAAW_CHECK(check_collective(comm, GAAW_COMM_REDUCE_SCATTER, send, recv, op, &bytes));
  double t0 = gaaw_clock_seconds();
  return run(comm, GAAW_COMM_REDUCE_SCATTER, bytes, t0, comm->ops->reduce_scatter(comm, send, recv, op));
}

gaaw_status_t gaaw_comm_allgather(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
{
  GAAW_CHECK_CTX(NULL, check_comm(comm));
  gaaw_context_t ctx = comm->ctx;
  uint64_t bytes;
  GAAW_CHECK(check_collective(comm, GAAW_COMM_ALLGATHER, send, recv, GAAW_SUM, &bytes));
  double t0 = gaaw_clock_seconds();
  return run(comm, GAAW_COMM_ALLGATHER, bytes, t0, comm->ops->allgather(comm, send, recv));
}

gaaw_status_t gaaw_comm_broadcast(gaaw_comm_t comm, gaaw_tensor_t *t, int root)
{
  GAAW_CHECK_CTX(NULL, check_comm(comm));
  gaaw_context_t ctx = comm->ctx;
  GAAW_CHECK(check_tensor(comm, t, "broadcast"));
  GAAW_ARG_CHECK(ctx, root >= 0 && root < comm->size, "root %d is not a rank of communicator %s (size %d)", root,
                 comm->name, comm->size);
  GAAW_COMM_REQUIRE_OP(comm, broadcast);
  double t0 = gaaw_clock_seconds();
  return run(comm, GAAW_COMM_BROADCAST, tensor_bytes(t), t0, comm->ops->broadcast(comm, t, root));
}

static gaaw_status_t check_peer(gaaw_comm_t comm, int peer, int tag)
{
  gaaw_context_t ctx = comm->ctx;
  GAAW_ARG_CHECK(ctx, peer >= 0 && peer < comm->size && peer != comm->rank,
                 "peer %d is not another rank of communicator %s (size %d, this rank %d)", peer, comm->name,
                 comm->size, comm->rank);
  GAAW_ARG_CHECK(ctx, tag >= 0 && tag <= 32767, "tag %d is not in 0..32767", tag);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_send(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag)
{
  GAAW_CHECK_CTX(NULL, check_live(comm));
  gaaw_context_t ctx = comm->ctx;
  GAAW_CHECK(check_tensor(comm, t, "send"));
  GAAW_CHECK(check_peer(comm, peer, tag));
  GAAW_COMM_REQUIRE_OP(comm, send);
  return run(comm, GAAW_COMM_SEND, tensor_bytes(t), -1, comm->ops->send(comm, t, peer, tag));
}

gaaw_status_t gaaw_comm_recv(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag)
{
  GAAW_CHECK_CTX(NULL, check_live(comm));
  gaaw_context_t ctx = comm->ctx;
  GAAW_CHECK(check_tensor(comm, t, "recv"));
  GAAW_CHECK(check_peer(comm, peer, tag));
  GAAW_COMM_REQUIRE_OP(comm, recv);
  return run(comm, GAAW_COMM_RECV, tensor_bytes(t), -1, comm->ops->recv(comm, t, peer, tag));
}

gaaw_status_t gaaw_comm_alltoall(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv)
{
  GAAW_CHECK_CTX(NULL, check_comm(comm));
  gaaw_context_t ctx = comm->ctx;
  GAAW_CHECK(check_pair(comm, send, recv, 1, 1, ALIAS_SAME)); /* in place: staged by backends that need it */
  GAAW_ARG_CHECK(ctx, gaaw_tensor_numel(send) % comm->size == 0,
                 "all-to-all tensors have %lld elements, not a multiple of the group size %d",
                 (long long)gaaw_tensor_numel(send), comm->size);
  GAAW_COMM_REQUIRE_OP(comm, alltoall);
  double t0 = gaaw_clock_seconds();
  return run(comm, GAAW_COMM_ALLTOALL, tensor_bytes(send), t0, comm->ops->alltoall(comm, send, recv));
}

/* Counts >= 0 whose sum fits t (numel n): *sum set. */
static gaaw_status_t check_counts(gaaw_comm_t comm, const int64_t *counts, const gaaw_tensor_t *t, const char *what,
                                  int64_t *sum)
{
  gaaw_context_t ctx = comm->ctx;
  GAAW_ARG_CHECK(ctx, counts != NULL, "%s_counts is NULL", what);
  *sum = 0;
  for (int j = 0; j < comm->size; j++) {
    GAAW_ARG_CHECK(ctx, counts[j] >= 0, "%s_counts[%d] is %lld, below 0", what, j, (long long)counts[j]);
    *sum += counts[j];
  }
  GAAW_ARG_CHECK(ctx, *sum <= gaaw_tensor_numel(t), "%s_counts add up to %lld elements, more than %s's %lld", what,
                 (long long)*sum, what, (long long)gaaw_tensor_numel(t));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_alltoallv(gaaw_comm_t comm, const gaaw_tensor_t *send, const int64_t *send_counts,
                                  gaaw_tensor_t *recv, const int64_t *recv_counts)
{
  GAAW_CHECK_CTX(NULL, check_comm(comm));
  gaaw_context_t ctx = comm->ctx;
  GAAW_CHECK(check_tensor(comm, send, "send"));
  GAAW_CHECK(check_tensor(comm, recv, "recv"));
  GAAW_ARG_CHECK(ctx, send->dtype == recv->dtype, "send is %s but recv is %s", gaaw_dtype_name(send->dtype),
                 gaaw_dtype_name(recv->dtype));
  int64_t sent, received;
  GAAW_CHECK(check_counts(comm, send_counts, send, "send", &sent));
  GAAW_CHECK(check_counts(comm, recv_counts, recv, "recv", &received));
  size_t es = gaaw_dtype_size(send->dtype);
  uint64_t so = send->offset, ro = recv->offset, sb = (uint64_t)sent * es, rb = (uint64_t)received * es;
  GAAW_ARG_CHECK(ctx, send->buf != recv->buf || sb == 0 || rb == 0 || so + sb <= ro || ro + rb <= so,
                 "send (%llu bytes at offset %llu) and recv (%llu bytes at offset %llu) of one buffer overlap: an "
                 "alltoallv has no in-place form",
                 (unsigned long long)sb, (unsigned long long)so, (unsigned long long)rb, (unsigned long long)ro);
  GAAW_COMM_REQUIRE_OP(comm, alltoallv);
  gaaw_tensor_t used_send = *send, used_recv = *recv; /* 1-D, the counted elements: recv's rest stays */
  used_send.ndim = used_recv.ndim = 1;
  used_send.shape[0] = sent, used_recv.shape[0] = received;
  double t0 = gaaw_clock_seconds();
  return run(comm, GAAW_COMM_ALLTOALLV, sb, t0,
             comm->ops->alltoallv(comm, &used_send, send_counts, &used_recv, recv_counts));
}

gaaw_status_t gaaw_comm_alltoall_counts(gaaw_comm_t comm, int64_t n, const int64_t *send, int64_t *recv)
{
  GAAW_CHECK_CTX(NULL, check_comm(comm));
  gaaw_context_t ctx = comm->ctx;
  GAAW_ARG_CHECK(ctx, n >= 0 && n <= INT32_MAX / (comm->size > 0 ? comm->size : 1),
                 "%lld counts per member of a group of %d are too many", (long long)n, comm->size);
  GAAW_ARG_CHECK(ctx, n == 0 || (send && recv), "the counts' send or recv is NULL");
  uintptr_t sa = (uintptr_t)send, ra = (uintptr_t)recv, span = sizeof(int64_t) * (uintptr_t)(n * comm->size);
  GAAW_ARG_CHECK(ctx, n == 0 || sa + span <= ra || ra + span <= sa, "the counts' send and recv overlap");
  double t0 = gaaw_clock_seconds();
  gaaw_status_t st = GAAW_SUCCESS;
  if (comm->size == 1 && n > 0)
    memcpy(recv, send, sizeof(int64_t) * (size_t)n);
  else if (n > 0) {
    MPI_Request req;
    int err = MPI_Ialltoall(send, (int)n, MPI_INT64_T, recv, (int)n, MPI_INT64_T, comm->control, &req);
    st = err == MPI_SUCCESS ? gaaw_mpi_wait(ctx, &req, "the all-to-all of counts")
                            : gaaw_mpi_status(ctx, err, __FILE__, __LINE__, __func__, "MPI_Ialltoall (counts)");
  }
  return run(comm, GAAW_COMM_ALLTOALL, 8 * (uint64_t)n * (uint64_t)comm->size, t0, st);
}

gaaw_status_t gaaw_comm_barrier(gaaw_comm_t comm)
{
  GAAW_CHECK_CTX(NULL, check_comm(comm));
  GAAW_COMM_REQUIRE_OP(comm, barrier);
  double t0 = gaaw_clock_seconds();
  return run(comm, GAAW_COMM_BARRIER, 0, t0, comm->ops->barrier(comm));
}

gaaw_status_t gaaw_comm_rank(gaaw_comm_t comm, int *rank)
{
  GAAW_ARG_NOT_NULL(NULL, comm);
  GAAW_ARG_NOT_NULL(comm->ctx, rank);
  *rank = comm->rank;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_size(gaaw_comm_t comm, int *size)
{
  GAAW_ARG_NOT_NULL(NULL, comm);
  GAAW_ARG_NOT_NULL(comm->ctx, size);
  *size = comm->size;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_backend(gaaw_comm_t comm, const char **name)
{
  GAAW_ARG_NOT_NULL(NULL, comm);
  GAAW_ARG_NOT_NULL(comm->ctx, name);
  *name = comm->ops->name;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_stats(gaaw_comm_t comm, gaaw_comm_op_t op, uint64_t *calls, uint64_t *bytes)
{
  GAAW_ARG_NOT_NULL(NULL, comm);
  GAAW_ARG_CHECK(comm->ctx, (unsigned)op < GAAW_COMM_OP_COUNT, "op %d is not a gaaw_comm_op_t", (int)op);
  if (calls) *calls = comm->calls[op];
  if (bytes) *bytes = comm->bytes[op];
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_comm_stats_reset(gaaw_comm_t comm)
{
  GAAW_ARG_NOT_NULL(NULL, comm);
  memset(comm->calls, 0, sizeof comm->calls);
  memset(comm->bytes, 0, sizeof comm->bytes);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- non-blocking */

/* Hands the checked request r to the backend's post (NULL: deferred), tracks it,
 * and counts it; on failure frees it. */
static gaaw_status_t submit(gaaw_comm_t comm, gaaw_comm_request_t r,
                            gaaw_status_t (*post)(gaaw_comm_t, gaaw_comm_request_t), uint64_t bytes,
                            gaaw_comm_request_t *req)
{
  if (post) {
    gaaw_status_t st = post(comm, r);
    if (st != GAAW_SUCCESS) {
      gaaw_comm_op_t op = r->op;
      free(r);
      return run(comm, op, 0, -1, st);
    }
    r->queued = 1;
  }
  gaaw_comm_track(comm, r);
  *req = r;
  r->bytes = bytes;
  if (!is_p2p(r->op)) r->seq = comm->sequence++; /* its span is drawn when it completes */
  return run(comm, r->op, bytes, -1, GAAW_SUCCESS);
}

/* Checks an operation and hands it to the backend's start, or defers it; counts it. */
static gaaw_status_t start(gaaw_comm_t comm, gaaw_comm_op_t op, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                           gaaw_reduce_op_t reduce, gaaw_comm_request_t *req)
{
  GAAW_CHECK_CTX(NULL, check_live(comm));
  gaaw_context_t ctx = comm->ctx;
  GAAW_ARG_NOT_NULL(ctx, req);
  *req = NULL;
  uint64_t bytes;
  GAAW_CHECK(check_collective(comm, op, send, recv, reduce, &bytes));
  gaaw_comm_request_t r = calloc(1, sizeof *r);
  if (!r) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a communication request");
  *r = (struct gaaw_comm_request_s){.comm = comm, .op = op, .send = *send, .recv = *recv, .reduce = reduce,
                                    .started = gaaw_clock_seconds()};
  int queue = comm->ops->start && comm->ops->complete; /* else deferred */
  return submit(comm, r, queue ? comm->ops->start : NULL, bytes, req);
}

gaaw_status_t gaaw_comm_allreduce_start(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                        gaaw_reduce_op_t op, gaaw_comm_request_t *req)
{
  return start(comm, GAAW_COMM_ALLREDUCE, send, recv, op, req);
}

gaaw_status_t gaaw_comm_reduce_scatter_start(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                             gaaw_reduce_op_t op, gaaw_comm_request_t *req)
{
  return start(comm, GAAW_COMM_REDUCE_SCATTER, send, recv, op, req);
}

gaaw_status_t gaaw_comm_allgather_start(gaaw_comm_t comm, const gaaw_tensor_t *send, gaaw_tensor_t *recv,
                                        gaaw_comm_request_t *req)
{
  return start(comm, GAAW_COMM_ALLGATHER, send, recv, GAAW_SUM, req);
}

/* A send or receive posted now, completed by gaaw_comm_wait. */
static gaaw_status_t start_p2p(gaaw_comm_t comm, gaaw_comm_op_t op, const gaaw_tensor_t *t, int peer, int tag,
                               gaaw_comm_request_t *req)
{
  GAAW_CHECK_CTX(NULL, check_live(comm));
  gaaw_context_t ctx = comm->ctx;
  GAAW_ARG_NOT_NULL(ctx, req);
  *req = NULL;
  GAAW_CHECK(check_tensor(comm, t, op == GAAW_COMM_SEND ? "send" : "recv"));
  GAAW_CHECK(check_peer(comm, peer, tag));
  GAAW_COMM_REQUIRE_OP(comm, p2p_start);
  gaaw_comm_request_t r = calloc(1, sizeof *r);
  if (!r) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a communication request");
  *r = (struct gaaw_comm_request_s){.comm = comm, .op = op, .send = *t, .recv = *t, .peer = peer, .tag = tag};
  return submit(comm, r, comm->ops->p2p_start, tensor_bytes(t), req);
}

gaaw_status_t gaaw_comm_send_start(gaaw_comm_t comm, const gaaw_tensor_t *t, int peer, int tag,
                                   gaaw_comm_request_t *req)
{
  return start_p2p(comm, GAAW_COMM_SEND, t, peer, tag, req);
}

gaaw_status_t gaaw_comm_recv_start(gaaw_comm_t comm, gaaw_tensor_t *t, int peer, int tag, gaaw_comm_request_t *req)
{
  return start_p2p(comm, GAAW_COMM_RECV, t, peer, tag, req);
}
