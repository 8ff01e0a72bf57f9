/* Buffers, tensor views and the caching allocator with per-category accounting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/context_impl.h"
#include "backends/runtime/log.h"

size_t gaaw_dtype_size(gaaw_dtype_t dtype)
{
  switch (dtype) {
  case GAAW_F32: return 4;
  case GAAW_BF16: return 2;
  case GAAW_F16: return 2;
  case GAAW_I32: return 4;
  }
  return 0;
}

const char *gaaw_dtype_name(gaaw_dtype_t dtype)
{
  static const char *const names[] = {"f32", "bf16", "f16", "i32"};
  return (unsigned)dtype < GAAW_DTYPE_COUNT ? names[dtype] : "invalid";
}

const char *gaaw_mem_category_name(gaaw_mem_category_t category)
{
#define GAAW_CATEGORY_NAME_CASE(name, value, text) \
  case value: return text;
  switch ((int)category) { GAAW_MEMORY_CATEGORY_LIST(GAAW_CATEGORY_NAME_CASE) }
#undef GAAW_CATEGORY_NAME_CASE
  return "invalid";
}

/* Size class of a request: capacity rounded up to 1/8 of its power-of-two octave
 * (at least 256 bytes), and the class index of that capacity. */
static void size_class(size_t bytes, size_t *capacity, int *index)
{
  if (bytes <= 256) {
    *capacity = 256;
    *index = 0;
    return;
  }
  int e = 0;
  while (e < 63 && ((size_t)1 << e) < bytes) e++; /* 2^(e-1) < bytes <= 2^e */
  size_t granule = (size_t)1 << (e - 4);
  size_t steps = (bytes + granule - 1) / granule; /* 9..16 */
  *capacity = steps * granule;
  *index = 1 + (e - 9) * 8 + (int)(steps - 9);
}

static void account(gaaw_allocator *a, gaaw_mem_category_t category, size_t bytes, int sign)
{
  if (sign > 0) {
    a->current[category] += bytes;
    if (a->current[category] > a->peak[category]) a->peak[category] = a->current[category];
    a->total += bytes;
    if (a->total > a->total_peak) a->total_peak = a->total;
  } else {
    a->current[category] -= bytes;
    a->total -= bytes;
  }
}

_Static_assert(GAAW_ALLOC_STREAMS == GAAW_STREAM_COUNT, "allocator.h must know every stream of device.h");

/* A block's memory back to the backend. */
static void release_block(gaaw_context_t ctx, struct gaaw_buffer_s *b)
{
  ctx->device->mem_free(ctx, b->handle);
  ctx->allocator.held -= b->capacity;
  free(b);
}

/* A block no stream uses any more: into the cache, or back to the backend. */
static void retire(gaaw_context_t ctx, struct gaaw_buffer_s *b)
{
  gaaw_allocator *a = &ctx->allocator;
  b->streams = 0;
  if (a->cache_enabled) {
    size_t capacity;
    int index;
    size_class(b->capacity, &capacity, &index);
    b->next_free = a->free_lists[index];
    a->free_lists[index] = b;
    a->cached_bytes += b->capacity;
  } else {
    release_block(ctx, b);
  }
}

/* Whether every event of a pending block has happened; those that have are
 * destroyed. A failing query keeps the block pending (never reused unsafely). */
static int events_done(gaaw_context_t ctx, struct gaaw_buffer_s *b)
{
  int all = 1;
  for (int s = 0; s < GAAW_ALLOC_STREAMS; s++) {
    if (!b->events[s]) continue;
    int done = 0;
    if (ctx->device->event_query(ctx, b->events[s], &done) == GAAW_SUCCESS && done) {
      ctx->device->event_destroy(ctx, b->events[s]);
      b->events[s] = NULL;
    } else {
      all = 0;
    }
  }
  return all;
}

