/* The linear layer of sequential models, and the MLP shortcut (gaaw_model_create_mlp:
 * its config as the specs linear, activation, ..., linear, loss).
 * A linear is column-parallel, row-parallel or column-parallel gathering its output
 * (the pairing rule of gaaw/model.h, decided by parallel/sequential.c), with the
 * activation that follows it fused in (applied to its pre-activation u).
 * Shapes (P = tp, N = batch): a column-parallel linear maps (N, in) to (N, out/P)
 * (pre-activation (N, 2 out/P) with SwiGLU); a row-parallel one (N, in/P) to
 * (N, out) (pre-activation (N, 2 out)); a gathering one (N, in) to (N, out), its
 * local pre-activation gathered to (N, out) (with SwiGLU (N, 2 out) = [a | g]). */
#include <math.h>
#include <stdio.h>

#include "backends/agree.h"
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
  /* the specs' tp rule (linear 0, 2, ... column-parallel), said in the MLP's terms */
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
  GAAW_CHECK_CTX(m->ctx, gaaw_seq_build(m, m->mlp.seed));
  return GAAW_SUCCESS;
}

static gaaw_dtype_t mlp_dtype(const void *cfg)
{
  return ((const gaaw_mlp_config_t *)cfg)->dtype;
}

static gaaw_status_t mlp_adopt(gaaw_model_t m, const void *cfg)
{
  gaaw_context_t ctx = m->ctx;
  m->mlp = *(const gaaw_mlp_config_t *)cfg;
  const gaaw_mlp_config_t *c = &m->mlp;
  if (m->mlp.huber_delta == 0.0f) m->mlp.huber_delta = 1.0f;
  GAAW_CHECK(check_mlp_config(ctx, c, m->tp_size));
  /* linear(sizes[1]), activation, ..., linear(sizes[n-1]), loss */
  gaaw_layer_spec_t specs[2 * GAAW_MLP_MAX_LAYERS + 1];
  int n = 0;
  for (int i = 1; i < c->nsizes; i++) {
    specs[n++] = (gaaw_layer_spec_t){.kind = GAAW_SPEC_LINEAR, .size = c->sizes[i]};
    if (i + 1 < c->nsizes) specs[n++] = (gaaw_layer_spec_t){.kind = GAAW_SPEC_ACTIVATION, .activation = c->activation};
  }
  specs[n++] = (gaaw_layer_spec_t){.kind = GAAW_SPEC_LOSS, .loss = c->loss, .huber_delta = c->huber_delta};
  GAAW_CHECK(gaaw_seq_adopt_specs(m, c->sizes[0], specs, n));
  return GAAW_SUCCESS;
}

static const gaaw_model_builder mlp_builder = {GAAW_MODEL_MLP, "MLP", mlp_dtype, mlp_adopt, mlp_fields, build_mlp};

gaaw_status_t gaaw_model_create_mlp(gaaw_context_t ctx, const gaaw_mlp_config_t *cfg, gaaw_model_t *model)
{
  GAAW_CHECK_CTX(ctx, gaaw_model_build(ctx, &mlp_builder, cfg, model));
  return GAAW_SUCCESS;
}
