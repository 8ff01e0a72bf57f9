/* Training on a device backend against the host reference, on one rank: a GPT
 * (2 layers, dim 16, f32, tied head) trained 5 AdamW steps with ZeRO stages 0 and 3
 * (one bucket per layer) on TRAIN_BACKEND ends with every parameter within 1e-4 of
 * its own largest |value| in the host run, the key biases (whose exact gradient is
 * zero) only staying small (model_util.h); as in test_zero, the backends' GEMMs and
 * reductions round differently, and Adam magnifies differences of tiny gradients;
 * its losses within 1e-4 of the host's, and the same run twice is bit-identical.
 * Stage 3 on one rank still gathers every layer through the dp communicator (of
 * size 1), one layer ahead: on CUDA that communicator is NCCL's, so the
 * non-blocking start and wait run on the device's communication stream.
 * Skips (77) when the backend is not built or finds no device. Built once per
 * device backend (train_opencl, train_cuda). */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 2, T = 8, STEPS = 5 };

typedef struct {
  float *params;
  long n;
  model_layout layout; /* of params */
  float losses[STEPS];
  int gathers_ahead;
} run_result;

static run_result train(gaaw_context_t ctx, int stage)
{
  run_result r = {0};
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = stage;
  oc.lr = 3e-3f;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  model_train(ctx, model, opt, STEPS, B, T, g.vocab, 4242, 31, r.losses);
  gaaw_step_stats_t st;
  require_ok(ctx, gaaw_optimizer_stats(opt, &st));
  r.gathers_ahead = st.gathers_ahead;
  r.params = model_snapshot(model, 0, &r.n);
  r.layout = model_layout_of(model);
  require_ok(ctx, gaaw_optimizer_destroy(&opt));
  require_ok(ctx, gaaw_model_destroy(&model));
  return r;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  const char *backend = TRAIN_BACKEND;
  if (!test_backend_usable(backend)) {
    printf("train_%s: backend %s is not built or finds no device; skipping\n", backend, backend);
    MPI_Finalize();
    return TEST_SKIP;
  }
  gaaw_context_t host = test_context(MPI_COMM_WORLD, "backend=host zero_bucket_bytes=0");
  gaaw_context_t dev = test_context(MPI_COMM_WORLD, "backend=" TRAIN_BACKEND " zero_bucket_bytes=0");
  for (int stage = 0; stage <= 3; stage += 3) {
    run_result want = train(host, stage), got = train(dev, stage), again = train(dev, stage);
    char what[96];
    snprintf(what, sizeof what, "%s, ZeRO %d: parameters after %d AdamW steps vs host", backend, stage, STEPS);
    expect_true(got.n == want.n, "%s: %ld values, host %ld", what, got.n, want.n);
    if (got.n == want.n) {
      float *set_aside = model_set_aside_key_bias(&want.layout, model_tiny_gpt(T, GAAW_F32).dim, got.params,
                                                  want.params, STEPS * 3e-3, what);
      expect_close_layout(&want.layout, set_aside, want.params, 1e-4, what);
      free(set_aside);
    }
    for (int s = 0; s < STEPS; s++)
      expect_true(fabsf(got.losses[s] - want.losses[s]) < 1e-4f, "%s, ZeRO %d: step %d loss %.7f, host %.7f", backend,
                  stage, s, got.losses[s], want.losses[s]);
    expect_true(memcmp(got.params, again.params, sizeof(float) * (size_t)got.n) == 0,
                "%s, ZeRO %d: the same run twice differs", backend, stage);
    expect_true(got.gathers_ahead == want.gathers_ahead && (stage < 3 || got.gathers_ahead > 0),
                "%s, ZeRO %d: %d gathers ahead in the last step, host %d", backend, stage, got.gathers_ahead,
                want.gathers_ahead);
    free(want.params);
    free(got.params);
    free(again.params);
    model_layout_free(&want.layout);
    model_layout_free(&got.layout);
    model_layout_free(&again.layout);
  }
  require_ok(dev, gaaw_finalize(&dev));
  require_ok(host, gaaw_finalize(&host));
  char name[32];
  snprintf(name, sizeof name, "train_%s", backend);
  int code = test_finish(name);
  MPI_Finalize();
  return code;
}
