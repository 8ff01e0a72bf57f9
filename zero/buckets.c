/* ZeRO buckets: one per layer with parameters, sharded evenly over dp; and the
 * model hooks through which stages 2 and 3 keep only what a layer needs. */
#include <stdlib.h>
#include <string.h>

#include "zero/zero_impl.h"

gaaw_tensor_t gaaw_zero_view(gaaw_buffer_t buf, gaaw_dtype_t dtype, int64_t at, int64_t count)
{
  gaaw_tensor_t t;
  memset(&t, 0, sizeof t);
  t.buf = buf;
  t.offset = (size_t)at * gaaw_dtype_size(dtype);
  t.dtype = dtype;
  t.ndim = 1;
  t.shape[0] = count;
  return t;
}

/* Stage 0 keeps whole buckets; the others split them into dp pieces. */
static int sharded(const gaaw_optimizer_t opt)
{
  return opt->cfg.zero_stage > 0;
}

gaaw_tensor_t gaaw_zero_grad_piece(gaaw_optimizer_t opt, int b)
{
  const zero_bucket *k = &opt->buckets[b];
  gaaw_model_t m = opt->model;
  if (opt->cfg.zero_stage >= 2) return gaaw_zero_view(opt->shard_grads, opt->dtype, k->shard_at, k->piece);
  return gaaw_zero_view(m->params.grads, opt->dtype, k->lo + (sharded(opt) ? opt->dp_rank * k->piece : 0), k->piece);
}

gaaw_tensor_t gaaw_zero_param_piece(gaaw_optimizer_t opt, int b)
{
  const zero_bucket *k = &opt->buckets[b];
  gaaw_model_t m = opt->model;
  if (opt->cfg.zero_stage == 3) return gaaw_zero_view(opt->shard_params, opt->dtype, k->shard_at, k->piece);
  return gaaw_zero_view(m->params.values, opt->dtype, k->lo + (sharded(opt) ? opt->dp_rank * k->piece : 0), k->piece);
}

/* The runs of bucket b's piece that count in the norm: parameters split over tp,
 * and replicated ones on tp rank 0 only (so that each is counted once). */
static gaaw_status_t plan_norm_segments(gaaw_optimizer_t opt, int b)
{
  gaaw_model_t m = opt->model;
  gaaw_context_t ctx = opt->ctx;
  const zero_bucket *k = &opt->buckets[b];
  int64_t piece_lo = k->lo + (sharded(opt) ? opt->dp_rank * k->piece : 0), piece_hi = piece_lo + k->piece;
  for (int i = 0; i < m->params.count; i++) {
    const gaaw_param *p = &m->params.items[i];
    if (opt->bucket_of_layer[p->owner] != b || (p->split_axis < 0 && m->tp_rank != 0)) continue;
    int64_t lo = p->offset > piece_lo ? p->offset : piece_lo;
    int64_t hi = p->offset + p->local_numel < piece_hi ? p->offset + p->local_numel : piece_hi;
    if (lo >= hi) continue;
    zero_norm_segment *grown = realloc(opt->segments, (size_t)(opt->nsegments + 1) * sizeof *grown);
    if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot grow the norm segments");
    opt->segments = grown;
    grown[opt->nsegments++] = (zero_norm_segment){b, lo - piece_lo, hi - lo};
  }
  return GAAW_SUCCESS;
}

/* Widens bucket b's use range by every user of the parameters of layer i. */
static void add_users(gaaw_optimizer_t opt, zero_bucket *k, int i)
{
  gaaw_model_t m = opt->model;
  int users[256];
  for (int p = 0; p < m->params.count; p++) {
    if (m->params.items[p].owner != i) continue;
    int n = gaaw_model_param_users(m, p, users, 256);
    for (int u = 0; u < n && u < 256; u++) {
      if (users[u] > k->last_forward) k->last_forward = users[u];
      if (users[u] < k->last_backward) k->last_backward = users[u];
    }
  }
}

/* Consecutive layers share a bucket up to the tunable zero_bucket_bytes (a layer
 * larger than that is a bucket of its own). Layer ranges are contiguous and each a
 * multiple of dp, so every bucket is too. */
