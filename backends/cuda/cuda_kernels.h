/* The CUDA kernels' launchers: plain C functions on device pointers, compiled by
 * nvcc (the .cu files of backends/cuda) and called by the table entries (cuda_ops.c, gcc), so
 * that no gaaw internal header (MPI, the context) passes through nvcc.
 *
 * Each launcher queues its kernels on stream s and returns the launch status
 * (cudaGetLastError); an empty problem queues nothing. Float data is f32, bf16 or
 * f16 as dtype says, computed in f32; statistics (mean, rstd, max, sumexp, target)
 * are f32; tokens and targets are i32. Reductions use no atomics and a fixed order,
 * so results are bit-identical run to run on one GPU model. */
#ifndef GAAW_CUDA_KERNELS_H
#define GAAW_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, with the values of gaaw_cuda_dtype (checked in cuda_ops.c); the
 * public headers are not included here because they bring in mpi.h. */
typedef enum { GAAW_CUDA_F32 = 0, GAAW_CUDA_BF16 = 1, GAAW_CUDA_F16 = 2, GAAW_CUDA_I32 = 3 } gaaw_cuda_dtype;

/* Rows per block in reductions over rows (dw, db): each block writes its partial
 * column sums, then one pass adds the chunks in order. Partial buffers hold
 * gaaw_cuda_row_chunks(N) * C floats per summed quantity. */
#define GAAW_CUDA_CHUNK_ROWS 32
static inline int64_t gaaw_cuda_row_chunks(int64_t N)
{
  return (N + GAAW_CUDA_CHUNK_ROWS - 1) / GAAW_CUDA_CHUNK_ROWS;
}

/* ---------------------------------------------------------------- pointwise (cuda_pointwise.cu) */

/* The elementwise activations, with the values of gaaw_activation_t (checked in
 * cuda_ops.c). */
typedef enum {
  GAAW_CUDA_ACT_GELU = 0,
  GAAW_CUDA_ACT_NONE = 2,
  GAAW_CUDA_ACT_RELU = 3,
  GAAW_CUDA_ACT_TANH = 4,
  GAAW_CUDA_ACT_SILU = 5
} gaaw_cuda_activation;
/* y = act(x); dx += dy act'(x).   n elements */
cudaError_t gaaw_cuda_activation_forward(cudaStream_t s, gaaw_cuda_dtype dt, gaaw_cuda_activation act, int64_t n,
                                         const void *x, void *y);
/* loss = w l(d), grad = w l'(d), d = pred - target; kind 0 MSE, 1 L1, 2 Huber
 * (gaaw_loss_t); w NULL: all 1. loss and w are f32, the others dt.   n elements */
cudaError_t gaaw_cuda_regression_loss(cudaStream_t s, gaaw_cuda_dtype dt, int kind, float delta, int64_t n,
                                      const void *pred, const void *target, const float *w, float *loss, void *grad);
cudaError_t gaaw_cuda_activation_backward(cudaStream_t s, gaaw_cuda_dtype dt, gaaw_cuda_activation act, int64_t n,
                                          const void *dy, const void *x, void *dx);
/* x, dx: (N, 2H)   y, dy: (N, H) */
cudaError_t gaaw_cuda_swiglu_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t H, const void *x, void *y);
cudaError_t gaaw_cuda_swiglu_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t H, const void *dy,
                                      const void *x, void *dx);
/* x, y: (B, T, NH, D) (y may be x)   table: (T, D) f32 = (cos | sin); the first heads
 * rotated (inverse: back), the others copied */
cudaError_t gaaw_cuda_rope(cudaStream_t s, gaaw_cuda_dtype dt, int64_t B, int64_t Tn, int64_t NH, int64_t D,
                           int64_t heads, int inverse, const void *x, const float *table, void *y);
/* qkv (B, T, H + 2 Hkv, D) <-> q, k, v (B, H, T, D) (gaaw_qkv_heads_forward / _backward). */
cudaError_t gaaw_cuda_qkv_heads(cudaStream_t s, gaaw_cuda_dtype dt, int64_t B, int64_t H, int64_t Tn, int64_t D,
                                int64_t Hkv, int backward, void *qkv, void *q, void *k, void *v);
