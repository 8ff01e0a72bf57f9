/* gaaw_optimizer_create with each of its allocations failing in turn, in one process
 * (run by test_optimizer_faults.sh under tests/harness/fault_inject.c, whose controls
 * it finds through tests/harness/fault_util.h), for the stores of the optimizer's
 * state and of ZeRO 3's parameter shard: on the device, on host and on nvme. A
 * failed allocation must either leave the call's result as it is without the fault
 * (the step after it gives the same loss and the same parameters, bit for bit) or
 * make the call return GAAW_ERR_NO_MEMORY with a message and leave nothing behind:
 * no optimizer, no file in nvme_path, and, once every allocation has been failed,
 * not a byte more on the heap (under MPICH only, as test_estimate_faults). */
#include <malloc.h>
#include <mpi.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/fault_util.h"
#include "tests/harness/model_util.h"

enum { B = 2, T = 8, SEED = 7 };

typedef struct {
  float loss;
  float *params; /* after one step */
  long n;
} step_result;

/* A fresh model (*model, randomised) and the optimizer of oc on it: *opt, or NULL
 * and the status. A model is made anew each time: after its optimizer, a model
 * whose parameters or gradients were sharded can only be destroyed. */
static gaaw_status_t create(gaaw_context_t ctx, const gaaw_optimizer_config_t *oc, gaaw_model_t *model,
                            gaaw_optimizer_t *opt, fault_window_fn window)
{
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, model));
  model_randomise(*model, SEED);
  window(1);
  gaaw_status_t st = gaaw_optimizer_create(*model, oc, opt);
  window(0);
  return st;
}

/* One step after a successful create; the optimizer and the model destroyed. */
static step_result step_and_destroy(gaaw_context_t ctx, gaaw_model_t *model, gaaw_optimizer_t *opt)
{
  step_result r;
  model_train(ctx, *model, *opt, 1, B, T, model_tiny_gpt(T, GAAW_F32).vocab, 11, 0, &r.loss);
  r.params = model_snapshot(*model, 0, &r.n);
  gaaw_optimizer_destroy(opt);
  gaaw_model_destroy(model);
  return r;
}

/* Fails the create's allocations one by one under options; returns how many it made. */
static long fail_each(const char *what, const char *options, int stage, gaaw_optimizer_kind_t kind,
                      const char *nvme_dir, fault_set_fn set, fault_window_fn window)
{
  char list[512];
  snprintf(list, sizeof list, "backend=host zero_bucket_bytes=0 %s nvme_path=%s", options, nvme_dir);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, list);
  gaaw_model_t model = NULL;
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = stage;
  oc.kind = kind;
  gaaw_optimizer_t opt = NULL;
  set("");
  require_ok(ctx, create(ctx, &oc, &model, &opt, window));
  step_result clean = step_and_destroy(ctx, &model, &opt);
  /* a first failure, so that what the error path keeps for good (the message's
   * buffer) is there before the heap is read */
  set("alloc:1@libgaaw,alloc:1@/optimizer_faults");
  expect_status_ctx(ctx, create(ctx, &oc, &model, &opt, window), GAAW_ERR_NO_MEMORY);
  gaaw_model_destroy(&model);
  size_t in_use = mallinfo2().uordblks;
  long k = 1, failed = 0;
  for (;; k++) {
    char spec[128];
    snprintf(spec, sizeof spec, "alloc:%ld@libgaaw,alloc:%ld@/optimizer_faults", k, k);
    set(spec);
    gaaw_status_t st = create(ctx, &oc, &model, &opt, window);
    long uses = window(0);
    set("");
    if (uses < k) { /* the call made fewer than k allocations: each has failed once */
      require_ok(ctx, st);
      gaaw_optimizer_destroy(&opt);
      gaaw_model_destroy(&model);
      break;
    }
    if (st == GAAW_SUCCESS) {
      step_result r = step_and_destroy(ctx, &model, &opt);
      expect_true(r.loss == clean.loss && r.n == clean.n && !memcmp(r.params, clean.params, sizeof(float) * (size_t)r.n),
                  "%s, allocation %ld failed: the call succeeded, but the step after it gave loss %.9g and other "
                  "parameters (without the fault %.9g)", what, k, r.loss, clean.loss);
      free(r.params);
    } else {
      failed++;
      expect_true(st == GAAW_ERR_NO_MEMORY, "%s, allocation %ld failed: the call returned %s, not "
                  "GAAW_ERR_NO_MEMORY: %s", what, k, gaaw_status_string(st), gaaw_last_error(ctx));
      const char *why = gaaw_last_error(ctx);
      expect_true(why && *why, "%s, allocation %ld failed: the call says nothing", what, k);
      expect_true(opt == NULL, "%s, allocation %ld failed: an optimizer came back", what, k);
      gaaw_model_destroy(&model);
    }
    expect_true(test_dir_empty(nvme_dir), "%s, allocation %ld failed: files left in %s", what, k, nvme_dir);
  }
  expect_true(k > 10 && failed >= k / 2, "%s: %ld allocations, %ld of whose failures failed the call", what, k - 1,
              failed);
#ifdef MPICH_VERSION /* Open MPI's progress thread allocates meanwhile */
  expect_true(mallinfo2().uordblks == in_use, "%s: after %ld failed allocations the heap holds %lld bytes more", what,
              k - 1, (long long)mallinfo2().uordblks - (long long)in_use);
#endif
  printf("optimizer_faults: %s: %ld allocations failed in turn, %ld of them failing the call\n", what, k - 1, failed);
  free(clean.params);
  gaaw_finalize(&ctx);
  return k - 1;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  fault_set_fn set = fault_shim_set();
  fault_window_fn window = fault_shim_window();
  if (!set || !window) {
    printf("optimizer_faults: not under the fault shim: skipped\n");
    MPI_Finalize();
    return 77;
  }
  test_deadline(120, "the optimizer's creation under failing allocations");
  char dir[64];
  ckpt_test_dir(dir, sizeof dir, "optimizer_faults_");
  require_ok(NULL, dir[0] ? GAAW_SUCCESS : GAAW_ERR_IO);
  fail_each("the state on the device, ZeRO 2, AdamW", "", 2, GAAW_ADAMW, dir, set, window);
  fail_each("the state and the parameters on host, ZeRO 3, AdamW", "offload_optimizer=host offload_params=host", 3,
            GAAW_ADAMW, dir, set, window);
  fail_each("the state and the parameters on nvme, ZeRO 3, SGD", "offload_optimizer=nvme offload_params=nvme", 3,
            GAAW_SGD, dir, set, window);
  ckpt_test_dir_remove(dir);
  return test_finish_mpi("optimizer_faults");
}
