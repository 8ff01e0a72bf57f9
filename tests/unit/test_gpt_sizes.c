/* GPT widths that do not fit an int (4 x dim for the MLP, 3 x dim for the attention,
 * 2 x ffn for SwiGLU) are refused with the width in the message, computed without
 * overflow (the sanitizer build halts on a signed overflow), and nothing is built. */
#include <mpi.h>

#include "test_util.h"

static void expect_refused(gaaw_context_t ctx, const gaaw_gpt_config_t *g, const char *text)
{
  gaaw_model_t model = (gaaw_model_t)1;
  expect_status_ctx(ctx, gaaw_model_create_gpt(ctx, g, &model), GAAW_ERR_INVALID_ARG);
  expect_true(model == NULL, "no model after a refused config");
  expect_true(strstr(gaaw_last_error(ctx), text) != NULL, "'%s' not in: %s", text, gaaw_last_error(ctx));
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  gaaw_gpt_config_t g;

  gaaw_gpt_config_default(&g);
  g.dim = 600000000; /* 4 x dim = 2.4e9 */
  expect_refused(ctx, &g, "dim 600000000 is too large: the MLP width 4 x dim = 2400000000 exceeds 2147483647");
  gaaw_gpt_config_default(&g);
  g.dim = 800000000, g.ffn = 4; /* 3 x dim = 2.4e9 */
  expect_refused(ctx, &g, "the attention width (heads + 2 kv_heads) x head_dim = 2400000000 exceeds");
  gaaw_gpt_config_default(&g);
  g.activation = GAAW_ACT_SWIGLU, g.ffn = 1200000000;
  expect_refused(ctx, &g, "ffn 1200000000 is too large for SwiGLU: its input width 2 x ffn = 2400000000 exceeds");
  gaaw_gpt_config_default(&g);
  g.dim = 2147483644, g.heads = 4; /* the largest multiple of 4: 4 x dim is near 2^33 */
  expect_refused(ctx, &g, "the MLP width 4 x dim = 8589934576 exceeds");

  /* a small GPT is still built */
  gaaw_gpt_config_default(&g);
  g.layers = 1, g.vocab = 8, g.max_seq = 2, g.heads = 1, g.dim = 64;
  gaaw_model_t model = NULL;
  expect_status_ctx(ctx, gaaw_model_create_gpt(ctx, &g, &model), GAAW_SUCCESS);
  gaaw_model_destroy(&model);

  gaaw_finalize(&ctx);
  MPI_Finalize();
  return test_finish("test_gpt_sizes");
}
