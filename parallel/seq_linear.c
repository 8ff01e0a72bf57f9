/* The linear layer of sequential models (and so of MLPs).
 * A linear is column-parallel, row-parallel or column-parallel gathering its output
 * (the pairing rule of gaaw/model.h, decided by parallel/sequential.c), with the
 * activation that follows it fused in (applied to its pre-activation u).
 * Shapes (P = tp, N = batch): a column-parallel linear maps (N, in) to (N, out/P)
 * (pre-activation (N, 2 out/P) with SwiGLU); a row-parallel one (N, in/P) to
 * (N, out) (pre-activation (N, 2 out)); a gathering one (N, in) to (N, out), its
 * local pre-activation gathered to (N, out) (with SwiGLU (N, 2 out) = [a | g]). */

#include "parallel/linear.h"
#include "parallel/sequential.h"
#include "parallel/tp.h"

enum { L_W, L_B };
enum { LS_U, LS_U_FULL }; /* saved: local pre-activation; a gathering linear's whole one */

/* Width of the pre-activation for an output width (SwiGLU doubles it). */
static int64_t pre_width(const gaaw_layer *l, int64_t out)
{
  return l->activation == GAAW_ACT_SWIGLU ? 2 * out : out;
}

/* (N, blocks W) seen as (blocks N, W): column blocks (SwiGLU's a and g) as rows, so
 * that gathering columns over tp keeps each block whole. */
static gaaw_tensor_t block_rows(const gaaw_layer *l, const gaaw_tensor_t *t)
{
  int64_t blocks = l->activation == GAAW_ACT_SWIGLU ? 2 : 1, shape[2] = {t->shape[0] * blocks, t->shape[1] / blocks};
  return gaaw_reshape(t, 2, shape);
}

static gaaw_status_t linear_forward_body(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, gaaw_scratch *s, const gaaw_tensor_t *x,
                                         gaaw_tensor_t *y)
{
  gaaw_context_t ctx = m->ctx;
  int64_t N = f->rows, out = l->out_features;
  gaaw_tensor_t *u, *ws;
  GAAW_CHECK(gaaw_layer_alloc(m, f, l, LS_U, 0, GAAW_SHAPE(N, pre_width(l, out)), &u));
  GAAW_CHECK(gaaw_linear_forward(ctx, x, gaaw_layer_param(m, l, L_W), l->column_parallel ? gaaw_layer_param(m, l, L_B)
                                                                                         : NULL, u));
  if (!l->column_parallel) {
    GAAW_CHECK(gaaw_tp_allreduce(m->tp, u)); /* reduce_from_tp, then the replicated bias */
    GAAW_CHECK(gaaw_bias_add(ctx, u, gaaw_layer_param(m, l, L_B)));
  }
  if (l->gathers) { /* gather_from_tp, then the activation on the whole */
    gaaw_tensor_t *full;
    int64_t whole = out * m->tp_size;
    GAAW_CHECK(gaaw_layer_alloc(m, f, l, LS_U_FULL, 0, GAAW_SHAPE(N, pre_width(l, whole)), &full));
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(m->tp_size, N, pre_width(l, out)), &ws));
    gaaw_tensor_t local = block_rows(l, u), gathered = block_rows(l, full);
    GAAW_CHECK(gaaw_tp_gather_columns(m->tp, &local, ws, &gathered));
    u = full;
    out = whole;
  }
  GAAW_CHECK(gaaw_act_alloc(m, GAAW_SHAPE(N, out), y));
  GAAW_CHECK(gaaw_seq_activate(ctx, l->activation, u, y));
  return GAAW_SUCCESS;
}

static gaaw_status_t linear_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x,
                                    gaaw_tensor_t *y)
{
  (void)x;
  gaaw_scratch s = {0};
  gaaw_status_t st = linear_forward_body(m, l, f, &s, gaaw_seq_input(f, l), y);
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t linear_backward_body(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, gaaw_scratch *s, const gaaw_tensor_t *dy,
                                          gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  int64_t N = f->rows, out = l->out_features;
  const gaaw_tensor_t *sv = gaaw_layer_saved(f, l);
  gaaw_tensor_t *du, *du_full;
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 1, GAAW_SHAPE(N, pre_width(l, out)), &du));
  if (l->gathers) {
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 1, GAAW_SHAPE(N, pre_width(l, out * m->tp_size)), &du_full));
    GAAW_CHECK(gaaw_seq_activate_backward(ctx, l->activation, dy, &sv[LS_U_FULL], du_full));
    gaaw_tensor_t whole = block_rows(l, du_full), local = block_rows(l, du);
    GAAW_CHECK(gaaw_tp_split_columns(m->tp, &whole, &local)); /* conjugate of gather_from_tp */
  } else {
    GAAW_CHECK(gaaw_seq_activate_backward(ctx, l->activation, dy, &sv[LS_U], du));
  }
  /* column-parallel: this rank's bias slice; row-parallel: the replicated bias, whose
   * gradient is the same on every rank (du is whole there) */
  const gaaw_tensor_t *x = gaaw_seq_input(f, l);
  if (dx) {
    GAAW_CHECK(gaaw_act_alloc(m, GAAW_SHAPE(N, l->in_features), dx));
  }
  GAAW_CHECK(gaaw_layer_linear_backward(m, l, f, du, x, gaaw_layer_param(m, l, L_W), dx, L_W, -1, L_B));
  if (dx && l->column_parallel) GAAW_CHECK(gaaw_tp_allreduce(m->tp, dx)); /* conjugate of copy_to_tp */
  return GAAW_SUCCESS;
}

static gaaw_status_t linear_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                                     gaaw_tensor_t *dx)
{
  gaaw_scratch s = {0};
  gaaw_status_t st = linear_backward_body(m, l, f, &s, dy, dx);
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

const gaaw_layer_ops gaaw_linear_ops = {"linear", linear_forward, linear_backward};
