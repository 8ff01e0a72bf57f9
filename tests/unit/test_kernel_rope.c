/* The rotary position embedding (gaaw_rope_forward / _backward, gaaw_rope_table) on the
 * host backend:
 *   - the table against long double references at positions 0..39, 65,530..65,545
 *     and 1,000,000..: every entry within 1 ulp of f32 (and, as the reason for the
 *     double angle, an f32 angle is off by more than 1e-3 rad there);
 *   - forward and backward against a double reference of Hugging Face's rotate-half
 *     (q * cos + rotate_half(q) * sin), f32, bf16 and f16, out of place (heads after
 *     `heads` copied) and in place (those heads untouched);
 *   - backward is the inverse: backward(forward(x)) == x within rounding, and the
 *     rotation keeps each pair's length;
 *   - bad input: shapes, odd D, heads out of range, a partly overlapping output, the
 *     table's dtype and shape, and gaaw_rope_table's arguments. */
#include <math.h>
#include <string.h>

#include "tests/unit/test_kernel_util.h"

enum { B = 2, T = 5, NH = 4, D = 6, HALF = D / 2 };

/* The angle of pair i at position pos, in long double (64-bit significand), reduced. */
static long double ref_angle(int64_t pos, int64_t i, int64_t dim, double theta)
{
  long double a = (long double)pos * powl((long double)theta, -2.0L * (long double)i / (long double)dim);
  return fmodl(a, 2.0L * 3.14159265358979323846264338327950288L);
}

static void check_table(void)
{
  const int64_t dim = 128, starts[] = {0, 65530, 1000000};
  const double theta = 10000.0;
  enum { ROWS = 16 };
  float *table = malloc(sizeof(float) * ROWS * dim);
  for (int k = 0; k < 3; k++) {
    require_ok(NULL, gaaw_rope_table(ROWS, dim, starts[k], theta, table));
    double worst = 0, worst_f32_angle = 0;
    for (int64_t t = 0; t < ROWS; t++)
      for (int64_t i = 0; i < dim / 2; i++) {
        long double a = ref_angle(starts[k] + t, i, dim, theta);
        float c = (float)cosl(a), s = (float)sinl(a);
        /* the error in units of the last place of the reference */
        double ulp_c = nextafterf(fabsf(c), INFINITY) - fabsf(c), ulp_s = nextafterf(fabsf(s), INFINITY) - fabsf(s);
        double e = fmax(fabs(table[t * dim + i] - (double)c) / ulp_c, fabs(table[t * dim + dim / 2 + i] - (double)s) / ulp_s);
        if (e > worst) worst = e;
        /* what an f32 angle would give: position times an f32 frequency, in f32 */
        float f32_freq = (float)pow(theta, -2.0 * (double)i / (double)dim);
        float f32_angle = (float)(starts[k] + t) * f32_freq;
        double off = fabsl(fmodl((long double)f32_angle, 2.0L * 3.14159265358979323846264338327950288L) - a);
        if (off > 3.14159) off = fabs(off - 2 * 3.14159265358979323846);
        if (off > worst_f32_angle) worst_f32_angle = off;
      }
    expect_true(worst <= 1.0, "rope table from position %lld: an entry %.2f ulp from the long double reference",
                (long long)starts[k], worst);
    if (starts[k] >= 65530)
      expect_true(worst_f32_angle > 1e-3, "from position %lld an f32 angle should be off by more than 1e-3 rad (%.2e)",
                  (long long)starts[k], worst_f32_angle);
    printf("test_kernel_rope: table from position %lld: worst %.2f ulp (an f32 angle would be off by %.1e rad)\n",
           (long long)starts[k], worst, worst_f32_angle);
  }
  free(table);
}

/* y = rope(x) in double, Hugging Face's q * cos + rotate_half(q) * sin on the first
 * heads (sign -1: the inverse), the others copied. */
static void ref_rope(const float *x, const float *table, int heads, double sign, double *y)
{
  for (int bt = 0; bt < B * T; bt++)
    for (int h = 0; h < NH; h++)
      for (int d = 0; d < D; d++) {
        long at = ((long)bt * NH + h) * D;
        if (h >= heads) {
          y[at + d] = x[at + d];
          continue;
        }
        int i = d % HALF;
        double c = table[(bt % T) * D + i], s = sign * table[(bt % T) * D + HALF + i];
        double rot = d < HALF ? -(double)x[at + d + HALF] : (double)x[at + d - HALF]; /* rotate_half */
        y[at + d] = x[at + d] * c + rot * s;
      }
}

