/* Layernorm or RMSnorm, chosen by the model's config. */
#ifndef GAAW_PARALLEL_NORM_H
#define GAAW_PARALLEL_NORM_H

#include "gaaw/kernels.h"
#include "gaaw/model.h"

#define GAAW_NORM_EPS 1e-5f /* the default epsilon */

/* y = norm(x) w (+ b), with epsilon eps.  x, y: (N, C)  w, b: (C)  mean (layernorm only), rstd: (N) f32 */
gaaw_status_t gaaw_norm_forward(gaaw_context_t ctx, gaaw_norm_t kind, float eps, const gaaw_tensor_t *x,
                                const gaaw_tensor_t *w, const gaaw_tensor_t *b, gaaw_tensor_t *y,
                                gaaw_tensor_t *mean, gaaw_tensor_t *rstd);
/* The residual add and the norm after it: x2 = x + (y + bias) (bias may be NULL),
 * h = norm(x2) w (+ b); one fused pass for layernorm (backends/fused.h). y is
 * scratch: with a bias its contents are unspecified afterwards.
 * x, y, x2, h: (N, C)   bias, w, b: (C)   mean (layernorm only), rstd: (N) f32 */
gaaw_status_t gaaw_add_norm_forward(gaaw_context_t ctx, gaaw_norm_t kind, float eps, const gaaw_tensor_t *x,
                                    gaaw_tensor_t *y,
                                    const gaaw_tensor_t *bias, const gaaw_tensor_t *w, const gaaw_tensor_t *b,
                                    gaaw_tensor_t *x2, gaaw_tensor_t *h, gaaw_tensor_t *mean, gaaw_tensor_t *rstd);
/* dx += .., dw += .., db += .. (b, db unused for RMSnorm). */
gaaw_status_t gaaw_norm_backward(gaaw_context_t ctx, gaaw_norm_t kind, const gaaw_tensor_t *dy,
                                 const gaaw_tensor_t *x, const gaaw_tensor_t *w, const gaaw_tensor_t *mean,
                                 const gaaw_tensor_t *rstd, gaaw_tensor_t *dx, gaaw_tensor_t *dw,
                                 gaaw_tensor_t *db);

#endif
