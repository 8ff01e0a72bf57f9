/* Checkpoints across device backends, on one rank (built as checkpoint_opencl,
 * checkpoint_cuda): a host run's checkpoint (GPT, ZeRO 3, 3 AdamW steps) loads on
 * CHECKPOINT_BACKEND at ZeRO 0, and the state that backend saves again is bitwise
 * the host's (values and both moments of every tensor); the host loads that one
 * back, bitwise again; and the next 3 losses on the device are within 1e-4 of the
 * host's (the backends' kernels round differently, as in train_backend.c).
 * Skips (77) when the backend is not built or finds no device. */
#include <mpi.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"

enum { B = 2, T = 8, WARM = 3, AFTER = 3 };

typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
} run;

static run open_run(gaaw_context_t ctx, int stage)
{
  run r = {ctx, NULL, NULL};
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = stage;
  oc.lr = 3e-3f;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &r.model));
  require_ok(ctx, gaaw_optimizer_create(r.model, &oc, &r.opt));
  return r;
}

static void close_run(run *r)
{
  require_ok(r->ctx, gaaw_optimizer_destroy(&r->opt));
  require_ok(r->ctx, gaaw_model_destroy(&r->model));
}

/* The states of two step directories, bitwise. */
static void expect_same(const char *a, const char *b, const char *what)
{
  ckpt_dense x, y;
  int ok = ckpt_dense_read(a, &x);
  if (ok && ckpt_dense_read(b, &y)) {
    expect_same_state(&x, &y, 3, what);
    ckpt_dense_free(&y);
  } else {
    expect_true(0, "%s: a checkpoint cannot be read back", what);
  }
  if (ok) ckpt_dense_free(&x);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  const char *backend = CHECKPOINT_BACKEND;
  if (!test_backend_usable(backend)) {
    printf("checkpoint_%s: backend %s is not built or finds no device; skipping\n", backend, backend);
    MPI_Finalize();
    return TEST_SKIP;
  }
  char base[64] = "ckpt-backend-XXXXXX", host_dir[128], dev_dir[128], back_dir[128], a[160], b[160], c[160];
  if (!mkdtemp(base)) return 1;
  snprintf(host_dir, sizeof host_dir, "%s/host", base);
  snprintf(dev_dir, sizeof dev_dir, "%s/%s", base, backend);
  snprintf(back_dir, sizeof back_dir, "%s/back", base);
  snprintf(a, sizeof a, "%s/step-%08d", host_dir, WARM);
  snprintf(b, sizeof b, "%s/step-%08d", dev_dir, WARM);
  snprintf(c, sizeof c, "%s/step-%08d", back_dir, WARM);
  gaaw_context_t host = test_context(MPI_COMM_WORLD, "backend=host zero_bucket_bytes=0");
  gaaw_context_t dev = test_context(MPI_COMM_WORLD, "backend=" CHECKPOINT_BACKEND " zero_bucket_bytes=0");
  float want[WARM + AFTER], got[AFTER];
  run h = open_run(host, 3);
  model_train(host, h.model, h.opt, WARM, B, T, 40, 4242, 31, want);
  require_ok(host, gaaw_checkpoint_save(h.opt, host_dir));
  model_train(host, h.model, h.opt, AFTER, B, T, 40, 4242 + 31 * WARM, 31, want + WARM);
  close_run(&h);

  run d = open_run(dev, 0);
  expect_status_ctx(dev, gaaw_checkpoint_load(d.opt, host_dir), GAAW_SUCCESS);
  expect_status_ctx(dev, gaaw_checkpoint_save(d.opt, dev_dir), GAAW_SUCCESS);
  expect_same(a, b, "host into " CHECKPOINT_BACKEND);
  model_train(dev, d.model, d.opt, AFTER, B, T, 40, 4242 + 31 * WARM, 31, got);
  for (int i = 0; i < AFTER; i++)
    expect_true(fabsf(got[i] - want[WARM + i]) <= 1e-4f * fabsf(want[WARM + i]),
                "loss %d on %s is %.9g, on the host %.9g", WARM + i, backend, got[i], want[WARM + i]);
  close_run(&d);

  h = open_run(host, 1);
  expect_status_ctx(host, gaaw_checkpoint_load(h.opt, dev_dir), GAAW_SUCCESS);
  expect_status_ctx(host, gaaw_checkpoint_save(h.opt, back_dir), GAAW_SUCCESS);
  expect_same(a, c, CHECKPOINT_BACKEND " back into host");
  close_run(&h);
  gaaw_finalize(&dev);
  gaaw_finalize(&host);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (!test_failures && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", base);
  return test_finish_mpi("checkpoint_" CHECKPOINT_BACKEND);
}
