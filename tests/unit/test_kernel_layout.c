/* permute_0213 against index arithmetic, for every dtype, its own inverse, and bad
 * shapes. */
#include "tests/unit/test_kernel_util.h"

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  const int64_t A = 2, B = 3, C = 5, D = 7, n = A * B * C * D;
  float v[2 * 3 * 5 * 7], got[2 * 3 * 5 * 7];
  double want[2 * 3 * 5 * 7];
  uint64_t seed = 7;
  const gaaw_dtype_t dtypes[] = {GAAW_F32, GAAW_BF16, GAAW_F16, GAAW_I32};
  for (int d = 0; d < 4; d++) {
    gaaw_dtype_t dt = dtypes[d];
    gaaw_tensor_t x = kt_random_tensor(ctx, dt, 4, (int64_t[]){A, B, C, D}, -50, 50, &seed, v);
    gaaw_tensor_t y = KT_NEW(ctx, dt, A, C, B, D), back = KT_NEW(ctx, dt, A, B, C, D);
    for (int64_t a = 0; a < A; a++)
      for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++)
          for (int64_t e = 0; e < D; e++) want[((a * C + c) * B + b) * D + e] = v[((a * B + b) * C + c) * D + e];
    expect_status_ctx(ctx, gaaw_permute_0213(ctx, &x, &y), GAAW_SUCCESS);
    kt_expect(ctx, &y, want, 0, "permute_0213 %s", gaaw_dtype_name(dt));
    /* applied to its result with the swapped shape it gives x back, bit for bit */
    expect_status_ctx(ctx, gaaw_permute_0213(ctx, &y, &back), GAAW_SUCCESS);
    kt_download(ctx, &back, got);
    expect_true(memcmp(got, v, sizeof(float) * n) == 0, "permute_0213 twice is not the identity (%s)",
                gaaw_dtype_name(dt));
    kt_free(ctx, &x);
    kt_free(ctx, &y);
    kt_free(ctx, &back);
  }

  /* bad input */
  gaaw_tensor_t x = KT_NEW(ctx, GAAW_F32, A, B, C, D), y = KT_NEW(ctx, GAAW_F32, A, C, B, D);
  gaaw_tensor_t wrong = KT_NEW(ctx, GAAW_F32, A, B, C, D), h = KT_NEW(ctx, GAAW_F16, A, C, B, D);
  gaaw_tensor_t flat = KT_NEW(ctx, GAAW_F32, n);
  expect_status_ctx(ctx, gaaw_permute_0213(ctx, &x, &wrong), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "x (A, B, C, D) to y (A, C, B, D)") != NULL, "%s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_permute_0213(ctx, &x, &h), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_permute_0213(ctx, &flat, &y), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_permute_0213(ctx, NULL, &y), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_permute_0213(ctx, &x, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_permute_0213(NULL, &x, &y), GAAW_ERR_INVALID_ARG);
  kt_free(ctx, &x);
  kt_free(ctx, &y);
  kt_free(ctx, &wrong);
  kt_free(ctx, &h);
  kt_free(ctx, &flat);
  return kt_finish(&ctx, "test_kernel_layout");
}
