/* Table entries of the causal softmax and of attention (also on the QKV projection's
 * layout, at the end), composed as on the host:
 * scores = q k^T (CLBlast batched GEMM), probs = causal softmax of scores / sqrt(D),
 * out = probs v; 16-bit tensors through f32 copies (ocl_stage). */
#include <math.h>

#include "backends/opencl/opencl.h"

/* (batch, T) of a (..., T, T) tensor. */
static void square_dims(const gaaw_tensor_t *t, int64_t *batch, int64_t *T)
{
  *T = ocl_cols(t);
  *batch = *T ? ocl_rows(t) / *T : 0;
}

static gaaw_status_t softmax_forward(gaaw_context_t ctx, float scale, gaaw_cten x, gaaw_cten y)
{
  int64_t batch, T;
  square_dims(x, &batch, &T);
  cl_long t = T;
  return OCL_RUN(ctx, OCL_K_causal_softmax_forward, (size_t)(batch * T), OCL_ROW_WG, OCL_VAL(scale), OCL_TEN(x),
                 OCL_TEN(y), OCL_VAL(t));
}

static gaaw_status_t softmax_backward(gaaw_context_t ctx, float scale, gaaw_cten y, gaaw_cten dy, gaaw_cten dx,
                                      cl_int accumulate)
{
  int64_t batch, T;
  square_dims(y, &batch, &T);
  cl_long t = T;
  return OCL_RUN(ctx, OCL_K_causal_softmax_backward, (size_t)(batch * T), OCL_ROW_WG, OCL_VAL(scale), OCL_TEN(y),
                 OCL_TEN(dy), OCL_TEN(dx), OCL_VAL(t), OCL_VAL(accumulate));
}

gaaw_status_t ocl_causal_softmax_forward(gaaw_context_t ctx, float scale, gaaw_cten x, gaaw_ten y)
{
  OCL_CHECK_F16("causal_softmax_forward", x, y);
  return softmax_forward(ctx, scale, x, y);
}

gaaw_status_t ocl_causal_softmax_backward(gaaw_context_t ctx, float scale, gaaw_cten y, gaaw_cten dy, gaaw_ten dx)
{
  OCL_CHECK_F16("causal_softmax_backward", y, dy, dx);
  return softmax_backward(ctx, scale, y, dy, dx, 1);
}

gaaw_status_t ocl_attention_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v, gaaw_ten probs,
                                    gaaw_ten out)
{
  OCL_CHECK_F16("attention_forward", q, k, v, probs, out);
  int64_t BH, T, D = ocl_cols(q);
  square_dims(probs, &BH, &T);
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fq, fk, fv, fp, fo;
  ocl_in(&s, q, &fq);
  ocl_in(&s, k, &fk);
  ocl_in(&s, v, &fv);
  ocl_out(&s, probs, &fp);
  ocl_out(&s, out, &fo);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_ocl_sgemm(ctx, GAAW_OP_N, GAAW_OP_T, BH, T, T, D, 1.0f, &fq, &fk, 0.0f, &fp);
  if (s.status == GAAW_SUCCESS) s.status = softmax_forward(ctx, 1.0f / sqrtf((float)D), &fp, &fp);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_ocl_sgemm(ctx, GAAW_OP_N, GAAW_OP_N, BH, T, D, T, 1.0f, &fp, &fv, 0.0f, &fo);
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_attention_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                     gaaw_cten probs, gaaw_ten dprobs, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)
{
  OCL_CHECK_F16("attention_backward", dout, q, k, v, probs, dprobs, dq, dk, dv);
  int64_t BH, T, D = ocl_cols(q);
  square_dims(probs, &BH, &T);
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fdo, fq, fk, fv, fp, fdp, fdq, fdk, fdv;
  ocl_in(&s, dout, &fdo);
  ocl_in(&s, q, &fq);
  ocl_in(&s, k, &fk);
  ocl_in(&s, v, &fv);
  ocl_in(&s, probs, &fp);
  ocl_out(&s, dprobs, &fdp);
  ocl_inout(&s, dq, &fdq);
  ocl_inout(&s, dk, &fdk);
  ocl_inout(&s, dv, &fdv);
  /* dv += probs^T dout;  dprobs = dout v^T */
  if (s.status == GAAW_SUCCESS) s.status = gaaw_ocl_sgemm(ctx, GAAW_OP_T, GAAW_OP_N, BH, T, D, T, 1.0f, &fp, &fdo, 1.0f, &fdv);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_ocl_sgemm(ctx, GAAW_OP_N, GAAW_OP_T, BH, T, T, D, 1.0f, &fdo, &fv, 0.0f, &fdp);
  /* dscores (in dprobs) = scale probs (dprobs - rowsum(dprobs probs)) */
  if (s.status == GAAW_SUCCESS) s.status = softmax_backward(ctx, 1.0f / sqrtf((float)D), &fp, &fdp, &fdp, 0);
  /* dq += dscores k;  dk += dscores^T q */
  if (s.status == GAAW_SUCCESS) s.status = gaaw_ocl_sgemm(ctx, GAAW_OP_N, GAAW_OP_N, BH, T, D, T, 1.0f, &fdp, &fk, 1.0f, &fdq);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_ocl_sgemm(ctx, GAAW_OP_T, GAAW_OP_N, BH, T, D, T, 1.0f, &fdp, &fq, 1.0f, &fdk);
  return ocl_stage_end(&s);
}

/* ---------------------------------------------------------------- the QKV layout */

/* The attention on the QKV projection's layout (backends/fused.h): the GEMMs above
 * with each head cut from qkv (B, T, 3H, D) in place, q, k and v H D apart in a row
 * of 3 H D and the heads D apart, and out (B, T, H, D) written merged; one batched
 * GEMM per sequence over its H heads (the heads of a sequence are equally spaced,
 * those of different sequences are not). */
