/* The MPI communicator backend against naive references, on the world, tp and dp
 * groups (tp = 2 when the world has 4 ranks): every operation x dtype (f32, bf16,
 * f16, i32) x op (sum, max), in place and out of place, sizes 1, a prime, one not
 * divisible by the group, and a large one (ring path). Data are small integers, so
 * sums are exact in every dtype and the expected values are exact. Also: the same
 * call twice gives bit-identical results, identical on every rank; traffic
 * counters follow include/gaaw/comm.h; the non-blocking collectives give the
 * blocking results; bad input gives GAAW_ERR_INVALID_ARG.
 * Built three times: test_comm_np2 and test_comm_np4 on host buffers, and
 * test_comm_opencl_np2 on OpenCL buffers (device memory, staged through host
 * memory by the MPI backend). The backend is COMM_TEST_BACKEND, or argv[1]; the
 * test skips (77) when that backend is not built or finds no device. */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/runtime/half.h"
#include "tests/harness/comm_util.h"
#include "tests/harness/test_util.h"

#ifndef COMM_TEST_BACKEND
#define COMM_TEST_BACKEND "host"
#endif

static const gaaw_dtype_t dtypes[] = {GAAW_F32, GAAW_BF16, GAAW_F16, GAAW_I32};
static const gaaw_reduce_op_t ops[] = {GAAW_SUM, GAAW_MAX};
#define N_LARGE (4 * 1024 * 1024 + 3)

/* Member q's element i: an integer in -5..5, so a sum over 4 ranks stays exact. */
static int val(int q, int64_t i)
{
  return (int)((i * 7 + q * 13) % 11) - 5;
}

static float reference(gaaw_reduce_op_t op, int size, int64_t i)
{
  int acc = val(0, i);
  for (int q = 1; q < size; q++) acc = op == GAAW_SUM ? acc + val(q, i) : (val(q, i) > acc ? val(q, i) : acc);
  return (float)acc;
}

static gaaw_tensor_t make(gaaw_context_t ctx, gaaw_dtype_t dtype, int64_t n)
{
  gaaw_tensor_t t;
  int64_t shape[1] = {n};
  require_ok(ctx, gaaw_tensor_alloc(ctx, dtype, 1, shape, GAAW_MEM_WORKSPACE, &t));
  return t;
}

/* A 1-d view of n elements at element offset `at` of t's buffer. */
static gaaw_tensor_t view(gaaw_context_t ctx, const gaaw_tensor_t *t, int64_t at, int64_t n)
{
  gaaw_tensor_t v;
  int64_t shape[1] = {n};
  require_ok(ctx, gaaw_tensor_view(t->buf, t->offset + (size_t)at * gaaw_dtype_size(t->dtype), t->dtype, 1, shape, &v));
  return v;
}

static size_t bytes_of(const gaaw_tensor_t *t)
{
  return (size_t)gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype);
}

/* A host copy of t's elements (the tensor may be device memory); free it. */
static void *download(gaaw_context_t ctx, const gaaw_tensor_t *t)
{
  void *h = malloc(bytes_of(t) + 1);
  require_ok(ctx, gaaw_buffer_read(ctx, t->buf, t->offset, h, bytes_of(t)));
  return h;
}

/* Element i of t := expr (a float expression in i), for i < n, in one copy. */
#define fill(ctx, t, n, expr)                                                          \
  do {                                                                                 \
    const gaaw_tensor_t *t_ = (t);                                                     \
    void *h_ = malloc(bytes_of(t_) + 1);                                               \
    for (int64_t i = 0; i < (n); i++) gaaw_store_f32(h_, t_->dtype, i, (float)(expr)); \
    require_ok((ctx), gaaw_buffer_write((ctx), t_->buf, t_->offset, h_, bytes_of(t_))); \
    free(h_);                                                                          \
  } while (0)

static void drop(gaaw_context_t ctx, gaaw_tensor_t *t)
{
  require_ok(ctx, gaaw_buffer_free(ctx, &t->buf));
}

/* Element i of t must be want(i) exactly; reports the first difference and the count. */
#define expect_elements(ctx, t, n, want_expr, ...)                                                   \
  do {                                                                                               \
    int64_t bad_ = 0, first_ = -1;                                                                   \
    float got_ = 0, exp_ = 0;                                                                        \
    void *h_ = download((ctx), (t));                                                                 \
    for (int64_t i = 0; i < (n); i++) {                                                              \
      float w_ = (want_expr), g_ = gaaw_load_f32(h_, (t)->dtype, i);                                 \
      if (g_ != w_) {                                                                                \
        if (first_ < 0) first_ = i, got_ = g_, exp_ = w_;                                            \
        bad_++;                                                                                      \
      }                                                                                              \
    }                                                                                                \
    expect_true(bad_ == 0, __VA_ARGS__);                                                             \
    if (bad_) fprintf(stderr, "  element %lld is %g, expected %g; %lld of %lld wrong\n", (long long)first_, \
                      got_, exp_, (long long)bad_, (long long)(n));                                  \
    free(h_);                                                                                        \
  } while (0)

