/* Checks that see the scale of the gradient, which AdamW with clipping cancels:
 * for the GPT-2 variant (layernorm + GELU + tied) and RMSnorm + SwiGLU + untied,
 * from randomised parameters (model_randomise), on every (tp, dp) layout of the
 * world with 2 microbatches per dp rank, and every ZeRO stage:
 *  - the independent reference: a serial model (MPI_COMM_SELF, no optimizer)
 *    accumulates all dp x 2 microbatches; its gradients read with
 *    gaaw_model_get_grad (each parameter once, the tied embedding once) are the
 *    sum, g = sum / (dp x 2) the mean, and |g| = sqrt(sum g^2) its norm;
 *  - stage 0: the gradients read between backward and the step are the sum over
 *    dp and microbatches (the serial sum), tensor by tensor;
 *  - gaaw_optimizer_stats' grad_norm of the first step equals |g|;
 *  - SGD (momentum 0.9, no weight decay, no clipping) sees the scale: the first
 *    step moves every parameter by exactly -lr g, and after 3 steps the
 *    parameters equal a serial stage-0 SGD run (which itself must pass the two
 *    checks above), tensor by tensor.
 * A wrong 1 / (dp x accumulation) factor scales grad_norm and the first step by
 * at least 2 and fails both, in the serial run too (planted in zero/step.c: x2,
 * 1/dp dropped); the loss scale's share of the factor is checked in f16 by
 * tests/unit/test_mixed_precision.c.
 *
 * Tolerances (f32; each tensor against its own largest |value|):
 *  - gradient sums and grad_norm, 1e-5: the same f32 gradients summed in another
 *    order (dp all-reduce, microbatches, tp shards): a few 2^-24 per addition
 *    over at most 8 terms, and the norm's sum of squares over ~10^4 terms
 *    (measured: 1e-6 for the sums, 1e-7 for the norm);
 *  - the first SGD step, 1e-4: the step -lr g is recovered as p1 - p0, which
 *    carries the rounding of p1 (2^-24 |p|, |p| up to 1.4 for the norm weights)
 *    against a step of lr x max|g| >= 1e-3 for the smallest tensors here:
 *    2.5e-5 measured in the worst tensor, 1e-4 with margin; a factor 2 is an
 *    error of 1;
 *  - parameters after 3 steps, 1e-5 of the largest |parameter| (SGD does not
 *    magnify rounding as Adam's 1 / sqrt(v) does).
 * Built as test_grad_scale_np2 (tp 1 x dp 2, tp 2 x dp 1) and test_grad_scale_np4
 * (tp 1 x dp 4, tp 2 x dp 2). */
#include <math.h>
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 2, T = 8, ACCUM = 2, STEPS = 3 };
static const float LR = 0.5f;
static int world_rank, world_size;

static gaaw_context_t open_ctx(MPI_Comm comm, int tp)
{
  char list[64];
  snprintf(list, sizeof list, "backend=host tp=%d", tp);
  return test_context(comm, list);
}

static gaaw_gpt_config_t variant(int k)
{
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  if (k) {
    g.norm = GAAW_NORM_RMSNORM;
    g.activation = GAAW_ACT_SWIGLU;
    g.tied_embeddings = 0;
  }
  return g;
}

static gaaw_optimizer_config_t sgd(int stage, int accumulation)
{
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.kind = GAAW_SGD;
  oc.zero_stage = stage;
  oc.lr = LR;
  oc.momentum = 0.9f;
  oc.weight_decay = 0;
  oc.clip_norm = 0;
  oc.accumulation = accumulation;
  return oc;
}

/* Microbatch `micro` of step `step` (ignored targets included: every microbatch's
 * loss is its own mean, and the step averages those means). */
static gaaw_batch_t batch_of(int step, int micro, int32_t *tokens, int32_t *targets)
{
  model_random_batch(B, T, 40, 7000 + 131 * (uint64_t)step + (uint64_t)micro, tokens, targets);
  return (gaaw_batch_t){.batch = B, .seq = T, .tokens = tokens, .targets = targets};
}

typedef struct {
  float grad_norm;     /* first step's */
  float *step1, *last; /* parameters after the first and the last step */
  float *grad_sum;     /* stage 0: the gradients read before the first step */
} sgd_run;

