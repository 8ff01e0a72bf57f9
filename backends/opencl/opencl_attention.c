/* Table entries of the causal softmax and of attention, composed as on the host:
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
