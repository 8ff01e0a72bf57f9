/* The host backend's device: memory in this process, kernels run synchronously. */
#include <stdlib.h>
#include <string.h>

#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"

static gaaw_status_t host_device_count(int *count)
{
  *count = 1;
  return GAAW_SUCCESS;
}

static gaaw_status_t host_open(gaaw_context_t ctx, int index)
{
  (void)index;
  GAAW_CHECK(gaaw_host_threads_configure(ctx));
  return GAAW_SUCCESS;
}

static void host_close(gaaw_context_t ctx)
{
  (void)ctx;
}

static gaaw_status_t host_mem_alloc(gaaw_context_t ctx, size_t bytes, void **handle)
{
  /* 64-byte alignment: whole cache lines and aligned AVX-512 loads. */
  size_t rounded = (bytes + 63) & ~(size_t)63;
  *handle = aligned_alloc(64, rounded);
  if (!*handle) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "host allocation of %zu bytes failed", bytes);
  return GAAW_SUCCESS;
}

static void host_mem_free(gaaw_context_t ctx, void *handle)
{
  (void)ctx;
  free(handle);
}

static gaaw_status_t host_mem_write(gaaw_context_t ctx, void *handle, size_t offset, const void *src, size_t bytes)
{
  (void)ctx;
  memcpy((char *)handle + offset, src, bytes);
  return GAAW_SUCCESS;
}

static gaaw_status_t host_mem_read(gaaw_context_t ctx, void *handle, size_t offset, void *dst, size_t bytes)
{
  (void)ctx;
  memcpy(dst, (const char *)handle + offset, bytes);
  return GAAW_SUCCESS;
}

static void *host_host_ptr(void *handle, size_t offset)
{
  return (char *)handle + offset;
}

const gaaw_device_ops gaaw_host_device_ops = {
  .name = "host",
  .device_count = host_device_count,
  .open = host_open,
  .close = host_close,
  .mem_alloc = host_mem_alloc,
  .mem_free = host_mem_free,
  .mem_write = host_mem_write,
  .mem_read = host_mem_read,
  .host_ptr = host_host_ptr,
  GAAW_HOST_KERNEL_ENTRIES
};
