/* The public kernel functions (include/gaaw/kernels.h): every argument is checked
 * here (with the helpers of kernel_check.h, shared with the fused kernels of
 * fused.c), once for all backends, then the call goes to the context's device table.
 *
 * Shapes: "(N, C)" in the header means any tensor whose last extent is C; N is the
 * product of the others, so (B, T, C) activations pass as (B*T, C). Likewise a
 * "(B, m, k)" batch of matrices is (..., m, k) with B the product of the leading
 * extents. The float tensors of one call share one dtype (f32, bf16 or f16), except
 * for the AdamW parameters and gradients and the cast, whose dtypes are free. */
#include "backends/kernel_check.h"
#include "backends/kernel_trace.h"

/* ---------------------------------------------------------------- GEMM */

gaaw_status_t gaaw_gemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                        const gaaw_tensor_t *a, const gaaw_tensor_t *b, float beta, gaaw_tensor_t *c)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_transpose(ctx, ta, "ta"));
  GAAW_CHECK(check_transpose(ctx, tb, "tb"));
  CHECK_FLOATS(NT(a), NT(b), NT(c));
  GAAW_CHECK(check_gemm_shapes(ctx, ta, tb, lead(a), last(a), lead(b), last(b), lead(c), last(c), a, b, c));
  double t0 = kernel_start(ctx);
  GAAW_CHECK(ctx->device->gemm(ctx, ta, tb, alpha, a, b, beta, c));
  gemm_end(ctx, "gemm", t0, ta, tb, 1, lead(c), last(c), ta == GAAW_OP_N ? last(a) : lead(a));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_gemm_batched(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                                const gaaw_tensor_t *a, const gaaw_tensor_t *b, float beta, gaaw_tensor_t *c)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_transpose(ctx, ta, "ta"));
  GAAW_CHECK(check_transpose(ctx, tb, "tb"));
  CHECK_FLOATS(NT(a), NT(b), NT(c));
  GAAW_ARG_CHECK(ctx, a->ndim >= 2 && b->ndim >= 2 && c->ndim >= 2 && batch_of(a) == batch_of(c) &&
                          batch_of(b) == batch_of(c),
                 "a %s, b %s and c %s must be batches (..., rows, cols) of the same count", shape_of(a).s,
                 shape_of(b).s, shape_of(c).s);
  GAAW_CHECK(check_gemm_shapes(ctx, ta, tb, second_last(a), last(a), second_last(b), last(b), second_last(c),
                               last(c), a, b, c));
  double t0 = kernel_start(ctx);
  GAAW_CHECK(ctx->device->gemm_batched(ctx, ta, tb, alpha, a, b, beta, c));
  gemm_end(ctx, "gemm_batched", t0, ta, tb, batch_of(c), second_last(c), last(c),
           ta == GAAW_OP_N ? last(a) : second_last(a));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- norms */

