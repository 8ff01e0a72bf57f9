/* Table entries of the cross-entropy pieces, apart and fused (kernels/rows.cl) and of the regression
 * losses (kernels/pointwise.cl). */
#include "backends/opencl/opencl.h"

gaaw_status_t ocl_row_max(gaaw_context_t ctx, gaaw_cten logits, gaaw_ten max)
{
  OCL_CHECK_F16("row_max", logits);
  cl_long V = ocl_cols(logits);
  return OCL_RUN(ctx, OCL_K_row_max, (size_t)ocl_rows(logits), OCL_ROW_WG, OCL_TEN(logits), OCL_TEN(max), OCL_VAL(V));
}

gaaw_status_t ocl_row_sum_exp(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten max, gaaw_ten sumexp)
{
  OCL_CHECK_F16("row_sum_exp", logits);
  cl_long V = ocl_cols(logits);
  return OCL_RUN(ctx, OCL_K_row_sum_exp, (size_t)ocl_rows(logits), OCL_ROW_WG, OCL_TEN(logits), OCL_TEN(max),
                 OCL_TEN(sumexp), OCL_VAL(V));
}

gaaw_status_t ocl_target_logit(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten targets, int64_t vocab_start,
                               gaaw_ten target)
{
  OCL_CHECK_F16("target_logit", logits);
  cl_long V = ocl_cols(logits), N = ocl_rows(logits), vs = vocab_start;
  return OCL_RUN(ctx, OCL_K_target_logit, ocl_ew_groups(N), OCL_EW_WG, OCL_TEN(logits), OCL_TEN(targets),
                 OCL_VAL(vs), OCL_TEN(target), OCL_VAL(V), OCL_VAL(N));
}

gaaw_status_t ocl_cross_entropy_backward(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten max, gaaw_cten sumexp,
                                         gaaw_cten targets, int64_t vocab_start, float dloss, gaaw_ten dlogits)
{
  OCL_CHECK_F16("cross_entropy_backward", logits, dlogits);
  cl_long V = ocl_cols(logits), total = gaaw_tensor_numel(logits), vs = vocab_start;
  return OCL_RUN(ctx, OCL_K_cross_entropy_backward, ocl_ew_groups(total), OCL_EW_WG, OCL_TEN(logits), OCL_TEN(max),
                 OCL_TEN(sumexp), OCL_TEN(targets), OCL_VAL(vs), OCL_VAL(dloss), OCL_TEN(dlogits), OCL_VAL(V),
                 OCL_VAL(total));
}

gaaw_status_t ocl_cross_entropy_forward(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten targets, int64_t vocab_start,
                                        float dloss, gaaw_ten max, gaaw_ten sumexp, gaaw_ten target, gaaw_ten dlogits)
{
  OCL_CHECK_F16("cross_entropy_forward", logits, dlogits);
  cl_long V = ocl_cols(logits), vs = vocab_start;
  cl_int has_grad = dlogits != NULL;
  const gaaw_tensor_t *dl = dlogits ? dlogits : logits; /* a stand-in the kernel does not touch */
  return OCL_RUN(ctx, OCL_K_cross_entropy_forward, (size_t)ocl_rows(logits), OCL_ROW_WG, OCL_TEN(logits),
                 OCL_TEN(targets), OCL_VAL(vs), OCL_VAL(dloss), OCL_TEN(max), OCL_TEN(sumexp), OCL_TEN(target),
                 OCL_TEN(dl), OCL_VAL(has_grad), OCL_VAL(V));
}

_Static_assert(GAAW_LOSS_MSE == 0 && GAAW_LOSS_L1 == 1 && GAAW_LOSS_HUBER == 2,
               "kernels/pointwise.cl's regression_loss numbers the kinds as gaaw_loss_t");

gaaw_status_t ocl_regression_loss(gaaw_context_t ctx, gaaw_loss_t kind, float delta, gaaw_cten pred, gaaw_cten target,
                                  gaaw_cten weights, gaaw_ten loss, gaaw_ten grad)
{
  OCL_CHECK_F16("regression_loss", pred, target, grad);
  cl_long n = gaaw_tensor_numel(pred);
  cl_int has_w = weights != NULL, k = (cl_int)kind;
  const gaaw_tensor_t *w = weights ? weights : pred; /* a stand-in the kernel does not read */
  return OCL_RUN(ctx, OCL_K_regression_loss, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(pred), OCL_TEN(target), OCL_TEN(w),
                 OCL_VAL(has_w), OCL_VAL(k), OCL_VAL(delta), OCL_TEN(loss), OCL_TEN(grad), OCL_VAL(n));
}