typedef struct {
  int64_t B, T, H, D;
} qkv_dims;

static qkv_dims dims_of_qkv(gaaw_cten qkv)
{
  return (qkv_dims){qkv->shape[0], qkv->shape[1], qkv->shape[2] / 3, qkv->shape[3]};
}

/* Sequence b's heads of part (0 q, 1 k, 2 v) of qkv. */
static ocl_matrices qkv_heads(const gaaw_tensor_t *qkv, const qkv_dims *d, int64_t b, int part)
{
  int64_t row = 3 * d->H * d->D;
  return (ocl_matrices){qkv, b * d->T * row + part * d->H * d->D, row, d->D};
}

/* Sequence b's heads of a (B, T, H, D) tensor. */
static ocl_matrices merged_heads(const gaaw_tensor_t *t, const qkv_dims *d, int64_t b)
{
  return (ocl_matrices){t, b * d->T * d->H * d->D, d->H * d->D, d->D};
}

/* Sequence b's (T, T) matrices of a (B H, T, T) tensor. */
static ocl_matrices square_heads(const gaaw_tensor_t *t, const qkv_dims *d, int64_t b)
{
  return (ocl_matrices){t, b * d->H * d->T * d->T, d->T, d->T * d->T};
}

gaaw_status_t ocl_attention_qkv_forward(gaaw_context_t ctx, gaaw_cten qkv, gaaw_ten probs, gaaw_ten out)
{
  OCL_CHECK_F16("attention_qkv_forward", qkv, probs, out);
  qkv_dims d = dims_of_qkv(qkv);
  int64_t T = d.T, D = d.D, H = d.H;
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fqkv, fp, fo;
  ocl_in(&s, qkv, &fqkv);
  ocl_out(&s, probs, &fp);
  ocl_out(&s, out, &fo);
  /* scores = q k^T */
  for (int64_t b = 0; b < d.B && s.status == GAAW_SUCCESS; b++)
    s.status = gaaw_ocl_sgemm_strided(ctx, GAAW_OP_N, GAAW_OP_T, H, T, T, D, 1.0f, qkv_heads(&fqkv, &d, b, 0),
                                      qkv_heads(&fqkv, &d, b, 1), 0.0f, square_heads(&fp, &d, b));
  if (s.status == GAAW_SUCCESS) s.status = softmax_forward(ctx, 1.0f / sqrtf((float)D), &fp, &fp);
  /* out = probs v */
  for (int64_t b = 0; b < d.B && s.status == GAAW_SUCCESS; b++)
    s.status = gaaw_ocl_sgemm_strided(ctx, GAAW_OP_N, GAAW_OP_N, H, T, D, T, 1.0f, square_heads(&fp, &d, b),
                                      qkv_heads(&fqkv, &d, b, 2), 0.0f, merged_heads(&fo, &d, b));
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_attention_qkv_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten qkv, gaaw_cten probs,
                                         gaaw_ten dprobs, gaaw_ten dqkv)
{
  OCL_CHECK_F16("attention_qkv_backward", dout, qkv, probs, dprobs, dqkv);
  qkv_dims d = dims_of_qkv(qkv);
  int64_t T = d.T, D = d.D, H = d.H;
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fdo, fqkv, fp, fdp, fd;
  ocl_in(&s, dout, &fdo);
  ocl_in(&s, qkv, &fqkv);
  ocl_in(&s, probs, &fp);
  ocl_out(&s, dprobs, &fdp);
  ocl_out(&s, dqkv, &fd); /* every element is written (beta 0) */
  /* dv = probs^T dout;  dprobs = dout v^T */
  for (int64_t b = 0; b < d.B && s.status == GAAW_SUCCESS; b++) {
    s.status = gaaw_ocl_sgemm_strided(ctx, GAAW_OP_T, GAAW_OP_N, H, T, D, T, 1.0f, square_heads(&fp, &d, b),
                                      merged_heads(&fdo, &d, b), 0.0f, qkv_heads(&fd, &d, b, 2));
    if (s.status == GAAW_SUCCESS)
      s.status = gaaw_ocl_sgemm_strided(ctx, GAAW_OP_N, GAAW_OP_T, H, T, T, D, 1.0f, merged_heads(&fdo, &d, b),
                                        qkv_heads(&fqkv, &d, b, 2), 0.0f, square_heads(&fdp, &d, b));
  }
  /* dscores (in dprobs) = scale probs (dprobs - rowsum(dprobs probs)) */
  if (s.status == GAAW_SUCCESS) s.status = softmax_backward(ctx, 1.0f / sqrtf((float)D), &fp, &fdp, &fdp, 0);
  /* dq = dscores k;  dk = dscores^T q */
  for (int64_t b = 0; b < d.B && s.status == GAAW_SUCCESS; b++) {
    s.status = gaaw_ocl_sgemm_strided(ctx, GAAW_OP_N, GAAW_OP_N, H, T, D, T, 1.0f, square_heads(&fdp, &d, b),
                                      qkv_heads(&fqkv, &d, b, 1), 0.0f, qkv_heads(&fd, &d, b, 0));
    if (s.status == GAAW_SUCCESS)
      s.status = gaaw_ocl_sgemm_strided(ctx, GAAW_OP_T, GAAW_OP_N, H, T, D, T, 1.0f, square_heads(&fdp, &d, b),
                                        qkv_heads(&fqkv, &d, b, 0), 0.0f, qkv_heads(&fd, &d, b, 1));
  }
  return ocl_stage_end(&s);
}
