/* What this build contains: optional dependencies (configure's GAAW_HAVE_* defines)
 * and the device backends compiled in. Needs no context. */
#include "config.h"

#include <ctype.h>
#include <string.h>

#include "backends/device.h"
#include "backends/runtime/error.h"
#include "gaaw/info.h"

#ifdef GAAW_HAVE_CBLAS
#define HAS_CBLAS 1
#else
#define HAS_CBLAS 0
#endif
#ifdef _OPENMP
#define HAS_OPENMP 1
#else
#define HAS_OPENMP 0
#endif
#ifdef GAAW_HAVE_OPENCL
#define HAS_OPENCL 1
#else
#define HAS_OPENCL 0
#endif
#ifdef GAAW_HAVE_CLBLAST
#define HAS_CLBLAST 1
#else
#define HAS_CLBLAST 0
#endif
#ifdef GAAW_HAVE_CUDA
#define HAS_CUDA 1
#else
#define HAS_CUDA 0
#endif
#ifdef GAAW_HAVE_NCCL
#define HAS_NCCL 1
#else
#define HAS_NCCL 0
#endif
/* Set by ports/Makefile.inc when the Fortran module is compiled into the library. */
#ifdef GAAW_HAVE_FORTRAN
#define HAS_FORTRAN 1
#else
#define HAS_FORTRAN 0
#endif

/* Indexed by gaaw_feature_t. */
static const char *const feature_names[] = {
#define GAAW_FEATURE_ENTRY(id, value, text) [value] = text,
  GAAW_FEATURE_LIST(GAAW_FEATURE_ENTRY)
#undef GAAW_FEATURE_ENTRY
};
_Static_assert(sizeof feature_names / sizeof feature_names[0] == GAAW_FEATURE_COUNT,
               "GAAW_FEATURE_COUNT must match GAAW_FEATURE_LIST");

static int feature_enabled(gaaw_feature_t f)
{
  switch (f) {
  case GAAW_FEATURE_CBLAS: return HAS_CBLAS;
  case GAAW_FEATURE_OPENMP: return HAS_OPENMP;
  case GAAW_FEATURE_OPENCL: return HAS_OPENCL;
  case GAAW_FEATURE_CLBLAST: return HAS_CLBLAST;
  case GAAW_FEATURE_CUDA: return HAS_CUDA;
  case GAAW_FEATURE_NCCL: return HAS_NCCL;
  case GAAW_FEATURE_FORTRAN: return HAS_FORTRAN;
  }
  return 0;
}

gaaw_status_t gaaw_info_feature(gaaw_feature_t feature, const char **name, int *enabled)
{
  GAAW_ARG_CHECK(NULL, (int)feature >= 0 && (int)feature < GAAW_FEATURE_COUNT,
                 "feature %d is not in 0..%d", (int)feature, GAAW_FEATURE_COUNT - 1);
  if (name) *name = feature_names[feature];
  if (enabled) *enabled = feature_enabled(feature);
  return GAAW_SUCCESS;
}

static int name_equals(const char *a, const char *b)
{
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != *b) return 0;
  return *a == *b;
}

gaaw_status_t gaaw_info_feature_by_name(const char *name, int *enabled)
{
  GAAW_ARG_NOT_NULL(NULL, name);
  GAAW_ARG_NOT_NULL(NULL, enabled);
  for (int f = 0; f < GAAW_FEATURE_COUNT; f++)
    if (name_equals(name, feature_names[f])) return gaaw_info_feature((gaaw_feature_t)f, NULL, enabled);
  GAAW_FAIL(NULL, GAAW_ERR_NOT_FOUND, "no build feature named '%s'", name);
}

int gaaw_info_backend_count(void)
{
  int n;
  gaaw_device_backends(&n);
  return n;
}

gaaw_status_t gaaw_info_backend(int index, const char **name, int *device_count)
{
  int n;
  const gaaw_device_ops *const *all = gaaw_device_backends(&n);
  GAAW_ARG_CHECK(NULL, index >= 0 && index < n, "backend index %d is not in 0..%d", index, n - 1);
  if (name) *name = all[index]->name;
  if (!device_count) return GAAW_SUCCESS;
  *device_count = 0;
  int count = 0;
  gaaw_status_t st = all[index]->device_count(&count);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(NULL, st, __FILE__, __LINE__, __func__);
  *device_count = count;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_info_device(int backend_index, int device_index, gaaw_device_info_t *info)
{
  const char *name;
  int count = 0;
  GAAW_CHECK_CTX(NULL, gaaw_info_backend(backend_index, &name, &count));
  GAAW_ARG_NOT_NULL(NULL, info);
  GAAW_ARG_CHECK(NULL, device_index >= 0 && device_index < count, "device index %d is not in 0..%d (the %s backend "
                 "sees %d device(s))", device_index, count - 1, name, count);
  const gaaw_device_ops *ops = gaaw_device_backends(NULL)[backend_index];
  if (!ops->device_info) GAAW_FAIL(NULL, GAAW_ERR_UNSUPPORTED, "the %s backend cannot describe its devices", name);
  memset(info, 0, sizeof *info);
  GAAW_CHECK_CTX(NULL, ops->device_info(device_index, info));
  info->name[sizeof info->name - 1] = '\0';
  return GAAW_SUCCESS;
}
