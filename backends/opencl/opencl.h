/* The OpenCL device backend: one OpenCL context and in-order queue per gaaw
 * context, buffers as cl_mem (tensors add byte offsets, passed to the kernels), the
 * kernels of kernels/NAME.cl embedded in the library and built as ONE program when a
 * context opens (PoCL compiles each program slowly, so fewer is faster), GEMM through
 * CLBlast. 16-bit float tensors are loaded as f32 and stored rounded to nearest even;
 * f16 needs cl_khr_fp16 and is GAAW_ERR_UNSUPPORTED without it.
 * Every entry is called with tensors already checked by backends/kernels.c. */
#ifndef GAAW_OPENCL_OPENCL_H
#define GAAW_OPENCL_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "backends/device.h"

/* Work-group sizes (also given to the program as -D options). */
#define OCL_ROW_WG 64      /* row kernels: one group per row */
#define OCL_EW_WG 256      /* elementwise kernels: one item per element */
#define OCL_SUMSQ_CHUNK 4096 /* elements per partial sum of squares */

/* The kernels of the program, by name. */
#define OCL_KERNEL_LIST(X)                                                                      \
  X(activation_forward) X(activation_backward) X(swiglu_forward) X(swiglu_backward) X(bias_add) X(add)      \
  X(axpy) X(scale) X(cast) X(adamw_update) X(layernorm_forward) X(layernorm_backward)           \
  X(rmsnorm_forward) X(rmsnorm_backward) X(causal_softmax_forward) X(causal_softmax_backward)   \
  X(regression_loss) X(row_max) X(row_sum_exp) X(target_logit) X(cross_entropy_backward) X(column_sums)            \
  X(sum_squares_partial) X(sum_squares_final) X(check_finite) X(permute_0213)                   \
  X(embedding_forward) X(embedding_backward) X(bias_gelu_forward) X(bias_residual_add) X(add_layernorm_forward)      \
  X(gelu_backward_set) X(cross_entropy_forward) X(attention_block_forward) X(attention_block_backward_dq)                 \
  X(attention_block_backward_dkv) X(attention_merge) X(rope) X(qkv_heads_forward) X(qkv_heads_backward) \
  X(moe_router) X(moe_router_backward) X(moe_topk) X(moe_topk_backward) X(moe_permute) X(moe_combine)                  \
  X(moe_unpermute_backward)
#define OCL_KERNEL_ENUM(name) OCL_K_##name,
typedef enum { OCL_KERNEL_LIST(OCL_KERNEL_ENUM) OCL_KERNEL_COUNT } ocl_kernel_id;
#undef OCL_KERNEL_ENUM

/* Per-context state (ctx->device_state). */
typedef struct {
  cl_platform_id platform;
  cl_device_id device;
  cl_context context;
  cl_command_queue queue;
  cl_program program;
  cl_kernel kernels[OCL_KERNEL_COUNT];
  int has_fp16;
  char device_name[128];
} ocl_state;

static inline ocl_state *ocl_of(gaaw_context_t ctx);

/* ---------------------------------------------------------------- errors (opencl_error.c) */

/* "CL_OUT_OF_RESOURCES" etc., or "unknown OpenCL error" */
const char *gaaw_ocl_error_name(cl_int err);
/* Records "what failed: CL_NAME (code)" as GAAW_ERR_BACKEND (GAAW_ERR_NO_MEMORY for
 * allocation failures) and returns it. */
gaaw_status_t gaaw_ocl_fail(gaaw_context_t ctx, cl_int err, const char *what, const char *file, int line,
                            const char *func);
