/* Optimizer offload (offload_optimizer=host: CPU Adam on host memory; nvme: the
 * state in a file per rank) on 2 ranks (built as test_offload_np2), against the
 * same run with the state on the device (the host backend), bit for bit:
 *  - AdamW, f32: ZeRO stages 0..3 at dp 2 and at dp 1 (each rank alone); bf16 at
 *    stage 2; SGD with momentum in bf16 at stage 3; tp 2; pp 2;
 *  - on host every cpu_simd version this CPU runs gives the same bits; nvme with
 *    the widest; the same run twice is bit-identical; nvme leaves no file;
 *  - at stage 3 the parameter shard on host or nvme too (offload_params, dp 1 and 2,
 *    bf16 SGD, tp 2): no parameter bytes on the device after a step;
 *  - the optimizer state leaves the device: its category holds nothing there;
 *  - checkpoints saved with the state on host or nvme load into a run with the
 *    state on the device or nvme, SGD's saved on the device loads on host and the
 *    other way round, and they go on identically;
 *  - ranks given different offload_optimizer values get the same named error;
 *    an unknown value is refused.
 * The nvme store's failures are tests/mpi/test_offload_faults.sh's. */
#include <mpi.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"
#include "zero/cpu_update.h"

enum { B = 2, T = 8, STEPS = 10 };
static int world_rank;

typedef struct {
  float *params;
  long n;
  size_t optimizer_bytes, params_bytes; /* on the device after the last step */
} result;

/* STEPS AdamW (or SGD) steps of the tiny GPT on comm under the options list. With
 * save_dir, the run saves after 5 steps; with load_dir it loads that first and
 * runs the remaining 5. */
static result train(MPI_Comm comm, const char *options, gaaw_dtype_t dtype, int stage, gaaw_optimizer_kind_t kind,
                    const char *save_dir, const char *load_dir)
{
  char list[256];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 zero_bucket_bytes=0 %s", options);
  gaaw_context_t ctx = test_context(comm, list);
  gaaw_gpt_config_t g = model_tiny_gpt(T, dtype);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  model_randomise(model, 4242);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.kind = kind;
  oc.zero_stage = stage;
  oc.lr = 3e-3f;
  oc.clip_norm = 1.0f;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int first = 0;
  if (load_dir) {
    require_ok(ctx, gaaw_checkpoint_load(opt, load_dir));
    first = 5;
  }
  float losses[STEPS];
  int rank, dp;
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &rank, &dp)); /* each dp rank its own batches */
  for (int s = first; s < STEPS; s++) {
    model_train(ctx, model, opt, 1, B, T, 40, 1000 + 97 * (uint64_t)s + (uint64_t)rank, 0, &losses[s]);
    if (save_dir && s == 4) require_ok(ctx, gaaw_checkpoint_save(opt, save_dir));
  }
  result r;
  r.params = model_snapshot(model, 0, &r.n);
  require_ok(ctx, gaaw_memory_usage(ctx, GAAW_MEM_OPTIMIZER, &r.optimizer_bytes, NULL));
  require_ok(ctx, gaaw_memory_usage(ctx, GAAW_MEM_PARAMS, &r.params_bytes, NULL));
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return r;
}

static void expect_same(const result *got, const result *want, const char *what)
{
  expect_true(got->n == want->n && memcmp(got->params, want->params, sizeof(float) * (size_t)got->n) == 0,
              "rank %d, %s: the parameters after %d steps differ from the run with the state on the device", world_rank,
              what, STEPS);
}

typedef struct {
  const char *name, *layout;
  int dp1; /* each rank alone */
  gaaw_dtype_t dtype;
  int stage;
  gaaw_optimizer_kind_t kind;
  const char *params; /* offload_params of the offloaded runs (stage 3); NULL: none */
} parity_case;

