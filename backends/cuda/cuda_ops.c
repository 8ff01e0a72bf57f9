/* The CUDA backend's kernel entries: tensors (already checked by backends/kernels.c)
 * to device addresses, then the launchers of cuda_kernels.h on the compute stream.
 * Scratch memory comes from the caching allocator (category workspace) and is
 * returned right after the launch: a later user of the block queues on the same
 * stream, so it runs after these kernels. */
#include <math.h>
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "backends/runtime/half.h"

_Static_assert(GAAW_CUDA_F32 == (int)GAAW_F32 && GAAW_CUDA_BF16 == (int)GAAW_BF16 && GAAW_CUDA_F16 == (int)GAAW_F16 &&
                   GAAW_CUDA_I32 == (int)GAAW_I32,
               "gaaw_cuda_dtype must have the values of gaaw_dtype_t");
_Static_assert(GAAW_CUDA_ACT_GELU == (int)GAAW_ACT_GELU && GAAW_CUDA_ACT_NONE == (int)GAAW_ACT_NONE &&
                   GAAW_CUDA_ACT_RELU == (int)GAAW_ACT_RELU && GAAW_CUDA_ACT_TANH == (int)GAAW_ACT_TANH &&
                   GAAW_CUDA_ACT_SILU == (int)GAAW_ACT_SILU,
               "gaaw_cuda_activation must have the values of gaaw_activation_t");

/* (rows, cols) of a tensor seen as a matrix: cols = last extent. */
static int64_t cols_of(const gaaw_tensor_t *t)
{
  return t->shape[t->ndim - 1];
}
static int64_t rows_of(const gaaw_tensor_t *t)
{
  int64_t r = 1;
  for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
  return r;
}

/* A scratch buffer of bytes (at least 1) from the allocator, and its address. */
static gaaw_status_t scratch(gaaw_context_t ctx, size_t bytes, gaaw_buffer_t *buf, void **ptr)
{
  GAAW_CHECK(gaaw_buffer_alloc(ctx, bytes ? bytes : 1, GAAW_MEM_WORKSPACE, buf));
  *ptr = (*buf)->handle;
  return GAAW_SUCCESS;
}

