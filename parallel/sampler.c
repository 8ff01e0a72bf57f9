/* Sample buffers (gaaw/sampler.h): a host array of capacity rows, each a sample's
 * inputs then its outputs, filled as a ring (newest) or by reservoir sampling, and
 * drawn from by a counter-based random stream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/comm.h"
#include "backends/runtime/abort.h"
#include "backends/runtime/error.h"
#include "gaaw/sampler.h"
#include "gaaw/topology.h"
#include "parallel/rng.h"
#include "parallel/sampler_impl.h"

struct gaaw_sampler_s {
  gaaw_context_t ctx;
  gaaw_sampler_config_t cfg;
  gaaw_comm_t mp, dp;        /* the model-parallel group (pushes), the dp group (exchanges) */
  int64_t width;             /* floats per row: inputs + outputs */
  float *rows;               /* (capacity, width) */
  int64_t held, pushed;      /* rows in use; rows ever pushed (the ring's and reservoir's counter) */
  uint64_t drawn;            /* rows drawn so far: the draw stream's counter */
  uint64_t draw_stream, keep_stream;
};

void gaaw_sampler_config_default(gaaw_sampler_config_t *cfg)
{
  *cfg = (gaaw_sampler_config_t){.inputs = 1, .outputs = 1, .capacity = 65536, .policy = GAAW_SAMPLER_NEWEST,
                                 .seed = 1337};
}

const char *gaaw_sampler_policy_name(gaaw_sampler_policy_t policy)
{
  switch (policy) {
  case GAAW_SAMPLER_NEWEST: return "newest";
  case GAAW_SAMPLER_RESERVOIR: return "reservoir";
  }
  return "invalid";
}

/* An index in [0, n) from a uniform in (0, 1). */
static int64_t pick(uint64_t stream, uint64_t counter, int64_t n)
{
  int64_t k = (int64_t)(gaaw_rng_uniform(stream, counter) * (double)n);
  return k < n ? k : n - 1;
}

/* Adds one sample (inputs x, outputs y), as the policy decides. */
static void keep(gaaw_sampler_t s, const float *x, const float *y)
{
  const gaaw_sampler_config_t *c = &s->cfg;
  int64_t slot;
  if (c->policy == GAAW_SAMPLER_NEWEST)
    slot = s->pushed % c->capacity;
  else if (s->pushed < c->capacity)
    slot = s->pushed;
  else /* algorithm R: the k-th sample replaces a random one with probability capacity / (k + 1) */
    slot = pick(s->keep_stream, (uint64_t)s->pushed, s->pushed + 1);
  s->pushed++;
  if (slot >= c->capacity) return;
  float *row = s->rows + slot * s->width;
  memcpy(row, x, sizeof(float) * (size_t)c->inputs);
  if (c->outputs) memcpy(row + c->inputs, y, sizeof(float) * (size_t)c->outputs);
  if (s->held < c->capacity) s->held++;
}

/* Rows of (inputs, outputs) packed one after the other, (n, width). */
static void keep_packed(gaaw_sampler_t s, int64_t n, const float *packed)
{
  for (int64_t i = 0; i < n; i++) keep(s, packed + i * s->width, packed + i * s->width + s->cfg.inputs);
}

/* Draws n rows into x (n, inputs) and y (n, outputs), or, when y is NULL and
 * packed is set, whole rows into x (n, width). */
static void draw_rows(gaaw_sampler_t s, int64_t n, float *x, float *y, int packed)
{
  const gaaw_sampler_config_t *c = &s->cfg;
  for (int64_t i = 0; i < n; i++) {
    const float *row = s->rows + pick(s->draw_stream, s->drawn + (uint64_t)i, s->held) * s->width;
    if (packed) {
      memcpy(x + i * s->width, row, sizeof(float) * (size_t)s->width);
      continue;
    }
    memcpy(x + i * c->inputs, row, sizeof(float) * (size_t)c->inputs);
    if (c->outputs) memcpy(y + i * c->outputs, row + c->inputs, sizeof(float) * (size_t)c->outputs);
  }
  s->drawn += (uint64_t)n;
}

/* ---------------------------------------------------------------- state (checkpoints) */

void gaaw_sampler_get_state(gaaw_sampler_t s, gaaw_sampler_state *st)
{
  int dp_rank = 0, dp_size = 1, mp_rank = 0;
  gaaw_topology_group_rank(s->ctx, GAAW_GROUP_DP, &dp_rank, &dp_size);
  gaaw_comm_rank(s->mp, &mp_rank);
  *st = (gaaw_sampler_state){s->cfg, s->width, s->held, s->pushed, s->drawn, s->rows, dp_rank, mp_rank == 0};
}

