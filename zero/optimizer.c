/* The optimizer object: configuration, creation over a model (buckets, shard
 * state, ZeRO hooks), and what it reports. The step is in step.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/runtime/runtime.h"
#include "zero/zero_impl.h"

void gaaw_optimizer_config_default(gaaw_optimizer_config_t *c)
{
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->kind = GAAW_ADAMW;
  c->zero_stage = 0;
  c->lr = 3e-4f;
  c->beta1 = 0.9f;
  c->beta2 = 0.95f;
  c->eps = 1e-8f;
  c->weight_decay = 0.1f;
  c->momentum = 0.9f;
  c->accumulation = 1;
  c->initial_loss_scale = 65536.0f;
  c->loss_scale_window = 1000;
  c->hysteresis = 2;
}

gaaw_status_t gaaw_zero_check_config(gaaw_context_t ctx, const gaaw_optimizer_config_t *c)
{
  GAAW_ARG_CHECK(ctx, c->kind == GAAW_ADAMW || c->kind == GAAW_SGD, "kind %d is not GAAW_ADAMW or GAAW_SGD",
                 (int)c->kind);
  GAAW_ARG_CHECK(ctx, c->zero_stage >= 0 && c->zero_stage <= 3, "zero_stage must be 0..3, got %d", c->zero_stage);
  GAAW_ARG_CHECK(ctx, isfinite(c->lr) && c->lr >= 0, "lr must be >= 0, got %g", c->lr);
  GAAW_ARG_CHECK(ctx, isfinite(c->min_lr) && c->min_lr >= 0 && c->min_lr <= c->lr,
                 "min_lr must be in 0..lr (%g), got %g", c->lr, c->min_lr);
  GAAW_ARG_CHECK(ctx, c->warmup_steps >= 0 && c->decay_steps >= 0, "warmup_steps (%d) and decay_steps (%d) must be >= 0",
                 c->warmup_steps, c->decay_steps);
  GAAW_ARG_CHECK(ctx, c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1,
                 "beta1 (%g) and beta2 (%g) must be in [0, 1)", c->beta1, c->beta2);
  GAAW_ARG_CHECK(ctx, c->eps > 0, "eps must be > 0, got %g", c->eps);
  GAAW_ARG_CHECK(ctx, isfinite(c->weight_decay) && c->weight_decay >= 0, "weight_decay must be >= 0, got %g",
                 c->weight_decay);
  GAAW_ARG_CHECK(ctx, c->momentum >= 0 && c->momentum < 1, "momentum must be in [0, 1), got %g", c->momentum);
  GAAW_ARG_CHECK(ctx, isfinite(c->clip_norm) && c->clip_norm >= 0, "clip_norm must be >= 0 (0 = off), got %g",
                 c->clip_norm);
  GAAW_ARG_CHECK(ctx, c->accumulation >= 1, "accumulation must be >= 1, got %d", c->accumulation);
  GAAW_ARG_CHECK(ctx, isfinite(c->initial_loss_scale) && c->initial_loss_scale >= 1,
                 "initial_loss_scale must be >= 1, got %g", c->initial_loss_scale);
  GAAW_ARG_CHECK(ctx, c->loss_scale_window >= 1 && c->hysteresis >= 1,
                 "loss_scale_window (%d) and hysteresis (%d) must be >= 1", c->loss_scale_window, c->hysteresis);
  return GAAW_SUCCESS;
}

/* The offload store and the parameters' place exist (offload_params only at stage
 * 3 with the optimizer on the CPU; nvme with its directory), and the CPU runs the
 * cpu_simd version it would use. */
static gaaw_status_t check_store(gaaw_context_t ctx, int zero_stage)
{
  const char *offload = gaaw_ctx_string(ctx, "offload_optimizer"), *simd = gaaw_ctx_string(ctx, "cpu_simd");
  GAAW_ARG_CHECK(ctx, gaaw_zero_store_find(offload), "option offload_optimizer: no store '%s'", offload);
  int version = gaaw_cpu_simd_parse(simd);
  GAAW_ARG_CHECK(ctx, version >= 0, "option cpu_simd: no version '%s'", simd);
  const char *params = gaaw_ctx_string(ctx, "offload_params");
  GAAW_ARG_CHECK(ctx, gaaw_zero_params_place_parse(params) >= 0, "option offload_params: no place '%s'", params);
  GAAW_ARG_CHECK(ctx, strcmp(params, "none") == 0 || (zero_stage == 3 && strcmp(offload, "none") != 0),
                 "offload_params=%s needs ZeRO stage 3 (got %d) and offload_optimizer host or nvme (got %s): the "
                 "parameter shard leaves the device only at stage 3, and the optimizer then updates it on the CPU",
                 params, zero_stage, offload);
  GAAW_ARG_CHECK(ctx, (strcmp(offload, "nvme") != 0 && strcmp(params, "nvme") != 0) || gaaw_ctx_string(ctx, "nvme_path")[0],
                 "offload_optimizer=%s offload_params=%s needs option nvme_path, the directory for the files "
                 "(gaaw-train: --nvme-path)", offload, params);
  if (strcmp(offload, "none") != 0 && !gaaw_cpu_simd_runs((gaaw_cpu_simd)version))
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "option cpu_simd=%s: this CPU (or this build) does not run it; auto picks %s",
              simd, gaaw_cpu_simd_name((gaaw_cpu_simd)gaaw_cpu_simd_parse("auto")));
  return GAAW_SUCCESS;
}

