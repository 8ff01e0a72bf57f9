/* The CUDA backend's device: device count and choice, context state (streams,
 * events, cuBLASLt), raw memory, error translation, and the table. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/runtime/log.h"

/* cuBLASLt workspace: what NVIDIA recommends for Hopper (32 MiB) serves Ampere too. */
enum { LT_WORKSPACE_BYTES = 32 << 20 };

cudaError_t (*gaaw_cuda_get_last_error)(void) = cudaGetLastError;

cudaError_t gaaw_cuda_poll(cudaError_t q)
{
  if (q == cudaErrorNotReady) gaaw_cuda_get_last_error(); /* "not ready" is no failure: forget it */
  return q;
}

gaaw_status_t gaaw_cuda_error(gaaw_context_t ctx, cudaError_t err, const char *file, int line, const char *func,
                              const char *call)
{
  /* Clear CUDA's last error (when it is not sticky), or the next launcher's
   * cudaGetLastError would report this failure a second time. */
  gaaw_cuda_get_last_error();
  gaaw_status_t st = err == cudaErrorMemoryAllocation ? GAAW_ERR_NO_MEMORY : GAAW_ERR_BACKEND;
  return gaaw_error_raise(ctx, st, file, line, func, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                          cudaGetErrorName(err));
}

gaaw_status_t gaaw_cublas_error(gaaw_context_t ctx, cublasStatus_t s, const char *file, int line, const char *func,
                                const char *call)
{
  gaaw_status_t st = s == CUBLAS_STATUS_ALLOC_FAILED ? GAAW_ERR_NO_MEMORY : GAAW_ERR_BACKEND;
  return gaaw_error_raise(ctx, st, file, line, func, "%s failed: %s (%s)", call, cublasLtGetStatusString(s),
                          cublasLtGetStatusName(s));
}

int gaaw_cuda_is_context(gaaw_context_t ctx)
{
  /* ctx->device is the registry's completed copy of the table: compare by name. */
  return ctx && ctx->device && ctx->device_state && strcmp(ctx->device->name, gaaw_cuda_device_ops.name) == 0;
}

/* No driver, no GPU, or a driver too old for this runtime: the backend sees no
 * device (count 0), so that backend=auto falls back to the next backend. */
static gaaw_status_t cuda_device_count(int *count)
{
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear the error so later calls do not see it */
    n = 0;
  }
  *count = n;
  return GAAW_SUCCESS;
}

/* Device index from cudaGetDeviceProperties; f16 arithmetic from compute
 * capability 5.3, bf16 from 8.0. */
static gaaw_status_t cuda_device_info(int index, gaaw_device_info_t *info)
{
  struct cudaDeviceProp prop;
  GAAW_CUDA_CHECK(NULL, cudaGetDeviceProperties(&prop, index));
  size_t len = strnlen(prop.name, sizeof prop.name);
  if (len >= sizeof info->name) len = sizeof info->name - 1;
  memcpy(info->name, prop.name, len);
  info->name[len] = '\0';
  info->memory_bytes = (uint64_t)prop.totalGlobalMem;
  info->compute_units = prop.multiProcessorCount;
  int cc = prop.major * 10 + prop.minor;
  info->fp16 = cc >= 53;
  info->bf16 = cc >= 80;
  return GAAW_SUCCESS;
}

static void release(gaaw_cuda_state *st)
{
  gaaw_cuda_gemm_cache_free(st);
  if (st->lt_workspace) cudaFree(st->lt_workspace);
  if (st->lt) cublasLtDestroy(st->lt);
  if (st->compute_done) cudaEventDestroy(st->compute_done);
  if (st->comm_done) cudaEventDestroy(st->comm_done);
  if (st->compute) cudaStreamDestroy(st->compute);
  if (st->comm) cudaStreamDestroy(st->comm);
  free(st);
}

static gaaw_status_t open_state(gaaw_context_t ctx, gaaw_cuda_state *st, int index)
{
  GAAW_CUDA_CHECK(ctx, cudaSetDevice(index));
  /* Non-blocking streams: no implicit ordering against the legacy default stream. */
  GAAW_CUDA_CHECK(ctx, cudaStreamCreateWithFlags(&st->compute, cudaStreamNonBlocking));
  /* Communication first when both streams have work ready: a collective that waits
   * for SMs delays every rank, a kernel only this one. */
  int least = 0, greatest = 0;
  GAAW_CUDA_CHECK(ctx, cudaDeviceGetStreamPriorityRange(&least, &greatest));
  GAAW_CUDA_CHECK(ctx, cudaStreamCreateWithPriority(&st->comm, cudaStreamNonBlocking, greatest));
  GAAW_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&st->compute_done, cudaEventDisableTiming));
  GAAW_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&st->comm_done, cudaEventDisableTiming));
  GAAW_CUBLAS_CHECK(ctx, cublasLtCreate(&st->lt));
  GAAW_CUDA_CHECK(ctx, cudaMalloc(&st->lt_workspace, LT_WORKSPACE_BYTES));
  st->lt_workspace_bytes = LT_WORKSPACE_BYTES;
  return GAAW_SUCCESS;
}

