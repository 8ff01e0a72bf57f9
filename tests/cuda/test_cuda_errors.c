/* CUDA errors are translated once and then forgotten: gaaw_cuda_error clears CUDA's
 * non-sticky last error (else the next launcher's cudaGetLastError reports the old
 * failure as its own), and gaaw_cuda_poll clears it after cudaErrorNotReady, which
 * is no failure. Checked through a stub of the clearing call, so it runs without a
 * GPU. */
#include <string.h>

#include "backends/cuda/cuda.h"
#include "tests/harness/test_util.h"

static int clears;
static cudaError_t stub_get_last_error(void)
{
  clears++;
  return cudaSuccess;
}

int main(void)
{
  gaaw_cuda_get_last_error = stub_get_last_error;

  clears = 0;
  gaaw_status_t st = gaaw_cuda_error(NULL, cudaErrorInvalidValue, __FILE__, __LINE__, __func__, "a launch");
  expect_true(st == GAAW_ERR_BACKEND, "invalid value translated to %s", gaaw_status_name(st));
  expect_true(clears == 1, "gaaw_cuda_error cleared the last error %d times, expected once", clears);
  expect_true(strstr(gaaw_last_error(NULL), "a launch failed") != NULL, "message: %s", gaaw_last_error(NULL));
  expect_true(strstr(gaaw_last_error(NULL), "cudaErrorInvalidValue") != NULL, "native name missing: %s",
              gaaw_last_error(NULL));

  clears = 0;
  st = gaaw_cuda_error(NULL, cudaErrorMemoryAllocation, __FILE__, __LINE__, __func__, "cudaMalloc");
  expect_true(st == GAAW_ERR_NO_MEMORY, "allocation failure translated to %s", gaaw_status_name(st));
  expect_true(clears == 1, "cleared %d times after an allocation failure", clears);

  clears = 0;
  expect_true(gaaw_cuda_poll(cudaErrorNotReady) == cudaErrorNotReady, "poll changed not-ready");
  expect_true(clears == 1, "not-ready cleared %d times, expected once", clears);
  clears = 0;
  expect_true(gaaw_cuda_poll(cudaSuccess) == cudaSuccess, "poll changed success");
  expect_true(gaaw_cuda_poll(cudaErrorLaunchFailure) == cudaErrorLaunchFailure, "poll changed a failure");
  expect_true(clears == 0, "success or a failure (translated later) cleared %d times", clears);

  gaaw_cuda_get_last_error = cudaGetLastError;
  return test_finish("test_cuda_errors");
}
