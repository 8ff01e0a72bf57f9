/* gaaw memory: device buffers with an accounting category, and tensor views on
 * them. A buffer is an opaque handle (a host pointer, a CUDA pointer or a cl_mem);
 * a tensor is a plain struct (buffer, byte offset, dtype, shape) that views one, so
 * the same code addresses OpenCL memory, which has no device pointers. */
#ifndef GAAW_TENSOR_H
#define GAAW_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "gaaw/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GAAW_F32 = 0, GAAW_BF16 = 1, GAAW_F16 = 2, GAAW_I32 = 3 } gaaw_dtype_t;
#define GAAW_DTYPE_COUNT 4

/* What a buffer holds, for memory accounting. */
#define GAAW_MEMORY_CATEGORY_LIST(X) \
  X(GAAW_MEM_PARAMS, 0, "params")               \
  X(GAAW_MEM_GRADS, 1, "grads")                 \
  X(GAAW_MEM_OPTIMIZER, 2, "optimizer")         \
  X(GAAW_MEM_ACTIVATIONS, 3, "activations")     \
  X(GAAW_MEM_COMMUNICATION, 4, "communication") \
  X(GAAW_MEM_WORKSPACE, 5, "workspace")
#define GAAW_MEMORY_CATEGORY_ENTRY(name, value, text) name = value,
typedef enum { GAAW_MEMORY_CATEGORY_LIST(GAAW_MEMORY_CATEGORY_ENTRY) } gaaw_mem_category_t;
#undef GAAW_MEMORY_CATEGORY_ENTRY
#define GAAW_MEM_CATEGORY_COUNT 6

typedef struct gaaw_buffer_s *gaaw_buffer_t;

#define GAAW_MAX_DIMS 4

/* A view: elements [offset, offset + numel * size(dtype)) bytes of buf, row-major
 * (contiguous, last dimension fastest). */
typedef struct {
  gaaw_buffer_t buf;
  size_t offset;              /* bytes from the start of buf */
  gaaw_dtype_t dtype;
  int ndim;                   /* 1..GAAW_MAX_DIMS */
  int64_t shape[GAAW_MAX_DIMS];
} gaaw_tensor_t;

/* Bytes of one element, 0 for an invalid dtype. Not collective. */
size_t gaaw_dtype_size(gaaw_dtype_t dtype);
/* "f32", "bf16", "f16", "i32"; "invalid" otherwise. Not collective. */
const char *gaaw_dtype_name(gaaw_dtype_t dtype);
/* "params", "grads", ...; "invalid" otherwise. Not collective. */
const char *gaaw_mem_category_name(gaaw_mem_category_t category);

/* Allocates bytes (> 0) of device memory on the context's device, accounted under
 * category. Freed memory is cached and reused for later allocations of a similar
 * size, because fresh memory is slow everywhere (first touch, cudaMalloc,
 * clCreateBuffer). Contents are undefined. Not collective. */
gaaw_status_t gaaw_buffer_alloc(gaaw_context_t ctx, size_t bytes, gaaw_mem_category_t category,
                                gaaw_buffer_t *buf);
/* Returns *buf to the cache and sets *buf to NULL; NULL is a no-op. Not collective. */
gaaw_status_t gaaw_buffer_free(gaaw_context_t ctx, gaaw_buffer_t *buf);
/* The buffer's size in bytes as asked for. Not collective. */
gaaw_status_t gaaw_buffer_size(gaaw_buffer_t buf, size_t *bytes);
/* Copies between host memory and the buffer, bytes at byte offset. Blocks until the
 * copy is done. Not collective. */
gaaw_status_t gaaw_buffer_write(gaaw_context_t ctx, gaaw_buffer_t buf, size_t offset,
                                const void *src, size_t bytes);
gaaw_status_t gaaw_buffer_read(gaaw_context_t ctx, gaaw_buffer_t buf, size_t offset, void *dst,
                               size_t bytes);
/* The host address of a host-backend buffer (GAAW_ERR_UNSUPPORTED for device memory
 * that has none). Not collective. */
gaaw_status_t gaaw_buffer_host_ptr(gaaw_buffer_t buf, void **ptr);

/* Fills in a contiguous view of buf; checks that it lies inside the buffer.
 * ndim in 1..GAAW_MAX_DIMS, every extent >= 0. Not collective. */
gaaw_status_t gaaw_tensor_view(gaaw_buffer_t buf, size_t offset, gaaw_dtype_t dtype, int ndim,
                               const int64_t *shape, gaaw_tensor_t *t);
/* Allocates a buffer exactly large enough and views all of it. Free t->buf with
 * gaaw_buffer_free. Not collective. */
gaaw_status_t gaaw_tensor_alloc(gaaw_context_t ctx, gaaw_dtype_t dtype, int ndim,
                                const int64_t *shape, gaaw_mem_category_t category,
                                gaaw_tensor_t *t);
/* Number of elements (product of the shape). */
int64_t gaaw_tensor_numel(const gaaw_tensor_t *t);

/* Memory accounting on this rank: bytes in use (as asked for) now and at the peak,
 * per category. Not collective. */
gaaw_status_t gaaw_memory_usage(gaaw_context_t ctx, gaaw_mem_category_t category,
                                size_t *current_bytes, size_t *peak_bytes);
/* Every category together: bytes in use now, and the most in use at any one
 * instant since the context began or the last gaaw_memory_reset_peak (what a
 * device must hold; at most the sum of the categories' peaks, which may come at
 * different instants). Bytes as asked for, as gaaw_memory_usage counts them: the
 * allocator's rounding to size classes and its cache are not in it
 * (gaaw_memory_cached). Not collective. */
gaaw_status_t gaaw_memory_total(gaaw_context_t ctx, size_t *current_bytes, size_t *peak_bytes);
/* Bytes held by the caching allocator but not in use, and a call that gives them back
 * to the device. Not collective. */
gaaw_status_t gaaw_memory_cached(gaaw_context_t ctx, size_t *bytes);
gaaw_status_t gaaw_memory_release_cached(gaaw_context_t ctx);
/* Restarts peak tracking (per category and in all) at the current usage. Not
 * collective. */
gaaw_status_t gaaw_memory_reset_peak(gaaw_context_t ctx);

#ifdef __cplusplus
}
#endif
#endif
