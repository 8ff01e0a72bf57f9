/* Expert parallelism in the MoE layer (parallel/moe.h, moe_dispatch.h) against the
 * same layer with every expert on each rank: 4 ranks with different token counts
 * (10, 13, 16, 19), the experts split over ep groups of 4 (the world), 2 (the tp
 * pairs) and 2 (the dp pairs). For each rank y, dx and the router's gradient must be
 * those of the one-rank layer on its own tokens, and each ep rank's expert gradients
 * the sum over its ep group of the one-rank gradients of its experts (every rank's
 * tokens that chose them), within 1e-5 of their largest value. Dropless, at
 * capacity 1.0 (some rows dropped before the exchange), and with a router that never
 * chooses experts 6 and 7 (so one ep rank of four receives no row at all, and must
 * still take part). Each pass's alltoallv bytes equal doc/moe.md's formula of the
 * rows sent and computed. Repeats are bit-identical; experts that do not divide
 * over the ep group are refused by name. */
#include <mpi.h>
#include <string.h>

#include "parallel/moe.h"
#include "tests/harness/comm_util.h"
#include "tests/unit/test_kernel_util.h"

enum { C = 8, E = 8, K = 2, F = 6 };

typedef struct {
  gaaw_tensor_t y, dx, dr, d13, d2;
  int64_t rows;       /* rows this rank's experts computed */
  int64_t sent;       /* rows this rank sent to the experts (its kept assignments) */
  uint64_t bytes[2];  /* the ep group's alltoallv bytes in forward, then in backward */
  uint64_t counts[2]; /* its all-to-all bytes (the counts) likewise */
} layer_out;

/* The ep communicator's alltoallv and all-to-all bytes since the last call. */
static void traffic(gaaw_context_t ctx, gaaw_comm_t ep, uint64_t *payload, uint64_t *counts)
{
  uint64_t calls;
  *payload = *counts = 0;
  if (!ep) return;
  require_ok(ctx, gaaw_comm_stats(ep, GAAW_COMM_ALLTOALLV, &calls, payload));
  require_ok(ctx, gaaw_comm_stats(ep, GAAW_COMM_ALLTOALL, &calls, counts));
  require_ok(ctx, gaaw_comm_stats_reset(ep));
}

static void moe_run(gaaw_context_t ctx, const gaaw_moe_spec *spec, gaaw_comm_t ep, const gaaw_tensor_t *x,
                    const gaaw_tensor_t *dy, const gaaw_tensor_t *router, const gaaw_tensor_t *w13,
                    const gaaw_tensor_t *w2, layer_out *o)
{
  const int64_t T = x->shape[0], El = w13->shape[0];
  o->y = KT_NEW(ctx, GAAW_F32, T, C), o->dx = KT_NEW(ctx, GAAW_F32, T, C);
  o->dr = KT_NEW(ctx, GAAW_F32, E, C), o->d13 = KT_NEW(ctx, GAAW_F32, El, 2 * F, C);
  o->d2 = KT_NEW(ctx, GAAW_F32, El, C, F);
  gaaw_tensor_t *grads[] = {&o->dr, &o->d13, &o->d2};
  for (int i = 0; i < 3; i++) require_ok(ctx, gaaw_fill(ctx, grads[i], 0.0f));
  gaaw_moe_weights w = {router, w13, w2, &o->dr, &o->d13, &o->d2};
  gaaw_moe_saved saved = {0};
  saved.ep = ep;
  gaaw_moe_losses losses = {0};
  if (ep) require_ok(ctx, gaaw_comm_stats_reset(ep));
  require_ok(ctx, gaaw_moe_forward(ctx, spec, &w, x, &o->y, &saved, &losses));
  traffic(ctx, ep, &o->bytes[0], &o->counts[0]);
  o->rows = saved.kept[GAAW_MOE_XP].shape[0];
  o->sent = 0;
  for (int e = 0; e < E; e++) o->sent += saved.counts[e];
  require_ok(ctx, gaaw_moe_backward(ctx, spec, &w, &saved, x, dy, 0.5f, &o->dx));
  traffic(ctx, ep, &o->bytes[1], &o->counts[1]);
  gaaw_moe_release(ctx, &saved);
}