void gaaw_allocator_collect(gaaw_context_t ctx)
{
  gaaw_allocator *a = &ctx->allocator;
  struct gaaw_buffer_s *prev = NULL, *b = a->pending;
  while (b) {
    struct gaaw_buffer_s *next = b->next_free;
    if (events_done(ctx, b)) {
      if (prev)
        prev->next_free = next;
      else
        a->pending = next;
      if (a->pending_last == b) a->pending_last = prev;
      a->pending_bytes -= b->capacity;
      retire(ctx, b);
    } else {
      prev = b;
    }
    b = next;
  }
}

void gaaw_buffer_use_on_stream(gaaw_buffer_t buf, int stream)
{
  if (buf && stream > GAAW_STREAM_COMPUTE && stream < GAAW_ALLOC_STREAMS) buf->streams |= 1u << stream;
}

/* At a free: an event on each stream other than compute that used b. With them b
 * goes to the pending list (1); without (no other stream, or a backend without
 * events) it is free at once (0). If an event cannot be made, the device is
 * synchronised instead, which orders everything. */
static int make_pending(gaaw_context_t ctx, struct gaaw_buffer_s *b)
{
  const gaaw_device_ops *dev = ctx->device;
  if (!b->streams || !dev->event_record || !dev->event_query || !dev->event_destroy) return 0;
  int any = 0;
  for (int s = GAAW_STREAM_COMPUTE + 1; s < GAAW_ALLOC_STREAMS; s++) {
    if (!(b->streams & (1u << s))) continue;
    if (dev->event_record(ctx, s, &b->events[s]) == GAAW_SUCCESS) {
      any = 1;
    } else {
      b->events[s] = NULL;
      dev->synchronize(ctx);
    }
  }
  if (!any) return 0;
  gaaw_allocator *a = &ctx->allocator;
  b->next_free = NULL;
  if (a->pending_last)
    a->pending_last->next_free = b;
  else
    a->pending = b;
  a->pending_last = b;
  a->pending_bytes += b->capacity;
  return 1;
}

/* Whether capacity more bytes fit under device_memory_limit, after giving the
 * cache back if that makes them fit; else GAAW_ERR_NO_MEMORY naming the request
 * and what each category holds. */
static gaaw_status_t check_limit(gaaw_context_t ctx, size_t capacity, gaaw_mem_category_t category)
{
  gaaw_allocator *a = &ctx->allocator;
  if (!a->limit || a->held + capacity <= a->limit) return GAAW_SUCCESS;
  gaaw_allocator_release_cached(ctx);
  if (a->held + capacity <= a->limit) return GAAW_SUCCESS;
  char holds[512];
  size_t n = 0;
  for (int c = 0; c < GAAW_MEM_CATEGORY_COUNT && n < sizeof holds; c++)
    n += (size_t)snprintf(holds + n, sizeof holds - n, "%s%s %zu", c ? ", " : "",
                          gaaw_mem_category_name((gaaw_mem_category_t)c), a->current[c]);
  GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "device_memory_limit %zu bytes: %zu bytes of %s do not fit beside the %zu "
            "held (in use by category: %s; pending %zu)", a->limit, capacity, gaaw_mem_category_name(category),
            a->held, holds, a->pending_bytes);
}

