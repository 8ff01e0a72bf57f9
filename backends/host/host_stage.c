/* Host pointers for the kernels: f32 tensors in place, 16-bit tensors through f32
 * workspace copies (see host.h), and the in-order sum of chunk partials. */
#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"
#include "backends/runtime/half.h"

void host_stage_init(host_stage *s, gaaw_context_t ctx)
{
  s->ctx = ctx;
  s->status = GAAW_SUCCESS;
  s->count = 0;
}

void *host_raw(host_stage *s, const gaaw_tensor_t *t)
{
  if (!t || s->status != GAAW_SUCCESS) return NULL;
  void *p = NULL;
  gaaw_status_t st = gaaw_buffer_host_ptr(t->buf, &p);
  if (st != GAAW_SUCCESS) {
    s->status = gaaw_error_trace(s->ctx, st, __FILE__, __LINE__, __func__);
    return NULL;
  }
  return (char *)p + t->offset;
}

/* A new f32 workspace of n floats, remembered in the stage with its destination. */
static float *stage_alloc(host_stage *s, int64_t n, gaaw_tensor_t *dst)
{
  gaaw_context_t ctx = s->ctx;
  if (s->count == HOST_STAGE_MAX) {
    s->status = gaaw_error_raise(ctx, GAAW_ERR_INTERNAL, __FILE__, __LINE__, __func__,
                                 "more than %d staged tensors in one host kernel", HOST_STAGE_MAX);
    return NULL;
  }
  gaaw_buffer_t tmp;
  gaaw_status_t st = gaaw_buffer_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof(float), GAAW_MEM_WORKSPACE, &tmp);
  if (st != GAAW_SUCCESS) {
    s->status = gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
    return NULL;
  }
  s->staged[s->count].dst = dst;
  s->staged[s->count].tmp = tmp;
  s->count++;
  return ctx->device->host_ptr(tmp->handle, 0);
}

float *host_scratch(host_stage *s, int64_t n)
{
  if (s->status != GAAW_SUCCESS) return NULL;
  return stage_alloc(s, n, NULL);
}

static void convert_to_f32(const void *src, gaaw_dtype_t dtype, int64_t n, float *dst)
{
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) dst[i] = gaaw_load_f32(src, dtype, i);
}

static void convert_from_f32(const float *src, int64_t n, void *dst, gaaw_dtype_t dtype)
{
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) gaaw_store_f32(dst, dtype, i, src[i]);
}

void host_round(float *p, int64_t n, gaaw_dtype_t dtype)
{
  if (dtype != GAAW_BF16 && dtype != GAAW_F16) return;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    gaaw_store_f32(&h, dtype, 0, p[i]);
    p[i] = gaaw_load_f32(&h, dtype, 0);
  }
}

/* load: copy the tensor's values in; dst: where to write them back at the end. */
static float *stage(host_stage *s, const gaaw_tensor_t *t, int load, gaaw_tensor_t *dst)
{
  void *raw = host_raw(s, t);
  if (!raw) return NULL;
  if (t->dtype == GAAW_F32) return raw;
  int64_t n = gaaw_tensor_numel(t);
  float *f = stage_alloc(s, n, dst);
  if (f && load) convert_to_f32(raw, t->dtype, n, f);
  return f;
}

const float *host_in(host_stage *s, const gaaw_tensor_t *t)
{
  return stage(s, t, 1, NULL);
}

float *host_out(host_stage *s, gaaw_tensor_t *t)
{
  return stage(s, t, 0, t);
}

float *host_inout(host_stage *s, gaaw_tensor_t *t)
{
  return stage(s, t, 1, t);
}

gaaw_status_t host_stage_end(host_stage *s)
{
  gaaw_context_t ctx = s->ctx;
  for (int i = 0; i < s->count; i++) {
    gaaw_tensor_t *dst = s->staged[i].dst;
    if (dst && s->status == GAAW_SUCCESS) {
      void *raw = host_raw(s, dst);
      if (raw) convert_from_f32(ctx->device->host_ptr(s->staged[i].tmp->handle, 0), gaaw_tensor_numel(dst), raw,
                                dst->dtype);
    }
    gaaw_buffer_free(ctx, &s->staged[i].tmp);
  }
  s->count = 0;
  return s->status;
}

void host_sum_chunks(const float *partial, int64_t chunks, int64_t cols, float *out, int accumulate)
{
#pragma omp parallel for if (chunks * cols > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t c = 0; c < cols; c++) {
    float sum = 0.0f;
    for (int64_t k = 0; k < chunks; k++) sum += partial[k * cols + c];
    out[c] = accumulate ? out[c] + sum : sum;
  }
}
