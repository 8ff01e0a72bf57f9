/* The optimizer against PyTorch 1.13 and against closed forms, one rank, f32:
 *  - AdamW (weight decay on every parameter): the GPT's parameters after 5 steps on
 *    one batch against torch.optim.AdamW's, within 1e-4 of each tensor's largest
 *    value (Adam divides by sqrt(v), which magnifies the rounding differences of
 *    small gradients);
 *  - SGD with momentum and weight decay: the change of the parameters over 5 steps
 *    against torch.optim.SGD's, and each step's change against the closed form
 *    b_t = mu b_(t-1) + g_t + wd p_(t-1), p_t = p_(t-1) - lr b_t on the gradients
 *    read back;
 *  - clipping and the schedule: with plain SGD every step changes the parameters by
 *    -lr_t min(1, c / ||g||) g, ||g|| computed from the gradients read back, lr_t from
 *    include/gaaw/optimizer.h's warmup and cosine formula, clipped, unclipped and off;
 *  - bad input.
 * Skips (77) only when PyTorch is not installed and everything else passed; a
 * PyTorch that is installed but broken fails. */
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

/* The key bias's gradient is exactly zero in exact arithmetic (a constant added to
 * every key of a row leaves its softmax unchanged), so both sides see only rounding
 * noise there, which Adam normalises into steps of either sign: those elements
 * are compared to each other only in that they stay tiny (lr 1e-2 a step). */
static void tiny_key_bias(const char *name, float *got, const float *want, int64_t n)
{
  int dim = small().dim;
  (void)n;
  if (!strstr(name, "c_attn.bias")) return;
  for (int j = dim; j < 2 * dim; j++) {
    expect_true(fabsf(got[j]) < STEPS * 1e-2f, "%s[%d] = %g moved like a real gradient", name, j, got[j]);
    got[j] = want[j];
  }
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
  expect_params_match_torch(ctx, model, ref, nref, 1e-4, "5 AdamW steps", tiny_key_bias);
  if (ref) tf_free(ref, nref);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  return 0;
}

/* A model and its SGD optimizer (momentum, weight decay, clip and schedule as
 * given; lr constant unless warmup/decay are set in *oc). */
static void sgd_setup(gaaw_context_t ctx, gaaw_optimizer_config_t *oc, gaaw_model_t *model, gaaw_optimizer_t *opt)
{
  gaaw_gpt_config_t g = small();
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, model));
  require_ok(ctx, gaaw_optimizer_create(*model, oc, opt));
}

static gaaw_optimizer_config_t sgd_config(float lr, float momentum, float weight_decay, float clip_norm)
{
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.kind = GAAW_SGD;
  oc.lr = lr;
  oc.momentum = momentum;
  oc.weight_decay = weight_decay;
  oc.clip_norm = clip_norm;
  return oc;
}

/* One training step on the batch of seed: the parameters before (p0) and after (p1)
 * and the gradients read back between backward and the step (grad); n values each. */
typedef struct {
  float *p0, *grad, *p1;
  long n;
  gaaw_step_stats_t stats;
} sgd_step;

static sgd_step sgd_one_step(gaaw_context_t ctx, gaaw_model_t model, gaaw_optimizer_t opt, uint64_t seed)
{
  sgd_step r;
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, 40, seed, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  r.p0 = model_snapshot(model, 0, &r.n);
  require_ok(ctx, gaaw_model_forward_backward(model, &batch, NULL));
  r.grad = model_snapshot(model, 1, &r.n);
  require_ok(ctx, gaaw_optimizer_step(opt));
  require_ok(ctx, gaaw_optimizer_stats(opt, &r.stats));
  r.p1 = model_snapshot(model, 0, &r.n);
  return r;
}

static void sgd_step_free(sgd_step *r)
{
  free(r->p0);
  free(r->grad);
  free(r->p1);
}

/* The change of the parameters in a step, p1 - p0 (taken in double), against
 * want_delta, parameter by parameter: element i may differ by 1e-5 of the tensor's
 * largest |want_delta| plus one ulp of f32 at |p1_i| (2^-23 |p1_i|), the rounding of
 * the updated parameter, which is how well a small change of a norm weight near 1
 * can be seen at all. */
static void expect_change(gaaw_model_t model, const sgd_step *r, const float *want_delta, const char *what)
{
  model_layout l = model_layout_of(model);
  for (int k = 0; k < l.count; k++) {
    double largest = 0;
    for (long i = l.offset[k]; i < l.offset[k + 1]; i++)
      if (fabs(want_delta[i]) > largest) largest = fabs(want_delta[i]);
    test_errors e = test_errors_start();
    for (long i = l.offset[k]; i < l.offset[k + 1]; i++) {
      double got = (double)r->p1[i] - (double)r->p0[i];
      double allowed = 1e-5 * largest + ldexp(fabs((double)r->p1[i]), -23);
      if (!(allowed > 0)) allowed = 1e-300; /* an exact zero still passes */
      test_errors_add(&e, i - l.offset[k], got, want_delta[i], fabs(got - want_delta[i]) / allowed);
    }
    char label[256];
    snprintf(label, sizeof label, "%s: %s", what, l.name[k]);
    expect_errors(&e, 1.0, "error in units of the allowed", label);
  }
  model_layout_free(&l);
}