gaaw_status_t gaaw_layernorm_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *w,
                                     const gaaw_tensor_t *b, float eps, gaaw_tensor_t *y, gaaw_tensor_t *mean,
                                     gaaw_tensor_t *rstd)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(w), NT(b), NT(y));
  CHECK_F32(NT(mean), NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, y, "y", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, b, "b", C, "C"));
  GAAW_CHECK(check_numel(ctx, mean, "mean", N, "N"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  GAAW_CHECK(check_positive(ctx, eps, "eps"));
  RUN(layernorm_forward, y, x, w, b, eps, y, mean, rstd);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layernorm_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                      const gaaw_tensor_t *w, const gaaw_tensor_t *mean, const gaaw_tensor_t *rstd,
                                      gaaw_tensor_t *dx, gaaw_tensor_t *dw, gaaw_tensor_t *db)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(x), NT(w), NT(dx), NT(dw), NT(db));
  CHECK_F32(NT(mean), NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, dy, "dy", N, C, "x's (N, C)"));
  GAAW_CHECK(check_mat(ctx, dx, "dx", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, dw, "dw", C, "C"));
  GAAW_CHECK(check_numel(ctx, db, "db", C, "C"));
  GAAW_CHECK(check_numel(ctx, mean, "mean", N, "N"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  RUN(layernorm_backward, dx, dy, x, w, mean, rstd, dx, dw, db);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_rmsnorm_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *w, float eps,
                                   gaaw_tensor_t *y, gaaw_tensor_t *rstd)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(w), NT(y));
  CHECK_F32(NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, y, "y", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  GAAW_CHECK(check_positive(ctx, eps, "eps"));
  RUN(rmsnorm_forward, y, x, w, eps, y, rstd);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_rmsnorm_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                    const gaaw_tensor_t *w, const gaaw_tensor_t *rstd, gaaw_tensor_t *dx,
                                    gaaw_tensor_t *dw)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(x), NT(w), NT(dx), NT(dw));
  CHECK_F32(NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, dy, "dy", N, C, "x's (N, C)"));
  GAAW_CHECK(check_mat(ctx, dx, "dx", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, dw, "dw", C, "C"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  RUN(rmsnorm_backward, dx, dy, x, w, rstd, dx, dw);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- activations */

static gaaw_status_t check_elementwise_kind(gaaw_context_t ctx, gaaw_activation_t act)
{
  GAAW_ARG_CHECK(ctx, (int)act >= 0 && (int)act < GAAW_ACT_COUNT, "activation %d is not a gaaw_activation_t",
                 (int)act);
  GAAW_ARG_CHECK(ctx, act != GAAW_ACT_SWIGLU, "SwiGLU is gated, not elementwise: use gaaw_swiglu_forward/backward");
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_activation_forward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *x,
                                      gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_elementwise_kind(ctx, act));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_numel(ctx, y, "y", gaaw_tensor_numel(x), "numel(x)"));
  RUN(activation_forward, y, act, x, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_activation_backward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *dy,
                                       const gaaw_tensor_t *x, gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_elementwise_kind(ctx, act));
  CHECK_FLOATS(NT(dy), NT(x), NT(dx));
  GAAW_CHECK(check_numel(ctx, dy, "dy", gaaw_tensor_numel(x), "numel(x)"));
  GAAW_CHECK(check_numel(ctx, dx, "dx", gaaw_tensor_numel(x), "numel(x)"));
  RUN(activation_backward, dx, act, dy, x, dx);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_gelu_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  return gaaw_activation_forward(ctx, GAAW_ACT_GELU, x, y);
}

gaaw_status_t gaaw_gelu_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                 gaaw_tensor_t *dx)
{
  return gaaw_activation_backward(ctx, GAAW_ACT_GELU, dy, x, dx);
}

gaaw_status_t gaaw_swiglu_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_mat(ctx, x, "x", lead(y), 2 * last(y), "(N, 2H) for y (N, H)"));
  RUN(swiglu_forward, x, x, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_swiglu_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                   gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(x), NT(dx));
  GAAW_CHECK(check_mat(ctx, x, "x", lead(dy), 2 * last(dy), "(N, 2H) for dy (N, H)"));
  GAAW_CHECK(check_mat(ctx, dx, "dx", lead(dy), 2 * last(dy), "(N, 2H) for dy (N, H)"));
  RUN(swiglu_backward, dx, dy, x, dx);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- elementwise */

gaaw_status_t gaaw_bias_add(gaaw_context_t ctx, gaaw_tensor_t *y, const gaaw_tensor_t *b)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(y), NT(b));
  GAAW_CHECK(check_numel(ctx, b, "b", last(y), "y's last extent C"));
  RUN(bias_add, y, y, b);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_bias_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, gaaw_tensor_t *db)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(db));
  GAAW_CHECK(check_numel(ctx, db, "db", last(dy), "dy's last extent C"));
  RUN(bias_backward, dy, dy, db);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_add(gaaw_context_t ctx, const gaaw_tensor_t *a, const gaaw_tensor_t *b, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(a), NT(b), NT(y));
  GAAW_CHECK(check_numel(ctx, b, "b", gaaw_tensor_numel(a), "numel(a)"));
  GAAW_CHECK(check_numel(ctx, y, "y", gaaw_tensor_numel(a), "numel(a)"));
  RUN(add, y, a, b, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_axpy(gaaw_context_t ctx, float alpha, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_numel(ctx, y, "y", gaaw_tensor_numel(x), "numel(x)"));
  RUN(axpy, y, alpha, x, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_scale(gaaw_context_t ctx, gaaw_tensor_t *x, float alpha)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x));
  RUN(scale, x, x, alpha);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- embedding */

