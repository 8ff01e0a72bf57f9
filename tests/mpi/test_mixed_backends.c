/* One job on mixed device backends, launched by test_mixed_backends.sh as
 *   mpiexec -n 2 env GAAW_BACKEND=host prog mixed : -n 2 env GAAW_BACKEND=opencl prog mixed
 * so world ranks 0, 1 run on the host and 2, 3 on OpenCL (PoCL). With tp = 2 and tp
 * varying fastest, each tp group is homogeneous ({0,1} host, {2,3} OpenCL) and each
 * dp group is mixed ({0,2}, {1,3}); `mixed` makes the program check that split.
 * The same program with `host` checks an all-host launch (every comparison exact).
 *
 * Against the single-backend run, made in the same program by a second context that
 * forces backend=host on the same world and layout:
 *  - every collective on world, tp and dp (exact small-integer data) equals a naive
 *    reference, and a non-integer all-reduce and reduce-scatter are bit-identical to
 *    the all-host context's (the MPI backend stages device tensors, then runs the
 *    same host algorithm);
 *  - a GPT (2 layers, dim 16, f32) trained 5 AdamW steps with ZeRO 1 on tp 2 x dp 2
 *    ends with every parameter within 1e-5 of its own largest |value| in the all-host run
 *    (the key biases, whose exact gradient is zero, only stay small: model_util.h)
 *    (OpenCL's GEMMs and reductions round differently from the host's; Adam then
 *    magnifies differences of tiny gradients, as in test_zero), and the mixed run
 *    twice is bit-identical. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/runtime/half.h"
#include "tests/harness/comm_util.h"
#include "tests/harness/model_util.h"

enum { B = 2, T = 8, STEPS = 5 };
static int world_rank, world_size;

/* Member q's element i: an integer in -5..5, so sums over 4 ranks are exact. */
static int val(int q, int64_t i)
{
  return (int)((i * 7 + q * 13) % 11) - 5;
}

/* backend NULL: from the environment (GAAW_BACKEND), as launched. */
static gaaw_context_t open_ctx(const char *backend)
{
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(&cfg));
  if (backend) require_ok(NULL, gaaw_config_set(cfg, "backend", backend));
  require_ok(NULL, gaaw_config_set_int(cfg, "tp", 2));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_config_destroy(&cfg);
  return ctx;
}

/* ---- tensors moved through gaaw_buffer_read/write (device memory or not) ---- */

static size_t bytes_of(const gaaw_tensor_t *t)
{
  return (size_t)gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype);
}

static gaaw_tensor_t make(gaaw_context_t ctx, gaaw_dtype_t dtype, int64_t n)
{
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, dtype, 1, (int64_t[]){n}, GAAW_MEM_WORKSPACE, &t));
  return t;
}

static gaaw_tensor_t view(const gaaw_tensor_t *t, int64_t at, int64_t n)
{
  gaaw_tensor_t v;
  require_ok(NULL, gaaw_tensor_view(t->buf, t->offset + (size_t)at * gaaw_dtype_size(t->dtype), t->dtype, 1,
                                    (int64_t[]){n}, &v));
  return v;
}

/* t[i] := f32 value v[i] (converted to t's dtype). */
static void upload(gaaw_context_t ctx, const gaaw_tensor_t *t, const float *v)
{
  int64_t n = gaaw_tensor_numel(t);
  void *h = malloc(bytes_of(t) + 1);
  for (int64_t i = 0; i < n; i++) gaaw_store_f32(h, t->dtype, i, v[i]);
  require_ok(ctx, gaaw_buffer_write(ctx, t->buf, t->offset, h, bytes_of(t)));
  free(h);
}

/* t's elements as f32 (malloc'd). */
static float *download(gaaw_context_t ctx, const gaaw_tensor_t *t)
{
  int64_t n = gaaw_tensor_numel(t);
  void *h = malloc(bytes_of(t) + 1);
  float *v = malloc(sizeof(float) * (size_t)(n + 1));
  require_ok(ctx, gaaw_buffer_read(ctx, t->buf, t->offset, h, bytes_of(t)));
  for (int64_t i = 0; i < n; i++) v[i] = gaaw_load_f32(h, t->dtype, i);
  free(h);
  return v;
}

