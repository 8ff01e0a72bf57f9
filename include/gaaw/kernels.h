/* gaaw kernels: the device operations every backend offers, on tensor views.
 * Float tensors may be f32, bf16 or f16 (16-bit types are computed in f32); the
 * statistics that forward passes save for backward (mean, rstd, row max, sum of exp)
 * are always f32; token ids, targets and flags are i32. Tensors are contiguous and
 * row-major; shapes are checked against each other (GAAW_ERR_INVALID_ARG names the
 * tensor and the shapes).
 *
 * Gradients accumulate: every backward adds (+=) into dx, dw and db, so residual
 * streams, shared parameters and microbatches need no special case. Zero them with
 * gaaw_fill first where a fresh gradient is wanted.
 *
 * Kernels are queued on the context's compute stream (the host backend runs them at
 * once) and are not collective. */
#ifndef GAAW_KERNELS_H
#define GAAW_KERNELS_H

#include "gaaw/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GAAW_OP_N = 0, GAAW_OP_T = 1 } gaaw_transpose_t;

/* c = alpha op(a) op(b) + beta c.
 * a: (m, k), or (k, m) with GAAW_OP_T   b: (k, n), or (n, k) with GAAW_OP_T   c: (m, n) */
gaaw_status_t gaaw_gemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                        const gaaw_tensor_t *a, const gaaw_tensor_t *b, float beta, gaaw_tensor_t *c);
/* The same for each of B independent matrices.
 * a: (B, m, k) or (B, k, m)   b: (B, k, n) or (B, n, k)   c: (B, m, n) */
gaaw_status_t gaaw_gemm_batched(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb,
                                float alpha, const gaaw_tensor_t *a, const gaaw_tensor_t *b,
                                float beta, gaaw_tensor_t *c);

/* y = (x - mean) * rstd * w + b over the last dimension.
 * x, y: (N, C)   w, b: (C)   mean, rstd: (N) f32, saved for backward */
gaaw_status_t gaaw_layernorm_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *w,
                                     const gaaw_tensor_t *b, float eps, gaaw_tensor_t *y,
                                     gaaw_tensor_t *mean, gaaw_tensor_t *rstd);
/* dx += d/dx, dw += sum_n dy * xhat, db += sum_n dy. */
gaaw_status_t gaaw_layernorm_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                      const gaaw_tensor_t *w, const gaaw_tensor_t *mean,
                                      const gaaw_tensor_t *rstd, gaaw_tensor_t *dx, gaaw_tensor_t *dw,
                                      gaaw_tensor_t *db);
/* y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).
 * x, y: (N, C)   w: (C)   rstd: (N) f32 */
gaaw_status_t gaaw_rmsnorm_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *w,
                                   float eps, gaaw_tensor_t *y, gaaw_tensor_t *rstd);
gaaw_status_t gaaw_rmsnorm_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                    const gaaw_tensor_t *w, const gaaw_tensor_t *rstd,
                                    gaaw_tensor_t *dx, gaaw_tensor_t *dw);

/* Activation functions. GELU is the tanh approximation
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); ReLU max(x, 0) (slope 0 at 0, as
 * PyTorch); SiLU x sigmoid(x); none the identity. SwiGLU is gated (two inputs per
 * output: gaaw_swiglu_*); every other kind is elementwise (gaaw_activation_*). */
typedef enum {
  GAAW_ACT_GELU = 0,
  GAAW_ACT_SWIGLU = 1,
  GAAW_ACT_NONE = 2,
  GAAW_ACT_RELU = 3,
  GAAW_ACT_TANH = 4,
  GAAW_ACT_SILU = 5
} gaaw_activation_t;
#define GAAW_ACT_COUNT 6

/* y = act(x), elementwise; act is any kind but GAAW_ACT_SWIGLU.
 * x, y: same numel */
gaaw_status_t gaaw_activation_forward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *x,
                                      gaaw_tensor_t *y);
/* dx += dy * act'(x).   dy, x, dx: same numel */
gaaw_status_t gaaw_activation_backward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *dy,
                                       const gaaw_tensor_t *x, gaaw_tensor_t *dx);
