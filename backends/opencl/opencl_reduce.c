/* Table entries of the whole-tensor reductions (kernels/reduce.cl) and of the
 * embedding lookup and scatter-add (kernels/layout.cl). */
#include "backends/opencl/opencl.h"

gaaw_status_t ocl_sum_squares(gaaw_context_t ctx, gaaw_cten x, gaaw_ten out)
{
  OCL_CHECK_F16("sum_squares", x);
  cl_long n = gaaw_tensor_numel(x), chunks = (n + OCL_SUMSQ_CHUNK - 1) / OCL_SUMSQ_CHUNK;
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t partial;
  ocl_scratch(&s, chunks, &partial);
  if (s.status == GAAW_SUCCESS)
    s.status = OCL_RUN(ctx, OCL_K_sum_squares_partial, (size_t)chunks, OCL_ROW_WG, OCL_TEN(x),
                       {sizeof(cl_mem), &partial.buf->handle}, OCL_VAL(n));
  if (s.status == GAAW_SUCCESS)
    s.status = OCL_RUN(ctx, OCL_K_sum_squares_final, 1, 1, {sizeof(cl_mem), &partial.buf->handle}, OCL_VAL(chunks),
                       OCL_TEN(out));
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_check_finite(gaaw_context_t ctx, gaaw_cten x, gaaw_ten flag)
{
  OCL_CHECK_F16("check_finite", x);
  cl_long n = gaaw_tensor_numel(x);
  return OCL_RUN(ctx, OCL_K_check_finite, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_TEN(flag), OCL_VAL(n));
}

gaaw_status_t ocl_embedding_forward(gaaw_context_t ctx, gaaw_cten tokens, gaaw_cten table, int64_t vocab_start,
                                    gaaw_ten y)
{
  OCL_CHECK_F16("embedding_forward", table, y);
  cl_long V = ocl_rows(table), C = ocl_cols(table), total = gaaw_tensor_numel(y), vs = vocab_start;
  return OCL_RUN(ctx, OCL_K_embedding_forward, ocl_ew_groups(total), OCL_EW_WG, OCL_TEN(tokens), OCL_TEN(table),
                 OCL_VAL(vs), OCL_TEN(y), OCL_VAL(V), OCL_VAL(C), OCL_VAL(total));
}

gaaw_status_t ocl_embedding_backward(gaaw_context_t ctx, gaaw_cten tokens, gaaw_cten dy, int64_t vocab_start,
                                     gaaw_ten dtable)
{
  OCL_CHECK_F16("embedding_backward", dy, dtable);
  cl_long N = gaaw_tensor_numel(tokens), V = ocl_rows(dtable), C = ocl_cols(dtable), vs = vocab_start;
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t ft; /* repeated tokens add several times: accumulate in f32, round once */
  ocl_inout(&s, dtable, &ft);
  if (s.status == GAAW_SUCCESS)
    s.status = OCL_RUN(ctx, OCL_K_embedding_backward, ocl_ew_groups(C), OCL_EW_WG, OCL_TEN(tokens), OCL_TEN(dy),
                       OCL_VAL(vs), OCL_TEN(&ft), OCL_VAL(N), OCL_VAL(V), OCL_VAL(C));
  return ocl_stage_end(&s);
}