static void check_allreduce(group *g, gaaw_dtype_t dtype, gaaw_reduce_op_t op, int64_t n, int in_place)
{
  gaaw_tensor_t send = make(g->ctx, dtype, n), recv = in_place ? send : make(g->ctx, dtype, n);
  fill(g->ctx, &send, n, val(g->rank, i));
  if (!in_place) fill(g->ctx, &recv, n, 99.0f);
  expect_status_ctx(g->ctx, gaaw_comm_allreduce(g->comm, &send, &recv, op), GAAW_SUCCESS);
  const char *how = in_place ? "in place" : "out of place";
  expect_elements(g->ctx, &recv, n, reference(op, g->size, i), "allreduce %s %s n=%lld %s on %s", gaaw_dtype_name(dtype),
                  op == GAAW_SUM ? "sum" : "max", (long long)n, how, g->name);
  if (!in_place) {
    expect_elements(g->ctx, &send, n, (float)val(g->rank, i), "allreduce changed its send tensor (%s n=%lld on %s)",
                    gaaw_dtype_name(dtype), (long long)n, g->name);
    drop(g->ctx, &recv);
  }
  drop(g->ctx, &send);
}

static void test_allreduce(group *g, int large)
{
  const int64_t sizes[] = {1, 13, 1001, 20011, N_LARGE};
  int n_sizes = large ? 5 : 4;
  for (int d = 0; d < 4; d++)
    for (int o = 0; o < 2; o++)
      for (int s = 0; s < n_sizes; s++)
        for (int in_place = 0; in_place < 2; in_place++) check_allreduce(g, dtypes[d], ops[o], sizes[s], in_place);
}

/* send: (size, n) on every member; member r gets the reduction of block r. */
static void test_reduce_scatter(group *g)
{
  const int64_t sizes[] = {1, 13, 1001, 65537};
  for (int d = 0; d < 4; d++)
    for (int o = 0; o < 2; o++)
      for (int s = 0; s < 4; s++)
        for (int in_place = 0; in_place < 2; in_place++) {
          int64_t n = sizes[s], total = n * g->size;
          gaaw_tensor_t send = make(g->ctx, dtypes[d], total);
          gaaw_tensor_t recv = in_place ? view(g->ctx, &send, g->rank * n, n) : make(g->ctx, dtypes[d], n);
          fill(g->ctx, &send, total, val(g->rank, i));
          expect_status_ctx(g->ctx, gaaw_comm_reduce_scatter(g->comm, &send, &recv, ops[o]), GAAW_SUCCESS);
          expect_elements(g->ctx, &recv, n, reference(ops[o], g->size, g->rank * n + i),
                          "reduce_scatter %s %s n=%lld %s on %s", gaaw_dtype_name(dtypes[d]),
                          o ? "max" : "sum", (long long)n, in_place ? "in place" : "out of place", g->name);
          if (!in_place) drop(g->ctx, &recv);
          drop(g->ctx, &send);
        }
}

/* send: n; recv: (size, n), block q from member q. */
static void test_allgather(group *g)
{
  const int64_t sizes[] = {1, 13, 1001, 65537};
  for (int d = 0; d < 4; d++)
    for (int s = 0; s < 4; s++)
      for (int in_place = 0; in_place < 2; in_place++) {
        int64_t n = sizes[s], total = n * g->size;
        gaaw_tensor_t recv = make(g->ctx, dtypes[d], total);
        gaaw_tensor_t send = in_place ? view(g->ctx, &recv, g->rank * n, n) : make(g->ctx, dtypes[d], n);
        if (!in_place) fill(g->ctx, &recv, total, 99.0f);
        fill(g->ctx, &send, n, val(g->rank, i));
        expect_status_ctx(g->ctx, gaaw_comm_allgather(g->comm, &send, &recv), GAAW_SUCCESS);
        expect_elements(g->ctx, &recv, total, (float)val((int)(i / n), i % n), "allgather %s n=%lld %s on %s",
                        gaaw_dtype_name(dtypes[d]), (long long)n, in_place ? "in place" : "out of place", g->name);
        if (!in_place) drop(g->ctx, &send);
        drop(g->ctx, &recv);
      }
}

