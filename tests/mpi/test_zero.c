/* ZeRO and the optimizer on many ranks:
 *  - parity: from randomised parameters (model_randomise: biases normal(0, 0.1),
 *    norm weights 1 + normal(0, 0.1)), for every stage x (tp, dp) layout of the
 *    world, the parameters after 10 AdamW steps equal a serial stage-0 run (one
 *    rank, MPI_COMM_SELF) that accumulates the same dp microbatches, in f32,
 *    tensor by tensor (3e-5 of each tensor's largest value: Adam magnifies
 *    rounding differences of small gradients, measured up to 3.3e-6 with Adam's
 *    eps 1e-5, see adamw()); the scale of
 *    the gradients, which AdamW and clipping cancel, is checked by
 *    tests/mpi/test_grad_scale.c with SGD;
 *  - the same run twice is bit-identical;
 *  - model-state bytes per rank equal DESIGN.md section 10 with bf16 parameters
 *    (2 Psi + 2 Psi + 12 Psi at stage 0, ... 16 Psi / Nd at stage 3), Psi the
 *    rank's padded parameter count;
 *  - gradient and parameter traffic per step over dp: 2 Psi (stages 0-2), 3 Psi
 *    (stage 3), in elements of the compute dtype;
 *  - with 2 microbatches per step, every stage still equals the serial run, and
 *    backward starts every bucket's reduction (stages 0, 1: on the last
 *    microbatch; 2, 3: on each), and stage 3 gathers layers one ahead; a backward
 *    pass more than the accumulation is refused;
 *  - reading gradients between the last backward and the step (stage 0) gives the
 *    sum over dp, equal to the serial run's; gaaw_model_zero_grad there discards
 *    the microbatch (stages 0 and 2: the step equals one without it, bit for bit);
 *  - an f16 overflow skips the step on every rank and halves the loss scale
 *    (loss curves in bf16 and f16 and the loss-scale schedule:
 *    tests/unit/test_mixed_precision.c).
 * Built as test_zero_np2 and test_zero_np4. */
#include <math.h>
#include <mpi.h>

#include "parallel/model_impl.h"
#include "tests/harness/model_util.h"
#include "zero/zero_impl.h"

enum { B = 2, T = 8, STEPS = 10 };
static int world_rank, world_size;

/* bucket_bytes: ZeRO buckets (0: one per layer, so that stages 2 and 3 reduce and
 * gather layer by layer during forward and backward) */
static gaaw_context_t open_ctx(MPI_Comm comm, int tp, int64_t bucket_bytes)
{
  char list[64];
  snprintf(list, sizeof list, "backend=host tp=%d zero_bucket_bytes=%lld", tp, (long long)bucket_bytes);
  return test_context(comm, list);
}


static gaaw_optimizer_config_t adamw(int stage, int accumulation)
{
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = stage;
  oc.lr = 3e-3f;
  oc.accumulation = accumulation;
  oc.clip_norm = 1.0f;
  /* The key bias's gradient is zero up to rounding (softmax ignores a shift shared
   * by a query's scores); Adam with eps 1e-8 would turn that noise (~1e-9) into
   * steps of lr, different in every layout (3e-3 of the tensor's largest value
   * after 10 steps). eps 1e-5 keeps those steps near 1e-4 lr, and is small against
   * the real gradients' sqrt(v). */
  oc.eps = 1e-5f;
  return oc;
}

/* Microbatch `micro` of step `step`: every dp rank draws its own. */
static gaaw_batch_t batch_of(int step, int micro, int32_t *tokens, int32_t *targets)
{
  model_random_batch(B, T, 40, 1000 + 97 * (uint64_t)step + (uint64_t)micro, tokens, targets);
  for (int i = 0; i < B * T; i++)
    if (targets[i] < 0) targets[i] = 0; /* every microbatch counts the same number of tokens */
  return (gaaw_batch_t){.batch = B, .seq = T, .tokens = tokens, .targets = targets};
}

typedef struct {
  float *params;
  long n;
  float losses[STEPS];
  size_t mem[3];
  uint64_t comm;
  int64_t psi;
  int nbuckets, reductions_in_backward, gathers_ahead; /* of the last step */
} run_result;

