/* The device store: the shard's optimizer state in backend buffers, updated by
 * the backend's kernels (zero/store.h). */
#include <string.h>

#include "zero/zero_impl.h"

/* The state's buffers: AdamW m and v (SGD: the momentum), and f32 master weights
 * unless the model is f32; n of them into state (when given), each of *bytes. */
static int state_buffers(gaaw_optimizer_t opt, gaaw_buffer_t **state, size_t *bytes)
{
  int count = 0;
  *bytes = (size_t)(opt->shard_numel ? opt->shard_numel : 1) * sizeof(float);
  if (state) state[count] = &opt->moment1;
  count++;
  if (opt->is.moments == 2) {
    if (state) state[count] = &opt->moment2;
    count++;
  }
  if (opt->dtype != GAAW_F32) {
    if (state) state[count] = &opt->master;
    count++;
  }
  return count;
}

static gaaw_status_t alloc_state(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_buffer_t *state[3];
  size_t bytes;
  int count = state_buffers(opt, state, &bytes);
  for (int i = 0; i < count; i++) {
    GAAW_CHECK(gaaw_buffer_alloc(ctx, bytes, GAAW_MEM_OPTIMIZER, state[i]));
    gaaw_tensor_t all = gaaw_zero_view(*state[i], GAAW_F32, 0, opt->shard_numel);
    GAAW_CHECK(gaaw_fill(ctx, &all, 0.0f));
  }
  return GAAW_SUCCESS;
}

/* The state's buffers; SGD's update casts each piece's gradient into an f32
 * workspace (sgd_update), the largest piece's at most. */
static void device_bytes(gaaw_optimizer_t opt, zero_store_bytes *out)
{
  size_t bytes;
  memset(out, 0, sizeof *out);
  out->ndevice = state_buffers(opt, NULL, &bytes);
  for (int i = 0; i < out->ndevice; i++) out->device[i] = (int64_t)bytes;
  for (int b = 0; opt->is.moments == 1 && b < opt->nbuckets; b++) { /* SGD's gradient copy */
    int64_t piece = opt->buckets[b].piece * (int64_t)sizeof(float);
    if (piece < 1) piece = 1;
    if (piece > out->update_workspace) out->update_workspace = piece;
  }
}

static gaaw_status_t device_create(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  GAAW_CHECK(alloc_state(opt));
  for (int b = 0; opt->master && b < opt->nbuckets; b++) {
    const zero_bucket *k = &opt->buckets[b];
    gaaw_tensor_t params = gaaw_zero_param_piece(opt, b);
    gaaw_tensor_t master = gaaw_zero_view(opt->master, GAAW_F32, k->shard_at, k->piece);
    GAAW_CHECK(gaaw_cast(ctx, &params, &master));
  }
  return GAAW_SUCCESS;
}

/* SGD with momentum on an f32 shard from kernels: g = grad * scale + wd * p;
 * mom = momentum * mom + g; p -= lr * mom. */