static void test_broadcast(group *g)
{
  for (int d = 0; d < 4; d++)
    for (int root = 0; root < g->size; root++) {
      int64_t n = 1001;
      gaaw_tensor_t t = make(g->ctx, dtypes[d], n);
      fill(g->ctx, &t, n, val(g->rank, i));
      expect_status_ctx(g->ctx, gaaw_comm_broadcast(g->comm, &t, root), GAAW_SUCCESS);
      expect_elements(g->ctx, &t, n, (float)val(root, i), "broadcast %s from root %d on %s", gaaw_dtype_name(dtypes[d]), root,
                      g->name);
      drop(g->ctx, &t);
    }
}

/* Each member sends to the next and receives from the previous (even members send
 * first, so the blocking calls cannot wait on each other in a cycle). */
static void test_send_recv(group *g)
{
  if (g->size < 2) return;
  int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
  for (int d = 0; d < 4; d++) {
    int64_t n = 70001; /* large enough for MPI's rendezvous protocol */
    gaaw_tensor_t out = make(g->ctx, dtypes[d], n), in = make(g->ctx, dtypes[d], n);
    fill(g->ctx, &out, n, val(g->rank, i));
    fill(g->ctx, &in, n, 99.0f);
    for (int phase = 0; phase < 2; phase++) {
      if ((g->rank % 2 == 0) == (phase == 0))
        expect_status_ctx(g->ctx, gaaw_comm_send(g->comm, &out, next, 7 + d), GAAW_SUCCESS);
      else
        expect_status_ctx(g->ctx, gaaw_comm_recv(g->comm, &in, prev, 7 + d), GAAW_SUCCESS);
    }
    expect_elements(g->ctx, &in, n, (float)val(prev, i), "recv %s from %d on %s", gaaw_dtype_name(dtypes[d]), prev, g->name);
    drop(g->ctx, &out);
    drop(g->ctx, &in);
  }
}

/* Member q's block j (m elements) goes to member j: values val(q * 31 + j, k). */
static void test_alltoall(group *g)
{
  for (int d = 0; d < 4; d++)
    for (int m = 1; m <= 7; m += 6)
      for (int in_place = 0; in_place < 2; in_place++) {
        int64_t n = m * g->size;
        gaaw_tensor_t send = make(g->ctx, dtypes[d], n), recv = in_place ? send : make(g->ctx, dtypes[d], n);
        fill(g->ctx, &send, n, val(g->rank * 31 + (int)(i / m), i % m));
        expect_status_ctx(g->ctx, gaaw_comm_alltoall(g->comm, &send, &recv), GAAW_SUCCESS);
        expect_elements(g->ctx, &recv, n, (float)val((int)(i / m) * 31 + g->rank, i % m), "alltoall %s m=%d %s on %s",
                        gaaw_dtype_name(dtypes[d]), m, in_place ? "in place" : "out of place", g->name);
        if (!in_place) drop(g->ctx, &recv);
        drop(g->ctx, &send);
      }
}

/* Member q sends member j alltoallv_count(q, j) * m elements (some blocks empty),
 * values val(q * 31 + j, k); the counts travel first through
 * gaaw_comm_alltoall_counts (two per member, to check its block order); recv has
 * 3 elements more, which must keep their 99. The counters: the elements sent, and
 * the counts' 8 n size bytes as an all-to-all. */
static int64_t alltoallv_count(int q, int j)
{
  return (q * 3 + j * 5 + 1) % 4;
}

