/* The model object: layer list, activations, forward/backward driver and the
 * parameter access of include/gaaw/model.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/agree.h"
#include "backends/runtime/abort.h"
#include "backends/runtime/half.h"
#include "parallel/model_impl.h"
#include "parallel/tp.h"

/* ---------------------------------------------------------------- helpers */

gaaw_status_t gaaw_act_alloc(gaaw_model_t m, int ndim, const int64_t *shape, gaaw_tensor_t *t)
{
  return gaaw_tensor_alloc(m->ctx, m->dtype, ndim, shape, GAAW_MEM_ACTIVATIONS, t);
}

gaaw_status_t gaaw_act_zeros(gaaw_model_t m, int ndim, const int64_t *shape, gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_act_alloc(m, ndim, shape, t));
  GAAW_CHECK(gaaw_fill(ctx, t, 0.0f));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_act_copy(gaaw_model_t m, const gaaw_tensor_t *x, gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_act_alloc(m, x->ndim, x->shape, t));
  GAAW_CHECK(gaaw_cast(ctx, x, t));
  return GAAW_SUCCESS;
}

void gaaw_act_free(gaaw_model_t m, gaaw_tensor_t *t)
{
  if (t->buf) gaaw_buffer_free(m->ctx, &t->buf);
}

/* Slot `slot` of what layer l keeps in frame f, freed and ready to be reused. */
static gaaw_status_t saved_slot(gaaw_model_t m, gaaw_frame *f, const gaaw_layer *l, int slot, gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  if (slot < 0 || slot >= GAAW_LAYER_MAX_SAVED)
    GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "layer %d (%s): saved slot %d", l->index, l->ops->kind, slot);
  gaaw_saved *sv = &f->saved[l->index];
  gaaw_act_free(m, &sv->t[slot]);
  if (slot >= sv->n) sv->n = slot + 1;
  *t = &sv->t[slot];
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layer_alloc(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l, int slot, int zero, int ndim,
                               const int64_t *shape, gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(saved_slot(m, f, l, slot, t));
  GAAW_CHECK(zero ? gaaw_act_zeros(m, ndim, shape, *t) : gaaw_act_alloc(m, ndim, shape, *t));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layer_alloc_stat(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l, int slot, int64_t n,
                                    gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(saved_slot(m, f, l, slot, t));
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_ACTIVATIONS, *t));
  return GAAW_SUCCESS;
}

gaaw_tensor_t *gaaw_layer_saved(gaaw_frame *f, const gaaw_layer *l)
{
  return f->saved[l->index].t;
}

const gaaw_tensor_t *gaaw_layer_input(const gaaw_frame *f, const gaaw_layer *l)
{
  return &f->acts[l->index];
}

gaaw_status_t gaaw_scratch_alloc(gaaw_model_t m, gaaw_scratch *s, int zero, int ndim, const int64_t *shape,
                                 gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  if (s->n == GAAW_SCRATCH_MAX) GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "more than %d temporaries", GAAW_SCRATCH_MAX);
  gaaw_tensor_t *x = &s->t[s->n];
  GAAW_CHECK(zero ? gaaw_act_zeros(m, ndim, shape, x) : gaaw_act_alloc(m, ndim, shape, x));
  s->n++;
  *t = x;
  return GAAW_SUCCESS;
}

void gaaw_scratch_free(gaaw_model_t m, gaaw_scratch *s)
{
  for (int i = 0; i < s->n; i++) gaaw_act_free(m, &s->t[i]);
  s->n = 0;
}

void gaaw_layer_release(gaaw_model_t m, gaaw_frame *f, const gaaw_layer *l)
{
  gaaw_saved *sv = &f->saved[l->index];
  for (int i = 0; i < sv->n; i++) gaaw_act_free(m, &sv->t[i]);
  sv->n = 0;
}

gaaw_tensor_t *gaaw_layer_param(gaaw_model_t m, gaaw_layer *l, int k)
{
  return &m->params.items[l->params[k]].value;
}

gaaw_tensor_t *gaaw_layer_grad(gaaw_model_t m, gaaw_layer *l, int k)
{
  return &m->params.items[l->params[k]].grad;
}

gaaw_tensor_t gaaw_rows_view(const gaaw_tensor_t *t, int64_t row0, int64_t rows)
{
  gaaw_tensor_t v = *t;
  int64_t row_elems = gaaw_tensor_numel(t) / (t->shape[0] ? t->shape[0] : 1);
  v.offset += (size_t)(row0 * row_elems) * gaaw_dtype_size(t->dtype);
  v.shape[0] = rows;
  return v;
}

gaaw_tensor_t gaaw_reshape(const gaaw_tensor_t *t, int ndim, const int64_t *shape)
{
  gaaw_tensor_t v = *t;
  v.ndim = ndim;
  for (int d = 0; d < GAAW_MAX_DIMS; d++) v.shape[d] = d < ndim ? shape[d] : 0;
  return v;
}

const char *gaaw_norm_name(gaaw_norm_t norm)
{
  switch (norm) {
  case GAAW_NORM_LAYERNORM: return "layernorm";
  case GAAW_NORM_RMSNORM: return "rmsnorm";
  }
  return "invalid";
}

const char *gaaw_activation_name(gaaw_activation_t activation)
{
  switch (activation) {
  case GAAW_ACT_GELU: return "gelu";
  case GAAW_ACT_SWIGLU: return "swiglu";
  case GAAW_ACT_NONE: return "none";
  case GAAW_ACT_RELU: return "relu";
  case GAAW_ACT_TANH: return "tanh";
  case GAAW_ACT_SILU: return "silu";
  }
  return "invalid";
}

const char *gaaw_loss_name(gaaw_loss_t loss)
{
  switch (loss) {
  case GAAW_LOSS_MSE: return "mse";
  case GAAW_LOSS_L1: return "l1";
  case GAAW_LOSS_HUBER: return "huber";
  }
  return "invalid";
}

/* ---------------------------------------------------------------- building */