zero_flags gaaw_zero_flags_of(const gaaw_optimizer_config_t *cfg)
{
  zero_flags f;
  f.shard_state = cfg->zero_stage >= 1;
  f.shard_grads = cfg->zero_stage >= 2;
  f.shard_params = cfg->zero_stage == 3;
  f.moments = cfg->kind == GAAW_ADAMW ? 2 : 1;
  return f;
}

const char *gaaw_zero_kind_name(gaaw_optimizer_kind_t kind)
{
  return kind == GAAW_SGD ? "sgd" : "adamw";
}

/* What every rank's optimizer must share. */
static int config_fields(const gaaw_optimizer_config_t *c, gaaw_field *f)
{
  int n = 0;
  f[n++] = GAAW_FIELD_NAMED("kind", c->kind, gaaw_zero_kind_name(c->kind));
  f[n++] = GAAW_FIELD_INT("zero_stage", c->zero_stage);
  f[n++] = GAAW_FIELD_FLOAT("lr", c->lr);
  f[n++] = GAAW_FIELD_FLOAT("min_lr", c->min_lr);
  f[n++] = GAAW_FIELD_INT("warmup_steps", c->warmup_steps);
  f[n++] = GAAW_FIELD_INT("decay_steps", c->decay_steps);
  f[n++] = GAAW_FIELD_FLOAT("beta1", c->beta1);
  f[n++] = GAAW_FIELD_FLOAT("beta2", c->beta2);
  f[n++] = GAAW_FIELD_FLOAT("eps", c->eps);
  f[n++] = GAAW_FIELD_FLOAT("weight_decay", c->weight_decay);
  f[n++] = GAAW_FIELD_FLOAT("momentum", c->momentum);
  f[n++] = GAAW_FIELD_FLOAT("clip_norm", c->clip_norm);
  f[n++] = GAAW_FIELD_INT("accumulation", c->accumulation);
  f[n++] = GAAW_FIELD_FLOAT("initial_loss_scale", c->initial_loss_scale);
  f[n++] = GAAW_FIELD_INT("loss_scale_window", c->loss_scale_window);
  f[n++] = GAAW_FIELD_INT("hysteresis", c->hysteresis);
  return n;
}

const zero_store_ops *gaaw_zero_store_find(const char *name)
{
  const zero_store_ops *all[] = {&gaaw_zero_store_device, &gaaw_zero_store_host, &gaaw_zero_store_nvme};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i]->name, name) == 0) return all[i];
  return NULL;
}

static gaaw_status_t setup(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  GAAW_CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_DP_CP, &opt->dp));
  GAAW_CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_MP, &opt->mp));
  GAAW_CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &opt->world));
  GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_DP_CP, &opt->dp_rank, &opt->dp_size));
  GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &opt->replica_rank, &opt->replicas));
  GAAW_CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_EDP, &opt->edp));
  GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_EDP, &opt->edp_rank, &opt->edp_size));
  opt->bucket_bytes = gaaw_ctx_int(ctx, "zero_bucket_bytes");
  if (opt->is.shard_params) /* checked by check_store */
    opt->params_place = (zero_params_place)gaaw_zero_params_place_parse(gaaw_ctx_string(ctx, "offload_params"));
  GAAW_CHECK(gaaw_zero_plan(opt));
  GAAW_CHECK(gaaw_zero_attach(opt));
  GAAW_CHECK(opt->store->create(opt)); /* after attach: stage 3 has moved the parameters into the shard */
  opt->loss_scale = opt->dtype == GAAW_F16 ? opt->cfg.initial_loss_scale : 1.0f;
  opt->model->loss_scale = opt->loss_scale;
  opt->lr = opt->cfg.lr;
  gaaw_zero_mark_comm(opt);
  return GAAW_SUCCESS;
}