static void test_alltoallv(group *g)
{
  gaaw_context_t ctx = g->ctx;
  const int p = g->size;
  int64_t sc[p], rc[p], pairs[2 * p], got[2 * p];
  for (int d = 0; d < 4; d++)
    for (int m = 1; m <= 7; m += 6) {
      int64_t sent = 0, received = 0;
      for (int j = 0; j < p; j++) {
        sc[j] = alltoallv_count(g->rank, j) * m, sent += sc[j];
        pairs[2 * j] = sc[j], pairs[2 * j + 1] = 1000 * g->rank + j;
      }
      require_ok(ctx, gaaw_comm_stats_reset(g->comm));
      require_ok(ctx, gaaw_comm_alltoall_counts(g->comm, 2, pairs, got));
      for (int i = 0; i < p; i++) {
        rc[i] = got[2 * i], received += rc[i];
        expect_true(rc[i] == alltoallv_count(i, g->rank) * m && got[2 * i + 1] == 1000 * i + g->rank,
                    "counts from %d on %s: %lld, %lld", i, g->name, (long long)rc[i], (long long)got[2 * i + 1]);
      }
      float *out = malloc(sizeof(float) * (size_t)(sent + 1)), *want = malloc(sizeof(float) * (size_t)(received + 4));
      for (int j = 0, at = 0; j < p; j++)
        for (int64_t k = 0; k < sc[j]; k++) out[at++] = (float)val(g->rank * 31 + j, k);
      for (int i = 0, at = 0; i < p; i++)
        for (int64_t k = 0; k < rc[i]; k++) want[at++] = (float)val(i * 31 + g->rank, k);
      for (int k = 0; k < 3; k++) want[received + k] = 99.0f;
      gaaw_tensor_t send = make(ctx, dtypes[d], sent + 1), recv = make(ctx, dtypes[d], received + 3);
      fill(ctx, &send, sent + 1, i < sent ? out[i] : -1.0f);
      fill(ctx, &recv, received + 3, 99.0f);
      expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &send, sc, &recv, rc), GAAW_SUCCESS);
      expect_elements(ctx, &recv, received + 3, want[i], "alltoallv %s m=%d on %s", gaaw_dtype_name(dtypes[d]), m,
                      g->name);
      uint64_t calls, bytes, want_bytes = (uint64_t)sent * gaaw_dtype_size(dtypes[d]);
      require_ok(ctx, gaaw_comm_stats(g->comm, GAAW_COMM_ALLTOALLV, &calls, &bytes));
      expect_true(calls == 1 && bytes == want_bytes, "alltoallv on %s: %llu calls, %llu bytes; expected 1, %llu",
                  g->name, (unsigned long long)calls, (unsigned long long)bytes, (unsigned long long)want_bytes);
      require_ok(ctx, gaaw_comm_stats(g->comm, GAAW_COMM_ALLTOALL, &calls, &bytes));
      expect_true(calls == 1 && bytes == (uint64_t)(16 * p), "counts on %s: %llu calls, %llu bytes; expected 1, %d",
                  g->name, (unsigned long long)calls, (unsigned long long)bytes, 16 * p);
      drop(ctx, &send);
      drop(ctx, &recv);
      free(out);
      free(want);
    }
}

/* Bad alltoallv arguments, the same on every rank: refused before any traffic. */
static void test_alltoallv_bad_input(group *g)
{
  gaaw_context_t ctx = g->ctx;
  const int p = g->size, E = GAAW_ERR_INVALID_ARG;
  int64_t ones[p], neg[p], many[p];
  for (int j = 0; j < p; j++) ones[j] = 1, neg[j] = j == p - 1 ? -1 : 1, many[j] = 3;
  gaaw_tensor_t a = make(ctx, GAAW_F32, 2 * p), b = make(ctx, GAAW_F32, 2 * p), h = make(ctx, GAAW_BF16, 2 * p);
  expect_status(gaaw_comm_alltoallv(NULL, &a, ones, &b, ones), E);
  expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &a, NULL, &b, ones), E);
  expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &a, ones, &b, NULL), E);
  expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &a, neg, &b, ones), E);
  expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &a, many, &b, ones), E); /* 3 p > 2 p elements */
  expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &a, ones, &b, many), E);
  expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &a, ones, &h, ones), E); /* dtypes differ */
  expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &a, ones, &a, ones), E); /* in place */
  int64_t c[2 * p];
  expect_status_ctx(ctx, gaaw_comm_alltoall_counts(g->comm, -1, ones, c), E);
  expect_status_ctx(ctx, gaaw_comm_alltoall_counts(g->comm, 1, NULL, c), E);
  expect_status_ctx(ctx, gaaw_comm_alltoall_counts(g->comm, 2, c, c + 1), E); /* overlap */
  expect_status_ctx(ctx, gaaw_comm_alltoallv(g->comm, &a, ones, &b, ones), GAAW_SUCCESS); /* still usable */
  drop(ctx, &a);
  drop(ctx, &b);
  drop(ctx, &h);
}