static gaaw_status_t cuda_open(gaaw_context_t ctx, int index)
{
  int count = 0;
  cuda_device_count(&count);
  if (count == 0)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "the cuda backend finds no CUDA device on this node (no GPU or no driver)");
  GAAW_ARG_CHECK(ctx, index >= 0 && index < count, "CUDA device %d does not exist: this node has %d (0..%d)", index,
                 count, count - 1);
  gaaw_cuda_state *st = calloc(1, sizeof *st);
  if (!st) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the CUDA backend state");
  st->device = index;
  gaaw_status_t status = open_state(ctx, st, index);
  if (status != GAAW_SUCCESS) {
    release(st);
    return gaaw_error_trace(ctx, status, __FILE__, __LINE__, __func__);
  }
  ctx->device_state = st;
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, index) == cudaSuccess)
    gaaw_log(GAAW_LOG_INFO, "CUDA device %d: %s, compute capability %d.%d, %d SMs, %.1f GiB", index, prop.name,
             prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
  return GAAW_SUCCESS;
}

static void cuda_close(gaaw_context_t ctx)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  if (!st) return;
  cudaSetDevice(st->device);
  cudaStreamSynchronize(st->compute);
  cudaStreamSynchronize(st->comm);
  uint64_t lookups = st->gemm_hits + st->gemm_misses;
  if (lookups)
    gaaw_log(GAAW_LOG_INFO, "cuBLASLt GEMM cache: %llu hits, %llu misses (hit rate %.1f%%), %llu evictions",
             (unsigned long long)st->gemm_hits, (unsigned long long)st->gemm_misses,
             100.0 * (double)st->gemm_hits / (double)lookups, (unsigned long long)st->gemm_evictions);
  gaaw_allocator_release_pending(ctx); /* the streams are idle: every event has happened */
  release(st);
  ctx->device_state = NULL;
}

static gaaw_status_t cuda_mem_alloc(gaaw_context_t ctx, size_t bytes, void **handle)
{
  *handle = NULL;
  GAAW_CUDA_CHECK(ctx, cudaSetDevice(gaaw_cuda_state_of(ctx)->device));
  cudaError_t err = cudaMalloc(handle, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    GAAW_FAIL(ctx, err == cudaErrorMemoryAllocation ? GAAW_ERR_NO_MEMORY : GAAW_ERR_BACKEND,
              "cudaMalloc of %zu bytes failed: %s (%s)", bytes, cudaGetErrorString(err), cudaGetErrorName(err));
  }
  return GAAW_SUCCESS;
}

/* Page-locked host memory, usable by every device of the process (portable). */
static gaaw_status_t cuda_pinned_alloc(gaaw_context_t ctx, size_t bytes, void **ptr)
{
  *ptr = NULL;
  cudaError_t err = cudaHostAlloc(ptr, bytes, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    *ptr = NULL;
    GAAW_FAIL(ctx, err == cudaErrorMemoryAllocation ? GAAW_ERR_NO_MEMORY : GAAW_ERR_BACKEND,
              "cudaHostAlloc of %zu bytes failed: %s (%s)", bytes, cudaGetErrorString(err), cudaGetErrorName(err));
  }
  return GAAW_SUCCESS;
}

static void cuda_pinned_free(gaaw_context_t ctx, void *ptr)
{
  (void)ctx;
  cudaFreeHost(ptr);
}

static void cuda_mem_free(gaaw_context_t ctx, void *handle)
{
  (void)ctx;
  cudaFree(handle); /* waits for the device, so no queued kernel still uses it */
}

void gaaw_cuda_pause(unsigned polls)
{
  if (polls < 1000) return;
  struct timespec pause = {0, polls < 100000 ? 1000 : 100000};
  nanosleep(&pause, NULL);
}

gaaw_status_t gaaw_cuda_wait_stream(gaaw_context_t ctx, cudaStream_t s)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  for (unsigned polls = 0;; polls++) {
    cudaError_t q = gaaw_cuda_poll(cudaStreamQuery(s));
    if (q == cudaSuccess) return GAAW_SUCCESS;
    if (q != cudaErrorNotReady) return gaaw_cuda_error(ctx, q, __FILE__, __LINE__, __func__, "cudaStreamQuery");
    if (st->comm_watch) GAAW_CHECK(st->comm_watch(ctx));
    gaaw_cuda_pause(polls);
  }
}

/* Copies are queued on the compute stream, after the kernels that use the buffer
 * (and the collectives those wait for), and waited for: the public functions
 * block until the copy is done. */