/* The learning rate of step t (from 1) as include/gaaw/optimizer.h states it: linear
 * warmup from lr / warmup_steps to lr over steps 1..warmup_steps, then cosine decay
 * from lr to min_lr over steps warmup_steps..decay_steps, min_lr after; constant lr
 * when decay_steps is 0. */
static double lr_formula(const gaaw_optimizer_config_t *c, int t)
{
  if (t <= c->warmup_steps) return (double)c->lr * t / c->warmup_steps;
  if (c->decay_steps == 0) return c->lr;
  if (t >= c->decay_steps) return c->min_lr;
  double x = (double)(t - c->warmup_steps) / (double)(c->decay_steps - c->warmup_steps);
  return c->min_lr + 0.5 * ((double)c->lr - c->min_lr) * (1 + cos(M_PI * x));
}

/* SGD without momentum and weight decay, clipped to clip_norm: every step changes the
 * parameters by -lr_t min(1, clip_norm / ||g||) g, with ||g|| computed here from the
 * gradients read back, and lr_t from the schedule's formula (peak lr, min_lr lr / 10);
 * the step statistics report that ||g|| and lr_t. clip_norm 0 = off; all_clipped
 * says whether every step or none is clipped (a check of the test's premise). */
static void clipped_schedule(gaaw_context_t ctx, float lr_peak, float clip_norm, int all_clipped, int warmup, int decay,
                             int steps)
{
  gaaw_optimizer_config_t oc = sgd_config(lr_peak, 0, 0, clip_norm);
  oc.min_lr = lr_peak / 10;
  oc.warmup_steps = warmup;
  oc.decay_steps = decay;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  sgd_setup(ctx, &oc, &model, &opt);
  int clipped = 0;
  for (int t = 1; t <= steps; t++) {
    sgd_step r = sgd_one_step(ctx, model, opt, 500 + (uint64_t)t);
    double sumsq = 0;
    for (long i = 0; i < r.n; i++) sumsq += (double)r.grad[i] * r.grad[i];
    double norm = sqrt(sumsq), lr = lr_formula(&oc, t);
    double factor = clip_norm > 0 && norm > clip_norm ? clip_norm / norm : 1;
    clipped += factor < 1;
    float *want = malloc(sizeof(float) * (size_t)r.n);
    for (long i = 0; i < r.n; i++) want[i] = (float)(-lr * factor * r.grad[i]);
    char what[160];
    snprintf(what, sizeof what, "clip %g, warmup %d, decay %d: step %d changes p by -lr_t min(1, c/|g|) g", clip_norm,
             warmup, decay, t);
    expect_change(model, &r, want, what);
    expect_true(fabs(r.stats.lr - lr) <= 1e-6 * lr, "%s: the step reports lr %.9g, the formula %.9g", what,
                r.stats.lr, lr);
    expect_true(fabs(r.stats.grad_norm - norm) <= 1e-5 * norm, "%s: the step reports |g| = %.9g, the gradients %.9g",
                what, r.stats.grad_norm, norm);
    expect_true(r.stats.step == t && !r.stats.skipped, "%s: step %lld, skipped %d", what, (long long)r.stats.step,
                r.stats.skipped);
    free(want);
    sgd_step_free(&r);
  }
  /* the premise: these runs clip every step, or none */
  expect_true(clipped == (all_clipped ? steps : 0), "clip %g: %d of %d steps clipped", clip_norm, clipped, steps);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
}

/* The schedule's formula at points worked out by hand, so that lr_formula (on which
 * clipped_schedule relies) is itself checked: lr 1, min_lr 0.1, warmup 2, decay 6. */
static void schedule_by_hand(void)
{
  gaaw_optimizer_config_t c = sgd_config(1.0f, 0, 0, 0);
  c.min_lr = 0.1f;
  c.warmup_steps = 2;
  c.decay_steps = 6;
  const double want[8] = {0.5, 1, 0.1 + 0.45 * (1 + cos(M_PI / 4)), 0.55, 0.1 + 0.45 * (1 + cos(3 * M_PI / 4)), 0.1,
                          0.1, 0.1};
  for (int t = 1; t <= 8; t++)
    expect_true(fabs(lr_formula(&c, t) - want[t - 1]) < 1e-7, "lr_formula(%d) = %.9g, by hand %.9g", t,
                lr_formula(&c, t), want[t - 1]);
}

