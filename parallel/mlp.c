/* The MLP shortcut (gaaw_model_create_mlp): its config checked, then built as the
 * sequential specs linear, activation, ..., linear, loss (parallel/sequential.c). */
#include <math.h>

#include "backends/agree.h"
#include "parallel/sequential.h"

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

static const gaaw_model_builder mlp_builder = {&gaaw_seq_kind, "MLP", mlp_dtype, mlp_adopt, mlp_fields, build_mlp};

gaaw_status_t gaaw_model_create_mlp(gaaw_context_t ctx, const gaaw_mlp_config_t *cfg, gaaw_model_t *model)
{
  GAAW_CHECK_CTX(ctx, gaaw_model_build(ctx, &mlp_builder, cfg, model));
  return GAAW_SUCCESS;
}
