/* The NCCL communicator backend on two ranks. Bad input runs everywhere: a NULL
 * communicator or result (GAAW_ERR_INVALID_ARG) and a host context
 * (GAAW_ERR_UNSUPPORTED). With a GPU per rank:
 *   - gaaw_init (nccl defaults to yes) makes the world communicator NCCL, and
 *     gaaw_nccl_comm_from_mpi refuses it (not MPI-backed) instead of crashing;
 *   - on that world, and on one made by gaaw_nccl_comm_from_mpi in a context with
 *     nccl=no: all-reduce (sum, max), reduce-scatter, all-gather, broadcast,
 *     send/recv, all-to-all and barrier give exact results for f32, bf16, f16 and
 *     i32 on integer-valued data, in place and out of place, on views at element
 *     offsets 1 and 3 (not 16-byte aligned) whose neighbours stay untouched; a
 *     kernel (a cast) queued right after each blocking operation, and right after
 *     each wait of a started one, reads its result (the completion by event orders
 *     the compute stream after the collective);
 *   - a started all-reduce overlaps a kernel on the compute stream.
 * Without enough GPUs that part is skipped (exit 77 when all else passed). */
#include <mpi.h>
#include <string.h>

#include "tests/cuda/cuda_test_util.h"
#include "backends/nccl/nccl_comm.h"
#include "backends/runtime/half.h"
#include "tests/harness/test_util.h"

enum { N = 1000, PAD = 4 };
static const float SENTINEL = -7.0f;

/* A view of n elements at element offset `at` in a buffer of at + n + PAD elements,
 * the rest of which holds SENTINEL; values v (NULL: SENTINEL) converted to dtype. */
typedef struct {
  gaaw_tensor_t t;
  int64_t at, n, total;
} placed;

static placed place(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t n, int64_t at, const float *v)
{
  placed p = {.at = at, .n = n, .total = at + n + PAD};
  size_t es = gaaw_dtype_size(dt);
  char *raw = malloc((size_t)p.total * es);
  for (int64_t i = 0; i < p.total; i++)
    gaaw_store_f32(raw, dt, i, v && i >= at && i < at + n ? v[i - at] : SENTINEL);
  gaaw_buffer_t buf;
  require_ok(ctx, gaaw_buffer_alloc(ctx, (size_t)p.total * es, GAAW_MEM_COMMUNICATION, &buf));
  require_ok(ctx, gaaw_buffer_write(ctx, buf, 0, raw, (size_t)p.total * es));
  require_ok(ctx, gaaw_tensor_view(buf, (size_t)at * es, dt, 1, (int64_t[]){n}, &p.t));
  free(raw);
  return p;
}

/* A sub-view of p: elements [first, first + n) of its view. */
static gaaw_tensor_t sub(const placed *p, int64_t first, int64_t n)
{
  gaaw_tensor_t t;
  size_t es = gaaw_dtype_size(p->t.dtype);
  require_ok(NULL, gaaw_tensor_view(p->t.buf, p->t.offset + (size_t)first * es, p->t.dtype, 1, (int64_t[]){n}, &t));
  return t;
}

/* Casts p's view to f32 right away (a kernel queued behind the collective), then
 * checks it against want, and the whole buffer's sentinels; frees p. */
static void expect_placed(gaaw_context_t ctx, placed *p, const float *want, const char *what, const char *dtn)
{
  gaaw_tensor_t f;
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, (int64_t[]){p->n}, GAAW_MEM_ACTIVATIONS, &f));
  expect_status_ctx(ctx, gaaw_cast(ctx, &p->t, &f), GAAW_SUCCESS);
  float *got = malloc((size_t)p->n * sizeof(float));
  require_ok(ctx, gaaw_buffer_read(ctx, f.buf, 0, got, (size_t)p->n * sizeof(float)));
  char label[160];
  snprintf(label, sizeof label, "%s (%s, offset %lld), read by a kernel queued right after", what, dtn,
           (long long)p->at);
  expect_close(got, want, (long)p->n, 0, label);
  size_t es = gaaw_dtype_size(p->t.dtype);
  char *raw = malloc((size_t)p->total * es);
  require_ok(ctx, gaaw_buffer_read(ctx, p->t.buf, 0, raw, (size_t)p->total * es));
  int64_t bad = -1;
  for (int64_t i = 0; i < p->total && bad < 0; i++)
    if ((i < p->at || i >= p->at + p->n) && gaaw_load_f32(raw, p->t.dtype, i) != SENTINEL) bad = i;
  expect_true(bad < 0, "%s (%s): element %lld outside the view was overwritten", what, dtn, (long long)bad);
  free(raw);
  free(got);
  gaaw_buffer_free(ctx, &f.buf);
  gaaw_buffer_free(ctx, &p->t.buf);
}

