/* Fused kernels: each does in one pass over memory what a sequence of the public
 * kernels (include/gaaw/kernels.h) does in several. Internal to the library (no
 * Fortran interface); used by parallel/. Every function checks its arguments as the
 * public kernels do, then runs the device's fused kernel, or, on a backend without
 * one (CUDA today), the unfused sequence it replaces: callers need no case of their
 * own. The exception is the attention on the QKV layout (last below), whose callers
 * choose. "Bit-identical" below is the host kernels' promise against the unfused
 * sequence, for f32, bf16 and f16 (a 16-bit intermediate is rounded where the
 * sequence stores it), on any thread count (tests/unit/test_kernel_fused). The
 * OpenCL kernels do the same operations per element, from the same helpers as the
 * unfused kernels, but its compiler may contract them differently per kernel: they
 * are held to the host within the conformance tolerances (tests/backend). Not
 * collective. */
#ifndef GAAW_BACKENDS_FUSED_H
#define GAAW_BACKENDS_FUSED_H

#include "gaaw/kernels.h"

/* u += b, then a = gelu(u) (tanh approximation); the MLP keeps both.
 * u, a: (N, F)   b: (F)
 * Bit-identical to gaaw_bias_add(u, b); gaaw_gelu_forward(u, a). */
gaaw_status_t gaaw_bias_gelu_forward(gaaw_context_t ctx, gaaw_tensor_t *u, const gaaw_tensor_t *b,
                                     gaaw_tensor_t *a);

/* The residual add of a branch whose bias is still to come: out = x + (y + bias).
 * x, y, out: (N, C)   bias: (C). out may be x or y. y is the caller's scratch: its
 * contents are unspecified afterwards (the unfused sequence adds the bias into it).
 * Bit-identical to gaaw_bias_add(y, bias); gaaw_add(x, y, out). */
gaaw_status_t gaaw_bias_residual_add(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y,
                                     const gaaw_tensor_t *bias, gaaw_tensor_t *out);

/* The residual add and the layernorm after it:
 *   x2 = x + (y + bias);  h = (x2 - mean) rstd w + b,  mean, rstd per row.
 * x, y, x2, h: (N, C)   bias, w, b: (C)   mean, rstd: (N) f32
 * bias may be NULL (x2 = x + y). y is the caller's scratch: with a bias its contents
 * are unspecified afterwards (the unfused sequence adds the bias into it). x2 and h
 * must not overlap x or y. The row statistics are summed in the order of
 * gaaw_layernorm_forward's, so the result is bit-identical to
 * gaaw_bias_add(y, bias); gaaw_add(x, y, x2); gaaw_layernorm_forward(x2, w, b, eps,
 * h, mean, rstd). */
gaaw_status_t gaaw_add_layernorm_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y,
                                         const gaaw_tensor_t *bias, const gaaw_tensor_t *w,
                                         const gaaw_tensor_t *b, float eps, gaaw_tensor_t *x2, gaaw_tensor_t *h,
                                         gaaw_tensor_t *mean, gaaw_tensor_t *rstd);

/* Cross-entropy on logits of the vocabulary slice starting at vocab_start, one pass
 * per row: max, sumexp = sum exp(l - max), target = the target's logit (0 when it
 * is outside the slice or ignored, < 0), and, when dlogits is not NULL,
 * dlogits += dloss (softmax - onehot(target)) (ignored rows untouched). Use it when
 * the vocabulary is not split (tp 1): a split one needs the max and sum of exp
 * all-reduced between the passes.
 * logits, dlogits: (N, V)   targets: (N) i32   max, sumexp, target: (N) f32
 * Bit-identical to gaaw_row_max, gaaw_row_sum_exp, gaaw_target_logit and (with
 * dlogits) gaaw_cross_entropy_backward. */
gaaw_status_t gaaw_cross_entropy_forward(gaaw_context_t ctx, const gaaw_tensor_t *logits,
                                         const gaaw_tensor_t *targets, int64_t vocab_start, float dloss,
                                         gaaw_tensor_t *max, gaaw_tensor_t *sumexp, gaaw_tensor_t *target,
                                         gaaw_tensor_t *dlogits);

/* dx = dy gelu'(x), overwriting dx (whose contents may be anything).
 * dy, x, dx: same numel. Bit-identical to gaaw_fill(dx, 0); gaaw_gelu_backward(dy,
 * x, dx), which is what a backend without it runs. */
gaaw_status_t gaaw_gelu_backward_set(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                     gaaw_tensor_t *dx);

/* Causal attention on the layout the QKV projection writes, without the permutes
 * that split it into heads and merge them again:
 *   qkv: (B, T, 3H, D)  each token's q heads, then its k heads, then its v heads
 *   probs: (B H, T, T)  out: (B, T, H, D)
 * The same math as gaaw_attention_forward on q, k, v (B H, T, D) cut from qkv,
 * with out merged back to (B, T, H, D). The host and OpenCL backends have it (no
 * unfused sequence here: it would need scratch the size of qkv); elsewhere
 * GAAW_ERR_UNSUPPORTED, and gaaw_kernel_available says 0. */
gaaw_status_t gaaw_attention_qkv_forward(gaaw_context_t ctx, const gaaw_tensor_t *qkv, gaaw_tensor_t *probs,
                                         gaaw_tensor_t *out);
/* dqkv (B, T, 3H, D) = the gradients of qkv's q, k and v parts, from dout (B, T,
 * H, D) and the forward's probs; dprobs (B H, T, T): workspace, overwritten. dqkv
 * is overwritten, not added to as gaaw_attention_backward adds to dq, dk and dv (the
 * caller's scratch needs no zeroing). */
gaaw_status_t gaaw_attention_qkv_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *qkv,
                                          const gaaw_tensor_t *probs, gaaw_tensor_t *dprobs, gaaw_tensor_t *dqkv);

#endif
