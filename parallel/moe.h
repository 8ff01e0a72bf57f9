/* The mixture-of-experts MLP on one rank (every expert here; no expert parallelism
 * yet): a router, top-k, the tokens permuted into the experts' order, one pair of
 * GEMMs per expert over its rows (SwiGLU experts), and the rows combined back,
 * weighted (doc/moe.md). f32 only for now.
 *
 *   x (T, C) -> logits = x router^T (T, E) -> scores, lse -> idx, weights (T, k)
 *   xp (P = T k, C) = x in the experts' order; per expert e, rows [off_e, off_e + n_e):
 *     u = xp w13[e]^T (n_e, 2F), a = swiglu(u) (n_e, F), yp = a w2[e]^T (n_e, C)
 *   y (T, C) = sum_j weights[t][j] yp[pos[t][j]]
 *
 * The aux losses over the T tokens (the group): load balancing coef E sum_i f_i
 * P_i, f_i the share of the T k assignments routed to expert i, P_i the mean
 * score of expert i; the router z-loss z_coef mean_t lse[t]^2. */
#ifndef GAAW_PARALLEL_MOE_H
#define GAAW_PARALLEL_MOE_H

#include <stdint.h>

#include "gaaw/kernels.h"

typedef struct {
  int experts, top_k;
  int sigmoid;     /* scores by sigmoid, else softmax */
  int renormalize; /* the chosen weights divided by their sum */
  float aux_coef, z_coef;
} gaaw_moe_spec;

/* The layer's parameters (linear convention: (out, in)) and their gradients, f32:
 * router (E, C), w13 (E, 2F, C) (the gate's F rows, then the up projection's), w2
 * (E, C, F). Gradients accumulate (+=). */
typedef struct {
  const gaaw_tensor_t *router, *w13, *w2;
  gaaw_tensor_t *d_router, *d_w13, *d_w2;
} gaaw_moe_weights;

/* What forward keeps for backward (gaaw_moe_release frees it). */
typedef struct {
  gaaw_tensor_t logits, scores, lse, idx, weights, src, pos, xp, u, a, yp;
  int64_t *counts, *offsets; /* per expert: its rows of the sorted assignments, and where they start */
  int64_t assignments;       /* P = T k */
} gaaw_moe_saved;

typedef struct {
  double aux, z; /* the two aux losses (coefficients applied) */
} gaaw_moe_losses;

/* y (T, C) = the layer of x (T, C); *saved filled for backward, *losses the group's
 * aux losses. Not collective. */
gaaw_status_t gaaw_moe_forward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                               const gaaw_tensor_t *x, gaaw_tensor_t *y, gaaw_moe_saved *saved,
                               gaaw_moe_losses *losses);
/* dx (T, C) (overwritten) and the weights' gradients (+=) from dy (T, C), with the
 * aux losses' gradients scaled by aux_scale (the loss's weight of one token group:
 * 1 when the aux losses add to the loss as they are). Not collective. */
gaaw_status_t gaaw_moe_backward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                                gaaw_moe_saved *saved, const gaaw_tensor_t *x, const gaaw_tensor_t *dy,
                                float aux_scale, gaaw_tensor_t *dx);
void gaaw_moe_release(gaaw_context_t ctx, gaaw_moe_saved *saved);

#endif