gaaw_status_t gaaw_model_begin(gaaw_context_t ctx, gaaw_model_kind kind, gaaw_dtype_t dtype, gaaw_model_t *model)
{
  GAAW_ARG_CHECK(ctx, dtype == GAAW_F32 || dtype == GAAW_BF16 || dtype == GAAW_F16,
                 "the compute dtype must be f32, bf16 or f16, got %s (%d)", gaaw_dtype_name(dtype), (int)dtype);
  gaaw_model_t m = calloc(1, sizeof *m);
  if (!m) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a model");
  m->ctx = ctx;
  m->kind = kind;
  m->dtype = m->params.dtype = dtype;
  m->loss_scale = 1.0f;
  m->recompute = (gaaw_recompute_mode)gaaw_recompute_parse(gaaw_ctx_string(ctx, "recompute")); /* checked at init */
  m->chunks = (int)gaaw_ctx_int(ctx, "virtual_stages");
  m->default_microbatches = (int)gaaw_ctx_int(ctx, "microbatches");
  gaaw_sched_kind_t sched = GAAW_SCHED_1F1B;
  gaaw_status_t st = gaaw_sched_kind_parse(ctx, gaaw_ctx_string(ctx, "pp_schedule"), &sched); /* checked at init */
  m->pp_kind = sched;
  if (st == GAAW_SUCCESS) st = gaaw_topology_comm(ctx, GAAW_GROUP_TP, &m->tp);
  if (st == GAAW_SUCCESS) st = gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &m->world);
  if (st == GAAW_SUCCESS) st = gaaw_topology_comm(ctx, GAAW_GROUP_PP, &m->pp);
  if (st == GAAW_SUCCESS) st = gaaw_topology_group_rank(ctx, GAAW_GROUP_TP, &m->tp_rank, &m->tp_size);
  if (st == GAAW_SUCCESS) st = gaaw_topology_group_rank(ctx, GAAW_GROUP_PP, &m->pp_rank, &m->pp_size);
  if (st == GAAW_SUCCESS) st = gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, NULL, &m->dp_size);
  if (st != GAAW_SUCCESS) {
    free(m);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  *model = m;
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
  if (st == GAAW_SUCCESS) st = gaaw_model_begin(ctx, b->kind, b->dtype(cfg), &m);
  if (st == GAAW_SUCCESS) st = b->adopt(m, cfg);
  gaaw_field fields[GAAW_MODEL_MAX_FIELDS];
  char what[64];
  snprintf(what, sizeof what, "the %s configuration", b->name);
  st = gaaw_agree_world(ctx, st, what, fields, st == GAAW_SUCCESS ? b->fields(cfg, fields) : 0);
  snprintf(what, sizeof what, "building the %s", b->name);
  if (st == GAAW_SUCCESS) st = gaaw_agree_world(ctx, b->build(m), what, NULL, 0);
  if (st != GAAW_SUCCESS) {
    gaaw_model_destroy(&m);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  *model = m;
  return GAAW_SUCCESS;
}

/* Each layer's parameters start a bucket that splits into dp equal, 64-byte
 * aligned shards. */
static void close_bucket(gaaw_model_t m)
{
  gaaw_params_align(&m->params, 16 * (int64_t)m->dp_size);
  if (m->nlayers) m->layers[m->nlayers - 1].param_hi = m->params.numel;
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
  *layer = l;
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- stages */

gaaw_status_t gaaw_model_plan_stages(gaaw_model_t m, int nlayers, int lead, int tail, const double *cost)
{
  GAAW_CHECK_CTX(m->ctx, gaaw_stages_plan(m->ctx, nlayers, lead, tail, cost, m->pp_size, m->chunks,
                                          gaaw_ctx_string(m->ctx, "pp_layout"), &m->stages));
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
  int sp = m->kind == GAAW_MODEL_GPT && m->gpt.sequence_parallel && m->tp_size > 1;
  shape[0] = sp ? f->rows / m->tp_size : f->rows;
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

static const gaaw_param_entry *catalog_find(gaaw_model_t m, const char *name)
{
  for (int i = 0; i < m->ncatalog; i++)
    if (strcmp(m->catalog[i].name, name) == 0) return &m->catalog[i];
  return NULL;
}

gaaw_status_t gaaw_model_add_param(gaaw_model_t m, gaaw_layer *l, int k, const char *name, int ndim,
                                   int64_t d0, int64_t d1, int split_axis, int fused_blocks,
                                   gaaw_init_kind init, float init_value)
{
  gaaw_context_t ctx = m->ctx;
  int64_t shape[2] = {d0, d1};
  GAAW_CHECK(catalog_add(m, name, ndim, shape, gaaw_model_layer_rank(m, l->index)));
  if (!gaaw_model_owns_layer(m, l->index)) return GAAW_SUCCESS; /* another stage's */
  GAAW_CHECK(gaaw_params_add(ctx, &m->params, m->tp_size, name, ndim, shape, split_axis, fused_blocks, init,
                             init_value, &l->params[k]));
  m->params.items[l->params[k]].owner = l->index;
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
  GAAW_CHECK(gaaw_params_allocate(ctx, &m->params, m->tp_rank, m->tp_size, seed));
  GAAW_CHECK(gaaw_frame_init(m, &m->frame));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- frames */

gaaw_status_t gaaw_frame_init(gaaw_model_t m, gaaw_frame *f)
{
  gaaw_context_t ctx = m->ctx;
  memset(f, 0, sizeof *f);
  f->acts = calloc((size_t)m->nlayers + 1, sizeof *f->acts);
  f->saved = calloc((size_t)m->nlayers, sizeof *f->saved);
  f->deferred = calloc((size_t)m->nlayers, sizeof *f->deferred);
  if (!f->acts || !f->saved || !f->deferred) {
    gaaw_frame_free(m, f);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the activation lists of a microbatch");
  }
  return GAAW_SUCCESS;
}

/* Frees the activations of the frame's forward. */
static void drop_forward(gaaw_model_t m, gaaw_frame *f)
{
  if (!f->acts) return;
  for (int i = 0; i < m->nlayers; i++) gaaw_layer_release(m, f, &m->layers[i]);
  for (int i = 0; f->deferred && i < m->nlayers; i++) gaaw_layer_drop_deferred(m, f, &m->layers[i]);
  for (int i = 0; i <= m->nlayers; i++) gaaw_act_free(m, &f->acts[i]);
  f->have_forward = 0;
}

static void free_batch(gaaw_model_t m, gaaw_frame *f)
{
  gaaw_tensor_t *ts[] = {&f->tokens, &f->targets, &f->positions, &f->inputs, &f->outputs, &f->weights};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) gaaw_act_free(m, ts[i]);
}

void gaaw_frame_free(gaaw_model_t m, gaaw_frame *f)
{
  if (f->saved) drop_forward(m, f);
  free_batch(m, f);
  free(f->acts);
  free(f->saved);
  free(f->deferred);
  memset(f, 0, sizeof *f);
}

gaaw_status_t gaaw_model_destroy(gaaw_model_t *model)
{
  if (!model || !*model) return GAAW_SUCCESS;
  gaaw_model_t m = *model;
  gaaw_frame_free(m, &m->frame);
  gaaw_params_free(m->ctx, &m->params);
  gaaw_stages_free(&m->stages);
  gaaw_sched_destroy(&m->sched);
  free(m->catalog);
  free(m->layers);
  free(m->specs);
  gaaw_normalization_free(m);
  free(m);
  *model = NULL;
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- batches */

/* Copies host data into a fresh device tensor of the given shape and dtype. */
static gaaw_status_t upload(gaaw_model_t m, gaaw_dtype_t dtype, int64_t d0, int64_t d1, const void *host,
                            gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  int64_t shape[2] = {d0, d1};
  GAAW_CHECK(gaaw_tensor_alloc(ctx, dtype, d1 ? 2 : 1, shape, GAAW_MEM_ACTIVATIONS, t));
  GAAW_CHECK(gaaw_buffer_write(ctx, t->buf, t->offset, host, (size_t)gaaw_tensor_numel(t) * gaaw_dtype_size(dtype)));
  return GAAW_SUCCESS;
}

/* The arrays of a batch this stage reads are there: the input (tokens, inputs) on
 * the first stage, the target (targets, outputs) on the last; "a GPT", "input". */
static gaaw_status_t check_stage_arrays(gaaw_model_t m, const char *model, const char *in_name, const void *in,
                                        const char *target_name, const void *target)
{
  gaaw_context_t ctx = m->ctx;
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  if (m->pp_size == 1)
    GAAW_ARG_CHECK(ctx, in && target, "%s batch needs %s and %s", model, in_name, target_name);
  GAAW_ARG_CHECK(ctx, !first || in, "%s batch needs %s on the first pipeline stage (pp rank %d)", model, in_name,
                 m->pp_rank);
  GAAW_ARG_CHECK(ctx, !last || target, "%s batch needs %s on the last pipeline stage (pp rank %d)", model,
                 target_name, m->pp_rank);
  return GAAW_SUCCESS;
}

static gaaw_status_t load_gpt_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_gpt_config_t *g = &m->gpt;
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  GAAW_CHECK(check_stage_arrays(m, "a GPT", "tokens", b->tokens, "targets", b->targets));
  GAAW_ARG_CHECK(ctx, b->seq >= 1 && b->seq <= g->max_seq, "sequence length %d is not in 1..%d (max_seq)", b->seq,
                 g->max_seq);
  int64_t n = (int64_t)b->batch * b->seq;
  GAAW_ARG_CHECK(ctx, !g->sequence_parallel || n % m->tp_size == 0,
                 "with sequence parallelism batch x seq = %lld tokens must divide by tp = %d", (long long)n,
                 m->tp_size);
  int32_t *pos = malloc((size_t)n * sizeof *pos);
  if (!pos) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld positions", (long long)n);
  int64_t counted = 0;
  gaaw_status_t st = GAAW_SUCCESS;
  for (int64_t i = 0; i < n && st == GAAW_SUCCESS; i++) {
    pos[i] = (int32_t)(i % b->seq);
    if (first && (b->tokens[i] < 0 || b->tokens[i] >= g->vocab))
      st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                            "token %lld is %d, outside the vocabulary 0..%d", (long long)i, b->tokens[i],
                            g->vocab - 1);
    else if (last && b->targets[i] >= g->vocab)
      st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                            "target %lld is %d, outside the vocabulary 0..%d", (long long)i, b->targets[i],
                            g->vocab - 1);
    if (last) counted += b->targets[i] >= 0;
  }
  /* only the first stage reads tokens (and positions), only the last targets */
  if (st == GAAW_SUCCESS && first) st = upload(m, GAAW_I32, n, 0, b->tokens, &f->tokens);
  if (st == GAAW_SUCCESS && last) st = upload(m, GAAW_I32, n, 0, b->targets, &f->targets);
  if (st == GAAW_SUCCESS && first) st = upload(m, GAAW_I32, n, 0, pos, &f->positions);
  free(pos);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  f->rows = n;
  f->counted = counted;
  return GAAW_SUCCESS;
}

/* Host f32 data into a fresh (d0, d1) tensor of the compute dtype. */
static gaaw_status_t upload_f32(gaaw_model_t m, int64_t d0, int64_t d1, const float *host, gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t staged;
  GAAW_CHECK(upload(m, GAAW_F32, d0, d1, host, &staged));
  gaaw_status_t st = gaaw_act_alloc(m, GAAW_SHAPE(d0, d1), t);
  if (st == GAAW_SUCCESS) st = gaaw_cast(ctx, &staged, t);
  gaaw_act_free(m, &staged);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Host data (d0, d1) normalised (inputs: outputs 0; outputs: 1), then uploaded. */
static gaaw_status_t upload_normalized(gaaw_model_t m, int outputs, int64_t d0, int64_t d1, const float *host,
                                       gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  float *v = malloc(sizeof(float) * (size_t)(d0 * d1));
  if (!v) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld normalised values", (long long)(d0 * d1));
  gaaw_normalize(m, outputs, host, d0, v);
  gaaw_status_t st = upload_f32(m, d0, d1, v, t);
  free(v);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* The loss weights' sum, after checking each is finite and >= 0 and not all are 0. */
static gaaw_status_t weight_sum(gaaw_context_t ctx, const float *w, int64_t n, double *sum)
{
  double s = 0;
  for (int64_t i = 0; i < n; i++) {
    GAAW_ARG_CHECK(ctx, isfinite(w[i]) && w[i] >= 0.0f, "weights[%lld] is %g; loss weights must be finite and >= 0",
                   (long long)i, (double)w[i]);
    s += w[i];
  }
  GAAW_ARG_CHECK(ctx, s > 0, "the batch's loss weights are all 0: its loss (a mean over their sum) is undefined");
  *sum = s;
  return GAAW_SUCCESS;
}

static gaaw_status_t load_mlp_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  GAAW_CHECK(check_stage_arrays(m, "an MLP", "inputs", b->inputs, "outputs", b->outputs));
  int64_t nin = m->seq_inputs, nout = m->seq_outputs;
  f->counted = (int64_t)b->batch * nout;
  f->weight_sum = (double)f->counted;
  if (last && b->weights) GAAW_CHECK(weight_sum(ctx, b->weights, f->counted, &f->weight_sum));
  if (gaaw_normalization_active(m)) {
    if (first) GAAW_CHECK(upload_normalized(m, 0, b->batch, nin, b->inputs, &f->inputs));
    if (last) GAAW_CHECK(upload_normalized(m, 1, b->batch, nout, b->outputs, &f->outputs));
  } else {
    if (first) GAAW_CHECK(upload_f32(m, b->batch, nin, b->inputs, &f->inputs));
    if (last) GAAW_CHECK(upload_f32(m, b->batch, nout, b->outputs, &f->outputs));
  }
  if (last && b->weights) GAAW_CHECK(upload(m, GAAW_F32, b->batch, nout, b->weights, &f->weights));
  f->rows = b->batch;
  return GAAW_SUCCESS;
}

/* Checks a microbatch and uploads it into frame f. Not collective. */
gaaw_status_t gaaw_model_load_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, b);
  GAAW_ARG_CHECK(ctx, b->batch >= 1, "batch must be >= 1, got %d", b->batch);
  GAAW_CHECK(m->kind == GAAW_MODEL_GPT ? load_gpt_batch(m, f, b) : load_mlp_batch(m, f, b));
  f->batch = b->batch;
  f->seq = b->seq;
  return GAAW_SUCCESS;
}

