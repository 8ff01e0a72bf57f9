/* Linear forward and backward through the device's GEMM. */
#include "backends/runtime/context_impl.h"
#include "parallel/linear.h"

gaaw_status_t gaaw_linear_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *w,
                                  const gaaw_tensor_t *b, gaaw_tensor_t *y)
{
  GAAW_CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_T, 1.0f, x, w, 0.0f, y));
  if (b) GAAW_CHECK(gaaw_bias_add(ctx, y, b));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_linear_backward_input(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *w,
                                         gaaw_tensor_t *dx)
{
  if (dx) GAAW_CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, dy, w, 0.0f, dx));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_linear_backward_weight(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                          gaaw_tensor_t *dw, gaaw_tensor_t *db)
{
  GAAW_CHECK(gaaw_gemm(ctx, GAAW_OP_T, GAAW_OP_N, 1.0f, dy, x, 1.0f, dw));
  if (db) GAAW_CHECK(gaaw_bias_backward(ctx, dy, db));
  return GAAW_SUCCESS;
}
