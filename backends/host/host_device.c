/* The host backend's device: memory in this process, kernels run synchronously. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"

static gaaw_status_t host_device_count(int *count)
{
  *count = 1;
  return GAAW_SUCCESS;
}

/* Copies the value of the first /proc/cpuinfo line that starts with key (NULL:
 * none) into out; returns whether one was found. */
static int cpuinfo_value(const char *key, char *out, size_t len)
{
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  char line[4096];
  int found = 0;
  size_t klen = strlen(key);
  while (!found && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (strncmp(line, key, klen) != 0 || !colon) continue;
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = '\0';
    snprintf(out, len, "%s", v);
    found = 1;
  }
  fclose(f);
  return found;
}

/* Whether the space-separated flag list holds flag as a whole word. */
static int has_flag(const char *flags, const char *flag)
{
  size_t n = strlen(flag);
  for (const char *p = strstr(flags, flag); p; p = strstr(p + 1, flag))
    if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
  return 0;
}

/* The CPU this process runs on: its model, physical memory and online cores. */
static gaaw_status_t host_device_info(int index, gaaw_device_info_t *info)
{
  (void)index;
  if (!cpuinfo_value("model name", info->name, sizeof info->name)) snprintf(info->name, sizeof info->name, "host CPU");
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE), cores = sysconf(_SC_NPROCESSORS_ONLN);
  info->memory_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  info->compute_units = cores > 0 ? (int)cores : 1;
  char flags[4096];
  if (cpuinfo_value("flags", flags, sizeof flags)) {
    info->fp16 = has_flag(flags, "avx512_fp16");
    info->bf16 = has_flag(flags, "avx512_bf16") || has_flag(flags, "amx_bf16");
  }
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
  .device_info = host_device_info,
  .open = host_open,
  .close = host_close,
  .mem_alloc = host_mem_alloc,
  .mem_free = host_mem_free,
  .mem_write = host_mem_write,
  .mem_read = host_mem_read,
  .host_ptr = host_host_ptr,
  GAAW_HOST_KERNEL_ENTRIES
};
