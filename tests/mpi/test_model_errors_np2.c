/* Configurations and batches that cannot work: each is a clear error naming the
 * values, on every rank of the tp group, without a hang; and every public model
 * function called with wrong arguments returns the named error. */
#include <mpi.h>

#include "tests/harness/model_util.h"

static int world_rank;

static gaaw_gpt_config_t small(void)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 50;
  g.max_seq = 8;
  g.layers = 1;
  g.heads = 2;
  g.dim = 16;
  return g;
}

/* Both ranks must fail creating a GPT from g with `want`, and the message must say `text`. */
static void expect_gpt_fails(gaaw_context_t ctx, const gaaw_gpt_config_t *g, const char *text)
{
  gaaw_model_t model = (gaaw_model_t)1;
  double start = MPI_Wtime();
  expect_status_ctx(ctx, gaaw_model_create_gpt(ctx, g, &model), GAAW_ERR_INVALID_ARG);
  expect_true(model == NULL, "no model after a failure");
  expect_true(strstr(gaaw_last_error(ctx), text) != NULL, "rank %d: '%s' not in: %s", world_rank, text,
              gaaw_last_error(ctx));
  expect_true(MPI_Wtime() - start < 20, "took %.1f s", MPI_Wtime() - start);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2 comm_timeout=30");

  gaaw_gpt_config_t g = small();
  g.heads = 3, g.dim = 18;
  expect_gpt_fails(ctx, &g, "heads (3) must be divisible by tp (2)");
  g = small(), g.dim = 17;
  expect_gpt_fails(ctx, &g, "dim (17) must be divisible by heads (2)");
  g = small(), g.ffn = 33;
  expect_gpt_fails(ctx, &g, "ffn (33) must be divisible by tp (2)");
  g = small(), g.vocab = 1;
  expect_gpt_fails(ctx, &g, "vocab 1 is too small for tp 2");
  g = small(), g.layers = 0;
  expect_gpt_fails(ctx, &g, "layers must be >= 1");
  g = small(), g.norm = (gaaw_norm_t)7;
  expect_gpt_fails(ctx, &g, "norm 7");
  g = small(), g.activation = GAAW_ACT_NONE;
  expect_gpt_fails(ctx, &g, "activation 2");
  /* ranks that disagree: both fail, naming what */
  g = small(), g.dim = world_rank ? 32 : 16;
  expect_gpt_fails(ctx, &g, "dim: 16 on rank 0, 32 on rank 1");

  /* bad batches: every rank fails, even when only one rank's batch is bad */
  g = small();
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  int32_t tokens[16], targets[16];
  model_random_batch(2, 8, g.vocab, 1, tokens, targets);
  gaaw_batch_t batch = {.batch = 2, .seq = 8, .tokens = tokens, .targets = targets};
  float loss;
  expect_status_ctx(ctx, gaaw_model_forward(model, &batch, &loss), GAAW_SUCCESS);
  batch.seq = 9; /* 2 x 9 tokens read from 16: only the check runs, on the sequence length */
  expect_status_ctx(ctx, gaaw_model_forward(model, &batch, &loss), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "sequence length 9 is not in 1..8") != NULL, "%s", gaaw_last_error(ctx));
  batch.seq = 8;
  tokens[5] = world_rank == 1 ? 50 : tokens[5];
  expect_status_ctx(ctx, gaaw_model_forward(model, &batch, &loss), GAAW_ERR_INVALID_ARG);
  if (world_rank == 1)
    expect_true(strstr(gaaw_last_error(ctx), "token 5 is 50, outside the vocabulary 0..49") != NULL, "%s",
                gaaw_last_error(ctx));
  else
    expect_true(strstr(gaaw_last_error(ctx), "world rank 1 failed") != NULL, "%s",
                gaaw_last_error(ctx));
  tokens[5] = 1;
  targets[3] = 99;
  expect_status_ctx(ctx, gaaw_model_forward(model, &batch, &loss), GAAW_ERR_INVALID_ARG);
  targets[3] = -1;
  batch.tokens = NULL;
  expect_status_ctx(ctx, gaaw_model_forward(model, &batch, &loss), GAAW_ERR_INVALID_ARG);
  batch.tokens = tokens;
  batch.batch = 0;
  expect_status_ctx(ctx, gaaw_model_forward(model, &batch, &loss), GAAW_ERR_INVALID_ARG);
  batch.batch = 2;
  /* the model still works after the failures */
  expect_status_ctx(ctx, gaaw_model_forward(model, &batch, &loss), GAAW_SUCCESS);
  expect_true(isfinite(loss) && loss > 0, "loss %g", loss);

  /* state errors and bad arguments of the model API */
  float values[50 * 16];
  expect_status_ctx(ctx, gaaw_model_get_logits(model, values), GAAW_SUCCESS); /* (16, 50) between forward and backward */
  require_ok(ctx, gaaw_model_backward(model));
  expect_status_ctx(ctx, gaaw_model_backward(model), GAAW_ERR_STATE);
  expect_status_ctx(ctx, gaaw_model_get_logits(model, values), GAAW_ERR_STATE);
  expect_status(gaaw_model_forward(NULL, &batch, &loss), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_forward(model, NULL, &loss), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_backward(NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_forward_backward(NULL, &batch, &loss), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_zero_grad(NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_get_param(model, "no.such.weight", values), GAAW_ERR_NOT_FOUND);
  expect_status_ctx(ctx, gaaw_model_get_param(model, NULL, values), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_get_param(model, "wte.weight", NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_get_grad(model, "nope", values), GAAW_ERR_NOT_FOUND);
  expect_status_ctx(ctx, gaaw_model_set_param(model, "nope", values), GAAW_ERR_NOT_FOUND);
  expect_status_ctx(ctx, gaaw_model_set_param(model, "wte.weight", NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_get_param(NULL, "wte.weight", values), GAAW_ERR_INVALID_ARG);
  int count;
  expect_status_ctx(ctx, gaaw_model_param_count(model, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_param_count(NULL, &count), GAAW_ERR_INVALID_ARG);
  require_ok(ctx, gaaw_model_param_count(model, &count));
  expect_status_ctx(ctx, gaaw_model_param_info(model, count, NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_param_info(model, -1, NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_num_params(NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_get_logits(NULL, values), GAAW_ERR_INVALID_ARG);
  gaaw_model_t none = (gaaw_model_t)1;
  expect_status_ctx(ctx, gaaw_model_create_gpt(ctx, NULL, &none), GAAW_ERR_INVALID_ARG);
  expect_true(none == NULL, "no model after a failure");
  expect_status_ctx(ctx, gaaw_model_create_gpt(ctx, &g, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_create_gpt(NULL, &g, &none), GAAW_ERR_INVALID_ARG);
  /* set_param then get_param gives the values back (every rank passes the same) */
  for (int i = 0; i < 50 * 16; i++) values[i] = (float)i * 0.001f;
  float back[50 * 16];
  expect_status_ctx(ctx, gaaw_model_set_param(model, "wte.weight", values), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_model_get_param(model, "wte.weight", back), GAAW_SUCCESS);
  expect_close(back, values, 50 * 16, 0, "set then get");
  int64_t global, local;
  expect_status_ctx(ctx, gaaw_model_num_params(model, &global, &local), GAAW_SUCCESS);
  expect_true(local < global && global > 0, "global %lld local %lld", (long long)global, (long long)local);
  /* 6 x the parameters but wpe (8 x 16; wte is the tied head's) + 12 layers max_seq dim */
  double flops = 0;
  expect_status(gaaw_model_flops_per_token(NULL, &flops), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_flops_per_token(model, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_flops_per_token(model, &flops), GAAW_SUCCESS);
  expect_true(flops == 6.0 * (double)(global - 8 * 16) + 12.0 * 1 * 8 * 16, "GPT FLOPs per token %.0f, expected %.0f",
              flops, 6.0 * (double)(global - 8 * 16) + 12.0 * 1 * 8 * 16);
  gaaw_model_destroy(&model);
  expect_true(model == NULL, "destroy sets NULL");
  expect_status(gaaw_model_destroy(NULL), GAAW_SUCCESS);

  /* the MLP's configuration checks */
  gaaw_mlp_config_t mc = {.nsizes = 3, .sizes = {4, 5, 2}, .activation = GAAW_ACT_GELU, .seed = 1};
  expect_status_ctx(ctx, gaaw_model_create_mlp(ctx, &mc, &model), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "sizes[1] = 5") != NULL, "%s", gaaw_last_error(ctx));
  mc.nsizes = 1;
  expect_status_ctx(ctx, gaaw_model_create_mlp(ctx, &mc, &model), GAAW_ERR_INVALID_ARG);
  mc.nsizes = 3, mc.sizes[1] = 4, mc.sizes[2] = 0;
  expect_status_ctx(ctx, gaaw_model_create_mlp(ctx, &mc, &model), GAAW_ERR_INVALID_ARG);
  mc.sizes[2] = 2;
  require_ok(ctx, gaaw_model_create_mlp(ctx, &mc, &model));
  gaaw_batch_t mb = {.batch = 3};
  expect_status_ctx(ctx, gaaw_model_forward(model, &mb, &loss), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "an MLP batch needs inputs and outputs") != NULL, "%s",
              gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_model_get_logits(model, values), GAAW_ERR_INVALID_ARG);
  gaaw_model_destroy(&model);

  gaaw_finalize(&ctx);
  return test_finish_mpi("test_model_errors_np2");
}
