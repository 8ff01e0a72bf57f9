/* The optimizer against PyTorch 1.13's AdamW (weight decay on every parameter):
 * the GPT's parameters after 5 steps on one batch; SGD with momentum against its
 * formula; the learning-rate schedule; clipping; and bad input. One rank, f32.
 * Tolerance: 1e-4 of each tensor's largest value (Adam divides by sqrt(v), which
 * magnifies the rounding differences of small gradients). */
#include <math.h>
#include <mpi.h>

#include "tests/harness/model_util.h"
#include "tests/harness/torch_ref.h"

enum { B = 2, T = 8, STEPS = 5 };

static gaaw_gpt_config_t small(void)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 40;
  g.max_seq = 8;
  g.layers = 2;
  g.heads = 2;
  g.dim = 16;
  return g;
}

/* 0 ok, 77 skipped */
static int adamw_against_torch(gaaw_context_t ctx)
{
  gaaw_gpt_config_t g = small();
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 3, tokens, targets);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.lr = 1e-2f;
  oc.weight_decay = 0.1f;
  const float adam[5] = {oc.lr, oc.beta1, oc.beta2, oc.eps, oc.weight_decay};
  int nref, skipped;
  tf_tensor *ref = torch_reference(ctx, model, &g, B, T, tokens, targets, STEPS, adam, &nref, &skipped);
  if (skipped) {
    gaaw_model_destroy(&model);
    return 77;
  }
  expect_true(ref != NULL, "cannot run the reference");
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  for (int s = 0; s < STEPS; s++) {
    require_ok(ctx, gaaw_model_forward_backward(model, &batch, NULL));
    require_ok(ctx, gaaw_optimizer_step(opt));
  }
  int count;
  gaaw_model_param_count(model, &count);
  for (int i = 0; ref && i < count; i++) {
    const char *name;
    int64_t shape[2];
    char what[128];
    gaaw_model_param_info(model, i, &name, NULL, shape);
    snprintf(what, sizeof what, "param.%s", name);
    const tf_tensor *t = tf_find(ref, nref, what);
    expect_true(t != NULL, "the reference has no %s", what);
    if (!t) continue;
    float *v = malloc(sizeof(float) * shape[0] * shape[1]), *want = (float *)t->data;
    require_ok(ctx, gaaw_model_get_param(model, name, v));
    /* The key bias's gradient is exactly zero in exact arithmetic (a constant added
     * to every key of a row leaves its softmax unchanged), so both sides see only
     * rounding noise there, which Adam normalises into steps of either sign: those
     * elements are compared to each other only in that they stay tiny. */
    if (strstr(name, "c_attn.bias")) {
      for (int j = g.dim; j < 2 * g.dim; j++) {
        expect_true(fabsf(v[j]) < STEPS * oc.lr, "%s[%d] = %g moved like a real gradient", name, j, v[j]);
        v[j] = want[j];
      }
    }
    snprintf(what, sizeof what, "%s after %d AdamW steps", name, STEPS);
    expect_close_scaled(v, want, t->count, 1e-4, what);
    free(v);
  }
  if (ref) tf_free(ref, nref);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  return 0;
}

/* One SGD step from zero momentum: p1 = p0 - lr (g + wd p0). */
static void sgd_formula(gaaw_context_t ctx)
{
  gaaw_gpt_config_t g = small();
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.kind = GAAW_SGD;
  oc.lr = 0.5f;
  oc.weight_decay = 0.01f;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 4, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  long n;
  float *p0 = model_snapshot(model, 0, &n);
  require_ok(ctx, gaaw_model_forward_backward(model, &batch, NULL));
  float *grad = model_snapshot(model, 1, &n);
  require_ok(ctx, gaaw_optimizer_step(opt));
  float *p1 = model_snapshot(model, 0, &n), *want = malloc(sizeof(float) * (size_t)n);
  for (long i = 0; i < n; i++) want[i] = p0[i] - oc.lr * (grad[i] + oc.weight_decay * p0[i]);
  expect_close_scaled(p1, want, n, 1e-6, "one SGD step");
  free(p0);
  free(p1);
  free(grad);
  free(want);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
}