void gaaw_sampler_set_state(gaaw_sampler_t s, const float *rows, int64_t held, int64_t pushed, uint64_t drawn)
{
  if (held) memcpy(s->rows, rows, sizeof(float) * (size_t)(held * s->width));
  s->held = held, s->pushed = pushed, s->drawn = drawn;
}

/* ---------------------------------------------------------------- create */

static gaaw_status_t check_config(gaaw_context_t ctx, const gaaw_sampler_config_t *c)
{
  GAAW_ARG_NOT_NULL(ctx, c);
  GAAW_ARG_CHECK(ctx, c->inputs >= 1, "sampler inputs must be >= 1, got %d", c->inputs);
  GAAW_ARG_CHECK(ctx, c->outputs >= 0, "sampler outputs must be >= 0, got %d", c->outputs);
  GAAW_ARG_CHECK(ctx, c->capacity >= 1, "sampler capacity must be >= 1, got %lld", (long long)c->capacity);
  GAAW_ARG_CHECK(ctx, c->policy == GAAW_SAMPLER_NEWEST || c->policy == GAAW_SAMPLER_RESERVOIR,
                 "sampler policy %d is not a gaaw_sampler_policy_t", (int)c->policy);
  /* the buffer must be addressable: capacity * width floats */
  GAAW_ARG_CHECK(ctx, c->capacity <= (int64_t)(SIZE_MAX / sizeof(float) / 2) / ((int64_t)c->inputs + c->outputs),
                 "sampler capacity %lld x %d floats per sample does not fit in memory", (long long)c->capacity,
                 c->inputs + c->outputs);
  return GAAW_SUCCESS;
}