gaaw_status_t gaaw_embedding_forward(gaaw_context_t ctx, const gaaw_tensor_t *tokens, const gaaw_tensor_t *table,
                                     int64_t vocab_start, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_I32(NT(tokens));
  CHECK_FLOATS(NT(table), NT(y));
  GAAW_CHECK(check_mat(ctx, y, "y", gaaw_tensor_numel(tokens), last(table), "(numel(tokens), C)"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  RUN(embedding_forward, y, tokens, table, vocab_start, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_embedding_backward(gaaw_context_t ctx, const gaaw_tensor_t *tokens, const gaaw_tensor_t *dy,
                                      int64_t vocab_start, gaaw_tensor_t *dtable)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_I32(NT(tokens));
  CHECK_FLOATS(NT(dy), NT(dtable));
  GAAW_CHECK(check_mat(ctx, dy, "dy", gaaw_tensor_numel(tokens), last(dtable), "(numel(tokens), C)"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  RUN(embedding_backward, dy, tokens, dy, vocab_start, dtable);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- cross-entropy */

gaaw_status_t gaaw_row_max(gaaw_context_t ctx, const gaaw_tensor_t *logits, gaaw_tensor_t *max)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits));
  CHECK_F32(NT(max));
  GAAW_CHECK(check_numel(ctx, max, "max", lead(logits), "logits' N"));
  RUN(row_max, logits, logits, max);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_row_sum_exp(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *max,
                               gaaw_tensor_t *sumexp)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits));
  CHECK_F32(NT(max), NT(sumexp));
  GAAW_CHECK(check_numel(ctx, max, "max", lead(logits), "logits' N"));
  GAAW_CHECK(check_numel(ctx, sumexp, "sumexp", lead(logits), "logits' N"));
  RUN(row_sum_exp, logits, logits, max, sumexp);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_target_logit(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *targets,
                                int64_t vocab_start, gaaw_tensor_t *target)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits));
  CHECK_I32(NT(targets));
  CHECK_F32(NT(target));
  GAAW_CHECK(check_numel(ctx, targets, "targets", lead(logits), "logits' N"));
  GAAW_CHECK(check_numel(ctx, target, "target", lead(logits), "logits' N"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  RUN(target_logit, logits, logits, targets, vocab_start, target);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cross_entropy_backward(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *max,
                                          const gaaw_tensor_t *sumexp, const gaaw_tensor_t *targets,
                                          int64_t vocab_start, float dloss, gaaw_tensor_t *dlogits)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits), NT(dlogits));
  CHECK_F32(NT(max), NT(sumexp));
  CHECK_I32(NT(targets));
  int64_t N = lead(logits);
  GAAW_CHECK(check_mat(ctx, dlogits, "dlogits", N, last(logits), "logits' (N, V)"));
  GAAW_CHECK(check_numel(ctx, max, "max", N, "logits' N"));
  GAAW_CHECK(check_numel(ctx, sumexp, "sumexp", N, "logits' N"));
  GAAW_CHECK(check_numel(ctx, targets, "targets", N, "logits' N"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  GAAW_CHECK(check_finite_arg(ctx, dloss, "dloss"));
  RUN(cross_entropy_backward, logits, logits, max, sumexp, targets, vocab_start, dloss, dlogits);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_regression_loss(gaaw_context_t ctx, gaaw_loss_t kind, float delta, const gaaw_tensor_t *pred,
                                   const gaaw_tensor_t *target, const gaaw_tensor_t *weights, gaaw_tensor_t *loss,
                                   gaaw_tensor_t *grad)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_ARG_CHECK(ctx, (int)kind >= 0 && (int)kind < GAAW_LOSS_COUNT, "loss %d is not a gaaw_loss_t", (int)kind);
  GAAW_CHECK(check_positive(ctx, delta, "delta"));
  CHECK_FLOATS(NT(pred), NT(target), NT(grad));
  CHECK_F32(NT(loss));
  int64_t n = gaaw_tensor_numel(pred);
  GAAW_CHECK(check_numel(ctx, target, "target", n, "numel(pred)"));
  GAAW_CHECK(check_numel(ctx, grad, "grad", n, "numel(pred)"));
  GAAW_CHECK(check_numel(ctx, loss, "loss", n, "numel(pred)"));
  if (weights) {
    CHECK_F32(NT(weights));
    GAAW_CHECK(check_numel(ctx, weights, "weights", n, "numel(pred)"));
  }
  RUN(regression_loss, pred, kind, delta, pred, target, weights, loss, grad);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- optimizer */

static gaaw_status_t check_adamw_args(gaaw_context_t ctx, const gaaw_adamw_args_t *a)
{
  GAAW_ARG_NOT_NULL(ctx, a);
  GAAW_ARG_CHECK(ctx, a->lr >= 0.0f && isfinite(a->lr), "args->lr must be finite and >= 0, got %g", (double)a->lr);
  GAAW_ARG_CHECK(ctx, a->beta1 >= 0.0f && a->beta1 < 1.0f, "args->beta1 must be in [0, 1), got %g", (double)a->beta1);
  GAAW_ARG_CHECK(ctx, a->beta2 >= 0.0f && a->beta2 < 1.0f, "args->beta2 must be in [0, 1), got %g", (double)a->beta2);
  GAAW_CHECK(check_positive(ctx, a->eps, "args->eps"));
  GAAW_ARG_CHECK(ctx, a->weight_decay >= 0.0f && isfinite(a->weight_decay),
                 "args->weight_decay must be finite and >= 0, got %g", (double)a->weight_decay);
  GAAW_CHECK(check_finite_arg(ctx, a->grad_scale, "args->grad_scale"));
  GAAW_ARG_CHECK(ctx, a->step >= 1, "args->step must be >= 1 (1 for the first update), got %lld", (long long)a->step);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_adamw_update(gaaw_context_t ctx, gaaw_tensor_t *params, const gaaw_tensor_t *grads,
                                gaaw_tensor_t *master, gaaw_tensor_t *m, gaaw_tensor_t *v,
                                const gaaw_adamw_args_t *args)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_FLOAT, 0, NT(params), NT(grads)));
  /* Without master weights the update happens on params, which must be f32. */
  GAAW_CHECK(GROUP(master ? MASK_FLOAT : MASK_F32, 0, NT(params)));
  CHECK_F32(NT(m), NT(v));
  if (master) CHECK_F32(NT(master));
  int64_t n = gaaw_tensor_numel(params);
  GAAW_CHECK(check_numel(ctx, grads, "grads", n, "numel(params)"));
  GAAW_CHECK(check_numel(ctx, m, "m", n, "numel(params)"));
  GAAW_CHECK(check_numel(ctx, v, "v", n, "numel(params)"));
  if (master) GAAW_CHECK(check_numel(ctx, master, "master", n, "numel(params)"));
  GAAW_CHECK(check_adamw_args(ctx, args));
  RUN(adamw_update, params, params, grads, master, m, v, args);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- utilities */

gaaw_status_t gaaw_cast(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_ANY, 0, NT(x), NT(y)));
  GAAW_CHECK(check_numel(ctx, y, "y", gaaw_tensor_numel(x), "numel(x)"));
  RUN(cast, x, x, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_permute_0213(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_ANY, 1, NT(x), NT(y)));
  GAAW_ARG_CHECK(ctx, x->ndim == 4 && y->ndim == 4 && y->shape[0] == x->shape[0] && y->shape[1] == x->shape[2] &&
                          y->shape[2] == x->shape[1] && y->shape[3] == x->shape[3],
                 "permute_0213 maps x (A, B, C, D) to y (A, C, B, D); got x %s and y %s", shape_of(x).s,
                 shape_of(y).s);
  RUN(permute_0213, x, x, y);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sum_squares(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *out)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_FLOAT, 0, NT(x)));
  CHECK_F32(NT(out));
  GAAW_CHECK(check_numel(ctx, out, "out", 1, "one"));
  RUN(sum_squares, x, x, out);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_check_finite(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *flag)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_FLOAT, 0, NT(x)));
  CHECK_I32(NT(flag));
  GAAW_CHECK(check_numel(ctx, flag, "flag", 1, "one"));
  RUN(check_finite, x, x, flag);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_fill(gaaw_context_t ctx, gaaw_tensor_t *x, float value)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_ANY, 0, NT(x)));
  /* i32 rounds toward zero; values outside the int32 range have no conversion. */
  GAAW_ARG_CHECK(ctx, x->dtype != GAAW_I32 || (value > -2147483904.0f && value < 2147483648.0f),
                 "value %g does not fit the i32 tensor x", (double)value);
  RUN(fill, x, x, value);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_synchronize(gaaw_context_t ctx)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(ctx->device->synchronize(ctx));
  return GAAW_SUCCESS;
}
