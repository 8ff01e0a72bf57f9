/* Per-layer timing of a model (gaaw_model_layer_count, gaaw_model_layer_times,
 * gaaw_model_reset_times): the GPT's layer list and kinds, times that are
 * positive, contained in the wall time of the calls that produced them, that
 * accumulate over steps and go back to zero on reset; a forward alone adds no
 * backward time; an MLP's layers; and the bad inputs. */
#include <math.h>
#include <mpi.h>
#include <string.h>
#include <time.h>

#include "tests/harness/model_util.h"

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sums of the layers' forward and backward totals. */
static void sum_times(gaaw_model_t model, double *fwd, double *bwd)
{
  int count;
  require_ok(NULL, gaaw_model_layer_count(model, &count));
  *fwd = *bwd = 0;
  for (int i = 0; i < count; i++) {
    double f, b;
    require_ok(NULL, gaaw_model_layer_times(model, i, NULL, &f, &b));
    expect_true(f >= 0 && b >= 0 && isfinite(f) && isfinite(b), "layer %d: forward %g s, backward %g s", i, f, b);
    *fwd += f;
    *bwd += b;
  }
}

static void check_gpt(gaaw_context_t ctx)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 40;
  g.max_seq = 16;
  g.layers = 3;
  g.dim = 32;
  g.ffn = 64;
  enum { B = 2, T = 16 };
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 5, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};

  int count = -1;
  require_ok(ctx, gaaw_model_layer_count(model, &count));
  expect_true(count == g.layers + 2, "a GPT of %d blocks has %d layers, expected %d", g.layers, count, g.layers + 2);
  for (int i = 0; i < count; i++) {
    const char *kind = NULL;
    double f = -1, b = -1;
    require_ok(ctx, gaaw_model_layer_times(model, i, &kind, &f, &b));
    const char *want = i == 0 ? "embedding" : i == count - 1 ? "lm head and cross-entropy" : "transformer block";
    expect_true(kind && strcmp(kind, want) == 0, "layer %d is '%s', expected '%s'", i, kind ? kind : "(null)", want);
    expect_true(f == 0 && b == 0, "layer %d starts at forward %g s, backward %g s, expected 0", i, f, b);
  }

  /* a forward: every layer took some time, all of it inside the call */
  double t0 = now();
  require_ok(ctx, gaaw_model_forward(model, &batch, NULL));
  double wall_fwd = now() - t0, fwd, bwd;
  sum_times(model, &fwd, &bwd);
  expect_true(fwd > 0 && fwd <= wall_fwd, "forward layers took %g s in a call of %g s", fwd, wall_fwd);
  expect_true(bwd == 0, "a forward alone added %g s of backward time", bwd);
  for (int i = 0; i < count; i++) {
    double f;
    require_ok(ctx, gaaw_model_layer_times(model, i, NULL, &f, NULL));
    expect_true(f > 0, "layer %d has forward time %g s after a forward", i, f);
  }
  t0 = now();
  require_ok(ctx, gaaw_model_backward(model));
  double wall_bwd = now() - t0, fwd1 = fwd, bwd1;
  sum_times(model, &fwd, &bwd1);
  expect_true(fwd == fwd1, "a backward changed the forward time from %g to %g s", fwd1, fwd);
  expect_true(bwd1 > 0 && bwd1 <= wall_bwd, "backward layers took %g s in a call of %g s", bwd1, wall_bwd);

  /* a second step accumulates */
  t0 = now();
  require_ok(ctx, gaaw_model_forward_backward(model, &batch, NULL));
  double wall_step = now() - t0;
  sum_times(model, &fwd, &bwd);
  expect_true(fwd > fwd1 && bwd > bwd1, "second step: forward %g -> %g s, backward %g -> %g s", fwd1, fwd, bwd1, bwd);
  expect_true((fwd - fwd1) + (bwd - bwd1) <= wall_step, "second step's layers took %g s in a call of %g s",
              (fwd - fwd1) + (bwd - bwd1), wall_step);

  require_ok(ctx, gaaw_model_reset_times(model));
  sum_times(model, &fwd, &bwd);
  expect_true(fwd == 0 && bwd == 0, "after reset: forward %g s, backward %g s", fwd, bwd);

  /* bad input */
  expect_status(gaaw_model_layer_count(NULL, &count), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_layer_count(model, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_layer_times(NULL, 0, NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_layer_times(model, -1, NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_layer_times(model, count, NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_reset_times(NULL), GAAW_ERR_INVALID_ARG);
  gaaw_model_destroy(&model);
}

static void check_mlp(gaaw_context_t ctx)
{
  gaaw_mlp_config_t c = {.nsizes = 4, .sizes = {3, 8, 8, 2}, .activation = GAAW_ACT_GELU, .seed = 3};
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &model));
  int count;
  require_ok(ctx, gaaw_model_layer_count(model, &count));
  expect_true(count == 4, "an MLP of 3 linears has %d layers, expected 4 (with the loss)", count);
  const char *kind;
  require_ok(ctx, gaaw_model_layer_times(model, 3, &kind, NULL, NULL));
  expect_true(strcmp(kind, "mean squared error") == 0, "the MLP's last layer is '%s'", kind);
  float in[2 * 3] = {1, 2, 3, -1, 0, 1}, out[2 * 2] = {0.5f, -0.5f, 1, 0};
  gaaw_batch_t batch = {.batch = 2, .inputs = in, .outputs = out};
  require_ok(ctx, gaaw_model_forward_backward(model, &batch, NULL));
  double fwd, bwd;
  sum_times(model, &fwd, &bwd);
  expect_true(fwd > 0 && bwd > 0, "MLP step: forward %g s, backward %g s", fwd, bwd);
  gaaw_model_destroy(&model);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_SELF, "backend=host");
  check_gpt(ctx);
  check_mlp(ctx);
  gaaw_finalize(&ctx);
  int rc = test_finish("test_model_times");
  MPI_Finalize();
  return rc;
}