/* Digests of what this rank reads of the step's microbatches, which the ranks of
 * the tp group must share (they split the work of one microbatch; they are on one
 * pipeline stage, so they read the same arrays). */
static int batch_digests(gaaw_model_t m, const gaaw_batch_t *b, int microbatches, gaaw_field *out)
{
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  size_t rows = (size_t)microbatches * (size_t)b->batch;
  if (m->kind == GAAW_MODEL_GPT) {
    size_t bytes = rows * (size_t)b->seq * sizeof(int32_t);
    out[0] = GAAW_FIELD_DIGEST("tokens", first ? gaaw_digest(b->tokens, bytes) : 0);
    out[1] = GAAW_FIELD_DIGEST("targets", last ? gaaw_digest(b->targets, bytes) : 0);
  } else {
    size_t in_bytes = rows * (size_t)m->seq_inputs * sizeof(float), out_bytes = rows * (size_t)m->seq_outputs * sizeof(float);
    out[0] = GAAW_FIELD_DIGEST("inputs", first ? gaaw_digest(b->inputs, in_bytes) : 0);
    out[1] = GAAW_FIELD_DIGEST("outputs", last ? gaaw_digest(b->outputs, out_bytes) : 0);
    /* NULL weights digest as no bytes, which all-1 weights do not */
    out[2] = GAAW_FIELD_DIGEST("weights", last ? gaaw_digest(b->weights, b->weights ? out_bytes : 0) : 0);
    return 3;
  }
  return 2;
}

/* Every rank of the work group learns whether each one's batch was good, and that
 * they fit together: the same data over tp, the same shape over world. */