/* STEPS steps on ctx; each of its dp ranks uses microbatches dp_rank * accum ..,
 * the serial reference (accum = dp) all of them. */
static run_result train(gaaw_context_t ctx, gaaw_dtype_t dtype, const gaaw_optimizer_config_t *oc)
{
  run_result r;
  memset(&r, 0, sizeof r);
  int dp_rank, dp;
  gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, &dp);
  gaaw_gpt_config_t g = model_tiny_gpt(T, dtype);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  model_randomise(model, 4242);
  r.psi = model->params.numel;
  require_ok(ctx, gaaw_optimizer_create(model, oc, &opt));
  int32_t tokens[B * T], targets[B * T];
  for (int s = 0; s < STEPS; s++) {
    float sum = 0, loss;
    for (int a = 0; a < oc->accumulation; a++) {
      gaaw_batch_t b = batch_of(s, dp_rank * oc->accumulation + a, tokens, targets);
      require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
      sum += loss;
    }
    require_ok(ctx, gaaw_optimizer_step(opt));
    r.losses[s] = sum / oc->accumulation;
  }
  gaaw_step_stats_t st;
  gaaw_optimizer_stats(opt, &st);
  r.comm = st.comm_bytes;
  r.nbuckets = opt->nbuckets;
  r.reductions_in_backward = st.reductions_in_backward;
  r.gathers_ahead = st.gathers_ahead;
  gaaw_optimizer_memory(opt, &r.mem[0], &r.mem[1], &r.mem[2]);
  r.params = model_snapshot(model, 0, &r.n);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  return r;
}

/* A model with the tests' parameter registry, for tensor-by-tensor comparisons. */
static gaaw_model_t registry(gaaw_context_t serial)
{
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  require_ok(serial, gaaw_model_create_gpt(serial, &g, &model));
  return model;
}

static void check_layout(gaaw_context_t serial, int tp)
{
  int dp = world_size / tp;
  gaaw_optimizer_config_t ref_cfg = adamw(0, dp);
  run_result want = train(serial, GAAW_F32, &ref_cfg);
  gaaw_model_t names = registry(serial);
  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, tp, 0);
  for (int stage = 0; stage <= 3; stage++) {
    gaaw_optimizer_config_t oc = adamw(stage, 1);
    run_result got = train(par, GAAW_F32, &oc);
    char what[96];
    snprintf(what, sizeof what, "stage %d, tp %d x dp %d, rank %d: parameters after %d steps", stage, tp, dp,
             world_rank, STEPS);
    expect_true(got.n == want.n, "%s: %ld values, serial %ld", what, got.n, want.n);
    if (got.n == want.n) expect_close_model(names, got.params, want.params, 3e-5, what);
    if (stage == 2) {
      run_result again = train(par, GAAW_F32, &oc);
      expect_true(memcmp(again.params, got.params, sizeof(float) * got.n) == 0,
                  "stage 2, tp %d: the same run twice differs", tp);
      free(again.params);
    }
    free(got.params);
  }
  gaaw_model_destroy(&names);
  free(want.params);
  gaaw_finalize(&par);
}

/* Two microbatches per step on every dp rank equal the serial run of all 2 dp;
 * the reductions start in backward and stage 3 gathers ahead. With one bucket per
 * layer (bucket_bytes 0: embedding, 2 blocks, head) stage 3 gathers 3 buckets ahead
 * in forward (each next layer's) and 2 in backward (the embedding's bucket is still
 * resident, the tied head used it): 2 * nbuckets - 3 per microbatch. */
