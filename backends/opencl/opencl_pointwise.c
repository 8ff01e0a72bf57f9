/* Table entries of the elementwise kernels (kernels/pointwise.cl): activations,
 * the fused bias add and GELU, GELU's backward into an unzeroed dx, residual add,
 * axpy, scale, bias add, AdamW, cast, the rotary embedding; and the layout kernel. */
#include <math.h>

#include "backends/opencl/opencl.h"

gaaw_status_t ocl_activation_forward(gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten x, gaaw_ten y)
{
  OCL_CHECK_F16("activation_forward", x, y);
  cl_long n = gaaw_tensor_numel(x);
  cl_int kind = (cl_int)act;
  return OCL_RUN(ctx, OCL_K_activation_forward, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_TEN(y), OCL_VAL(kind),
                 OCL_VAL(n));
}

gaaw_status_t ocl_activation_backward(gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten dy, gaaw_cten x,
                                      gaaw_ten dx)
{
  OCL_CHECK_F16("activation_backward", dy, x, dx);
  cl_long n = gaaw_tensor_numel(x);
  cl_int kind = (cl_int)act;
  return OCL_RUN(ctx, OCL_K_activation_backward, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(dy), OCL_TEN(x), OCL_TEN(dx),
                 OCL_VAL(kind), OCL_VAL(n));
}

gaaw_status_t ocl_swiglu_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  OCL_CHECK_F16("swiglu_forward", x, y);
  cl_long H = ocl_cols(y), n = gaaw_tensor_numel(y);
  return OCL_RUN(ctx, OCL_K_swiglu_forward, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_TEN(y), OCL_VAL(H),
                 OCL_VAL(n));
}

gaaw_status_t ocl_swiglu_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_ten dx)
{
  OCL_CHECK_F16("swiglu_backward", dy, x, dx);
  cl_long H = ocl_cols(dy), n = gaaw_tensor_numel(dy);
  return OCL_RUN(ctx, OCL_K_swiglu_backward, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(dy), OCL_TEN(x), OCL_TEN(dx),
                 OCL_VAL(H), OCL_VAL(n));
}

gaaw_status_t ocl_rope(gaaw_context_t ctx, gaaw_cten x, gaaw_cten table, int64_t heads, int inverse, gaaw_ten y)
{
  OCL_CHECK_F16("rope", x, y);
  cl_long T = x->shape[1], NH = x->shape[2], D = x->shape[3], h = heads, n = gaaw_tensor_numel(x) / 2;
  cl_float sign = inverse ? -1.0f : 1.0f;
  cl_int copy = !(x->buf == y->buf && x->offset == y->offset);
  return OCL_RUN(ctx, OCL_K_rope, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_TEN(table), OCL_TEN(y), OCL_VAL(T),
                 OCL_VAL(NH), OCL_VAL(D), OCL_VAL(h), OCL_VAL(sign), OCL_VAL(copy), OCL_VAL(n));
}

gaaw_status_t ocl_bias_add(gaaw_context_t ctx, gaaw_ten y, gaaw_cten b)
{
  OCL_CHECK_F16("bias_add", y, b);
  cl_long C = ocl_cols(y), n = gaaw_tensor_numel(y);
  return OCL_RUN(ctx, OCL_K_bias_add, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(y), OCL_TEN(b), OCL_VAL(C), OCL_VAL(n));
}

gaaw_status_t ocl_bias_gelu_forward(gaaw_context_t ctx, gaaw_ten u, gaaw_cten b, gaaw_ten a)
{
  OCL_CHECK_F16("bias_gelu_forward", u, b, a);
  cl_long F = ocl_cols(u), n = gaaw_tensor_numel(u);
  return OCL_RUN(ctx, OCL_K_bias_gelu_forward, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(u), OCL_TEN(b), OCL_TEN(a),
                 OCL_VAL(F), OCL_VAL(n));
}

