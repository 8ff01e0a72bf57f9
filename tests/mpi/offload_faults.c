/* The nvme store's failures on 2 ranks (run by test_offload_faults.sh): whatever
 * rank 1's nvme_path does wrong, every rank gets the same named error at once,
 * nothing hangs (comm_timeout 30 s), and a failed gaaw_optimizer_create leaves
 * the parameters as they were:
 *  - nvme without nvme_path: GAAW_ERR_INVALID_ARG naming the option;
 *  - a missing directory, a read-only one (argv[1]), a size limit (RLIMIT_FSIZE)
 *    and a full filesystem (argv[2]): GAAW_ERR_IO naming the file;
 *  - each write of a step failing in turn (under the fault shim): GAAW_ERR_IO from
 *    the step on every rank, not a wait in the all-gather;
 *  - afterwards a good nvme_path trains, and leaves no file behind.
 * argv[1], argv[2]: a read-only directory and one on a tiny filesystem, or "-"
 * where the script could not make one (that case is then skipped, and said). */
#include <mpi.h>
#include <signal.h>
#include <sys/resource.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/fault_util.h"
#include "tests/harness/model_util.h"

enum { B = 2, T = 8 };
static int world_rank;

typedef enum { NO_HOOK, FILE_SIZE_LIMIT } create_hook;

/* Rank 0 gets options0, rank 1 options1; gaaw_optimizer_create (ZeRO 1, AdamW)
 * must fail on both with want and a message containing needle, the parameters
 * untouched. */
static void expect_create_fails(const char *what, const char *options0, const char *options1, create_hook hook,
                                gaaw_status_t want, const char *needle)
{
  char list[512];
  snprintf(list, sizeof list, "backend=host comm_timeout=30 zero_bucket_bytes=0 offload_optimizer=nvme %s",
           world_rank == 1 ? options1 : options0);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, list);
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  gaaw_optimizer_t opt = NULL;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  model_randomise(model, 77);
  long n_before, n_after;
  float *before = model_snapshot(model, 0, &n_before);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  struct rlimit old;
  getrlimit(RLIMIT_FSIZE, &old);
  if (hook == FILE_SIZE_LIMIT && world_rank == 1) {
    struct rlimit small = {4096, old.rlim_max};
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit then fails with EFBIG instead of killing */
    setrlimit(RLIMIT_FSIZE, &small);
  }
  gaaw_status_t st = gaaw_optimizer_create(model, &oc, &opt);
  setrlimit(RLIMIT_FSIZE, &old);
  expect_true(st == want && opt == NULL, "rank %d, %s: gaaw_optimizer_create gave %s, expected %s", world_rank, what,
              gaaw_status_string(st), gaaw_status_string(want));
  expect_true(strstr(gaaw_last_error(ctx), needle) != NULL, "rank %d, %s: the message does not name '%s': %s",
              world_rank, what, needle, gaaw_last_error(ctx));
  if (world_rank == 0) printf("ok: %s: %.*s\n", what, (int)strcspn(gaaw_last_error(ctx), "\n"), gaaw_last_error(ctx));
  float *after = model_snapshot(model, 0, &n_after);
  expect_true(n_after == n_before && memcmp(after, before, sizeof(float) * (size_t)n_before) == 0,
              "rank %d, %s: the parameters changed", world_rank, what);
  free(before), free(after);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

/* A model and its nvme optimizer (ZeRO 2) after two good steps; on rank 1 the
 * optimizer's file is written with pwrite (the shim refuses io_uring), so that a
 * failed write is reported by the wait for it, as an asynchronous one is. */
static void trained(gaaw_context_t ctx, gaaw_model_t *model, gaaw_optimizer_t *opt, fault_set_fn set,
                    fault_window_fn window)
{
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 2;
  if (world_rank == 1) set("io_uring_queue_init:1+=ENOSYS"), window(1);
  require_ok(ctx, gaaw_optimizer_create(*model, &oc, opt));
  if (world_rank == 1) window(0), set("");
  float loss[2];
  model_train(ctx, *model, *opt, 2, B, T, g.vocab, 11 + (uint64_t)world_rank, 1, loss);
  expect_true(isfinite(loss[1]), "rank %d: a good step on nvme gave loss %g", world_rank, loss[1]);
}

/* The third step with rank 1's k-th write failing (k = 0: none); returns its status
 * and, through *writes, how many writes rank 1 made in it. */