/* y: (N, C) += b: (C) */
cudaError_t gaaw_cuda_bias_add(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, void *y, const void *b);
/* y = a + b (y may be a or b); y += alpha x; x *= alpha */
cudaError_t gaaw_cuda_add(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, const void *a, const void *b, void *y);
cudaError_t gaaw_cuda_axpy(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, float alpha, const void *x, void *y);
cudaError_t gaaw_cuda_scale(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, void *x, float alpha);
/* y = x converted (any of f32, bf16, f16, i32 to any other; i32 rounds toward zero) */
cudaError_t gaaw_cuda_cast(cudaStream_t s, gaaw_cuda_dtype xt, gaaw_cuda_dtype yt, int64_t n, const void *x, void *y);
/* Every element of x (elem_size 2 or 4 bytes) = bits. */
cudaError_t gaaw_cuda_fill_bits(cudaStream_t s, size_t elem_size, int64_t n, uint32_t bits, void *x);
/* y[a][c][b][:] = x[a][b][c][:]   x: (A, B, C, D)   elements of elem_size 2 or 4 bytes */
cudaError_t gaaw_cuda_permute_0213(cudaStream_t s, size_t elem_size, int64_t A, int64_t B, int64_t C, int64_t D,
                                   const void *x, void *y);
/* flag[0] = 1 when x holds an inf or nan (left alone otherwise). */
cudaError_t gaaw_cuda_check_finite(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, const void *x, int32_t *flag);

/* AdamW constants of one call: the bias corrections 1 - beta^step are computed once,
 * on the host, in double. */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  float bias_correction1, bias_correction2;
} gaaw_cuda_adamw_consts;
/* w (f32: master weights, or params without master), m, v: (n) updated in place;
 * out (dtype out_dt, params beside a master) = w after the update, or NULL. */
cudaError_t gaaw_cuda_adamw(cudaStream_t s, gaaw_cuda_dtype grad_dt, gaaw_cuda_dtype out_dt, int64_t n, const void *grads,
                            float *w, float *m, float *v, void *out, const gaaw_cuda_adamw_consts *c);

/* ---------------------------------------------------------------- norms (cuda_norm.cu) */

/* x, y: (N, C)   w, b: (C)   mean, rstd: (N) */
cudaError_t gaaw_cuda_layernorm_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *x,
                                        const void *w, const void *b, float eps, void *y, float *mean, float *rstd);
/* dx, dw, db accumulate.   partial: 2 * gaaw_cuda_row_chunks(N) * C floats */
cudaError_t gaaw_cuda_layernorm_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *dy,
                                         const void *x, const void *w, const float *mean, const float *rstd, void *dx,
                                         void *dw, void *db, float *partial);
cudaError_t gaaw_cuda_rmsnorm_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *x,
                                      const void *w, float eps, void *y, float *rstd);
/* partial: gaaw_cuda_row_chunks(N) * C floats */
cudaError_t gaaw_cuda_rmsnorm_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *dy,
                                       const void *x, const void *w, const float *rstd, void *dx, void *dw,
                                       float *partial);
/* db: (C) += sum_n dy: (N, C).   partial: gaaw_cuda_row_chunks(N) * C floats */
cudaError_t gaaw_cuda_bias_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *dy, void *db,
                                    float *partial);

/* ---------------------------------------------------------------- softmax, loss, sums (cuda_softmax.cu) */

/* x, y: (batch, T, T); y may be x. */
cudaError_t gaaw_cuda_causal_softmax_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t batch, int64_t T, float scale,
                                             const void *x, void *y);
/* dx (+)= scale y (dy - sum_j dy y); without accumulate dx is overwritten (zeros
 * above the diagonal) and may be dy. */
cudaError_t gaaw_cuda_causal_softmax_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t batch, int64_t T, float scale,
                                              const void *y, const void *dy, void *dx, int accumulate);
/* logits: (N, V) */
cudaError_t gaaw_cuda_row_max(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, const void *logits, float *max);
cudaError_t gaaw_cuda_row_sum_exp(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, const void *logits,
                                  const float *max, float *sumexp);
cudaError_t gaaw_cuda_target_logit(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, const void *logits,
                                   const int32_t *targets, int64_t vocab_start, float *target);
cudaError_t gaaw_cuda_cross_entropy_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V,
                                             const void *logits, const float *max, const float *sumexp,
                                             const int32_t *targets, int64_t vocab_start, float dloss,
                                             void *dlogits);
/* Floats of partial sums gaaw_cuda_sum_squares needs for n elements. */
int64_t gaaw_cuda_sum_squares_partials(int64_t n);
/* out[0] = sum of x^2: chunk sums in f32, chunk totals in double. */
cudaError_t gaaw_cuda_sum_squares(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, const void *x, float *partial,
                                  float *out);

/* ---------------------------------------------------------------- blocked attention (cuda_attention_block.cu) */

/* The widest head the blocked attention takes (its threads keep a row's columns in
 * registers); wider ones get cudaErrorInvalidValue. */