static void check_collectives(gaaw_context_t ctx, gaaw_comm_t nc, gaaw_dtype_t dt, int rank, int size)
{
  const char *dtn = gaaw_dtype_name(dt);
  float a[2 * N], big[2 * N], want[2 * N];
  for (int i = 0; i < N; i++) a[i] = (float)((rank + 1) * (i % 16));

  /* all-reduce: in place at offset 1, out of place from offset 3 to offset 1 */
  placed t = place(ctx, dt, N, 1, a);
  expect_status_ctx(ctx, gaaw_comm_allreduce(nc, &t.t, &t.t, GAAW_SUM), GAAW_SUCCESS);
  for (int i = 0; i < N; i++) want[i] = (float)(size * (size + 1) / 2 * (i % 16));
  expect_placed(ctx, &t, want, "all-reduce sum in place", dtn);
  placed s = place(ctx, dt, N, 3, a), r = place(ctx, dt, N, 1, NULL);
  expect_status_ctx(ctx, gaaw_comm_allreduce(nc, &s.t, &r.t, GAAW_SUM), GAAW_SUCCESS);
  expect_placed(ctx, &r, want, "all-reduce sum", dtn);
  expect_placed(ctx, &s, a, "all-reduce send left alone", dtn);
  t = place(ctx, dt, N, 3, a);
  expect_status_ctx(ctx, gaaw_comm_allreduce(nc, &t.t, &t.t, GAAW_MAX), GAAW_SUCCESS);
  for (int i = 0; i < N; i++) want[i] = (float)(size * (i % 16));
  expect_placed(ctx, &t, want, "all-reduce max in place", dtn);

  /* reduce-scatter: N * size in, block r of the sum out; in place (recv = own block) too */
  for (int i = 0; i < N * size; i++) big[i] = (float)(rank + i % 32);
  for (int i = 0; i < N; i++) want[i] = (float)(size * ((rank * N + i) % 32) + size * (size - 1) / 2);
  s = place(ctx, dt, (int64_t)N * size, 1, big);
  r = place(ctx, dt, N, 3, NULL);
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter(nc, &s.t, &r.t, GAAW_SUM), GAAW_SUCCESS);
  expect_placed(ctx, &r, want, "reduce-scatter", dtn);
  gaaw_buffer_free(ctx, &s.t.buf);
  s = place(ctx, dt, (int64_t)N * size, 3, big);
  gaaw_tensor_t own = sub(&s, (int64_t)rank * N, N);
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter(nc, &s.t, &own, GAAW_SUM), GAAW_SUCCESS);
  {
    gaaw_tensor_t f;
    require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, (int64_t[]){N}, GAAW_MEM_ACTIVATIONS, &f));
    expect_status_ctx(ctx, gaaw_cast(ctx, &own, &f), GAAW_SUCCESS);
    float got[N];
    require_ok(ctx, gaaw_buffer_read(ctx, f.buf, 0, got, sizeof got));
    char label[64];
    snprintf(label, sizeof label, "reduce-scatter in place (%s)", dtn);
    expect_close(got, want, N, 0, label);
    gaaw_buffer_free(ctx, &f.buf);
  }
  gaaw_buffer_free(ctx, &s.t.buf);

  /* all-gather: block q from rank q; in place (send = own block of recv) too */
  for (int q = 0; q < size; q++)
    for (int i = 0; i < N; i++) want[q * N + i] = (float)((q + 1) * (i % 16));
  s = place(ctx, dt, N, 3, a);
  r = place(ctx, dt, (int64_t)N * size, 1, NULL);
  expect_status_ctx(ctx, gaaw_comm_allgather(nc, &s.t, &r.t), GAAW_SUCCESS);
  expect_placed(ctx, &r, want, "all-gather", dtn);
  gaaw_buffer_free(ctx, &s.t.buf);
  for (int i = 0; i < N * size; i++) big[i] = i / N == rank ? a[i % N] : 0.0f;
  r = place(ctx, dt, (int64_t)N * size, 3, big);
  own = sub(&r, (int64_t)rank * N, N);
  expect_status_ctx(ctx, gaaw_comm_allgather(nc, &own, &r.t), GAAW_SUCCESS);
  expect_placed(ctx, &r, want, "all-gather in place", dtn);

  /* broadcast from the last rank */
  t = place(ctx, dt, N, 1, a);
  expect_status_ctx(ctx, gaaw_comm_broadcast(nc, &t.t, size - 1), GAAW_SUCCESS);
  for (int i = 0; i < N; i++) want[i] = (float)(size * (i % 16));
  expect_placed(ctx, &t, want, "broadcast", dtn);

  /* send/recv: rank 0 -> rank 1 (with two ranks or more) */
  if (size >= 2 && rank < 2) {
    t = place(ctx, dt, N, 3, rank == 0 ? a : NULL);
    if (rank == 0) {
      expect_status_ctx(ctx, gaaw_comm_send(nc, &t.t, 1, 7), GAAW_SUCCESS);
      expect_placed(ctx, &t, a, "send left alone", dtn);
    } else {
      expect_status_ctx(ctx, gaaw_comm_recv(nc, &t.t, 0, 7), GAAW_SUCCESS);
      for (int i = 0; i < N; i++) want[i] = (float)(i % 16);
      expect_placed(ctx, &t, want, "send/recv", dtn);
    }
  }

  /* all-to-all: block j of rank q's send = 10 q + j lands as block q on rank j;
   * out of place and in place (NCCL stages the send blocks) */
  for (int j = 0; j < size; j++)
    for (int i = 0; i < N; i++) big[j * N + i] = (float)(10 * rank + j);
  for (int q = 0; q < size; q++)
    for (int i = 0; i < N; i++) want[q * N + i] = (float)(10 * q + rank);
  s = place(ctx, dt, (int64_t)N * size, 1, big);
  r = place(ctx, dt, (int64_t)N * size, 3, NULL);
  expect_status_ctx(ctx, gaaw_comm_alltoall(nc, &s.t, &r.t), GAAW_SUCCESS);
  expect_placed(ctx, &r, want, "all-to-all", dtn);
  expect_status_ctx(ctx, gaaw_comm_alltoall(nc, &s.t, &s.t), GAAW_SUCCESS);
  expect_placed(ctx, &s, want, "all-to-all in place", dtn);

  /* alltoallv: rank q sends rank j N / 2 or N elements of 10 q + j, the counts
   * exchanged first; the sentinels past the received elements stay */
  int64_t sc[size], rc[size], sent = 0, received = 0;
  for (int j = 0; j < size; j++) sc[j] = N / 2 * (1 + (rank + j) % 2);
  expect_status_ctx(ctx, gaaw_comm_alltoall_counts(nc, 1, sc, rc), GAAW_SUCCESS);
  for (int j = 0; j < size; j++)
    for (int64_t i = 0; i < sc[j]; i++) big[sent++] = (float)(10 * rank + j);
  for (int q = 0; q < size; q++)
    for (int64_t i = 0; i < rc[q]; i++) want[received++] = (float)(10 * q + rank);
  s = place(ctx, dt, sent, 1, big);
  r = place(ctx, dt, received, 3, NULL);
  expect_status_ctx(ctx, gaaw_comm_alltoallv(nc, &s.t, sc, &r.t, rc), GAAW_SUCCESS);
  expect_placed(ctx, &r, want, "alltoallv", dtn);
  gaaw_buffer_free(ctx, &s.t.buf);

  expect_status_ctx(ctx, gaaw_comm_barrier(nc), GAAW_SUCCESS);

  /* started: reduce-scatter and all-gather back to back, waited in reverse, each
   * read by a kernel right after its wait; the all-reduce overlaps a kernel */
  for (int i = 0; i < N * size; i++) big[i] = (float)(rank + i % 32);
  s = place(ctx, dt, (int64_t)N * size, 1, big);
  r = place(ctx, dt, N, 3, NULL);
  placed g_in = place(ctx, dt, N, 1, a), g_out = place(ctx, dt, (int64_t)N * size, 3, NULL);
  gaaw_comm_request_t rs = NULL, ag = NULL, ar = NULL;
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter_start(nc, &s.t, &r.t, GAAW_SUM, &rs), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_comm_allgather_start(nc, &g_in.t, &g_out.t, &ag), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_comm_wait(&ag), GAAW_SUCCESS);
  for (int q = 0; q < size; q++)
    for (int i = 0; i < N; i++) want[q * N + i] = (float)((q + 1) * (i % 16));
  expect_placed(ctx, &g_out, want, "started all-gather", dtn);
  expect_status_ctx(ctx, gaaw_comm_wait(&rs), GAAW_SUCCESS);
  for (int i = 0; i < N; i++) want[i] = (float)(size * ((rank * N + i) % 32) + size * (size - 1) / 2);
  expect_placed(ctx, &r, want, "started reduce-scatter", dtn);
  gaaw_buffer_free(ctx, &s.t.buf);
  gaaw_buffer_free(ctx, &g_in.t.buf);
  if (dt != GAAW_I32) {
    t = place(ctx, dt, N, 1, a);
    placed other = place(ctx, dt, N, 3, a);
    expect_status_ctx(ctx, gaaw_comm_allreduce_start(nc, &t.t, &t.t, GAAW_SUM, &ar), GAAW_SUCCESS);
    expect_status_ctx(ctx, gaaw_scale(ctx, &other.t, 2.0f), GAAW_SUCCESS);
    expect_status_ctx(ctx, gaaw_comm_wait(&ar), GAAW_SUCCESS);
    for (int i = 0; i < N; i++) want[i] = (float)(size * (size + 1) / 2 * (i % 16));
    expect_placed(ctx, &t, want, "started all-reduce", dtn);
    for (int i = 0; i < N; i++) want[i] = 2.0f * a[i];
    expect_placed(ctx, &other, want, "kernel queued while the all-reduce ran", dtn);
  }
  expect_status_ctx(ctx, gaaw_synchronize(ctx), GAAW_SUCCESS);
}

