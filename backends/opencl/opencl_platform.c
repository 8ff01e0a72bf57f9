/* Which OpenCL platform and device a context uses: option opencl_platform
 * (GAAW_OPENCL_PLATFORM) names the platform, "" meaning the first one that has a
 * device; option opencl_device (GAAW_OPENCL_DEVICE) picks a device on it, -1 meaning
 * the `device` index that gaaw_init derives from the node-local rank. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/opencl.h"

enum { MAX_PLATFORMS = 16 };

/* Whether name contains want, ignoring case. */
static int contains_nocase(const char *name, const char *want)
{
  size_t n = strlen(want);
  for (; *name; name++) {
    size_t i = 0;
    while (i < n && name[i] && tolower((unsigned char)name[i]) == tolower((unsigned char)want[i])) i++;
    if (i == n) return 1;
  }
  return n == 0;
}

static cl_uint devices_of(cl_platform_id p, cl_device_id *devices, cl_uint max)
{
  cl_uint n = 0;
  if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, max, max ? devices : NULL, &n) != CL_SUCCESS) return 0;
  return n;
}

gaaw_status_t gaaw_ocl_find_devices(gaaw_context_t ctx, const char *want, cl_platform_id *platform,
                                    cl_device_id *devices, cl_uint max, cl_uint *count)
{
  cl_platform_id all[MAX_PLATFORMS];
  cl_uint n = 0;
  *count = 0;
  cl_int err = clGetPlatformIDs(MAX_PLATFORMS, all, &n);
  if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || n == 0) return GAAW_SUCCESS; /* no ICD: no device */
  OCL_CHECK(err);
  if (n > MAX_PLATFORMS) n = MAX_PLATFORMS;
  char *end = NULL;
  long index = want && *want ? strtol(want, &end, 10) : -1;
  int by_index = want && *want && end && *end == '\0';
  for (cl_uint i = 0; i < n; i++) {
    char name[256] = "";
    clGetPlatformInfo(all[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    int match = by_index ? (long)i == index : (!want || !*want) ? devices_of(all[i], NULL, 0) > 0
                                                                 : contains_nocase(name, want);
    if (!match) continue;
    *platform = all[i];
    *count = devices_of(all[i], devices, max);
    return GAAW_SUCCESS;
  }
  if (want && *want)
    GAAW_ARG_CHECK(ctx, 0, "option opencl_platform '%s' names no OpenCL platform (an index in 0..%u or part of a "
                   "platform name)", want, n - 1);
  return GAAW_SUCCESS;
}

int gaaw_ocl_has_extension(cl_device_id device, const char *ext)
{
  size_t len = 0;
  if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, NULL, &len) != CL_SUCCESS || len == 0) return 0;
  char *all = malloc(len + 1);
  if (!all) return 0;
  int found = 0;
  if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, len, all, NULL) == CL_SUCCESS) {
    all[len] = '\0';
    found = strstr(all, ext) != NULL;
  }
  free(all);
  return found;
}

void gaaw_ocl_describe(cl_device_id device, char *name, size_t len, int *has_fp16)
{
  name[0] = '\0';
  clGetDeviceInfo(device, CL_DEVICE_NAME, len - 1, name, NULL);
  name[len - 1] = '\0';
  *has_fp16 = gaaw_ocl_has_extension(device, "cl_khr_fp16");
}