gaaw_status_t gaaw_buffer_alloc(gaaw_context_t ctx, size_t bytes, gaaw_mem_category_t category,
                                gaaw_buffer_t *buf)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, buf);
  *buf = NULL;
  GAAW_ARG_CHECK(ctx, bytes > 0, "bytes must be > 0, got %zu", bytes);
  GAAW_ARG_CHECK(ctx, (unsigned)category < GAAW_MEM_CATEGORY_COUNT, "category %d is not a gaaw_mem_category_t",
                 (int)category);
  gaaw_allocator *a = &ctx->allocator;
  if (a->pending) gaaw_allocator_collect(ctx);
  size_t capacity;
  int index;
  size_class(bytes, &capacity, &index);
  struct gaaw_buffer_s *b = a->free_lists[index];
  if (b) {
    a->free_lists[index] = b->next_free;
    a->cached_bytes -= b->capacity;
  } else {
    GAAW_CHECK(check_limit(ctx, capacity, category));
    b = calloc(1, sizeof *b);
    if (!b) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a buffer descriptor");
    gaaw_status_t st = ctx->device->mem_alloc(ctx, capacity, &b->handle);
    if (st != GAAW_SUCCESS) {
      free(b);
      return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
    }
    b->ctx = ctx;
    b->capacity = capacity;
    a->held += capacity;
  }
  b->bytes = bytes;
  b->category = category;
  b->streams = 0;
  b->next_free = NULL;
  account(a, category, bytes, +1);
  *buf = b;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_buffer_free(gaaw_context_t ctx, gaaw_buffer_t *buf)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  if (!buf || !*buf) return GAAW_SUCCESS;
  struct gaaw_buffer_s *b = *buf;
  GAAW_ARG_CHECK(ctx, b->ctx == ctx, "buffer belongs to another context");
  account(&ctx->allocator, b->category, b->bytes, -1);
  if (!make_pending(ctx, b)) retire(ctx, b);
  *buf = NULL;
  return GAAW_SUCCESS;
}

void gaaw_allocator_release_cached(gaaw_context_t ctx)
{
  gaaw_allocator *a = &ctx->allocator;
  if (a->pending) gaaw_allocator_collect(ctx);
  for (int i = 0; i < GAAW_ALLOC_CLASSES; i++) {
    while (a->free_lists[i]) {
      struct gaaw_buffer_s *b = a->free_lists[i];
      a->free_lists[i] = b->next_free;
      release_block(ctx, b);
    }
  }
  a->cached_bytes = 0;
}

void gaaw_allocator_release_pending(gaaw_context_t ctx)
{
  gaaw_allocator *a = &ctx->allocator;
  while (a->pending) {
    struct gaaw_buffer_s *b = a->pending;
    a->pending = b->next_free;
    for (int s = 0; s < GAAW_ALLOC_STREAMS; s++)
      if (b->events[s]) ctx->device->event_destroy(ctx, b->events[s]);
    release_block(ctx, b);
  }
  a->pending_last = NULL;
  a->pending_bytes = 0;
}

gaaw_status_t gaaw_buffer_size(gaaw_buffer_t buf, size_t *bytes)
{
  GAAW_ARG_NOT_NULL(NULL, buf);
  GAAW_ARG_NOT_NULL(buf->ctx, bytes);
  *bytes = buf->bytes;
  return GAAW_SUCCESS;
}