#define GAAW_CUDA_ATTENTION_MAX_D 1024
/* A block of queries against a block of keys: query row t at position q_start + t,
 * key row j at k_start + j; causal: a row sees keys at its position and before.
 * out, lse: the block's softmax-weighted v and log-sum-exp (0 and -inf for a row
 * that sees no key).   q, out: (BH, Tq, D)   k, v: (BH, Tk, D)   lse: (BH, Tq) f32 */
cudaError_t gaaw_cuda_attention_block_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t BH, int64_t Tq, int64_t Tk,
                                              int64_t D, int64_t q_start, int64_t k_start, int causal, const void *q,
                                              const void *k, const void *v, void *out, float *lse);
/* (out, lse) <- the merge of (out, lse) and (part_out, part_lse), row by row.
 * out, part_out: (rows, D)   lse, part_lse: (rows) f32 */
cudaError_t gaaw_cuda_attention_merge(cudaStream_t s, gaaw_cuda_dtype dt, int64_t rows, int64_t D, void *out,
                                      float *lse, const void *part_out, const float *part_lse);
/* dq += .., dk += .., dv += .. of the block, from the rows' merged out and lse;
 * delta: (BH, Tq) f32 workspace. */
cudaError_t gaaw_cuda_attention_block_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t BH, int64_t Tq,
                                               int64_t Tk, int64_t D, int64_t q_start, int64_t k_start, int causal,
                                               const void *dout, const void *q, const void *k, const void *v,
                                               const void *out, const float *lse, float *delta, void *dq, void *dk,
                                               void *dv);

/* ---------------------------------------------------------------- mixture of experts (cuda_moe.cu) */

/* logits, scores: (T, E) f32   lse: (T) f32 (gaaw_moe_router_forward / _backward) */
cudaError_t gaaw_cuda_moe_router(cudaStream_t s, int64_t T, int64_t E, const float *logits, int sigmoid,
                                 float *scores, float *lse);
cudaError_t gaaw_cuda_moe_router_backward(cudaStream_t s, int64_t T, int64_t E, const float *logits,
                                          const float *scores, const float *lse, const float *dscores, int sigmoid,
                                          float zscale, float *dlogits);
/* scores, dscores: (T, E) f32   bias: (E) f32 or NULL   idx: (T, k) i32   weights: (T, k) f32 */
cudaError_t gaaw_cuda_moe_topk(cudaStream_t s, int64_t T, int64_t E, int64_t k, const float *scores,
                               const float *bias, int renormalize, int32_t *idx, float *weights);
cudaError_t gaaw_cuda_moe_topk_backward(cudaStream_t s, int64_t T, int64_t E, int64_t k, const float *scores,
                                        const int32_t *idx, const float *weights, const float *dweights,
                                        int renormalize, float *dscores);
/* x, dx, out of unpermute: (Tn, C)   out of permute, y, dy: (P, C)   src: (P) i32
 * pos: (Tn, k) i32   weights, dweights: (Tn, k) f32 */
cudaError_t gaaw_cuda_moe_permute(cudaStream_t s, gaaw_cuda_dtype dt, int64_t Tn, int64_t P, int64_t C, const void *x,
                                  const int32_t *src, void *out);
/* out[t] = sum_j weights[t][j] (weights NULL: 1) y[pos[t][j]]: the combine, and the
 * permutation's backward */
cudaError_t gaaw_cuda_moe_combine(cudaStream_t s, gaaw_cuda_dtype dt, int64_t Tn, int64_t P, int64_t C, int64_t k,
                                  const void *y, const int32_t *pos, const float *weights, void *out);
cudaError_t gaaw_cuda_moe_unpermute_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t Tn, int64_t P, int64_t C,
                                             int64_t k, const void *dout, const void *y, const int32_t *pos,
                                             const float *weights, void *dy, float *dweights);

/* ---------------------------------------------------------------- embedding (cuda_embedding.cu) */

/* tokens: (N)   table: (V, C)   y: (N, C); rows outside [vocab_start, +V) are zero. */
cudaError_t gaaw_cuda_embedding_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, int64_t C,
                                        const int32_t *tokens, const void *table, int64_t vocab_start, void *y);
/* Bytes of workspace the backward needs for N tokens in a slice of V rows of C. */
cudaError_t gaaw_cuda_embedding_backward_workspace(int64_t N, int64_t V, int64_t C, size_t *bytes);
/* dtable[tokens[n] - vocab_start] += dy[n]: tokens sorted stably (radix sort), then
 * each distinct row sums its dy rows in the order of n, in segments of sorted
 * positions whose parts are added in order; no atomics. */
cudaError_t gaaw_cuda_embedding_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, int64_t C,
                                         const int32_t *tokens, const void *dy, int64_t vocab_start, void *dtable,
                                         void *workspace, size_t workspace_bytes);

#ifdef __cplusplus
}
#endif
#endif
