/* The MLP surrogate: linears alternating column-parallel (even positions) and
 * row-parallel (odd positions), the activation after every linear but the last,
 * and a regression loss (parallel/regression_loss.c). A column-parallel last linear gathers its output
 * columns over tp.
 * Shapes (P = tp, N = batch): a column-parallel linear maps (N, in) to (N, out/P)
 * (pre-activation (N, 2 out/P) with SwiGLU); a row-parallel one (N, in/P) to
 * (N, out) (pre-activation (N, 2 out)). */
#include <math.h>
#include <stdio.h>

#include "backends/agree.h"
#include "parallel/linear.h"
#include "parallel/model_impl.h"
#include "parallel/tp.h"

enum { L_W, L_B };
enum { LS_U };

/* Width of the pre-activation for an output width (SwiGLU doubles it). */
static int64_t pre_width(const gaaw_layer *l, int64_t out)
{
  return l->activation == GAAW_ACT_SWIGLU ? 2 * out : out;
}

static gaaw_status_t activate(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *u, gaaw_tensor_t *y)
{
  if (act == GAAW_ACT_SWIGLU) return gaaw_swiglu_forward(ctx, u, y);
  return gaaw_activation_forward(ctx, act, u, y);
}

static gaaw_status_t activate_backward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *dy,
                                       const gaaw_tensor_t *u, gaaw_tensor_t *du)
{
  if (act == GAAW_ACT_SWIGLU) return gaaw_swiglu_backward(ctx, dy, u, du);
  return gaaw_activation_backward(ctx, act, dy, u, du);
}

/* The first layer reads the batch inputs. */
static const gaaw_tensor_t *layer_x(const gaaw_frame *f, const gaaw_layer *l)
{
  return l->index == 0 ? &f->inputs : gaaw_layer_input(f, l);
}

static int gathers_output(gaaw_model_t m, const gaaw_layer *l)
{
  return l->column_parallel && l->index == m->nlayers - 2 && m->tp_size > 1;
}

static gaaw_status_t linear_forward_body(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, gaaw_scratch *s, const gaaw_tensor_t *x,
                                         gaaw_tensor_t *y)
{
  gaaw_context_t ctx = m->ctx;
  int64_t N = f->rows, out = l->out_features;
  gaaw_tensor_t *u, *local;
  GAAW_CHECK(gaaw_layer_alloc(m, f, l, LS_U, 0, GAAW_SHAPE(N, pre_width(l, out)), &u));
  GAAW_CHECK(gaaw_linear_forward(ctx, x, gaaw_layer_param(m, l, L_W), l->column_parallel ? gaaw_layer_param(m, l, L_B)
                                                                                         : NULL, u));
  if (!l->column_parallel) {
    GAAW_CHECK(gaaw_tp_allreduce(m->tp, u)); /* reduce_from_tp, then the replicated bias */
    GAAW_CHECK(gaaw_bias_add(ctx, u, gaaw_layer_param(m, l, L_B)));
  }
  if (!gathers_output(m, l)) {
    GAAW_CHECK(gaaw_act_alloc(m, GAAW_SHAPE(N, out), y));
    GAAW_CHECK(activate(ctx, l->activation, u, y));
    return GAAW_SUCCESS;
  }
  /* the last linear is column-parallel (no activation): gather_from_tp */
  gaaw_tensor_t *ws;
  GAAW_CHECK(gaaw_act_alloc(m, GAAW_SHAPE(N, out * m->tp_size), y));
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(m->tp_size, N, out), &ws));
  local = u;
  GAAW_CHECK(gaaw_tp_gather_columns(m->tp, local, ws, y));
  return GAAW_SUCCESS;
}

static gaaw_status_t linear_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x,
                                    gaaw_tensor_t *y)
{
  gaaw_scratch s = {0};
  gaaw_status_t st = linear_forward_body(m, l, f, &s, layer_x(f, l), y);
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t linear_backward_body(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, gaaw_scratch *s, const gaaw_tensor_t *dy,
                                          gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  int64_t N = f->rows, out = l->out_features;
  gaaw_tensor_t *du, *dy_local;
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 1, GAAW_SHAPE(N, pre_width(l, out)), &du));
  if (gathers_output(m, l)) {
    GAAW_CHECK(gaaw_tp_split_columns(m->tp, dy, du)); /* conjugate of gather_from_tp */
  } else {
    dy_local = (gaaw_tensor_t *)dy;
    GAAW_CHECK(activate_backward(ctx, l->activation, dy_local, &gaaw_layer_saved(f, l)[LS_U], du));
  }
  /* column-parallel: this rank's bias slice; row-parallel: the replicated bias, whose
   * gradient is the same on every rank (du is whole there) */
  const gaaw_tensor_t *x = layer_x(f, l);
  if (dx) {
    GAAW_CHECK(gaaw_act_alloc(m, GAAW_SHAPE(N, l->in_features), dx));
  }
  GAAW_CHECK(gaaw_linear_backward(ctx, du, x, gaaw_layer_param(m, l, L_W), dx, gaaw_layer_grad(m, l, L_W),
                                  gaaw_layer_grad(m, l, L_B)));
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

/* ---------------------------------------------------------------- builder */