/* SGD with momentum mu and weight decay wd over STEPS steps on different batches,
 * against the closed form b_t = mu b_(t-1) + g_t + wd p_(t-1) (b_0 = 0),
 * p_t = p_(t-1) - lr b_t, with g_t the gradients read back. */
static void momentum_closed_form(gaaw_context_t ctx)
{
  const float lr = 0.5f, mu = 0.9f, wd = 0.01f;
  gaaw_optimizer_config_t oc = sgd_config(lr, mu, wd, 0);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  sgd_setup(ctx, &oc, &model, &opt);
  double *buf = NULL;
  for (int t = 1; t <= STEPS; t++) {
    sgd_step r = sgd_one_step(ctx, model, opt, 900 + 7 * (uint64_t)t);
    if (!buf) buf = calloc((size_t)r.n, sizeof(double));
    float *want = malloc(sizeof(float) * (size_t)r.n);
    for (long i = 0; i < r.n; i++) {
      buf[i] = mu * buf[i] + r.grad[i] + (double)wd * r.p0[i];
      want[i] = (float)(-lr * buf[i]);
    }
    char what[128];
    snprintf(what, sizeof what, "SGD momentum %g, weight decay %g: step %d against the closed form", mu, wd, t);
    expect_change(model, &r, want, what);
    free(want);
    sgd_step_free(&r);
  }
  free(buf);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
}

/* SGD with momentum and weight decay: STEPS steps on one batch against
 * torch.optim.SGD's; the change of each parameter is compared (its value would hide
 * the step in the parameter's size). 0 ok, 77 skipped (PyTorch not installed). */
static int momentum_against_torch(gaaw_context_t ctx)
{
  gaaw_gpt_config_t g = small();
  const float sgd[3] = {0.5f, 0.9f, 0.01f};
  gaaw_optimizer_config_t oc = sgd_config(sgd[0], sgd[1], sgd[2], 0);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  sgd_setup(ctx, &oc, &model, &opt);
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 6, tokens, targets);
  int nref, skipped;
  tf_tensor *ref = torch_reference_run(ctx, model, &g, B, T, tokens, targets, STEPS, NULL, sgd, &nref, &skipped);
  if (skipped) {
    gaaw_optimizer_destroy(&opt);
    gaaw_model_destroy(&model);
    return 77;
  }
  expect_true(ref != NULL, "cannot run the reference");
  long n;
  float *p0 = model_snapshot(model, 0, &n);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  for (int s = 0; s < STEPS; s++) {
    require_ok(ctx, gaaw_model_forward_backward(model, &batch, NULL));
    require_ok(ctx, gaaw_optimizer_step(opt));
  }
  float *p = model_snapshot(model, 0, &n), *got = malloc(sizeof(float) * (size_t)n),
        *want = malloc(sizeof(float) * (size_t)n);
  model_layout l = model_layout_of(model);
  for (int k = 0; ref && k < l.count; k++) {
    char name[128];
    snprintf(name, sizeof name, "param.%s", l.name[k]);
    const tf_tensor *t = tf_find(ref, nref, name);
    expect_true(t && t->count == l.offset[k + 1] - l.offset[k], "the reference has no %s of %ld values", name,
                l.offset[k + 1] - l.offset[k]);
    for (long i = l.offset[k]; i < l.offset[k + 1]; i++) {
      got[i] = (float)((double)p[i] - p0[i]);
      want[i] = t ? (float)((double)((float *)t->data)[i - l.offset[k]] - p0[i]) : NAN;
    }
  }
  char what[128];
  snprintf(what, sizeof what, "change of the parameters in %d SGD steps (momentum %g, weight decay %g) vs PyTorch",
           STEPS, sgd[1], sgd[2]);
  if (ref) expect_close_layout(&l, got, want, 1e-4, what);
  model_layout_free(&l);
  free(p0);
  free(p);
  free(got);
  free(want);
  if (ref) tf_free(ref, nref);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  return 0;
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
  int adamw = adamw_against_torch(ctx);
  int momentum = momentum_against_torch(ctx);
  momentum_closed_form(ctx);
  schedule_by_hand();
  clipped_schedule(ctx, 1.0f, 0.05f, 1, 3, 8, 10); /* warmup, cosine and after it, every step clipped */
  clipped_schedule(ctx, 0.1f, 1e3f, 0, 2, 5, 6);   /* never clipped */
  clipped_schedule(ctx, 0.1f, 0, 0, 0, 0, 3);      /* clipping off, constant lr */
  bad_input(ctx);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  int code = test_finish("test_optimizer_torch");
  if (code == 0 && (adamw == 77 || momentum == 77)) {
    fprintf(stderr, "test_optimizer_torch: PyTorch is not installed: the comparisons with it were skipped "
                    "(everything else passed)\n");
    return TEST_SKIP;
  }
  return code;
}
