/* A bad batch on one rank only, at tp 2 and at dp 2 (comm_timeout 60 s; at dp 2
 * another batch size is agreed, not refused, so rank 1 passes seq 0 there
 * instead: tests/mpi/test_uneven_rows_np4.c has uneven rows): every rank
 * gets the error at once (well under 2 s, not at the deadline), and the next good
 * step succeeds on every rank with the result it would have had without the bad
 * call (the parameters are bit-identical to a run that never made it). Then an
 * optimizer step without a backward pass is GAAW_ERR_STATE on every rank and leaves
 * the parameters as they were. */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 2, T = 8, VOCAB = 40, STEPS = 6 };

static int world_rank;

/* What rank 1 does wrong in bad call k (rank 0's batch stays good). */
static const char *const bad_kinds[STEPS] = {"batch 0", "a NULL batch", "another seq",
                                             "another batch size (tp), seq 0 (dp)",
                                             "a token outside the vocabulary", "a target outside the vocabulary"};

static gaaw_status_t bad_call(gaaw_model_t model, int tp, int k, int32_t *tokens, int32_t *targets)
{
  gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  int32_t saved_token = tokens[3], saved_target = targets[5];
  float loss;
  if (world_rank == 1) {
    if (k == 0) b.batch = 0;
    if (k == 2) b.seq = T - 1;
    if (k == 3 && tp) b.batch = B - 1;
    if (k == 3 && !tp) b.seq = 0;
    if (k == 4) tokens[3] = VOCAB;
    if (k == 5) targets[5] = VOCAB + 3;
  }
  gaaw_status_t st = gaaw_model_forward_backward(model, world_rank == 1 && k == 1 ? NULL : &b, &loss);
  tokens[3] = saved_token, targets[5] = saved_target;
  return st;
}

/* STEPS training steps; with bad_first, each good step follows a bad call. */
static float *train(const char *layout, int bad_first, long *count)
{
  char options[128];
  snprintf(options, sizeof options, "backend=host comm_timeout=60 %s", layout);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  oc.lr = 1e-2f;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int32_t tokens[B * T], targets[B * T];
  for (int s = 0; s < STEPS; s++) {
    model_random_batch(B, T, VOCAB, 100 + (uint64_t)s, tokens, targets);
    if (bad_first) {
      double t0 = MPI_Wtime();
      gaaw_status_t st = bad_call(model, strstr(layout, "tp") != NULL, s, tokens, targets);
      double took = MPI_Wtime() - t0;
      expect_true(st == GAAW_ERR_INVALID_ARG, "%s, rank %d, %s on rank 1: %s, expected GAAW_ERR_INVALID_ARG: %s",
                  layout, world_rank, bad_kinds[s], gaaw_status_name(st), gaaw_last_error(ctx));
      expect_true(took < 2.0, "%s, rank %d, %s on rank 1: the error took %.2f s", layout, world_rank, bad_kinds[s],
                  took);
    }
    gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
    float loss;
    expect_status_ctx(ctx, gaaw_model_forward_backward(model, &b, &loss), GAAW_SUCCESS);
    expect_status_ctx(ctx, gaaw_optimizer_step(opt), GAAW_SUCCESS);
  }
  long n;
  float *params = model_snapshot(model, 0, &n);
  *count = n;
  if (bad_first) {
    /* no backward since the last step: refused on every rank, nothing moves */
    expect_status_ctx(ctx, gaaw_optimizer_step(opt), GAAW_ERR_STATE);
    expect_true(strstr(gaaw_last_error(ctx), "no backward pass since the last step") != NULL, "%s",
                gaaw_last_error(ctx));
    long n2;
    float *after = model_snapshot(model, 0, &n2);
    expect_true(n2 == n && memcmp(after, params, sizeof(float) * (size_t)n) == 0,
                "%s: a step without backward changed the parameters", layout);
    free(after);
  }
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return params;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const char *layouts[2] = {"tp=2", "dp=2"};
  for (int i = 0; i < 2; i++) {
    long n, n_bad;
    float *clean = train(layouts[i], 0, &n), *after_bad = train(layouts[i], 1, &n_bad);
    expect_true(n == n_bad && memcmp(clean, after_bad, sizeof(float) * (size_t)n) == 0,
                "%s: the steps after bad calls differ from a run without them", layouts[i]);
    free(clean);
    free(after_bad);
  }
  return test_finish_mpi("test_agree_batch_np2");
}