static gaaw_status_t sampler_new(gaaw_context_t ctx, const gaaw_sampler_config_t *c, gaaw_sampler_t *out)
{
  GAAW_CHECK(check_config(ctx, c));
  gaaw_sampler_t s = calloc(1, sizeof *s);
  if (!s) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "no memory for a sampler");
  *out = s;
  s->ctx = ctx;
  s->cfg = *c;
  s->width = (int64_t)c->inputs + c->outputs;
  s->rows = malloc(sizeof(float) * (size_t)(c->capacity * s->width));
  if (!s->rows)
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "no memory for a sampler of %lld samples of %lld floats",
              (long long)c->capacity, (long long)s->width);
  int dp_rank, dp_size;
  GAAW_CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_MP, &s->mp));
  GAAW_CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_DP, &s->dp));
  GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, &dp_size));
  /* the streams depend on the dp coordinate only: a replica's ranks draw alike */
  char name[64];
  snprintf(name, sizeof name, "sampler draws, dp rank %d", dp_rank);
  s->draw_stream = gaaw_rng_stream(c->seed, name);
  snprintf(name, sizeof name, "sampler reservoir, dp rank %d", dp_rank);
  s->keep_stream = gaaw_rng_stream(c->seed, name);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sampler_create(gaaw_context_t ctx, const gaaw_sampler_config_t *cfg, gaaw_sampler_t *sampler)
{
  if (!ctx) return GAAW_ERR_INVALID_ARG;
  GAAW_ARG_NOT_NULL(ctx, sampler);
  *sampler = NULL;
  gaaw_sampler_t s = NULL;
  gaaw_status_t st = sampler_new(ctx, cfg, &s);
  gaaw_field fields[5];
  int n = 0;
  if (st == GAAW_SUCCESS) {
    fields[n++] = GAAW_FIELD_INT("inputs", cfg->inputs);
    fields[n++] = GAAW_FIELD_INT("outputs", cfg->outputs);
    fields[n++] = GAAW_FIELD_INT("capacity", cfg->capacity);
    fields[n++] = GAAW_FIELD_NAMED("policy", cfg->policy, gaaw_sampler_policy_name(cfg->policy));
    fields[n++] = GAAW_FIELD_INT("seed", (int64_t)cfg->seed);
  }
  st = gaaw_agree_world(ctx, st, "the sampler configuration", fields, n);
  if (st != GAAW_SUCCESS) {
    gaaw_sampler_destroy(&s);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  *sampler = s;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sampler_destroy(gaaw_sampler_t *sampler)
{
  if (!sampler || !*sampler) return GAAW_SUCCESS;
  free((*sampler)->rows);
  free(*sampler);
  *sampler = NULL;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sampler_size(gaaw_sampler_t s, int64_t *held, int64_t *pushed)
{
  if (!s) return GAAW_ERR_INVALID_ARG;
  if (held) *held = s->held;
  if (pushed) *pushed = s->pushed;
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- push */

/* A push or exchange failed after the ranks agreed to run it (out of memory, a
 * failed transfer): the peers may be waiting in a collective this rank will not
 * join, so the context is aborted and they are told at once. */
static gaaw_status_t failed_after_agreement(gaaw_context_t ctx, gaaw_status_t st)
{
  gaaw_context_abort(ctx);
  return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
}

/* A host allocation of what that failed, reported. */
static gaaw_status_t no_memory(gaaw_context_t ctx, const char *what)
{
  GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "no memory for %s", what);
}

/* Host rows through a communicator: an f32 (or i32) device tensor of n elements
 * holding host, or read back into it. */
static gaaw_status_t to_device(gaaw_context_t ctx, gaaw_dtype_t dtype, int64_t n, const void *host, gaaw_tensor_t *t)
{
  GAAW_CHECK(gaaw_tensor_alloc(ctx, dtype, 1, &n, GAAW_MEM_COMMUNICATION, t));
  if (host) GAAW_CHECK(gaaw_buffer_write(ctx, t->buf, t->offset, host, (size_t)n * 4));
  return GAAW_SUCCESS;
}

/* The model-parallel group's rows: every rank's count, then every rank's rows padded
 * to the largest count, gathered and kept in group rank order. */
static gaaw_status_t push_group(gaaw_sampler_t s, int64_t n, const float *x, const float *y)
{
  gaaw_context_t ctx = s->ctx;
  int size = s->mp->size;
  int32_t mine = (int32_t)n, *counts = calloc((size_t)size, sizeof *counts);
  gaaw_tensor_t one = {0}, all = {0}, send = {0}, recv = {0};
  float *packed = NULL;
  gaaw_status_t st = counts ? GAAW_SUCCESS : no_memory(ctx, "the push's counts");
  if (st == GAAW_SUCCESS) st = to_device(ctx, GAAW_I32, 1, &mine, &one);
  if (st == GAAW_SUCCESS) st = to_device(ctx, GAAW_I32, size, NULL, &all);
  if (st == GAAW_SUCCESS) st = gaaw_comm_allgather(s->mp, &one, &all);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, all.buf, all.offset, counts, sizeof(int32_t) * (size_t)size);
  int64_t most = 0;
  for (int r = 0; st == GAAW_SUCCESS && r < size; r++) most = counts[r] > most ? counts[r] : most;
  if (st == GAAW_SUCCESS && most > 0) {
    /* packed: (size, most, width); this rank fills block rank */
    packed = calloc((size_t)(size * most * s->width), sizeof(float));
    if (!packed) st = no_memory(ctx, "the push's rows");
    for (int64_t i = 0; st == GAAW_SUCCESS && i < n; i++) {
      float *row = packed + (s->mp->rank * most + i) * s->width;
      memcpy(row, x + i * s->cfg.inputs, sizeof(float) * (size_t)s->cfg.inputs);
      if (s->cfg.outputs) memcpy(row + s->cfg.inputs, y + i * s->cfg.outputs, sizeof(float) * (size_t)s->cfg.outputs);
    }
    if (st == GAAW_SUCCESS) st = to_device(ctx, GAAW_F32, most * s->width, packed + s->mp->rank * most * s->width, &send);
    if (st == GAAW_SUCCESS) st = to_device(ctx, GAAW_F32, size * most * s->width, NULL, &recv);
    if (st == GAAW_SUCCESS) st = gaaw_comm_allgather(s->mp, &send, &recv);
    if (st == GAAW_SUCCESS)
      st = gaaw_buffer_read(ctx, recv.buf, recv.offset, packed, sizeof(float) * (size_t)(size * most * s->width));
    for (int r = 0; st == GAAW_SUCCESS && r < size; r++) keep_packed(s, counts[r], packed + r * most * s->width);
  }
  free(packed), free(counts);
  gaaw_buffer_free(ctx, &one.buf), gaaw_buffer_free(ctx, &all.buf);
  gaaw_buffer_free(ctx, &send.buf), gaaw_buffer_free(ctx, &recv.buf);
  if (st != GAAW_SUCCESS) return failed_after_agreement(ctx, st);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_push(gaaw_sampler_t s, int64_t n, const float *x, const float *y)
{
  gaaw_context_t ctx = s->ctx;
  GAAW_ARG_CHECK(ctx, n >= 0 && n <= INT32_MAX / s->width, "the samples pushed must number 0..%lld, got %lld",
                 (long long)(INT32_MAX / s->width), (long long)n);
  if (n == 0) return GAAW_SUCCESS;
  GAAW_ARG_CHECK(ctx, x != NULL, "the inputs of %lld samples must not be NULL", (long long)n);
  GAAW_ARG_CHECK(ctx, y != NULL || s->cfg.outputs == 0, "the outputs of %lld samples must not be NULL",
                 (long long)n);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sampler_push(gaaw_sampler_t s, int64_t n, const float *inputs, const float *outputs)
{
  if (!s) return GAAW_ERR_INVALID_ARG;
  gaaw_context_t ctx = s->ctx;
  GAAW_CHECK(gaaw_agree_world(ctx, check_push(s, n, inputs, outputs), "the samples pushed", NULL, 0));
  if (s->mp->size > 1) {
    GAAW_CHECK(push_group(s, n, inputs, outputs));
    return GAAW_SUCCESS;
  }
  for (int64_t i = 0; i < n; i++) keep(s, inputs + i * s->cfg.inputs, outputs ? outputs + i * s->cfg.outputs : NULL);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- draw, exchange */

gaaw_status_t gaaw_sampler_draw(gaaw_sampler_t s, int64_t batch, float *inputs, float *outputs)
{
  if (!s) return GAAW_ERR_INVALID_ARG;
  gaaw_context_t ctx = s->ctx;
  GAAW_ARG_CHECK(ctx, batch >= 1, "the batch drawn must be >= 1, got %lld", (long long)batch);
  GAAW_ARG_NOT_NULL(ctx, inputs);
  GAAW_ARG_CHECK(ctx, outputs != NULL || s->cfg.outputs == 0, "outputs must not be NULL");
  if (s->held == 0) GAAW_FAIL(ctx, GAAW_ERR_STATE, "the sampler holds no sample to draw from");
  draw_rows(s, batch, inputs, outputs, 0);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_exchange(gaaw_sampler_t s, int64_t n)
{
  gaaw_context_t ctx = s->ctx;
  int dp = s->dp->size;
  GAAW_ARG_CHECK(ctx, n >= 0 && n % dp == 0 && n <= INT32_MAX / s->width,
                 "the samples exchanged must be a multiple of dp (%d) in 0..%lld, got %lld", dp,
                 (long long)(INT32_MAX / s->width), (long long)n);
  if (n > 0 && dp > 1 && s->held == 0) GAAW_FAIL(ctx, GAAW_ERR_STATE, "the sampler holds no sample to exchange");
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sampler_exchange(gaaw_sampler_t s, int64_t n)
{
  if (!s) return GAAW_ERR_INVALID_ARG;
  gaaw_context_t ctx = s->ctx;
  gaaw_field field = GAAW_FIELD_INT("n", n);
  GAAW_CHECK(gaaw_agree_world(ctx, check_exchange(s, n), "the samples exchanged", &field, 1));
  if (n == 0 || s->dp->size == 1) return GAAW_SUCCESS;
  /* rows: (dp, n / dp, width), block j for dp rank j, then what came from each */
  float *rows = malloc(sizeof(float) * (size_t)(n * s->width));
  gaaw_tensor_t send = {0}, recv = {0};
  gaaw_status_t st = rows ? GAAW_SUCCESS : no_memory(ctx, "the exchange's rows");
  if (st == GAAW_SUCCESS) draw_rows(s, n, rows, NULL, 1);
  if (st == GAAW_SUCCESS) st = to_device(ctx, GAAW_F32, n * s->width, rows, &send);
  if (st == GAAW_SUCCESS) st = to_device(ctx, GAAW_F32, n * s->width, NULL, &recv);
  if (st == GAAW_SUCCESS) st = gaaw_comm_alltoall(s->dp, &send, &recv);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, recv.buf, recv.offset, rows, sizeof(float) * (size_t)(n * s->width));
  if (st == GAAW_SUCCESS) keep_packed(s, n, rows);
  free(rows);
  gaaw_buffer_free(ctx, &send.buf), gaaw_buffer_free(ctx, &recv.buf);
  if (st != GAAW_SUCCESS) return failed_after_agreement(ctx, st);
  return GAAW_SUCCESS;
}
