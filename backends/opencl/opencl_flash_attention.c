/* Table entries of the blocked attention (kernels/attention.cl): one work-group per
 * row, no (Tq, Tk) matrix; 16-bit tensors through f32 copies (ocl_stage), lse and
 * delta f32. Backward runs the query rows first (dq, and delta = rowsum(dout * out)
 * into a (BH, Tq) workspace), then the key rows (dk, dv). */
#include <math.h>

#include "backends/opencl/opencl.h"

gaaw_status_t ocl_attention_block_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v, int64_t q_start,
                                          int64_t k_start, int causal, gaaw_ten out, gaaw_ten lse)
{
  OCL_CHECK_F16("attention_block_forward", q, k, v, out);
  cl_long D = ocl_cols(q), Tq = q->shape[q->ndim - 2], Tk = k->shape[k->ndim - 2], rows = ocl_rows(q);
  cl_long qs = q_start, ks = k_start;
  cl_int c = causal;
  float scale = 1.0f / sqrtf((float)D);
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fq, fk, fv, fo;
  ocl_in(&s, q, &fq);
  ocl_in(&s, k, &fk);
  ocl_in(&s, v, &fv);
  ocl_out(&s, out, &fo);
  if (s.status == GAAW_SUCCESS && rows > 0)
    s.status = OCL_RUN(ctx, OCL_K_attention_block_forward, (size_t)rows, OCL_ROW_WG, OCL_TEN(&fq), OCL_TEN(&fk),
                       OCL_TEN(&fv), OCL_TEN(&fo), OCL_TEN(lse), OCL_VAL(Tq), OCL_VAL(Tk), OCL_VAL(D), OCL_VAL(scale),
                       OCL_VAL(qs), OCL_VAL(ks), OCL_VAL(c));
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_attention_block_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                           gaaw_cten out, gaaw_cten lse, int64_t q_start, int64_t k_start, int causal,
                                           gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)
{
  OCL_CHECK_F16("attention_block_backward", dout, q, k, v, out, dq, dk, dv);
  cl_long D = ocl_cols(q), Tq = q->shape[q->ndim - 2], Tk = k->shape[k->ndim - 2], rows = ocl_rows(q),
          krows = ocl_rows(k);
  cl_long qs = q_start, ks = k_start;
  cl_int c = causal;
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
  if (s.status == GAAW_SUCCESS && rows > 0)
    s.status = OCL_RUN(ctx, OCL_K_attention_block_backward_dq, (size_t)rows, OCL_ROW_WG, OCL_TEN(&fdo),
                       OCL_TEN(&fq), OCL_TEN(&fk), OCL_TEN(&fv), OCL_TEN(&fo), OCL_TEN(lse), OCL_TEN(&delta),
                       OCL_TEN(&fdq), OCL_VAL(Tq), OCL_VAL(Tk), OCL_VAL(D), OCL_VAL(scale), OCL_VAL(qs), OCL_VAL(ks),
                       OCL_VAL(c));
  if (s.status == GAAW_SUCCESS && krows > 0)
    s.status = OCL_RUN(ctx, OCL_K_attention_block_backward_dkv, (size_t)krows, OCL_ROW_WG, OCL_TEN(&fdo),
                       OCL_TEN(&fq), OCL_TEN(&fk), OCL_TEN(&fv), OCL_TEN(lse), OCL_TEN(&delta), OCL_TEN(&fdk),
                       OCL_TEN(&fdv), OCL_VAL(Tq), OCL_VAL(Tk), OCL_VAL(D), OCL_VAL(scale), OCL_VAL(qs), OCL_VAL(ks),
                       OCL_VAL(c));
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_attention_merge(gaaw_context_t ctx, gaaw_ten out, gaaw_ten lse, gaaw_cten part_out,
                                  gaaw_cten part_lse)
{
  OCL_CHECK_F16("attention_merge", out, part_out);
  cl_long D = ocl_cols(out), rows = ocl_rows(out);
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fo, fp;
  ocl_inout(&s, out, &fo);
  ocl_in(&s, part_out, &fp);
  if (s.status == GAAW_SUCCESS && rows > 0)
    s.status = OCL_RUN(ctx, OCL_K_attention_merge, ocl_ew_groups(rows), OCL_EW_WG, OCL_TEN(&fo), OCL_TEN(lse),
                       OCL_TEN(&fp), OCL_TEN(part_lse), OCL_VAL(rows), OCL_VAL(D));
  return ocl_stage_end(&s);
}