gaaw_status_t gaaw_model_agree_batch(gaaw_model_t m, gaaw_status_t st, const gaaw_batch_t *b, int microbatches)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_field fields[5];
  int n = 0;
  if (st == GAAW_SUCCESS) {
    fields[n++] = GAAW_FIELD_INT("batch", b->batch);
    fields[n++] = GAAW_FIELD_INT("seq", b->seq);
    if (microbatches != 1) fields[n++] = GAAW_FIELD_INT("microbatches", microbatches);
  }
  if (m->tp_size > 1)
    st = gaaw_agree(m->tp, st, "the batch of a tp group", fields,
                    st == GAAW_SUCCESS ? n + batch_digests(m, b, microbatches, fields + n) : 0);
  gaaw_comm_t group = gaaw_model_work_group(m);
  if (group != m->tp) st = gaaw_agree(group, st, "the batch's shape", fields, st == GAAW_SUCCESS ? n : 0);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_comm_t gaaw_model_work_group(gaaw_model_t m)
{
  return m->hooks.user || m->pp_size > 1 ? m->world : m->tp;
}

/* A pass failed after its agreement: the other ranks may be inside a collective
 * this rank will not join, so the context is aborted and they are told at once. */
gaaw_status_t gaaw_model_fail_together(gaaw_model_t m, gaaw_status_t st)
{
  if (gaaw_model_work_group(m)->size > 1) gaaw_context_abort(m->ctx);
  return st;
}

void gaaw_model_set_hooks(gaaw_model_t m, const gaaw_model_hooks *hooks)
{
  if (hooks)
    m->hooks = *hooks;
  else
    memset(&m->hooks, 0, sizeof m->hooks);
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

static gaaw_status_t before_layer(gaaw_model_t m, int layer, gaaw_phase phase)
{
  if (!m->hooks.before_layer) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.before_layer(m, layer, phase, m->hooks.user));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_check_pass(gaaw_model_t m, gaaw_phase phase, int passes)
{
  if (!m->hooks.check_pass) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.check_pass(m, phase, passes, m->hooks.user));
  return GAAW_SUCCESS;
}

static gaaw_status_t after_layer(gaaw_model_t m, int layer, gaaw_phase phase)
{
  if (!m->hooks.after_layer) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.after_layer(m, layer, phase, m->hooks.user));
  return GAAW_SUCCESS;
}

/* Monotonic wall clock in seconds, for the per-layer times. */
static double now_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

gaaw_status_t gaaw_model_begin_pass(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk)
{
  if (!m->hooks.begin_pass) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.begin_pass(m, phase, microbatch, chunk, m->hooks.user));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_end_pass(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk)
{
  if (!m->hooks.end_pass) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.end_pass(m, phase, microbatch, chunk, m->hooks.user));
  return GAAW_SUCCESS;
}

/* Full recomputation of layer l: nothing saved past its forward. */
static int recomputes(gaaw_model_t m, const gaaw_layer *l)
{
  return m->recompute == GAAW_RECOMPUTE_FULL && l->ops->recomputable;
}

gaaw_status_t gaaw_model_forward_range(gaaw_model_t m, gaaw_frame *f, int lo, int hi)
{
  /* the first layer reads the batch itself; acts[0] stays empty */
  for (int i = lo; i < hi; i++) {
    gaaw_layer *l = &m->layers[i];
    double t0 = now_seconds();
    GAAW_CHECK_CTX(m->ctx, before_layer(m, i, GAAW_PHASE_FORWARD));
    GAAW_CHECK_CTX(m->ctx, l->ops->forward(m, l, f, &f->acts[i], &f->acts[i + 1]));
    /* inference keeps nothing but the last layer's (what predict returns); full
     * recomputation keeps only the input acts[i] */
    int inference = f->inference && i + 1 < m->nlayers;
    if (inference || recomputes(m, l)) gaaw_layer_release(m, f, l);
    if (inference && !l->keeps_input) gaaw_act_free(m, &f->acts[i]);
    GAAW_CHECK_CTX(m->ctx, after_layer(m, i, GAAW_PHASE_FORWARD));
    l->forward_seconds += now_seconds() - t0; /* with the hooks: ZeRO 3's gathers count */
  }
  return GAAW_SUCCESS;
}

/* The whole model over frame f's microbatch, a pass's hooks around it. */
static gaaw_status_t run_forward(gaaw_model_t m, gaaw_frame *f)
{
  GAAW_CHECK_CTX(m->ctx, gaaw_model_begin_pass(m, GAAW_PHASE_FORWARD, 0, 0));
  GAAW_CHECK_CTX(m->ctx, gaaw_model_forward_range(m, f, 0, m->nlayers));
  GAAW_CHECK_CTX(m->ctx, gaaw_model_end_pass(m, GAAW_PHASE_FORWARD, 0, 0));
  return GAAW_SUCCESS;
}

/* gaaw_model_forward, gaaw_model_predict: one microbatch (through one stage, or the
 * pipeline's stages one after the other). */
static gaaw_status_t one_stage_microbatch(gaaw_model_t m, const gaaw_batch_t *b, const char *what)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, b);
  GAAW_ARG_CHECK(ctx, b->microbatches <= 1, "%s runs one microbatch, got microbatches = %d "
                 "(gaaw_model_forward_backward runs several)", what, b->microbatches);
  return GAAW_SUCCESS;
}

int gaaw_model_microbatches(gaaw_model_t m, const gaaw_batch_t *b)
{
  return b->microbatches > 0 ? b->microbatches : m->default_microbatches;
}

gaaw_batch_t gaaw_model_microbatch(gaaw_model_t m, const gaaw_batch_t *b, int i)
{
  gaaw_batch_t one = *b;
  one.microbatches = 1;
  size_t rows = (size_t)i * (size_t)b->batch;
  if (m->kind == GAAW_MODEL_GPT) {
    size_t at = rows * (size_t)b->seq;
    if (b->tokens) one.tokens = b->tokens + at;
    if (b->targets) one.targets = b->targets + at;
  } else {
    if (b->inputs) one.inputs = b->inputs + rows * (size_t)m->seq_inputs;
    if (b->outputs) one.outputs = b->outputs + rows * (size_t)m->seq_outputs;
    if (b->weights) one.weights = b->weights + rows * (size_t)m->seq_outputs;
  }
  return one;
}

/* pp > 1: the loss of frame f's microbatch through the stages, keeping nothing
 * (a pipeline's backward runs in gaaw_model_forward_backward), on every rank. */
static gaaw_status_t pipeline_loss(gaaw_model_t m, gaaw_frame *f)
{
  f->inference = 1;
  GAAW_CHECK_CTX(m->ctx, gaaw_pipeline_forward_only(m, f, m->nlayers));
  GAAW_CHECK_CTX(m->ctx, gaaw_pipeline_share_loss(m, &f->loss));
  return GAAW_SUCCESS;
}

/* Loads the batch and agrees on it, then runs forward; with `then_backward` the
 * backward pass's local checks join the same agreement (one round for both). */
