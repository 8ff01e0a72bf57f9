/* ZeRO buckets: consecutive layers' parameters, sharded evenly over dp, and the
 * views of this rank's pieces. (The hooks that move them are in hooks.c.) */
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
  return opt->is.shard_state;
}

gaaw_tensor_t gaaw_zero_grad_piece(gaaw_optimizer_t opt, int b)
{
  const zero_bucket *k = &opt->buckets[b];
  gaaw_model_t m = opt->model;
  if (opt->is.shard_grads) return gaaw_zero_view(opt->shard_grads, opt->dtype, k->shard_at, k->piece);
  return gaaw_params_span(&m->params, 1, gaaw_zero_piece_lo(opt, k), k->piece);
}

gaaw_tensor_t gaaw_zero_param_piece(gaaw_optimizer_t opt, int b)
{
  const zero_bucket *k = &opt->buckets[b];
  gaaw_model_t m = opt->model;
  if (opt->is.shard_params) return gaaw_zero_view(opt->shard_params, opt->dtype, k->shard_at, k->piece);
  return gaaw_params_span(&m->params, 0, gaaw_zero_piece_lo(opt, k), k->piece);
}

static gaaw_status_t add_norm_segment(gaaw_optimizer_t opt, int b, int64_t piece_lo, int64_t piece_hi, int64_t lo,
                                      int64_t hi)
{
  lo = lo > piece_lo ? lo : piece_lo;
  hi = hi < piece_hi ? hi : piece_hi;
  if (lo >= hi) return GAAW_SUCCESS;
  zero_norm_segment *grown = realloc(opt->segments, (size_t)(opt->nsegments + 1) * sizeof *grown);
  if (!grown) GAAW_FAIL(opt->ctx, GAAW_ERR_NO_MEMORY, "cannot grow the norm segments");
  opt->segments = grown;
  grown[opt->nsegments++] = (zero_norm_segment){b, lo - piece_lo, hi - lo};
  return GAAW_SUCCESS;
}

/* The runs of bucket b's piece that count in the norm: parameters split over tp,
 * and replicated ones (or replicated blocks: kv heads over more tp ranks) on the
 * first rank holding them only (so that each is counted once). */
static gaaw_status_t plan_norm_segments(gaaw_optimizer_t opt, int b)
{
  gaaw_model_t m = opt->model;
  gaaw_context_t ctx = opt->ctx;
  const zero_bucket *k = &opt->buckets[b];
  int64_t piece_lo = gaaw_zero_piece_lo(opt, k), piece_hi = piece_lo + k->piece;
  for (int i = 0; i < m->params.count; i++) {
    const gaaw_param *p = &m->params.items[i];
    if (gaaw_zero_bucket_of_param(opt, p) != b || (p->split_axis < 0 && m->tp_rank != 0)) continue;
    if (p->tied_peer >= 0 && p->tied_peer < m->pp_rank) continue; /* the first stage's copy counts */
    if (!gaaw_param_has_replicas(p, m->tp_size)) {
      GAAW_CHECK(add_norm_segment(opt, b, piece_lo, piece_hi, p->offset, p->offset + p->local_numel));
      continue;
    }
    for (int j = 0; j < p->blocks.n; j++) {
      int64_t at, count;
      if (m->tp_rank % gaaw_param_block_replicas(p, j, m->tp_size)) continue;
      gaaw_param_block_span(p, j, &at, &count);
      GAAW_CHECK(add_norm_segment(opt, b, piece_lo, piece_hi, p->offset + at, p->offset + at + count));
    }
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

int gaaw_zero_bucket_of_param(gaaw_optimizer_t opt, const gaaw_param *p)
{
  const gaaw_layer *l = &opt->model->layers[p->owner];
  return p->offset >= l->expert_lo ? opt->expert_bucket_of_layer[p->owner] : opt->bucket_of_layer[p->owner];
}

int gaaw_zero_layer_owns(gaaw_optimizer_t opt, int i, int b)
{
  return b >= 0 && (opt->bucket_of_layer[i] == b || opt->expert_bucket_of_layer[i] == b);
}

/* A new bucket at flat element lo, first used by layer i. */
static zero_bucket *new_bucket(gaaw_optimizer_t opt, int i, int64_t lo, int expert)
{
  zero_bucket *k = &opt->buckets[opt->nbuckets++];
  k->layer = i;
  k->lo = lo;
  k->last_forward = k->last_backward = i;
  k->expert = expert;
  return k;
}

/* Consecutive layers of one model chunk share a bucket up to the tunable
 * zero_bucket_bytes (a layer larger than that is a bucket of its own). Layer
 * ranges are contiguous and each a multiple of dp, so every bucket is too, and it
 * lies in its chunk's flat buffers. A layer's experts split over ep (ep > 1) are a
 * bucket of their own, reduced and sharded over expert-dp. */
gaaw_status_t gaaw_zero_plan(gaaw_optimizer_t opt)
{
  gaaw_model_t m = opt->model;
  gaaw_context_t ctx = opt->ctx;
  int64_t limit = opt->bucket_bytes / (int64_t)gaaw_dtype_size(opt->dtype);
  opt->bucket_of_layer = malloc(sizeof(int) * (size_t)(2 * m->nlayers + 1));
  opt->expert_bucket_of_layer = opt->bucket_of_layer ? opt->bucket_of_layer + m->nlayers : NULL;
  opt->buckets = calloc((size_t)(2 * m->nlayers + 1), sizeof *opt->buckets);
  if (!opt->bucket_of_layer || !opt->buckets) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the buckets");
  zero_bucket *k = NULL;
  for (int i = 0; i < m->nlayers; i++) {
    gaaw_layer *l = &m->layers[i];
    opt->bucket_of_layer[i] = opt->expert_bucket_of_layer[i] = -1;
    int64_t len = l->expert_lo - l->param_lo, experts = l->param_hi - l->expert_lo;
    int chunk = gaaw_params_chunk_of(&m->params, l->param_lo);
    if (len > 0 && (!k || k->expert || k->len + len > limit || gaaw_params_chunk_of(&m->params, k->lo) != chunk))
      k = new_bucket(opt, i, l->param_lo, 0);
    if (len > 0) {
      k->len += len;
      opt->bucket_of_layer[i] = opt->nbuckets - 1;
    }
    if (experts > 0) {
      k = new_bucket(opt, i, l->expert_lo, 1);
      k->len = experts;
      opt->expert_bucket_of_layer[i] = opt->nbuckets - 1;
    }
    if (len > 0 || experts > 0) add_users(opt, &opt->buckets[opt->nbuckets - 1], i);
    if (len > 0 && experts > 0) add_users(opt, &opt->buckets[opt->nbuckets - 2], i);
  }
  for (int p = 0; p < m->params.count; p++)
    if (m->params.items[p].tied_peer >= 0) opt->buckets[gaaw_zero_bucket_of_param(opt, &m->params.items[p])].tied = 1;
  for (int b = 0; b < opt->nbuckets; b++) {
    k = &opt->buckets[b];
    k->piece = sharded(opt) ? k->len / gaaw_zero_size(opt, k) : k->len;
    k->shard_at = opt->shard_numel;
    opt->shard_numel += k->piece;
    GAAW_CHECK(plan_norm_segments(opt, b));
  }
  return GAAW_SUCCESS;
}
