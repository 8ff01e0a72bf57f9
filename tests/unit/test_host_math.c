/* host_expf and host_sigmoidf (backends/host/host_math.h) against double exp on a
 * dense sweep of [-87, 88] and on the edges: 0 -> 1 exactly, above 88 -> inf,
 * below -87 -> 0, inf, -inf and nan. */
#include <math.h>
#include <stdio.h>

#include "backends/host/host_math.h"
#include "tests/harness/test_util.h"

int main(void)
{
  double worst = 0, worst_sig = 0;
  float at = 0, at_sig = 0;
  for (long i = 0; i <= 1750000; i++) {
    float x = -87.0f + (float)i * 1e-4f;
    if (x > 88.0f) break;
    double want = exp((double)x), err = fabs(host_expf(x) - want) / want;
    if (err > worst) worst = err, at = x;
    double s = 1.0 / (1.0 + exp(-(double)x)), serr = fabs(host_sigmoidf(x) - s) / s;
    if (serr > worst_sig) worst_sig = serr, at_sig = x;
  }
  /* 2 ulp of f32 is 2.4e-7 relative */
  expect_true(worst <= 2.4e-7, "host_expf relative error %.3g at x = %.7g", worst, at);
  expect_true(worst_sig <= 3.6e-7, "host_sigmoidf relative error %.3g at x = %.7g", worst_sig, at_sig);
  expect_true(host_expf(0.0f) == 1.0f, "host_expf(0) = %.9g", host_expf(0.0f));
  expect_true(host_expf(88.5f) == INFINITY && host_expf(INFINITY) == INFINITY, "above 88: %g, inf: %g",
              host_expf(88.5f), host_expf(INFINITY));
  expect_true(host_expf(-87.5f) == 0.0f && host_expf(-INFINITY) == 0.0f, "below -87: %g, -inf: %g",
              host_expf(-87.5f), host_expf(-INFINITY));
  expect_true(isnan(host_expf(NAN)) && isnan(host_expf(-NAN)), "host_expf(nan) = %g, (-nan) = %g", host_expf(NAN),
              host_expf(-NAN));
  expect_true(host_sigmoidf(-100.0f) == 0.0f && host_sigmoidf(100.0f) == 1.0f, "sigmoid(-100) = %g, (100) = %g",
              host_sigmoidf(-100.0f), host_sigmoidf(100.0f));
  return test_finish("test_host_math");
}