/* STEPS SGD steps; dp rank r runs microbatches r * accum .. r * accum + accum - 1. */
static sgd_run train(gaaw_context_t ctx, const gaaw_gpt_config_t *g, uint64_t seed, const gaaw_optimizer_config_t *oc)
{
  sgd_run r = {0};
  int dp_rank, dp;
  gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, &dp);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, g, &model));
  model_randomise(model, seed);
  require_ok(ctx, gaaw_optimizer_create(model, oc, &opt));
  int32_t tokens[B * T], targets[B * T];
  long n;
  for (int s = 0; s < STEPS; s++) {
    for (int a = 0; a < oc->accumulation; a++) {
      gaaw_batch_t b = batch_of(s, dp_rank * oc->accumulation + a, tokens, targets);
      require_ok(ctx, gaaw_model_forward_backward(model, &b, NULL));
    }
    if (s == 0 && oc->zero_stage == 0) r.grad_sum = model_snapshot(model, 1, &n);
    require_ok(ctx, gaaw_optimizer_step(opt));
    if (s == 0) {
      gaaw_step_stats_t st;
      require_ok(ctx, gaaw_optimizer_stats(opt, &st));
      r.grad_norm = st.grad_norm;
      r.step1 = model_snapshot(model, 0, &n);
    }
  }
  r.last = model_snapshot(model, 0, &n);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  return r;
}

static void free_run(sgd_run *r)
{
  free(r->step1);
  free(r->last);
  free(r->grad_sum);
}

/* One run against the reference: p0 the initial parameters, sum the gradients'
 * sum over all microbatches, n values, `micro` microbatches in all. */
static void check_run(gaaw_model_t names, const sgd_run *got, const float *p0, const float *sum, long n, int micro,
                      const sgd_run *serial, const char *what)
{
  char label[160];
  float *mean = malloc(sizeof(float) * (size_t)n), *want_step = malloc(sizeof(float) * (size_t)n),
        *got_step = malloc(sizeof(float) * (size_t)n);
  for (long i = 0; i < n; i++) {
    mean[i] = (float)((double)sum[i] / micro);
    want_step[i] = -LR * mean[i];
    got_step[i] = got->step1[i] - p0[i];
  }
  float norm = (float)model_norm2(mean, n);
  snprintf(label, sizeof label, "%s: grad_norm against sqrt(sum g^2) of the serial mean gradient", what);
  expect_close_scaled(&got->grad_norm, &norm, 1, 1e-5, label);
  if (got->grad_sum) {
    snprintf(label, sizeof label, "%s: gradients before the step against the serial sum", what);
    expect_close_model(names, got->grad_sum, sum, 1e-5, label);
  }
  snprintf(label, sizeof label, "%s: first step against -lr x the serial mean gradient", what);
  expect_close_model(names, got_step, want_step, 1e-4, label);
  if (serial) {
    snprintf(label, sizeof label, "%s: parameters after %d SGD steps against the serial run", what, STEPS);
    expect_close_model(names, got->last, serial->last, 1e-5, label);
  }
  free(mean);
  free(want_step);
  free(got_step);
}

static void check_layout(gaaw_context_t serial, int tp, int k)
{
  int dp = world_size / tp, micro = dp * ACCUM;
  gaaw_gpt_config_t g = variant(k);
  uint64_t seed = 77 + (uint64_t)k;
  /* the independent reference: the serial sum of every microbatch's gradients */
  gaaw_model_t ref;
  require_ok(serial, gaaw_model_create_gpt(serial, &g, &ref));
  model_randomise(ref, seed);
  long n;
  float *p0 = model_snapshot(ref, 0, &n);
  int32_t tokens[B * T], targets[B * T];
  for (int m = 0; m < micro; m++) {
    gaaw_batch_t b = batch_of(0, m, tokens, targets);
    require_ok(serial, gaaw_model_forward_backward(ref, &b, NULL));
  }
  float *sum = model_snapshot(ref, 1, &n);

  char what[128];
  gaaw_optimizer_config_t oc = sgd(0, micro);
  sgd_run want = train(serial, &g, seed, &oc);
  snprintf(what, sizeof what, "%s, serial, %d microbatches, rank %d", k ? "rmsnorm + swiglu + untied" : "gpt-2", micro,
           world_rank);
  check_run(ref, &want, p0, sum, n, micro, NULL, what);

  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, tp);
  for (int stage = 0; stage <= 3; stage++) {
    oc = sgd(stage, ACCUM);
    sgd_run got = train(par, &g, seed, &oc);
    snprintf(what, sizeof what, "%s, stage %d, tp %d x dp %d x %d microbatches, rank %d",
             k ? "rmsnorm + swiglu + untied" : "gpt-2", stage, tp, dp, ACCUM, world_rank);
    check_run(ref, &got, p0, sum, n, micro, &want, what);
    free_run(&got);
  }
  gaaw_finalize(&par);
  free_run(&want);
  free(p0);
  free(sum);
  gaaw_model_destroy(&ref);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  gaaw_context_t serial = open_ctx(MPI_COMM_SELF, 1);
  for (int k = 0; k < 2; k++) {
    check_layout(serial, 1, k);
    check_layout(serial, 2, k);
  }
  gaaw_finalize(&serial);
  int failures = test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total && !failures) return 1;
  return test_finish(world_size == 2 ? "test_grad_scale_np2" : "test_grad_scale_np4");
}