static void check_rope(gaaw_context_t ctx, gaaw_dtype_t dt, uint64_t *seed)
{
  const char *name = gaaw_dtype_name(dt);
  long n = (long)B * T * NH * D;
  float table[T * D], *x = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
  double *want = malloc(sizeof(double) * n);
  require_ok(NULL, gaaw_rope_table(T, D, 3, 10000.0, table));
  gaaw_tensor_t tt = KT_NEW(ctx, GAAW_F32, T, D);
  kt_upload(ctx, &tt, table);
  const int head_counts[] = {1, 3, NH};
  for (int k = 0; k < 3; k++) {
    int heads = head_counts[k];
    gaaw_tensor_t tx = kt_random_tensor(ctx, dt, 4, (int64_t[]){B, T, NH, D}, -2, 2, seed, x);
    gaaw_tensor_t ty = KT_NEW(ctx, dt, B, T, NH, D);
    require_ok(ctx, gaaw_fill(ctx, &ty, NAN));
    expect_status_ctx(ctx, gaaw_rope_forward(ctx, &tx, &tt, heads, &ty), GAAW_SUCCESS);
    ref_rope(x, table, heads, 1.0, want);
    kt_expect(ctx, &ty, want, kt_tol(dt), "rope forward (%s, %d of %d heads, out of place)", name, heads, NH);
    /* backward overwrites: dx = R^T dy */
    gaaw_tensor_t tdx = KT_NEW(ctx, dt, B, T, NH, D);
    require_ok(ctx, gaaw_fill(ctx, &tdx, NAN));
    expect_status_ctx(ctx, gaaw_rope_backward(ctx, &tx, &tt, heads, &tdx), GAAW_SUCCESS);
    ref_rope(x, table, heads, -1.0, want);
    kt_expect(ctx, &tdx, want, kt_tol(dt), "rope backward (%s, %d of %d heads)", name, heads, NH);
    /* the inverse: backward(forward(x)) = x */
    expect_status_ctx(ctx, gaaw_rope_backward(ctx, &ty, &tt, heads, &tdx), GAAW_SUCCESS);
    kt_download(ctx, &tdx, back);
    expect_close(back, x, n, 2 * kt_tol(dt), "rope backward(forward(x)) == x");
    /* in place: the same values, and the heads after `heads` untouched */
    expect_status_ctx(ctx, gaaw_rope_forward(ctx, &tx, &tt, heads, &tx), GAAW_SUCCESS);
    ref_rope(x, table, heads, 1.0, want);
    kt_expect(ctx, &tx, want, kt_tol(dt), "rope forward in place (%s, %d of %d heads)", name, heads, NH);
    kt_download(ctx, &tx, back);
    double worst = 0;
    for (long bt = 0; bt < (long)B * T; bt++)
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < HALF; i++) {
          long a = (bt * NH + h) * D + i;
          double before = hypot(x[a], x[a + HALF]), after = hypot(back[a], back[a + HALF]);
          worst = fmax(worst, fabs(after - before) / fmax(before, 1e-3));
        }
    expect_true(worst <= 2 * kt_tol(dt), "rope changed a pair's length by %.2e relative (%s)", worst, name);
    kt_free(ctx, &tx), kt_free(ctx, &ty), kt_free(ctx, &tdx);
  }
  kt_free(ctx, &tt);
  free(x), free(back), free(want);
}

static void check_bad_input(gaaw_context_t ctx)
{
  gaaw_tensor_t x = KT_NEW(ctx, GAAW_F32, B, T, NH, D), y = KT_NEW(ctx, GAAW_F32, B, T, NH, D);
  gaaw_tensor_t table = KT_NEW(ctx, GAAW_F32, T, D), table16 = KT_NEW(ctx, GAAW_BF16, T, D);
  gaaw_tensor_t short_table = KT_NEW(ctx, GAAW_F32, T - 1, D), odd = KT_NEW(ctx, GAAW_F32, B, T, NH, 5);
  gaaw_tensor_t odd_table = KT_NEW(ctx, GAAW_F32, T, 5), flat = KT_NEW(ctx, GAAW_F32, B * T, NH * D);
  gaaw_tensor_t y16 = KT_NEW(ctx, GAAW_BF16, B, T, NH, D);
  const gaaw_status_t bad = GAAW_ERR_INVALID_ARG;
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &x, &table, 0, &y), bad);
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &x, &table, NH + 1, &y), bad);
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &x, &table16, 1, &y), bad);
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &x, &short_table, 1, &y), bad);
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &odd, &odd_table, 1, &odd), bad);
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &flat, &table, 1, &flat), bad);
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &x, &table, 1, &y16), bad);
  expect_status_ctx(ctx, gaaw_rope_backward(ctx, &x, &table, 1, &flat), bad);
  /* y one element past x in the same buffer: overlapping, not the same view */
  gaaw_tensor_t big = KT_NEW(ctx, GAAW_F32, 2 * B * T * NH * D);
  gaaw_tensor_t a = big, b = big;
  a.ndim = b.ndim = 4;
  memcpy(a.shape, x.shape, sizeof a.shape), memcpy(b.shape, x.shape, sizeof b.shape);
  b.offset += sizeof(float);
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &a, &table, 1, &b), bad);
  expect_true(strstr(gaaw_last_error(ctx), "overlap") != NULL, "the report names the overlap: %s", gaaw_last_error(ctx));
  b.offset = gaaw_tensor_numel(&x) * sizeof(float); /* right after: fine */
  expect_status_ctx(ctx, gaaw_rope_forward(ctx, &a, &table, 1, &b), GAAW_SUCCESS);
  /* the table's arguments */
  float row[8];
  expect_status(gaaw_rope_table(1, 7, 0, 10000.0, row), bad);
  expect_status(gaaw_rope_table(1, 0, 0, 10000.0, row), bad);
  expect_status(gaaw_rope_table(-1, 8, 0, 10000.0, row), bad);
  expect_status(gaaw_rope_table(1, 8, -5, 10000.0, row), bad);
  expect_status(gaaw_rope_table(1, 8, 0, 1.0, row), bad);
  expect_status(gaaw_rope_table(1, 8, 0, NAN, row), bad);
  expect_status(gaaw_rope_table(1, 8, 0, 10000.0, NULL), bad);
  expect_true(strstr(gaaw_last_error(NULL), "table is NULL") != NULL, "report: %s", gaaw_last_error(NULL));
  expect_status(gaaw_rope_table(0, 8, 0, 10000.0, NULL), GAAW_SUCCESS);
  gaaw_tensor_t *all[] = {&x, &y, &table, &table16, &short_table, &odd, &odd_table, &flat, &y16, &big};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kt_free(ctx, all[i]);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 17;
  check_table();
  for (int i = 0; i < 3; i++) check_rope(ctx, kt_float_dtypes[i], &seed);
  check_bad_input(ctx);
  return kt_finish(&ctx, "test_kernel_rope");
}