static void drop_out(gaaw_context_t ctx, layer_out *o)
{
  gaaw_tensor_t *t[] = {&o->y, &o->dx, &o->dr, &o->d13, &o->d2};
  for (int i = 0; i < 5; i++) kt_free(ctx, t[i]);
}

/* got against want (n floats read from tensors), scaled by want's largest value. */
static void expect_tensor(gaaw_context_t ctx, const gaaw_tensor_t *got, const float *want, const char *what,
                          const char *label)
{
  long n = (long)gaaw_tensor_numel(got);
  float *g = malloc(sizeof(float) * (size_t)(n + 1));
  kt_download(ctx, got, g);
  char text[200];
  snprintf(text, sizeof text, "%s, %s", what, label);
  expect_close_scaled(g, want, n, 1e-5, text);
  free(g);
}

/* The expert rows [lo, lo + n) (of the first dimension) of t, as a view. */
static gaaw_tensor_t experts_view(const gaaw_tensor_t *t, int64_t lo, int64_t n)
{
  gaaw_tensor_t v = *t;
  v.offset += (size_t)(lo * t->shape[1] * t->shape[2]) * sizeof(float);
  v.shape[0] = n;
  return v;
}

static void check_case(gaaw_context_t ctx, group *g, float capacity, int skewed, int rank)
{
  char label[120];
  snprintf(label, sizeof label, "ep %d (%s), capacity %.1f%s", g->size, g->name, capacity,
           skewed ? ", experts 6 and 7 never chosen" : "");
  const int64_t T = 10 + 3 * rank, El = E / g->size;
  uint64_t seed = 7; /* the weights: the same on every rank */
  float rv[E * C], w13v[E * 2 * F * C], w2v[E * C * F], *xv = malloc(sizeof(float) * T * C);
  float *dyv = malloc(sizeof(float) * T * C);
  gaaw_tensor_t router = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){E, C}, -1.5f, 1.5f, &seed, rv);
  if (skewed) { /* x > 0 and experts 6, 7 with negative router rows: their scores are the lowest */
    for (int i = 0; i < E * C; i++) rv[i] = i >= 6 * C ? -fabsf(rv[i]) - 0.5f : fabsf(rv[i]);
    kt_upload(ctx, &router, rv);
  }
  gaaw_tensor_t w13 = kt_random_tensor(ctx, GAAW_F32, 3, (int64_t[]){E, 2 * F, C}, -0.5f, 0.5f, &seed, w13v);
  gaaw_tensor_t w2 = kt_random_tensor(ctx, GAAW_F32, 3, (int64_t[]){E, C, F}, -0.5f, 0.5f, &seed, w2v);
  seed = 100 + (uint64_t)rank; /* the tokens: this rank's own */
  gaaw_tensor_t x = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){T, C}, skewed ? 0.1f : -1, 1, &seed, xv);
  gaaw_tensor_t dy = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){T, C}, -1, 1, &seed, dyv);
  gaaw_moe_spec spec = {E, K, 0, 1, 0.01f, 0.001f, capacity, 1};
  layer_out ref, ep, again;
  moe_run(ctx, &spec, NULL, &x, &dy, &router, &w13, &w2, &ref);
  gaaw_tensor_t w13_here = experts_view(&w13, g->rank * El, El), w2_here = experts_view(&w2, g->rank * El, El);
  moe_run(ctx, &spec, g->comm, &x, &dy, &router, &w13_here, &w2_here, &ep);
  moe_run(ctx, &spec, g->comm, &x, &dy, &router, &w13_here, &w2_here, &again);

  /* the one-rank expert gradients summed over the ep group: what each ep rank's experts see */
  require_ok(ctx, gaaw_comm_allreduce(g->comm, &ref.d13, &ref.d13, GAAW_SUM));
  require_ok(ctx, gaaw_comm_allreduce(g->comm, &ref.d2, &ref.d2, GAAW_SUM));
  gaaw_tensor_t r13 = experts_view(&ref.d13, g->rank * El, El), r2 = experts_view(&ref.d2, g->rank * El, El);
  const gaaw_tensor_t *want[] = {&ref.y, &ref.dx, &ref.dr, &r13, &r2}, *got[] = {&ep.y, &ep.dx, &ep.dr, &ep.d13, &ep.d2};
  const gaaw_tensor_t *twice[] = {&again.y, &again.dx, &again.dr, &again.d13, &again.d2};
  const char *name[] = {"y", "dx", "drouter", "dw13", "dw2"};
  for (int i = 0; i < 5; i++) {
    long n = (long)gaaw_tensor_numel(want[i]);
    float *wv = malloc(sizeof(float) * (size_t)(n + 1));
    kt_download(ctx, want[i], wv);
    expect_tensor(ctx, got[i], wv, name[i], label);
    void *a = kt_bytes(ctx, got[i]), *b = kt_bytes(ctx, twice[i]);
    expect_true(memcmp(a, b, (size_t)n * sizeof(float)) == 0, "%s repeats bit for bit, %s", name[i], label);
    free(a), free(b), free(wv);
  }
  /* doc/moe.md's formula: each pass sends the kept rows out and the rows computed
   * here back, 4 C bytes a row; the plan's counts (E / ep per member) in forward only */
  const uint64_t want_bytes = 4 * C * (uint64_t)(ep.sent + ep.rows), want_counts = 8 * (uint64_t)E;
  for (int pass = 0; pass < 2; pass++)
    expect_true(ep.bytes[pass] == want_bytes && ep.counts[pass] == (pass ? 0 : want_counts),
                "%s: alltoallv %llu bytes (formula %llu), counts %llu bytes (formula %llu), %s",
                pass ? "backward" : "forward", (unsigned long long)ep.bytes[pass], (unsigned long long)want_bytes,
                (unsigned long long)ep.counts[pass], (unsigned long long)(pass ? 0 : want_counts), label);
  if (skewed && g->size == 4)
    expect_true((g->rank == 3) == (ep.rows == 0), "rank %d of ep 4 computed %lld rows, %s", g->rank,
                (long long)ep.rows, label);
  else
    expect_true(ep.rows > 0, "rank %d computed no rows, %s", g->rank, label);
  drop_out(ctx, &ref), drop_out(ctx, &ep), drop_out(ctx, &again);
  gaaw_tensor_t *t[] = {&router, &w13, &w2, &x, &dy};
  for (int i = 0; i < 5; i++) kt_free(ctx, t[i]);
  free(xv), free(dyv);
}