/* GELU alone: gaaw_activation_forward / _backward with GAAW_ACT_GELU. */
gaaw_status_t gaaw_gelu_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y);
gaaw_status_t gaaw_gelu_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                 gaaw_tensor_t *dx);
/* SwiGLU: y = silu(x[:, :H]) * x[:, H:].   x, dx: (N, 2H)   y, dy: (N, H) */
gaaw_status_t gaaw_swiglu_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y);
gaaw_status_t gaaw_swiglu_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                   gaaw_tensor_t *dx);

/* Rotary position embedding, Hugging Face's rotate-half convention: for each row
 * (b, t), each of the first `heads` heads and i < D/2,
 *   y[i]       = x[i] c - x[i + D/2] s,   y[i + D/2] = x[i + D/2] c + x[i] s,
 * with c = table[t][i], s = table[t][D/2 + i] (gaaw_rope_table); the heads from `heads`
 * on are copied (in a fused QKV block: rotate q and k, pass v). gaaw_rope_backward
 * applies the inverse rotation, dx = R^T dy (s negated). Unlike the other backward
 * kernels both OVERWRITE their output. y may be x (in place); otherwise they must
 * not overlap.
 * x, y: (B, T, NH, D), D even   table: f32 (T, D)   0 < heads <= NH */
gaaw_status_t gaaw_rope_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *table, int64_t heads,
                                gaaw_tensor_t *y);
gaaw_status_t gaaw_rope_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *table,
                                 int64_t heads, gaaw_tensor_t *dx);
/* The rotary table of positions pos0 .. pos0 + T - 1 into host memory table (T, D):
 * row t holds cos(a_i) for i < D/2, then sin(a_i), a_i = (pos0 + t) theta^(-2i/D).
 * Each angle is formed and reduced modulo 2 pi in double precision before its cosine
 * and sine, so every entry is within 1 ulp of f32 at any position (at 65,536 and
 * beyond, where an f32 angle would already be off by up to 4e-3 rad).
 * GAAW_ERR_INVALID_ARG, with its report in gaaw_last_error(NULL), for T < 0, D odd or
 * below 2, pos0 < 0, theta not finite or <= 1, or table NULL (when T > 0). */
gaaw_status_t gaaw_rope_table(int64_t T, int64_t D, int64_t pos0, double theta, float *table);

/* y += b, broadcast over rows.   y: (N, C)   b: (C) */
gaaw_status_t gaaw_bias_add(gaaw_context_t ctx, gaaw_tensor_t *y, const gaaw_tensor_t *b);
/* db += sum_n dy.   dy: (N, C)   db: (C) */
gaaw_status_t gaaw_bias_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, gaaw_tensor_t *db);
/* y = a + b (residual add); y may be a or b.   a, b, y: same numel */
gaaw_status_t gaaw_add(gaaw_context_t ctx, const gaaw_tensor_t *a, const gaaw_tensor_t *b, gaaw_tensor_t *y);
/* y += alpha x.   x, y: same numel */
gaaw_status_t gaaw_axpy(gaaw_context_t ctx, float alpha, const gaaw_tensor_t *x, gaaw_tensor_t *y);
/* x *= alpha, in place. */
gaaw_status_t gaaw_scale(gaaw_context_t ctx, gaaw_tensor_t *x, float alpha);

/* Causal softmax of scaled scores: row t of each (T, T) matrix sees columns 0..t,
 * y[t][j] = exp(scale x[t][j] - max) / sum for j <= t, 0 for j > t.
 * x, y: (B, T, T) */
gaaw_status_t gaaw_causal_softmax_forward(gaaw_context_t ctx, float scale, const gaaw_tensor_t *x,
                                          gaaw_tensor_t *y);
/* dx += scale * y * (dy - sum_j dy y). */
gaaw_status_t gaaw_causal_softmax_backward(gaaw_context_t ctx, float scale, const gaaw_tensor_t *y,
                                           const gaaw_tensor_t *dy, gaaw_tensor_t *dx);
