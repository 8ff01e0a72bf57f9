/* Sequential models: the checks of a spec list, the tensor-parallel pairing of its
 * linears (gaaw/model.h), and the layers it builds. One walk over the specs does
 * both the checks (build 0) and the building (build 1), so they cannot disagree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "parallel/sequential.h"

enum { L_W, L_B };                /* linear and norm parameters: weight, bias */
enum { MAX_DEPTH = GAAW_MODEL_MAX_SPECS };

static const char *spec_kind_name(gaaw_spec_kind_t kind)
{
  static const char *const names[GAAW_SPEC_KIND_COUNT] = {"linear", "activation", "layernorm",
                                                          "rmsnorm", "residual", "loss"};
  return (int)kind >= 0 && (int)kind < GAAW_SPEC_KIND_COUNT ? names[kind] : "invalid";
}

/* An open residual group: its last spec, its first layer, its input width. */
typedef struct {
  int last_spec, first_layer;
  int64_t width;
} open_group;

typedef struct {
  gaaw_model_t m;
  int build;
  int64_t width; /* global width of the stream */
  int split;     /* the stream is split over tp by columns (after a column-parallel linear) */
  int nlinear, nnorm, depth;
  open_group groups[MAX_DEPTH];
  gaaw_layer dry; /* what the check walk "adds" */
  int nlayers;    /* layers added so far */
  double cost[2 * GAAW_MODEL_MAX_SPECS]; /* check walk: each layer's work, for the pipeline stages */
} walk_state;

/* Whether an open group ends with spec j. */
static int group_ends_at(const walk_state *w, int j)
{
  for (int d = 0; d < w->depth; d++)
    if (w->groups[d].last_spec == j) return 1;
  return 0;
}

/* A layer's work: a linear's multiply-adds per row, else its width. */
static double layer_cost(const gaaw_layer *l)
{
  return l->ops == &gaaw_linear_ops ? (double)l->in_features * (double)l->out_features : (double)l->in_features;
}

static gaaw_status_t add_layer(walk_state *w, const gaaw_layer_ops *ops, gaaw_layer **l)
{
  if (!w->build) { /* the check walk builds nothing, but counts and costs the layers */
    if (w->nlayers > 0) w->cost[w->nlayers - 1] = layer_cost(&w->dry);
    memset(&w->dry, 0, sizeof w->dry);
    w->dry.ops = ops;
    w->nlayers++;
    *l = &w->dry;
    return GAAW_SUCCESS;
  }
  w->nlayers++;
  GAAW_CHECK_CTX(w->m->ctx, gaaw_model_add_layer(w->m, ops, l));
  return GAAW_SUCCESS;
}

#define SPEC_CHECK(cond, ...) GAAW_ARG_CHECK(ctx, cond, __VA_ARGS__)

/* specs[j] is a linear (fused with an activation at j + 1): its layer. */
static gaaw_status_t walk_linear(walk_state *w, int j, int *consumed)
{
  gaaw_model_t m = w->m;
  gaaw_context_t ctx = m->ctx;
  const gaaw_layer_spec_t *s = &m->specs[j];
  int n = m->nspecs, P = m->tp_size;
  SPEC_CHECK(s->size >= 1, "spec %d (linear): size (outputs) must be >= 1, got %d", j, s->size);
  int fused = j + 1 < n && m->specs[j + 1].kind == GAAW_SPEC_ACTIVATION && !group_ends_at(w, j);
  gaaw_activation_t act = fused ? m->specs[j + 1].activation : GAAW_ACT_NONE;
  SPEC_CHECK((int)act >= 0 && (int)act < GAAW_ACT_COUNT, "spec %d (activation): activation %d is not a gaaw_activation_t",
             j + 1, (int)act);
  int end = fused ? j + 1 : j;
  int next_linear = end + 1 < n && m->specs[end + 1].kind == GAAW_SPEC_LINEAR && !group_ends_at(w, end);
  int row = w->split, blocks = act == GAAW_ACT_SWIGLU ? 2 : 1;
  if (!row)
    SPEC_CHECK(s->size % P == 0, "spec %d (linear): size %d is the output of a column-parallel linear and must be "
               "divisible by tp (%d)", j, s->size, P);
  gaaw_layer *l;
  GAAW_CHECK(add_layer(w, &gaaw_linear_ops, &l));
  int64_t in = w->width, out = s->size;
  l->column_parallel = !row;
  l->gathers = !row && !next_linear && P > 1;
  l->activation = act;
  l->in_features = row ? in / P : in;
  l->out_features = row ? out : out / P;
  if (w->build) {
    char name[GAAW_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "fc.%d.weight", w->nlinear);
    GAAW_CHECK(gaaw_model_add_param(m, l, L_W, name, 2, blocks * out, in, row ? 1 : 0, row ? 1 : blocks,
                                    GAAW_INIT_NORMAL, 1.0f / sqrtf((float)in)));
    snprintf(name, sizeof name, "fc.%d.bias", w->nlinear);
    GAAW_CHECK(gaaw_model_add_param(m, l, L_B, name, 1, blocks * out, 0, row ? -1 : 0, row ? 1 : blocks,
                                    GAAW_INIT_CONSTANT, 0.0f));
  }
  w->nlinear++;
  w->width = out;
  w->split = !row && next_linear; /* a pair's stream stays split until its row-parallel half */
  *consumed = fused ? 2 : 1;
  return GAAW_SUCCESS;
}