/* One call of each operation after a reset; bytes as documented in gaaw/comm.h. */
static void test_stats(group *g)
{
  gaaw_context_t ctx = g->ctx;
  int64_t n = 12;
  uint64_t calls, bytes;
  gaaw_tensor_t a = make(ctx, GAAW_BF16, n), big = make(ctx, GAAW_BF16, n * g->size);
  fill(ctx, &big, n * g->size, 1.0f);
  fill(ctx, &a, n, 1.0f);
  require_ok(ctx, gaaw_comm_stats_reset(g->comm));
  require_ok(ctx, gaaw_comm_allreduce(g->comm, &a, &a, GAAW_SUM));
  require_ok(ctx, gaaw_comm_reduce_scatter(g->comm, &big, &a, GAAW_SUM));
  require_ok(ctx, gaaw_comm_allgather(g->comm, &a, &big));
  require_ok(ctx, gaaw_comm_broadcast(g->comm, &a, 0));
  require_ok(ctx, gaaw_comm_alltoall(g->comm, &big, &big));
  require_ok(ctx, gaaw_comm_barrier(g->comm));
  require_ok(ctx, gaaw_comm_barrier(g->comm));
  const struct { gaaw_comm_op_t op; uint64_t calls, bytes; } want[] = {
    {GAAW_COMM_ALLREDUCE, 1, 2 * n * 2},                     /* reduce-scatter + all-gather of n */
    {GAAW_COMM_REDUCE_SCATTER, 1, (uint64_t)(n * g->size * 2)}, /* the full send tensor */
    {GAAW_COMM_ALLGATHER, 1, (uint64_t)(n * g->size * 2)},      /* the full recv tensor */
    {GAAW_COMM_BROADCAST, 1, n * 2},
    {GAAW_COMM_SEND, 0, 0},
    {GAAW_COMM_RECV, 0, 0},
    {GAAW_COMM_ALLTOALL, 1, (uint64_t)(n * g->size * 2)},
    {GAAW_COMM_BARRIER, 2, 0},
  };
  for (int k = 0; k < 8; k++) {
    require_ok(ctx, gaaw_comm_stats(g->comm, want[k].op, &calls, &bytes));
    expect_true(calls == want[k].calls && bytes == want[k].bytes, "%s on %s: %llu calls, %llu bytes; expected %llu, %llu",
                gaaw_comm_op_name(want[k].op), g->name, (unsigned long long)calls, (unsigned long long)bytes,
                (unsigned long long)want[k].calls, (unsigned long long)want[k].bytes);
  }
  if (g->size > 1) {
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    require_ok(ctx, gaaw_comm_stats_reset(g->comm));
    if (g->rank % 2 == 0) {
      require_ok(ctx, gaaw_comm_send(g->comm, &a, next, 1));
      require_ok(ctx, gaaw_comm_recv(g->comm, &a, prev, 1));
    } else {
      require_ok(ctx, gaaw_comm_recv(g->comm, &a, prev, 1));
      require_ok(ctx, gaaw_comm_send(g->comm, &a, next, 1));
    }
    for (gaaw_comm_op_t op = GAAW_COMM_SEND; op <= GAAW_COMM_RECV; op++) {
      require_ok(ctx, gaaw_comm_stats(g->comm, op, &calls, &bytes));
      expect_true(calls == 1 && bytes == (uint64_t)n * 2, "%s on %s: %llu calls, %llu bytes; expected 1, %lld",
                  gaaw_comm_op_name(op), g->name, (unsigned long long)calls, (unsigned long long)bytes,
                  (long long)n * 2);
    }
    require_ok(ctx, gaaw_comm_stats(g->comm, GAAW_COMM_ALLREDUCE, &calls, NULL));
    expect_true(calls == 0, "allreduce calls after a reset and only send/recv: %llu", (unsigned long long)calls);
  }
  drop(ctx, &a);
  drop(ctx, &big);
}

/* The non-blocking collectives: three started back to back and waited for in
 * reverse order, then one started before a blocking call on the same communicator
 * (which runs after it in every member's order) give the blocking results; they
 * are counted when started; bad input is refused before anything starts, and the
 * communicator stays usable. */
