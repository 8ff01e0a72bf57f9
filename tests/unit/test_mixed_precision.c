/* Mixed precision (bf16, f16 with fp32 master weights) on data a model can learn:
 *  - a tiny GPT (vocabulary 40, 2 layers, width 16) trained 50 AdamW steps on a
 *    repeating sequence (period 9, every token fixes the next) learns it: in f32,
 *    bf16 and f16 the loss falls from ln 40 = 3.69 to below 0.2, and every step's
 *    bf16 and f16 loss stays within u ln 40 of f32's (u the dtype's unit roundoff);
 *  - one batch's gradients in bf16, and in f16 divided by the loss scale, equal
 *    f32's from the same (rounded) parameters, tensor by tensor, within 16 u, and
 *    so does grad_norm (2 u), which the optimizer unscales itself;
 *  - the f16 loss scale doubles after every `loss_scale_window` clean steps, and
 *    with a scale that overflows f16 every step is skipped (parameters unchanged)
 *    and the scale halves after every `hysteresis` overflows.
 *
 * Tolerances, from the unit roundoff u of the compute dtype: bf16 keeps 8
 * significant bits (u = 2^-8 = 3.9e-3), f16 11 (u = 2^-11 = 4.9e-4); parameters,
 * activations and gradients are rounded to it, statistics (norm, softmax, loss
 * sums) and the optimizer are f32.
 *  - Loss: a batch's loss is a mean over its 64 tokens of -log p, each of size
 *    ln V = ln 40 at most here (the loss starts there and falls). A logit passes
 *    about 11 roundings (embedding, 2 x (norm, attention, MLP hidden, MLP out),
 *    final norm), independent, so relative u sqrt(11) ~ 3 u per logit, and the
 *    loss's mean over tokens averages them; the weights drift apart by the
 *    rounding of each step's gradient, which Adam's normalisation keeps relative
 *    too. The loss is allowed one unit roundoff of its largest value, u ln V:
 *    0.0144 for bf16 and 0.0018 for f16 (measured: 2.4e-3 and 5e-4 at most over
 *    the 50 steps), against a fall of 3.5.
 *  - Gradients: a gradient passes about twice a logit's roundings (forward and
 *    backward: ~22, sqrt ~5) and sums over tokens, each tensor against its own
 *    largest value: 16 u, 0.0625 for bf16 and 0.0078 for f16 (measured: 3.1 u
 *    and 3.0 u in the worst tensor). grad_norm, a root mean square over ~10^4
 *    elements whose errors average out, within 2 u (measured: 0.15 u and
 *    0.04 u). The f16 check runs at a loss scale of 2^12, so a missing or
 *    doubled 1 / loss_scale is off by a factor of 2 at least.
 * Host backend, one rank. */
#include <math.h>
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 4, T = 16, STEPS = 50, PERIOD = 9, VOCAB = 40 };

/* Row r of step s is the periodic sequence 3, 10, 17, ... (7 i + 3 mod 40 for
 * i mod 9) from offset 5 s + 2 r; each target is the next token. */
static gaaw_batch_t pattern_batch(int step, int32_t *tokens, int32_t *targets)
{
  for (int r = 0; r < B; r++)
    for (int t = 0; t < T; t++) {
      int i = 5 * step + 2 * r + t;
      tokens[r * T + t] = (7 * (i % PERIOD) + 3) % VOCAB;
      targets[r * T + t] = (7 * ((i + 1) % PERIOD) + 3) % VOCAB;
    }
  return (gaaw_batch_t){.batch = B, .seq = T, .tokens = tokens, .targets = targets};
}

static double unit_roundoff(gaaw_dtype_t dtype)
{
  return dtype == GAAW_BF16 ? 1.0 / 256 : dtype == GAAW_F16 ? 1.0 / 2048 : 1.0 / 16777216;
}

static const char *dtype_name(gaaw_dtype_t dtype)
{
  return dtype == GAAW_BF16 ? "bf16" : dtype == GAAW_F16 ? "f16" : "f32";
}