/* The case offloaded to store (host or nvme) with cpu_simd=version, against want. */
static void check_offloaded(const parity_case *p, MPI_Comm comm, const result *want, const char *store,
                            const char *version, const char *nvme_dir)
{
  char options[256], what[160];
  const char *params = p->params ? p->params : "none";
  snprintf(options, sizeof options, "%s offload_optimizer=%s offload_params=%s cpu_simd=%s nvme_path=%s", p->layout,
           store, params, version, nvme_dir);
  snprintf(what, sizeof what, "%s, offload_optimizer=%s, offload_params=%s, cpu_simd=%s", p->name, store, params,
           version);
  result got = train(comm, options, p->dtype, p->stage, p->kind, NULL, NULL);
  expect_same(&got, want, what);
  expect_true(got.optimizer_bytes == 0, "%s: %zu bytes of optimizer state still on the device", what,
              got.optimizer_bytes);
  if (p->params)
    expect_true(got.params_bytes == 0, "%s: %zu bytes of parameters still on the device after the step", what,
                got.params_bytes);
  /* at dp 1 the ranks train alone: neither may be creating its own (then unlinked)
   * files while the other looks */
  MPI_Barrier(MPI_COMM_WORLD);
  if (strcmp(store, "nvme") == 0 || p->params)
    expect_true(test_dir_empty(nvme_dir), "%s: files left in nvme_path %s after the optimizer's destroy", what,
                nvme_dir);
  MPI_Barrier(MPI_COMM_WORLD);
  free(got.params);
}

/* Every ZeRO stage at dp 1 and 2, bf16, SGD, tp 2 and pp 2: the state on host
 * (every cpu_simd version this CPU runs) and on nvme (the widest) gives the
 * parameters of the state on the device, bit for bit. */
static void check_parity(void)
{
  const parity_case cases[] = {
    {"dp 2, stage 0", "", 0, GAAW_F32, 0, GAAW_ADAMW},   {"dp 2, stage 1", "", 0, GAAW_F32, 1, GAAW_ADAMW},
    {"dp 2, stage 2", "", 0, GAAW_F32, 2, GAAW_ADAMW},   {"dp 2, stage 3", "", 0, GAAW_F32, 3, GAAW_ADAMW},
    {"dp 1, stage 0", "", 1, GAAW_F32, 0, GAAW_ADAMW},   {"dp 1, stage 1", "", 1, GAAW_F32, 1, GAAW_ADAMW},
    {"dp 1, stage 2", "", 1, GAAW_F32, 2, GAAW_ADAMW},   {"dp 1, stage 3", "", 1, GAAW_F32, 3, GAAW_ADAMW},
    {"dp 2, stage 2, bf16", "", 0, GAAW_BF16, 2, GAAW_ADAMW},
    {"dp 2, stage 3, bf16, SGD", "", 0, GAAW_BF16, 3, GAAW_SGD}, {"tp 2, stage 1", "tp=2", 0, GAAW_F32, 1, GAAW_ADAMW},
    {"pp 2, stage 1", "pp=2", 0, GAAW_F32, 1, GAAW_ADAMW},
    {"dp 2, stage 3, parameters on host", "", 0, GAAW_F32, 3, GAAW_ADAMW, "host"},
    {"dp 2, stage 3, parameters on nvme", "", 0, GAAW_F32, 3, GAAW_ADAMW, "nvme"},
    {"dp 1, stage 3, parameters on nvme", "", 1, GAAW_F32, 3, GAAW_ADAMW, "nvme"},
    {"dp 2, stage 3, bf16, SGD, parameters on nvme", "", 0, GAAW_BF16, 3, GAAW_SGD, "nvme"},
    {"tp 2, stage 3, parameters on host", "tp=2", 0, GAAW_F32, 3, GAAW_ADAMW, "host"},
  };
  char nvme_dir[64];
  ckpt_test_dir(nvme_dir, sizeof nvme_dir, "offload_nvme_");
  require_ok(NULL, nvme_dir[0] ? GAAW_SUCCESS : GAAW_ERR_IO);
  const char *widest = gaaw_cpu_simd_name((gaaw_cpu_simd)gaaw_cpu_simd_parse("auto"));
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const parity_case *p = &cases[c];
    MPI_Comm comm = p->dp1 ? MPI_COMM_SELF : MPI_COMM_WORLD;
    char device[96];
    snprintf(device, sizeof device, "%s offload_optimizer=none", p->layout);
    result want = train(comm, device, p->dtype, p->stage, p->kind, NULL, NULL);
    expect_true(want.optimizer_bytes > 0, "%s: no optimizer state on the device without offload", p->name);
    for (int simd = 0; simd < GAAW_CPU_SIMD_COUNT; simd++)
      if (gaaw_cpu_simd_runs((gaaw_cpu_simd)simd)) /* the same CPUs on both ranks here */
        check_offloaded(p, comm, &want, "host", gaaw_cpu_simd_name((gaaw_cpu_simd)simd), nvme_dir);
    check_offloaded(p, comm, &want, "nvme", widest, nvme_dir);
    free(want.params);
  }
  ckpt_test_dir_remove(nvme_dir);
}