/* A standalone activation, norm, residual start or loss at spec j. */
static gaaw_status_t walk_other(walk_state *w, int j)
{
  gaaw_model_t m = w->m;
  gaaw_context_t ctx = m->ctx;
  const gaaw_layer_spec_t *s = &m->specs[j];
  int n = m->nspecs;
  gaaw_layer *l;
  switch (s->kind) {
  case GAAW_SPEC_ACTIVATION:
    SPEC_CHECK((int)s->activation >= 0 && (int)s->activation < GAAW_ACT_COUNT,
               "spec %d (activation): activation %d is not a gaaw_activation_t", j, (int)s->activation);
    SPEC_CHECK(s->activation != GAAW_ACT_SWIGLU || w->width % 2 == 0,
               "spec %d (activation swiglu): the width %lld must be even (SwiGLU halves it)", j, (long long)w->width);
    GAAW_CHECK(add_layer(w, &gaaw_activation_ops, &l));
    l->activation = s->activation;
    l->in_features = w->width;
    if (s->activation == GAAW_ACT_SWIGLU) w->width /= 2;
    l->out_features = w->width;
    return GAAW_SUCCESS;
  case GAAW_SPEC_LAYERNORM:
  case GAAW_SPEC_RMSNORM: {
    gaaw_norm_t kind = s->kind == GAAW_SPEC_LAYERNORM ? GAAW_NORM_LAYERNORM : GAAW_NORM_RMSNORM;
    GAAW_CHECK(add_layer(w, &gaaw_norm_ops[kind], &l));
    l->norm = kind;
    l->in_features = l->out_features = w->width;
    if (w->build) {
      char name[GAAW_PARAM_NAME_MAX];
      snprintf(name, sizeof name, "norm.%d.weight", w->nnorm);
      GAAW_CHECK(gaaw_model_add_param(m, l, L_W, name, 1, w->width, 0, -1, 1, GAAW_INIT_CONSTANT, 1.0f));
      if (kind == GAAW_NORM_LAYERNORM) {
        snprintf(name, sizeof name, "norm.%d.bias", w->nnorm);
        GAAW_CHECK(gaaw_model_add_param(m, l, L_B, name, 1, w->width, 0, -1, 1, GAAW_INIT_CONSTANT, 0.0f));
      }
    }
    w->nnorm++;
    return GAAW_SUCCESS;
  }
  case GAAW_SPEC_RESIDUAL:
    SPEC_CHECK(s->size >= 1 && j + s->size < n, "spec %d (residual): size %d must be in 1..%d (the specs after it)",
               j, s->size, n - 1 - j);
    for (int d = 0; d < w->depth; d++)
      SPEC_CHECK(j + s->size <= w->groups[d].last_spec,
                 "spec %d (residual): its group (specs %d..%d) overlaps the end of the group of specs ..%d", j, j + 1,
                 j + s->size, w->groups[d].last_spec);
    GAAW_CHECK(add_layer(w, &gaaw_residual_ops, &l));
    l->keeps_input = 1;
    l->in_features = l->out_features = w->width;
    w->groups[w->depth++] = (open_group){j + s->size, l->index, w->width};
    return GAAW_SUCCESS;
  case GAAW_SPEC_LOSS:
    SPEC_CHECK(j == n - 1, "spec %d (loss): the loss must be the last spec (there are %d)", j, n);
    SPEC_CHECK((int)s->loss >= 0 && (int)s->loss < GAAW_LOSS_COUNT, "spec %d (loss): loss %d is not a gaaw_loss_t", j,
               (int)s->loss);
    SPEC_CHECK(s->huber_delta >= 0.0f && isfinite(s->huber_delta),
               "spec %d (loss): huber_delta must be finite and > 0 (0 means the default 1), got %g", j,
               (double)s->huber_delta);
    GAAW_CHECK(add_layer(w, &gaaw_regression_loss_ops[s->loss], &l));
    l->loss_delta = s->huber_delta > 0.0f ? s->huber_delta : 1.0f;
    l->in_features = l->out_features = w->width;
    return GAAW_SUCCESS;
  default: break;
  }
  GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "spec %d: kind %d is not a gaaw_spec_kind_t", j, (int)s->kind);
}

