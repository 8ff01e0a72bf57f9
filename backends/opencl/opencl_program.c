/* The kernels' program: the embedded .cl sources (opencl_sources.c, generated from
 * kernels/NAME.cl at build time) built ONCE per context as one program, every kernel
 * created up front, and the launch helper. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/opencl.h"
#include "backends/runtime/log.h"

/* Generated: the .cl files in order, common.cl first. */
extern const char *const gaaw_opencl_sources[];
extern const int gaaw_opencl_source_count;

static const char *const kernel_names[OCL_KERNEL_COUNT] = {
#define OCL_KERNEL_NAME(name) #name,
  OCL_KERNEL_LIST(OCL_KERNEL_NAME)
#undef OCL_KERNEL_NAME
};

/* The work-group sizes, and gaaw_activation_t's values for the activation kernels. */
static void build_options(char *buf, size_t size)
{
  snprintf(buf, size,
           "-cl-std=CL1.2 -DROW_WG=%d -DEW_WG=%d -DSUMSQ_CHUNK=%d -DACT_GELU=%d -DACT_NONE=%d -DACT_RELU=%d "
           "-DACT_TANH=%d -DACT_SILU=%d",
           OCL_ROW_WG, OCL_EW_WG, OCL_SUMSQ_CHUNK, GAAW_ACT_GELU, GAAW_ACT_NONE, GAAW_ACT_RELU, GAAW_ACT_TANH,
           GAAW_ACT_SILU);
}

/* The compiler's log for a failed build, logged in full and quoted (the end) in
 * the error report. */
static gaaw_status_t build_failure(gaaw_context_t ctx, ocl_state *s, cl_int err)
{
  size_t len = 0;
  char *log = NULL;
  if (clGetProgramBuildInfo(s->program, s->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) == CL_SUCCESS &&
      (log = malloc(len + 1)) != NULL) {
    if (clGetProgramBuildInfo(s->program, s->device, CL_PROGRAM_BUILD_LOG, len, log, NULL) != CL_SUCCESS) len = 0;
    log[len] = '\0';
    gaaw_log(GAAW_LOG_ERROR, "OpenCL build log of the gaaw kernels on %s:\n%s", s->device_name, log);
  }
  const char *tail = log && strlen(log) > 600 ? log + strlen(log) - 600 : log ? log : "";
  gaaw_status_t st = gaaw_error_raise(ctx, GAAW_ERR_BACKEND, __FILE__, __LINE__, __func__,
                                      "building the gaaw OpenCL kernels on %s failed: %s (%d); build log ends: %s",
                                      s->device_name, gaaw_ocl_error_name(err), (int)err, tail);
  free(log);
  return st;
}

gaaw_status_t gaaw_ocl_build(gaaw_context_t ctx, ocl_state *s)
{
  cl_int err;
  s->program = clCreateProgramWithSource(s->context, (cl_uint)gaaw_opencl_source_count,
                                         (const char **)gaaw_opencl_sources, NULL, &err);
  OCL_CHECK(err);
  char options[256];
  build_options(options, sizeof options);
  err = clBuildProgram(s->program, 1, &s->device, options, NULL, NULL);
  if (err != CL_SUCCESS) return build_failure(ctx, s, err);
  for (int k = 0; k < OCL_KERNEL_COUNT; k++) {
    s->kernels[k] = clCreateKernel(s->program, kernel_names[k], &err);
    if (err != CL_SUCCESS)
      GAAW_FAIL(ctx, GAAW_ERR_BACKEND, "creating OpenCL kernel %s failed: %s (%d)", kernel_names[k],
                gaaw_ocl_error_name(err), (int)err);
  }
  return GAAW_SUCCESS;
}

void gaaw_ocl_release_program(ocl_state *s)
{
  for (int k = 0; k < OCL_KERNEL_COUNT; k++)
    if (s->kernels[k]) clReleaseKernel(s->kernels[k]);
  if (s->program) clReleaseProgram(s->program);
}

gaaw_status_t gaaw_ocl_run(gaaw_context_t ctx, ocl_kernel_id k, size_t groups, size_t local, int nargs,
                           const ocl_arg *args)
{
  if (groups == 0) return GAAW_SUCCESS;
  ocl_state *s = ocl_of(ctx);
  cl_kernel kernel = s->kernels[k];
  for (int i = 0; i < nargs; i++) {
    cl_int err = clSetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value);
    if (err != CL_SUCCESS)
      GAAW_FAIL(ctx, GAAW_ERR_BACKEND, "setting argument %d of OpenCL kernel %s failed: %s (%d)", i, kernel_names[k],
                gaaw_ocl_error_name(err), (int)err);
  }
  size_t global = groups * local;
  cl_int err = clEnqueueNDRangeKernel(s->queue, kernel, 1, NULL, &global, &local, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    GAAW_FAIL(ctx, GAAW_ERR_BACKEND, "launching OpenCL kernel %s (%zu groups of %zu) failed: %s (%d)",
              kernel_names[k], groups, local, gaaw_ocl_error_name(err), (int)err);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ocl_check_f16(gaaw_context_t ctx, const char *op, int n, const gaaw_tensor_t *const *list)
{
  ocl_state *s = ocl_of(ctx);
  for (int i = 0; i < n; i++)
    if (list[i] && list[i]->dtype == GAAW_F16 && !s->has_fp16)
      GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "%s on f16 tensors: the OpenCL device '%s' lacks cl_khr_fp16", op,
                s->device_name);
  return GAAW_SUCCESS;
}
