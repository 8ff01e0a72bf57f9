/* The public kernel functions of the causal softmax and of attention, the (T, T)
 * matrix kernels and the blocked ones (include/gaaw/kernels.h), and the question
 * whether a backend has a kernel: arguments checked (backends/kernel_checks.h), then
 * the call goes to the context's device table. */
#include "backends/kernel_check.h"
#include "backends/kernel_trace.h"

/* ---------------------------------------------------------------- softmax and attention */

/* x: (..., T, T) */
static gaaw_status_t check_square(gaaw_context_t ctx, const gaaw_tensor_t *x, const char *name)
{
  GAAW_ARG_CHECK(ctx, x->ndim >= 2 && second_last(x) == last(x), "tensor %s has shape %s; expected (B, T, T)", name,
                 shape_of(x).s);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_causal_softmax_forward(gaaw_context_t ctx, float scale, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_square(ctx, x, "x"));
  GAAW_CHECK(check_bmat(ctx, y, "y", batch_of(x), last(x), last(x), "x's (B, T, T)"));
  GAAW_CHECK(check_finite_arg(ctx, scale, "scale"));
  RUN(causal_softmax_forward, x, scale, x, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_causal_softmax_backward(gaaw_context_t ctx, float scale, const gaaw_tensor_t *y,
                                           const gaaw_tensor_t *dy, gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(y), NT(dy), NT(dx));
  GAAW_CHECK(check_square(ctx, y, "y"));
  GAAW_CHECK(check_bmat(ctx, dy, "dy", batch_of(y), last(y), last(y), "y's (B, T, T)"));
  GAAW_CHECK(check_bmat(ctx, dx, "dx", batch_of(y), last(y), last(y), "y's (B, T, T)"));
  GAAW_CHECK(check_finite_arg(ctx, scale, "scale"));
  RUN(causal_softmax_backward, dx, scale, y, dy, dx);
  return GAAW_SUCCESS;
}

/* Every tensor of list is q's (BH, T, D); probs, when not NULL, is (BH, T, T). */
static gaaw_status_t check_attention(gaaw_context_t ctx, const gaaw_tensor_t *q, int n, const named_tensor *list,
                                     const gaaw_tensor_t *probs, const char *probs_name)
{
  GAAW_ARG_CHECK(ctx, q->ndim >= 2, "tensor q has shape %s; expected (BH, T, D)", shape_of(q).s);
  int64_t BH = batch_of(q), T = second_last(q), D = last(q);
  GAAW_ARG_CHECK(ctx, D > 0, "tensor q has shape %s; the head size D must be > 0", shape_of(q).s);
  for (int i = 0; i < n; i++) GAAW_CHECK(check_bmat(ctx, list[i].t, list[i].name, BH, T, D, "q's (BH, T, D)"));
  if (probs) GAAW_CHECK(check_bmat(ctx, probs, probs_name, BH, T, T, "(BH, T, T)"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                     const gaaw_tensor_t *v, gaaw_tensor_t *probs, gaaw_tensor_t *out)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(q), NT(k), NT(v), NT(probs), NT(out));
  GAAW_CHECK(check_attention(ctx, q, 3, (named_tensor[]){NT(k), NT(v), NT(out)}, probs, "probs"));
  RUN(attention_forward, probs, q, k, v, probs, out);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                      const gaaw_tensor_t *k, const gaaw_tensor_t *v, const gaaw_tensor_t *probs,
                                      gaaw_tensor_t *dprobs, gaaw_tensor_t *dq, gaaw_tensor_t *dk, gaaw_tensor_t *dv)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dout), NT(q), NT(k), NT(v), NT(probs), NT(dprobs), NT(dq), NT(dk), NT(dv));
  GAAW_CHECK(check_attention(ctx, q, 6, (named_tensor[]){NT(dout), NT(k), NT(v), NT(dq), NT(dk), NT(dv)}, probs,
                             "probs"));
  GAAW_CHECK(check_bmat(ctx, dprobs, "dprobs", batch_of(probs), last(probs), last(probs), "probs' (BH, T, T)"));
  RUN(attention_backward, probs, dout, q, k, v, probs, dprobs, dq, dk, dv);
  return GAAW_SUCCESS;
}

/* q, k, v, out: (BH, T, D)   lse: (BH, T) f32 */
static gaaw_status_t check_flash(gaaw_context_t ctx, const gaaw_tensor_t *q, int n, const named_tensor *list,
                                 const gaaw_tensor_t *lse)
{
  GAAW_CHECK(check_attention(ctx, q, n, list, NULL, NULL));
  GAAW_CHECK(check_mat(ctx, lse, "lse", batch_of(q), second_last(q), "q's (BH, T)"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_flash_attention_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                           const gaaw_tensor_t *v, gaaw_tensor_t *out, gaaw_tensor_t *lse)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(q), NT(k), NT(v), NT(out));
  CHECK_F32(NT(lse));
  GAAW_CHECK(check_flash(ctx, q, 3, (named_tensor[]){NT(k), NT(v), NT(out)}, lse));
  RUN(flash_attention_forward, q, q, k, v, out, lse);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_flash_attention_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                            const gaaw_tensor_t *k, const gaaw_tensor_t *v, const gaaw_tensor_t *out,
                                            const gaaw_tensor_t *lse, gaaw_tensor_t *dq, gaaw_tensor_t *dk,
                                            gaaw_tensor_t *dv)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dout), NT(q), NT(k), NT(v), NT(out), NT(dq), NT(dk), NT(dv));
  CHECK_F32(NT(lse));
  GAAW_CHECK(check_flash(ctx, q, 7, (named_tensor[]){NT(dout), NT(k), NT(v), NT(out), NT(dq), NT(dk), NT(dv)}, lse));
  RUN(flash_attention_backward, q, dout, q, k, v, out, lse, dq, dk, dv);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_kernel_available(gaaw_context_t ctx, const char *kernel, int *available)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_ARG_NOT_NULL(ctx, kernel);
  GAAW_ARG_NOT_NULL(ctx, available);
  int has = gaaw_device_provides(ctx->device, kernel);
  GAAW_ARG_CHECK(ctx, has >= 0, "kernel \"%s\" is no gaaw kernel", kernel);
  *available = has;
  return GAAW_SUCCESS;
}
