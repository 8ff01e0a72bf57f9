/* Layernorm or RMSnorm through the device kernels, alone or after the residual add. */
#include "backends/fused.h"
#include "backends/runtime/context_impl.h"
#include "parallel/norm.h"

gaaw_status_t gaaw_norm_forward(gaaw_context_t ctx, gaaw_norm_t kind, float eps, const gaaw_tensor_t *x,
                                const gaaw_tensor_t *w, const gaaw_tensor_t *b, gaaw_tensor_t *y,
                                gaaw_tensor_t *mean, gaaw_tensor_t *rstd)
{
  if (kind == GAAW_NORM_RMSNORM)
    GAAW_CHECK(gaaw_rmsnorm_forward(ctx, x, w, eps, y, rstd));
  else
    GAAW_CHECK(gaaw_layernorm_forward(ctx, x, w, b, eps, y, mean, rstd));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_add_norm_forward(gaaw_context_t ctx, gaaw_norm_t kind, float eps, const gaaw_tensor_t *x,
                                    gaaw_tensor_t *y,
                                    const gaaw_tensor_t *bias, const gaaw_tensor_t *w, const gaaw_tensor_t *b,
                                    gaaw_tensor_t *x2, gaaw_tensor_t *h, gaaw_tensor_t *mean, gaaw_tensor_t *rstd)
{
  if (kind == GAAW_NORM_LAYERNORM) {
    GAAW_CHECK(gaaw_add_layernorm_forward(ctx, x, y, bias, w, b, eps, x2, h, mean, rstd));
    return GAAW_SUCCESS;
  }
  if (bias) GAAW_CHECK(gaaw_bias_add(ctx, y, bias));
  GAAW_CHECK(gaaw_add(ctx, x, y, x2));
  GAAW_CHECK(gaaw_norm_forward(ctx, kind, eps, x2, w, b, h, mean, rstd));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_norm_backward(gaaw_context_t ctx, gaaw_norm_t kind, const gaaw_tensor_t *dy,
                                 const gaaw_tensor_t *x, const gaaw_tensor_t *w, const gaaw_tensor_t *mean,
                                 const gaaw_tensor_t *rstd, gaaw_tensor_t *dx, gaaw_tensor_t *dw,
                                 gaaw_tensor_t *db)
{
  if (kind == GAAW_NORM_RMSNORM)
    GAAW_CHECK(gaaw_rmsnorm_backward(ctx, dy, x, w, rstd, dx, dw));
  else
    GAAW_CHECK(gaaw_layernorm_backward(ctx, dy, x, w, mean, rstd, dx, dw, db));
  return GAAW_SUCCESS;
}
