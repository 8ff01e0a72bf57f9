/* Tensor parallelism == serial: on every rank, the GPT and the MLP built on a
 * one-rank context (MPI_COMM_SELF, tp 1: the reference) and on the world with
 * tp = 2 and tp = world size, sequence parallelism off and on, must give the same
 * logits, loss and every (gathered) parameter gradient; repeated runs are
 * bit-identical; and one transformer layer costs the collectives of DESIGN.md
 * section 10. Built twice: test_gpt_tp_np2 and test_gpt_tp_np4. */
#include <mpi.h>

#include "backends/comm.h"
#include "tests/harness/model_util.h"

static int world_rank, world_size;

static gaaw_context_t open_ctx(MPI_Comm comm, int tp)
{
  char list[32];
  snprintf(list, sizeof list, "backend=host tp=%d", tp);
  return test_context(comm, list);
}

static gaaw_gpt_config_t small_gpt(int layers, int sp)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 70; /* pads to 72 over tp 4: 18 rows per rank, 16 real on the last */
  g.max_seq = 16;
  g.layers = layers;
  g.heads = 4;
  g.dim = 32;
  g.ffn = 64;
  g.sequence_parallel = sp;
  return g;
}

enum { B = 2, T = 8 };

typedef struct {
  float loss;
  float *logits, *grads;
  long ngrads;
} gpt_result;

static gpt_result run_gpt(gaaw_context_t ctx, const gaaw_gpt_config_t *g)
{
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, g, &model));
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g->vocab, 5, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  gpt_result r;
  r.logits = malloc(sizeof(float) * B * T * g->vocab);
  require_ok(ctx, gaaw_model_forward(model, &batch, &r.loss));
  require_ok(ctx, gaaw_model_get_logits(model, r.logits));
  require_ok(ctx, gaaw_model_backward(model));
  r.grads = model_snapshot(model, 1, &r.ngrads);
  gaaw_model_destroy(&model);
  return r;
}

static void free_result(gpt_result *r)
{
  free(r->logits);
  free(r->grads);
}

static void check_gpt(gaaw_context_t serial, int tp, int sp)
{
  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, tp);
  gaaw_gpt_config_t g = small_gpt(2, sp);
  gpt_result want = run_gpt(serial, &g), got = run_gpt(par, &g), again = run_gpt(par, &g);
  char what[96];
  snprintf(what, sizeof what, "tp %d sp %d rank %d", tp, sp, world_rank);
  expect_close_scaled(&got.loss, &want.loss, 1, 1e-5, what);
  expect_close_scaled(got.logits, want.logits, B * T * g.vocab, 1e-5, what);
  expect_true(got.ngrads == want.ngrads, "%s: %ld gradients, serial %ld", what, got.ngrads, want.ngrads);
  expect_close_scaled(got.grads, want.grads, want.ngrads, 2e-5, what);
  expect_true(memcmp(got.grads, again.grads, sizeof(float) * got.ngrads) == 0 && got.loss == again.loss,
              "%s: the same run twice differs", what);
  free_result(&want);
  free_result(&got);
  free_result(&again);
  gaaw_finalize(&par);
}

/* Calls of op on the tp group during forward and during backward of a GPT with
 * `layers` blocks. */
static void count_collectives(gaaw_context_t ctx, int layers, int sp, gaaw_comm_op_t op, uint64_t *fwd,
                              uint64_t *bwd, uint64_t *fwd_bytes)
{
  gaaw_comm_t tp;
  gaaw_topology_comm(ctx, GAAW_GROUP_TP, &tp);
  gaaw_gpt_config_t g = small_gpt(layers, sp);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 5, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  uint64_t c0, c1, c2, b0, b1;
  gaaw_comm_stats(tp, op, &c0, &b0);
  require_ok(ctx, gaaw_model_forward(model, &batch, NULL));
  gaaw_comm_stats(tp, op, &c1, &b1);
  require_ok(ctx, gaaw_model_backward(model));
  gaaw_comm_stats(tp, op, &c2, NULL);
  *fwd = c1 - c0;
  *bwd = c2 - c1;
  *fwd_bytes = b1 - b0;
  gaaw_model_destroy(&model);
}