/* Causal attention, scaled by 1 / sqrt(D): out = softmax(q k^T / sqrt(D)) v.
 * q, k, v, out: (BH, T, D)   probs: (BH, T, T), saved for backward */
gaaw_status_t gaaw_attention_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                     const gaaw_tensor_t *v, gaaw_tensor_t *probs, gaaw_tensor_t *out);
/* dq += .., dk += .., dv += ..  (dprobs: (BH, T, T) workspace, overwritten) */
gaaw_status_t gaaw_attention_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                      const gaaw_tensor_t *k, const gaaw_tensor_t *v,
                                      const gaaw_tensor_t *probs, gaaw_tensor_t *dprobs,
                                      gaaw_tensor_t *dq, gaaw_tensor_t *dk, gaaw_tensor_t *dv);

/* Blocked causal attention, scaled by 1 / sqrt(D) as above, without the (T, T)
 * matrix: tiles of query rows against blocks of keys with an online softmax (running
 * row max and sum, the output tile rescaled as they grow), blocks above the diagonal
 * skipped. What backward needs besides q, k, v and out is lse, the log-sum-exp of
 * each row's scaled scores: probs[t][j] = exp(q_t . k_j / sqrt(D) - lse[t]).
 * Matches gaaw_attention_forward's out within rounding (not bit for bit); on the host
 * backend every element is summed in a fixed order whatever the thread count, so the
 * results are bit-identical run to run and across thread counts.
 * q, k, v, out: (BH, T, D)   lse: (BH, T) f32, saved for backward */
gaaw_status_t gaaw_flash_attention_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                           const gaaw_tensor_t *v, gaaw_tensor_t *out, gaaw_tensor_t *lse);
/* dq += .., dk += .., dv += .. from the forward's out and lse: each probability block
 * is recomputed from q, k and lse, with rowsum(dout * out) standing for
 * rowsum(dprobs * probs). No workspace argument: the backend's own is O(BH T). */
gaaw_status_t gaaw_flash_attention_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout,
                                            const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                            const gaaw_tensor_t *v, const gaaw_tensor_t *out,
                                            const gaaw_tensor_t *lse, gaaw_tensor_t *dq, gaaw_tensor_t *dk,
                                            gaaw_tensor_t *dv);
/* The blocked attention of a block of queries against a block of keys, for context
 * parallelism's ring (doc/context-parallel.md): query row t is at position
 * q_start + t, key row j at k_start + j. GAAW_ATTENTION_CAUSAL lets a row see the keys
 * at its position and before, GAAW_ATTENTION_FULL every key. out is the block's own
 * softmax-weighted sum of v and lse its log-sum-exp; a row that sees no key of the
 * block gets out 0 and lse -inf. gaaw_flash_attention_forward is the causal case with
 * both starts 0 and Tq = Tk.
 * q, out: (BH, Tq, D)   k, v: (BH, Tk, D)   lse: (BH, Tq) f32 */
typedef enum { GAAW_ATTENTION_CAUSAL = 0, GAAW_ATTENTION_FULL = 1 } gaaw_attention_mask_t;
gaaw_status_t gaaw_attention_block_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                           const gaaw_tensor_t *v, int64_t q_start, int64_t k_start,
                                           gaaw_attention_mask_t mask, gaaw_tensor_t *out, gaaw_tensor_t *lse);
/* The rows' results over two sets of keys as one: (out, lse) <- the merge of
 * (out, lse) and (part_out, part_lse), each row's weights exp(lse - the larger lse).
 * out, part_out: (BH, Tq, D)   lse, part_lse: (BH, Tq) f32 */
gaaw_status_t gaaw_attention_merge(gaaw_context_t ctx, gaaw_tensor_t *out, gaaw_tensor_t *lse,
                                   const gaaw_tensor_t *part_out, const gaaw_tensor_t *part_lse);
/* dq += .., dk += .., dv += .. of one block, from the rows' out and lse over every key
 * they see (after the last merge): this block's share of the gradients, which summed
 * over the blocks give the whole attention's. */
