/* Table entries of LayerNorm (alone and after a fused residual add), RMSNorm and the
 * bias gradient (kernels/norm.cl, and
 * column_sums of kernels/reduce.cl for the parameter gradients). */
#include "backends/opencl/opencl.h"

enum { COLSUM_LAYERNORM = 0, COLSUM_RMSNORM = 1, COLSUM_BIAS = 2 };

/* Parameter gradients summed over rows; unused tensors are given as dy. */
static gaaw_status_t column_sums(gaaw_context_t ctx, cl_int mode, gaaw_cten dy, gaaw_cten x, gaaw_cten mean,
                                 gaaw_cten rstd, gaaw_cten dw, gaaw_cten db)
{
  cl_long N = ocl_rows(dy), C = ocl_cols(dy);
  return OCL_RUN(ctx, OCL_K_column_sums, ocl_ew_groups(C), OCL_EW_WG, OCL_VAL(mode), OCL_TEN(dy),
                 OCL_TEN(x ? x : dy), OCL_TEN(mean ? mean : dy), OCL_TEN(rstd ? rstd : dy), OCL_TEN(dw ? dw : dy),
                 OCL_TEN(db ? db : dy), OCL_VAL(N), OCL_VAL(C));
}

gaaw_status_t ocl_layernorm_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_cten w, gaaw_cten b, float eps, gaaw_ten y,
                                    gaaw_ten mean, gaaw_ten rstd)
{
  OCL_CHECK_F16("layernorm_forward", x, w, b, y);
  cl_long C = ocl_cols(x);
  return OCL_RUN(ctx, OCL_K_layernorm_forward, (size_t)ocl_rows(x), OCL_ROW_WG, OCL_TEN(x), OCL_TEN(w), OCL_TEN(b),
                 OCL_VAL(eps), OCL_TEN(y), OCL_TEN(mean), OCL_TEN(rstd), OCL_VAL(C));
}

gaaw_status_t ocl_add_layernorm_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_cten y, gaaw_cten bias, gaaw_cten w,
                                        gaaw_cten b, float eps, gaaw_ten x2, gaaw_ten h, gaaw_ten mean, gaaw_ten rstd)
{
  OCL_CHECK_F16("add_layernorm_forward", x, y, bias, w, b, x2, h);
  cl_long C = ocl_cols(x);
  cl_int has_bias = bias != NULL;
  const gaaw_tensor_t *bs = bias ? bias : w; /* a stand-in the kernel does not read */
  return OCL_RUN(ctx, OCL_K_add_layernorm_forward, (size_t)ocl_rows(x), OCL_ROW_WG, OCL_TEN(x), OCL_TEN(y),
                 OCL_TEN(bs), OCL_VAL(has_bias), OCL_TEN(w), OCL_TEN(b), OCL_VAL(eps), OCL_TEN(x2), OCL_TEN(h),
                 OCL_TEN(mean), OCL_TEN(rstd), OCL_VAL(C));
}

gaaw_status_t ocl_layernorm_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_cten w, gaaw_cten mean,
                                     gaaw_cten rstd, gaaw_ten dx, gaaw_ten dw, gaaw_ten db)
{
  OCL_CHECK_F16("layernorm_backward", dy, x, w, dx, dw, db);
  cl_long C = ocl_cols(x);
  GAAW_CHECK(OCL_RUN(ctx, OCL_K_layernorm_backward, (size_t)ocl_rows(x), OCL_ROW_WG, OCL_TEN(dy), OCL_TEN(x),
                     OCL_TEN(w), OCL_TEN(mean), OCL_TEN(rstd), OCL_TEN(dx), OCL_VAL(C)));
  GAAW_CHECK(column_sums(ctx, COLSUM_LAYERNORM, dy, x, mean, rstd, dw, db));
  return GAAW_SUCCESS;
}

gaaw_status_t ocl_rmsnorm_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_cten w, float eps, gaaw_ten y,
                                  gaaw_ten rstd)
{
  OCL_CHECK_F16("rmsnorm_forward", x, w, y);
  cl_long C = ocl_cols(x);
  return OCL_RUN(ctx, OCL_K_rmsnorm_forward, (size_t)ocl_rows(x), OCL_ROW_WG, OCL_TEN(x), OCL_TEN(w), OCL_VAL(eps),
                 OCL_TEN(y), OCL_TEN(rstd), OCL_VAL(C));
}

gaaw_status_t ocl_rmsnorm_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_cten w, gaaw_cten rstd,
                                   gaaw_ten dx, gaaw_ten dw)
{
  OCL_CHECK_F16("rmsnorm_backward", dy, x, w, dx, dw);
  cl_long C = ocl_cols(x);
  GAAW_CHECK(OCL_RUN(ctx, OCL_K_rmsnorm_backward, (size_t)ocl_rows(x), OCL_ROW_WG, OCL_TEN(dy), OCL_TEN(x),
                     OCL_TEN(w), OCL_TEN(rstd), OCL_TEN(dx), OCL_VAL(C)));
  GAAW_CHECK(column_sums(ctx, COLSUM_RMSNORM, dy, x, NULL, rstd, dw, NULL));
  return GAAW_SUCCESS;
}

gaaw_status_t ocl_bias_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_ten db)
{
  OCL_CHECK_F16("bias_backward", dy, db);
  return column_sums(ctx, COLSUM_BIAS, dy, NULL, NULL, NULL, NULL, db);
}
