/* Activation recomputation (option recompute) changes memory, never numbers: for
 * tp 1 x dp 2, tp 2, and tp 2 with sequence parallelism, at ZeRO stages 0 and 3,
 * and for both attention cores (option attention), three AdamW steps from randomised
 * parameters give bit-identical losses, gradients and parameters with recompute
 * none, selective and full. The activation peak: with the matrix core it falls from
 * none to selective (the (T, T) scores go) to full (a block keeps only its input);
 * the blocked core keeps no scores, so selective is none, full is below it, and its
 * none is below the matrix core's none. An unknown mode is refused by gaaw_init on
 * every rank. */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 2, T = 32, STEPS = 3, MODES = 3 };
static const char *const modes[MODES] = {"none", "selective", "full"};

typedef struct {
  float losses[STEPS];
  float *grads, *params; /* grads of the last step's microbatch (stage 0), params after */
  long n;
  size_t act_peak;
} run_result;

static run_result train(const char *layout, int sp, int stage, const char *mode, const char *core)
{
  char options[160];
  snprintf(options, sizeof options, "backend=host %s recompute=%s attention=%s", layout, mode, core);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  g.sequence_parallel = sp;
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  model_randomise(model, 7);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = stage;
  oc.lr = 1e-2f;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  run_result r = {{0}, NULL, NULL, 0, 0};
  require_ok(ctx, gaaw_memory_reset_peak(ctx));
  model_train(ctx, model, opt, STEPS - 1, B, T, g.vocab, 11, 1, r.losses);
  /* the last step in two halves, so that stage 0's gradients can be read between */
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 11 + STEPS - 1, tokens, targets);
  gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  require_ok(ctx, gaaw_model_forward_backward(model, &b, &r.losses[STEPS - 1]));
  if (stage == 0) r.grads = model_snapshot(model, 1, &r.n);
  require_ok(ctx, gaaw_optimizer_step(opt));
  r.params = model_snapshot(model, 0, &r.n);
  require_ok(ctx, gaaw_memory_usage(ctx, GAAW_MEM_ACTIVATIONS, NULL, &r.act_peak));
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return r;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  struct {
    const char *layout;
    int sp;
  } layouts[] = {{"dp=2", 0}, {"tp=2", 0}, {"tp=2", 1}};
  int stages[] = {0, 3};
  static const char *const cores[2] = {"matrix", "blocked"};
  for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++)
    for (size_t si = 0; si < sizeof stages / sizeof stages[0]; si++) {
      size_t matrix_none = 0;
      for (int c = 0; c < 2; c++) {
        int blocked = c == 1;
        run_result r[MODES];
        for (int k = 0; k < MODES; k++)
          r[k] = train(layouts[li].layout, layouts[li].sp, stages[si], modes[k], cores[c]);
        char what[128];
        for (int k = 1; k < MODES; k++) {
          snprintf(what, sizeof what, "%s%s, ZeRO %d, %s attention, recompute %s", layouts[li].layout,
                   layouts[li].sp ? " sp" : "", stages[si], cores[c], modes[k]);
          expect_true(memcmp(r[k].losses, r[0].losses, sizeof r[0].losses) == 0, "%s: the losses differ from none",
                      what);
          expect_true(r[k].n == r[0].n && memcmp(r[k].params, r[0].params, sizeof(float) * (size_t)r[0].n) == 0,
                      "%s: the parameters differ from none", what);
          if (stages[si] == 0)
            expect_true(memcmp(r[k].grads, r[0].grads, sizeof(float) * (size_t)r[0].n) == 0,
                        "%s: the gradients differ from none", what);
          if (blocked && k == 1)
            expect_true(r[k].act_peak == r[0].act_peak, "%s: activation peak %zu bytes, not none's %zu", what,
                        r[k].act_peak, r[0].act_peak);
          else
            expect_true(r[k].act_peak < r[k - 1].act_peak, "%s: activation peak %zu bytes, not below %s's %zu", what,
                        r[k].act_peak, modes[k - 1], r[k - 1].act_peak);
        }
        if (blocked)
          expect_true(r[0].act_peak < matrix_none, "%s: blocked none's activation peak %zu, not below matrix's %zu",
                      what, r[0].act_peak, matrix_none);
        matrix_none = r[0].act_peak;
        if (rank == 0)
          fprintf(stderr, "%s%s ZeRO %d, %s attention: activation peak none %zu, selective %zu, full %zu bytes\n",
                  layouts[li].layout, layouts[li].sp ? " sp" : "", stages[si], cores[c], r[0].act_peak,
                  r[1].act_peak, r[2].act_peak);
        for (int k = 0; k < MODES; k++) free(r[k].grads), free(r[k].params);
      }
    }
  /* an unknown mode: every rank refuses it, by name */
  gaaw_config_t cfg;
  gaaw_context_t ctx = NULL;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_parse(cfg, rank == 1 ? "backend=host recompute=some" : "backend=host"));
  expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "option recompute must be none, selective or full, got 'some'") != NULL,
              "rank %d: %s", rank, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);
  return test_finish_mpi("test_recompute_np2");
}
