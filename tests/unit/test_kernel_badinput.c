/* Every public kernel function: a valid call succeeds, and a NULL context, a NULL
 * tensor, a wrong dtype and mismatched shapes each return GAAW_ERR_INVALID_ARG; plus
 * views that overrun their buffer, buffers of another context, and bad scalars. */
#include "tests/unit/test_kernel_util.h"

#define OK(call) expect_status_ctx(ctx, (call), GAAW_SUCCESS)
#define BAD(call) expect_status_ctx(ctx, (call), GAAW_ERR_INVALID_ARG)
#define BAD_NOCTX(call) expect_status((call), GAAW_ERR_INVALID_ARG)

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  const gaaw_dtype_t F = GAAW_F32;
  /* valid operands: rows N = 4, C = 6 */
  gaaw_tensor_t x = KT_NEW(ctx, F, 4, 6), y = KT_NEW(ctx, F, 4, 6), dy = KT_NEW(ctx, F, 4, 6), dx = KT_NEW(ctx, F, 4, 6);
  gaaw_tensor_t w = KT_NEW(ctx, F, 6), b = KT_NEW(ctx, F, 6), dw = KT_NEW(ctx, F, 6), db = KT_NEW(ctx, F, 6);
  gaaw_tensor_t s1 = KT_NEW(ctx, F, 4), s2 = KT_NEW(ctx, F, 4), s3 = KT_NEW(ctx, F, 4);
  gaaw_tensor_t ids = KT_NEW(ctx, GAAW_I32, 4), flag = KT_NEW(ctx, GAAW_I32, 1), one = KT_NEW(ctx, F, 1);
  gaaw_tensor_t x2 = KT_NEW(ctx, F, 4, 12), dx2 = KT_NEW(ctx, F, 4, 12), table = KT_NEW(ctx, F, 5, 6);
  gaaw_tensor_t q = KT_NEW(ctx, F, 2, 3, 4), k = KT_NEW(ctx, F, 2, 3, 4), v = KT_NEW(ctx, F, 2, 3, 4);
  gaaw_tensor_t o = KT_NEW(ctx, F, 2, 3, 4), dq = KT_NEW(ctx, F, 2, 3, 4), dk = KT_NEW(ctx, F, 2, 3, 4);
  gaaw_tensor_t dv = KT_NEW(ctx, F, 2, 3, 4), p = KT_NEW(ctx, F, 2, 3, 3), dp = KT_NEW(ctx, F, 2, 3, 3);
  gaaw_tensor_t m = KT_NEW(ctx, F, 6), vv = KT_NEW(ctx, F, 6), master = KT_NEW(ctx, F, 6);
  /* wrong operands */
  gaaw_tensor_t xh = KT_NEW(ctx, GAAW_BF16, 4, 6), wh = KT_NEW(ctx, GAAW_F16, 6), s_i = KT_NEW(ctx, GAAW_I32, 4);
  gaaw_tensor_t ids_f = KT_NEW(ctx, F, 4), x5 = KT_NEW(ctx, F, 4, 5), w5 = KT_NEW(ctx, F, 5), s5 = KT_NEW(ctx, F, 5);
  gaaw_tensor_t p4 = KT_NEW(ctx, F, 2, 3, 4), two = KT_NEW(ctx, F, 2), flag_f = KT_NEW(ctx, F, 1);
  gaaw_tensor_t mh = KT_NEW(ctx, GAAW_BF16, 6);
  gaaw_adamw_args_t args = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0,
                            .grad_scale = 1, .step = 1};
  gaaw_transpose_t N_ = GAAW_OP_N, T_ = GAAW_OP_T;
  gaaw_tensor_t *all_f32[] = {&x, &y, &dy, &dx, &w, &b, &dw, &db, &s1, &s2, &s3, &one, &x2, &dx2, &table, &q, &k,
                              &v, &o, &dq, &dk, &dv, &p, &dp, &m, &vv, &master};
  for (size_t i = 0; i < sizeof all_f32 / sizeof *all_f32; i++) require_ok(ctx, gaaw_fill(ctx, all_f32[i], 0.5f));
  require_ok(ctx, gaaw_fill(ctx, &s2, 1.0f)); /* a usable sumexp / rstd */
  require_ok(ctx, gaaw_fill(ctx, &ids, 2));
  require_ok(ctx, gaaw_fill(ctx, &flag, 0));

  /* gemm: x (4, 6) x x^T -> (4, 4) */
  gaaw_tensor_t c44 = KT_NEW(ctx, F, 4, 4);
  OK(gaaw_gemm(ctx, N_, T_, 1, &x, &x, 0, &c44));
  BAD_NOCTX(gaaw_gemm(NULL, N_, T_, 1, &x, &x, 0, &c44));
  BAD(gaaw_gemm(ctx, N_, T_, 1, NULL, &x, 0, &c44));
  BAD(gaaw_gemm(ctx, N_, T_, 1, &x, &xh, 0, &c44));
  BAD(gaaw_gemm(ctx, N_, N_, 1, &x, &x, 0, &c44));        /* inner 6 vs 4 */
  BAD(gaaw_gemm(ctx, N_, T_, 1, &x, &x, 0, &y));          /* c (4, 6) for (4, 4) */
  BAD(gaaw_gemm(ctx, (gaaw_transpose_t)2, T_, 1, &x, &x, 0, &c44));
  /* gemm_batched: q (2, 3, 4) x k^T -> p (2, 3, 3) */
  OK(gaaw_gemm_batched(ctx, N_, T_, 1, &q, &k, 0, &p));
  BAD_NOCTX(gaaw_gemm_batched(NULL, N_, T_, 1, &q, &k, 0, &p));
  BAD(gaaw_gemm_batched(ctx, N_, T_, 1, &q, NULL, 0, &p));
  BAD(gaaw_gemm_batched(ctx, N_, T_, 1, &q, &k, 0, &p4)); /* c (2, 3, 4) */
  BAD(gaaw_gemm_batched(ctx, N_, T_, 1, &x, &k, 0, &p));  /* batch 1 vs 2 */
  BAD(gaaw_gemm_batched(ctx, N_, T_, 1, &q, &k, 0, &s1)); /* 1-D c */

  OK(gaaw_layernorm_forward(ctx, &x, &w, &b, 1e-5f, &y, &s1, &s2));
  BAD_NOCTX(gaaw_layernorm_forward(NULL, &x, &w, &b, 1e-5f, &y, &s1, &s2));
  BAD(gaaw_layernorm_forward(ctx, &x, &w, NULL, 1e-5f, &y, &s1, &s2));
  BAD(gaaw_layernorm_forward(ctx, &x, &wh, &b, 1e-5f, &y, &s1, &s2));
  BAD(gaaw_layernorm_forward(ctx, &x, &w, &b, 1e-5f, &y, &s_i, &s2));
  BAD(gaaw_layernorm_forward(ctx, &x, &w5, &b, 1e-5f, &y, &s1, &s2));
  BAD(gaaw_layernorm_forward(ctx, &x, &w, &b, 1e-5f, &x5, &s1, &s2));
  BAD(gaaw_layernorm_forward(ctx, &x, &w, &b, 1e-5f, &y, &s5, &s2));
  BAD(gaaw_layernorm_forward(ctx, &x, &w, &b, 0.0f, &y, &s1, &s2));
  BAD(gaaw_layernorm_forward(ctx, &x, &w, &b, NAN, &y, &s1, &s2));
  OK(gaaw_layernorm_backward(ctx, &dy, &x, &w, &s1, &s2, &dx, &dw, &db));
  BAD_NOCTX(gaaw_layernorm_backward(NULL, &dy, &x, &w, &s1, &s2, &dx, &dw, &db));
  BAD(gaaw_layernorm_backward(ctx, &dy, &x, &w, &s1, &s2, &dx, &dw, NULL));
  BAD(gaaw_layernorm_backward(ctx, &xh, &x, &w, &s1, &s2, &dx, &dw, &db));
  BAD(gaaw_layernorm_backward(ctx, &dy, &x, &w, &s1, &s2, &x5, &dw, &db));
  BAD(gaaw_layernorm_backward(ctx, &dy, &x, &w, &s1, &s5, &dx, &dw, &db));
  OK(gaaw_rmsnorm_forward(ctx, &x, &w, 1e-5f, &y, &s2));
  BAD_NOCTX(gaaw_rmsnorm_forward(NULL, &x, &w, 1e-5f, &y, &s2));
  BAD(gaaw_rmsnorm_forward(ctx, NULL, &w, 1e-5f, &y, &s2));
  BAD(gaaw_rmsnorm_forward(ctx, &xh, &w, 1e-5f, &y, &s2));
  BAD(gaaw_rmsnorm_forward(ctx, &x, &w5, 1e-5f, &y, &s2));
  BAD(gaaw_rmsnorm_forward(ctx, &x, &w, -1.0f, &y, &s2));
  OK(gaaw_rmsnorm_backward(ctx, &dy, &x, &w, &s2, &dx, &dw));
  BAD_NOCTX(gaaw_rmsnorm_backward(NULL, &dy, &x, &w, &s2, &dx, &dw));
  BAD(gaaw_rmsnorm_backward(ctx, &dy, &x, &w, NULL, &dx, &dw));
  BAD(gaaw_rmsnorm_backward(ctx, &dy, &x, &w, &s_i, &dx, &dw));
  BAD(gaaw_rmsnorm_backward(ctx, &dy, &x, &w, &s2, &dx, &w5));

  OK(gaaw_gelu_forward(ctx, &x, &y));
  BAD_NOCTX(gaaw_gelu_forward(NULL, &x, &y));
  BAD(gaaw_gelu_forward(ctx, &x, NULL));
  BAD(gaaw_gelu_forward(ctx, &x, &xh));
  BAD(gaaw_gelu_forward(ctx, &x, &x5));
  OK(gaaw_gelu_backward(ctx, &dy, &x, &dx));
  BAD_NOCTX(gaaw_gelu_backward(NULL, &dy, &x, &dx));
  BAD(gaaw_gelu_backward(ctx, NULL, &x, &dx));
  BAD(gaaw_gelu_backward(ctx, &dy, &xh, &dx));
  BAD(gaaw_gelu_backward(ctx, &dy, &x, &x5));
  OK(gaaw_swiglu_forward(ctx, &x2, &x));
  BAD_NOCTX(gaaw_swiglu_forward(NULL, &x2, &x));
  BAD(gaaw_swiglu_forward(ctx, NULL, &x));
  BAD(gaaw_swiglu_forward(ctx, &x2, &xh));
  BAD(gaaw_swiglu_forward(ctx, &x, &y)); /* x must be (N, 2H) */
  OK(gaaw_swiglu_backward(ctx, &dy, &x2, &dx2));
  BAD_NOCTX(gaaw_swiglu_backward(NULL, &dy, &x2, &dx2));
  BAD(gaaw_swiglu_backward(ctx, &dy, &x2, NULL));
  BAD(gaaw_swiglu_backward(ctx, &xh, &x2, &dx2));
  BAD(gaaw_swiglu_backward(ctx, &dy, &x2, &dx));

  OK(gaaw_bias_add(ctx, &y, &b));
  BAD_NOCTX(gaaw_bias_add(NULL, &y, &b));
  BAD(gaaw_bias_add(ctx, NULL, &b));
  BAD(gaaw_bias_add(ctx, &y, &wh));
  BAD(gaaw_bias_add(ctx, &y, &w5));
  OK(gaaw_bias_backward(ctx, &dy, &db));
  BAD_NOCTX(gaaw_bias_backward(NULL, &dy, &db));
  BAD(gaaw_bias_backward(ctx, &dy, NULL));
  BAD(gaaw_bias_backward(ctx, &xh, &db));
  BAD(gaaw_bias_backward(ctx, &dy, &w5));
  OK(gaaw_add(ctx, &x, &dy, &y));
  BAD_NOCTX(gaaw_add(NULL, &x, &dy, &y));
  BAD(gaaw_add(ctx, &x, NULL, &y));
  BAD(gaaw_add(ctx, &x, &xh, &y));
  BAD(gaaw_add(ctx, &x, &dy, &x5));
  OK(gaaw_axpy(ctx, 2.0f, &x, &y));
  BAD_NOCTX(gaaw_axpy(NULL, 2.0f, &x, &y));
  BAD(gaaw_axpy(ctx, 2.0f, NULL, &y));
  BAD(gaaw_axpy(ctx, 2.0f, &x, &xh));
  BAD(gaaw_axpy(ctx, 2.0f, &x, &x5));
  OK(gaaw_scale(ctx, &y, 0.5f));
  BAD_NOCTX(gaaw_scale(NULL, &y, 0.5f));
  BAD(gaaw_scale(ctx, NULL, 0.5f));
  BAD(gaaw_scale(ctx, &ids, 0.5f)); /* i32 is not a float dtype */

  OK(gaaw_causal_softmax_forward(ctx, 0.5f, &p, &dp));
  BAD_NOCTX(gaaw_causal_softmax_forward(NULL, 0.5f, &p, &dp));
  BAD(gaaw_causal_softmax_forward(ctx, 0.5f, NULL, &dp));
  BAD(gaaw_causal_softmax_forward(ctx, 0.5f, &p, &xh));
  BAD(gaaw_causal_softmax_forward(ctx, 0.5f, &q, &q));  /* (2, 3, 4) is not square */
  BAD(gaaw_causal_softmax_forward(ctx, 0.5f, &p, &p4));
  BAD(gaaw_causal_softmax_forward(ctx, INFINITY, &p, &dp));
  OK(gaaw_causal_softmax_backward(ctx, 0.5f, &p, &p, &dp));
  BAD_NOCTX(gaaw_causal_softmax_backward(NULL, 0.5f, &p, &p, &dp));
  BAD(gaaw_causal_softmax_backward(ctx, 0.5f, &p, NULL, &dp));
  BAD(gaaw_causal_softmax_backward(ctx, 0.5f, &p, &p, &xh));
  BAD(gaaw_causal_softmax_backward(ctx, 0.5f, &p, &p4, &dp));
  OK(gaaw_attention_forward(ctx, &q, &k, &v, &p, &o));
  BAD_NOCTX(gaaw_attention_forward(NULL, &q, &k, &v, &p, &o));
  BAD(gaaw_attention_forward(ctx, &q, &k, NULL, &p, &o));
  BAD(gaaw_attention_forward(ctx, &q, &k, &v, &xh, &o));
  BAD(gaaw_attention_forward(ctx, &q, &k, &v, &p4, &o)); /* probs must be (BH, T, T) */
  BAD(gaaw_attention_forward(ctx, &q, &x2, &v, &p, &o));
  OK(gaaw_attention_backward(ctx, &o, &q, &k, &v, &p, &dp, &dq, &dk, &dv));
  BAD_NOCTX(gaaw_attention_backward(NULL, &o, &q, &k, &v, &p, &dp, &dq, &dk, &dv));
  BAD(gaaw_attention_backward(ctx, &o, &q, &k, &v, &p, NULL, &dq, &dk, &dv));
  BAD(gaaw_attention_backward(ctx, &o, &q, &k, &v, &p, &dp, &dq, &dk, &xh));
  BAD(gaaw_attention_backward(ctx, &o, &q, &k, &v, &p, &p4, &dq, &dk, &dv));
  BAD(gaaw_attention_backward(ctx, &o, &q, &k, &v, &p, &dp, &dq, &dp, &dv)); /* dk (2, 3, 3) */
  /* the blocked attention: lse (BH, T) = (2, 3) f32 */
  gaaw_tensor_t lse = KT_NEW(ctx, F, 2, 3), lse_h = KT_NEW(ctx, GAAW_BF16, 2, 3), lse6 = KT_NEW(ctx, F, 6);
  require_ok(ctx, gaaw_fill(ctx, &lse, 0.5f));
  OK(gaaw_flash_attention_forward(ctx, &q, &k, &v, &o, &lse));
  BAD_NOCTX(gaaw_flash_attention_forward(NULL, &q, &k, &v, &o, &lse));
  BAD(gaaw_flash_attention_forward(ctx, &q, &k, NULL, &o, &lse));
  BAD(gaaw_flash_attention_forward(ctx, &q, &k, &v, &o, NULL));
  BAD(gaaw_flash_attention_forward(ctx, &q, &k, &v, &o, &lse_h)); /* lse must be f32 */
  BAD(gaaw_flash_attention_forward(ctx, &q, &k, &v, &o, &lse6));  /* (6) is not (BH, T) */
  BAD(gaaw_flash_attention_forward(ctx, &q, &k, &v, &o, &dp));    /* (2, 3, 3) neither */
  BAD(gaaw_flash_attention_forward(ctx, &q, &x2, &v, &o, &lse));
  BAD(gaaw_flash_attention_forward(ctx, &q, &k, &v, &xh, &lse));
  OK(gaaw_flash_attention_backward(ctx, &o, &q, &k, &v, &o, &lse, &dq, &dk, &dv));
  BAD_NOCTX(gaaw_flash_attention_backward(NULL, &o, &q, &k, &v, &o, &lse, &dq, &dk, &dv));
  BAD(gaaw_flash_attention_backward(ctx, &o, &q, &k, &v, NULL, &lse, &dq, &dk, &dv));
  BAD(gaaw_flash_attention_backward(ctx, &o, &q, &k, &v, &o, &lse6, &dq, &dk, &dv));
  BAD(gaaw_flash_attention_backward(ctx, &o, &q, &k, &v, &o, &lse, &dq, &dp, &dv)); /* dk (2, 3, 3) */
  BAD(gaaw_flash_attention_backward(ctx, &o, &q, &k, &v, &o, &lse, &dq, &dk, &xh));
  int avail = -1;
  OK(gaaw_kernel_available(ctx, "flash_attention_forward", &avail));
  expect_true(avail == 1, "the host backend has flash_attention_forward (got %d)", avail);
  BAD(gaaw_kernel_available(ctx, "no_such_kernel", &avail));
  BAD(gaaw_kernel_available(ctx, NULL, &avail));
  BAD(gaaw_kernel_available(ctx, "gemm", NULL));
  BAD_NOCTX(gaaw_kernel_available(NULL, "gemm", &avail));
  kt_free(ctx, &lse), kt_free(ctx, &lse_h), kt_free(ctx, &lse6);

  OK(gaaw_embedding_forward(ctx, &ids, &table, 0, &y));
  BAD_NOCTX(gaaw_embedding_forward(NULL, &ids, &table, 0, &y));
  BAD(gaaw_embedding_forward(ctx, NULL, &table, 0, &y));
  BAD(gaaw_embedding_forward(ctx, &ids_f, &table, 0, &y)); /* tokens must be i32 */
  BAD(gaaw_embedding_forward(ctx, &ids, &table, 0, &x5));
  BAD(gaaw_embedding_forward(ctx, &ids, &table, -1, &y));
  OK(gaaw_embedding_backward(ctx, &ids, &dy, 0, &table));
  BAD_NOCTX(gaaw_embedding_backward(NULL, &ids, &dy, 0, &table));
  BAD(gaaw_embedding_backward(ctx, &ids, NULL, 0, &table));
  BAD(gaaw_embedding_backward(ctx, &ids, &xh, 0, &table));
  BAD(gaaw_embedding_backward(ctx, &ids, &x5, 0, &table));

  /* cross-entropy on logits x (4, 6): s1 max, s2 sumexp, s3 target */
  OK(gaaw_row_max(ctx, &x, &s1));
  BAD_NOCTX(gaaw_row_max(NULL, &x, &s1));
  BAD(gaaw_row_max(ctx, &x, NULL));
  BAD(gaaw_row_max(ctx, &x, &s_i));
  BAD(gaaw_row_max(ctx, &x, &s5));
  OK(gaaw_row_sum_exp(ctx, &x, &s1, &s2));
  BAD_NOCTX(gaaw_row_sum_exp(NULL, &x, &s1, &s2));
  BAD(gaaw_row_sum_exp(ctx, &x, NULL, &s2));
  BAD(gaaw_row_sum_exp(ctx, &x, &s_i, &s2)); /* max must be f32 */
  BAD(gaaw_row_sum_exp(ctx, &x, &s1, &s5));
  OK(gaaw_target_logit(ctx, &x, &ids, 0, &s3));
  BAD_NOCTX(gaaw_target_logit(NULL, &x, &ids, 0, &s3));
  BAD(gaaw_target_logit(ctx, &x, NULL, 0, &s3));
  BAD(gaaw_target_logit(ctx, &x, &ids_f, 0, &s3));
  BAD(gaaw_target_logit(ctx, &x, &ids, 0, &s5));
  BAD(gaaw_target_logit(ctx, &x, &ids, -3, &s3));
  OK(gaaw_cross_entropy_backward(ctx, &x, &s1, &s2, &ids, 0, 0.25f, &dx));
  BAD_NOCTX(gaaw_cross_entropy_backward(NULL, &x, &s1, &s2, &ids, 0, 0.25f, &dx));
  BAD(gaaw_cross_entropy_backward(ctx, &x, &s1, &s2, &ids, 0, 0.25f, NULL));
  BAD(gaaw_cross_entropy_backward(ctx, &x, &s1, &s2, &ids, 0, 0.25f, &xh));
  BAD(gaaw_cross_entropy_backward(ctx, &x, &s1, &s5, &ids, 0, 0.25f, &dx));
  BAD(gaaw_cross_entropy_backward(ctx, &x, &s1, &s2, &ids, 0, NAN, &dx));

  /* AdamW on 6 elements: params w, grads dw */
  OK(gaaw_adamw_update(ctx, &w, &dw, NULL, &m, &vv, &args));
  OK(gaaw_adamw_update(ctx, &mh, &dw, &master, &m, &vv, &args)); /* bf16 params beside f32 master */
  BAD_NOCTX(gaaw_adamw_update(NULL, &w, &dw, NULL, &m, &vv, &args));
  BAD(gaaw_adamw_update(ctx, &w, NULL, NULL, &m, &vv, &args));
  BAD(gaaw_adamw_update(ctx, &w, &dw, NULL, &m, &vv, NULL));
  BAD(gaaw_adamw_update(ctx, &mh, &dw, NULL, &m, &vv, &args));     /* bf16 params need a master */
  BAD(gaaw_adamw_update(ctx, &w, &dw, NULL, &mh, &vv, &args));     /* m must be f32 */
  BAD(gaaw_adamw_update(ctx, &w, &w5, NULL, &m, &vv, &args));
  BAD(gaaw_adamw_update(ctx, &w, &dw, &s1, &m, &vv, &args));
  gaaw_adamw_args_t bad = args;
  bad.step = 0;
  BAD(gaaw_adamw_update(ctx, &w, &dw, NULL, &m, &vv, &bad));
  bad = args, bad.beta2 = 1.0f;
  BAD(gaaw_adamw_update(ctx, &w, &dw, NULL, &m, &vv, &bad));
  bad = args, bad.eps = 0;
  BAD(gaaw_adamw_update(ctx, &w, &dw, NULL, &m, &vv, &bad));
  bad = args, bad.lr = -1;
  BAD(gaaw_adamw_update(ctx, &w, &dw, NULL, &m, &vv, &bad));

  OK(gaaw_cast(ctx, &x, &xh));
  BAD_NOCTX(gaaw_cast(NULL, &x, &xh));
  BAD(gaaw_cast(ctx, NULL, &xh));
  BAD(gaaw_cast(ctx, &x, &x5));
  gaaw_tensor_t baddt = x;
  baddt.dtype = (gaaw_dtype_t)9;
  BAD(gaaw_cast(ctx, &baddt, &y));
  OK(gaaw_sum_squares(ctx, &xh, &one));
  BAD_NOCTX(gaaw_sum_squares(NULL, &x, &one));
  BAD(gaaw_sum_squares(ctx, &x, NULL));
  BAD(gaaw_sum_squares(ctx, &ids, &one));
  BAD(gaaw_sum_squares(ctx, &x, &two));
  BAD(gaaw_sum_squares(ctx, &x, &flag));
  OK(gaaw_check_finite(ctx, &x, &flag));
  BAD_NOCTX(gaaw_check_finite(NULL, &x, &flag));
  BAD(gaaw_check_finite(ctx, NULL, &flag));
  BAD(gaaw_check_finite(ctx, &x, &flag_f));
  BAD(gaaw_check_finite(ctx, &x, &ids));
  OK(gaaw_fill(ctx, &ids, -3.5f));
  BAD_NOCTX(gaaw_fill(NULL, &x, 1.0f));
  BAD(gaaw_fill(ctx, NULL, 1.0f));
  BAD(gaaw_fill(ctx, &baddt, 1.0f));
  BAD(gaaw_fill(ctx, &ids, 3e9f)); /* outside the i32 range */
  BAD(gaaw_fill(ctx, &ids, NAN));
  OK(gaaw_synchronize(ctx));
  BAD_NOCTX(gaaw_synchronize(NULL));

  /* malformed views: past the end of the buffer, misaligned, bad ndim, negative extent */
  gaaw_tensor_t over = x;
  over.offset = 4;
  BAD(gaaw_gelu_forward(ctx, &over, &y));
  over = x, over.shape[0] = 5;
  BAD(gaaw_scale(ctx, &over, 1.0f));
  over = x, over.offset = 2, over.shape[0] = 1;
  BAD(gaaw_scale(ctx, &over, 1.0f));
  over = x, over.ndim = 0;
  BAD(gaaw_scale(ctx, &over, 1.0f));
  over = x, over.shape[1] = -6, over.shape[0] = -4;
  BAD(gaaw_scale(ctx, &over, 1.0f));
  over = x, over.buf = NULL;
  BAD(gaaw_scale(ctx, &over, 1.0f));
  /* a buffer of another context */
  gaaw_context_t other = NULL;
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, kt_cfg, &other));
  gaaw_tensor_t foreign = KT_NEW(other, F, 4, 6);
  BAD(gaaw_gelu_forward(ctx, &x, &foreign));
  expect_true(strstr(gaaw_last_error(ctx), "another context") != NULL, "error does not name the context: %s",
              gaaw_last_error(ctx));
  kt_free(other, &foreign);
  require_ok(other, gaaw_finalize(&other));
  /* messages name the tensor and the shapes */
  BAD(gaaw_layernorm_forward(ctx, &x, &w5, &b, 1e-5f, &y, &s1, &s2));
  expect_true(strstr(gaaw_last_error(ctx), "w") && strstr(gaaw_last_error(ctx), "(5)"),
              "error does not name w and its shape: %s", gaaw_last_error(ctx));

  gaaw_tensor_t *frees[] = {&x, &y, &dy, &dx, &w, &b, &dw, &db, &s1, &s2, &s3, &ids, &flag, &one, &x2, &dx2, &table,
                            &q, &k, &v, &o, &dq, &dk, &dv, &p, &dp, &m, &vv, &master, &xh, &wh, &s_i, &ids_f, &x5,
                            &w5, &s5, &p4, &two, &flag_f, &mh, &c44};
  for (size_t i = 0; i < sizeof frees / sizeof *frees; i++) kt_free(ctx, frees[i]);
  return kt_finish(&ctx, "test_kernel_badinput");
}