gaaw_status_t gaaw_attention_block_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                            const gaaw_tensor_t *k, const gaaw_tensor_t *v,
                                            const gaaw_tensor_t *out, const gaaw_tensor_t *lse, int64_t q_start,
                                            int64_t k_start, gaaw_attention_mask_t mask, gaaw_tensor_t *dq,
                                            gaaw_tensor_t *dk, gaaw_tensor_t *dv);
/* *available = 1 when the context's backend has the kernel named kernel (the function
 * name without its gaaw_ prefix, e.g. "attention_block_forward"; the flash_attention_
 * names are the attention_block_ kernels'), 0 when its calls would return
 * GAAW_ERR_UNSUPPORTED (the CUDA backend lacks the fused kernels);
 * GAAW_ERR_INVALID_ARG for a name that is no kernel. Not collective. */
gaaw_status_t gaaw_kernel_available(gaaw_context_t ctx, const char *kernel, int *available);

/* Embedding lookup for a vocabulary slice [vocab_start, vocab_start + V):
 * y[n] = table[tokens[n] - vocab_start], zeros for tokens outside the slice.
 * tokens: (N) i32   table: (V, C)   y: (N, C) */
gaaw_status_t gaaw_embedding_forward(gaaw_context_t ctx, const gaaw_tensor_t *tokens,
                                     const gaaw_tensor_t *table, int64_t vocab_start, gaaw_tensor_t *y);
/* dtable[tokens[n] - vocab_start] += dy[n] for tokens inside the slice (deterministic
 * order).   dy: (N, C)   dtable: (V, C) */
gaaw_status_t gaaw_embedding_backward(gaaw_context_t ctx, const gaaw_tensor_t *tokens,
                                      const gaaw_tensor_t *dy, int64_t vocab_start, gaaw_tensor_t *dtable);

/* Cross-entropy pieces, so that a vocabulary split over ranks needs three all-reduces.
 * logits: (N, V) for the slice [vocab_start, vocab_start + V)   max, sumexp, target: (N) f32
 * targets: (N) i32; a negative target is ignored (its row gets no loss and no gradient). */
gaaw_status_t gaaw_row_max(gaaw_context_t ctx, const gaaw_tensor_t *logits, gaaw_tensor_t *max);
/* sumexp[n] = sum_v exp(logits[n][v] - max[n]) with the (global) max given. */
gaaw_status_t gaaw_row_sum_exp(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *max,
                               gaaw_tensor_t *sumexp);
/* target[n] = logits[n][targets[n] - vocab_start] inside the slice, 0 outside. */
gaaw_status_t gaaw_target_logit(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *targets,
                                int64_t vocab_start, gaaw_tensor_t *target);
/* dlogits[n][v] += dloss * (exp(logits[n][v] - max[n]) / sumexp[n] - [v is the target]),
 * with (global) max and sumexp; dloss is the weight of each row's loss (e.g. 1/N). */
gaaw_status_t gaaw_cross_entropy_backward(gaaw_context_t ctx, const gaaw_tensor_t *logits,
                                          const gaaw_tensor_t *max, const gaaw_tensor_t *sumexp,
                                          const gaaw_tensor_t *targets, int64_t vocab_start,
                                          float dloss, gaaw_tensor_t *dlogits);

/* Regression losses, elementwise, of d = pred - target:
 *   MSE    l = d^2, l' = 2 d
 *   L1     l = |d|, l' = sign(d) (0 at 0, as PyTorch)
 *   Huber  l = d^2 / 2 for |d| < delta, delta (|d| - delta / 2) beyond (PyTorch's
 *          HuberLoss); l' = d inside, delta sign(d) beyond. */
typedef enum { GAAW_LOSS_MSE = 0, GAAW_LOSS_L1 = 1, GAAW_LOSS_HUBER = 2 } gaaw_loss_t;
#define GAAW_LOSS_COUNT 3
/* loss[i] = w[i] l(d[i]) and grad[i] = w[i] l'(d[i]) (overwritten, not accumulated:
 * the caller sums loss and scales grad by its mean's divisor). delta > 0 and finite
 * (used by Huber only).
 * pred, target, grad: same numel, one float dtype   weights: f32, same numel, or NULL
 * (all 1)   loss: f32, same numel */