static gaaw_status_t check_mlp_config(gaaw_context_t ctx, const gaaw_mlp_config_t *c, int tp)
{
  GAAW_ARG_CHECK(ctx, c->nsizes >= 2 && c->nsizes <= GAAW_MLP_MAX_LAYERS + 1, "nsizes must be in 2..%d, got %d",
                 GAAW_MLP_MAX_LAYERS + 1, c->nsizes);
  GAAW_ARG_CHECK(ctx, (int)c->activation >= 0 && (int)c->activation < GAAW_ACT_COUNT,
                 "activation %d is not a gaaw_activation_t", (int)c->activation);
  GAAW_ARG_CHECK(ctx, (int)c->loss >= 0 && (int)c->loss < GAAW_LOSS_COUNT, "loss %d is not a gaaw_loss_t",
                 (int)c->loss);
  GAAW_ARG_CHECK(ctx, c->huber_delta > 0.0f && isfinite(c->huber_delta),
                 "huber_delta must be finite and > 0 (0 means the default 1), got %g", (double)c->huber_delta);
  for (int i = 0; i < c->nsizes; i++)
    GAAW_ARG_CHECK(ctx, c->sizes[i] >= 1, "sizes[%d] must be >= 1, got %d", i, c->sizes[i]);
  for (int i = 0; i + 1 < c->nsizes; i += 2)
    GAAW_ARG_CHECK(ctx, c->sizes[i + 1] % tp == 0,
                   "sizes[%d] = %d is the output of a column-parallel linear and must be divisible by tp (%d)", i + 1,
                   c->sizes[i + 1], tp);
  return GAAW_SUCCESS;
}

/* What every rank must share (tp splits the model, dp replicates it). */
static int mlp_fields(const void *cfg, gaaw_field *f)
{
  static const char *const size_names[GAAW_MLP_MAX_LAYERS + 1] = {
    "sizes[0]", "sizes[1]", "sizes[2]", "sizes[3]", "sizes[4]", "sizes[5]", "sizes[6]", "sizes[7]", "sizes[8]",
    "sizes[9]", "sizes[10]", "sizes[11]", "sizes[12]", "sizes[13]", "sizes[14]", "sizes[15]", "sizes[16]"};
  const gaaw_mlp_config_t *c = cfg;
  int n = 0;
  f[n++] = GAAW_FIELD_INT("nsizes", c->nsizes);
  for (int i = 0; i < c->nsizes; i++) f[n++] = GAAW_FIELD_INT(size_names[i], c->sizes[i]);
  f[n++] = GAAW_FIELD_NAMED("activation", c->activation, gaaw_activation_name(c->activation));
  f[n++] = GAAW_FIELD_INT("seed", (int64_t)c->seed);
  f[n++] = GAAW_FIELD_NAMED("dtype", c->dtype, gaaw_dtype_name(c->dtype));
  f[n++] = GAAW_FIELD_NAMED("loss", c->loss, gaaw_loss_name(c->loss));
  f[n++] = GAAW_FIELD_FLOAT("huber_delta", c->huber_delta);
  return n;
}

static gaaw_status_t build_mlp(gaaw_model_t m)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_mlp_config_t *c = &m->mlp;
  int P = m->tp_size, nlin = c->nsizes - 1;
  char name[GAAW_PARAM_NAME_MAX];
  for (int i = 0; i < nlin; i++) {
    gaaw_layer *l;
    GAAW_CHECK(gaaw_model_add_layer(m, &gaaw_linear_ops, &l));
    int64_t in = c->sizes[i], out = c->sizes[i + 1];
    l->column_parallel = i % 2 == 0;
    l->activation = i + 1 < nlin ? c->activation : GAAW_ACT_NONE;
    int blocks = l->activation == GAAW_ACT_SWIGLU ? 2 : 1;
    l->in_features = l->column_parallel ? in : in / P;
    l->out_features = l->column_parallel ? out / P : out;
    snprintf(name, sizeof name, "fc.%d.weight", i);
    GAAW_CHECK(gaaw_model_add_param(m, l, L_W, name, 2, blocks * out, in, l->column_parallel ? 0 : 1,
                                    l->column_parallel ? blocks : 1, GAAW_INIT_NORMAL, 1.0f / sqrtf((float)in)));
    snprintf(name, sizeof name, "fc.%d.bias", i);
    GAAW_CHECK(gaaw_model_add_param(m, l, L_B, name, 1, blocks * out, 0, l->column_parallel ? 0 : -1,
                                    l->column_parallel ? blocks : 1, GAAW_INIT_CONSTANT, 0.0f));
  }
  gaaw_layer *l;
  GAAW_CHECK(gaaw_model_add_layer(m, &gaaw_regression_loss_ops[c->loss], &l));
  l->loss_delta = c->huber_delta;
  GAAW_CHECK(gaaw_model_finish(m, c->seed));
  return GAAW_SUCCESS;
}

static gaaw_dtype_t mlp_dtype(const void *cfg)
{
  return ((const gaaw_mlp_config_t *)cfg)->dtype;
}

static gaaw_status_t mlp_adopt(gaaw_model_t m, const void *cfg)
{
  m->mlp = *(const gaaw_mlp_config_t *)cfg;
  if (m->mlp.huber_delta == 0.0f) m->mlp.huber_delta = 1.0f;
  GAAW_CHECK_CTX(m->ctx, check_mlp_config(m->ctx, &m->mlp, m->tp_size));
  return GAAW_SUCCESS;
}

static const gaaw_model_builder mlp_builder = {GAAW_MODEL_MLP, "MLP", mlp_dtype, mlp_adopt, mlp_fields, build_mlp};

gaaw_status_t gaaw_model_create_mlp(gaaw_context_t ctx, const gaaw_mlp_config_t *cfg, gaaw_model_t *model)
{
  GAAW_CHECK_CTX(ctx, gaaw_model_build(ctx, &mlp_builder, cfg, model));
  return GAAW_SUCCESS;
}