static void drop(gaaw_context_t ctx, gaaw_tensor_t *t)
{
  require_ok(ctx, gaaw_buffer_free(ctx, &t->buf));
}

/* got[i] == want[i] bit for bit, and finite, for i < n; reports the first difference. */
static void expect_exact(const float *got, const float *want, int64_t n, const char *what, const char *group)
{
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if ((memcmp(&got[i], &want[i], sizeof(float)) != 0 || !isfinite(got[i])) && bad++ == 0) first = i;
  expect_true(bad == 0, "%s on %s (rank %d): %lld of %lld differ, first element %lld is %.9g, expected %.9g", what,
              group, world_rank, (long long)bad, (long long)n, (long long)first, bad ? got[first] : 0.0,
              bad ? want[first] : 0.0);
}

/* ---- collectives ---- */

/* Every operation with exact integer data against a naive loop. */
static void check_exact_ops(group *g, gaaw_dtype_t dtype)
{
  gaaw_context_t ctx = g->ctx;
  const int p = g->size, r = g->rank;
  const int64_t n = 20011; /* large enough for the ring all-reduce */
  const char *dn = gaaw_dtype_name(dtype);
  float *in = malloc(sizeof(float) * (size_t)n * p), *want = malloc(sizeof(float) * (size_t)n * p), *got;
  char what[64];

  /* all-reduce sum, in place */
  gaaw_tensor_t a = make(ctx, dtype, n);
  for (int64_t i = 0; i < n; i++) {
    in[i] = (float)val(r, i);
    want[i] = 0;
    for (int q = 0; q < p; q++) want[i] += (float)val(q, i);
  }
  upload(ctx, &a, in);
  require_ok(ctx, gaaw_comm_allreduce(g->comm, &a, &a, GAAW_SUM));
  snprintf(what, sizeof what, "allreduce %s in place", dn);
  expect_exact(got = download(ctx, &a), want, n, what, g->name);
  free(got);

  /* reduce-scatter, out of place: send (p, n), member r gets block r summed */
  gaaw_tensor_t big = make(ctx, dtype, n * p);
  for (int64_t i = 0; i < n * p; i++) in[i] = (float)val(r, i);
  for (int64_t i = 0; i < n; i++) {
    want[i] = 0;
    for (int q = 0; q < p; q++) want[i] += (float)val(q, r * n + i);
  }
  upload(ctx, &big, in);
  require_ok(ctx, gaaw_comm_reduce_scatter(g->comm, &big, &a, GAAW_SUM));
  snprintf(what, sizeof what, "reduce_scatter %s", dn);
  expect_exact(got = download(ctx, &a), want, n, what, g->name);
  free(got);

  /* all-gather in place: this member's block of big is the send tensor */
  gaaw_tensor_t mine = view(&big, r * n, n);
  for (int64_t i = 0; i < n; i++) in[i] = (float)val(r, i);
  upload(ctx, &mine, in);
  for (int64_t i = 0; i < n * p; i++) want[i] = (float)val((int)(i / n), i % n);
  require_ok(ctx, gaaw_comm_allgather(g->comm, &mine, &big));
  snprintf(what, sizeof what, "allgather %s in place", dn);
  expect_exact(got = download(ctx, &big), want, n * p, what, g->name);
  free(got);

  /* broadcast from the last member */
  for (int64_t i = 0; i < n; i++) in[i] = (float)val(r, i), want[i] = (float)val(p - 1, i);
  upload(ctx, &a, in);
  require_ok(ctx, gaaw_comm_broadcast(g->comm, &a, p - 1));
  snprintf(what, sizeof what, "broadcast %s", dn);
  expect_exact(got = download(ctx, &a), want, n, what, g->name);
  free(got);

  /* all-to-all, out of place, m = 3 per block: member q's block j goes to member j */
  const int m = 3;
  gaaw_tensor_t s2 = make(ctx, dtype, m * p), r2 = make(ctx, dtype, m * p);
  for (int64_t i = 0; i < m * p; i++) {
    in[i] = (float)val(r * 31 + (int)(i / m), i % m);
    want[i] = (float)val((int)(i / m) * 31 + r, i % m);
  }
  upload(ctx, &s2, in);
  require_ok(ctx, gaaw_comm_alltoall(g->comm, &s2, &r2));
  snprintf(what, sizeof what, "alltoall %s", dn);
  expect_exact(got = download(ctx, &r2), want, m * p, what, g->name);
  free(got);

  /* send to the next member, receive from the previous (even members send first) */
  if (p > 1) {
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    for (int64_t i = 0; i < n; i++) in[i] = (float)val(r, i), want[i] = (float)val(prev, i);
    gaaw_tensor_t out = make(ctx, dtype, n);
    upload(ctx, &out, in);
    for (int phase = 0; phase < 2; phase++) {
      if ((r % 2 == 0) == (phase == 0))
        require_ok(ctx, gaaw_comm_send(g->comm, &out, next, 3));
      else
        require_ok(ctx, gaaw_comm_recv(g->comm, &a, prev, 3));
    }
    snprintf(what, sizeof what, "send/recv %s", dn);
    expect_exact(got = download(ctx, &a), want, n, what, g->name);
    free(got);
    drop(ctx, &out);
  }
  drop(ctx, &s2);
  drop(ctx, &r2);
  drop(ctx, &big);
  drop(ctx, &a);
  free(in);
  free(want);
}