static gaaw_status_t sgd_update(gaaw_optimizer_t opt, const gaaw_tensor_t *grad, gaaw_tensor_t *p, gaaw_tensor_t *mom,
                                const gaaw_cpu_update_args *a)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_tensor_t g;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, grad->shape, GAAW_MEM_WORKSPACE, &g));
  gaaw_status_t st = gaaw_cast(ctx, grad, &g);
  if (st == GAAW_SUCCESS) st = gaaw_scale(ctx, &g, a->adam.grad_scale);
  if (st == GAAW_SUCCESS && a->adam.weight_decay != 0) st = gaaw_axpy(ctx, a->adam.weight_decay, p, &g);
  if (st == GAAW_SUCCESS) st = gaaw_scale(ctx, mom, a->momentum);
  if (st == GAAW_SUCCESS) st = gaaw_axpy(ctx, 1.0f, &g, mom);
  if (st == GAAW_SUCCESS) st = gaaw_axpy(ctx, -a->adam.lr, mom, p);
  gaaw_buffer_free(ctx, &g.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* The piece's state as views: master (or the f32 parameters), m1, m2. */
typedef struct {
  gaaw_tensor_t params, values, m1, m2;
  int has_master;
} piece_views;

static piece_views views_of(gaaw_optimizer_t opt, int b)
{
  const zero_bucket *k = &opt->buckets[b];
  piece_views v;
  v.params = gaaw_zero_param_piece(opt, b);
  v.has_master = opt->master != NULL;
  v.values = v.has_master ? gaaw_zero_view(opt->master, GAAW_F32, k->shard_at, k->piece) : v.params;
  v.m1 = gaaw_zero_view(opt->moment1, GAAW_F32, k->shard_at, k->piece);
  v.m2 = gaaw_zero_view(opt->moment2, GAAW_F32, k->shard_at, k->piece);
  return v;
}

static gaaw_status_t device_update(gaaw_optimizer_t opt, int b, const gaaw_cpu_update_args *args)
{
  gaaw_context_t ctx = opt->ctx;
  piece_views v = views_of(opt, b);
  gaaw_tensor_t grad = gaaw_zero_grad_piece(opt, b);
  gaaw_tensor_t *mp = v.has_master ? &v.values : NULL;
  if (args->kind == GAAW_ADAMW) return gaaw_adamw_update(ctx, &v.params, &grad, mp, &v.m1, &v.m2, &args->adam);
  GAAW_CHECK(sgd_update(opt, &grad, &v.values, &v.m1, args));
  if (mp) GAAW_CHECK(gaaw_cast(ctx, mp, &v.params));
  return GAAW_SUCCESS;
}

static size_t bytes_of(const gaaw_tensor_t *t)
{
  return sizeof(float) * (size_t)gaaw_tensor_numel(t);
}

static gaaw_status_t device_read(gaaw_optimizer_t opt, int b, float *values, float *m1, float *m2)
{
  gaaw_context_t ctx = opt->ctx;
  piece_views v = views_of(opt, b);
  GAAW_CHECK(gaaw_buffer_read(ctx, v.values.buf, v.values.offset, values, bytes_of(&v.values)));
  GAAW_CHECK(gaaw_buffer_read(ctx, v.m1.buf, v.m1.offset, m1, bytes_of(&v.m1)));
  if (m2) GAAW_CHECK(gaaw_buffer_read(ctx, v.m2.buf, v.m2.offset, m2, bytes_of(&v.m2)));
  return GAAW_SUCCESS;
}

static gaaw_status_t device_write(gaaw_optimizer_t opt, int b, const float *values, const float *m1, const float *m2)
{
  gaaw_context_t ctx = opt->ctx;
  piece_views v = views_of(opt, b);
  GAAW_CHECK(gaaw_buffer_write(ctx, v.values.buf, v.values.offset, values, bytes_of(&v.values)));
  if (v.has_master) GAAW_CHECK(gaaw_cast(ctx, &v.values, &v.params)); /* as the step casts its update */
  GAAW_CHECK(gaaw_buffer_write(ctx, v.m1.buf, v.m1.offset, m1, bytes_of(&v.m1)));
  if (m2) GAAW_CHECK(gaaw_buffer_write(ctx, v.m2.buf, v.m2.offset, m2, bytes_of(&v.m2)));
  return GAAW_SUCCESS;
}

static void device_destroy(gaaw_optimizer_t opt)
{
  gaaw_buffer_t *bufs[] = {&opt->master, &opt->moment1, &opt->moment2};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gaaw_buffer_free(opt->ctx, bufs[i]);
}

const zero_store_ops gaaw_zero_store_device = {
  .name = "none",
  .create = device_create,
  .update = device_update,
  .read = device_read,
  .write = device_write,
  .destroy = device_destroy,
  .bytes = device_bytes,
};
