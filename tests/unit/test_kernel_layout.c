/* permute_0213 against index arithmetic, for every dtype, its own inverse, and bad
 * shapes; qkv_heads (grouped-query attention's heads) against index arithmetic:
 * forward a copy, backward the sum over each kv head's query heads. */
#include "tests/unit/test_kernel_util.h"

/* 6 query heads over kv heads (2: groups of 3; 1: multi-query; 6: multi-head). */
static void check_qkv_heads(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t KV)
{
  enum { B = 2, T = 3, H = 6, D = 4, NH_MAX = H + 2 * H };
  const int64_t NH = H + 2 * KV, g = H / KV;
  float x[B * T * NH_MAX * D], dq[B * H * T * D], dk[B * H * T * D], dv[B * H * T * D];
  double want[3][B * H * T * D], dwant[B * T * NH_MAX * D];
  uint64_t seed = 11 + (uint64_t)KV;
  gaaw_tensor_t qkv = kt_random_tensor(ctx, dt, 4, (int64_t[]){B, T, NH, D}, -2, 2, &seed, x);
  gaaw_tensor_t q = KT_NEW(ctx, dt, B, H, T, D), k = KT_NEW(ctx, dt, B, H, T, D), v = KT_NEW(ctx, dt, B, H, T, D);
  gaaw_tensor_t gq = kt_random_tensor(ctx, dt, 4, (int64_t[]){B, H, T, D}, -1, 1, &seed, dq);
  gaaw_tensor_t gk = kt_random_tensor(ctx, dt, 4, (int64_t[]){B, H, T, D}, -1, 1, &seed, dk);
  gaaw_tensor_t gv = kt_random_tensor(ctx, dt, 4, (int64_t[]){B, H, T, D}, -1, 1, &seed, dv);
  gaaw_tensor_t dqkv = KT_NEW(ctx, dt, B, T, NH, D);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t e = 0; e < D; e++) {
        for (int64_t h = 0; h < H; h++) {
          int64_t o = ((b * H + h) * T + t) * D + e, row = (b * T + t) * NH;
          want[0][o] = x[(row + h) * D + e];
          want[1][o] = x[(row + H + h / g) * D + e];
          want[2][o] = x[(row + H + KV + h / g) * D + e];
          dwant[(row + h) * D + e] = dq[o];
        }
        for (int64_t j = 0; j < KV; j++) {
          int64_t row = (b * T + t) * NH;
          double sk = 0, sv = 0;
          for (int64_t h = j * g; h < (j + 1) * g; h++) {
            sk += dk[((b * H + h) * T + t) * D + e];
            sv += dv[((b * H + h) * T + t) * D + e];
          }
          dwant[(row + H + j) * D + e] = sk;
          dwant[(row + H + KV + j) * D + e] = sv;
        }
      }
  expect_status_ctx(ctx, gaaw_qkv_heads_forward(ctx, &qkv, KV, &q, &k, &v), GAAW_SUCCESS);
  kt_expect(ctx, &q, want[0], 0, "qkv_heads q, kv %lld, %s", (long long)KV, gaaw_dtype_name(dt));
  kt_expect(ctx, &k, want[1], 0, "qkv_heads k, kv %lld, %s", (long long)KV, gaaw_dtype_name(dt));
  kt_expect(ctx, &v, want[2], 0, "qkv_heads v, kv %lld, %s", (long long)KV, gaaw_dtype_name(dt));
  expect_status_ctx(ctx, gaaw_qkv_heads_backward(ctx, &gq, &gk, &gv, KV, &dqkv), GAAW_SUCCESS);
  kt_expect(ctx, &dqkv, dwant, kt_tol(dt), "qkv_heads dqkv, kv %lld, %s", (long long)KV, gaaw_dtype_name(dt));
  /* bad input: kv heads that do not divide the query heads, a qkv of the wrong width */
  if (KV == 2) {
    expect_status_ctx(ctx, gaaw_qkv_heads_forward(ctx, &qkv, 4, &q, &k, &v), GAAW_ERR_INVALID_ARG);
    expect_true(strstr(gaaw_last_error(ctx), "kv_heads (4) must be >= 1 and divide the 6 query heads") != NULL, "%s",
                gaaw_last_error(ctx));
    expect_status_ctx(ctx, gaaw_qkv_heads_backward(ctx, &gq, &gk, &gv, 3, &dqkv), GAAW_ERR_INVALID_ARG);
  }
  gaaw_tensor_t *all[] = {&qkv, &q, &k, &v, &gq, &gk, &gv, &dqkv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kt_free(ctx, all[i]);
}

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

  for (int d = 0; d < 3; d++)
    for (int64_t kv = 1; kv <= 6; kv++)
      if (6 % kv == 0) check_qkv_heads(ctx, dtypes[d], kv);

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