static gaaw_optimizer_config_t adamw(void)
{
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.lr = 1e-2f;
  oc.initial_loss_scale = 1024;
  return oc;
}

/* STEPS steps on the pattern from the default initialisation; losses[s] is step
 * s's loss. */
static void train_pattern(gaaw_context_t ctx, gaaw_dtype_t dtype, float *losses)
{
  gaaw_gpt_config_t g = model_tiny_gpt(T, dtype);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_optimizer_config_t oc = adamw();
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int32_t tokens[B * T], targets[B * T];
  for (int s = 0; s < STEPS; s++) {
    gaaw_batch_t b = pattern_batch(s, tokens, targets);
    require_ok(ctx, gaaw_model_forward_backward(model, &b, &losses[s]));
    require_ok(ctx, gaaw_optimizer_step(opt));
  }
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
}

static void check_loss_curves(gaaw_context_t ctx)
{
  float curve[3][STEPS];
  gaaw_dtype_t dtypes[3] = {GAAW_F32, GAAW_BF16, GAAW_F16};
  for (int d = 0; d < 3; d++) train_pattern(ctx, dtypes[d], curve[d]);
  const double ln_v = log((double)VOCAB);
  for (int d = 0; d < 3; d++) {
    expect_true(curve[d][STEPS - 1] < 0.2f, "%s: the loss fell only from %g to %g in %d steps", dtype_name(dtypes[d]),
                curve[d][0], curve[d][STEPS - 1], STEPS);
    if (d == 0) continue;
    double tol = unit_roundoff(dtypes[d]) * ln_v, worst = 0;
    int where = 0;
    for (int s = 0; s < STEPS; s++) {
      double err = fabs((double)curve[d][s] - curve[0][s]);
      if (!(err <= worst)) worst = err, where = s;
    }
    expect_true(worst <= tol, "%s: step %d's loss %.6f, f32's %.6f: %.3g apart > u ln V = %.3g",
                dtype_name(dtypes[d]), where, curve[d][where], curve[0][where], worst, tol);
    fprintf(stderr, "%s: loss %.4f -> %.4f (f32 %.4f -> %.4f), at most %.2g from f32's (allowed %.2g)\n",
            dtype_name(dtypes[d]), curve[d][0], curve[d][STEPS - 1], curve[0][0], curve[0][STEPS - 1], worst, tol);
  }
}

/* One batch's gradients (divided by the loss scale) and grad_norm in dtype, and in
 * f32 from the same parameters rounded to dtype. */