static gaaw_status_t forward_agreed(gaaw_model_t m, const gaaw_batch_t *b, int then_backward)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  drop_forward(m, f);
  free_batch(m, f);
  gaaw_status_t st = one_stage_microbatch(m, b, "gaaw_model_forward");
  if (st == GAAW_SUCCESS) st = gaaw_model_load_batch(m, f, b);
  if (st == GAAW_SUCCESS) st = gaaw_model_check_pass(m, GAAW_PHASE_FORWARD, 1);
  if (st == GAAW_SUCCESS && then_backward) st = gaaw_model_check_pass(m, GAAW_PHASE_BACKWARD, 1);
  st = gaaw_model_agree_batch(m, st, b, 1);
  if (st != GAAW_SUCCESS) {
    free_batch(m, f);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  st = m->pp_size > 1 ? pipeline_loss(m, f) : run_forward(m, f);
  if (st != GAAW_SUCCESS || m->pp_size > 1) drop_forward(m, f);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, gaaw_model_fail_together(m, st), __FILE__, __LINE__, __func__);
  f->have_forward = m->pp_size == 1;
  f->outputs_only = 0;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_forward(gaaw_model_t m, const gaaw_batch_t *b, float *loss)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_CHECK_CTX(m->ctx, forward_agreed(m, b, 0));
  if (loss) *loss = m->frame.loss;
  return GAAW_SUCCESS;
}

/* Copies layer i's partial gradients into packed (to_packed) or back from it;
 * returns their element count in *count. */
static gaaw_status_t copy_partial_grads(gaaw_model_t m, int layer, gaaw_tensor_t *packed, int to_packed,
                                        int64_t *count)
{
  gaaw_context_t ctx = m->ctx;
  int64_t at = 0;
  for (int k = 0; k < m->params.count; k++) {
    gaaw_param *p = &m->params.items[k];
    if (!p->grad_is_partial || p->owner != layer) continue;
    if (packed) {
      gaaw_tensor_t slot = *packed, grad = gaaw_reshape(&p->grad, 1, &p->local_numel);
      slot.shape[0] = p->local_numel;
      slot.offset += (size_t)at * gaaw_dtype_size(m->dtype);
      GAAW_CHECK(to_packed ? gaaw_cast(ctx, &grad, &slot) : gaaw_cast(ctx, &slot, &grad));
    }
    at += p->local_numel;
  }
  *count = at;
  return GAAW_SUCCESS;
}

/* Replicated parameters that saw only this rank's tokens (sequence parallelism)
 * have partial gradients: what this microbatch adds must be summed over tp, and
 * only that (the gradient may already hold earlier microbatches' sums). So before
 * the layer's backward their accumulated gradients move aside into *held (and the
 * gradients are zeroed); after it the new part is all-reduced over tp in one packed
 * copy and the held sums added back (before a data-parallel engine reduces them).
 * held stays empty when the layer has none or tp is 1. */
