/* The model as built: the object and its builders' protocol, the layer list and
 * each layer's bucket, the parameter catalog (every parameter of the whole model,
 * on every pipeline rank), the stage plan (which rank runs which layer) and the
 * per-chunk flat buffers; and its destruction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "parallel/model_impl.h"

/* The layout of this rank from the options and the topology. */
static gaaw_status_t context_layout(gaaw_context_t ctx, gaaw_model_layout *L)
{
  gaaw_sched_kind_t sched = GAAW_SCHED_1F1B;
  L->recompute = gaaw_recompute_parse(gaaw_ctx_string(ctx, "recompute")); /* checked at init */
  L->chunks = (int)gaaw_ctx_int(ctx, "virtual_stages");
  L->microbatches = (int)gaaw_ctx_int(ctx, "microbatches");
  L->pp_layout = gaaw_ctx_string(ctx, "pp_layout");
  GAAW_CHECK(gaaw_sched_kind_parse(ctx, gaaw_ctx_string(ctx, "pp_schedule"), &sched)); /* checked at init */
  L->pp_kind = sched;
  GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_TP, &L->tp_rank, &L->tp_size));
  GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_PP, &L->pp_rank, &L->pp_size));
  GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, NULL, &L->dp_size));
  GAAW_CHECK(gaaw_topology_cp(ctx, &L->cp_size, &L->cp_rank));
  GAAW_CHECK(gaaw_topology_ep(ctx, &L->ep_size, &L->ep_rank));
  L->cp_a2a = strcmp(gaaw_ctx_string(ctx, "cp_kind"), "a2a") == 0; /* checked at init */
  return GAAW_SUCCESS;
}

/* An empty model of the given kind at the layout's rank; builders add parameters
 * and layers. */
static gaaw_status_t model_begin(gaaw_context_t ctx, const gaaw_model_kind_ops *kind, gaaw_dtype_t dtype,
                                 const gaaw_model_layout *L, gaaw_model_t *model)
{
  GAAW_ARG_CHECK(ctx, dtype == GAAW_F32 || dtype == GAAW_BF16 || dtype == GAAW_F16,
                 "the compute dtype must be f32, bf16 or f16, got %s (%d)", gaaw_dtype_name(dtype), (int)dtype);
  if (L->cp_size > 1 && kind->kind != GAAW_MODEL_GPT)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "cp=%d: %s has no sequences to split over context-parallel ranks; use cp=1",
              L->cp_size, kind->article);
  gaaw_model_t m = calloc(1, sizeof *m);
  if (!m) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a model");
  m->ctx = ctx;
  m->kind_ops = kind;
  m->dtype = m->params.dtype = dtype;
  m->loss_scale = 1.0f;
  m->rows_weight = 1.0f;
  m->recompute = (gaaw_recompute_mode)L->recompute;
  m->chunks = L->chunks;
  m->default_microbatches = L->microbatches;
  m->pp_kind = L->pp_kind;
  m->tp_size = L->tp_size;
  m->tp_rank = L->tp_rank;
  m->pp_size = L->pp_size;
  m->pp_rank = L->pp_rank;
  m->dp_size = L->dp_size;
  m->cp_size = L->cp_size > 1 ? L->cp_size : 1;
  m->cp_rank = L->cp_size > 1 ? L->cp_rank : 0;
  m->cp_a2a = L->cp_size > 1 && L->cp_a2a;
  m->ep_size = L->ep_size > 1 ? L->ep_size : 1;
  m->ep_rank = L->ep_size > 1 ? L->ep_rank : 0;
  m->pp_layout = strdup(L->pp_layout ? L->pp_layout : "");
  if (!m->pp_layout) {
    free(m);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy the pp_layout");
  }
  *model = m;
  return GAAW_SUCCESS;
}