/* Closes every group that ends with spec j: its residual add. */
static gaaw_status_t close_groups(walk_state *w, int j)
{
  gaaw_context_t ctx = w->m->ctx;
  while (w->depth > 0 && w->groups[w->depth - 1].last_spec == j) {
    open_group *g = &w->groups[--w->depth];
    SPEC_CHECK(w->width == g->width, "the residual group ending at spec %d maps width %lld to %lld; it must keep it", j,
               (long long)g->width, (long long)w->width);
    gaaw_layer *l;
    GAAW_CHECK(add_layer(w, &gaaw_residual_add_ops, &l));
    l->residual_from = g->first_layer;
    l->in_features = l->out_features = w->width;
  }
  return GAAW_SUCCESS;
}

/* Checks the specs (build 0) or adds their layers (build 1); the check walk leaves
 * the layer count and costs in *w. */
static gaaw_status_t walk(gaaw_model_t m, int build, walk_state *out)
{
  gaaw_context_t ctx = m->ctx;
  int n = m->nspecs;
  SPEC_CHECK(n >= 1 && n <= GAAW_MODEL_MAX_SPECS, "nspecs must be in 1..%d, got %d", GAAW_MODEL_MAX_SPECS, n);
  SPEC_CHECK(m->seq_inputs >= 1, "inputs must be >= 1, got %d", m->seq_inputs);
  SPEC_CHECK(m->specs[n - 1].kind == GAAW_SPEC_LOSS, "the last spec (%d, %s) must be the loss", n - 1,
             spec_kind_name(m->specs[n - 1].kind));
  walk_state w = {.m = m, .build = build, .width = m->seq_inputs};
  for (int j = 0; j < n;) {
    int consumed = 1;
    SPEC_CHECK(!w.split || m->specs[j].kind == GAAW_SPEC_LINEAR, "internal: a split stream must reach a linear");
    if (m->specs[j].kind == GAAW_SPEC_LINEAR)
      GAAW_CHECK(walk_linear(&w, j, &consumed));
    else
      GAAW_CHECK(walk_other(&w, j));
    for (int k = j; k < j + consumed; k++) GAAW_CHECK(close_groups(&w, k));
    j += consumed;
  }
  SPEC_CHECK(w.depth == 0, "internal: a residual group is left open");
  m->seq_outputs = (int)w.width;
  if (!build && w.nlayers > 0) w.cost[w.nlayers - 1] = layer_cost(&w.dry);
  if (out) *out = w;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_seq_check(gaaw_model_t m)
{
  GAAW_CHECK_CTX(m->ctx, walk(m, 0, NULL));
  return GAAW_SUCCESS;
}

/* With pp > 1 a residual group must stay on one stage (its add reads the group's
 * input, which another stage does not have). */
static gaaw_status_t check_groups_in_stages(gaaw_model_t m)
{
  gaaw_context_t ctx = m->ctx;
  for (int i = 0; i < m->nlayers; i++) {
    const gaaw_layer *l = &m->layers[i];
    if (l->ops != &gaaw_residual_add_ops) continue;
    int from = gaaw_stages_of_layer(&m->stages, l->residual_from), to = gaaw_stages_of_layer(&m->stages, i);
    GAAW_ARG_CHECK(ctx, from == to,
                   "the residual group of layers %d..%d spans pipeline stages %d and %d; choose pp_layout so that "
                   "each group stays on one stage", l->residual_from, i, from, to);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_seq_build(gaaw_model_t m, uint64_t seed)
{
  gaaw_context_t ctx = m->ctx;
  /* pipeline stages over the layers, balanced by their work; the loss on the last */
  walk_state *plan = malloc(sizeof *plan);
  if (!plan) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "no memory to plan the stages");
  gaaw_status_t st = walk(m, 0, plan);
  if (st == GAAW_SUCCESS) st = gaaw_model_plan_stages(m, plan->nlayers, 0, 1, plan->cost);
  free(plan);
  GAAW_CHECK(st);
  GAAW_CHECK(walk(m, 1, NULL));
  GAAW_CHECK(check_groups_in_stages(m));
  GAAW_CHECK(gaaw_model_finish(m, seed));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- gaaw_model_create */

typedef struct {
  int inputs, nspecs;
  const gaaw_layer_spec_t *specs;
  uint64_t seed;
  gaaw_dtype_t dtype;
} sequential_args;

/* The specs as integers (their padding bytes are not data), digested. */
static uint64_t specs_digest(const gaaw_layer_spec_t *specs, int n)
{
  int64_t v[GAAW_MODEL_MAX_SPECS * 5];
  int k = 0;
  for (int i = 0; i < n && i < GAAW_MODEL_MAX_SPECS; i++) {
    uint32_t delta;
    memcpy(&delta, &specs[i].huber_delta, sizeof delta);
    v[k++] = specs[i].kind, v[k++] = specs[i].size, v[k++] = specs[i].activation, v[k++] = specs[i].loss;
    v[k++] = delta;
  }
  return gaaw_digest(v, sizeof(int64_t) * (size_t)k);
}

static int sequential_fields(const void *cfg, gaaw_field *f)
{
  const sequential_args *a = cfg;
  int n = 0;
  f[n++] = GAAW_FIELD_INT("inputs", a->inputs);
  f[n++] = GAAW_FIELD_INT("nspecs", a->nspecs);
  f[n++] = GAAW_FIELD_DIGEST("specs", specs_digest(a->specs, a->nspecs));
  f[n++] = GAAW_FIELD_INT("seed", (int64_t)a->seed);
  f[n++] = GAAW_FIELD_NAMED("dtype", a->dtype, gaaw_dtype_name(a->dtype));
  return n;
}

static gaaw_dtype_t sequential_dtype(const void *cfg)
{
  return ((const sequential_args *)cfg)->dtype;
}

gaaw_status_t gaaw_seq_adopt_specs(gaaw_model_t m, int inputs, const gaaw_layer_spec_t *specs, int nspecs)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_CHECK(ctx, specs != NULL, "specs must not be NULL");
  GAAW_ARG_CHECK(ctx, nspecs >= 1 && nspecs <= GAAW_MODEL_MAX_SPECS, "nspecs must be in 1..%d, got %d",
                 GAAW_MODEL_MAX_SPECS, nspecs);
  m->specs = malloc(sizeof *specs * (size_t)nspecs);
  if (!m->specs) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy %d specs", nspecs);
  memcpy(m->specs, specs, sizeof *specs * (size_t)nspecs);
  m->nspecs = nspecs;
  m->seq_inputs = inputs;
  GAAW_CHECK(gaaw_seq_check(m));
  return GAAW_SUCCESS;
}

static gaaw_status_t sequential_adopt(gaaw_model_t m, const void *cfg)
{
  const sequential_args *a = cfg;
  GAAW_CHECK_CTX(m->ctx, gaaw_seq_adopt_specs(m, a->inputs, a->specs, a->nspecs));
  m->seq_seed = a->seed;
  return GAAW_SUCCESS;
}

static gaaw_status_t sequential_build(gaaw_model_t m)
{
  GAAW_CHECK_CTX(m->ctx, gaaw_seq_build(m, m->seq_seed));
  return GAAW_SUCCESS;
}

static const gaaw_model_builder sequential_builder = {&gaaw_seq_kind, "sequential model", sequential_dtype,
                                                      sequential_adopt, sequential_fields, sequential_build};

gaaw_status_t gaaw_model_create(gaaw_context_t ctx, int inputs, const gaaw_layer_spec_t *specs, int nspecs,
                                uint64_t seed, gaaw_dtype_t dtype, gaaw_model_t *model)
{
  sequential_args a = {inputs, nspecs, specs, seed, dtype};
  GAAW_CHECK_CTX(ctx, gaaw_model_build(ctx, &sequential_builder, &a, model));
  return GAAW_SUCCESS;
}