#define OCL_CHECK(call)                                                                     \
  do {                                                                                      \
    cl_int ocl_err_ = (call);                                                               \
    if (ocl_err_ != CL_SUCCESS) return gaaw_ocl_fail(ctx, ocl_err_, #call, __FILE__, __LINE__, __func__); \
  } while (0)

/* ---------------------------------------------------------------- platform (opencl_platform.c) */

/* The platform named by want ("" = the first with a device, a number = its index,
 * otherwise a case-insensitive part of its name) and its devices (up to max). */
gaaw_status_t gaaw_ocl_find_devices(gaaw_context_t ctx, const char *want, cl_platform_id *platform,
                                    cl_device_id *devices, cl_uint max, cl_uint *count);
/* The device's name and whether it has cl_khr_fp16. */
void gaaw_ocl_describe(cl_device_id device, char *name, size_t len, int *has_fp16);
/* Whether the device's extension list contains ext (as a substring). */
int gaaw_ocl_has_extension(cl_device_id device, const char *ext);

/* ---------------------------------------------------------------- program (opencl_program.c) */

/* Builds the embedded sources as one program and creates every kernel. */
gaaw_status_t gaaw_ocl_build(gaaw_context_t ctx, ocl_state *s);
void gaaw_ocl_release_program(ocl_state *s);

/* A kernel argument: its size and address (clSetKernelArg). */
typedef struct {
  size_t size;
  const void *value;
} ocl_arg;
/* A tensor is three arguments: buffer, byte offset, dtype (TEN(x) in common.cl). */
#define OCL_TEN(t) {sizeof(cl_mem), &(t)->buf->handle}, {sizeof(cl_ulong), &(t)->offset}, {sizeof(cl_int), &(t)->dtype}
#define OCL_VAL(v) {sizeof(v), &(v)}
/* Runs kernel k on groups x local items with the arguments given (groups 0: nothing). */
gaaw_status_t gaaw_ocl_run(gaaw_context_t ctx, ocl_kernel_id k, size_t groups, size_t local, int nargs,
                           const ocl_arg *args);
#define OCL_RUN(ctx, k, groups, local, ...)                                                  \
  gaaw_ocl_run((ctx), (k), (groups), (local), (int)(sizeof((ocl_arg[]){__VA_ARGS__}) / sizeof(ocl_arg)), \
               (ocl_arg[]){__VA_ARGS__})
/* Groups of OCL_EW_WG items covering n elements. */
static inline size_t ocl_ew_groups(int64_t n)
{
  return (size_t)((n + OCL_EW_WG - 1) / OCL_EW_WG);
}

/* f16 tensors need cl_khr_fp16: GAAW_ERR_UNSUPPORTED naming the device and op
 * otherwise (NULL entries of the list are skipped). */
gaaw_status_t gaaw_ocl_check_f16(gaaw_context_t ctx, const char *op, int n, const gaaw_tensor_t *const *list);
#define OCL_CHECK_F16(op, ...)                                                                           \
  GAAW_CHECK(gaaw_ocl_check_f16(ctx, (op), (int)(sizeof((const gaaw_tensor_t *[]){__VA_ARGS__}) /         \
                                                 sizeof(const gaaw_tensor_t *)),                       \
                                (const gaaw_tensor_t *[]){__VA_ARGS__}))

/* ---------------------------------------------------------------- f32 staging (opencl_stage.c) */

#define OCL_STAGE_MAX 10

/* f32 views for kernels that compute through f32 (GEMM, attention, the embedding
 * scatter-add): an f32 tensor is used in place, a 16-bit one through an f32 workspace
 * copy, written back rounded at the end. Errors stay in status (later calls do
 * nothing, ocl_stage_end returns it). */
typedef struct {
  gaaw_context_t ctx;
  gaaw_status_t status;
  int count;
  struct {
    gaaw_tensor_t *dst; /* NULL: input or scratch */
    gaaw_tensor_t view;
  } staged[OCL_STAGE_MAX];
} ocl_stage;

void ocl_stage_init(ocl_stage *s, gaaw_context_t ctx);
/* t as f32 into *view: for reading (in), writing only (out), or both (inout). */
void ocl_in(ocl_stage *s, const gaaw_tensor_t *t, gaaw_tensor_t *view);
void ocl_out(ocl_stage *s, gaaw_tensor_t *t, gaaw_tensor_t *view);
void ocl_inout(ocl_stage *s, gaaw_tensor_t *t, gaaw_tensor_t *view);
/* An f32 workspace tensor of n elements. */
void ocl_scratch(ocl_stage *s, int64_t n, gaaw_tensor_t *view);
/* Writes staged outputs back (if no error), frees the copies, returns the status. */
gaaw_status_t ocl_stage_end(ocl_stage *s);

/* ---------------------------------------------------------------- GEMM (opencl_gemm.c) */

/* Row-major c = alpha op(a) op(b) + beta c for batch matrices stored one after the
 * other, on f32 tensors (offsets in their views). beta == 0 ignores c's contents. */
gaaw_status_t gaaw_ocl_sgemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t batch,
                             int64_t m, int64_t n, int64_t k, float alpha, const gaaw_tensor_t *a,
                             const gaaw_tensor_t *b, float beta, gaaw_tensor_t *c);

/* Where the matrices of a batch lie in an f32 tensor: the first at element `at` of
 * its view, each next one `stride` elements on, their stored rows `ld` apart. */
typedef struct {
  const gaaw_tensor_t *t;
  int64_t at, ld, stride;
} ocl_matrices;

/* gaaw_ocl_sgemm on matrices laid out as a, b and c say (the heads of the QKV
 * projection's layout: D apart within rows of 3 H D). */
gaaw_status_t gaaw_ocl_sgemm_strided(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t batch,
                                     int64_t m, int64_t n, int64_t k, float alpha, ocl_matrices a, ocl_matrices b,
                                     float beta, ocl_matrices c);

/* ---------------------------------------------------------------- shapes */

static inline int64_t ocl_cols(const gaaw_tensor_t *t)
{
  return t->shape[t->ndim - 1];
}
static inline int64_t ocl_rows(const gaaw_tensor_t *t)
{
  int64_t r = 1;
  for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
  return r;
}

/* ---------------------------------------------------------------- the table entries */

#define OCL_DECLARE(name, params) gaaw_status_t ocl_##name params;
GAAW_DEVICE_KERNEL_LIST(OCL_DECLARE)
GAAW_DEVICE_OPTIONAL_KERNEL_LIST(OCL_DECLARE)
#undef OCL_DECLARE

extern const gaaw_device_ops gaaw_opencl_device_ops;

#include "backends/runtime/context_impl.h"
static inline ocl_state *ocl_of(gaaw_context_t ctx)
{
  return (ocl_state *)ctx->device_state;
}

#endif
