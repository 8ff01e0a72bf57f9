/* The layers of sequential models besides linears (parallel/mlp.c) and losses
 * (parallel/regression_loss.c): a standalone activation, layernorm and RMSnorm,
 * and a residual group's two ends. All of them are replicated over tp: their input
 * is whole on every rank. Shapes (N = batch, C = features): x, y: (N, C), except
 * SwiGLU's x: (N, 2C). */
#include "parallel/norm.h"
#include "parallel/sequential.h"

const gaaw_tensor_t *gaaw_seq_input(const gaaw_frame *f, const gaaw_layer *l)
{
  return l->index == 0 ? &f->inputs : gaaw_layer_input(f, l);
}

gaaw_status_t gaaw_seq_activate(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *u, gaaw_tensor_t *y)
{
  if (act == GAAW_ACT_SWIGLU) return gaaw_swiglu_forward(ctx, u, y);
  return gaaw_activation_forward(ctx, act, u, y);
}

gaaw_status_t gaaw_seq_activate_backward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *dy,
                                         const gaaw_tensor_t *u, gaaw_tensor_t *du)
{
  if (act == GAAW_ACT_SWIGLU) return gaaw_swiglu_backward(ctx, dy, u, du);
  return gaaw_activation_backward(ctx, act, dy, u, du);
}

/* ---------------------------------------------------------------- activation */

static gaaw_status_t activation_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x,
                                        gaaw_tensor_t *y)
{
  (void)x;
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_act_alloc(m, GAAW_SHAPE(f->rows, l->out_features), y));
  GAAW_CHECK(gaaw_seq_activate(ctx, l->activation, gaaw_seq_input(f, l), y));
  return GAAW_SUCCESS;
}

static gaaw_status_t activation_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                                         gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  if (!dx) return GAAW_SUCCESS; /* the first layer: nothing below to pass to */
  GAAW_CHECK(gaaw_act_zeros(m, GAAW_SHAPE(f->rows, l->in_features), dx));
  GAAW_CHECK(gaaw_seq_activate_backward(ctx, l->activation, dy, gaaw_seq_input(f, l), dx));
  return GAAW_SUCCESS;
}

const gaaw_layer_ops gaaw_activation_ops = {"activation", activation_forward, activation_backward};

/* ---------------------------------------------------------------- norms */

enum { N_W, N_B };       /* parameters */
enum { NS_MEAN, NS_RSTD }; /* saved: (N) f32 */

static gaaw_status_t norm_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x,
                                  gaaw_tensor_t *y)
{
  (void)x;
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *mean = NULL, *rstd;
  int layernorm = l->norm == GAAW_NORM_LAYERNORM;
  if (layernorm) GAAW_CHECK(gaaw_layer_alloc_stat(m, f, l, NS_MEAN, f->rows, &mean));
  GAAW_CHECK(gaaw_layer_alloc_stat(m, f, l, NS_RSTD, f->rows, &rstd));
  GAAW_CHECK(gaaw_act_alloc(m, GAAW_SHAPE(f->rows, l->out_features), y));
  GAAW_CHECK(gaaw_norm_forward(ctx, l->norm, GAAW_NORM_EPS, gaaw_seq_input(f, l), gaaw_layer_param(m, l, N_W),
                               layernorm ? gaaw_layer_param(m, l, N_B) : NULL, y, mean, rstd));
  return GAAW_SUCCESS;
}

static gaaw_status_t norm_backward_body(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, gaaw_scratch *s,
                                        const gaaw_tensor_t *dy, gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_tensor_t *sv = gaaw_layer_saved(f, l);
  int layernorm = l->norm == GAAW_NORM_LAYERNORM;
  gaaw_tensor_t *into = dx;
  if (dx)
    GAAW_CHECK(gaaw_act_zeros(m, GAAW_SHAPE(f->rows, l->in_features), dx));
  else /* the first layer: the kernel still wants a dx */
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 1, GAAW_SHAPE(f->rows, l->in_features), &into));
  GAAW_CHECK(gaaw_norm_backward(ctx, l->norm, dy, gaaw_seq_input(f, l), gaaw_layer_param(m, l, N_W),
                                layernorm ? &sv[NS_MEAN] : NULL, &sv[NS_RSTD], into, gaaw_layer_grad(m, l, N_W),
                                layernorm ? gaaw_layer_grad(m, l, N_B) : NULL));
  return GAAW_SUCCESS;
}

static gaaw_status_t norm_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                                   gaaw_tensor_t *dx)
{
  gaaw_scratch s = {0};
  gaaw_status_t st = norm_backward_body(m, l, f, &s, dy, dx);
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

const gaaw_layer_ops gaaw_norm_ops[2] = {
  [GAAW_NORM_LAYERNORM] = {"layernorm", norm_forward, norm_backward},
  [GAAW_NORM_RMSNORM] = {"rmsnorm", norm_forward, norm_backward},
};

/* ---------------------------------------------------------------- residual groups */

/* The group's first layer ("residual"): passes its input on unchanged and keeps it
 * (l->keeps_input) for the add at the group's end; in backward it adds the
 * gradient the add left in its saved slot RS_SKIP to the one through the group. */
enum { RS_SKIP }; /* saved by the residual add's backward: d loss / d (group output) */

static gaaw_status_t residual_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x,
                                      gaaw_tensor_t *y)
{
  (void)x;
  GAAW_CHECK_CTX(m->ctx, gaaw_act_copy(m, gaaw_seq_input(f, l), y));
  return GAAW_SUCCESS;
}

static gaaw_status_t residual_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                                       gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  if (!dx) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_act_copy(m, dy, dx));
  GAAW_CHECK(gaaw_axpy(ctx, 1.0f, &gaaw_layer_saved(f, l)[RS_SKIP], dx));
  return GAAW_SUCCESS;
}

const gaaw_layer_ops gaaw_residual_ops = {"residual", residual_forward, residual_backward};

/* The group's end ("residual add"): y = x + the group's input. */
static gaaw_status_t residual_add_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x,
                                          gaaw_tensor_t *y)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_layer *start = &m->layers[l->residual_from];
  GAAW_CHECK(gaaw_act_alloc(m, x->ndim, x->shape, y));
  GAAW_CHECK(gaaw_add(ctx, x, gaaw_seq_input(f, start), y));
  return GAAW_SUCCESS;
}

/* Both summands get dy: through the group (dx) and around it (the start's slot). */
static gaaw_status_t residual_add_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                                           gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *skip;
  GAAW_CHECK(gaaw_layer_alloc(m, f, &m->layers[l->residual_from], RS_SKIP, 0, dy->ndim, dy->shape, &skip));
  GAAW_CHECK(gaaw_cast(ctx, dy, skip));
  GAAW_CHECK(gaaw_act_copy(m, dy, dx));
  return GAAW_SUCCESS;
}

const gaaw_layer_ops gaaw_residual_add_ops = {"residual add", residual_add_forward, residual_add_backward};