static void check_gradients(gaaw_context_t ctx, gaaw_dtype_t dtype)
{
  const float scale = 4096;
  gaaw_gpt_config_t g = model_tiny_gpt(T, dtype), g32 = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t low, ref;
  gaaw_optimizer_t opt_low, opt_ref;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &low));
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g32, &ref));
  model_randomise(low, 31);
  long n;
  float *params = model_snapshot(low, 0, &n), *p = params; /* rounded to dtype */
  int count;
  require_ok(ctx, gaaw_model_param_count(ref, &count));
  for (int i = 0; i < count; i++) {
    const char *name;
    int64_t shape[2];
    gaaw_model_param_info(ref, i, &name, NULL, shape);
    require_ok(ctx, gaaw_model_set_param(ref, name, p));
    p += shape[0] * shape[1];
  }
  gaaw_optimizer_config_t oc = adamw();
  oc.initial_loss_scale = scale;
  require_ok(ctx, gaaw_optimizer_create(low, &oc, &opt_low));
  require_ok(ctx, gaaw_optimizer_create(ref, &oc, &opt_ref));
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, VOCAB, 17, tokens, targets); /* random tokens: gradients in every row of wte */
  gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  require_ok(ctx, gaaw_model_forward_backward(low, &b, NULL));
  require_ok(ctx, gaaw_model_forward_backward(ref, &b, NULL));
  float *got = model_snapshot(low, 1, &n), *want = model_snapshot(ref, 1, &n);
  float unscale = dtype == GAAW_F16 ? 1 / scale : 1;
  for (long i = 0; i < n; i++) got[i] *= unscale;
  double tol = 16 * unit_roundoff(dtype);
  char what[96];
  snprintf(what, sizeof what, "%s gradients%s against f32's", dtype_name(dtype),
           dtype == GAAW_F16 ? " / loss scale" : "");
  expect_close_model(ref, got, want, tol, what);
  require_ok(ctx, gaaw_optimizer_step(opt_low));
  require_ok(ctx, gaaw_optimizer_step(opt_ref));
  gaaw_step_stats_t st_low, st_ref;
  gaaw_optimizer_stats(opt_low, &st_low);
  gaaw_optimizer_stats(opt_ref, &st_ref);
  snprintf(what, sizeof what, "%s grad_norm against f32's", dtype_name(dtype));
  expect_close_scaled(&st_low.grad_norm, &st_ref.grad_norm, 1, 2 * unit_roundoff(dtype), what);
  expect_true(st_low.skipped == 0, "%s: a step at loss scale %g overflowed", dtype_name(dtype), (double)scale);
  free(params);
  free(got);
  free(want);
  gaaw_optimizer_destroy(&opt_low);
  gaaw_optimizer_destroy(&opt_ref);
  gaaw_model_destroy(&low);
  gaaw_model_destroy(&ref);
}

/* The f16 loss scale: x2 after every `window` clean steps; with a scale that
 * overflows, every step skipped and the scale halved after every `hysteresis`
 * overflows. */
static void check_loss_scale(gaaw_context_t ctx)
{
  enum { WINDOW = 4, HYSTERESIS = 2, GROW_STEPS = 10, OVERFLOW_STEPS = 6 };
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F16);
  int32_t tokens[B * T], targets[B * T];
  for (int overflow = 0; overflow <= 1; overflow++) {
    gaaw_model_t model;
    gaaw_optimizer_t opt;
    require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
    gaaw_optimizer_config_t oc = adamw();
    oc.loss_scale_window = WINDOW;
    oc.hysteresis = HYSTERESIS;
    oc.initial_loss_scale = overflow ? 0x1p30f : 256; /* 2^30 / 64 tokens overflows f16's 65504 */
    require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
    long n;
    float *before = model_snapshot(model, 0, &n);
    int steps = overflow ? OVERFLOW_STEPS : GROW_STEPS;
    for (int s = 1; s <= steps; s++) {
      gaaw_batch_t b = pattern_batch(s, tokens, targets);
      require_ok(ctx, gaaw_model_forward_backward(model, &b, NULL));
      require_ok(ctx, gaaw_optimizer_step(opt));
      gaaw_step_stats_t st;
      gaaw_optimizer_stats(opt, &st);
      float want = overflow ? ldexpf(oc.initial_loss_scale, -(s / HYSTERESIS)) : ldexpf(256, s / WINDOW);
      expect_true(st.loss_scale == want && st.skipped == overflow && st.step == s,
                  "%s, step %d: loss scale %g (expected %g), skipped %d, step %lld", overflow ? "overflowing" : "clean",
                  s, (double)st.loss_scale, (double)want, st.skipped, (long long)st.step);
    }
    float *after = model_snapshot(model, 0, &n);
    if (overflow)
      expect_true(memcmp(before, after, sizeof(float) * (size_t)n) == 0, "skipped steps changed the parameters");
    else
      expect_true(memcmp(before, after, sizeof(float) * (size_t)n) != 0, "clean steps left the parameters alone");
    free(before);
    free(after);
    gaaw_optimizer_destroy(&opt);
    gaaw_model_destroy(&model);
  }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  check_loss_curves(ctx);
  check_gradients(ctx, GAAW_BF16);
  check_gradients(ctx, GAAW_F16);
  check_loss_scale(ctx);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  return test_finish("test_mixed_precision");
}