static void test_nonblocking(group *g)
{
  gaaw_context_t ctx = g->ctx;
  int64_t n = 1001, total = n * g->size;
  gaaw_tensor_t a = make(ctx, GAAW_F32, n), sum = make(ctx, GAAW_F32, n);
  gaaw_tensor_t rs_in = make(ctx, GAAW_BF16, total), rs_out = make(ctx, GAAW_BF16, n);
  gaaw_tensor_t ag_out = make(ctx, GAAW_I32, total), ag_in = view(ctx, &ag_out, g->rank * n, n);
  fill(ctx, &a, n, val(g->rank, i));
  fill(ctx, &rs_in, total, val(g->rank, i));
  fill(ctx, &ag_in, n, val(g->rank, i));
  gaaw_comm_request_t req[3] = {NULL, NULL, NULL};
  uint64_t calls = 0;
  require_ok(ctx, gaaw_comm_stats_reset(g->comm));
  expect_status_ctx(ctx, gaaw_comm_allreduce_start(g->comm, &a, &sum, GAAW_SUM, &req[0]), GAAW_SUCCESS);
  require_ok(ctx, gaaw_comm_stats(g->comm, GAAW_COMM_ALLREDUCE, &calls, NULL));
  expect_true(calls == 1, "a started all-reduce on %s counts %llu calls, expected 1", g->name,
              (unsigned long long)calls);
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter_start(g->comm, &rs_in, &rs_out, GAAW_MAX, &req[1]), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_comm_allgather_start(g->comm, &ag_in, &ag_out, &req[2]), GAAW_SUCCESS);
  expect_true(req[0] && req[1] && req[2], "a started operation on %s gave no request", g->name);
  for (int k = 2; k >= 0; k--) expect_status_ctx(ctx, gaaw_comm_wait(&req[k]), GAAW_SUCCESS);
  expect_true(!req[0] && !req[1] && !req[2], "gaaw_comm_wait left a request behind on %s", g->name);
  expect_elements(ctx, &sum, n, reference(GAAW_SUM, g->size, i), "started all-reduce (f32 sum) on %s", g->name);
  expect_elements(ctx, &rs_out, n, reference(GAAW_MAX, g->size, g->rank * n + i),
                  "started reduce-scatter (bf16 max) on %s", g->name);
  expect_elements(ctx, &ag_out, total, (float)val((int)(i / n), i % n), "started all-gather (i32, in place) on %s",
                  g->name);

  /* started, then a blocking all-reduce of its result: the started one runs first */
  expect_status_ctx(ctx, gaaw_comm_allreduce_start(g->comm, &a, &sum, GAAW_SUM, &req[0]), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_comm_allreduce(g->comm, &sum, &sum, GAAW_MAX), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_comm_wait(&req[0]), GAAW_SUCCESS);
  expect_elements(ctx, &sum, n, reference(GAAW_SUM, g->size, i),
                  "a blocking all-reduce after a started one on %s saw the started one's result", g->name);

  /* bad input: refused at the start, nothing queued, the communicator still works */
  gaaw_tensor_t wrong = a;
  wrong.dtype = GAAW_F16;
  req[0] = (gaaw_comm_request_t)&wrong; /* must be overwritten with NULL */
  expect_status_ctx(ctx, gaaw_comm_allreduce_start(g->comm, &a, &wrong, GAAW_SUM, &req[0]), GAAW_ERR_INVALID_ARG);
  expect_true(req[0] == NULL, "a refused start on %s left a request", g->name);
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter_start(g->comm, &a, &a, GAAW_SUM, &req[0]), g->size > 1
                    ? GAAW_ERR_INVALID_ARG : GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_comm_wait(&req[0]), GAAW_SUCCESS); /* NULL after a refusal: a no-op */
  expect_status_ctx(ctx, gaaw_comm_allgather_start(g->comm, &a, &a, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_comm_allreduce_start(NULL, &a, &a, GAAW_SUM, &req[0]), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_comm_allreduce_start(g->comm, &a, &a, (gaaw_reduce_op_t)7, &req[0]),
                    GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_comm_wait(NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_comm_allreduce(g->comm, &a, &sum, GAAW_SUM), GAAW_SUCCESS);
  expect_elements(ctx, &sum, n, reference(GAAW_SUM, g->size, i), "all-reduce after refused starts on %s", g->name);
  drop(ctx, &a);
  drop(ctx, &sum);
  drop(ctx, &rs_in);
  drop(ctx, &rs_out);
  drop(ctx, &ag_out);
}

/* A bit-exact hash of a tensor's bytes. */
static uint64_t hash_of(gaaw_context_t ctx, const gaaw_tensor_t *t)
{
  unsigned char *p = download(ctx, t);
  size_t bytes = bytes_of(t);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  free(p);
  return h;
}

/* Non-integer data, where the order of the additions shows in the result: the same
 * all-reduce twice is bit-identical, and every member of the group has the same
 * bits (compared through a plain MPI reduction over world, so only on world). */
static void test_deterministic(group *g)
{
  const int64_t sizes[] = {1001, 300007};
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++) {
      int64_t n = sizes[s];
      gaaw_tensor_t send = make(g->ctx, dtypes[d], n), r1 = make(g->ctx, dtypes[d], n), r2 = make(g->ctx, dtypes[d], n);
      fill(g->ctx, &send, n, (float)((i * 2654435761u + (uint64_t)g->rank * 40503u) % 100003) / 977.0f - 51.3f);
      require_ok(g->ctx, gaaw_comm_allreduce(g->comm, &send, &r1, GAAW_SUM));
      require_ok(g->ctx, gaaw_comm_allreduce(g->comm, &send, &r2, GAAW_SUM));
      uint64_t h1 = hash_of(g->ctx, &r1), h2 = hash_of(g->ctx, &r2);
      expect_true(h1 == h2, "allreduce %s n=%lld on %s is not bit-identical run to run", gaaw_dtype_name(dtypes[d]),
                  (long long)n, g->name);
      if (strcmp(g->name, "world") == 0) {
        uint64_t lo, hi;
        MPI_Allreduce(&h1, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&h1, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        expect_true(lo == hi, "allreduce %s n=%lld on world differs between ranks", gaaw_dtype_name(dtypes[d]),
                    (long long)n);
      }
      drop(g->ctx, &send);
      drop(g->ctx, &r1);
      drop(g->ctx, &r2);
    }
}

/* Wrong arguments name the problem and leave the communicator usable. */
static void test_bad_input(group *g)
{
  gaaw_context_t ctx = g->ctx;
  gaaw_comm_t c = g->comm;
  const int E = GAAW_ERR_INVALID_ARG;
  int64_t n = 8 * g->size;
  gaaw_tensor_t a = make(ctx, GAAW_F32, n), b = make(ctx, GAAW_F32, n), h = make(ctx, GAAW_BF16, n);
  gaaw_tensor_t shortt = view(ctx, &b, 0, n - 1), part = view(ctx, &a, 1, n - 1), head = view(ctx, &a, 0, n - 1);
  gaaw_tensor_t one = view(ctx, &b, 0, 8);
  fill(ctx, &a, n, 1.0f);
  fill(ctx, &b, n, 1.0f);
  expect_status(gaaw_comm_allreduce(NULL, &a, &b, GAAW_SUM), E);
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, NULL, &b, GAAW_SUM), E);
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &a, NULL, GAAW_SUM), E);
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &a, &h, GAAW_SUM), E);      /* dtype mismatch */
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &a, &shortt, GAAW_SUM), E); /* sizes differ */
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &a, &b, (gaaw_reduce_op_t)7), E);
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &head, &part, GAAW_SUM), E); /* overlap, not in place */
  gaaw_tensor_t broken = a;
  broken.dtype = (gaaw_dtype_t)9;
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &broken, &broken, GAAW_SUM), E);
  broken = a;
  broken.offset = 4; /* n elements no longer fit in the buffer */
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &broken, &broken, GAAW_SUM), E);
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter(c, &a, &b, GAAW_SUM), g->size == 1 ? GAAW_SUCCESS : E);
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter(c, &a, &one, (gaaw_reduce_op_t)-1), E);
  expect_status_ctx(ctx, gaaw_comm_reduce_scatter(c, &h, &one, GAAW_SUM), E);
  expect_status_ctx(ctx, gaaw_comm_allgather(c, &a, &b), g->size == 1 ? GAAW_SUCCESS : E);
  expect_status_ctx(ctx, gaaw_comm_allgather(c, NULL, &b), E);
  expect_status_ctx(ctx, gaaw_comm_broadcast(c, NULL, 0), E);
  expect_status_ctx(ctx, gaaw_comm_broadcast(c, &a, -1), E);
  expect_status_ctx(ctx, gaaw_comm_broadcast(c, &a, g->size), E);
  expect_status_ctx(ctx, gaaw_comm_send(c, &a, g->rank, 0), E); /* to itself */
  expect_status_ctx(ctx, gaaw_comm_send(c, &a, g->size, 0), E);
  expect_status_ctx(ctx, gaaw_comm_send(c, &a, -1, 0), E);
  expect_status_ctx(ctx, gaaw_comm_send(c, &a, (g->rank + 1) % g->size, -1), E);
  expect_status_ctx(ctx, gaaw_comm_recv(c, &a, (g->rank + 1) % g->size, 40000), E);
  expect_status_ctx(ctx, gaaw_comm_recv(c, NULL, 0, 0), E);
  expect_status_ctx(ctx, gaaw_comm_alltoall(c, &a, &h), E);
  expect_status_ctx(ctx, gaaw_comm_alltoall(c, &a, &shortt), E);
  if (g->size > 1) expect_status_ctx(ctx, gaaw_comm_alltoall(c, &shortt, &shortt), E); /* not divisible */
  expect_status(gaaw_comm_barrier(NULL), E);
  expect_status_ctx(ctx, gaaw_comm_stats(c, (gaaw_comm_op_t)GAAW_COMM_OP_COUNT, NULL, NULL), E);
  expect_status(gaaw_comm_stats(NULL, GAAW_COMM_BARRIER, NULL, NULL), E);
  expect_status(gaaw_comm_stats_reset(NULL), E);
  expect_status_ctx(ctx, gaaw_comm_rank(c, NULL), E);
  expect_status_ctx(ctx, gaaw_comm_size(c, NULL), E);
  expect_status_ctx(ctx, gaaw_comm_backend(c, NULL), E);
  const char *backend = NULL;
  expect_status_ctx(ctx, gaaw_comm_backend(c, &backend), GAAW_SUCCESS);
  expect_true(backend && strcmp(backend, "mpi") == 0, "backend of %s is %s, expected mpi", g->name,
              backend ? backend : "NULL");
  /* still usable */
  expect_status_ctx(ctx, gaaw_comm_allreduce(c, &a, &b, GAAW_SUM), GAAW_SUCCESS);
  expect_elements(ctx, &b, n, (float)g->size, "allreduce after bad input on %s", g->name);
  drop(ctx, &a);
  drop(ctx, &b);
  drop(ctx, &h);
}