static void check_accumulation(gaaw_context_t serial, int64_t bucket_bytes)
{
  int dp = world_size;
  gaaw_optimizer_config_t ref_cfg = adamw(0, 2 * dp);
  run_result want = train(serial, GAAW_F32, &ref_cfg);
  gaaw_model_t names = registry(serial);
  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, 1, bucket_bytes);
  for (int stage = 0; stage <= 3; stage++) {
    gaaw_optimizer_config_t oc = adamw(stage, 2);
    run_result got = train(par, GAAW_F32, &oc);
    char what[112];
    snprintf(what, sizeof what, "stage %d, dp %d, 2 microbatches, %s, rank %d: parameters after %d steps", stage, dp,
             bucket_bytes ? "one bucket" : "a bucket per layer", world_rank, STEPS);
    expect_close_model(names, got.params, want.params, 3e-5, what);
    int reductions = stage >= 2 ? 2 * got.nbuckets : got.nbuckets;
    int ahead = stage == 3 && !bucket_bytes ? 2 * (2 * got.nbuckets - 3) : 0;
    expect_true(got.reductions_in_backward == reductions && got.gathers_ahead == ahead,
                "%s: %d reductions started in backward (expected %d), %d gathers ahead (expected %d)", what,
                got.reductions_in_backward, reductions, got.gathers_ahead, ahead);
    free(got.params);
  }
  /* a third backward pass with accumulation 2 */
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(par, gaaw_model_create_gpt(par, &g, &model));
  gaaw_optimizer_config_t oc = adamw(1, 2);
  require_ok(par, gaaw_optimizer_create(model, &oc, &opt));
  int32_t tokens[B * T], targets[B * T];
  gaaw_batch_t b = batch_of(0, world_rank, tokens, targets);
  require_ok(par, gaaw_model_forward_backward(model, &b, NULL));
  require_ok(par, gaaw_model_forward_backward(model, &b, NULL));
  expect_status_ctx(par, gaaw_model_forward_backward(model, &b, NULL), GAAW_ERR_STATE);
  expect_true(strstr(gaaw_last_error(par), "accumulation is 2") != NULL, "%s", gaaw_last_error(par));
  expect_status_ctx(par, gaaw_optimizer_step(opt), GAAW_SUCCESS);
  require_ok(par, gaaw_model_forward_backward(model, &b, NULL));
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_model_destroy(&names);
  free(want.params);
  gaaw_finalize(&par);
}

/* Gradients read or zeroed while the reductions backward started are in flight. */
static void check_gradient_access(gaaw_context_t serial)
{
  int dp = world_size;
  int32_t tokens[B * T], targets[B * T];
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t ref;
  require_ok(serial, gaaw_model_create_gpt(serial, &g, &ref));
  for (int micro = 0; micro < dp; micro++) {
    gaaw_batch_t b = batch_of(0, micro, tokens, targets);
    require_ok(serial, gaaw_model_forward_backward(ref, &b, NULL));
  }
  long n;
  float *want = model_snapshot(ref, 1, &n);
  gaaw_model_destroy(&ref);

  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, 1, 0);
  gaaw_batch_t mine = batch_of(0, world_rank, tokens, targets);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(par, gaaw_model_create_gpt(par, &g, &model));
  gaaw_optimizer_config_t oc = adamw(0, 1);
  require_ok(par, gaaw_optimizer_create(model, &oc, &opt));
  require_ok(par, gaaw_model_forward_backward(model, &mine, NULL));
  float *got = model_snapshot(model, 1, &n);
  expect_close_model(model, got, want, 1e-5, "stage 0: gradients read after backward (the sum over dp)");
  free(got);
  free(want);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);

  for (int stage = 0; stage <= 2; stage += 2) {
    float *params[2];
    for (int discard = 0; discard < 2; discard++) {
      oc = adamw(stage, 1);
      require_ok(par, gaaw_model_create_gpt(par, &g, &model));
      require_ok(par, gaaw_optimizer_create(model, &oc, &opt));
      if (discard) {
        gaaw_batch_t other = batch_of(1, world_rank, tokens, targets);
        require_ok(par, gaaw_model_forward_backward(model, &other, NULL));
        expect_status_ctx(par, gaaw_model_zero_grad(model), GAAW_SUCCESS);
      }
      mine = batch_of(0, world_rank, tokens, targets);
      expect_status_ctx(par, gaaw_model_forward_backward(model, &mine, NULL), GAAW_SUCCESS);
      expect_status_ctx(par, gaaw_optimizer_step(opt), GAAW_SUCCESS);
      params[discard] = model_snapshot(model, 0, &n);
      gaaw_optimizer_destroy(&opt);
      gaaw_model_destroy(&model);
    }
    expect_true(memcmp(params[0], params[1], sizeof(float) * (size_t)n) == 0,
                "stage %d: a microbatch discarded with gaaw_model_zero_grad changed the step", stage);
    free(params[0]);
    free(params[1]);
  }
  gaaw_finalize(&par);
}

