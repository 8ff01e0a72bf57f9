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

/* One call of check_arrays: in/out on rank 0, bad_in/bad_out on rank 1; want on
 * both, and when it fails, text in every rank's report. */
typedef struct {
  const char *what;
  int predict;
  const int64_t *in, *out, *bad_in, *bad_out;
  gaaw_status_t want;
  const char *text;
} check_case;

static void expect_cases(gaaw_context_t ctx, gaaw_model_t m, const check_case *c, int n)
{
  for (int k = 0; k < n; k++, c++) {
    gaaw_status_t st = world_rank == 1 ? gaaw_model_check_arrays(m, c->predict, c->bad_in, c->bad_out)
                                       : gaaw_model_check_arrays(m, c->predict, c->in, c->out);
    expect_true(st == c->want, "%s, rank %d: %s, expected %s: %s", c->what, world_rank, gaaw_status_name(st),
                gaaw_status_name(c->want), gaaw_last_error(ctx));
    if (c->text)
      expect_true(strstr(gaaw_last_error(ctx), c->text) != NULL, "%s, rank %d: the report lacks '%s': %s", c->what,
                  world_rank, c->text, gaaw_last_error(ctx));
  }
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
  const check_case cases[] = {
      {"MLP training shapes", 0, in, out, in, out, GAAW_SUCCESS, NULL},
      {"MLP prediction shapes", 1, in, out, in, out, GAAW_SUCCESS, NULL},
      {"4 input features on rank 1", 0, in, out, wide, out, GAAW_ERR_INVALID_ARG,
       "inputs hold 4 samples of 4 features; the model takes 3"},
      {"3 output samples for 4 on rank 1", 1, in, out, in, short_out, GAAW_ERR_INVALID_ARG,
       "outputs hold 3 samples of 2 features"},
      {"NULL inputs on rank 1", 0, in, out, NULL, out, GAAW_ERR_INVALID_ARG, "must not be NULL"},
  };
  expect_cases(ctx, m, cases, (int)(sizeof cases / sizeof cases[0]));
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
  const check_case cases[] = {
      {"GPT training shapes", 0, tokens, tokens, tokens, tokens, GAAW_SUCCESS, NULL},
      {"GPT prediction shapes", 1, tokens, logits, tokens, logits, GAAW_SUCCESS, NULL},
      {"targets (4, 7) on rank 1", 0, tokens, tokens, tokens, targets_short, GAAW_ERR_INVALID_ARG,
       "targets hold 4 samples of 7 features"},
      {"logits of the training shape on rank 1", 1, tokens, logits, tokens, tokens, GAAW_ERR_INVALID_ARG,
       "logits hold 4 samples of 8 features"},
  };
  expect_cases(ctx, m, cases, (int)(sizeof cases / sizeof cases[0]));
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