/* Non-integer data, where the order of the additions shows: all-reduce (ring and
 * MPI paths) and reduce-scatter of f32 and bf16 on g, as f32 values. */
static float *inexact_results(group *g, gaaw_dtype_t dtype, int64_t *count)
{
  gaaw_context_t ctx = g->ctx;
  const int64_t sizes[] = {1001, 300007};
  int64_t total = 0;
  for (int s = 0; s < 2; s++) total += sizes[s] * 2;
  float *res = malloc(sizeof(float) * (size_t)total), *at = res;
  for (int s = 0; s < 2; s++) {
    int64_t n = sizes[s], per = n / g->size;
    float *in = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
      in[i] = (float)((i * 2654435761u + (uint64_t)g->rank * 40503u) % 100003) / 977.0f - 51.3f;
    gaaw_tensor_t send = make(ctx, dtype, n), recv = make(ctx, dtype, n);
    upload(ctx, &send, in);
    require_ok(ctx, gaaw_comm_allreduce(g->comm, &send, &recv, GAAW_SUM));
    float *got = download(ctx, &recv);
    memcpy(at, got, sizeof(float) * (size_t)n);
    at += n;
    free(got);
    gaaw_tensor_t part = view(&recv, 0, per), whole = view(&send, 0, per * g->size);
    require_ok(ctx, gaaw_comm_reduce_scatter(g->comm, &whole, &part, GAAW_SUM));
    got = download(ctx, &part);
    memcpy(at, got, sizeof(float) * (size_t)per);
    at += per;
    free(got);
    drop(ctx, &send);
    drop(ctx, &recv);
    free(in);
  }
  *count = at - res;
  return res;
}

static void check_collectives(gaaw_context_t mixed, gaaw_context_t host)
{
  const gaaw_group_t groups[] = {GAAW_GROUP_WORLD, GAAW_GROUP_TP, GAAW_GROUP_DP};
  const gaaw_dtype_t dtypes[] = {GAAW_F32, GAAW_BF16, GAAW_F16, GAAW_I32};
  for (int k = 0; k < 3; k++) {
    group gm = open_group(mixed, groups[k]), gh = open_group(host, groups[k]);
    for (int d = 0; d < 4; d++) check_exact_ops(&gm, dtypes[d]);
    for (int d = 0; d < 2; d++) {
      int64_t nm, nh;
      float *rm = inexact_results(&gm, dtypes[d], &nm), *rh = inexact_results(&gh, dtypes[d], &nh);
      char what[64];
      snprintf(what, sizeof what, "%s all-reduce and reduce-scatter vs the all-host run", gaaw_dtype_name(dtypes[d]));
      expect_true(nm == nh, "%s: %lld values, all-host %lld", what, (long long)nm, (long long)nh);
      if (nm == nh) expect_exact(rm, rh, nm, what, gm.name);
      free(rm);
      free(rh);
    }
  }
}

/* ---- training ---- */