/* Warmup, cosine decay, and clipping as reported by the step statistics. */
static void schedule_and_clipping(gaaw_context_t ctx)
{
  gaaw_gpt_config_t g = small();
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.lr = 1e-3f;
  oc.min_lr = 1e-4f;
  oc.warmup_steps = 2;
  oc.decay_steps = 6;
  oc.clip_norm = 1e-3f; /* far below the real norm: every step is clipped */
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 5, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  const double want_lr[8] = {5e-4, 1e-3, 1e-4 + 0.45e-3 * (1 + cos(M_PI * 0.25)), 1e-4 + 0.45e-3 * (1 + cos(M_PI * 0.5)),
                             1e-4 + 0.45e-3 * (1 + cos(M_PI * 0.75)), 1e-4, 1e-4, 1e-4};
  for (int s = 0; s < 8; s++) {
    long n;
    float *before = model_snapshot(model, 0, &n);
    require_ok(ctx, gaaw_model_forward_backward(model, &batch, NULL));
    require_ok(ctx, gaaw_optimizer_step(opt));
    gaaw_step_stats_t st;
    require_ok(ctx, gaaw_optimizer_stats(opt, &st));
    expect_true(fabs(st.lr - want_lr[s]) <= 1e-7, "step %d: lr %g, expected %g", s + 1, st.lr, want_lr[s]);
    expect_true(st.step == s + 1 && !st.skipped && st.loss_scale == 1 && st.grad_norm > oc.clip_norm,
                "step %d stats: step %lld skipped %d scale %g norm %g", s + 1, (long long)st.step, st.skipped,
                st.loss_scale, st.grad_norm);
    free(before);
  }
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
}

static void bad_input(gaaw_context_t ctx)
{
  gaaw_gpt_config_t g = small();
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_t opt = NULL;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 4;
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "zero_stage must be 0..3, got 4") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_optimizer_config_default(&oc);
  oc.lr = -1;
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  gaaw_optimizer_config_default(&oc);
  oc.beta2 = 1;
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  gaaw_optimizer_config_default(&oc);
  oc.accumulation = 0;
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  gaaw_optimizer_config_default(&oc);
  oc.eps = 0;
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  gaaw_optimizer_config_default(&oc);
  oc.min_lr = 1;
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  gaaw_optimizer_config_default(&oc);
  oc.kind = (gaaw_optimizer_kind_t)5;
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  gaaw_optimizer_config_default(&oc);
  oc.clip_norm = -1;
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  expect_true(opt == NULL, "no optimizer after failures");
  expect_status(gaaw_optimizer_create(NULL, &oc, &opt), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_optimizer_create(model, NULL, &opt), GAAW_ERR_INVALID_ARG);
  gaaw_optimizer_config_default(&oc);
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, NULL), GAAW_ERR_INVALID_ARG);
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  gaaw_optimizer_t second = NULL;
  /* one optimizer per model, at every stage (each owns the model's hooks) */
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &second), GAAW_ERR_STATE);
  expect_true(second == NULL && strstr(gaaw_last_error(ctx), "already has an optimizer") != NULL, "%s",
              gaaw_last_error(ctx));
  expect_status(gaaw_optimizer_step(NULL), GAAW_ERR_INVALID_ARG);
  gaaw_step_stats_t st;
  expect_status(gaaw_optimizer_stats(NULL, &st), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_optimizer_stats(opt, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_optimizer_memory(NULL, NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_optimizer_destroy(NULL), GAAW_SUCCESS);
  gaaw_optimizer_destroy(&opt);
  expect_true(opt == NULL, "destroy sets NULL");
  gaaw_model_destroy(&model);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  int rc = adamw_against_torch(ctx);
  sgd_formula(ctx);
  schedule_and_clipping(ctx);
  bad_input(ctx);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  if (rc == 77) fprintf(stderr, "test_optimizer_torch: PyTorch missing: the AdamW comparison was skipped\n");
  return test_finish("test_optimizer_torch");
}
