/* The public kernel functions of the causal softmax and of attention, the (T, T)
 * matrix kernels and the blocked ones (include/gaaw/kernels.h), and the question
 * whether a backend has a kernel: arguments checked (backends/kernel_checks.h), then
 * the call goes to the context's device table. */
#include <string.h>

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

/* A block of queries against a block of keys: q and the qn tensors of qlike (out,
 * dout, dq) are (BH, Tq, D); the kn tensors of klike (k, v, dk, dv) are (BH, Tk, D)
 * with q's BH and D; lse is (BH, Tq); the mask is one and the starts are >= 0. */
static gaaw_status_t check_block(gaaw_context_t ctx, const gaaw_tensor_t *q, int qn, const named_tensor *qlike,
                                 int kn, const named_tensor *klike, const gaaw_tensor_t *lse, int64_t q_start,
                                 int64_t k_start, gaaw_attention_mask_t mask)
{
  GAAW_CHECK(check_attention(ctx, q, qn, qlike, NULL, NULL));
  const gaaw_tensor_t *k = klike[0].t;
  GAAW_ARG_CHECK(ctx, k->ndim >= 2, "tensor k has shape %s; expected (BH, Tk, D)", shape_of(k).s);
  for (int i = 0; i < kn; i++)
    GAAW_CHECK(check_bmat(ctx, klike[i].t, klike[i].name, batch_of(q), second_last(k), last(q),
                          "(BH, Tk, D) with q's BH and D"));
  GAAW_CHECK(check_mat(ctx, lse, "lse", batch_of(q), second_last(q), "q's (BH, Tq)"));
  GAAW_ARG_CHECK(ctx, mask == GAAW_ATTENTION_CAUSAL || mask == GAAW_ATTENTION_FULL,
                 "mask %d is neither GAAW_ATTENTION_CAUSAL nor GAAW_ATTENTION_FULL", (int)mask);
  GAAW_ARG_CHECK(ctx, q_start >= 0 && k_start >= 0, "q_start (%lld) and k_start (%lld) must be >= 0",
                 (long long)q_start, (long long)k_start);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_block_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                           const gaaw_tensor_t *v, int64_t q_start, int64_t k_start,
                                           gaaw_attention_mask_t mask, gaaw_tensor_t *out, gaaw_tensor_t *lse)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(q), NT(k), NT(v), NT(out));
  CHECK_F32(NT(lse));
  GAAW_CHECK(check_block(ctx, q, 1, (named_tensor[]){NT(out)}, 2, (named_tensor[]){NT(k), NT(v)}, lse, q_start,
                         k_start, mask));
  RUN(attention_block_forward, q, q, k, v, q_start, k_start, mask == GAAW_ATTENTION_CAUSAL, out, lse);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_block_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                            const gaaw_tensor_t *k, const gaaw_tensor_t *v,
                                            const gaaw_tensor_t *out, const gaaw_tensor_t *lse, int64_t q_start,
                                            int64_t k_start, gaaw_attention_mask_t mask, gaaw_tensor_t *dq,
                                            gaaw_tensor_t *dk, gaaw_tensor_t *dv)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dout), NT(q), NT(k), NT(v), NT(out), NT(dq), NT(dk), NT(dv));
  CHECK_F32(NT(lse));
  GAAW_CHECK(check_block(ctx, q, 3, (named_tensor[]){NT(dout), NT(out), NT(dq)}, 4,
                         (named_tensor[]){NT(k), NT(v), NT(dk), NT(dv)}, lse, q_start, k_start, mask));
  RUN(attention_block_backward, q, dout, q, k, v, out, lse, q_start, k_start, mask == GAAW_ATTENTION_CAUSAL, dq, dk,
      dv);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_merge(gaaw_context_t ctx, gaaw_tensor_t *out, gaaw_tensor_t *lse,
                                   const gaaw_tensor_t *part_out, const gaaw_tensor_t *part_lse)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(out), NT(part_out));
  CHECK_F32(NT(lse), NT(part_lse));
  GAAW_CHECK(check_attention(ctx, out, 1, (named_tensor[]){NT(part_out)}, NULL, NULL));
  GAAW_CHECK(check_mat(ctx, lse, "lse", batch_of(out), second_last(out), "out's (BH, Tq)"));
  GAAW_CHECK(check_mat(ctx, part_lse, "part_lse", batch_of(out), second_last(out), "out's (BH, Tq)"));
  RUN(attention_merge, out, out, lse, part_out, part_lse);
  return GAAW_SUCCESS;
}

/* The causal attention of a whole sequence: one block, both starts 0. */
gaaw_status_t gaaw_flash_attention_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                           const gaaw_tensor_t *v, gaaw_tensor_t *out, gaaw_tensor_t *lse)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_ARG_NOT_NULL(ctx, q);
  GAAW_ARG_NOT_NULL(ctx, k);
  GAAW_ARG_CHECK(ctx, q->ndim >= 2 && k->ndim >= 2 && second_last(q) == second_last(k),
                 "tensor k has shape %s; expected q's (BH, T, D)", shape_of(k).s);
  return gaaw_attention_block_forward(ctx, q, k, v, 0, 0, GAAW_ATTENTION_CAUSAL, out, lse);
}

gaaw_status_t gaaw_flash_attention_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                            const gaaw_tensor_t *k, const gaaw_tensor_t *v, const gaaw_tensor_t *out,
                                            const gaaw_tensor_t *lse, gaaw_tensor_t *dq, gaaw_tensor_t *dk,
                                            gaaw_tensor_t *dv)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_ARG_NOT_NULL(ctx, q);
  GAAW_ARG_NOT_NULL(ctx, k);
  GAAW_ARG_CHECK(ctx, q->ndim >= 2 && k->ndim >= 2 && second_last(q) == second_last(k),
                 "tensor k has shape %s; expected q's (BH, T, D)", shape_of(k).s);
  return gaaw_attention_block_backward(ctx, dout, q, k, v, out, lse, 0, 0, GAAW_ATTENTION_CAUSAL, dq, dk, dv);
}

gaaw_status_t gaaw_kernel_available(gaaw_context_t ctx, const char *kernel, int *available)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_ARG_NOT_NULL(ctx, kernel);
  GAAW_ARG_NOT_NULL(ctx, available);
  /* the blocked attention's kernels answer to their older flash_attention_ names too */
  char name[64];
  if (strncmp(kernel, "flash_attention_", 16) == 0 && strlen(kernel) < sizeof name - 16)
    snprintf(name, sizeof name, "attention_block_%s", kernel + 16), kernel = name;
  int has = gaaw_device_provides(ctx->device, kernel);
  GAAW_ARG_CHECK(ctx, has >= 0, "kernel \"%s\" is no gaaw kernel", kernel);
  *available = has;
  return GAAW_SUCCESS;
}