gaaw_status_t gaaw_zero_plan(gaaw_optimizer_t opt)
{
  gaaw_model_t m = opt->model;
  gaaw_context_t ctx = opt->ctx;
  int64_t limit = gaaw_ctx_int(ctx, "zero_bucket_bytes") / (int64_t)gaaw_dtype_size(opt->dtype);
  opt->bucket_of_layer = malloc(sizeof(int) * (size_t)m->nlayers);
  opt->buckets = calloc((size_t)m->nlayers, sizeof *opt->buckets);
  if (!opt->bucket_of_layer || !opt->buckets) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the buckets");
  zero_bucket *k = NULL;
  for (int i = 0; i < m->nlayers; i++) {
    gaaw_layer *l = &m->layers[i];
    opt->bucket_of_layer[i] = -1;
    int64_t len = l->param_hi - l->param_lo;
    if (len == 0) continue;
    if (!k || k->len + len > limit) {
      k = &opt->buckets[opt->nbuckets++];
      k->layer = i;
      k->lo = l->param_lo;
      k->last_forward = k->last_backward = i;
    }
    k->len += len;
    add_users(opt, k, i);
    opt->bucket_of_layer[i] = opt->nbuckets - 1;
  }
  for (int b = 0; b < opt->nbuckets; b++) {
    k = &opt->buckets[b];
    k->piece = sharded(opt) ? k->len / opt->dp_size : k->len;
    k->shard_at = opt->shard_numel;
    opt->shard_numel += k->piece;
    GAAW_CHECK(plan_norm_segments(opt, b));
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- stage 3: parameters */

/* Points the views of bucket b's parameters at buf (NULL: unbound). */
static void bind_bucket(gaaw_optimizer_t opt, int b, int grads, gaaw_buffer_t buf)
{
  gaaw_model_t m = opt->model;
  const zero_bucket *k = &opt->buckets[b];
  for (int i = 0; i < m->params.count; i++) {
    gaaw_param *p = &m->params.items[i];
    if (opt->bucket_of_layer[p->owner] == b) gaaw_param_bind(p, grads, buf, buf ? p->offset - k->lo : 0, opt->dtype);
  }
}

/* All-gathers bucket b's parameters from the dp shards (in place in a whole-bucket
 * buffer) and binds the parameter views to it. */
static gaaw_status_t gather_bucket(gaaw_optimizer_t opt, int b)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (k->whole_params) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, (size_t)k->len * gaaw_dtype_size(opt->dtype), GAAW_MEM_PARAMS, &k->whole_params));
  gaaw_tensor_t whole = gaaw_zero_view(k->whole_params, opt->dtype, 0, k->len);
  gaaw_tensor_t mine = gaaw_zero_view(k->whole_params, opt->dtype, opt->dp_rank * k->piece, k->piece);
  gaaw_tensor_t shard = gaaw_zero_param_piece(opt, b);
  GAAW_CHECK(gaaw_cast(ctx, &shard, &mine));
  GAAW_CHECK(gaaw_comm_allgather(opt->dp, &mine, &whole));
  bind_bucket(opt, b, 0, k->whole_params);
  return GAAW_SUCCESS;
}

/* Frees bucket b's gathered parameters; with keep, this rank's piece is first
 * copied back to the shard (after gaaw_model_set_param). */
static gaaw_status_t release_bucket(gaaw_optimizer_t opt, int b, int keep)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (!k->whole_params) return GAAW_SUCCESS;
  if (keep) {
    gaaw_tensor_t mine = gaaw_zero_view(k->whole_params, opt->dtype, opt->dp_rank * k->piece, k->piece);
    gaaw_tensor_t shard = gaaw_zero_param_piece(opt, b);
    GAAW_CHECK(gaaw_cast(ctx, &mine, &shard));
  }
  bind_bucket(opt, b, 0, NULL);
  GAAW_CHECK(gaaw_buffer_free(ctx, &k->whole_params));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- stages 2, 3: gradients */

static gaaw_status_t open_grad_bucket(gaaw_optimizer_t opt, int b)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (k->whole_grads) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, (size_t)k->len * gaaw_dtype_size(opt->dtype), GAAW_MEM_GRADS, &k->whole_grads));
  gaaw_tensor_t whole = gaaw_zero_view(k->whole_grads, opt->dtype, 0, k->len);
  GAAW_CHECK(gaaw_fill(ctx, &whole, 0.0f));
  bind_bucket(opt, b, 1, k->whole_grads);
  return GAAW_SUCCESS;
}

/* Backward is done with bucket b: reduce-scatter it over dp (in place: this rank's
 * piece of the sum lands on its own piece), add the piece to the shard's gradient
 * (microbatches accumulate), and free the bucket. */
static gaaw_status_t close_grad_bucket(gaaw_optimizer_t opt, int b)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (!k->whole_grads) return GAAW_SUCCESS;
  gaaw_tensor_t whole = gaaw_zero_view(k->whole_grads, opt->dtype, 0, k->len);
  gaaw_tensor_t mine = gaaw_zero_view(k->whole_grads, opt->dtype, opt->dp_rank * k->piece, k->piece);
  gaaw_tensor_t shard = gaaw_zero_grad_piece(opt, b);
  if (opt->dp_size > 1) GAAW_CHECK(gaaw_comm_reduce_scatter(opt->dp, &whole, &mine, GAAW_SUM));
  GAAW_CHECK(gaaw_axpy(ctx, 1.0f, &mine, &shard));
  bind_bucket(opt, b, 1, NULL);
  GAAW_CHECK(gaaw_buffer_free(ctx, &k->whole_grads));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- hooks */