/* Returns the scratch buffer, keeping the first failure. */
static gaaw_status_t end_scratch(gaaw_context_t ctx, gaaw_buffer_t *buf, gaaw_status_t status)
{
  gaaw_buffer_free(ctx, buf);
  if (status != GAAW_SUCCESS) return gaaw_error_trace(ctx, status, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* A launch inside a scratch section: records the failure instead of returning. */
static gaaw_status_t launched(gaaw_context_t ctx, cudaError_t err, const char *what)
{
  if (err == cudaSuccess) return GAAW_SUCCESS;
  return gaaw_cuda_error(ctx, err, __FILE__, __LINE__, __func__, what);
}

/* ---------------------------------------------------------------- GEMM */

gaaw_status_t gaaw_cuda_op_gemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                                gaaw_cten a, gaaw_cten b, float beta, gaaw_ten c)
{
  int64_t m = rows_of(c), n = cols_of(c), k = ta == GAAW_OP_N ? cols_of(a) : rows_of(a);
  GAAW_CHECK(gaaw_cuda_gemm_raw(ctx, c->dtype, ta, tb, 1, m, n, k, alpha, P(a), P(b), beta, P(c)));
  return GAAW_SUCCESS;
}

/* (batch, rows, cols) of a (..., rows, cols) tensor. */
static void matrix_dims(const gaaw_tensor_t *t, int64_t *batch, int64_t *rows, int64_t *cols)
{
  *cols = t->shape[t->ndim - 1];
  *rows = t->shape[t->ndim - 2];
  *batch = 1;
  for (int i = 0; i < t->ndim - 2; i++) *batch *= t->shape[i];
}

gaaw_status_t gaaw_cuda_op_gemm_batched(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                                        gaaw_cten a, gaaw_cten b, float beta, gaaw_ten c)
{
  int64_t batch, m, n, ar, ac;
  matrix_dims(c, &batch, &m, &n);
  matrix_dims(a, &batch, &ar, &ac);
  int64_t k = ta == GAAW_OP_N ? ac : ar;
  GAAW_CHECK(gaaw_cuda_gemm_raw(ctx, c->dtype, ta, tb, batch, m, n, k, alpha, P(a), P(b), beta, P(c)));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- norms */

gaaw_status_t gaaw_cuda_op_layernorm_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_cten w, gaaw_cten b, float eps,
                                             gaaw_ten y, gaaw_ten mean, gaaw_ten rstd)
{
  LAUNCH(gaaw_cuda_layernorm_forward(STREAM, DT(x), rows_of(x), cols_of(x), P(x), P(w), P(b), eps, P(y), P(mean),
                                     P(rstd)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_layernorm_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_cten w,
                                              gaaw_cten mean, gaaw_cten rstd, gaaw_ten dx, gaaw_ten dw, gaaw_ten db)
{
  int64_t N = rows_of(x), C = cols_of(x);
  gaaw_buffer_t buf = NULL;
  void *partial = NULL;
  GAAW_CHECK(scratch(ctx, 2 * (size_t)gaaw_cuda_row_chunks(N) * (size_t)C * sizeof(float), &buf, &partial));
  gaaw_status_t st = launched(ctx, gaaw_cuda_layernorm_backward(STREAM, DT(x), N, C, P(dy), P(x), P(w), P(mean),
                                                                P(rstd), P(dx), P(dw), P(db), partial),
                              "gaaw_cuda_layernorm_backward");
  return end_scratch(ctx, &buf, st);
}

gaaw_status_t gaaw_cuda_op_rmsnorm_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_cten w, float eps, gaaw_ten y,
                                           gaaw_ten rstd)
{
  LAUNCH(gaaw_cuda_rmsnorm_forward(STREAM, DT(x), rows_of(x), cols_of(x), P(x), P(w), eps, P(y), P(rstd)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_rmsnorm_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_cten w,
                                            gaaw_cten rstd, gaaw_ten dx, gaaw_ten dw)
{
  int64_t N = rows_of(x), C = cols_of(x);
  gaaw_buffer_t buf = NULL;
  void *partial = NULL;
  GAAW_CHECK(scratch(ctx, (size_t)gaaw_cuda_row_chunks(N) * (size_t)C * sizeof(float), &buf, &partial));
  gaaw_status_t st = launched(
      ctx, gaaw_cuda_rmsnorm_backward(STREAM, DT(x), N, C, P(dy), P(x), P(w), P(rstd), P(dx), P(dw), partial),
      "gaaw_cuda_rmsnorm_backward");
  return end_scratch(ctx, &buf, st);
}

/* ---------------------------------------------------------------- activations and elementwise */

gaaw_status_t gaaw_cuda_op_activation_forward(gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten x, gaaw_ten y)
{
  LAUNCH(gaaw_cuda_activation_forward(STREAM, DT(x), (gaaw_cuda_activation)act, gaaw_tensor_numel(x), P(x), P(y)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_activation_backward(gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten dy, gaaw_cten x,
                                               gaaw_ten dx)
{
  LAUNCH(gaaw_cuda_activation_backward(STREAM, DT(x), (gaaw_cuda_activation)act, gaaw_tensor_numel(x), P(dy), P(x),
                                       P(dx)));
  return GAAW_SUCCESS;
}

_Static_assert(GAAW_LOSS_MSE == 0 && GAAW_LOSS_L1 == 1 && GAAW_LOSS_HUBER == 2,
               "cuda_pointwise.cu's regression_loss numbers the kinds as gaaw_loss_t");

gaaw_status_t gaaw_cuda_op_regression_loss(gaaw_context_t ctx, gaaw_loss_t kind, float delta, gaaw_cten pred,
                                           gaaw_cten target, gaaw_cten weights, gaaw_ten loss, gaaw_ten grad)
{
  LAUNCH(gaaw_cuda_regression_loss(STREAM, DT(pred), (int)kind, delta, gaaw_tensor_numel(pred), P(pred), P(target),
                                   weights ? (const float *)P(weights) : NULL, (float *)P(loss), P(grad)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_swiglu_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  LAUNCH(gaaw_cuda_swiglu_forward(STREAM, DT(x), rows_of(y), cols_of(y), P(x), P(y)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_swiglu_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_ten dx)
{
  LAUNCH(gaaw_cuda_swiglu_backward(STREAM, DT(x), rows_of(dy), cols_of(dy), P(dy), P(x), P(dx)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_rope(gaaw_context_t ctx, gaaw_cten x, gaaw_cten table, int64_t heads, int inverse,
                               gaaw_ten y)
{
  LAUNCH(gaaw_cuda_rope(STREAM, DT(x), x->shape[0], x->shape[1], x->shape[2], x->shape[3], heads, inverse, P(x),
                        P(table), P(y)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_qkv_heads(gaaw_context_t ctx, gaaw_ten qkv, int64_t kv_heads, int backward, gaaw_ten q,
                                    gaaw_ten k, gaaw_ten v)
{
  LAUNCH(gaaw_cuda_qkv_heads(STREAM, DT(q), q->shape[0], q->shape[1], q->shape[2], q->shape[3], kv_heads, backward,
                             P(qkv), P(q), P(k), P(v)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_bias_add(gaaw_context_t ctx, gaaw_ten y, gaaw_cten b)
{
  LAUNCH(gaaw_cuda_bias_add(STREAM, DT(y), rows_of(y), cols_of(y), P(y), P(b)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_bias_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_ten db)
{
  int64_t N = rows_of(dy), C = cols_of(dy);
  gaaw_buffer_t buf = NULL;
  void *partial = NULL;
  GAAW_CHECK(scratch(ctx, (size_t)gaaw_cuda_row_chunks(N) * (size_t)C * sizeof(float), &buf, &partial));
  gaaw_status_t st =
      launched(ctx, gaaw_cuda_bias_backward(STREAM, DT(dy), N, C, P(dy), P(db), partial), "gaaw_cuda_bias_backward");
  return end_scratch(ctx, &buf, st);
}

gaaw_status_t gaaw_cuda_op_add(gaaw_context_t ctx, gaaw_cten a, gaaw_cten b, gaaw_ten y)
{
  LAUNCH(gaaw_cuda_add(STREAM, DT(y), gaaw_tensor_numel(y), P(a), P(b), P(y)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_axpy(gaaw_context_t ctx, float alpha, gaaw_cten x, gaaw_ten y)
{
  LAUNCH(gaaw_cuda_axpy(STREAM, DT(y), gaaw_tensor_numel(y), alpha, P(x), P(y)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_scale(gaaw_context_t ctx, gaaw_ten x, float alpha)
{
  LAUNCH(gaaw_cuda_scale(STREAM, DT(x), gaaw_tensor_numel(x), P(x), alpha));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- softmax and attention */

/* (batch, T) of a (..., T, T) tensor. */
static void square_dims(const gaaw_tensor_t *t, int64_t *batch, int64_t *T)
{
  *T = cols_of(t);
  *batch = *T ? rows_of(t) / *T : 0;
}

gaaw_status_t gaaw_cuda_op_causal_softmax_forward(gaaw_context_t ctx, float scale, gaaw_cten x, gaaw_ten y)
{
  int64_t batch, T;
  square_dims(x, &batch, &T);
  LAUNCH(gaaw_cuda_causal_softmax_forward(STREAM, DT(x), batch, T, scale, P(x), P(y)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_causal_softmax_backward(gaaw_context_t ctx, float scale, gaaw_cten y, gaaw_cten dy,
                                                   gaaw_ten dx)
{
  int64_t batch, T;
  square_dims(y, &batch, &T);
  LAUNCH(gaaw_cuda_causal_softmax_backward(STREAM, DT(y), batch, T, scale, P(y), P(dy), P(dx), 1));
  return GAAW_SUCCESS;
}

/* scores = q k^T / sqrt(D) (into probs), probs = causal softmax(scores), out = probs v.
 * The scale is the GEMM's alpha: with f16 storage, q k^T itself can exceed 65504
 * where the scaled scores do not (the host keeps them in f32). */
gaaw_status_t gaaw_cuda_op_attention_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                             gaaw_ten probs, gaaw_ten out)
{
  int64_t BH, T, D = cols_of(q);
  square_dims(probs, &BH, &T);
  gaaw_dtype_t dt = q->dtype;
  float scale = 1.0f / sqrtf((float)D);
  GAAW_CHECK(gaaw_cuda_gemm_raw(ctx, dt, GAAW_OP_N, GAAW_OP_T, BH, T, T, D, scale, P(q), P(k), 0.0f, P(probs)));
  LAUNCH(gaaw_cuda_causal_softmax_forward(STREAM, DT(q), BH, T, 1.0f, P(probs), P(probs)));
  GAAW_CHECK(gaaw_cuda_gemm_raw(ctx, dt, GAAW_OP_N, GAAW_OP_N, BH, T, D, T, 1.0f, P(probs), P(v), 0.0f, P(out)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_attention_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k,
                                              gaaw_cten v, gaaw_cten probs, gaaw_ten dprobs, gaaw_ten dq, gaaw_ten dk,
                                              gaaw_ten dv)
{
  int64_t BH, T, D = cols_of(q);
  square_dims(probs, &BH, &T);
  gaaw_dtype_t dt = q->dtype;
  float scale = 1.0f / sqrtf((float)D);
  /* dv += probs^T dout;  dprobs = dout v^T */
  GAAW_CHECK(gaaw_cuda_gemm_raw(ctx, dt, GAAW_OP_T, GAAW_OP_N, BH, T, D, T, 1.0f, P(probs), P(dout), 1.0f, P(dv)));
  GAAW_CHECK(gaaw_cuda_gemm_raw(ctx, dt, GAAW_OP_N, GAAW_OP_T, BH, T, T, D, 1.0f, P(dout), P(v), 0.0f, P(dprobs)));
  /* d(scaled scores) (in dprobs) = probs (dprobs - rowsum(dprobs probs)) */
  LAUNCH(gaaw_cuda_causal_softmax_backward(STREAM, DT(q), BH, T, 1.0f, P(probs), P(dprobs), P(dprobs), 0));
  /* dq += scale dscores k;  dk += scale dscores^T q: the scale again in alpha */
  GAAW_CHECK(gaaw_cuda_gemm_raw(ctx, dt, GAAW_OP_N, GAAW_OP_N, BH, T, D, T, scale, P(dprobs), P(k), 1.0f, P(dq)));
  GAAW_CHECK(gaaw_cuda_gemm_raw(ctx, dt, GAAW_OP_T, GAAW_OP_N, BH, T, D, T, scale, P(dprobs), P(q), 1.0f, P(dk)));
  return GAAW_SUCCESS;
}

/* The blocked attention (cuda_attention_block.cu): one of the optional kernels, in
 * the table (cuda_device.c) by name. */
gaaw_status_t gaaw_cuda_op_attention_block_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                                   int64_t q_start, int64_t k_start, int causal, gaaw_ten out,
                                                   gaaw_ten lse)
{
  int64_t D = cols_of(q), Tq = q->shape[q->ndim - 2], Tk = k->shape[k->ndim - 2];
  GAAW_ARG_CHECK(ctx, D <= GAAW_CUDA_ATTENTION_MAX_D, "the blocked attention on CUDA takes heads of at most %d, got %lld",
                 GAAW_CUDA_ATTENTION_MAX_D, (long long)D);
  LAUNCH(gaaw_cuda_attention_block_forward(STREAM, DT(q), Tq ? rows_of(q) / Tq : 0, Tq, Tk, D, q_start, k_start,
                                           causal, P(q), P(k), P(v), P(out), P(lse)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_attention_merge(gaaw_context_t ctx, gaaw_ten out, gaaw_ten lse, gaaw_cten part_out,
                                           gaaw_cten part_lse)
{
  LAUNCH(gaaw_cuda_attention_merge(STREAM, DT(out), rows_of(out), cols_of(out), P(out), P(lse), P(part_out),
                                   P(part_lse)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_attention_block_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k,
                                                    gaaw_cten v, gaaw_cten out, gaaw_cten lse, int64_t q_start,
                                                    int64_t k_start, int causal, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)
{
  int64_t D = cols_of(q), Tq = q->shape[q->ndim - 2], Tk = k->shape[k->ndim - 2], rows = rows_of(q);
  GAAW_ARG_CHECK(ctx, D <= GAAW_CUDA_ATTENTION_MAX_D, "the blocked attention on CUDA takes heads of at most %d, got %lld",
                 GAAW_CUDA_ATTENTION_MAX_D, (long long)D);
  gaaw_buffer_t buf = NULL;
  void *delta = NULL;
  GAAW_CHECK(scratch(ctx, (size_t)rows * sizeof(float), &buf, &delta));
  gaaw_status_t st = launched(ctx, gaaw_cuda_attention_block_backward(STREAM, DT(q), Tq ? rows / Tq : 0, Tq, Tk, D,
                                                                      q_start, k_start, causal, P(dout), P(q), P(k),
                                                                      P(v), P(out), P(lse), delta, P(dq), P(dk), P(dv)),
                              "gaaw_cuda_attention_block_backward");
  return end_scratch(ctx, &buf, st);
}

/* ---------------------------------------------------------------- embedding */

gaaw_status_t gaaw_cuda_op_embedding_forward(gaaw_context_t ctx, gaaw_cten tokens, gaaw_cten table,
                                             int64_t vocab_start, gaaw_ten y)
{
  LAUNCH(gaaw_cuda_embedding_forward(STREAM, DT(table), gaaw_tensor_numel(tokens), rows_of(table), cols_of(table),
                                     P(tokens), P(table), vocab_start, P(y)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_embedding_backward(gaaw_context_t ctx, gaaw_cten tokens, gaaw_cten dy,
                                              int64_t vocab_start, gaaw_ten dtable)
{
  int64_t N = gaaw_tensor_numel(tokens), V = rows_of(dtable), C = cols_of(dtable);
  if (N > INT32_MAX)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "embedding backward of %lld tokens: the CUDA backend sorts at most %d",
              (long long)N, INT32_MAX);
  size_t bytes = 0;
  LAUNCH(gaaw_cuda_embedding_backward_workspace(N, V, C, &bytes));
  gaaw_buffer_t buf = NULL;
  void *ws = NULL;
  GAAW_CHECK(scratch(ctx, bytes, &buf, &ws));
  gaaw_status_t st = launched(ctx, gaaw_cuda_embedding_backward(STREAM, DT(dtable), N, V, C, P(tokens), P(dy),
                                                                vocab_start, P(dtable), ws, bytes),
                              "gaaw_cuda_embedding_backward");
  return end_scratch(ctx, &buf, st);
}

/* ---------------------------------------------------------------- cross-entropy */

gaaw_status_t gaaw_cuda_op_row_max(gaaw_context_t ctx, gaaw_cten logits, gaaw_ten max)
{
  LAUNCH(gaaw_cuda_row_max(STREAM, DT(logits), rows_of(logits), cols_of(logits), P(logits), P(max)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_row_sum_exp(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten max, gaaw_ten sumexp)
{
  LAUNCH(gaaw_cuda_row_sum_exp(STREAM, DT(logits), rows_of(logits), cols_of(logits), P(logits), P(max), P(sumexp)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_target_logit(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten targets, int64_t vocab_start,
                                        gaaw_ten target)
{
  LAUNCH(gaaw_cuda_target_logit(STREAM, DT(logits), rows_of(logits), cols_of(logits), P(logits), P(targets),
                                vocab_start, P(target)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_cross_entropy_backward(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten max,
                                                  gaaw_cten sumexp, gaaw_cten targets, int64_t vocab_start,
                                                  float dloss, gaaw_ten dlogits)
{
  LAUNCH(gaaw_cuda_cross_entropy_backward(STREAM, DT(logits), rows_of(logits), cols_of(logits), P(logits), P(max),
                                          P(sumexp), P(targets), vocab_start, dloss, P(dlogits)));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- optimizer */

gaaw_status_t gaaw_cuda_op_adamw_update(gaaw_context_t ctx, gaaw_ten params, gaaw_cten grads, gaaw_ten master,
                                        gaaw_ten m, gaaw_ten v, const gaaw_adamw_args_t *args)
{
  /* Bias corrections once per call, in double, as the host backend does. */
  gaaw_cuda_adamw_consts c = {
    .lr = args->lr,
    .beta1 = args->beta1,
    .beta2 = args->beta2,
    .eps = args->eps,
    .weight_decay = args->weight_decay,
    .grad_scale = args->grad_scale,
    .bias_correction1 = (float)(1.0 - pow((double)args->beta1, (double)args->step)),
    .bias_correction2 = (float)(1.0 - pow((double)args->beta2, (double)args->step)),
  };
  /* With master weights, params receive the cast of the update; without, params
   * are f32 and are the weights. */
  float *w = master ? P(master) : P(params);
  void *out = master ? P(params) : NULL;
  gaaw_cuda_dtype out_dt = master ? DT(params) : GAAW_CUDA_F32;
  LAUNCH(gaaw_cuda_adamw(STREAM, DT(grads), out_dt, gaaw_tensor_numel(params), P(grads), w, P(m), P(v), out, &c));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- utilities */

/* Whether the byte ranges of x and y overlap without being the same range. */
static int partial_overlap(const gaaw_tensor_t *x, const gaaw_tensor_t *y, size_t bytes)
{
  const char *a = P(x), *b = P(y);
  return a != b && a < b + bytes && b < a + bytes;
}

gaaw_status_t gaaw_cuda_op_cast(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  int64_t n = gaaw_tensor_numel(x);
  if (x->dtype != y->dtype) {
    LAUNCH(gaaw_cuda_cast(STREAM, DT(x), DT(y), n, P(x), P(y)));
    return GAAW_SUCCESS;
  }
  size_t bytes = (size_t)n * gaaw_dtype_size(x->dtype);
  if (bytes == 0 || P(x) == P(y)) return GAAW_SUCCESS;
  if (!partial_overlap(x, y, bytes)) {
    LAUNCH(cudaMemcpyAsync(P(y), P(x), bytes, cudaMemcpyDeviceToDevice, STREAM));
    return GAAW_SUCCESS;
  }
  /* Overlapping ranges (memmove semantics): through a copy. */
  gaaw_buffer_t buf = NULL;
  void *tmp = NULL;
  GAAW_CHECK(scratch(ctx, bytes, &buf, &tmp));
  gaaw_status_t st = launched(ctx, cudaMemcpyAsync(tmp, P(x), bytes, cudaMemcpyDeviceToDevice, STREAM), "copy in");
  if (st == GAAW_SUCCESS)
    st = launched(ctx, cudaMemcpyAsync(P(y), tmp, bytes, cudaMemcpyDeviceToDevice, STREAM), "copy out");
  return end_scratch(ctx, &buf, st);
}

gaaw_status_t gaaw_cuda_op_permute_0213(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  LAUNCH(gaaw_cuda_permute_0213(STREAM, gaaw_dtype_size(x->dtype), x->shape[0], x->shape[1], x->shape[2], x->shape[3],
                                P(x), P(y)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_sum_squares(gaaw_context_t ctx, gaaw_cten x, gaaw_ten out)
{
  int64_t n = gaaw_tensor_numel(x);
  gaaw_buffer_t buf = NULL;
  void *partial = NULL;
  GAAW_CHECK(scratch(ctx, (size_t)gaaw_cuda_sum_squares_partials(n) * sizeof(float), &buf, &partial));
  gaaw_status_t st = launched(ctx, gaaw_cuda_sum_squares(STREAM, DT(x), n, P(x), partial, P(out)),
                              "gaaw_cuda_sum_squares");
  return end_scratch(ctx, &buf, st);
}

gaaw_status_t gaaw_cuda_op_check_finite(gaaw_context_t ctx, gaaw_cten x, gaaw_ten flag)
{
  LAUNCH(gaaw_cuda_check_finite(STREAM, DT(x), gaaw_tensor_numel(x), P(x), P(flag)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_fill(gaaw_context_t ctx, gaaw_ten x, float value)
{
  /* The element's bit pattern, converted once here as the host backend does. */
  uint32_t bits;
  switch (x->dtype) {
  case GAAW_I32: {
    int32_t iv = (int32_t)value;
    memcpy(&bits, &iv, 4);
    break;
  }
  case GAAW_BF16: bits = gaaw_f32_to_bf16(value); break;
  case GAAW_F16: bits = gaaw_f32_to_f16(value); break;
  default: bits = gaaw_f32_bits(value); break;
  }
  LAUNCH(gaaw_cuda_fill_bits(STREAM, gaaw_dtype_size(x->dtype), gaaw_tensor_numel(x), bits, P(x)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_synchronize(gaaw_context_t ctx)
{
  /* Polled, so that a stuck collective ends the wait at its deadline. */
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  GAAW_CHECK(gaaw_cuda_wait_stream(ctx, st->compute));
  GAAW_CHECK(gaaw_cuda_wait_stream(ctx, st->comm));
  if (st->comm_watch) GAAW_CHECK(st->comm_watch(ctx)); /* and what finished with an error is reported */
  return GAAW_SUCCESS;
}