gaaw_status_t gaaw_regression_loss(gaaw_context_t ctx, gaaw_loss_t kind, float delta, const gaaw_tensor_t *pred,
                                   const gaaw_tensor_t *target, const gaaw_tensor_t *weights, gaaw_tensor_t *loss,
                                   gaaw_tensor_t *grad);

/* AdamW on one shard (decoupled weight decay, bias correction with step >= 1):
 *   g = grad * grad_scale;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p = p - lr (m / (1 - b1^step) / (sqrt(v / (1 - b2^step)) + eps) + wd p)
 * on the f32 master weights when master is given, then params = cast(master);
 * on params directly (which must then be f32) when master is NULL.
 * params, grads: (n) any float dtype   master, m, v: (n) f32 */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
  float grad_scale; /* multiplies the gradient first (1 / loss scale, 1 / accumulation) */
  int64_t step;     /* 1 for the first update */
} gaaw_adamw_args_t;
gaaw_status_t gaaw_adamw_update(gaaw_context_t ctx, gaaw_tensor_t *params, const gaaw_tensor_t *grads,
                                gaaw_tensor_t *master, gaaw_tensor_t *m, gaaw_tensor_t *v,
                                const gaaw_adamw_args_t *args);

/* y = x converted to y's dtype (round to nearest even).   x, y: same numel */
gaaw_status_t gaaw_cast(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y);
/* Swaps the two middle dimensions, moving whole rows of D elements:
 * y[a][c][b][:] = x[a][b][c][:].   x: (A, B, C, D)   y: (A, C, B, D), any dtype (the same).
 * Splits and merges attention heads ((B, T, H, D) <-> (B, H, T, D)) and interleaves
 * column blocks gathered over ranks. Its own backward: permute dy with its shape. */
gaaw_status_t gaaw_permute_0213(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y);
/* Grouped-query attention's heads. Forward: the QKV projection's output qkv
 * (B, T, Hq + 2 Hkv, D), its Hq query heads then Hkv key and Hkv value heads, into
 * the attention core's q, k, v, each (B, Hq, T, D): key and value head j serves
 * query heads j g .. j g + g - 1, g = Hq / Hkv (Hugging Face's repeat_kv); a copy.
 * Backward: dqkv (overwritten) from dq, dk, dv, each key and value head's the sum
 * of its g query heads' (in f32, in head order, rounded once). Hq is q's second
 * dimension, Hkv = kv_heads, which divides it. Float dtypes, one for all. */
gaaw_status_t gaaw_qkv_heads_forward(gaaw_context_t ctx, const gaaw_tensor_t *qkv, int64_t kv_heads, gaaw_tensor_t *q,
                                     gaaw_tensor_t *k, gaaw_tensor_t *v);
gaaw_status_t gaaw_qkv_heads_backward(gaaw_context_t ctx, const gaaw_tensor_t *dq, const gaaw_tensor_t *dk,
                                      const gaaw_tensor_t *dv, int64_t kv_heads, gaaw_tensor_t *dqkv);
/* ---- Mixture of experts (doc/moe.md): a group of T tokens, each routed to k of E
 * experts. Index tensors are i32; an index out of its range (a pos outside [0, P),
 * a src outside [0, T)) is skipped (a zero row), never read through.
 *
 * The router's scores (T, E) f32 from its logits (T, E) f32: each row's softmax, or
 * (sigmoid != 0) each logit's logistic sigmoid; lse (T) f32: each row's log-sum-exp
 * of the logits, whichever the scores (the router z-loss is the mean of lse^2). */
gaaw_status_t gaaw_moe_router_forward(gaaw_context_t ctx, const gaaw_tensor_t *logits, int sigmoid,
                                      gaaw_tensor_t *scores, gaaw_tensor_t *lse);
/* dlogits (T, E) f32, overwritten: the scores' backward of dscores (T, E) f32, plus
 * zscale x lse[t] x softmax(logits[t]) (the gradient of zscale / 2 x sum_t lse[t]^2). */