/* The buckets layer i reads: its own and those of parameters it shares (tied head). */
static int buckets_of_layer(gaaw_optimizer_t opt, int i, int *out)
{
  gaaw_model_t m = opt->model;
  int n = 0;
  for (int j = 0; j < GAAW_LAYER_MAX_PARAMS; j++) {
    int p = m->layers[i].params[j];
    if (p < 0) continue;
    int b = opt->bucket_of_layer[m->params.items[p].owner];
    int seen = 0;
    for (int q = 0; q < n; q++) seen |= out[q] == b;
    if (!seen && b >= 0) out[n++] = b;
  }
  return n;
}

static gaaw_status_t before_layer(gaaw_model_t m, int i, gaaw_phase phase, void *user)
{
  gaaw_optimizer_t opt = user;
  gaaw_context_t ctx = opt->ctx;
  int used[GAAW_LAYER_MAX_PARAMS], n;
  if (phase == GAAW_PHASE_ACCESS) { /* one parameter of layer i is read or written */
    used[0] = opt->bucket_of_layer[i];
    n = used[0] >= 0;
  } else {
    n = buckets_of_layer(opt, i, used);
  }
  for (int q = 0; q < n; q++) {
    if (opt->cfg.zero_stage == 3) GAAW_CHECK(gather_bucket(opt, used[q]));
    if (phase == GAAW_PHASE_BACKWARD && opt->cfg.zero_stage >= 2) GAAW_CHECK(open_grad_bucket(opt, used[q]));
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t after_layer(gaaw_model_t m, int i, gaaw_phase phase, void *user)
{
  gaaw_optimizer_t opt = user;
  gaaw_context_t ctx = opt->ctx;
  for (int b = 0; b < opt->nbuckets; b++) {
    zero_bucket *k = &opt->buckets[b];
    int done = phase == GAAW_PHASE_FORWARD    ? k->last_forward == i
               : phase == GAAW_PHASE_BACKWARD ? k->last_backward == i
                                              : opt->bucket_of_layer[i] == b;
    if (!done) continue;
    if (phase == GAAW_PHASE_BACKWARD && opt->cfg.zero_stage >= 2) GAAW_CHECK(close_grad_bucket(opt, b));
    if (opt->cfg.zero_stage == 3) GAAW_CHECK(release_bucket(opt, b, phase == GAAW_PHASE_ACCESS));
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_zero_attach(gaaw_optimizer_t opt)
{
  gaaw_model_t m = opt->model;
  gaaw_context_t ctx = opt->ctx;
  size_t es = gaaw_dtype_size(opt->dtype), shard_bytes = (size_t)(opt->shard_numel ? opt->shard_numel : 1) * es;
  if (opt->cfg.zero_stage >= 2) {
    GAAW_CHECK(gaaw_buffer_alloc(ctx, shard_bytes, GAAW_MEM_GRADS, &opt->shard_grads));
    gaaw_tensor_t all = gaaw_zero_view(opt->shard_grads, opt->dtype, 0, opt->shard_numel);
    GAAW_CHECK(gaaw_fill(ctx, &all, 0.0f));
    for (int i = 0; i < m->params.count; i++) gaaw_param_bind(&m->params.items[i], 1, NULL, 0, opt->dtype);
    GAAW_CHECK(gaaw_buffer_free(ctx, &m->params.grads));
  }
  if (opt->cfg.zero_stage == 3) {
    GAAW_CHECK(gaaw_buffer_alloc(ctx, shard_bytes, GAAW_MEM_PARAMS, &opt->shard_params));
    for (int b = 0; b < opt->nbuckets; b++) {
      const zero_bucket *k = &opt->buckets[b];
      gaaw_tensor_t from = gaaw_zero_view(m->params.values, opt->dtype, k->lo + opt->dp_rank * k->piece, k->piece);
      gaaw_tensor_t to = gaaw_zero_param_piece(opt, b);
      GAAW_CHECK(gaaw_cast(ctx, &from, &to));
    }
    for (int i = 0; i < m->params.count; i++) gaaw_param_bind(&m->params.items[i], 0, NULL, 0, opt->dtype);
    GAAW_CHECK(gaaw_buffer_free(ctx, &m->params.values));
  }
  if (opt->cfg.zero_stage >= 2) {
    gaaw_model_hooks hooks = {opt, before_layer, after_layer};
    gaaw_model_set_hooks(m, &hooks);
  }
  return GAAW_SUCCESS;
}

void gaaw_zero_detach(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_model_set_hooks(opt->model, NULL);
  for (int b = 0; b < opt->nbuckets; b++) {
    gaaw_buffer_free(ctx, &opt->buckets[b].whole_params);
    gaaw_buffer_free(ctx, &opt->buckets[b].whole_grads);
  }
}
