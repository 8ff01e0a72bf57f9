/* The OpenCL backend's device: platform and device choice, one context and in-order
 * queue per gaaw context, buffers as cl_mem, and the backend's table. */
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/opencl.h"
#include "backends/runtime/half.h"

_Static_assert(sizeof(size_t) == sizeof(cl_ulong), "tensor byte offsets are passed to kernels as ulong");
_Static_assert(sizeof(gaaw_dtype_t) == sizeof(cl_int), "tensor dtypes are passed to kernels as int");
_Static_assert(sizeof(void *) == sizeof(cl_mem), "buffer handles are cl_mem");

enum { MAX_DEVICES = 64 };

/* Devices on the platform of GAAW_OPENCL_PLATFORM (no context exists yet to ask). */
static gaaw_status_t ocl_device_count(int *count)
{
  gaaw_context_t ctx = NULL;
  cl_platform_id platform;
  cl_device_id devices[MAX_DEVICES];
  cl_uint n = 0;
  *count = 0;
  GAAW_CHECK(gaaw_ocl_find_devices(NULL, getenv("GAAW_OPENCL_PLATFORM"), &platform, devices, MAX_DEVICES, &n));
  *count = (int)n;
  return GAAW_SUCCESS;
}

/* Of those, the GPUs and accelerators (PoCL's CPU device is not one: on a CPU the
 * host backend is the better choice for backend=auto). */
static gaaw_status_t ocl_accelerator_count(int *count)
{
  gaaw_context_t ctx = NULL;
  cl_platform_id platform;
  cl_device_id devices[MAX_DEVICES];
  cl_uint n = 0;
  *count = 0;
  GAAW_CHECK(gaaw_ocl_find_devices(NULL, getenv("GAAW_OPENCL_PLATFORM"), &platform, devices, MAX_DEVICES, &n));
  for (cl_uint i = 0; i < n; i++) {
    cl_device_type type = 0;
    if (clGetDeviceInfo(devices[i], CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS &&
        !(type & CL_DEVICE_TYPE_CPU))
      (*count)++;
  }
  return GAAW_SUCCESS;
}

/* Device index of the platform that ocl_device_count counts, from clGetDeviceInfo. */
static gaaw_status_t ocl_device_info(int index, gaaw_device_info_t *info)
{
  gaaw_context_t ctx = NULL;
  cl_platform_id platform;
  cl_device_id devices[MAX_DEVICES];
  cl_uint n = 0;
  GAAW_CHECK(gaaw_ocl_find_devices(NULL, getenv("GAAW_OPENCL_PLATFORM"), &platform, devices, MAX_DEVICES, &n));
  GAAW_ARG_CHECK(NULL, index >= 0 && (cl_uint)index < n, "OpenCL device %d is not in 0..%d", index, (int)n - 1);
  cl_device_id d = devices[index];
  cl_ulong mem = 0;
  cl_uint units = 0;
  OCL_CHECK(clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL));
  OCL_CHECK(clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL));
  gaaw_ocl_describe(d, info->name, sizeof info->name, &info->fp16);
  info->memory_bytes = mem;
  info->compute_units = (int)units;
  info->bf16 = gaaw_ocl_has_extension(d, "bfloat16");
  return GAAW_SUCCESS;
}

static void ocl_close(gaaw_context_t ctx)
{
  ocl_state *s = ocl_of(ctx);
  if (!s) return;
  if (s->queue) clFinish(s->queue);
  gaaw_ocl_release_program(s);
  if (s->queue) clReleaseCommandQueue(s->queue);
  if (s->context) clReleaseContext(s->context);
  free(s);
  ctx->device_state = NULL;
}

static gaaw_status_t ocl_open(gaaw_context_t ctx, int index)
{
  const char *want = gaaw_ctx_string(ctx, "opencl_platform");
  int64_t chosen = gaaw_ctx_int(ctx, "opencl_device");
  ocl_state *s = calloc(1, sizeof *s);
  if (!s) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the OpenCL state");
  ctx->device_state = s; /* ocl_close frees whatever was set up, also after a failure */
  cl_device_id devices[MAX_DEVICES];
  cl_uint n = 0;
  GAAW_CHECK(gaaw_ocl_find_devices(ctx, want, &s->platform, devices, MAX_DEVICES, &n));
  if (n == 0) GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "no OpenCL device on platform '%s'", *want ? want : "(first)");
  GAAW_ARG_CHECK(ctx, chosen >= -1 && chosen < (int64_t)n,
                 "option opencl_device %lld does not exist: the platform has %u device(s) (-1: by local rank)",
                 (long long)chosen, n);
  s->device = devices[chosen >= 0 ? chosen : index % (int)n];
  gaaw_ocl_describe(s->device, s->device_name, sizeof s->device_name, &s->has_fp16);
  cl_int err;
  s->context = clCreateContext(NULL, 1, &s->device, NULL, NULL, &err);
  OCL_CHECK(err);
  s->queue = clCreateCommandQueue(s->context, s->device, 0, &err); /* in order */
  OCL_CHECK(err);
  GAAW_CHECK(gaaw_ocl_build(ctx, s));
  return GAAW_SUCCESS;
}