/* Checks a host <-> buffer copy of bytes at offset. */
static gaaw_status_t check_copy(gaaw_context_t ctx, gaaw_buffer_t buf, size_t offset, const void *host,
                                size_t bytes)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, buf);
  GAAW_ARG_CHECK(ctx, buf->ctx == ctx, "buffer belongs to another context");
  GAAW_ARG_CHECK(ctx, host != NULL || bytes == 0, "host pointer is NULL for a copy of %zu bytes", bytes);
  GAAW_ARG_CHECK(ctx, offset <= buf->bytes && bytes <= buf->bytes - offset,
                 "copy of %zu bytes at offset %zu overruns the %zu-byte buffer", bytes, offset, buf->bytes);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_buffer_write(gaaw_context_t ctx, gaaw_buffer_t buf, size_t offset, const void *src,
                                size_t bytes)
{
  GAAW_CHECK(check_copy(ctx, buf, offset, src, bytes));
  if (bytes) GAAW_CHECK(ctx->device->mem_write(ctx, buf->handle, offset, src, bytes));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_buffer_read(gaaw_context_t ctx, gaaw_buffer_t buf, size_t offset, void *dst, size_t bytes)
{
  GAAW_CHECK(check_copy(ctx, buf, offset, dst, bytes));
  if (bytes) GAAW_CHECK(ctx->device->mem_read(ctx, buf->handle, offset, dst, bytes));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_buffer_host_ptr(gaaw_buffer_t buf, void **ptr)
{
  GAAW_ARG_NOT_NULL(NULL, buf);
  gaaw_context_t ctx = buf->ctx;
  GAAW_ARG_NOT_NULL(ctx, ptr);
  *ptr = ctx->device->host_ptr ? ctx->device->host_ptr(buf->handle, 0) : NULL;
  if (!*ptr)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "memory of the %s backend has no host address", ctx->device->name);
  return GAAW_SUCCESS;
}

int64_t gaaw_tensor_numel(const gaaw_tensor_t *t)
{
  if (!t || t->ndim < 1 || t->ndim > GAAW_MAX_DIMS) return 0;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* Checks dtype, ndim and shape of a new view; n receives the element count. */
static gaaw_status_t check_shape(gaaw_context_t ctx, gaaw_dtype_t dtype, int ndim, const int64_t *shape,
                                 int64_t *n)
{
  GAAW_ARG_CHECK(ctx, (unsigned)dtype < GAAW_DTYPE_COUNT, "dtype %d is not a gaaw_dtype_t", (int)dtype);
  GAAW_ARG_CHECK(ctx, ndim >= 1 && ndim <= GAAW_MAX_DIMS, "ndim must be in 1..%d, got %d", GAAW_MAX_DIMS, ndim);
  int64_t count = 1;
  for (int i = 0; i < ndim; i++) {
    GAAW_ARG_CHECK(ctx, shape[i] >= 0, "shape[%d] is negative (%lld)", i, (long long)shape[i]);
    GAAW_ARG_CHECK(ctx, shape[i] == 0 || count <= INT64_MAX / shape[i], "shape overflows int64");
    count *= shape[i];
  }
  *n = count;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_tensor_view(gaaw_buffer_t buf, size_t offset, gaaw_dtype_t dtype, int ndim,
                               const int64_t *shape, gaaw_tensor_t *t)
{
  gaaw_context_t ctx = buf ? buf->ctx : NULL;
  GAAW_ARG_NOT_NULL(ctx, buf);
  GAAW_ARG_NOT_NULL(ctx, shape);
  GAAW_ARG_NOT_NULL(ctx, t);
  int64_t n;
  GAAW_CHECK(check_shape(ctx, dtype, ndim, shape, &n));
  size_t es = gaaw_dtype_size(dtype);
  GAAW_ARG_CHECK(ctx, offset % es == 0, "offset %zu is not a multiple of the %s element size %zu", offset,
                 gaaw_dtype_name(dtype), es);
  GAAW_ARG_CHECK(ctx, offset <= buf->bytes && (uint64_t)n <= (buf->bytes - offset) / es,
                 "view of %lld %s elements at offset %zu overruns the %zu-byte buffer", (long long)n,
                 gaaw_dtype_name(dtype), offset, buf->bytes);
  memset(t, 0, sizeof *t);
  t->buf = buf;
  t->offset = offset;
  t->dtype = dtype;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_tensor_alloc(gaaw_context_t ctx, gaaw_dtype_t dtype, int ndim, const int64_t *shape,
                                gaaw_mem_category_t category, gaaw_tensor_t *t)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, shape);
  GAAW_ARG_NOT_NULL(ctx, t);
  int64_t n;
  GAAW_CHECK(check_shape(ctx, dtype, ndim, shape, &n));
  size_t bytes = (size_t)n * gaaw_dtype_size(dtype);
  gaaw_buffer_t buf;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, bytes ? bytes : 1, category, &buf));
  gaaw_status_t st = gaaw_tensor_view(buf, 0, dtype, ndim, shape, t);
  if (st != GAAW_SUCCESS) {
    gaaw_buffer_free(ctx, &buf);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_memory_usage(gaaw_context_t ctx, gaaw_mem_category_t category, size_t *current_bytes,
                                size_t *peak_bytes)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_CHECK(ctx, (unsigned)category < GAAW_MEM_CATEGORY_COUNT, "category %d is not a gaaw_mem_category_t",
                 (int)category);
  if (current_bytes) *current_bytes = ctx->allocator.current[category];
  if (peak_bytes) *peak_bytes = ctx->allocator.peak[category];
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_memory_cached(gaaw_context_t ctx, size_t *bytes)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, bytes);
  *bytes = ctx->allocator.cached_bytes;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_memory_release_cached(gaaw_context_t ctx)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  gaaw_allocator_release_cached(ctx);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_memory_reset_peak(gaaw_context_t ctx)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  for (int c = 0; c < GAAW_MEM_CATEGORY_COUNT; c++) ctx->allocator.peak[c] = ctx->allocator.current[c];
  ctx->allocator.total_peak = ctx->allocator.total;
  ctx->allocator.host_peak = ctx->allocator.host_current;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_memory_total(gaaw_context_t ctx, size_t *current_bytes, size_t *peak_bytes)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  if (current_bytes) *current_bytes = ctx->allocator.total;
  if (peak_bytes) *peak_bytes = ctx->allocator.total_peak;
  return GAAW_SUCCESS;
}

