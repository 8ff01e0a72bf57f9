/* Tensor parallelism == serial == PyTorch: for every norm (layernorm, RMSnorm) x
 * activation (GELU, SwiGLU) x head (tied, untied vocab-parallel), from randomised
 * parameters (model_randomise: biases normal(0, 0.1), norm weights 1 + normal(0,
 * 0.1)), on every rank the GPT built on a one-rank context (MPI_COMM_SELF, tp 1:
 * the serial run) and on the world with tp = 2 and tp = world size, sequence
 * parallelism off and on, must give the same logits, loss and every (gathered)
 * parameter gradient; rank 0 compares the serial run and every tp run with the
 * PyTorch reference (tests/reference/gpt_reference.py, started once); a repeated
 * run is bit-identical; and one transformer layer costs the collectives of
 * DESIGN.md section 10. Built twice: test_gpt_tp_np2 and test_gpt_tp_np4.
 *
 * Tolerances, per tensor, of that tensor's largest |value|. tp against serial: the
 * same f32 kernels on slices, so only the order of the tp all-reduce sums (and of
 * the per-token sums under sequence parallelism) differs: measured up to 1e-6;
 * 1e-5 for logits and loss, 2e-5 for gradients. Against PyTorch: as
 * tests/unit/test_gpt_torch.c (5e-6 and 2e-5). */
#include <mpi.h>

#include "backends/comm.h"
#include "tests/harness/model_util.h"
#include "tests/harness/torch_cases.h"

static int world_rank, world_size;

static gaaw_context_t open_ctx(MPI_Comm comm, int tp)
{
  char list[32];
  snprintf(list, sizeof list, "backend=host tp=%d", tp);
  return test_context(comm, list);
}

/* For the collective counts: width 32, 4 heads, layernorm + GELU + tied. */
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

enum { B = 2, T = 8, CASES = 8 };

/* Case k of the 2 x 2 x 2 variants, tiny: vocabulary 39 (padded to 40 over tp 2
 * and 4), 2 layers, 4 heads of 4, hidden 32 (SwiGLU's fused c_fc: 2 blocks of 32,
 * each split over tp). */
static gaaw_gpt_config_t case_gpt(int k, int sp)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 39;
  g.max_seq = 16;
  g.layers = 2;
  g.heads = 4;
  g.dim = 16;
  g.ffn = 32;
  g.norm = k & 1 ? GAAW_NORM_RMSNORM : GAAW_NORM_LAYERNORM;
  g.activation = k & 2 ? GAAW_ACT_SWIGLU : GAAW_ACT_GELU;
  g.tied_embeddings = !(k & 4);
  g.sequence_parallel = sp;
  return g;
}

typedef struct {
  gaaw_model_t model; /* kept for the serial runs (the PyTorch cases and the registry) */
  float loss;
  float *logits, *grads;
  long ngrads;
} gpt_result;

/* Forward and backward of case k's batch from case k's randomised parameters. */
static gpt_result run_gpt(gaaw_context_t ctx, const gaaw_gpt_config_t *g, int k, int keep)
{
  gpt_result r;
  require_ok(ctx, gaaw_model_create_gpt(ctx, g, &r.model));
  model_randomise(r.model, 500 + (uint64_t)k);
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g->vocab, 5 + (uint64_t)k, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  r.logits = malloc(sizeof(float) * B * T * g->vocab);
  require_ok(ctx, gaaw_model_forward(r.model, &batch, &r.loss));
  require_ok(ctx, gaaw_model_get_logits(r.model, r.logits));
  require_ok(ctx, gaaw_model_backward(r.model));
  r.grads = model_snapshot(r.model, 1, &r.ngrads);
  if (!keep) gaaw_model_destroy(&r.model);
  return r;
}

static void free_result(gpt_result *r)
{
  gaaw_model_destroy(&r->model);
  free(r->logits);
  free(r->grads);
}

