/* gaaw_model_check_arrays, the shape check of bindings, at dp 2 (an optimizer makes
 * it collective over world) and at tp 2 (collective over the tp group):
 *  - right shapes pass on every rank (MLP training and prediction; GPT training
 *    and prediction, whose outputs are the logits (batch * seq, vocab));
 *  - a wrong shape on rank 1 only is GAAW_ERR_INVALID_ARG on both ranks, rank 0's
 *    report carrying rank 1's message (the array and both shapes);
 *  - NULL shapes on one rank are refused the same way. */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 4, T = 8 };

static int world_rank;

/* check_arrays with in/out on rank 0 and bad_in/bad_out on rank 1; want on both, and
 * when it fails, text in every rank's report. */
static void expect_check(gaaw_context_t ctx, gaaw_model_t m, int predict, const int64_t in[2], const int64_t out[2],
                         const int64_t *bad_in, const int64_t *bad_out, gaaw_status_t want, const char *text,
                         const char *what)
{
  gaaw_status_t st = world_rank == 1 ? gaaw_model_check_arrays(m, predict, bad_in, bad_out)
                                     : gaaw_model_check_arrays(m, predict, in, out);
  expect_true(st == want, "%s, rank %d: %s, expected %s: %s", what, world_rank, gaaw_status_name(st),
              gaaw_status_name(want), gaaw_last_error(ctx));
  if (text) expect_true(strstr(gaaw_last_error(ctx), text) != NULL, "%s, rank %d: the report lacks '%s': %s", what,
                        world_rank, text, gaaw_last_error(ctx));
}

static void mlp_at_dp2(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  gaaw_mlp_config_t c = {.nsizes = 3, .sizes = {3, 8, 2}, .activation = GAAW_ACT_GELU, .seed = 1};
  gaaw_model_t m;
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &m));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(m, &oc, &opt));
  const int64_t in[2] = {B, 3}, out[2] = {B, 2}, wide[2] = {B, 4}, short_out[2] = {B - 1, 2};
  expect_check(ctx, m, 0, in, out, in, out, GAAW_SUCCESS, NULL, "MLP training shapes");
  expect_check(ctx, m, 1, in, out, in, out, GAAW_SUCCESS, NULL, "MLP prediction shapes");
  expect_check(ctx, m, 0, in, out, wide, out, GAAW_ERR_INVALID_ARG,
               "inputs hold 4 samples of 4 features; the model takes 3", "4 input features on rank 1");
  expect_check(ctx, m, 1, in, out, in, short_out, GAAW_ERR_INVALID_ARG, "outputs hold 3 samples of 2 features",
               "3 output samples for 4 on rank 1");
  expect_check(ctx, m, 0, in, out, NULL, out, GAAW_ERR_INVALID_ARG, "must not be NULL", "NULL inputs on rank 1");
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&m);
  gaaw_finalize(&ctx);
}

static void gpt_at_tp2(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2");
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t m;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &m));
  const int64_t tokens[2] = {B, T}, logits[2] = {B * T, 40}, targets_short[2] = {B, T - 1};
  expect_check(ctx, m, 0, tokens, tokens, tokens, tokens, GAAW_SUCCESS, NULL, "GPT training shapes");
  expect_check(ctx, m, 1, tokens, logits, tokens, logits, GAAW_SUCCESS, NULL, "GPT prediction shapes");
  expect_check(ctx, m, 0, tokens, tokens, tokens, targets_short, GAAW_ERR_INVALID_ARG,
               "targets hold 4 samples of 7 features", "targets (4, 7) on rank 1");
  expect_check(ctx, m, 1, tokens, logits, tokens, tokens, GAAW_ERR_INVALID_ARG, "logits hold 4 samples of 8 features",
               "logits of the training shape on rank 1");
  gaaw_model_destroy(&m);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  mlp_at_dp2();
  gpt_at_tp2();
  return test_finish_mpi("test_check_arrays_np2");
}