size_t gaaw_host_bytes(size_t bytes)
{
  return bytes ? (bytes + 4095) / 4096 * 4096 : 4096;
}

/* Records a new host block; 0 when the table cannot grow. */
static int host_block_add(gaaw_allocator *a, void *ptr, size_t bytes)
{
  if (a->host_nblocks == a->host_capacity) {
    int capacity = a->host_capacity ? 2 * a->host_capacity : 16;
    struct gaaw_host_block *grown = realloc(a->host_blocks, sizeof *grown * (size_t)capacity);
    if (!grown) return 0;
    a->host_blocks = grown;
    a->host_capacity = capacity;
  }
  a->host_blocks[a->host_nblocks++] = (struct gaaw_host_block){ptr, bytes};
  a->host_current += bytes;
  if (a->host_current > a->host_peak) a->host_peak = a->host_current;
  return 1;
}

void *gaaw_host_alloc(gaaw_context_t ctx, size_t bytes)
{
  size_t rounded = gaaw_host_bytes(bytes);
  void *p = NULL;
  if (ctx->device->pinned_alloc) {
    if (ctx->device->pinned_alloc(ctx, rounded, &p) != GAAW_SUCCESS) return NULL;
  } else if (posix_memalign(&p, 4096, rounded) != 0) {
    return NULL;
  }
  if (!host_block_add(&ctx->allocator, p, rounded)) {
    gaaw_host_free(ctx, p); /* not in the table: only given back */
    return NULL;
  }
  return p;
}

void gaaw_host_free(gaaw_context_t ctx, void *ptr)
{
  if (!ptr) return;
  gaaw_allocator *a = &ctx->allocator;
  for (int i = 0; i < a->host_nblocks; i++)
    if (a->host_blocks[i].ptr == ptr) {
      a->host_current -= a->host_blocks[i].bytes;
      a->host_blocks[i] = a->host_blocks[--a->host_nblocks];
      break;
    }
  if (ctx->device->pinned_free) ctx->device->pinned_free(ctx, ptr);
  else free(ptr);
}

void gaaw_host_usage(gaaw_context_t ctx, size_t *current, size_t *peak)
{
  if (current) *current = ctx->allocator.host_current;
  if (peak) *peak = ctx->allocator.host_peak;
}

void gaaw_host_blocks_release(gaaw_context_t ctx)
{
  gaaw_allocator *a = &ctx->allocator;
  if (a->host_nblocks)
    gaaw_log(GAAW_LOG_WARN, "%d host block(s) of %zu bytes were not freed before the context's end", a->host_nblocks,
             a->host_current);
  free(a->host_blocks);
  a->host_blocks = NULL;
  a->host_nblocks = a->host_capacity = 0;
}