/* Section 10, with 2-byte parameters and gradients and K = 12 bytes of fp32 state. */
static void check_memory_and_traffic(int tp, int64_t bucket_bytes)
{
  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, tp, bucket_bytes);
  int dp = world_size / tp;
  for (int stage = 0; stage <= 3; stage++) {
    gaaw_optimizer_config_t oc = adamw(stage, 1);
    run_result r = train(par, GAAW_BF16, &oc);
    uint64_t psi = (uint64_t)r.psi, nd = (uint64_t)dp;
    uint64_t want[3] = {stage >= 3 ? 2 * psi / nd : 2 * psi, stage >= 2 ? 2 * psi / nd : 2 * psi,
                        stage >= 1 ? 12 * psi / nd : 12 * psi};
    expect_true(r.mem[0] == want[0] && r.mem[1] == want[1] && r.mem[2] == want[2],
                "stage %d, dp %d: model state %zu + %zu + %zu bytes, section 10 says %llu + %llu + %llu (Psi %llu)",
                stage, dp, r.mem[0], r.mem[1], r.mem[2], (unsigned long long)want[0], (unsigned long long)want[1],
                (unsigned long long)want[2], (unsigned long long)psi);
    uint64_t traffic = dp > 1 ? (stage == 3 ? 3 : 2) * psi * 2 : 0;
    expect_true(r.comm == traffic, "stage %d, dp %d: %llu bytes over dp per step, expected %s Psi = %llu", stage, dp,
                (unsigned long long)r.comm, stage == 3 ? "3" : "2", (unsigned long long)traffic);
    free(r.params);
  }
  gaaw_finalize(&par);
}

/* A loss scale far too large overflows f16 on every rank: every rank skips, the
 * scale halves (hysteresis 1). */
static void check_overflow(void)
{
  gaaw_context_t par = open_ctx(MPI_COMM_WORLD, 1, 16 << 20);
  gaaw_optimizer_config_t oc = adamw(1, 1);
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F16);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(par, gaaw_model_create_gpt(par, &g, &model));
  oc.initial_loss_scale = 1e30f;
  oc.hysteresis = 1;
  require_ok(par, gaaw_optimizer_create(model, &oc, &opt));
  long n;
  float *before = model_snapshot(model, 0, &n);
  int32_t tokens[B * T], targets[B * T];
  gaaw_batch_t b = batch_of(0, world_rank, tokens, targets);
  require_ok(par, gaaw_model_forward_backward(model, &b, NULL));
  require_ok(par, gaaw_optimizer_step(opt));
  gaaw_step_stats_t st;
  gaaw_optimizer_stats(opt, &st);
  float *after = model_snapshot(model, 0, &n);
  expect_true(st.skipped == 1 && st.loss_scale == 5e29f, "rank %d: skipped %d, loss scale %g", world_rank,
              st.skipped, st.loss_scale);
  expect_true(memcmp(before, after, sizeof(float) * n) == 0, "a skipped step changed the parameters");
  free(before);
  free(after);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&par);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  gaaw_context_t serial = open_ctx(MPI_COMM_SELF, 1, 16 << 20);
  check_layout(serial, 1);
  check_layout(serial, 2);
  check_accumulation(serial, 0);
  check_accumulation(serial, 16 << 20);
  check_gradient_access(serial);
  check_memory_and_traffic(1, 0);
  check_memory_and_traffic(1, 16 << 20);
  if (world_size == 4) check_memory_and_traffic(2, 0);
  check_overflow();
  gaaw_finalize(&serial);
  int failures = test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total && !failures) return 1;
  return test_finish(world_size == 2 ? "test_zero_np2" : "test_zero_np4");
}