static void case_name(int k, int tp, int sp, char *out, size_t size)
{
  gaaw_gpt_config_t g = case_gpt(k, sp);
  snprintf(out, size, "%s + %s + %s, tp %d, sp %d, rank %d", g.norm == GAAW_NORM_LAYERNORM ? "layernorm" : "rmsnorm",
           g.activation == GAAW_ACT_GELU ? "gelu" : "swiglu", g.tied_embeddings ? "tied" : "untied", tp, sp,
           world_rank);
}

/* Every case serially (and, on rank 0, in PyTorch), then on tp ranks with and
 * without sequence parallelism. */
static void check_gpt(gaaw_context_t serial, const int *tps, int ntps)
{
  gpt_result want[CASES];
  torch_cases ref;
  torch_cases_init(&ref, "tp");
  for (int k = 0; k < CASES; k++) {
    gaaw_gpt_config_t g = case_gpt(k, 0);
    want[k] = run_gpt(serial, &g, k, 1);
    if (world_rank == 0) {
      int32_t tokens[B * T], targets[B * T];
      model_random_batch(B, T, g.vocab, 5 + (uint64_t)k, tokens, targets);
      torch_case_add(&ref, want[k].model, &g, B, T, tokens, targets);
    }
  }
  int rc = world_rank == 0 ? torch_cases_run(&ref) : 0;
  /* the other ranks wait for PyTorch asleep, not spinning in MPI on its cores */
  MPI_Request done;
  int flag = 0;
  MPI_Ibarrier(MPI_COMM_WORLD, &done);
  while (MPI_Test(&done, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag) usleep(2000);
  expect_true(rc != 1, "the PyTorch reference failed");
  if (rc == 77) fprintf(stderr, "PyTorch (python3-torch) is missing: tp and serial are compared without it\n");
  int torch_ok = world_rank == 0 && rc == 0;
  char what[128];
  for (int k = 0; torch_ok && k < CASES; k++) {
    gaaw_gpt_config_t g = case_gpt(k, 0);
    int nref;
    const tf_tensor *t = torch_case_result(&ref, k, &nref);
    case_name(k, 1, 0, what, sizeof what);
    expect_matches_torch(t, nref, want[k].model, want[k].loss, want[k].logits, (long)B * T * g.vocab, want[k].grads,
                         5e-6, 2e-5, what);
  }
  for (int i = 0; i < ntps; i++) {
    gaaw_context_t par = open_ctx(MPI_COMM_WORLD, tps[i]);
    for (int sp = 0; sp <= 1; sp++)
      for (int k = 0; k < CASES; k++) {
        gaaw_gpt_config_t g = case_gpt(k, sp);
        gpt_result got = run_gpt(par, &g, k, 0);
        long nlogits = (long)B * T * g.vocab;
        case_name(k, tps[i], sp, what, sizeof what);
        expect_close_scaled(&got.loss, &want[k].loss, 1, 1e-5, what);
        expect_close_scaled(got.logits, want[k].logits, nlogits, 1e-5, what);
        expect_true(got.ngrads == want[k].ngrads, "%s: %ld gradients, serial %ld", what, got.ngrads, want[k].ngrads);
        if (got.ngrads == want[k].ngrads) expect_close_model(want[k].model, got.grads, want[k].grads, 2e-5, what);
        if (torch_ok) {
          int nref;
          const tf_tensor *t = torch_case_result(&ref, k, &nref);
          expect_matches_torch(t, nref, want[k].model, got.loss, got.logits, nlogits, got.grads, 5e-6, 2e-5, what);
        }
        if (k == CASES - 1) { /* the richest case (rmsnorm + swiglu + untied) once more */
          gpt_result again = run_gpt(par, &g, k, 0);
          expect_true(memcmp(got.grads, again.grads, sizeof(float) * got.ngrads) == 0 && got.loss == again.loss,
                      "%s: the same run twice differs", what);
          free_result(&again);
        }
        free_result(&got);
      }
    gaaw_finalize(&par);
  }
  for (int k = 0; k < CASES; k++) free_result(&want[k]);
  torch_cases_free(&ref);
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
  const int tps[2] = {2, world_size};
  check_gpt(serial, tps, world_size > 2 ? 2 : 1);
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