/* 6 experts over an ep group of 4: refused by name, before any exchange. */
static void check_refusal(gaaw_context_t ctx, group *g)
{
  float v[6 * 2 * F * C];
  uint64_t seed = 3;
  gaaw_tensor_t x = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){4, C}, -1, 1, &seed, v);
  gaaw_tensor_t router = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){6, C}, -1, 1, &seed, v);
  gaaw_tensor_t w13 = kt_random_tensor(ctx, GAAW_F32, 3, (int64_t[]){1, 2 * F, C}, -1, 1, &seed, v);
  gaaw_tensor_t w2 = kt_random_tensor(ctx, GAAW_F32, 3, (int64_t[]){1, C, F}, -1, 1, &seed, v);
  gaaw_tensor_t y = KT_NEW(ctx, GAAW_F32, 4, C);
  gaaw_moe_spec spec = {6, K, 0, 1, 0.01f, 0.001f};
  gaaw_moe_weights w = {&router, &w13, &w2};
  gaaw_moe_saved saved = {0};
  saved.ep = g->comm;
  gaaw_moe_losses losses = {0};
  expect_status_ctx(ctx, gaaw_moe_forward(ctx, &spec, &w, &x, &y, &saved, &losses), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "do not divide over an ep group") != NULL,
              "the refusal names the ep group: %s", gaaw_last_error(ctx));
  gaaw_tensor_t *t[] = {&x, &router, &w13, &w2, &y};
  for (int i = 0; i < 5; i++) kt_free(ctx, t[i]);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "tp", "2"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  group groups[3] = {open_group(ctx, GAAW_GROUP_WORLD), open_group(ctx, GAAW_GROUP_TP), open_group(ctx, GAAW_GROUP_DP)};
  for (int i = 0; i < 3; i++) {
    check_case(ctx, &groups[i], 0.0f, 0, rank);
    check_case(ctx, &groups[i], 1.0f, 0, rank);
  }
  check_case(ctx, &groups[0], 0.0f, 1, rank);
  check_refusal(ctx, &groups[0]);
  require_ok(ctx, gaaw_finalize(&ctx));
  require_ok(NULL, gaaw_config_destroy(&cfg));
  return test_finish_mpi("test_moe_ep_np4");
}