/* Staging writes back exactly its tensor: a reduction between two views of one
 * buffer (disjoint, then in place) leaves the elements around them untouched. */
static void test_neighbours(group *g)
{
  for (int d = 0; d < 4; d++) {
    int64_t n = 1001;
    gaaw_tensor_t all = make(g->ctx, dtypes[d], 4 * n);
    gaaw_tensor_t a = view(g->ctx, &all, 1, n), b = view(g->ctx, &all, 2 * n + 1, n);
    fill(g->ctx, &all, 4 * n, -7.0f);
    fill(g->ctx, &a, n, val(g->rank, i));
    expect_status_ctx(g->ctx, gaaw_comm_allreduce(g->comm, &a, &b, GAAW_SUM), GAAW_SUCCESS);
    expect_status_ctx(g->ctx, gaaw_comm_allreduce(g->comm, &a, &a, GAAW_MAX), GAAW_SUCCESS);
    /* all: [-7][max of a: n][-7 ...][sum of a: n][-7 ...] */
    expect_elements(g->ctx, &all, 4 * n,
                    i >= 1 && i < n + 1             ? reference(GAAW_MAX, g->size, i - 1)
                    : i >= 2 * n + 1 && i < 3 * n + 1 ? reference(GAAW_SUM, g->size, i - 2 * n - 1)
                                                      : -7.0f,
                    "allreduce between views of one %s buffer on %s", gaaw_dtype_name(dtypes[d]), g->name);
    drop(g->ctx, &all);
  }
}

