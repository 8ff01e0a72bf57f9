/* The mixture-of-experts MLP: a router, top-k, the tokens permuted into the
 * experts' order, one pair of GEMMs per expert over its rows (SwiGLU experts), and
 * the rows combined back, weighted (doc/moe.md). Every expert here, or with an ep
 * group (expert parallelism) E / ep of them, the rows exchanged with their ranks
 * (parallel/moe_dispatch.h). f32 only for now.
 *
 *   x (T, C) -> logits = x router^T (T, E) -> scores, lse -> idx, weights (T, k)
 *   xp (P = T k, C) = x in the experts' order; per expert e, rows [off_e, off_e + n_e):
 *     u = xp w13[e]^T (n_e, 2F), a = swiglu(u) (n_e, F), yp = a w2[e]^T (n_e, C)
 *   y (T, C) = sum_j weights[t][j] yp[pos[t][j]]
 *
 * The aux losses over the token group (these T tokens, with those of the ranks of
 * `group` when one is given): load balancing coef E sum_i f_i P_i, f_i the share of
 * the group's assignments routed to expert i, P_i expert i's mean score over the
 * group; the router z-loss z_coef mean lse^2 over the group. */
#ifndef GAAW_PARALLEL_MOE_H
#define GAAW_PARALLEL_MOE_H

#include <stdint.h>

#include "gaaw/comm.h"
#include "gaaw/kernels.h"
#include "parallel/moe_dispatch.h"

typedef struct {
  int experts, top_k;
  int sigmoid;     /* scores by sigmoid, else softmax */
  int renormalize; /* the chosen weights divided by their sum */
  float aux_coef, z_coef;
  /* > 0: each expert takes at most ceil(k T_group capacity_factor / E) of the
   * group's assignments, first choices before second ones, and within a choice by
   * weight (the lowest dropped first) or, with drop_position, by position (the
   * latest token dropped first); 0: dropless */
  float capacity_factor;
  int drop_position;
} gaaw_moe_spec;

/* The layer's parameters (linear convention: (out, in)) and their gradients, f32:
 * router (E, C), w13 (El, 2F, C) (the gate's F rows, then the up projection's), w2
 * (El, C, F) for the El experts here (E, or E / ep with an ep group: this ep rank's
 * r El .. (r + 1) El - 1); w13 and w2 may also be 2-D, (El 2F, C) and (El C, F). Optionally a
 * shared expert that every token passes through (NULL: none), s13 (2S, C) and s2
 * (C, S), its output scaled per token by sigmoid(x sgate^T) (sgate (1, C); NULL:
 * not scaled: Qwen2-MoE gates it, DeepSeek-V3 does not). Gradients accumulate (+=). */
typedef struct {
  const gaaw_tensor_t *router, *w13, *w2;
  gaaw_tensor_t *d_router, *d_w13, *d_w2;
  const gaaw_tensor_t *s13, *s2, *sgate;
  gaaw_tensor_t *d_s13, *d_s2, *d_sgate;
} gaaw_moe_weights;

/* What forward keeps for backward. XP, U, A: the experts' rows here, P = T k of
 * them, or with ep the rows this rank's experts received; YP (P, C) their output
 * back in this rank's order. COEFS (E + 1) f32: the load-balancing loss's
 * gradient per expert score, coef E f_i / T_group, then the z-loss's 2 z_coef /
 * T_group (before aux_scale). The shared expert's: SU (T, 2S), SA (T, S), SO (T,
 * C) its output; with its gate GL, GS (T, 1) f32 the gate's logit and sigmoid, GLSE
 * (T) the router kernel's lse of it (unused but kept for its backward). */
enum {
  GAAW_MOE_LOGITS, GAAW_MOE_SCORES, GAAW_MOE_LSE, GAAW_MOE_IDX, GAAW_MOE_WEIGHTS, GAAW_MOE_SRC,
  GAAW_MOE_POS, GAAW_MOE_XP, GAAW_MOE_U, GAAW_MOE_A, GAAW_MOE_YP, GAAW_MOE_COEFS,
  GAAW_MOE_SU, GAAW_MOE_SA, GAAW_MOE_SO, GAAW_MOE_GL, GAAW_MOE_GS, GAAW_MOE_GLSE, GAAW_MOE_KEPT
};

/* Allocates kept tensor `which` into *t (the caller owns it from then on). */
typedef gaaw_status_t (*gaaw_moe_keep_fn)(void *user, int which, gaaw_dtype_t dtype, int ndim, const int64_t *shape,
                                          gaaw_tensor_t **t);

/* Zero it before forward. The kept tensors are in own[] unless keep is set: then
 * keep allocates them and kept points at the caller's GAAW_MOE_KEPT tensors (set
 * it before forward, and before backward when the struct is new). group[0..1]
 * (NULL: none): the ranks whose tokens join these in the aux losses' token group,
 * their sums taken over group[0], then over group[1] (tp, then dp x cp); capacity
 * decides over group[0] and needs group[1] NULL. margins: compute the smallest
 * margin (reads the scores to the host). */
typedef struct {
  gaaw_moe_keep_fn keep;
  void *user;
  gaaw_tensor_t *kept;
  gaaw_comm_t group[2];
  gaaw_comm_t ep; /* NULL: every expert here; else the ep group over which they are split
                     (forward and backward are then collective over it) */
  int margins;
  gaaw_tensor_t own[GAAW_MOE_KEPT];
  int64_t *counts, *offsets; /* per expert: its rows of the sorted assignments (kept: not
                                dropped), and where they start */
  int64_t *routed;           /* per expert: the assignments top-k gave it (before any drop) */
  int64_t assignments;       /* T k (the rows kept are at most these) */
  gaaw_moe_dispatch dispatch; /* with ep: the exchange of the last forward (or backward) */
} gaaw_moe_saved;

typedef struct {
  double aux, z;    /* the two aux losses of the group (coefficients applied) */
  int64_t tokens;   /* the group's tokens */
  int64_t dropped;  /* the group's assignments dropped by capacity */
  int64_t *counts;  /* NULL, or E: the group's assignments per expert, as routed (filled) */
  double margin;    /* with margins: the smallest (k-th minus (k+1)-th) score of these
                       tokens; +inf when k = E or without margins */
} gaaw_moe_losses;

/* y (T, C) = the layer of x (T, C); *saved filled for backward, *losses the group's
 * aux losses. Collective over saved->group when set. */
gaaw_status_t gaaw_moe_forward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                               const gaaw_tensor_t *x, gaaw_tensor_t *y, gaaw_moe_saved *saved,
                               gaaw_moe_losses *losses);
/* dx (T, C) (overwritten) and the weights' gradients (+=) from dy (T, C), with the
 * aux losses' gradients scaled by aux_scale (the aux losses' weight in the loss
 * whose gradient dy is). Collective over saved->ep when set, else not. */
gaaw_status_t gaaw_moe_backward(gaaw_context_t ctx, const gaaw_moe_spec *spec, const gaaw_moe_weights *w,
                                gaaw_moe_saved *saved, const gaaw_tensor_t *x, const gaaw_tensor_t *dy,
                                float aux_scale, gaaw_tensor_t *dx);
/* Frees the host routing, and the kept tensors when they are its own. */
void gaaw_moe_release(gaaw_context_t ctx, gaaw_moe_saved *saved);

#endif
