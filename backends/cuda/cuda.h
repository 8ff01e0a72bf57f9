/* The CUDA device backend: state of an opened device, error translation, streams,
 * and the cuBLASLt GEMM. Internal to gaaw (parallel/ and zero/ never include it;
 * the NCCL communicator backend does, for the streams).
 *
 * Device memory handles are plain cudaMalloc pointers (the caching allocator above
 * the backend reuses them); a tensor's address is handle + offset. Kernels run on
 * the context's compute stream; the communication stream waits on it through events
 * so that collectives can overlap later kernels. */
#ifndef GAAW_CUDA_CUDA_H
#define GAAW_CUDA_CUDA_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "backends/runtime/context_impl.h"

/* Remembered GEMMs: cuBLASLt's heuristic query, and creating the descriptors, cost
 * more than a small call. A hashed table (open addressing, GAAW_CUDA_GEMM_PROBES
 * slots per key, then the key's home slot is replaced) holds each shape's
 * descriptors and algorithm. */
#define GAAW_CUDA_GEMM_CACHE 1024 /* a power of two */
#define GAAW_CUDA_GEMM_PROBES 8

typedef struct {
  int dtype, ta, tb, beta_zero;
  int64_t batch, m, n, k;
  int align_a, align_b, align_c; /* bytes: powers of two, capped at 16 (all cuBLASLt asks) */
} gaaw_cuda_gemm_key;

typedef struct {
  int used;
  gaaw_cuda_gemm_key key;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our b), B (our a), C = D */
  cublasLtMatmulAlgo_t algo;
} gaaw_cuda_gemm_entry;

typedef struct {
  int device;
  cudaStream_t compute, comm;
  cudaEvent_t compute_done, comm_done; /* recorded to order one stream after the other */
  cublasLtHandle_t lt;
  void *lt_workspace;
  size_t lt_workspace_bytes;
  gaaw_cuda_gemm_entry *gemms; /* GAAW_CUDA_GEMM_CACHE entries */
  uint64_t gemm_hits, gemm_misses, gemm_evictions;
  /* The NCCL backend's watch of its operations still in flight (nccl_watch.c): the
   * host waits of this backend call it while they poll, so that a stuck or failed
   * collective ends them with an error (deadline, asynchronous errors) instead of
   * blocking forever. NULL while no NCCL communicator lives. */
  gaaw_status_t (*comm_watch)(gaaw_context_t ctx);
  void *nccl_watch; /* the NCCL backend's state for it */
} gaaw_cuda_state;

/* The CUDA backend's table (registered in backends/registry.c). */
extern const gaaw_device_ops gaaw_cuda_device_ops;

/* ---------------------------------------------------------------- errors, translated once */

/* GAAW_ERR_BACKEND (GAAW_ERR_NO_MEMORY for an allocation failure) with CUDA's text;
 * clears CUDA's last error, so that the next launcher does not report it again. */
gaaw_status_t gaaw_cuda_error(gaaw_context_t ctx, cudaError_t err, const char *file, int line, const char *func,
                              const char *call);
/* q (from cudaEventQuery, cudaStreamQuery), with CUDA's last error cleared when q
 * is cudaErrorNotReady, which is no failure. */
cudaError_t gaaw_cuda_poll(cudaError_t q);
/* What gaaw_cuda_error and gaaw_cuda_poll call to clear the last error:
 * cudaGetLastError, replaceable by a test's stub. */
extern cudaError_t (*gaaw_cuda_get_last_error)(void);
/* The same for cuBLAS(Lt) status codes. */
gaaw_status_t gaaw_cublas_error(gaaw_context_t ctx, cublasStatus_t st, const char *file, int line, const char *func,
                                const char *call);

#define GAAW_CUDA_CHECK(ctx, call)                                                        \
  do {                                                                                    \
    cudaError_t gaaw_cuda_err_ = (call);                                                  \
    if (gaaw_cuda_err_ != cudaSuccess)                                                    \
      return gaaw_cuda_error((ctx), gaaw_cuda_err_, __FILE__, __LINE__, __func__, #call); \
  } while (0)
#define GAAW_CUBLAS_CHECK(ctx, call)                                                       \
  do {                                                                                     \
    cublasStatus_t gaaw_cublas_st_ = (call);                                               \
    if (gaaw_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                          \
      return gaaw_cublas_error((ctx), gaaw_cublas_st_, __FILE__, __LINE__, __func__, #call); \
  } while (0)

/* ---------------------------------------------------------------- state and streams */

/* Whether ctx runs on the CUDA backend. */
int gaaw_cuda_is_context(gaaw_context_t ctx);
static inline gaaw_cuda_state *gaaw_cuda_state_of(gaaw_context_t ctx)
{
  return (gaaw_cuda_state *)ctx->device_state;
}
/* The communication stream starts what is queued after everything queued so far on
 * the compute stream, and the reverse. Not collective. */
gaaw_status_t gaaw_cuda_comm_after_compute(gaaw_context_t ctx);
gaaw_status_t gaaw_cuda_compute_after_comm(gaaw_context_t ctx);

/* The 16-byte UUID of ctx's GPU (for the check that no two ranks share one). */
gaaw_status_t gaaw_cuda_device_uuid(gaaw_context_t ctx, unsigned char uuid[16]);

/* Waits on the host until stream s is idle, polling (with comm_watch) rather than
 * blocking. Not collective. */
gaaw_status_t gaaw_cuda_wait_stream(gaaw_context_t ctx, cudaStream_t s);
/* Sleeps a little once a poll loop has spun polls times (spin first: most waits
 * are microseconds). */
void gaaw_cuda_pause(unsigned polls);

/* The device address of a tensor. */
static inline void *gaaw_cuda_ptr(const gaaw_tensor_t *t)
{
  return (char *)t->buf->handle + t->offset;
}

/* ---------------------------------------------------------------- GEMM (cuda_gemm.c) */

/* Row-major c = alpha op(a) op(b) + beta c for batch matrices stored one after the
 * other (a: m x k or k x m, b: k x n or n x k, c: m x n), all of dtype, queued on the
 * compute stream; f32 accumulation (tensor cores for bf16 and f16). */
gaaw_status_t gaaw_cuda_gemm_raw(gaaw_context_t ctx, gaaw_dtype_t dtype, gaaw_transpose_t ta, gaaw_transpose_t tb,
                                 int64_t batch, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
                                 const void *b, float beta, void *c);

/* Frees the remembered GEMMs (at close). */
void gaaw_cuda_gemm_cache_free(gaaw_cuda_state *st);
/* Lookups of the GEMM cache so far that found their shape, and that did not. */
void gaaw_cuda_gemm_cache_stats(gaaw_context_t ctx, uint64_t *hits, uint64_t *misses);

#endif
