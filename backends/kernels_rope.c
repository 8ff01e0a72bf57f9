/* The rotary position embedding: its public kernel functions (include/gaaw/kernels.h;
 * arguments checked, then the device table's rope entry) and its table of angles,
 * computed on the host in double precision. */
#include <math.h>
#include <string.h>

#include "backends/kernel_check.h"
#include "backends/kernel_trace.h"

/* x, y: (B, T, NH, D), one dtype, D even; table: f32 (T, D); 0 < heads <= NH; y is x
 * or does not overlap it. */
static gaaw_status_t check_rope(gaaw_context_t ctx, const gaaw_tensor_t *x, const char *xname,
                                const gaaw_tensor_t *table, int64_t heads, const gaaw_tensor_t *y, const char *yname)
{
  GAAW_CHECK(check_tensor(ctx, table, "table", MASK_F32));
  GAAW_ARG_CHECK(ctx, x->ndim == 4 && x->shape[3] >= 2 && x->shape[3] % 2 == 0,
                 "rope: %s has shape %s; expected (B, T, NH, D) with D even", xname, shape_of(x).s);
  GAAW_ARG_CHECK(ctx, y->ndim == 4 && !memcmp(y->shape, x->shape, sizeof x->shape),
                 "rope: %s has shape %s; expected %s's %s", yname, shape_of(y).s, xname, shape_of(x).s);
  GAAW_ARG_CHECK(ctx, table->ndim == 2 && table->shape[0] == x->shape[1] && table->shape[1] == x->shape[3],
                 "rope: table has shape %s; expected (T, D) = (%lld, %lld) for %s %s", shape_of(table).s,
                 (long long)x->shape[1], (long long)x->shape[3], xname, shape_of(x).s);
  GAAW_ARG_CHECK(ctx, heads > 0 && heads <= x->shape[2], "rope: heads must be in 1..%lld (the NH of %s %s), got %lld",
                 (long long)x->shape[2], xname, shape_of(x).s, (long long)heads);
  size_t bytes = (size_t)gaaw_tensor_numel(x) * gaaw_dtype_size(x->dtype);
  int same = x->buf == y->buf && x->offset == y->offset;
  int apart = x->buf != y->buf || x->offset + bytes <= y->offset || y->offset + bytes <= x->offset;
  GAAW_ARG_CHECK(ctx, same || apart,
                 "rope: %s (offset %zu) and %s (offset %zu) overlap in one buffer without being the same view; "
                 "rotate in place or into separate memory",
                 yname, y->offset, xname, x->offset);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_rope_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *table, int64_t heads,
                                gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_rope(ctx, x, "x", table, heads, y, "y"));
  RUN(rope, x, x, table, heads, 0, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_rope_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *table,
                                 int64_t heads, gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(dx));
  GAAW_CHECK(check_rope(ctx, dy, "dy", table, heads, dx, "dx"));
  RUN(rope, dy, dy, table, heads, 1, dx);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_rope_table(int64_t T, int64_t D, int64_t pos0, double theta, float *table)
{
  GAAW_ARG_CHECK(NULL, T >= 0 && pos0 >= 0, "rope table: T (%lld) and pos0 (%lld) must be >= 0", (long long)T,
                 (long long)pos0);
  GAAW_ARG_CHECK(NULL, D >= 2 && D % 2 == 0, "rope table: the head dimension D must be even and >= 2, got %lld",
                 (long long)D);
  GAAW_ARG_CHECK(NULL, isfinite(theta) && theta > 1.0, "rope table: theta must be finite and > 1, got %g", theta);
  GAAW_ARG_CHECK(NULL, table || T == 0, "rope table: table is NULL");
  const int64_t half = D / 2;
  const double two_pi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < half; i++) {
    double inv_freq = pow(theta, -2.0 * (double)i / (double)D);
    for (int64_t t = 0; t < T; t++) {
      /* the angle, exact to about 1e-16 relative, reduced before the trigonometry */
      double a = fmod((double)(pos0 + t) * inv_freq, two_pi);
      table[t * D + i] = (float)cos(a);
      table[t * D + half + i] = (float)sin(a);
    }
  }
  return GAAW_SUCCESS;
}
