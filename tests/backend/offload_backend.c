/* Training a model larger than the device on OFFLOAD_BACKEND, 2 ranks (dp 2,
 * built as offload_opencl_np2): a bf16 GPT whose model states (2-byte parameters
 * and gradients, f32 master weights and Adam moments: 16 bytes per parameter) are
 * 4x the device_memory_limit of each rank:
 *  - without offload, ZeRO 3 cannot hold it: gaaw_optimizer_create fails on both
 *    ranks with GAAW_ERR_NO_MEMORY naming the cap, and nothing trains;
 *  - with offload_optimizer=nvme and offload_params=nvme it trains: its losses
 *    follow the uncapped run with the state on the device (within bf16's
 *    rounding: CPU Adam and the device's kernel round the 2-byte weights
 *    separately), and the device's peak (gaaw_memory_total) stays under the cap;
 *  - gaaw_memory_estimate for that run, made before it, is within 2% of the peak.
 * Skips (77) when the backend is not built or finds no device. */
#include <mpi.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"

enum { B = 2, T = 16, STEPS = 3 };
static int world_rank;

static gaaw_gpt_config_t model_config(void)
{
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_BF16);
  g.vocab = 64;
  g.layers = 8;
  g.dim = 64;
  return g;
}

static gaaw_optimizer_config_t optimizer_config(void)
{
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 3;
  oc.lr = 3e-3f;
  return oc;
}

/* A context on the backend with these options too. */
static gaaw_context_t context(const char *options)
{
  char list[512];
  snprintf(list, sizeof list, "backend=%s comm_timeout=120 zero_bucket_bytes=0 %s", OFFLOAD_BACKEND, options);
  return test_context(MPI_COMM_WORLD, list);
}

/* STEPS steps under options; the losses, the parameter count and the device's peak.
 * Returns the status of gaaw_optimizer_create (training only after success). */
static gaaw_status_t train(const char *options, float *losses, long *params, size_t *peak, char *message, size_t len)
{
  gaaw_context_t ctx = context(options);
  gaaw_gpt_config_t g = model_config();
  gaaw_optimizer_config_t oc = optimizer_config();
  gaaw_model_t model;
  gaaw_optimizer_t opt = NULL;
  require_ok(ctx, gaaw_memory_reset_peak(ctx));
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_status_t st = gaaw_optimizer_create(model, &oc, &opt);
  snprintf(message, len, "%s", gaaw_last_error(ctx));
  if (st == GAAW_SUCCESS) {
    model_train(ctx, model, opt, STEPS, B, T, g.vocab, 4242 + (uint64_t)world_rank, 31, losses);
    float *p = model_snapshot(model, 0, params);
    free(p);
  }
  require_ok(ctx, gaaw_memory_total(ctx, NULL, peak));
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return st;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  if (!test_backend_usable(OFFLOAD_BACKEND)) {
    printf("offload_%s: backend %s is not built or finds no device; skipping\n", OFFLOAD_BACKEND, OFFLOAD_BACKEND);
    MPI_Finalize();
    return TEST_SKIP;
  }
  char nvme_dir[64], message[2048], options[512];
  ckpt_test_dir(nvme_dir, sizeof nvme_dir, "offload_backend_");
  require_ok(NULL, nvme_dir[0] ? GAAW_SUCCESS : GAAW_ERR_IO);

  float want[STEPS], got[STEPS];
  long psi = 0, n = 0;
  size_t free_peak, peak;
  require_ok(NULL, train("", want, &psi, &free_peak, message, sizeof message));
  size_t states = 16 * (size_t)psi, cap = states / 4;

  snprintf(options, sizeof options, "device_memory_limit=%zu", cap);
  gaaw_status_t st = train(options, got, &n, &peak, message, sizeof message);
  expect_true(st == GAAW_ERR_NO_MEMORY && strstr(message, "device_memory_limit") != NULL,
              "rank %d: ZeRO 3 without offload under a cap of %zu bytes (model states %zu): %s, %s", world_rank, cap,
              states, gaaw_status_string(st), message);

  snprintf(options, sizeof options,
           "device_memory_limit=%zu offload_optimizer=nvme offload_params=nvme nvme_path=%s", cap, nvme_dir);
  /* the estimate of that run first, from its options alone */
  gaaw_context_t ctx = context(options);
  gaaw_gpt_config_t g = model_config();
  gaaw_optimizer_config_t oc = optimizer_config();
  gaaw_estimate_options_t eo;
  gaaw_estimate_options_default(&eo);
  eo.batch = B;
  eo.seq = T;
  eo.rank = world_rank;
  gaaw_memory_estimate_t est;
  require_ok(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, &est));
  gaaw_finalize(&ctx);
  st = train(options, got, &n, &peak, message, sizeof message);
  expect_true(st == GAAW_SUCCESS, "rank %d: with offload_optimizer=nvme offload_params=nvme under a cap of %zu: %s",
              world_rank, cap, message);
  if (st == GAAW_SUCCESS) {
    for (int s = 0; s < STEPS; s++)
      expect_true(fabsf(got[s] - want[s]) <= 2e-2f * fabsf(want[s]), "rank %d: step %d loss %.5f, without offload %.5f",
                  world_rank, s, got[s], want[s]);
    expect_true(peak <= cap, "rank %d: device peak %zu bytes over the cap %zu", world_rank, peak, cap);
    double est_total = (double)est.total[GAAW_SPACE_DEVICE];
    expect_true(fabs(est_total - (double)peak) <= 0.02 * (double)peak,
                "rank %d: estimated device peak %.0f, measured %zu", world_rank, est_total, peak);
    if (world_rank == 0)
      printf("%s: %ld parameters, model states %zu bytes = %.2fx the cap %zu; device peak %zu without a cap and "
             "offload, %zu with nvme offload (estimated %.0f); host %llu, nvme %llu bytes (estimated)\n",
             OFFLOAD_BACKEND, psi, states, (double)states / (double)cap, cap, free_peak, peak, est_total,
             (unsigned long long)est.total[GAAW_SPACE_HOST], (unsigned long long)est.total[GAAW_SPACE_NVME]);
  }
  ckpt_test_dir_remove(nvme_dir);
  return test_finish_mpi("offload_" OFFLOAD_BACKEND);
}
