/* gaaw_model_predict, on 2 ranks:
 *  - GPT, tp 2 (with and without sequence parallelism) and dp 2 with an optimizer:
 *    predicted logits equal, bit for bit, the logits of gaaw_model_forward on the
 *    same tokens (targets not needed), and leave no activation memory behind;
 *  - an MLP 3 -> 2 with known weights gives x W^T + b; a 3 -> 4 -> 2 MLP at tp 2
 *    gives what the same model gives at tp 1;
 *  - a held forward survives a predict (backward still works), and bad input on
 *    one rank only fails both. */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 2, T = 8 };
static int rank;

static void gpt_case(const char *options, int sp, int with_optimizer)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  g.sequence_parallel = sp;
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  model_randomise(model, 3);
  gaaw_optimizer_t opt = NULL;
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  if (with_optimizer) require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 9, tokens, targets);
  gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  long n = (long)B * T * g.vocab;
  float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n), loss;
  require_ok(ctx, gaaw_model_forward(model, &b, &loss));
  require_ok(ctx, gaaw_model_get_logits(model, want));
  size_t before, after;
  require_ok(ctx, gaaw_memory_usage(ctx, GAAW_MEM_ACTIVATIONS, &before, NULL));
  gaaw_batch_t tokens_only = {.batch = B, .seq = T, .tokens = tokens};
  expect_status_ctx(ctx, gaaw_model_predict(model, &tokens_only, got), GAAW_SUCCESS);
  require_ok(ctx, gaaw_memory_usage(ctx, GAAW_MEM_ACTIVATIONS, &after, NULL));
  expect_true(memcmp(got, want, sizeof(float) * (size_t)n) == 0, "%s%s: predicted logits differ from forward's",
              options, sp ? " sp" : "");
  expect_true(after == before, "%s: predict left %zd bytes of activations", options, (ssize_t)(after - before));
  /* the held forward is intact: backward and a step still work */
  expect_status_ctx(ctx, gaaw_model_backward(model), GAAW_SUCCESS);
  if (opt) expect_status_ctx(ctx, gaaw_optimizer_step(opt), GAAW_SUCCESS);
  /* bad input on one rank only: both fail, at once */
  tokens_only.tokens = rank == 1 ? NULL : tokens;
  expect_status_ctx(ctx, gaaw_model_predict(model, &tokens_only, got), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_predict(model, &b, NULL), GAAW_ERR_INVALID_ARG);
  free(want), free(got);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

/* An MLP's predictions for 5 samples of the known inputs. */
static void mlp_predict(const char *options, const gaaw_mlp_config_t *c, const float *w, const float *bias,
                        float *out)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_mlp(ctx, c, &model));
  if (w) {
    require_ok(ctx, gaaw_model_set_param(model, "fc.0.weight", w));
    require_ok(ctx, gaaw_model_set_param(model, "fc.0.bias", bias));
  }
  float x[5 * 3];
  for (int i = 0; i < 15; i++) x[i] = (float)(i % 7) * 0.25f - 0.5f;
  gaaw_batch_t b = {.batch = 5, .inputs = x};
  expect_status_ctx(ctx, gaaw_model_predict(model, &b, out), GAAW_SUCCESS);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gpt_case("backend=host tp=2", 0, 0);
  gpt_case("backend=host tp=2", 1, 1);
  gpt_case("backend=host dp=2", 0, 1);

  /* y = x W^T + b, by hand */
  gaaw_mlp_config_t one = {.nsizes = 2, .sizes = {3, 2}, .activation = GAAW_ACT_NONE, .seed = 1};
  float w[6] = {0.5f, -1, 2, 0.25f, 0, -0.75f}, bias[2] = {0.1f, -0.2f}, got[10], want[10];
  mlp_predict("backend=host dp=2", &one, w, bias, got);
  for (int s = 0; s < 5; s++)
    for (int o = 0; o < 2; o++) {
      double y = bias[o];
      for (int i = 0; i < 3; i++) y += (double)((float)((s * 3 + i) % 7) * 0.25f - 0.5f) * w[o * 3 + i];
      want[s * 2 + o] = (float)y;
    }
  expect_close(got, want, 10, 1e-6, "MLP 3 -> 2 against x W^T + b");
  /* tp 2 gives the tp 1 answer */
  gaaw_mlp_config_t two = {.nsizes = 3, .sizes = {3, 4, 2}, .activation = GAAW_ACT_GELU, .seed = 5};
  float tp1[10], tp2[10];
  mlp_predict("backend=host dp=2", &two, NULL, NULL, tp1);
  mlp_predict("backend=host tp=2", &two, NULL, NULL, tp2);
  expect_close(tp2, tp1, 10, 1e-6, "MLP 3 -> 4 -> 2 at tp 2 against tp 1");

  return test_finish_mpi("test_predict_np2");
}
