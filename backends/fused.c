/* The fused kernels of backends/fused.h: arguments checked as the public kernels
 * check theirs, then the device's fused kernel, or the unfused sequence where the
 * device has none (gaaw_device_has_NAME). */
#include "backends/fused.h"
#include "backends/kernel_check.h"
#include "backends/kernel_trace.h"

gaaw_status_t gaaw_bias_gelu_forward(gaaw_context_t ctx, gaaw_tensor_t *u, const gaaw_tensor_t *b, gaaw_tensor_t *a)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(u), NT(b), NT(a));
  GAAW_CHECK(check_numel(ctx, b, "b", last(u), "u's last extent F"));
  GAAW_CHECK(check_numel(ctx, a, "a", gaaw_tensor_numel(u), "numel(u)"));
  if (!gaaw_device_has_bias_gelu_forward(ctx->device)) {
    GAAW_CHECK(gaaw_bias_add(ctx, u, b));
    GAAW_CHECK(gaaw_gelu_forward(ctx, u, a));
    return GAAW_SUCCESS;
  }
  RUN(bias_gelu_forward, u, u, b, a);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_bias_residual_add(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y,
                                     const gaaw_tensor_t *bias, gaaw_tensor_t *out)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y), NT(bias), NT(out));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, y, "y", N, C, "x's (N, C)"));
  GAAW_CHECK(check_mat(ctx, out, "out", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, bias, "bias", C, "C"));
  if (!gaaw_device_has_bias_residual_add(ctx->device)) {
    GAAW_CHECK(gaaw_bias_add(ctx, y, bias));
    GAAW_CHECK(gaaw_add(ctx, x, y, out));
    return GAAW_SUCCESS;
  }
  RUN(bias_residual_add, out, x, y, bias, out);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_add_layernorm_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y,
                                         const gaaw_tensor_t *bias, const gaaw_tensor_t *w,
                                         const gaaw_tensor_t *b, float eps, gaaw_tensor_t *x2, gaaw_tensor_t *h,
                                         gaaw_tensor_t *mean, gaaw_tensor_t *rstd)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y), NT(w), NT(b), NT(x2), NT(h));
  if (bias) CHECK_FLOATS(NT(x), NT(bias));
  CHECK_F32(NT(mean), NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, y, "y", N, C, "x's (N, C)"));
  GAAW_CHECK(check_mat(ctx, x2, "x2", N, C, "x's (N, C)"));
  GAAW_CHECK(check_mat(ctx, h, "h", N, C, "x's (N, C)"));
  if (bias) GAAW_CHECK(check_numel(ctx, bias, "bias", C, "C"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, b, "b", C, "C"));
  GAAW_CHECK(check_numel(ctx, mean, "mean", N, "N"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  GAAW_CHECK(check_positive(ctx, eps, "eps"));
  if (!gaaw_device_has_add_layernorm_forward(ctx->device)) {
    if (bias) GAAW_CHECK(gaaw_bias_add(ctx, y, bias));
    GAAW_CHECK(gaaw_add(ctx, x, y, x2));
    GAAW_CHECK(gaaw_layernorm_forward(ctx, x2, w, b, eps, h, mean, rstd));
    return GAAW_SUCCESS;
  }
  RUN(add_layernorm_forward, x2, x, y, bias, w, b, eps, x2, h, mean, rstd);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cross_entropy_forward(gaaw_context_t ctx, const gaaw_tensor_t *logits,
                                         const gaaw_tensor_t *targets, int64_t vocab_start, float dloss,
                                         gaaw_tensor_t *max, gaaw_tensor_t *sumexp, gaaw_tensor_t *target,
                                         gaaw_tensor_t *dlogits)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits));
  if (dlogits) CHECK_FLOATS(NT(logits), NT(dlogits));
  CHECK_I32(NT(targets));
  CHECK_F32(NT(max), NT(sumexp), NT(target));
  int64_t N = lead(logits);
  if (dlogits) GAAW_CHECK(check_mat(ctx, dlogits, "dlogits", N, last(logits), "logits' (N, V)"));
  GAAW_CHECK(check_numel(ctx, targets, "targets", N, "logits' N"));
  GAAW_CHECK(check_numel(ctx, max, "max", N, "logits' N"));
  GAAW_CHECK(check_numel(ctx, sumexp, "sumexp", N, "logits' N"));
  GAAW_CHECK(check_numel(ctx, target, "target", N, "logits' N"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  GAAW_CHECK(check_finite_arg(ctx, dloss, "dloss"));
  if (!gaaw_device_has_cross_entropy_forward(ctx->device)) {
    GAAW_CHECK(gaaw_row_max(ctx, logits, max));
    GAAW_CHECK(gaaw_row_sum_exp(ctx, logits, max, sumexp));
    GAAW_CHECK(gaaw_target_logit(ctx, logits, targets, vocab_start, target));
    if (dlogits)
      GAAW_CHECK(gaaw_cross_entropy_backward(ctx, logits, max, sumexp, targets, vocab_start, dloss, dlogits));
    return GAAW_SUCCESS;
  }
  RUN(cross_entropy_forward, logits, logits, targets, vocab_start, dloss, max, sumexp, target,
                                                dlogits);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_gelu_backward_set(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                     gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(x), NT(dx));
  GAAW_CHECK(check_numel(ctx, dy, "dy", gaaw_tensor_numel(x), "numel(x)"));
  GAAW_CHECK(check_numel(ctx, dx, "dx", gaaw_tensor_numel(x), "numel(x)"));
  if (!gaaw_device_has_gelu_backward_set(ctx->device)) {
    GAAW_CHECK(gaaw_fill(ctx, dx, 0.0f));
    GAAW_CHECK(gaaw_gelu_backward(ctx, dy, x, dx));
    return GAAW_SUCCESS;
  }
  RUN(gelu_backward_set, dx, dy, x, dx);
  return GAAW_SUCCESS;
}

/* qkv (B, T, 3H, D); every tensor of list (B, T, H, D); probs (B H, T, T). */
static gaaw_status_t check_attention_qkv(gaaw_context_t ctx, const gaaw_tensor_t *qkv, int n, const named_tensor *list,
                                         const gaaw_tensor_t *probs)
{
  GAAW_ARG_CHECK(ctx, qkv->ndim == 4 && qkv->shape[2] % 3 == 0 && qkv->shape[3] > 0,
                 "tensor qkv has shape %s; expected (B, T, 3H, D) with D > 0", shape_of(qkv).s);
  int64_t B = qkv->shape[0], T = qkv->shape[1], H = qkv->shape[2] / 3, D = qkv->shape[3];
  for (int i = 0; i < n; i++) {
    const gaaw_tensor_t *t = list[i].t;
    GAAW_ARG_CHECK(ctx, t->ndim == 4 && t->shape[0] == B && t->shape[1] == T && t->shape[2] == H && t->shape[3] == D,
                   "tensor %s has shape %s; expected qkv's (B, T, H, D) = (%lld, %lld, %lld, %lld)", list[i].name,
                   shape_of(t).s, (long long)B, (long long)T, (long long)H, (long long)D);
  }
  GAAW_CHECK(check_bmat(ctx, probs, "probs", B * H, T, T, "qkv's (B H, T, T)"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_qkv_forward(gaaw_context_t ctx, const gaaw_tensor_t *qkv, gaaw_tensor_t *probs,
                                         gaaw_tensor_t *out)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(qkv), NT(probs), NT(out));
  GAAW_CHECK(check_attention_qkv(ctx, qkv, 1, (named_tensor[]){NT(out)}, probs));
  RUN(attention_qkv_forward, probs, qkv, probs, out);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_qkv_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *qkv,
                                          const gaaw_tensor_t *probs, gaaw_tensor_t *dprobs, gaaw_tensor_t *dqkv)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dout), NT(qkv), NT(probs), NT(dprobs), NT(dqkv));
  GAAW_CHECK(check_attention_qkv(ctx, qkv, 1, (named_tensor[]){NT(dout)}, probs));
  GAAW_CHECK(check_bmat(ctx, dprobs, "dprobs", batch_of(probs), last(probs), last(probs), "probs' (B H, T, T)"));
  GAAW_ARG_CHECK(ctx, dqkv->ndim == 4 && dqkv->shape[0] == qkv->shape[0] && dqkv->shape[1] == qkv->shape[1] &&
                   dqkv->shape[2] == qkv->shape[2] && dqkv->shape[3] == qkv->shape[3],
                 "tensor dqkv has shape %s; expected qkv's %s", shape_of(dqkv).s, shape_of(qkv).s);
  RUN(attention_qkv_backward, probs, dout, qkv, probs, dprobs, dqkv);
  return GAAW_SUCCESS;
}