static gaaw_status_t cuda_mem_write(gaaw_context_t ctx, void *handle, size_t offset, const void *src, size_t bytes)
{
  cudaStream_t s = gaaw_cuda_state_of(ctx)->compute;
  GAAW_CUDA_CHECK(ctx, cudaMemcpyAsync((char *)handle + offset, src, bytes, cudaMemcpyHostToDevice, s));
  GAAW_CHECK(gaaw_cuda_wait_stream(ctx, s));
  return GAAW_SUCCESS;
}

static gaaw_status_t cuda_mem_read(gaaw_context_t ctx, void *handle, size_t offset, void *dst, size_t bytes)
{
  cudaStream_t s = gaaw_cuda_state_of(ctx)->compute;
  GAAW_CUDA_CHECK(ctx, cudaMemcpyAsync(dst, (const char *)handle + offset, bytes, cudaMemcpyDeviceToHost, s));
  GAAW_CHECK(gaaw_cuda_wait_stream(ctx, s));
  return GAAW_SUCCESS;
}

/* Events for the stream-aware allocator. */
static gaaw_status_t cuda_event_record(gaaw_context_t ctx, int stream, void **event)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  cudaEvent_t ev;
  GAAW_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaError_t e = cudaEventRecord(ev, stream == GAAW_STREAM_COMM ? st->comm : st->compute);
  if (e != cudaSuccess) {
    cudaEventDestroy(ev);
    return gaaw_cuda_error(ctx, e, __FILE__, __LINE__, __func__, "cudaEventRecord");
  }
  *event = ev;
  return GAAW_SUCCESS;
}

static gaaw_status_t cuda_event_query(gaaw_context_t ctx, void *event, int *done)
{
  cudaError_t q = gaaw_cuda_poll(cudaEventQuery((cudaEvent_t)event));
  *done = q == cudaSuccess;
  if (q != cudaSuccess && q != cudaErrorNotReady)
    return gaaw_cuda_error(ctx, q, __FILE__, __LINE__, __func__, "cudaEventQuery");
  return GAAW_SUCCESS;
}

static void cuda_event_destroy(gaaw_context_t ctx, void *event)
{
  (void)ctx;
  cudaEventDestroy((cudaEvent_t)event);
}

static void *cuda_host_ptr(void *handle, size_t offset)
{
  (void)handle;
  (void)offset;
  return NULL; /* device memory has no host address */
}

gaaw_status_t gaaw_cuda_device_uuid(gaaw_context_t ctx, unsigned char uuid[16])
{
  struct cudaDeviceProp prop;
  GAAW_CUDA_CHECK(ctx, cudaGetDeviceProperties(&prop, gaaw_cuda_state_of(ctx)->device));
  memcpy(uuid, prop.uuid.bytes, 16);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_comm_after_compute(gaaw_context_t ctx)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  GAAW_CUDA_CHECK(ctx, cudaEventRecord(st->compute_done, st->compute));
  GAAW_CUDA_CHECK(ctx, cudaStreamWaitEvent(st->comm, st->compute_done, 0));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_compute_after_comm(gaaw_context_t ctx)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  GAAW_CUDA_CHECK(ctx, cudaEventRecord(st->comm_done, st->comm));
  GAAW_CUDA_CHECK(ctx, cudaStreamWaitEvent(st->compute, st->comm_done, 0));
  return GAAW_SUCCESS;
}

/* Kernel entries (cuda_ops.c): every kernel of the list, and the optional ones the
 * backend has (the others are completed with the unsupported stub). */
#define CUDA_DECLARE(name, params) gaaw_status_t gaaw_cuda_op_##name params;
GAAW_DEVICE_KERNEL_LIST(CUDA_DECLARE)
GAAW_DEVICE_OPTIONAL_KERNEL_LIST(CUDA_DECLARE)
#undef CUDA_DECLARE
#define CUDA_TABLE_ENTRY(name, params) .name = gaaw_cuda_op_##name,

const gaaw_device_ops gaaw_cuda_device_ops = {
  .name = "cuda",
  .device_count = cuda_device_count,
  .device_info = cuda_device_info,
  .open = cuda_open,
  .close = cuda_close,
  .mem_alloc = cuda_mem_alloc,
  .mem_free = cuda_mem_free,
  .mem_write = cuda_mem_write,
  .mem_read = cuda_mem_read,
  .host_ptr = cuda_host_ptr,
  .pinned_alloc = cuda_pinned_alloc,
  .pinned_free = cuda_pinned_free,
  .event_record = cuda_event_record,
  .event_query = cuda_event_query,
  .event_destroy = cuda_event_destroy,
  GAAW_DEVICE_KERNEL_LIST(CUDA_TABLE_ENTRY)
  .attention_block_forward = gaaw_cuda_op_attention_block_forward,
  .attention_block_backward = gaaw_cuda_op_attention_block_backward,
  .attention_merge = gaaw_cuda_op_attention_merge,
};
