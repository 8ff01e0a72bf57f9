/* The host store (offload_optimizer=host, ZeRO-Offload): the shard's f32 master
 * weights and moments in host memory. A piece's update reads its reduced
 * gradient from the device, runs CPU Adam (zero/cpu_update.h) over it, and
 * writes the updated compute-dtype piece back, for the all-gather. The model's
 * f32 parameters keep their own master here too: the device then holds only the
 * compute copy. */
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/allocator.h"
#include "backends/runtime/context_impl.h"
#include "zero/zero_impl.h"

typedef struct {
  float *master, *m1, *m2;  /* (shard_numel) each; m2: AdamW only */
  void *grad, *out;         /* (largest piece) in the compute dtype: the gradient in, the weights out */
  gaaw_cpu_simd simd;
  size_t bytes;             /* all of the above */
} host_store;

static void *alloc_host(gaaw_optimizer_t opt, host_store *s, size_t bytes)
{
  s->bytes += bytes;
  return gaaw_host_alloc(opt->ctx, bytes); /* pinned on CUDA */
}

/* What host_create allocates: f32 master, m1 (and AdamW's m2) of the shard, and
 * two compute-dtype pieces, each in whole pages (gaaw_host_bytes); nothing on the
 * device. */
static size_t state_bytes(gaaw_optimizer_t opt, size_t *piece)
{
  *piece = gaaw_dtype_size(opt->dtype) * (size_t)gaaw_zero_largest_piece(opt);
  return sizeof(float) * (size_t)opt->shard_numel;
}

static void host_bytes(gaaw_optimizer_t opt, zero_store_bytes *out)
{
  size_t piece, state = state_bytes(opt, &piece);
  memset(out, 0, sizeof *out);
  out->host = (int64_t)(gaaw_host_bytes(state) * (1 + opt->is.moments) + 2 * gaaw_host_bytes(piece));
}

static gaaw_status_t host_create(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  host_store *s = calloc(1, sizeof *s);
  if (!s) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the host store");
  opt->store_state = s;
  s->simd = (gaaw_cpu_simd)gaaw_cpu_simd_parse(gaaw_ctx_string(ctx, "cpu_simd")); /* checked at create */
  size_t piece, state = state_bytes(opt, &piece);
  s->master = alloc_host(opt, s, state);
  s->m1 = alloc_host(opt, s, state);
  s->m2 = opt->is.moments == 2 ? alloc_host(opt, s, state) : NULL;
  s->grad = alloc_host(opt, s, piece);
  s->out = alloc_host(opt, s, piece);
  if (!s->master || !s->m1 || (opt->is.moments == 2 && !s->m2) || !s->grad || !s->out)
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "offload_optimizer=host: cannot allocate %zu bytes of host memory for the "
              "optimizer state of %lld parameters", s->bytes, (long long)opt->shard_numel);
  memset(s->m1, 0, state);
  if (s->m2) memset(s->m2, 0, state);
  for (int b = 0; b < opt->nbuckets; b++)
    GAAW_CHECK(gaaw_zero_param_piece_to_f32(opt, b, s->out, s->master + opt->buckets[b].shard_at));
  return GAAW_SUCCESS;
}

static gaaw_status_t host_update(gaaw_optimizer_t opt, int b, const gaaw_cpu_update_args *args)
{
  host_store *s = opt->store_state;
  const zero_bucket *k = &opt->buckets[b];
  if (!k->piece) return GAAW_SUCCESS;
  zero_cpu_piece p = {s->master + k->shard_at, s->m1 + k->shard_at, s->m2 ? s->m2 + k->shard_at : NULL,
                      s->grad, s->out, s->simd};
  return gaaw_zero_cpu_update_piece(opt, b, args, &p);
}

static gaaw_status_t host_read(gaaw_optimizer_t opt, int b, float *values, float *m1, float *m2)
{
  host_store *s = opt->store_state;
  const zero_bucket *k = &opt->buckets[b];
  size_t bytes = sizeof(float) * (size_t)k->piece;
  memcpy(values, s->master + k->shard_at, bytes);
  memcpy(m1, s->m1 + k->shard_at, bytes);
  if (m2) memcpy(m2, s->m2 + k->shard_at, bytes);
  return GAAW_SUCCESS;
}

static gaaw_status_t host_write(gaaw_optimizer_t opt, int b, const float *values, const float *m1, const float *m2)
{
  host_store *s = opt->store_state;
  const zero_bucket *k = &opt->buckets[b];
  size_t bytes = sizeof(float) * (size_t)k->piece;
  if (!k->piece) return GAAW_SUCCESS;
  memcpy(s->master + k->shard_at, values, bytes);
  memcpy(s->m1 + k->shard_at, m1, bytes);
  if (m2) memcpy(s->m2 + k->shard_at, m2, bytes);
  return gaaw_zero_param_piece_from_f32(opt, b, values, s->out);
}

static void host_destroy(gaaw_optimizer_t opt)
{
  host_store *s = opt->store_state;
  if (!s) return;
  void *all[] = {s->master, s->m1, s->m2, s->grad, s->out};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gaaw_host_free(opt->ctx, all[i]);
  free(s);
  opt->store_state = NULL;
}

const zero_store_ops gaaw_zero_store_host = {
  .name = "host",
  .create = host_create,
  .update = host_update,
  .read = host_read,
  .write = host_write,
  .destroy = host_destroy,
  .bytes = host_bytes,
};
