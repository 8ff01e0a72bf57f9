/* Choosing the CUDA backend: without a GPU (or driver) it reports 0 devices, not an
 * error, so backend=auto falls back to host and backend=cuda fails with
 * GAAW_ERR_UNSUPPORTED; with GPUs, auto picks cuda, a device index past the count
 * is GAAW_ERR_INVALID_ARG, and memory written to a CUDA buffer reads back intact.
 * Runs (never skips) on machines with and without GPUs. */
#include <mpi.h>
#include <string.h>

#include "backends/device.h"
#include "tests/harness/test_util.h"

static gaaw_status_t init_with(const char *backend, const char *device, gaaw_context_t *ctx)
{
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", backend));
  if (device) require_ok(NULL, gaaw_config_set(cfg, "device", device));
  gaaw_status_t st = gaaw_init(MPI_COMM_WORLD, cfg, ctx);
  gaaw_config_destroy(&cfg);
  return st;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  const gaaw_device_ops *cuda = gaaw_device_backend("cuda");
  expect_true(cuda != NULL, "the cuda backend is not registered in a build with CUDA");
  if (!cuda) {
    MPI_Finalize();
    return test_finish("test_cuda_device");
  }
  int devices = -1;
  expect_status(cuda->device_count(&devices), GAAW_SUCCESS);
  expect_true(devices >= 0, "device_count gave %d", devices);

  /* The backends in auto-selection order: cuda first. */
  int n = 0;
  const gaaw_device_ops *const *all = gaaw_device_backends(&n);
  expect_true(n >= 2 && strcmp(all[0]->name, "cuda") == 0, "cuda is not first of %d backends (first: %s)", n,
              n ? all[0]->name : "none");

  gaaw_context_t ctx = NULL;
  const char *name = NULL;
  expect_status(init_with("auto", NULL, &ctx), GAAW_SUCCESS);
  if (ctx) {
    expect_status_ctx(ctx, gaaw_backend_name(ctx, &name), GAAW_SUCCESS);
    const char *want = devices > 0 ? "cuda" : "host";
    expect_true(name && strcmp(name, want) == 0, "backend=auto chose %s with %d CUDA devices; expected %s",
                name ? name : "(null)", devices, want);
    require_ok(ctx, gaaw_finalize(&ctx));
  }

  if (devices == 0) {
    /* Asked for explicitly, a backend without devices is an error that says so. */
    expect_status(init_with("cuda", NULL, &ctx), GAAW_ERR_UNSUPPORTED);
    expect_true(ctx == NULL, "a failed gaaw_init left a context");
    expect_true(strstr(gaaw_last_error(NULL), "no device") != NULL, "unexpected message: %s", gaaw_last_error(NULL));
  } else {
    char past[16];
    snprintf(past, sizeof past, "%d", devices);
    expect_status(init_with("cuda", past, &ctx), GAAW_ERR_INVALID_ARG);
    expect_true(strstr(gaaw_last_error(NULL), "does not exist") != NULL, "unexpected message: %s",
                gaaw_last_error(NULL));
    /* Device memory round trip at an offset; the buffer has no host address. */
    require_ok(NULL, init_with("cuda", NULL, &ctx));
    gaaw_buffer_t buf;
    require_ok(ctx, gaaw_buffer_alloc(ctx, 4096, GAAW_MEM_WORKSPACE, &buf));
    unsigned char in[1000], out[1000];
    for (int i = 0; i < 1000; i++) in[i] = (unsigned char)(i * 7 + 3);
    expect_status_ctx(ctx, gaaw_buffer_write(ctx, buf, 100, in, sizeof in), GAAW_SUCCESS);
    expect_status_ctx(ctx, gaaw_buffer_read(ctx, buf, 100, out, sizeof out), GAAW_SUCCESS);
    expect_true(memcmp(in, out, sizeof in) == 0, "device memory did not read back what was written");
    void *host = NULL;
    expect_status_ctx(ctx, gaaw_buffer_host_ptr(buf, &host), GAAW_ERR_UNSUPPORTED);
    require_ok(ctx, gaaw_buffer_free(ctx, &buf));
    expect_status_ctx(ctx, gaaw_synchronize(ctx), GAAW_SUCCESS);
    require_ok(ctx, gaaw_finalize(&ctx));
  }
  MPI_Finalize();
  return test_finish("test_cuda_device");
}