static void check_comm(gaaw_context_t ctx, gaaw_comm_t nc, int rank, int size, int all_dtypes)
{
  const char *backend = NULL;
  expect_status_ctx(ctx, gaaw_comm_backend(nc, &backend), GAAW_SUCCESS);
  expect_true(backend && strcmp(backend, "nccl") == 0, "backend %s", backend ? backend : "(null)");
  int r = -1, n = -1;
  gaaw_comm_rank(nc, &r);
  gaaw_comm_size(nc, &n);
  expect_true(r == rank && n == size, "NCCL rank %d of %d, MPI rank %d of %d", r, n, rank, size);
  gaaw_comm_stats_reset(nc);
  const gaaw_dtype_t dtypes[] = {GAAW_F32, GAAW_BF16, GAAW_F16, GAAW_I32};
  for (int d = 0; d < (all_dtypes ? 4 : 1); d++) check_collectives(ctx, nc, dtypes[d], rank, size);
  uint64_t calls = 0;
  expect_status_ctx(ctx, gaaw_comm_stats(nc, GAAW_COMM_ALLREDUCE, &calls, NULL), GAAW_SUCCESS);
  uint64_t want = (uint64_t)(all_dtypes ? 4 * 3 + 3 : 4);
  expect_true(calls == want, "%llu all-reduces counted, expected %llu", (unsigned long long)calls,
              (unsigned long long)want);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Bad input, on a host context. */
  gaaw_context_t host = test_context(MPI_COMM_WORLD, "backend=host comm_timeout=60");
  gaaw_comm_t world = NULL, nc = NULL;
  require_ok(host, gaaw_topology_comm(host, GAAW_GROUP_WORLD, &world));
  expect_status(gaaw_nccl_comm_from_mpi(NULL, "x", &nc), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(host, gaaw_nccl_comm_from_mpi(world, "x", NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(host, gaaw_nccl_comm_from_mpi(world, "x", &nc), GAAW_ERR_UNSUPPORTED);
  expect_true(nc == NULL, "a failed gaaw_nccl_comm_from_mpi left a communicator");
  require_ok(host, gaaw_finalize(&host));

  /* One GPU per rank on every node, or the NCCL part is skipped everywhere. */
  int all_enough = cuda_test_gpus_everywhere(1);
  if (all_enough) {
    /* nccl=yes (the default): the world communicator is already NCCL */
    gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=cuda comm_timeout=60");
    require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
    expect_status_ctx(ctx, gaaw_nccl_comm_from_mpi(world, "again", &nc), GAAW_ERR_INVALID_ARG);
    expect_true(nc == NULL, "gaaw_nccl_comm_from_mpi of an NCCL communicator left one");
    check_comm(ctx, world, rank, size, 1);
    require_ok(ctx, gaaw_finalize(&ctx));
    /* nccl=no: an MPI world, and an NCCL communicator made from it */
    ctx = test_context(MPI_COMM_WORLD, "backend=cuda nccl=no comm_timeout=60");
    require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
    require_ok(ctx, gaaw_nccl_comm_from_mpi(world, "nccl-world", &nc));
    check_comm(ctx, nc, rank, size, 0);
    gaaw_comm_destroy(&nc);
    require_ok(ctx, gaaw_finalize(&ctx));
  } else if (rank == 0) {
    fprintf(stderr, "test_nccl_np2: fewer GPUs than ranks on a node; the NCCL collectives were not run\n");
  }
  MPI_Finalize();
  int rc = test_finish("test_nccl_np2");
  return rc == 0 && !all_enough ? TEST_SKIP : rc;
}
