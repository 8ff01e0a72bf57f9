/* The memory estimate with each of its allocations failing in turn, in one process
 * (run by test_estimate_faults.sh under tests/harness/fault_inject.c, whose
 * gaaw_fault_set and gaaw_fault_window it finds with dlsym). A planner asks the
 * estimate about every layout it weighs, so a failure must not pass for an answer
 * nor cost memory: each call either gives the answer of the call without a fault,
 * byte for byte, or GAAW_ERR_NO_MEMORY with a message, and once every allocation has
 * been failed the heap holds what it held before (read with mallinfo2, which counts
 * the chunks glibc's thread cache keeps as in use: the script turns that cache off;
 * under MPICH only, as test_memory_estimate's heap check).
 * The layout is tp 2 x pp 2 x dp 2 (8 devices, estimated from this one process, every
 * rank's walk through 1F1B) at ZeRO 3 with the state offloaded to host. */
#include <malloc.h>
#include <mpi.h>

#include "gaaw/estimate.h"
#include "tests/harness/fault_util.h"
#include "tests/harness/model_util.h"


static gaaw_status_t estimate(gaaw_context_t ctx, gaaw_config_t layout, gaaw_memory_estimate_t *out)
{
  gaaw_gpt_config_t g = model_tiny_gpt(8, GAAW_F32);
  g.layers = 4;
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 3;
  gaaw_estimate_options_t eo;
  gaaw_estimate_options_default(&eo);
  eo.seq = 8;
  return gaaw_memory_estimate(ctx, &g, layout, &oc, &eo, out);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  fault_set_fn fault_set = fault_shim_set();
  fault_window_fn fault_window = fault_shim_window();
  if (!fault_set || !fault_window) {
    printf("estimate_faults: not under the fault shim: skipped\n");
    MPI_Finalize();
    return 77;
  }
  test_deadline(60, "the estimate under failing allocations");
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  gaaw_config_t layout;
  require_ok(NULL, gaaw_config_create(&layout));
  require_ok(NULL, gaaw_config_parse(layout, "tp=2 pp=2 dp=2 microbatches=2 pp_schedule=1f1b "
                                             "offload_optimizer=host offload_params=host"));
  gaaw_memory_estimate_t clean, got;
  require_ok(ctx, estimate(ctx, layout, &clean));
  /* a first failure, so that what the error path keeps for good (the message's
   * buffer) is there before the heap is read */
  fault_set("alloc:1@libgaaw,alloc:1@/estimate_faults");
  fault_window(1);
  expect_status_ctx(ctx, estimate(ctx, layout, &got), GAAW_ERR_NO_MEMORY);
  fault_window(0);
  size_t in_use = mallinfo2().uordblks;
  long k = 1, failed = 0;
  for (;; k++) {
    char spec[128];
    snprintf(spec, sizeof spec, "alloc:%ld@libgaaw,alloc:%ld@/estimate_faults", k, k);
    fault_set(spec);
    fault_window(1);
    gaaw_status_t st = estimate(ctx, layout, &got);
    long uses = fault_window(0);
    if (uses < k) { /* the call made fewer than k allocations: each has failed once */
      require_ok(ctx, st);
      break;
    }
    if (st == GAAW_SUCCESS) {
      expect_true(memcmp(&got, &clean, sizeof got) == 0, "allocation %ld failed: the call succeeded with "
                  "another answer (%llu device bytes, without the fault %llu)", k,
                  (unsigned long long)got.total[GAAW_SPACE_DEVICE], (unsigned long long)clean.total[GAAW_SPACE_DEVICE]);
    } else {
      failed++;
      expect_true(st == GAAW_ERR_NO_MEMORY, "allocation %ld failed: the call returned %s, not "
                  "GAAW_ERR_NO_MEMORY: %s", k, gaaw_status_string(st), gaaw_last_error(ctx));
      const char *why = gaaw_last_error(ctx);
      expect_true(why && *why, "allocation %ld failed: the call says nothing", k);
    }
  }
  fault_set("");
  expect_true(k > 10 && failed >= k / 2, "%ld allocations, %ld of whose failures failed the call", k - 1, failed);
#ifdef MPICH_VERSION /* Open MPI's progress thread allocates meanwhile */
  expect_true(mallinfo2().uordblks == in_use, "after %ld failed allocations the heap holds %lld bytes more",
              k - 1, (long long)mallinfo2().uordblks - (long long)in_use);
#endif
  printf("estimate_faults: %ld allocations failed in turn, %ld of them failing the call\n", k - 1, failed);
  gaaw_config_destroy(&layout);
  gaaw_finalize(&ctx);
  return test_finish_mpi("estimate_faults");
}
