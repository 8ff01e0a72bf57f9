/* f32 views for the kernels that compute through f32 (see ocl_stage in opencl.h):
 * 16-bit tensors are converted into workspace copies by the cast kernel and back. */
#include <string.h>

#include "backends/opencl/opencl.h"

void ocl_stage_init(ocl_stage *s, gaaw_context_t ctx)
{
  s->ctx = ctx;
  s->status = GAAW_SUCCESS;
  s->count = 0;
}

/* A new f32 workspace tensor of n elements, remembered with its destination. */
static void stage_alloc(ocl_stage *s, int64_t n, gaaw_tensor_t *dst, gaaw_tensor_t *view)
{
  gaaw_context_t ctx = s->ctx;
  if (s->status != GAAW_SUCCESS) return;
  if (s->count == OCL_STAGE_MAX) {
    s->status = gaaw_error_raise(ctx, GAAW_ERR_INTERNAL, __FILE__, __LINE__, __func__,
                                 "more than %d staged tensors in one OpenCL kernel", OCL_STAGE_MAX);
    return;
  }
  int64_t shape[1] = {n};
  gaaw_status_t st = gaaw_tensor_alloc(ctx, GAAW_F32, 1, shape, GAAW_MEM_WORKSPACE, view);
  if (st != GAAW_SUCCESS) {
    s->status = gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
    return;
  }
  s->staged[s->count].dst = dst;
  s->staged[s->count].view = *view;
  s->count++;
}

/* y = x converted (the cast kernel); x and y have the same numel. */
static gaaw_status_t convert(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *y)
{
  cl_long n = gaaw_tensor_numel(x);
  GAAW_CHECK(OCL_RUN(ctx, OCL_K_cast, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_TEN(y), OCL_VAL(n)));
  return GAAW_SUCCESS;
}

static void stage(ocl_stage *s, const gaaw_tensor_t *t, int load, gaaw_tensor_t *dst, gaaw_tensor_t *view)
{
  if (s->status != GAAW_SUCCESS) return;
  if (t->dtype == GAAW_F32) {
    *view = *t;
    return;
  }
  stage_alloc(s, gaaw_tensor_numel(t), dst, view);
  if (s->status != GAAW_SUCCESS) return;
  view->ndim = t->ndim; /* the copy has t's shape */
  memcpy(view->shape, t->shape, sizeof view->shape);
  if (load) {
    gaaw_status_t st = convert(s->ctx, t, view);
    if (st != GAAW_SUCCESS) s->status = gaaw_error_trace(s->ctx, st, __FILE__, __LINE__, __func__);
  }
}

void ocl_in(ocl_stage *s, const gaaw_tensor_t *t, gaaw_tensor_t *view)
{
  stage(s, t, 1, NULL, view);
}

void ocl_out(ocl_stage *s, gaaw_tensor_t *t, gaaw_tensor_t *view)
{
  stage(s, t, 0, t, view);
}

void ocl_inout(ocl_stage *s, gaaw_tensor_t *t, gaaw_tensor_t *view)
{
  stage(s, t, 1, t, view);
}

void ocl_scratch(ocl_stage *s, int64_t n, gaaw_tensor_t *view)
{
  stage_alloc(s, n > 0 ? n : 1, NULL, view);
}

gaaw_status_t ocl_stage_end(ocl_stage *s)
{
  gaaw_context_t ctx = s->ctx;
  for (int i = 0; i < s->count; i++) {
    if (s->status == GAAW_SUCCESS && s->staged[i].dst) {
      gaaw_status_t st = convert(ctx, &s->staged[i].view, s->staged[i].dst);
      if (st != GAAW_SUCCESS) s->status = gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
    }
    /* The in-order queue runs the conversion before any later reuse of the buffer. */
    gaaw_buffer_free(ctx, &s->staged[i].view.buf);
  }
  s->count = 0;
  return s->status;
}
