/* Counter-based initialisation: the same (seed, name, index) always gives the same
 * value, different names or seeds give independent streams, and the normal values
 * have the right moments. */
#include <math.h>

#include "parallel/rng.h"
#include "test_util.h"

int main(void)
{
  uint64_t a = gaaw_rng_stream(1234, "h.0.attn.c_attn.weight");
  uint64_t a2 = gaaw_rng_stream(1234, "h.0.attn.c_attn.weight");
  uint64_t b = gaaw_rng_stream(1234, "h.1.attn.c_attn.weight");
  uint64_t c = gaaw_rng_stream(1235, "h.0.attn.c_attn.weight");
  expect_true(a == a2, "the stream of a name is a function of (seed, name)");
  expect_true(a != b && a != c && b != c, "names and seeds give different streams");

  /* order-independence: element i read in reverse equals element i read forward */
  double forward[1000];
  for (int i = 0; i < 1000; i++) forward[i] = gaaw_rng_normal(a, (uint64_t)i);
  int same = 1;
  for (int i = 999; i >= 0; i--) same &= gaaw_rng_normal(a, (uint64_t)i) == forward[i];
  expect_true(same, "values depend on the order they are drawn in");

  /* moments of 200k normals: mean 0, variance 1, kurtosis 3 (loose statistical bounds) */
  const int n = 200000;
  double s1 = 0, s2 = 0, s4 = 0, u1 = 0, umin = 1, umax = 0;
  for (int i = 0; i < n; i++) {
    double z = gaaw_rng_normal(b, (uint64_t)i);
    s1 += z;
    s2 += z * z;
    s4 += z * z * z * z;
    double u = gaaw_rng_uniform(c, (uint64_t)i);
    u1 += u;
    if (u < umin) umin = u;
    if (u > umax) umax = u;
  }
  double mean = s1 / n, var = s2 / n - mean * mean, kurt = s4 / n;
  expect_true(fabs(mean) < 0.01, "normal mean %g", mean);
  expect_true(fabs(var - 1) < 0.02, "normal variance %g", var);
  expect_true(fabs(kurt - 3) < 0.1, "normal fourth moment %g", kurt);
  expect_true(fabs(u1 / n - 0.5) < 0.005, "uniform mean %g", u1 / n);
  expect_true(umin > 0 && umax < 1, "uniform range (%g, %g)", umin, umax);

  /* neighbouring streams are uncorrelated */
  double cross = 0;
  for (int i = 0; i < n; i++) cross += gaaw_rng_normal(a, (uint64_t)i) * gaaw_rng_normal(b, (uint64_t)i);
  expect_true(fabs(cross / n) < 0.01, "correlation of two streams %g", cross / n);
  return test_finish("test_rng");
}