/* The same offloaded run twice (host, nvme); checkpoints move between the stores:
 * saved offloaded, resumed on the device or on nvme, each goes on as the
 * uninterrupted run. */
static void check_repeat_and_checkpoint(void)
{
  char base[64], nvme_dir[64], nvme[128];
  ckpt_test_dir(base, sizeof base, "offload_ckpt_");
  ckpt_test_dir(nvme_dir, sizeof nvme_dir, "offload_nvme_");
  require_ok(NULL, base[0] && nvme_dir[0] ? GAAW_SUCCESS : GAAW_ERR_IO);
  snprintf(nvme, sizeof nvme, "offload_optimizer=nvme nvme_path=%s", nvme_dir);
  result once = train(MPI_COMM_WORLD, "offload_optimizer=host", GAAW_BF16, 2, GAAW_ADAMW, NULL, NULL);
  result twice = train(MPI_COMM_WORLD, "offload_optimizer=host", GAAW_BF16, 2, GAAW_ADAMW, NULL, NULL);
  result nvme_once = train(MPI_COMM_WORLD, nvme, GAAW_BF16, 2, GAAW_ADAMW, NULL, NULL);
  result nvme_twice = train(MPI_COMM_WORLD, nvme, GAAW_BF16, 2, GAAW_ADAMW, NULL, NULL);
  expect_same(&twice, &once, "the same offloaded run twice");
  expect_same(&nvme_once, &once, "offload_optimizer=nvme against host");
  expect_same(&nvme_twice, &nvme_once, "the same run on nvme twice");
  result saved = train(MPI_COMM_WORLD, "offload_optimizer=host", GAAW_BF16, 2, GAAW_ADAMW, base, NULL);
  result resumed = train(MPI_COMM_WORLD, "offload_optimizer=none", GAAW_BF16, 2, GAAW_ADAMW, NULL, base);
  result on_nvme = train(MPI_COMM_WORLD, nvme, GAAW_BF16, 2, GAAW_ADAMW, NULL, base);
  expect_same(&saved, &once, "offloaded, saving after 5 steps");
  expect_same(&resumed, &once, "saved offloaded after 5 steps, resumed on the device");
  expect_same(&on_nvme, &once, "saved offloaded after 5 steps, resumed on nvme");
  ckpt_test_dir_remove(base);
  ckpt_test_dir(base, sizeof base, "offload_ckpt_");
  result saved_nvme = train(MPI_COMM_WORLD, nvme, GAAW_BF16, 2, GAAW_ADAMW, base, NULL);
  result from_nvme = train(MPI_COMM_WORLD, "offload_optimizer=none", GAAW_BF16, 2, GAAW_ADAMW, NULL, base);
  expect_same(&saved_nvme, &once, "on nvme, saving after 5 steps");
  expect_same(&from_nvme, &once, "saved on nvme after 5 steps, resumed on the device");
  ckpt_test_dir_remove(base);
  /* SGD keeps one moment: saved from the device's store and resumed on host, and
   * the other way round */
  const char *sgd_stores[2][2] = {{"offload_optimizer=none", "offload_optimizer=host"},
                                  {"offload_optimizer=host", "offload_optimizer=none"}};
  result sgd = train(MPI_COMM_WORLD, "offload_optimizer=host", GAAW_BF16, 2, GAAW_SGD, NULL, NULL), sgd_runs[4];
  for (int k = 0; k < 2; k++) {
    ckpt_test_dir(base, sizeof base, "offload_ckpt_");
    sgd_runs[2 * k] = train(MPI_COMM_WORLD, sgd_stores[k][0], GAAW_BF16, 2, GAAW_SGD, base, NULL);
    sgd_runs[2 * k + 1] = train(MPI_COMM_WORLD, sgd_stores[k][1], GAAW_BF16, 2, GAAW_SGD, NULL, base);
    char what[128];
    snprintf(what, sizeof what, "SGD saved after 5 steps (%s), resumed (%s)", sgd_stores[k][0], sgd_stores[k][1]);
    expect_same(&sgd_runs[2 * k], &sgd, what);
    expect_same(&sgd_runs[2 * k + 1], &sgd, what);
    ckpt_test_dir_remove(base);
  }
  ckpt_test_dir_remove(nvme_dir);
  result *all[] = {&once,       &twice,      &nvme_once, &nvme_twice,  &saved,      &resumed,    &on_nvme,
                   &saved_nvme, &from_nvme,  &sgd,       &sgd_runs[0], &sgd_runs[1], &sgd_runs[2], &sgd_runs[3]};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->params);
}