static gaaw_status_t ocl_mem_alloc(gaaw_context_t ctx, size_t bytes, void **handle)
{
  cl_int err;
  cl_mem m = clCreateBuffer(ocl_of(ctx)->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
  OCL_CHECK(err);
  *handle = m;
  return GAAW_SUCCESS;
}

static void ocl_mem_free(gaaw_context_t ctx, void *handle)
{
  (void)ctx;
  if (handle) clReleaseMemObject((cl_mem)handle);
}

static gaaw_status_t ocl_mem_write(gaaw_context_t ctx, void *handle, size_t offset, const void *src, size_t bytes)
{
  if (bytes == 0) return GAAW_SUCCESS;
  OCL_CHECK(clEnqueueWriteBuffer(ocl_of(ctx)->queue, (cl_mem)handle, CL_TRUE, offset, bytes, src, 0, NULL, NULL));
  return GAAW_SUCCESS;
}

static gaaw_status_t ocl_mem_read(gaaw_context_t ctx, void *handle, size_t offset, void *dst, size_t bytes)
{
  if (bytes == 0) return GAAW_SUCCESS;
  OCL_CHECK(clEnqueueReadBuffer(ocl_of(ctx)->queue, (cl_mem)handle, CL_TRUE, offset, bytes, dst, 0, NULL, NULL));
  return GAAW_SUCCESS;
}

static void *ocl_host_ptr(void *handle, size_t offset)
{
  (void)handle;
  (void)offset;
  return NULL; /* device memory */
}

gaaw_status_t ocl_synchronize(gaaw_context_t ctx)
{
  OCL_CHECK(clFinish(ocl_of(ctx)->queue));
  return GAAW_SUCCESS;
}

gaaw_status_t ocl_fill(gaaw_context_t ctx, gaaw_ten x, float value)
{
  OCL_CHECK_F16("fill", x);
  size_t es = gaaw_dtype_size(x->dtype), bytes = (size_t)gaaw_tensor_numel(x) * es;
  if (bytes == 0) return GAAW_SUCCESS;
  /* The element's bit pattern, converted as the host backend does. */
  uint32_t p32;
  uint16_t p16;
  const void *pattern = &p32;
  switch (x->dtype) {
  case GAAW_I32: { int32_t iv = (int32_t)value; memcpy(&p32, &iv, 4); break; }
  case GAAW_BF16: p16 = gaaw_f32_to_bf16(value); pattern = &p16; break;
  case GAAW_F16: p16 = gaaw_f32_to_f16(value); pattern = &p16; break;
  default: p32 = gaaw_f32_bits(value); break;
  }
  OCL_CHECK(clEnqueueFillBuffer(ocl_of(ctx)->queue, (cl_mem)x->buf->handle, pattern, es, x->offset, bytes, 0, NULL,
                                NULL));
  return GAAW_SUCCESS;
}

#define OCL_TABLE_ENTRY(name, params) .name = ocl_##name,

const gaaw_device_ops gaaw_opencl_device_ops = {
  .name = "opencl",
  .device_count = ocl_device_count,
  .accelerator_count = ocl_accelerator_count,
  .device_info = ocl_device_info,
  .open = ocl_open,
  .close = ocl_close,
  .mem_alloc = ocl_mem_alloc,
  .mem_free = ocl_mem_free,
  .mem_write = ocl_mem_write,
  .mem_read = ocl_mem_read,
  .host_ptr = ocl_host_ptr,
  GAAW_DEVICE_KERNEL_LIST(OCL_TABLE_ENTRY)
  GAAW_DEVICE_OPTIONAL_KERNEL_LIST(OCL_TABLE_ENTRY)
};
