/* The two matrix products every layer is made of, on this rank's slices. */
#ifndef GAAW_PARALLEL_LINEAR_H
#define GAAW_PARALLEL_LINEAR_H

#include "gaaw/kernels.h"

/* y = x W^T (+ b).   x: (N, in)   W: (out, in)   b: (out) or NULL   y: (N, out) */
gaaw_status_t gaaw_linear_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *w,
                                  const gaaw_tensor_t *b, gaaw_tensor_t *y);
/* Its backward in two halves, which a split backward (ZB-H1's B and W) runs
 * apart: the input gradient dx = dy W (overwritten, so it needs no zero-fill;
 * nothing when dx is NULL), and the weight gradient dW += dy^T x, db += sum_n dy
 * (db may be NULL).   dy: (N, out) */
gaaw_status_t gaaw_linear_backward_input(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *w,
                                         gaaw_tensor_t *dx);
gaaw_status_t gaaw_linear_backward_weight(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                          gaaw_tensor_t *dw, gaaw_tensor_t *db);

#endif