gaaw_status_t ocl_gelu_backward_set(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_ten dx)
{
  OCL_CHECK_F16("gelu_backward_set", dy, x, dx);
  cl_long n = gaaw_tensor_numel(x);
  return OCL_RUN(ctx, OCL_K_gelu_backward_set, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(dy), OCL_TEN(x), OCL_TEN(dx),
                 OCL_VAL(n));
}

gaaw_status_t ocl_bias_residual_add(gaaw_context_t ctx, gaaw_cten x, gaaw_cten y, gaaw_cten bias, gaaw_ten out)
{
  OCL_CHECK_F16("bias_residual_add", x, y, bias, out);
  cl_long C = ocl_cols(x), n = gaaw_tensor_numel(x);
  return OCL_RUN(ctx, OCL_K_bias_residual_add, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_TEN(y), OCL_TEN(bias),
                 OCL_TEN(out), OCL_VAL(C), OCL_VAL(n));
}

gaaw_status_t ocl_add(gaaw_context_t ctx, gaaw_cten a, gaaw_cten b, gaaw_ten y)
{
  OCL_CHECK_F16("add", a, b, y);
  cl_long n = gaaw_tensor_numel(y);
  return OCL_RUN(ctx, OCL_K_add, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(a), OCL_TEN(b), OCL_TEN(y), OCL_VAL(n));
}

gaaw_status_t ocl_axpy(gaaw_context_t ctx, float alpha, gaaw_cten x, gaaw_ten y)
{
  OCL_CHECK_F16("axpy", x, y);
  cl_long n = gaaw_tensor_numel(y);
  return OCL_RUN(ctx, OCL_K_axpy, ocl_ew_groups(n), OCL_EW_WG, OCL_VAL(alpha), OCL_TEN(x), OCL_TEN(y), OCL_VAL(n));
}

gaaw_status_t ocl_scale(gaaw_context_t ctx, gaaw_ten x, float alpha)
{
  OCL_CHECK_F16("scale", x);
  cl_long n = gaaw_tensor_numel(x);
  return OCL_RUN(ctx, OCL_K_scale, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_VAL(alpha), OCL_VAL(n));
}

gaaw_status_t ocl_adamw_update(gaaw_context_t ctx, gaaw_ten params, gaaw_cten grads, gaaw_ten master, gaaw_ten m,
                               gaaw_ten v, const gaaw_adamw_args_t *a)
{
  OCL_CHECK_F16("adamw_update", params, grads);
  cl_long n = gaaw_tensor_numel(params);
  cl_int has_master = master != NULL;
  /* Bias corrections once per call, in double, as the host backend does. */
  cl_float bc1 = (float)(1.0 - pow((double)a->beta1, (double)a->step));
  cl_float bc2 = (float)(1.0 - pow((double)a->beta2, (double)a->step));
  cl_float b1 = a->beta1, b2 = a->beta2, lr = a->lr, eps = a->eps, wd = a->weight_decay, gs = a->grad_scale;
  gaaw_tensor_t *w = master ? master : params; /* a valid buffer in the master slot either way */
  return OCL_RUN(ctx, OCL_K_adamw_update, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(params), OCL_TEN(grads), OCL_TEN(w),
                 OCL_TEN(m), OCL_TEN(v), OCL_VAL(has_master), OCL_VAL(b1), OCL_VAL(b2), OCL_VAL(lr), OCL_VAL(eps),
                 OCL_VAL(wd), OCL_VAL(gs), OCL_VAL(bc1), OCL_VAL(bc2), OCL_VAL(n));
}

/* Whether [a, a + bytes) and [b, b + bytes) of the same buffer overlap. */
static int overlaps(const gaaw_tensor_t *x, const gaaw_tensor_t *y, size_t bytes)
{
  return x->buf == y->buf && x->offset < y->offset + bytes && y->offset < x->offset + bytes;
}