typedef struct {
  float *params;
  long n;
  model_layout layout; /* of params */
  float losses[STEPS];
} run_result;

/* STEPS AdamW steps, ZeRO 1, tp 2 x dp 2; dp rank d trains on microbatch d of each
 * step. */
static run_result train(gaaw_context_t ctx)
{
  run_result r;
  memset(&r, 0, sizeof r);
  int dp_rank, dp;
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, &dp));
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  oc.lr = 3e-3f;
  oc.clip_norm = 1.0f;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  model_train(ctx, model, opt, STEPS, B, T, g.vocab, 1000 + (uint64_t)dp_rank, 97, r.losses);
  r.params = model_snapshot(model, 0, &r.n);
  r.layout = model_layout_of(model);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  return r;
}

static void check_training(gaaw_context_t mixed, gaaw_context_t host, double tol)
{
  run_result want = train(host), got = train(mixed), again = train(mixed);
  char what[96];
  snprintf(what, sizeof what, "rank %d: parameters after %d steps (tp 2 x dp 2, ZeRO 1) vs the all-host run",
           world_rank, STEPS);
  expect_true(got.n == want.n, "%s: %ld values, all-host %ld", what, got.n, want.n);
  if (got.n == want.n) {
    float *set_aside = model_set_aside_key_bias(&want.layout, model_tiny_gpt(T, GAAW_F32).dim, got.params,
                                                want.params, STEPS * 3e-3, what);
    expect_close_layout(&want.layout, set_aside, want.params, tol, what);
    free(set_aside);
  }
  for (int s = 0; s < STEPS; s++)
    expect_true(fabsf(got.losses[s] - want.losses[s]) <= 1e-5f * fabsf(want.losses[s]),
                "rank %d: loss of step %d is %.9g, all-host %.9g", world_rank, s, got.losses[s], want.losses[s]);
  expect_true(again.n == got.n && memcmp(again.params, got.params, sizeof(float) * (size_t)got.n) == 0,
              "rank %d: the same mixed run twice differs", world_rank);
  free(want.params);
  free(got.params);
  free(again.params);
  model_layout_free(&want.layout);
  model_layout_free(&got.layout);
  model_layout_free(&again.layout);
}

/* In `mixed` mode: ranks 0, 1 host and 2, 3 opencl, as the launch line says. */
static void check_layout(gaaw_context_t ctx, int mixed)
{
  const char *mine;
  require_ok(ctx, gaaw_backend_name(ctx, &mine));
  const char *want = mixed && world_rank >= 2 ? "opencl" : "host";
  expect_true(strcmp(mine, want) == 0, "rank %d runs on %s, expected %s (launched as %s)", world_rank, mine, want,
              mixed ? "mixed" : "host");
  int tp_rank, tp;
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_TP, &tp_rank, &tp));
  expect_true(tp == 2 && tp_rank == world_rank % 2, "rank %d: tp rank %d of %d, expected %d of 2", world_rank,
              tp_rank, tp, world_rank % 2);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int mixed = argc > 1 && strcmp(argv[1], "mixed") == 0;
  if (world_size != 4 || argc < 2 || (!mixed && strcmp(argv[1], "host") != 0)) {
    if (world_rank == 0) fprintf(stderr, "usage: 4 ranks, test_mixed_backends mixed|host (see the top of the file)\n");
    MPI_Finalize();
    return 2;
  }
  /* every rank's launch backend must be usable, or all skip */
  const char *env = getenv("GAAW_BACKEND");
  int usable = test_backend_usable(env ? env : "host"), all_usable;
  MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_usable) {
    if (world_rank == 0) printf("test_mixed_backends: a rank's backend is not built or finds no device; skipping\n");
    MPI_Finalize();
    return 77;
  }
  gaaw_context_t ctx = open_ctx(NULL), host = open_ctx("host");
  check_layout(ctx, mixed);
  check_collectives(ctx, host);
  check_training(ctx, host, mixed ? 1e-5 : 0.0);
  gaaw_finalize(&ctx);
  gaaw_finalize(&host);
  int failures = test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total && !failures) return 1; /* another rank failed */
  return test_finish(mixed ? "test_mixed_backends (mixed)" : "test_mixed_backends (host)");
}
