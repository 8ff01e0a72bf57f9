/* host_expf and host_sigmoidf (backends/host/host_math.h) against double exp on a
 * dense sweep of [-87, 88] and on the edges: exp 0 -> 1 exactly, above 88 -> inf,
 * below -87 -> 0, inf, -inf and nan; sigmoid beyond +-87 -> its value there (1, and
 * 1.6e-38, normal), nan -> nan. */
#include <math.h>
#include <stdio.h>

#include "backends/host/host_math.h"
#include "tests/harness/test_util.h"

int main(void)
{
  /* element i of the sweep is x = -87 + 1e-4 i; a nan or inf anywhere fails */
  test_errors e = test_errors_start(), e_sig = test_errors_start();
  for (long i = 0; i <= 1750000; i++) {
    float x = -87.0f + (float)i * 1e-4f;
    if (x > 88.0f) break;
    double want = exp((double)x), got = host_expf(x);
    test_errors_add(&e, i, got, want, fabs(got - want) / want);
    double s = 1.0 / (1.0 + exp(-(double)x)), sig = host_sigmoidf(x);
    test_errors_add(&e_sig, i, sig, s, fabs(sig - s) / s);
  }
  /* 2 ulp of f32 is 2.4e-7 relative */
  expect_errors(&e, 2.4e-7, "relative error", "host_expf(-87 + 1e-4 i) against exp");
  expect_errors(&e_sig, 3.6e-7, "relative error", "host_sigmoidf(-87 + 1e-4 i) against 1 / (1 + exp(-x))");
  expect_true(host_expf(0.0f) == 1.0f, "host_expf(0) = %.9g", host_expf(0.0f));
  expect_true(host_expf(88.5f) == INFINITY && host_expf(INFINITY) == INFINITY, "above 88: %g, inf: %g",
              host_expf(88.5f), host_expf(INFINITY));
  expect_true(host_expf(-87.5f) == 0.0f && host_expf(-INFINITY) == 0.0f, "below -87: %g, -inf: %g",
              host_expf(-87.5f), host_expf(-INFINITY));
  expect_true(isnan(host_expf(NAN)) && isnan(host_expf(-NAN)), "host_expf(nan) = %g, (-nan) = %g", host_expf(NAN),
              host_expf(-NAN));
  float low = host_sigmoidf(-100.0f);
  expect_true(low == host_sigmoidf(-87.0f) && isnormal(low) && low < 1.7e-38f && host_sigmoidf(-INFINITY) == low,
              "sigmoid(-100) = %g, (-87) = %g, (-inf) = %g", low, host_sigmoidf(-87.0f), host_sigmoidf(-INFINITY));
  expect_true(host_sigmoidf(100.0f) == 1.0f && host_sigmoidf(INFINITY) == 1.0f, "sigmoid(100) = %g, (inf) = %g",
              host_sigmoidf(100.0f), host_sigmoidf(INFINITY));
  expect_true(isnan(host_sigmoidf(NAN)), "sigmoid(nan) = %g", host_sigmoidf(NAN));
  return test_finish("test_host_math");
}