gaaw_status_t ocl_cast(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  OCL_CHECK_F16("cast", x, y);
  cl_long n = gaaw_tensor_numel(x);
  if (x->dtype != y->dtype)
    return OCL_RUN(ctx, OCL_K_cast, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_TEN(y), OCL_VAL(n));
  /* Same dtype: a copy of the bits (exact for i32 too); overlapping ranges go through
   * a workspace copy, since OpenCL refuses overlapping copies. */
  size_t bytes = (size_t)n * gaaw_dtype_size(x->dtype);
  if (bytes == 0 || (x->buf == y->buf && x->offset == y->offset)) return GAAW_SUCCESS;
  cl_command_queue q = ocl_of(ctx)->queue;
  cl_mem src = (cl_mem)x->buf->handle, dst = (cl_mem)y->buf->handle;
  if (!overlaps(x, y, bytes)) {
    OCL_CHECK(clEnqueueCopyBuffer(q, src, dst, x->offset, y->offset, bytes, 0, NULL, NULL));
    return GAAW_SUCCESS;
  }
  gaaw_buffer_t tmp;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, bytes, GAAW_MEM_WORKSPACE, &tmp));
  cl_int err = clEnqueueCopyBuffer(q, src, (cl_mem)tmp->handle, x->offset, 0, bytes, 0, NULL, NULL);
  if (err == CL_SUCCESS) err = clEnqueueCopyBuffer(q, (cl_mem)tmp->handle, dst, 0, y->offset, bytes, 0, NULL, NULL);
  gaaw_buffer_free(ctx, &tmp);
  OCL_CHECK(err);
  return GAAW_SUCCESS;
}

/* y[a][c][b][:] = x[a][b][c][:], moved in 16-bit units (every dtype is 2 or 4 bytes
 * and every offset a multiple of its size). */
gaaw_status_t ocl_permute_0213(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  OCL_CHECK_F16("permute_0213", x, y);
  cl_long B = x->shape[1], C = x->shape[2], D2 = x->shape[3] * (cl_long)gaaw_dtype_size(x->dtype) / 2;
  cl_long total = gaaw_tensor_numel(x) * (cl_long)gaaw_dtype_size(x->dtype) / 2;
  cl_ulong xo = x->offset / 2, yo = y->offset / 2;
  return OCL_RUN(ctx, OCL_K_permute_0213, ocl_ew_groups(total), OCL_EW_WG, {sizeof(cl_mem), &x->buf->handle},
                 OCL_VAL(xo), {sizeof(cl_mem), &y->buf->handle}, OCL_VAL(yo), OCL_VAL(B), OCL_VAL(C), OCL_VAL(D2),
                 OCL_VAL(total));
}

/* Grouped-query attention's heads (kernels in layout.cl): forward one item per
 * element of q, backward one per element of dqkv. */
gaaw_status_t ocl_qkv_heads(gaaw_context_t ctx, gaaw_ten qkv, int64_t kv_heads, int backward, gaaw_ten q, gaaw_ten k,
                            gaaw_ten v)
{
  OCL_CHECK_F16("qkv_heads", qkv, q, k, v);
  cl_long H = q->shape[1], T = q->shape[2], D = q->shape[3], Hkv = kv_heads;
  if (!backward) {
    cl_long n = gaaw_tensor_numel(q);
    return OCL_RUN(ctx, OCL_K_qkv_heads_forward, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(qkv), OCL_TEN(q), OCL_TEN(k),
                   OCL_TEN(v), OCL_VAL(H), OCL_VAL(T), OCL_VAL(D), OCL_VAL(Hkv), OCL_VAL(n));
  }
  cl_long n = gaaw_tensor_numel(qkv);
  return OCL_RUN(ctx, OCL_K_qkv_heads_backward, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(q), OCL_TEN(k), OCL_TEN(v),
                 OCL_TEN(qkv), OCL_VAL(H), OCL_VAL(T), OCL_VAL(D), OCL_VAL(Hkv), OCL_VAL(n));
}