gaaw_status_t gaaw_moe_router_backward(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *scores,
                                       const gaaw_tensor_t *lse, const gaaw_tensor_t *dscores, int sigmoid,
                                       float zscale, gaaw_tensor_t *dlogits);
/* Each row's k experts (k = idx's second extent, 1..E) of the largest scores[t][e] +
 * bias[e] (bias (E) f32, or NULL: none), ties to the lower index, in that order:
 * idx (T, k) i32; weights (T, k) f32 the chosen scores without the bias, divided by
 * their sum when renormalize.   scores: (T, E) f32 */
gaaw_status_t gaaw_moe_topk_forward(gaaw_context_t ctx, const gaaw_tensor_t *scores, const gaaw_tensor_t *bias,
                                    int renormalize, gaaw_tensor_t *idx, gaaw_tensor_t *weights);
/* dscores (T, E) f32, overwritten: 0 but at each row's chosen experts, where it is
 * dweights[t][j], or with renormalize (dweights[t][j] - sum_i dweights[t][i]
 * weights[t][i]) / S[t], S[t] the sum of the chosen scores.   idx, weights,
 * dweights: (T, k) */
gaaw_status_t gaaw_moe_topk_backward(gaaw_context_t ctx, const gaaw_tensor_t *scores, const gaaw_tensor_t *idx,
                                     const gaaw_tensor_t *weights, const gaaw_tensor_t *dweights, int renormalize,
                                     gaaw_tensor_t *dscores);
/* Tokens' rows gathered in the experts' order: out[p] = x[src[p]].
 * x: (T, C)   src: (P) i32   out: (P, C), x's float dtype */
gaaw_status_t gaaw_moe_permute(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *src,
                               gaaw_tensor_t *out);
/* Its backward through the inverse map: dx[t] = the sum over j of dout[pos[t][j]]
 * (pos >= 0; in j order, in f32, rounded once), 0 where none.
 * dout: (P, C)   pos: (T, k) i32 in [-1, P)   dx: (T, C) */
gaaw_status_t gaaw_moe_permute_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *pos,
                                        gaaw_tensor_t *dx);
/* The experts' rows back to their tokens, weighted: out[t] = the sum over j of
 * weights[t][j] y[pos[t][j]] (pos >= 0; in j order, in f32, rounded once).
 * y: (P, C)   pos: (T, k) i32   weights: (T, k) f32   out: (T, C), y's dtype */
gaaw_status_t gaaw_moe_unpermute(gaaw_context_t ctx, const gaaw_tensor_t *y, const gaaw_tensor_t *pos,
                                 const gaaw_tensor_t *weights, gaaw_tensor_t *out);
/* Its backward: dy[pos[t][j]] = weights[t][j] dout[t] for each pos >= 0 (a row of dy
 * that no pos names is left as it is), dweights[t][j] = the dot product of dout[t]
 * and y[pos[t][j]] (in f32, in column order; 0 where pos is -1).
 * dout: (T, C)   dy: (P, C), y's dtype   dweights: (T, k) f32 */
gaaw_status_t gaaw_moe_unpermute_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *y,
                                          const gaaw_tensor_t *pos, const gaaw_tensor_t *weights, gaaw_tensor_t *dy,
                                          gaaw_tensor_t *dweights);
/* out[0] = sum of x^2, summed in a fixed order (bit-identical run to run).
 * x: any float dtype   out: (1) f32 */
gaaw_status_t gaaw_sum_squares(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *out);
/* flag[0] = 1 if x holds an inf or nan; left unchanged otherwise, so several tensors
 * can be checked into one flag.   flag: (1) i32 */
gaaw_status_t gaaw_check_finite(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *flag);
/* Every element of x = value (converted to x's dtype; i32 rounds toward zero). */
gaaw_status_t gaaw_fill(gaaw_context_t ctx, gaaw_tensor_t *x, float value);
/* Waits for every kernel queued on the context. */
gaaw_status_t gaaw_synchronize(gaaw_context_t ctx);

#ifdef __cplusplus
}
#endif
#endif