/* Rank 0 offloads, rank 1 does not: both get the agreement's error. */
static void check_mismatch(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, world_rank == 0 ? "backend=host offload_optimizer=host"
                                                                    : "backend=host offload_optimizer=none");
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  gaaw_optimizer_t opt = NULL;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
  expect_true(opt == NULL && strstr(gaaw_last_error(ctx), "offload_optimizer") != NULL,
              "rank %d: a different offload_optimizer on each rank: %s", world_rank, gaaw_last_error(ctx));
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  /* the parameters leave the device only at stage 3, with the optimizer's state */
  const struct {
    const char *options;
    int stage;
  } refused[] = {{"offload_optimizer=host offload_params=host", 2}, {"offload_optimizer=none offload_params=host", 3}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char list[128];
    snprintf(list, sizeof list, "backend=host %s", refused[i].options);
    ctx = test_context(MPI_COMM_WORLD, list);
    require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
    oc.zero_stage = refused[i].stage;
    expect_status_ctx(ctx, gaaw_optimizer_create(model, &oc, &opt), GAAW_ERR_INVALID_ARG);
    expect_true(opt == NULL && strstr(gaaw_last_error(ctx), "needs ZeRO stage 3") != NULL,
                "rank %d: %s at stage %d: %s", world_rank, refused[i].options, refused[i].stage, gaaw_last_error(ctx));
    gaaw_model_destroy(&model);
    gaaw_finalize(&ctx);
  }
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_parse(cfg, "offload_optimizer=disk"));
  expect_status(gaaw_config_check(cfg), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "offload_optimizer must be none, host or nvme") != NULL, "%s",
              gaaw_last_error(NULL));
  require_ok(NULL, gaaw_config_parse(cfg, "offload_optimizer=host offload_params=disk"));
  expect_status(gaaw_config_check(cfg), GAAW_ERR_INVALID_ARG);
  require_ok(NULL, gaaw_config_parse(cfg, "offload_params=none offload_optimizer=host cpu_simd=sse9"));
  expect_status(gaaw_config_check(cfg), GAAW_ERR_INVALID_ARG);
  gaaw_config_destroy(&cfg);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  check_parity();
  check_repeat_and_checkpoint();
  check_mismatch();
  return test_finish_mpi("test_offload");
}
