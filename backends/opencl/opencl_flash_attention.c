/* Table entries of the blocked causal attention (kernels/attention.cl): one
 * work-group per row, no (T, T) matrix; 16-bit tensors through f32 copies
 * (ocl_stage), lse and delta f32. Backward runs the query rows first (dq, and
 * delta = rowsum(dout * out) into a (BH, T) workspace), then the key rows (dk, dv). */
#include <math.h>

#include "backends/opencl/opencl.h"

gaaw_status_t ocl_flash_attention_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v, gaaw_ten out,
                                          gaaw_ten lse)
{
  OCL_CHECK_F16("flash_attention_forward", q, k, v, out);
  cl_long D = ocl_cols(q), T = q->shape[q->ndim - 2], rows = ocl_rows(q);
  float scale = 1.0f / sqrtf((float)D);
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fq, fk, fv, fo;
  ocl_in(&s, q, &fq);
  ocl_in(&s, k, &fk);
  ocl_in(&s, v, &fv);
  ocl_out(&s, out, &fo);
  if (s.status == GAAW_SUCCESS)
    s.status = OCL_RUN(ctx, OCL_K_flash_attention_forward, (size_t)rows, OCL_ROW_WG, OCL_TEN(&fq), OCL_TEN(&fk),
                       OCL_TEN(&fv), OCL_TEN(&fo), OCL_TEN(lse), OCL_VAL(T), OCL_VAL(D), OCL_VAL(scale));
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_flash_attention_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                           gaaw_cten out, gaaw_cten lse, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)
{
  OCL_CHECK_F16("flash_attention_backward", dout, q, k, v, out, dq, dk, dv);
  cl_long D = ocl_cols(q), T = q->shape[q->ndim - 2], rows = ocl_rows(q);
  float scale = 1.0f / sqrtf((float)D);
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fdo, fq, fk, fv, fo, fdq, fdk, fdv, delta;
  ocl_in(&s, dout, &fdo);
  ocl_in(&s, q, &fq);
  ocl_in(&s, k, &fk);
  ocl_in(&s, v, &fv);
  ocl_in(&s, out, &fo);
  ocl_inout(&s, dq, &fdq);
  ocl_inout(&s, dk, &fdk);
  ocl_inout(&s, dv, &fdv);
  ocl_scratch(&s, rows, &delta);
  if (s.status == GAAW_SUCCESS)
    s.status = OCL_RUN(ctx, OCL_K_flash_attention_backward_dq, (size_t)rows, OCL_ROW_WG, OCL_TEN(&fdo),
                       OCL_TEN(&fq), OCL_TEN(&fk), OCL_TEN(&fv), OCL_TEN(&fo), OCL_TEN(lse), OCL_TEN(&delta),
                       OCL_TEN(&fdq), OCL_VAL(T), OCL_VAL(D), OCL_VAL(scale));
  if (s.status == GAAW_SUCCESS)
    s.status = OCL_RUN(ctx, OCL_K_flash_attention_backward_dkv, (size_t)rows, OCL_ROW_WG, OCL_TEN(&fdo),
                       OCL_TEN(&fq), OCL_TEN(&fk), OCL_TEN(&fv), OCL_TEN(lse), OCL_TEN(&delta), OCL_TEN(&fdk),
                       OCL_TEN(&fdv), OCL_VAL(T), OCL_VAL(D), OCL_VAL(scale));
  return ocl_stage_end(&s);
}