uint64_t gaaw_zero_comm_bytes(gaaw_optimizer_t opt)
{
  uint64_t total = 0, bytes;
  gaaw_comm_t groups[2] = {opt->dp, opt->edp != opt->dp ? opt->edp : NULL};
  for (int g = 0; g < 2; g++)
    for (int op = 0; groups[g] && op < GAAW_COMM_OP_COUNT; op++)
      if (gaaw_comm_stats(groups[g], (gaaw_comm_op_t)op, NULL, &bytes) == GAAW_SUCCESS) total += bytes;
  return total;
}

void gaaw_zero_mark_comm(gaaw_optimizer_t opt)
{
  opt->comm_mark = gaaw_zero_comm_bytes(opt);
}

gaaw_status_t gaaw_optimizer_create(gaaw_model_t model, const gaaw_optimizer_config_t *cfg, gaaw_optimizer_t *out)
{
  GAAW_ARG_NOT_NULL(NULL, model);
  gaaw_context_t ctx = model->ctx;
  if (out) *out = NULL;
  /* every check is local; then the ranks agree, so that all fail together */
  gaaw_status_t st = cfg && out ? GAAW_SUCCESS
                                : gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                                                   "%s must not be NULL", cfg ? "out" : "cfg");
  if (st == GAAW_SUCCESS) st = gaaw_zero_check_config(ctx, cfg);
  if (st == GAAW_SUCCESS) st = check_store(ctx, cfg->zero_stage);
  if (st == GAAW_SUCCESS && model->hooks.before_layer)
    st = gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__,
                          "the model already has an optimizer; destroy it first");
  gaaw_field fields[18];
  int nfields = st == GAAW_SUCCESS ? config_fields(cfg, fields) : 0;
  if (st == GAAW_SUCCESS) fields[nfields++] = GAAW_FIELD_TEXT("offload_optimizer", gaaw_ctx_string(ctx, "offload_optimizer"));
  if (st == GAAW_SUCCESS) fields[nfields++] = GAAW_FIELD_TEXT("offload_params", gaaw_ctx_string(ctx, "offload_params"));
  /* every rank must run the same optimizer (the fields of a checked config only) */
  GAAW_CHECK(gaaw_agree_world(ctx, st, "the optimizer configuration", fields, nfields));
  gaaw_optimizer_t opt = calloc(1, sizeof *opt);
  st = opt ? GAAW_SUCCESS
           : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate an optimizer");
  if (opt) {
    opt->model = model;
    opt->ctx = ctx;
    opt->cfg = *cfg;
    opt->is = gaaw_zero_flags_of(cfg);
    opt->dtype = model->dtype;
    opt->store = gaaw_zero_store_find(gaaw_ctx_string(ctx, "offload_optimizer")); /* check_store */
    st = setup(opt);
  }
  st = gaaw_agree_world(ctx, st, "setting up the optimizer", NULL, 0);
  if (st != GAAW_SUCCESS) {
    gaaw_optimizer_destroy(&opt);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  *out = opt;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_optimizer_destroy(gaaw_optimizer_t *opt)
{
  if (!opt || !*opt) return GAAW_SUCCESS;
  gaaw_optimizer_t o = *opt;
  gaaw_context_t ctx = o->ctx;
  if (o->ckpt_free) o->ckpt_free(o);
  gaaw_zero_detach(o);
  if (o->store) o->store->destroy(o);
  gaaw_zero_shard_destroy(o);
  gaaw_buffer_free(ctx, &o->shard_grads);
  free(o->buckets);
  free(o->bucket_of_layer); /* and expert_bucket_of_layer, in the same block */
  free(o->segments);
  free(o);
  *opt = NULL;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_optimizer_stats(gaaw_optimizer_t opt, gaaw_step_stats_t *stats)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  GAAW_ARG_NOT_NULL(opt->ctx, stats);
  stats->step = opt->steps;
  stats->lr = opt->lr;
  stats->grad_norm = opt->grad_norm;
  stats->loss_scale = opt->loss_scale;
  stats->skipped = opt->skipped;
  stats->comm_bytes = opt->last_comm;
  stats->reductions_in_backward = opt->last_reductions_in_backward;
  stats->gathers_ahead = opt->last_gathers_ahead;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_optimizer_memory(gaaw_optimizer_t opt, size_t *params, size_t *grads, size_t *state)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  gaaw_context_t ctx = opt->ctx;
  if (params) GAAW_CHECK(gaaw_memory_usage(ctx, GAAW_MEM_PARAMS, params, NULL));
  if (grads) GAAW_CHECK(gaaw_memory_usage(ctx, GAAW_MEM_GRADS, grads, NULL));
  if (state) GAAW_CHECK(gaaw_memory_usage(ctx, GAAW_MEM_OPTIMIZER, state, NULL));
  return GAAW_SUCCESS;
}
