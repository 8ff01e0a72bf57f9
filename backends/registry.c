/* The device backends built into this library, in auto-selection order, with
 * their missing operations filled by stubs that report GAAW_ERR_UNSUPPORTED. */
#include <pthread.h>
#include <string.h>

#include "config.h"
#include "backends/runtime/context_impl.h"
#ifdef GAAW_HAVE_CUDA
extern const gaaw_device_ops gaaw_cuda_device_ops; /* backends/cuda/cuda_device.c */
#endif

#define GAAW_UNSUPPORTED_STUB(op, params)                                                          \
  static gaaw_status_t unsupported_##op params                                                     \
  {                                                                                                \
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "the %s backend has no %s kernel", ctx->device->name, #op); \
  }
GAAW_DEVICE_KERNEL_LIST(GAAW_UNSUPPORTED_STUB)
GAAW_DEVICE_OPTIONAL_KERNEL_LIST(GAAW_UNSUPPORTED_STUB)
#undef GAAW_UNSUPPORTED_STUB

#ifdef GAAW_HAVE_OPENCL
extern const gaaw_device_ops gaaw_opencl_device_ops; /* backends/opencl/opencl_device.c */
#endif

/* Registered tables, as written by each backend (cuda > opencl > host). */
static const gaaw_device_ops *const registered[] = {
#ifdef GAAW_HAVE_CUDA
  &gaaw_cuda_device_ops,
#endif
#ifdef GAAW_HAVE_OPENCL
  &gaaw_opencl_device_ops,
#endif
  &gaaw_host_device_ops,
};
enum { BACKEND_COUNT = sizeof registered / sizeof registered[0] };

static gaaw_device_ops completed[BACKEND_COUNT];
static const gaaw_device_ops *completed_ptrs[BACKEND_COUNT];
static pthread_once_t completed_once = PTHREAD_ONCE_INIT;

static void complete_tables(void)
{
  for (int i = 0; i < BACKEND_COUNT; i++) {
    completed[i] = *registered[i];
#define GAAW_FILL_STUB(op, params) \
  if (!completed[i].op) completed[i].op = unsupported_##op;
    GAAW_DEVICE_KERNEL_LIST(GAAW_FILL_STUB)
    GAAW_DEVICE_OPTIONAL_KERNEL_LIST(GAAW_FILL_STUB)
#undef GAAW_FILL_STUB
    completed_ptrs[i] = &completed[i];
  }
}

/* A NULL entry counts as missing too (a table not completed here, as tests build). */
#define GAAW_DEVICE_HAS(name, params)                                  \
  int gaaw_device_has_##name(const gaaw_device_ops *ops)               \
  {                                                                    \
    return ops->name != NULL && ops->name != unsupported_##name;       \
  }
GAAW_DEVICE_OPTIONAL_KERNEL_LIST(GAAW_DEVICE_HAS)
#undef GAAW_DEVICE_HAS

const gaaw_device_ops *const *gaaw_device_backends(int *count)
{
  pthread_once(&completed_once, complete_tables);
  if (count) *count = BACKEND_COUNT;
  return completed_ptrs;
}

const gaaw_device_ops *gaaw_device_backend(const char *name)
{
  int n;
  const gaaw_device_ops *const *all = gaaw_device_backends(&n);
  for (int i = 0; name && i < n; i++)
    if (strcmp(all[i]->name, name) == 0) return all[i];
  return NULL;
}

int gaaw_device_provides(const gaaw_device_ops *ops, const char *op)
{
#define GAAW_PROVIDES(name, params) \
  if (op && strcmp(op, #name) == 0) return ops->name != unsupported_##name;
  GAAW_DEVICE_KERNEL_LIST(GAAW_PROVIDES)
  GAAW_DEVICE_OPTIONAL_KERNEL_LIST(GAAW_PROVIDES)
#undef GAAW_PROVIDES
  return -1;
}