static const char *backend = COMM_TEST_BACKEND;

/* On a device backend the tensors must really be device memory, or nothing here
 * tests the staging. */
static void check_memory_kind(gaaw_context_t ctx)
{
  gaaw_tensor_t t = make(ctx, GAAW_F32, 4);
  void *p = NULL;
  gaaw_status_t st = gaaw_buffer_host_ptr(t.buf, &p);
  int want_host = strcmp(backend, "host") == 0;
  expect_true((st == GAAW_SUCCESS) == want_host, "%s buffers %s a host address", backend,
              st == GAAW_SUCCESS ? "have" : "lack");
  drop(ctx, &t);
}

static gaaw_context_t open_ctx(gaaw_config_t *cfg, int size, const char *ring_bytes)
{
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(cfg));
  require_ok(NULL, gaaw_config_set(*cfg, "backend", backend));
  if (size == 4) require_ok(NULL, gaaw_config_set(*cfg, "tp", "2"));
  if (ring_bytes) require_ok(NULL, gaaw_config_set(*cfg, "allreduce_ring_bytes", ring_bytes));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, *cfg, &ctx));
  return ctx;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc > 1) backend = argv[1];
  if (!test_on_every_rank(MPI_COMM_WORLD, test_backend_usable(backend))) {
    if (rank == 0) printf("test_comm: backend %s is not built or finds no device on some rank; skipping\n", backend);
    MPI_Finalize();
    return 77;
  }
  gaaw_config_t cfg;
  gaaw_context_t ctx = open_ctx(&cfg, size, NULL);
  check_memory_kind(ctx);
  group world = open_group(ctx, GAAW_GROUP_WORLD);
  group parts[2] = {open_group(ctx, GAAW_GROUP_TP), open_group(ctx, GAAW_GROUP_DP)};
  test_allreduce(&world, 1);
  test_reduce_scatter(&world);
  test_allgather(&world);
  test_broadcast(&world);
  test_send_recv(&world);
  test_alltoall(&world);
  test_alltoallv(&world);
  test_alltoallv_bad_input(&world);
  test_stats(&world);
  test_nonblocking(&world);
  test_deterministic(&world);
  test_bad_input(&world);
  test_neighbours(&world);
  for (int k = 0; k < 2; k++) {
    test_allreduce(&parts[k], 0);
    test_reduce_scatter(&parts[k]);
    test_allgather(&parts[k]);
    test_broadcast(&parts[k]);
    test_send_recv(&parts[k]);
    test_alltoallv(&parts[k]);
    test_stats(&parts[k]);
    test_nonblocking(&parts[k]);
    test_deterministic(&parts[k]);
  }
  require_ok(ctx, gaaw_finalize(&ctx));
  require_ok(NULL, gaaw_config_destroy(&cfg));

  /* Every all-reduce of at least one element per member through the ring. */
  ctx = open_ctx(&cfg, size, "1");
  world = open_group(ctx, GAAW_GROUP_WORLD);
  group tp = open_group(ctx, GAAW_GROUP_TP);
  test_allreduce(&world, 0);
  test_allreduce(&tp, 0);
  test_deterministic(&world);
  require_ok(ctx, gaaw_finalize(&ctx));
  require_ok(NULL, gaaw_config_destroy(&cfg));

  char name[48];
  snprintf(name, sizeof name, "test_comm_np%d (%s) rank %d", size, backend, rank);
  int code = test_finish(name);
  MPI_Finalize();
  return code;
}