static gaaw_status_t failing_step(gaaw_context_t ctx, gaaw_model_t model, gaaw_optimizer_t opt, long k, long *writes,
                                  fault_set_fn set, fault_window_fn window)
{
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, model_tiny_gpt(T, GAAW_F32).vocab, 99, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  float l;
  require_ok(ctx, gaaw_model_forward_backward(model, &batch, &l));
  char spec[64];
  snprintf(spec, sizeof spec, "pwrite:%ld@gaaw-optimizer", k ? k : 1000000);
  if (world_rank == 1) set(spec), window(1);
  gaaw_status_t st = gaaw_optimizer_step(opt);
  long uses = world_rank == 1 ? window(0) : 0;
  if (world_rank == 1) set("");
  MPI_Bcast(&uses, 1, MPI_LONG, 1, MPI_COMM_WORLD);
  *writes = uses;
  return st;
}

/* Each write of rank 1's third step failing in turn, the last included (only the
 * step's final wait sees that one): GAAW_ERR_IO from the step on every rank, naming
 * the write, not a wait in the all-gather. Then a fresh optimizer on the same
 * nvme_path trains, and no file is left. Needs the fault shim. */
static void check_failing_step(const char *dir)
{
  fault_set_fn set = fault_shim_set();
  fault_window_fn window = fault_shim_window();
  if (!set || !window) {
    if (world_rank == 0) printf("skipped: a write failing during a step (not under the fault shim)\n");
    return;
  }
  char list[256];
  snprintf(list, sizeof list, "backend=host comm_timeout=30 zero_bucket_bytes=0 offload_optimizer=nvme nvme_path=%s",
           dir);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, list);
  gaaw_model_t model = NULL;
  gaaw_optimizer_t opt = NULL;
  long writes = 0, n = 0;
  trained(ctx, &model, &opt, set, window);
  require_ok(ctx, failing_step(ctx, model, opt, 0, &writes, set, window));
  expect_true(writes >= 2, "a step wrote %ld records on rank 1", writes);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  for (long k = 1; k <= writes; k++) {
    trained(ctx, &model, &opt, set, window);
    gaaw_status_t st = failing_step(ctx, model, opt, k, &n, set, window);
    expect_true(st == GAAW_ERR_IO, "rank %d: a step whose write %ld of %ld fails on rank 1 gave %s, expected "
                "GAAW_ERR_IO", world_rank, k, writes, gaaw_status_string(st));
    expect_true(strstr(gaaw_last_error(ctx), "write of") != NULL && strstr(gaaw_last_error(ctx), "offset") != NULL,
                "rank %d: write %ld: the failed step's message names neither the write nor its offset: %s",
                world_rank, k, gaaw_last_error(ctx));
    gaaw_optimizer_destroy(&opt);
    gaaw_model_destroy(&model);
  }
  if (world_rank == 0)
    printf("ok: each of a step's %ld writes failing on rank 1: %.*s\n", writes,
           (int)strcspn(gaaw_last_error(ctx), "\n"), gaaw_last_error(ctx));
  trained(ctx, &model, &opt, set, window); /* the same directory, anew */
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  expect_true(test_dir_empty(dir), "rank %d: files left in %s", world_rank, dir);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const char *read_only = argc > 1 ? argv[1] : "-", *tiny = argc > 2 ? argv[2] : "-";
  char good[64], missing[128], opts[256], bad[256];
  ckpt_test_dir(good, sizeof good, "offload_faults_");
  require_ok(NULL, good[0] ? GAAW_SUCCESS : GAAW_ERR_IO);
  snprintf(opts, sizeof opts, "nvme_path=%s", good);

  expect_create_fails("no nvme_path on rank 1", opts, "", NO_HOOK, GAAW_ERR_INVALID_ARG, "nvme_path");
  snprintf(missing, sizeof missing, "%s/not-there", good);
  snprintf(bad, sizeof bad, "nvme_path=%s", missing);
  expect_create_fails("a missing nvme_path on rank 1", opts, bad, NO_HOOK, GAAW_ERR_IO, missing);
  if (strcmp(read_only, "-") != 0) {
    snprintf(bad, sizeof bad, "nvme_path=%s", read_only);
    expect_create_fails("a read-only nvme_path on rank 1", opts, bad, NO_HOOK, GAAW_ERR_IO, read_only);
  } else if (world_rank == 0)
    printf("skipped: a read-only nvme_path (no read-only directory could be made)\n");
  expect_create_fails("a file size limit on rank 1", opts, opts, FILE_SIZE_LIMIT, GAAW_ERR_IO, "cannot reserve");
  if (strcmp(tiny, "-") != 0) {
    snprintf(bad, sizeof bad, "nvme_path=%s", tiny);
    expect_create_fails("a full nvme_path on rank 1", opts, bad, NO_HOOK, GAAW_ERR_IO, "No space left");
  } else if (world_rank == 0)
    printf("skipped: a full nvme_path (no small filesystem could be mounted)\n");
  check_failing_step(good);
  expect_true(test_dir_empty(good), "rank %d: files left in %s", world_rank, good);
  ckpt_test_dir_remove(good);
  return test_finish_mpi("offload_faults");
}