static void check_collectives(int tp)
{
  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, tp);
  const uint64_t bsh = (uint64_t)B * T * 32 * sizeof(float); /* one (b, s, h) activation */
  uint64_t f1, b1, f2, b2, by1, by2;
  /* without sequence parallelism: 2 all-reduces forward and 2 backward per layer */
  count_collectives(par, 1, 0, GAAW_COMM_ALLREDUCE, &f1, &b1, &by1);
  count_collectives(par, 2, 0, GAAW_COMM_ALLREDUCE, &f2, &b2, &by2);
  expect_true(f2 - f1 == 2 && b2 - b1 == 2, "tp %d: a layer costs %llu all-reduces forward and %llu backward", tp,
              (unsigned long long)(f2 - f1), (unsigned long long)(b2 - b1));
  expect_true(by2 - by1 == 2 * 2 * bsh, "tp %d: a layer's forward all-reduces carry %llu bytes, expected 2 x %llu", tp,
              (unsigned long long)(by2 - by1), (unsigned long long)(2 * bsh));
  /* with it: 2 all-gathers + 2 reduce-scatters of activations each way; the only
   * all-reduce is backward's one of the layer's replicated-parameter gradients
   * (layernorm weights and biases, output biases: 6 x hidden), which each rank
   * computed from its own tokens */
  gaaw_comm_op_t ops[3] = {GAAW_COMM_ALLGATHER, GAAW_COMM_REDUCE_SCATTER, GAAW_COMM_ALLREDUCE};
  uint64_t want_fwd[3] = {2, 2, 0}, want_bwd[3] = {2, 2, 1};
  for (int k = 0; k < 3; k++) {
    count_collectives(par, 1, 1, ops[k], &f1, &b1, &by1);
    count_collectives(par, 2, 1, ops[k], &f2, &b2, &by2);
    expect_true(f2 - f1 == want_fwd[k] && b2 - b1 == want_bwd[k],
                "tp %d, sequence parallel: a layer costs %llu %s forward and %llu backward, expected %llu and %llu",
                tp, (unsigned long long)(f2 - f1), gaaw_comm_op_name(ops[k]), (unsigned long long)(b2 - b1),
                (unsigned long long)want_fwd[k], (unsigned long long)want_bwd[k]);
    if (want_fwd[k]) expect_true(by2 - by1 == 2 * bsh, "tp %d: a layer's %s carry %llu bytes, expected 2 x %llu", tp,
                                 gaaw_comm_op_name(ops[k]), (unsigned long long)(by2 - by1), (unsigned long long)bsh);
  }
  gaaw_finalize(&par);
}

static void check_mlp(gaaw_context_t serial, int tp, const int *sizes, int nsizes, gaaw_activation_t act)
{
  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, tp);
  gaaw_mlp_config_t c = {.nsizes = nsizes, .activation = act, .seed = 3};
  for (int i = 0; i < nsizes; i++) c.sizes[i] = sizes[i];
  enum { N = 6 };
  float in[N * 16], out[N * 16];
  uint64_t seed = 11;
  for (int i = 0; i < N * 16; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    in[i] = (float)((seed >> 40) % 1000) / 500.0f - 1.0f;
    out[i] = (float)((seed >> 20) % 1000) / 1000.0f;
  }
  gaaw_batch_t batch = {.batch = N, .inputs = in, .outputs = out};
  float loss[2];
  float *grads[2];
  long n[2];
  gaaw_context_t ctxs[2] = {serial, par};
  for (int k = 0; k < 2; k++) {
    gaaw_model_t model;
    require_ok(ctxs[k], gaaw_model_create_mlp(ctxs[k], &c, &model));
    require_ok(ctxs[k], gaaw_model_forward_backward(model, &batch, &loss[k]));
    grads[k] = model_snapshot(model, 1, &n[k]);
    gaaw_model_destroy(&model);
  }
  char what[96];
  snprintf(what, sizeof what, "MLP (%d linears, act %d) tp %d rank %d", nsizes - 1, (int)act, tp, world_rank);
  expect_close_scaled(&loss[1], &loss[0], 1, 1e-5, what);
  expect_true(n[0] == n[1], "%s: gradient counts differ", what);
  expect_close_scaled(grads[1], grads[0], n[0], 2e-5, what);
  free(grads[0]);
  free(grads[1]);
  gaaw_finalize(&par);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  gaaw_context_t serial = open_ctx(MPI_COMM_SELF, 1);
  int tps[2] = {2, world_size};
  for (int i = 0; i < (world_size > 2 ? 2 : 1); i++)
    for (int sp = 0; sp <= 1; sp++) check_gpt(serial, tps[i], sp);
  check_collectives(world_size);
  const int odd[5] = {8, 16, 12, 8, 4}, even[4] = {6, 8, 4, 8};
  check_mlp(serial, world_size, odd, 5, GAAW_ACT_GELU);
  check_mlp(serial, world_size, even, 4, GAAW_ACT_SWIGLU);
  gaaw_finalize(&serial);
  int failures = test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total && !failures) return 1;
  return test_finish(world_size == 2 ? "test_gpt_tp_np2" : "test_gpt_tp_np4");
}