static gaaw_status_t hold_partial_grads(gaaw_model_t m, int layer, gaaw_tensor_t *held)
{
  gaaw_context_t ctx = m->ctx;
  int64_t total;
  GAAW_CHECK(copy_partial_grads(m, layer, NULL, 0, &total));
  if (total == 0 || m->tp_size == 1) return GAAW_SUCCESS;
  gaaw_tensor_t zeros = {0};
  GAAW_CHECK(gaaw_tensor_alloc(ctx, m->dtype, 1, &total, GAAW_MEM_COMMUNICATION, held));
  gaaw_status_t st = copy_partial_grads(m, layer, held, 1, &total);
  if (st == GAAW_SUCCESS) st = gaaw_tensor_alloc(ctx, m->dtype, 1, &total, GAAW_MEM_WORKSPACE, &zeros);
  if (st == GAAW_SUCCESS) st = gaaw_fill(ctx, &zeros, 0.0f);
  if (st == GAAW_SUCCESS) st = copy_partial_grads(m, layer, &zeros, 0, &total);
  gaaw_buffer_free(ctx, &zeros.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t reduce_partial_grads(gaaw_model_t m, int layer, const gaaw_tensor_t *held)
{
  gaaw_context_t ctx = m->ctx;
  int64_t total;
  if (!held->buf) return GAAW_SUCCESS;
  GAAW_CHECK(copy_partial_grads(m, layer, NULL, 0, &total));
  gaaw_tensor_t packed;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, m->dtype, 1, &total, GAAW_MEM_COMMUNICATION, &packed));
  gaaw_status_t st = copy_partial_grads(m, layer, &packed, 1, &total);
  if (st == GAAW_SUCCESS) st = gaaw_tp_allreduce(m->tp, &packed);
  if (st == GAAW_SUCCESS) st = gaaw_axpy(ctx, 1.0f, held, &packed);
  if (st == GAAW_SUCCESS) st = copy_partial_grads(m, layer, &packed, 0, &total);
  gaaw_buffer_free(ctx, &packed.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Full recomputation: layer l's forward again from its kept input, for what it
 * saves (its output is the next layer's input, which backward has freed already). */
static gaaw_status_t recompute_forward(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l)
{
  gaaw_tensor_t y = {0};
  gaaw_status_t st = l->ops->forward(m, l, f, gaaw_layer_input(f, l), &y);
  gaaw_act_free(m, &y);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Backward of layer i in frame f: dy in (freed), dx out; with f->defer_weights
 * its linears' weight gradients wait in f for gaaw_model_weight_range. */
static gaaw_status_t layer_backward(gaaw_model_t m, gaaw_frame *f, int i, gaaw_tensor_t *dy, gaaw_tensor_t *dx)
{
  gaaw_layer *l = &m->layers[i];
  gaaw_tensor_t held = {0};
  gaaw_phase phase = f->defer_weights ? GAAW_PHASE_BACKWARD_INPUT : GAAW_PHASE_BACKWARD;
  gaaw_status_t st = before_layer(m, i, phase);
  if (st == GAAW_SUCCESS && recomputes(m, l)) st = recompute_forward(m, f, l);
  if (st == GAAW_SUCCESS) st = hold_partial_grads(m, i, &held);
  if (st == GAAW_SUCCESS) st = l->ops->backward(m, l, f, dy, i > 0 ? dx : NULL);
  gaaw_act_free(m, dy);
  gaaw_layer_release(m, f, l);
  gaaw_act_free(m, &f->acts[i + 1]);
  if (st == GAAW_SUCCESS) st = reduce_partial_grads(m, i, &held);
  gaaw_buffer_free(m->ctx, &held.buf);
  if (st == GAAW_SUCCESS) st = after_layer(m, i, phase);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_backward_range(gaaw_model_t m, gaaw_frame *f, int lo, int hi, gaaw_tensor_t *dy,
                                        gaaw_tensor_t *dx)
{
  gaaw_tensor_t grad = *dy;
  *dy = (gaaw_tensor_t){0}; /* taken over: freed by the first layer's backward */
  for (int i = hi - 1; i >= lo; i--) {
    gaaw_tensor_t below = {0};
    double t0 = now_seconds();
    gaaw_status_t st = layer_backward(m, f, i, &grad, &below);
    m->layers[i].backward_seconds += now_seconds() - t0;
    if (st != GAAW_SUCCESS) {
      gaaw_act_free(m, &below);
      return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
    }
    grad = below;
  }
  if (dx)
    *dx = grad;
  else
    gaaw_act_free(m, &grad);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_weight_range(gaaw_model_t m, gaaw_frame *f, int lo, int hi)
{
  for (int i = hi - 1; i >= lo; i--) {
    gaaw_layer *l = &m->layers[i];
    double t0 = now_seconds();
    gaaw_status_t st = before_layer(m, i, GAAW_PHASE_WEIGHT);
    if (st == GAAW_SUCCESS) st = gaaw_layer_run_deferred(m, f, l);
    gaaw_layer_drop_deferred(m, f, l); /* when before_layer failed */
    if (st == GAAW_SUCCESS) st = after_layer(m, i, GAAW_PHASE_WEIGHT);
    l->backward_seconds += now_seconds() - t0;
    if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

/* Backward of the whole model over frame f, a pass's hooks around it. */
static gaaw_status_t run_backward(gaaw_model_t m, gaaw_frame *f)
{
  gaaw_tensor_t dy = {0}; /* the head starts from the loss */
  GAAW_CHECK_CTX(m->ctx, gaaw_model_begin_pass(m, GAAW_PHASE_BACKWARD, 0, 0));
  GAAW_CHECK_CTX(m->ctx, gaaw_model_backward_range(m, f, 0, m->nlayers, &dy, NULL));
  GAAW_CHECK_CTX(m->ctx, gaaw_model_end_pass(m, GAAW_PHASE_BACKWARD, 0, 0));
  return GAAW_SUCCESS;
}

/* Backward of the frame's forward, once every rank has agreed to run it. */
static gaaw_status_t backward_agreed(gaaw_model_t m)
{
  gaaw_status_t st = run_backward(m, &m->frame);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, gaaw_model_fail_together(m, st), __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_backward(gaaw_model_t m)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  gaaw_status_t st = f->have_forward ? GAAW_SUCCESS
                                     : gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__,
                                                        "gaaw_model_backward needs a gaaw_model_forward first");
  if (st == GAAW_SUCCESS && f->outputs_only)
    st = gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__,
                          "the forward was gaaw_model_forward_outputs (no loss): go back with gaaw_model_backward_from");
  if (st == GAAW_SUCCESS) st = gaaw_model_check_pass(m, GAAW_PHASE_BACKWARD, 1);
  st = gaaw_agree(gaaw_model_work_group(m), st, "gaaw_model_backward", NULL, 0);
  if (st == GAAW_SUCCESS) st = backward_agreed(m);
  drop_forward(m, f);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_forward_backward(gaaw_model_t m, const gaaw_batch_t *b, float *loss)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  drop_forward(m, &m->frame); /* a forward held for gaaw_model_backward is given up */
  free_batch(m, &m->frame);
  GAAW_CHECK_CTX(m->ctx, gaaw_pipeline_forward_backward(m, b, loss));
  return GAAW_SUCCESS;
}

/* The data-parallel engine's hook before gradients are read or zeroed. */
static gaaw_status_t grads_access(gaaw_model_t m, int reset)
{
  if (!m->hooks.grads_access) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.grads_access(m, reset, m->hooks.user));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_zero_grad(gaaw_model_t m)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(grads_access(m, 1));
  for (int c = 0; c < m->params.nchunks; c++) {
    const gaaw_param_chunk *ch = &m->params.chunks[c];
    if (!ch->grads || ch->hi == ch->lo) continue; /* sharded away (ZeRO 2, 3): the hook zeroed the shard */
    gaaw_tensor_t all = gaaw_params_span(&m->params, 1, ch->lo, ch->hi - ch->lo);
    GAAW_CHECK(gaaw_fill(ctx, &all, 0.0f));
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- timing */

gaaw_status_t gaaw_model_layer_count(gaaw_model_t m, int *count)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_NOT_NULL(m->ctx, count);
  *count = m->nlayers;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_layer_times(gaaw_model_t m, int index, const char **kind, double *forward_seconds,
                                     double *backward_seconds)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_CHECK(m->ctx, index >= 0 && index < m->nlayers, "layer index %d is not in 0..%d", index, m->nlayers - 1);
  const gaaw_layer *l = &m->layers[index];
  if (kind) *kind = l->ops->kind;
  if (forward_seconds) *forward_seconds = l->forward_seconds;
  if (backward_seconds) *backward_seconds = l->backward_seconds;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_pipeline_times(gaaw_model_t m, double *idle_seconds, double *total_seconds)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  if (idle_seconds) *idle_seconds = m->pipe_idle;
  if (total_seconds) *total_seconds = m->pipe_wall;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_reset_times(gaaw_model_t m)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  for (int i = 0; i < m->nlayers; i++) m->layers[i].forward_seconds = m->layers[i].backward_seconds = 0.0;
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- parameters */

gaaw_status_t gaaw_model_param_count(gaaw_model_t m, int *count)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_NOT_NULL(m->ctx, count);
  *count = m->ncatalog;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_param_info(gaaw_model_t m, int index, const char **name, int *ndim, int64_t shape[2])
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_CHECK(ctx, index >= 0 && index < m->ncatalog, "parameter index %d is not in 0..%d", index,
                 m->ncatalog - 1);
  const gaaw_param_entry *p = &m->catalog[index];
  if (name) *name = p->name;
  if (ndim) *ndim = p->ndim;
  if (shape) {
    shape[0] = p->shape[0];
    shape[1] = p->shape[1];
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_num_params(gaaw_model_t m, int64_t *global_count, int64_t *local_count)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  int64_t global = 0, local = 0;
  for (int k = 0; k < m->ncatalog; k++) global += m->catalog[k].shape[0] * m->catalog[k].shape[1];
  for (int k = 0; k < m->params.count; k++) local += m->params.items[k].local_numel;
  if (global_count) *global_count = global;
  if (local_count) *local_count = local;
  return GAAW_SUCCESS;
}

static gaaw_status_t find_param(gaaw_model_t m, const char *name, gaaw_param **p)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, name);
  int k = gaaw_params_find(&m->params, name);
  if (k < 0) GAAW_FAIL(ctx, GAAW_ERR_NOT_FOUND, "the model has no parameter named '%s'", name);
  *p = &m->params.items[k];
  return GAAW_SUCCESS;
}

/* Gathers slice t of parameter p from every tp rank into its global layout (f32). */
static gaaw_status_t gather_global(gaaw_model_t m, const gaaw_param *p, const gaaw_tensor_t *t, float *values)
{
  gaaw_context_t ctx = m->ctx;
  int64_t n = p->local_numel, all_n = n * m->tp_size;
  size_t es = gaaw_dtype_size(t->dtype);
  gaaw_tensor_t all, flat = gaaw_reshape(t, 1, &n);
  GAAW_CHECK(gaaw_tensor_alloc(ctx, t->dtype, 1, &all_n, GAAW_MEM_WORKSPACE, &all));
  gaaw_status_t st = gaaw_tp_gather_rows(m->tp, &flat, &all);
  void *host = st == GAAW_SUCCESS ? malloc((size_t)all_n * es) : NULL;
  if (st == GAAW_SUCCESS && !host) st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                         "cannot allocate %lld elements", (long long)all_n);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, all.buf, 0, host, (size_t)all_n * es);
  if (st == GAAW_SUCCESS)
    for (int r = 0; r < m->tp_size; r++)
      for (int64_t i = 0; i < n; i++) {
        int64_t g = gaaw_param_global_index(p, r, m->tp_size, i);
        if (g >= 0) values[g] = gaaw_load_f32(host, t->dtype, r * n + i);
      }
  free(host);
  gaaw_buffer_free(ctx, &all.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Reads (or writes) parameter p's slice between the data-parallel engine's
 * ACCESS hooks, which make it resident when it is sharded (ZeRO 3). */
static gaaw_status_t access_param(gaaw_model_t m, gaaw_param *p, int write, const float *in, float *out)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(before_layer(m, p->owner, GAAW_PHASE_ACCESS));
  gaaw_status_t st = GAAW_SUCCESS;
  if (!write) {
    st = gather_global(m, p, &p->value, out);
  } else {
    size_t es = gaaw_dtype_size(m->dtype);
    void *slice = malloc((size_t)p->local_numel * es + 4);
    if (!slice) st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                      "cannot allocate %lld elements", (long long)p->local_numel);
    for (int64_t i = 0; st == GAAW_SUCCESS && i < p->local_numel; i++) {
      int64_t g = gaaw_param_global_index(p, m->tp_rank, m->tp_size, i);
      gaaw_store_f32(slice, m->dtype, i, g >= 0 ? in[g] : 0.0f);
    }
    if (st == GAAW_SUCCESS)
      st = gaaw_buffer_write(ctx, p->value.buf, p->value.offset, slice, (size_t)p->local_numel * es);
    free(slice);
  }
  gaaw_status_t st2 = after_layer(m, p->owner, GAAW_PHASE_ACCESS);
  if (st == GAAW_SUCCESS) st = st2;
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Finds the parameter a collective read names; every rank of the work group must
 * name the same one and pass somewhere to put it. *p is NULL on a pipeline stage
 * that does not hold it (*entry says which one does). */
static gaaw_status_t agree_read(gaaw_model_t m, const char *name, const float *values, gaaw_param **p,
                                const gaaw_param_entry **entry)
{
  gaaw_context_t ctx = m->ctx;
  *p = NULL;
  *entry = name ? catalog_find(m, name) : NULL;
  gaaw_status_t st = *entry && (*entry)->stage != m->pp_rank ? GAAW_SUCCESS : find_param(m, name, p);
  if (st == GAAW_SUCCESS && !values)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "values must not be NULL");
  gaaw_field f = GAAW_FIELD_TEXT("name", name);
  GAAW_CHECK(gaaw_agree(gaaw_model_work_group(m), st, "the parameter to read", &f, st == GAAW_SUCCESS));
  return GAAW_SUCCESS;
}

/* pp > 1: the stage that holds a parameter sends what it read (values, global
 * layout) to the others of its pp group. */
static gaaw_status_t share_read(gaaw_model_t m, const gaaw_param_entry *e, float *values)
{
  gaaw_context_t ctx = m->ctx;
  if (m->pp_size == 1) return GAAW_SUCCESS;
  int64_t n = e->shape[0] * e->shape[1];
  gaaw_tensor_t t;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &t));
  gaaw_status_t st = GAAW_SUCCESS;
  if (e->stage == m->pp_rank) st = gaaw_buffer_write(ctx, t.buf, 0, values, (size_t)n * sizeof(float));
  if (st == GAAW_SUCCESS) st = gaaw_comm_broadcast(m->pp, &t, e->stage);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, 0, values, (size_t)n * sizeof(float));
  gaaw_buffer_free(ctx, &t.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_get_param(gaaw_model_t m, const char *name, float *values)
{
  gaaw_param *p;
  const gaaw_param_entry *e;
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_CHECK_CTX(m->ctx, agree_read(m, name, values, &p, &e));
  if (p && e->stage == m->pp_rank) GAAW_CHECK_CTX(m->ctx, access_param(m, p, 0, NULL, values));
  GAAW_CHECK_CTX(m->ctx, share_read(m, e, values));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_set_param(gaaw_model_t m, const char *name, const float *values)
{
  gaaw_param *p;
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_NOT_NULL(m->ctx, name);
  /* another pipeline stage's parameter: that stage keeps it */
  if (m->pp_size > 1 && catalog_find(m, name) && gaaw_params_find(&m->params, name) < 0) {
    GAAW_ARG_NOT_NULL(m->ctx, values);
    return GAAW_SUCCESS;
  }
  GAAW_CHECK_CTX(m->ctx, find_param(m, name, &p));
  GAAW_ARG_NOT_NULL(m->ctx, values);
  GAAW_CHECK_CTX(m->ctx, access_param(m, p, 1, values, NULL));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_get_grad(gaaw_model_t m, const char *name, float *values)
{
  gaaw_param *p;
  const gaaw_param_entry *e;
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(agree_read(m, name, values, &p, &e));
  GAAW_CHECK(grads_access(m, 0));
  if (p && e->stage == m->pp_rank) {
    if (!p->grad.buf)
      GAAW_FAIL(ctx, GAAW_ERR_STATE, "the gradient of %s is sharded over dp (ZeRO stage 2 or 3) and has no "
                "whole copy to read", name);
    GAAW_CHECK(gather_global(m, p, &p->grad, values));
  }
  GAAW_CHECK(share_read(m, e, values));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- inference */

/* b with what predict does not need filled in: GPT targets all ignored (-1), MLP
 * outputs zero. The filler arrays are returned in *filler (free them). */
static gaaw_status_t predict_batch(gaaw_model_t m, const gaaw_batch_t *b, gaaw_batch_t *full, void **filler)
{
  gaaw_context_t ctx = m->ctx;
  *filler = NULL;
  GAAW_ARG_NOT_NULL(ctx, b);
  GAAW_ARG_CHECK(ctx, b->batch >= 1 && b->seq >= 0, "batch must be >= 1 (got %d) and seq >= 0 (got %d)", b->batch,
                 b->seq);
  *full = *b;
  full->weights = NULL; /* no loss */
  int gpt = m->kind == GAAW_MODEL_GPT;
  size_t n = gpt ? (size_t)b->batch * (size_t)b->seq : (size_t)b->batch * (size_t)m->seq_outputs;
  if ((gpt && b->targets) || (!gpt && b->outputs)) return GAAW_SUCCESS;
  void *p = calloc(n ? n : 1, 4);
  if (!p) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %zu placeholder values", n);
  if (gpt) {
    for (size_t i = 0; i < n; i++) ((int32_t *)p)[i] = -1;
    full->targets = p;
  } else {
    full->outputs = p;
  }
  *filler = p;
  return GAAW_SUCCESS;
}

/* The output of frame f's inference in host f32. */
static gaaw_status_t read_outputs(gaaw_model_t m, gaaw_frame *f, float *out)
{
  gaaw_context_t ctx = m->ctx;
  if (m->kind == GAAW_MODEL_GPT) {
    GAAW_CHECK(gaaw_gpt_gather_logits(m, f, out));
    return GAAW_SUCCESS;
  }
  /* the last linear's output, whole on every rank (gathered or all-reduced) */
  const gaaw_tensor_t *y = &f->acts[m->nlayers - 1];
  gaaw_tensor_t host;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, y->ndim, y->shape, GAAW_MEM_WORKSPACE, &host));
  gaaw_status_t st = gaaw_cast(ctx, y, &host);
  if (st == GAAW_SUCCESS)
    st = gaaw_buffer_read(ctx, host.buf, host.offset, out, (size_t)gaaw_tensor_numel(y) * sizeof(float));
  gaaw_buffer_free(ctx, &host.buf);
  if (st == GAAW_SUCCESS && gaaw_normalization_active(m)) gaaw_denormalize_outputs(m, f->rows, out, 0);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* pp > 1: the last stage's outputs go to the others of its pp group. */
static gaaw_status_t share_outputs(gaaw_model_t m, const gaaw_batch_t *b, float *out)
{
  gaaw_context_t ctx = m->ctx;
  if (m->pp_size == 1) return GAAW_SUCCESS;
  int64_t n = m->kind == GAAW_MODEL_GPT ? (int64_t)b->batch * b->seq * m->gpt.vocab
                                        : (int64_t)b->batch * m->seq_outputs;
  int last = gaaw_model_layer_rank(m, m->nlayers - 1);
  gaaw_tensor_t t;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &t));
  gaaw_status_t st = GAAW_SUCCESS;
  if (m->pp_rank == last) st = gaaw_buffer_write(ctx, t.buf, 0, out, (size_t)n * sizeof(float));
  if (st == GAAW_SUCCESS) st = gaaw_comm_broadcast(m->pp, &t, last);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, 0, out, (size_t)n * sizeof(float));
  gaaw_buffer_free(ctx, &t.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_predict(gaaw_model_t m, const gaaw_batch_t *b, float *outputs)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame f;
  gaaw_batch_t full;
  void *filler = NULL;
  gaaw_status_t st = gaaw_frame_init(m, &f);
  if (st == GAAW_SUCCESS && !outputs)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "outputs must not be NULL");
  if (st == GAAW_SUCCESS) st = one_stage_microbatch(m, b, "gaaw_model_predict");
  if (st == GAAW_SUCCESS) st = predict_batch(m, b, &full, &filler);
  if (st == GAAW_SUCCESS) st = gaaw_model_load_batch(m, &f, &full);
  st = gaaw_model_agree_batch(m, st, &full, 1);
  if (st == GAAW_SUCCESS) {
    f.inference = 1;
    /* an MLP stops before its loss layer; a GPT's head keeps the logits */
    int hi = m->kind == GAAW_MODEL_GPT ? m->nlayers : m->nlayers - 1;
    st = m->pp_size > 1 ? gaaw_pipeline_forward_only(m, &f, hi) : gaaw_model_forward_range(m, &f, 0, hi);
    if (st == GAAW_SUCCESS && gaaw_model_owns_layer(m, m->nlayers - 1)) st = read_outputs(m, &f, outputs);
    if (st == GAAW_SUCCESS) st = share_outputs(m, &full, outputs);
    if (st != GAAW_SUCCESS) st = gaaw_model_fail_together(m, st);
  }
  gaaw_frame_free(m, &f);
  free(filler);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- the caller's loss */

static gaaw_status_t forward_outputs_local(gaaw_model_t m, const gaaw_batch_t *b, float *outputs, gaaw_batch_t *full,
                                           void **filler)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_CHECK(ctx, m->kind == GAAW_MODEL_MLP,
                 "gaaw_model_forward_outputs is for sequential models and MLPs (a GPT's loss is its own)");
  GAAW_ARG_NOT_NULL(ctx, outputs);
  if (m->pp_size > 1)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "gaaw_model_forward_outputs and gaaw_model_backward_from run at pp 1 only");
  GAAW_CHECK(one_stage_microbatch(m, b, "gaaw_model_forward_outputs"));
  GAAW_CHECK(predict_batch(m, b, full, filler));
  GAAW_CHECK(gaaw_model_load_batch(m, &m->frame, full));
  GAAW_CHECK(gaaw_model_check_pass(m, GAAW_PHASE_FORWARD, 1));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_forward_outputs(gaaw_model_t m, const gaaw_batch_t *b, float *outputs)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  gaaw_batch_t full = {0};
  void *filler = NULL;
  drop_forward(m, f);
  free_batch(m, f);
  gaaw_status_t st = forward_outputs_local(m, b, outputs, &full, &filler);
  st = gaaw_model_agree_batch(m, st, &full, 1);
  free(filler);
  if (st != GAAW_SUCCESS) {
    free_batch(m, f);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  /* every layer but the loss, keeping what backward needs */
  st = gaaw_model_begin_pass(m, GAAW_PHASE_FORWARD, 0, 0);
  if (st == GAAW_SUCCESS) st = gaaw_model_forward_range(m, f, 0, m->nlayers - 1);
  if (st == GAAW_SUCCESS) st = gaaw_model_end_pass(m, GAAW_PHASE_FORWARD, 0, 0);
  if (st == GAAW_SUCCESS) st = read_outputs(m, f, outputs);
  if (st != GAAW_SUCCESS) {
    drop_forward(m, f);
    return gaaw_error_trace(ctx, gaaw_model_fail_together(m, st), __FILE__, __LINE__, __func__);
  }
  f->have_forward = 1;
  f->outputs_only = 1;
  return GAAW_SUCCESS;
}

/* The local checks of d_outputs, then it goes up as the output gradient *dy. */
static gaaw_status_t backward_from_local(gaaw_model_t m, const float *d_outputs, gaaw_tensor_t *dy)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  GAAW_ARG_CHECK(ctx, m->kind == GAAW_MODEL_MLP, "gaaw_model_backward_from is for sequential models and MLPs");
  if (!f->have_forward)
    GAAW_FAIL(ctx, GAAW_ERR_STATE, "gaaw_model_backward_from needs a gaaw_model_forward_outputs (or forward) first");
  GAAW_ARG_NOT_NULL(ctx, d_outputs);
  int64_t n = (int64_t)f->batch * m->seq_outputs;
  for (int64_t i = 0; i < n; i++)
    GAAW_ARG_CHECK(ctx, isfinite(d_outputs[i]), "d_outputs[%lld] is %g; it must be finite", (long long)i,
                   (double)d_outputs[i]);
  GAAW_CHECK(gaaw_model_check_pass(m, GAAW_PHASE_BACKWARD, 1));
  if (gaaw_normalization_active(m)) { /* y = y' std + mean: dL/dy' = dL/dy std */
    float *d = malloc(sizeof(float) * (size_t)n);
    if (!d) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld gradients", (long long)n);
    memcpy(d, d_outputs, sizeof(float) * (size_t)n);
    gaaw_denormalize_outputs(m, f->batch, d, 1);
    gaaw_status_t st = upload_f32(m, f->batch, m->seq_outputs, d, dy);
    free(d);
    GAAW_CHECK(st);
  } else {
    GAAW_CHECK(upload_f32(m, f->batch, m->seq_outputs, d_outputs, dy));
  }
  if (m->loss_scale != 1.0f) GAAW_CHECK(gaaw_scale(ctx, dy, m->loss_scale)); /* as the loss layer's would be */
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_backward_from(gaaw_model_t m, const float *d_outputs)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  gaaw_tensor_t dy = {0};
  gaaw_status_t st = backward_from_local(m, d_outputs, &dy);
  gaaw_field digest;
  int nfields = 0;
  if (st == GAAW_SUCCESS) {
    digest = GAAW_FIELD_DIGEST("d_outputs", gaaw_digest(d_outputs, sizeof(float) * (size_t)f->batch * m->seq_outputs));
    nfields = 1;
  }
  if (m->tp_size > 1) st = gaaw_agree(m->tp, st, "the output gradient of a tp group", &digest, nfields);
  gaaw_comm_t group = gaaw_model_work_group(m);
  if (group != m->tp) st = gaaw_agree(group, st, "gaaw_model_backward_from", NULL, 0);
  if (st == GAAW_SUCCESS) {
    st = gaaw_model_begin_pass(m, GAAW_PHASE_BACKWARD, 0, 0);
    if (st == GAAW_SUCCESS) st = gaaw_model_backward_range(m, f, 0, m->nlayers - 1, &dy, NULL);
    if (st == GAAW_SUCCESS) st = gaaw_model_end_pass(m, GAAW_PHASE_BACKWARD, 0, 0);
    if (st != GAAW_SUCCESS) st = gaaw_model_fail_together(m, st);
  }
  gaaw_act_free(m, &dy);
  drop_forward(m, f); /* as gaaw_model_backward: one backward per forward */
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