/* model_begin at this rank of the context, with its communicators. */
static gaaw_status_t model_begin_here(gaaw_context_t ctx, const gaaw_model_kind_ops *kind, gaaw_dtype_t dtype,
                                      gaaw_model_t *model)
{
  gaaw_model_layout L;
  GAAW_CHECK(context_layout(ctx, &L));
  GAAW_CHECK(model_begin(ctx, kind, dtype, &L, model));
  gaaw_model_t m = *model;
  gaaw_status_t st = gaaw_topology_comm(ctx, GAAW_GROUP_TP, &m->tp);
  if (st == GAAW_SUCCESS) st = gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &m->world);
  if (st == GAAW_SUCCESS) st = gaaw_topology_comm(ctx, GAAW_GROUP_PP, &m->pp);
  if (st == GAAW_SUCCESS) st = gaaw_topology_comm(ctx, GAAW_GROUP_CP, &m->cp);
  if (st == GAAW_SUCCESS) st = gaaw_topology_comm(ctx, GAAW_GROUP_EP, &m->ep);
  if (st != GAAW_SUCCESS) {
    gaaw_model_destroy(model);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_build(gaaw_context_t ctx, const gaaw_model_builder *b, const void *cfg,
                               gaaw_model_t *model)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  if (model) *model = NULL;
  gaaw_model_t m = NULL;
  /* every check is local; then the ranks agree, so that all fail together */
  gaaw_status_t st = cfg && model ? GAAW_SUCCESS
                                  : gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                                                     "%s must not be NULL", cfg ? "model" : "cfg");
  if (st == GAAW_SUCCESS) st = model_begin_here(ctx, b->kind_ops, b->dtype(cfg), &m);
  if (st == GAAW_SUCCESS) st = b->adopt(m, cfg);
  gaaw_field fields[GAAW_MODEL_MAX_FIELDS];
  char what[64];
  snprintf(what, sizeof what, "the %s configuration", b->name);
  st = gaaw_agree_world(ctx, st, what, fields, st == GAAW_SUCCESS ? b->fields(cfg, fields) : 0);
  snprintf(what, sizeof what, "building the %s", b->name);
  if (st == GAAW_SUCCESS) {
    /* kept for checkpoints, which compare the model they were saved from */
    m->builder_name = b->name;
    m->nconfig = b->fields(cfg, m->config);
    st = gaaw_agree_world(ctx, b->build(m), what, NULL, 0);
  }
  if (st != GAAW_SUCCESS) {
    gaaw_model_destroy(&m);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  *model = m;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_plan(gaaw_context_t ctx, const gaaw_model_builder *b, const void *cfg,
                              const gaaw_model_layout *layout, gaaw_model_t *model)
{
  gaaw_model_t m = NULL;
  *model = NULL;
  GAAW_CHECK(model_begin(ctx, b->kind_ops, b->dtype(cfg), layout, &m));
  m->planned_only = 1;
  m->builder_name = b->name;
  gaaw_status_t st = b->adopt(m, cfg);
  if (st == GAAW_SUCCESS) st = b->build(m);
  if (st != GAAW_SUCCESS) {
    gaaw_model_destroy(&m);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  *model = m;
  return GAAW_SUCCESS;
}

/* Each layer's parameters start a bucket that splits into dp x cp equal, 64-byte
 * aligned shards (the ranks that hold the same weights). */
static void align_bucket(gaaw_model_t m)
{
  gaaw_params_align(&m->params, 16 * (int64_t)m->dp_size * m->cp_size);
}

static void close_bucket(gaaw_model_t m)
{
  align_bucket(m);
  gaaw_layer *l = m->nlayers ? &m->layers[m->nlayers - 1] : NULL;
  if (l) l->param_hi = m->params.numel;
  if (l && l->expert_lo < 0) l->expert_lo = l->param_hi;
}

/* The experts' bucket starts aligned as a layer's (expert-dp divides dp x cp at tp 1). */
void gaaw_layer_begin_experts(gaaw_model_t m, gaaw_layer *l)
{
  align_bucket(m);
  l->expert_lo = m->params.numel;
}

gaaw_status_t gaaw_layer_split_experts(gaaw_model_t m, gaaw_layer *l, int k)
{
  if (l->params[k] < 0 || m->ep_size == 1) return GAAW_SUCCESS; /* another stage's, or every expert here */
  GAAW_CHECK_CTX(m->ctx, gaaw_params_split_rows(m->ctx, &m->params, l->params[k], m->ep_size, m->ep_rank));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_add_layer(gaaw_model_t m, const gaaw_layer_ops *ops, gaaw_layer **layer)
{
  gaaw_context_t ctx = m->ctx;
  close_bucket(m);
  gaaw_layer *grown = realloc(m->layers, (size_t)(m->nlayers + 1) * sizeof *grown);
  if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot grow the layer list");
  m->layers = grown;
  gaaw_layer *l = &m->layers[m->nlayers];
  memset(l, 0, sizeof *l);
  for (int k = 0; k < GAAW_LAYER_MAX_PARAMS; k++) l->params[k] = -1;
  l->ops = ops;
  l->index = m->nlayers++;
  l->param_lo = l->param_hi = m->params.numel;
  l->expert_lo = -1;
  *layer = l;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_plan_stages(gaaw_model_t m, int nlayers, int lead, int tail, const double *cost)
{
  GAAW_CHECK_CTX(m->ctx, gaaw_stages_plan(m->ctx, nlayers, lead, tail, cost, m->pp_size, m->chunks,
                                          m->pp_layout, &m->stages));
  return GAAW_SUCCESS;
}

int gaaw_model_layer_rank(gaaw_model_t m, int i)
{
  if (!m->stages.count) return m->pp_rank; /* not planned: a one-stage model */
  return gaaw_stages_of_layer(&m->stages, i) % m->pp_size;
}

int gaaw_model_owns_layer(gaaw_model_t m, int i)
{
  return gaaw_model_layer_rank(m, i) == m->pp_rank;
}

int gaaw_model_chunk_stage(gaaw_model_t m, int c, int *lo, int *hi)
{
  int vs = c * m->pp_size + m->pp_rank;
  *lo = m->stages.lo[vs];
  *hi = m->stages.hi[vs];
  return vs;
}

void gaaw_model_boundary_shape(gaaw_model_t m, const gaaw_frame *f, int i, int64_t shape[2])
{
  shape[0] = m->kind_ops->stream_rows(m, f);
  shape[1] = m->layers[i].in_features;
}

/* Records a parameter of the whole model (once: a tied weight's second
 * declaration is its copy on another stage). */
static gaaw_status_t catalog_add(gaaw_model_t m, const char *name, int ndim, const int64_t *shape, int stage)
{
  gaaw_context_t ctx = m->ctx;
  for (int i = 0; i < m->ncatalog; i++)
    if (strcmp(m->catalog[i].name, name) == 0) return GAAW_SUCCESS;
  GAAW_ARG_CHECK(ctx, strlen(name) < GAAW_PARAM_NAME_MAX, "parameter name '%s' is too long", name);
  gaaw_param_entry *grown = realloc(m->catalog, (size_t)(m->ncatalog + 1) * sizeof *grown);
  if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot grow the parameter catalog");
  m->catalog = grown;
  gaaw_param_entry *e = &grown[m->ncatalog++];
  memset(e, 0, sizeof *e);
  strcpy(e->name, name);
  e->ndim = ndim;
  e->shape[0] = shape[0];
  e->shape[1] = ndim == 2 ? shape[1] : 1;
  e->stage = stage;
  return GAAW_SUCCESS;
}

const gaaw_param_entry *gaaw_model_catalog_find(gaaw_model_t m, const char *name)
{
  for (int i = 0; i < m->ncatalog; i++)
    if (strcmp(m->catalog[i].name, name) == 0) return &m->catalog[i];
  return NULL;
}

gaaw_status_t gaaw_model_add_param_blocks(gaaw_model_t m, gaaw_layer *l, int k, const char *name, int ndim,
                                          int64_t d0, int64_t d1, int split_axis, const gaaw_param_blocks *blocks,
                                          gaaw_init_kind init, float init_value)
{
  gaaw_context_t ctx = m->ctx;
  int64_t shape[2] = {d0, d1};
  GAAW_CHECK(catalog_add(m, name, ndim, shape, gaaw_model_layer_rank(m, l->index)));
  if (!gaaw_model_owns_layer(m, l->index)) return GAAW_SUCCESS; /* another stage's */
  GAAW_CHECK(gaaw_params_add(ctx, &m->params, m->tp_size, name, ndim, shape, split_axis, blocks, init, init_value,
                             &l->params[k]));
  m->params.items[l->params[k]].owner = l->index;
  return GAAW_SUCCESS;
}

void gaaw_layer_mark_partial(gaaw_model_t m, gaaw_layer *l, int k, int partial)
{
  if (l->params[k] >= 0) m->params.items[l->params[k]].grad_is_partial = partial;
}

gaaw_status_t gaaw_model_add_param(gaaw_model_t m, gaaw_layer *l, int k, const char *name, int ndim,
                                   int64_t d0, int64_t d1, int split_axis, int fused_blocks,
                                   gaaw_init_kind init, float init_value)
{
  int64_t extent = split_axis == 1 ? d1 : d0;
  gaaw_param_blocks blocks = gaaw_param_equal_blocks(extent, fused_blocks, m->tp_size);
  GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param_blocks(m, l, k, name, ndim, d0, d1, split_axis, &blocks, init,
                                                     init_value));
  return GAAW_SUCCESS;
}

/* One flat buffer pair per model chunk of this rank: chunk c begins with the
 * parameters of its first layer (other stages' layers between chunks declare
 * none here). */
static gaaw_status_t split_param_chunks(gaaw_model_t m)
{
  int n = m->stages.count ? m->chunks : 1;
  int64_t *starts = calloc((size_t)n, sizeof *starts);
  if (!starts) GAAW_FAIL(m->ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d chunk starts", n);
  for (int c = 1; c < n; c++) {
    int lo, hi;
    gaaw_model_chunk_stage(m, c, &lo, &hi);
    starts[c] = m->layers[lo].param_lo;
  }
  gaaw_status_t st = gaaw_params_set_chunks(m->ctx, &m->params, n, starts);
  free(starts);
  return st;
}

gaaw_status_t gaaw_model_finish(gaaw_model_t m, uint64_t seed)
{
  gaaw_context_t ctx = m->ctx;
  close_bucket(m);
  GAAW_CHECK(split_param_chunks(m));
  if (m->planned_only) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_params_allocate(ctx, &m->params, m->tp_rank, m->tp_size, seed));
  GAAW_CHECK(gaaw_frame_init(m, &m->frame));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_destroy(gaaw_model_t *model)
{
  if (!model || !*model) return GAAW_SUCCESS;
  gaaw_model_t m = *model;
  gaaw_frame_free(m, &m->frame);
  gaaw_params_free(m->ctx, &m->params);
  gaaw_buffer_free(m->ctx, &m->rope_table.buf);
  gaaw_stages_free(&m->stages);
  gaaw_sched_destroy(&m->sched);
  free(m->catalog);
  free(m->moe_step);
  free(m->layers);
  free(m->specs);
  free(m->pp_layout);
  gaaw_normalization_free(m);
  free(m);
  *model = NULL;
  return GAAW_SUCCESS;
}

int gaaw_model_param_users(gaaw_model_t m, int k, int *layers, int max)
{
  int n = 0;
  for (int i = 0; i < m->nlayers; i++)
    for (int j = 0; j < GAAW_LAYER_MAX_PARAMS; j++)
      if (m->layers[i].params[j] == k) {
        if (n < max) layers[n] = i;
        n++;
        break;
      }
  return n;
}
