/* The caching allocator above a backend's raw allocation call, with memory
 * accounting by category. Freed blocks go to a cache keyed by size class and are
 * handed out again for requests of the same class, because fresh device memory is
 * slow (first touch of a page ~15 us on these VMs; cudaMalloc, clCreateBuffer).
 *
 * Stream-aware: every allocation is used in order on the compute stream, so a
 * block only the compute stream used may be handed out again at once (its next
 * user queues behind the old work). A block that another stream used too (the
 * communication stream of NCCL collectives: gaaw_buffer_use_on_stream) gets, when
 * it is freed, an event on each such stream (device ops event_record) and waits on
 * the pending list; it is reused, or given back to the backend when the cache is
 * off, only once every one of those events has happened. Backends without events
 * never have pending blocks. */
#ifndef GAAW_RUNTIME_ALLOCATOR_H
#define GAAW_RUNTIME_ALLOCATOR_H

#include <stddef.h>
#include "gaaw/tensor.h"

/* Size classes: powers of two up to 1 MiB, then multiples of 1 MiB... rounded to
 * 1/8 steps of the next power of two, so waste stays under 12.5%. */
#define GAAW_ALLOC_CLASSES 512
#define GAAW_ALLOC_STREAMS 2 /* GAAW_STREAM_COUNT of backends/device.h */

struct gaaw_buffer_s {
  gaaw_context_t ctx;
  void *handle;           /* the backend's memory */
  size_t bytes;           /* as asked for */
  size_t capacity;        /* as allocated (the size class) */
  gaaw_mem_category_t category;
  unsigned streams;       /* bit s: stream s (other than compute) used it since allocation */
  void *events[GAAW_ALLOC_STREAMS]; /* pending: recorded at the free on each such stream */
  struct gaaw_buffer_s *next_free; /* in the cache or the pending list */
};

typedef struct {
  int cache_enabled;
  struct gaaw_buffer_s *free_lists[GAAW_ALLOC_CLASSES];
  size_t cached_bytes;
  struct gaaw_buffer_s *pending, *pending_last; /* freed, waiting for their events, oldest first */
  size_t pending_bytes;
  size_t current[GAAW_MEM_CATEGORY_COUNT];
  size_t peak[GAAW_MEM_CATEGORY_COUNT];
  size_t total, total_peak; /* every category together: now, and at the peak instant */
  size_t held;  /* device memory taken from the backend: in use, cached and pending */
  size_t limit; /* option device_memory_limit; 0: none */
  /* gaaw_host_alloc's blocks (a few large ones: the offload stores'), so that a free
   * knows its size; their bytes now and at the peak */
  struct gaaw_host_block { void *ptr; size_t bytes; } *host_blocks;
  int host_nblocks, host_capacity;
  size_t host_current, host_peak;
} gaaw_allocator;

/* Records that stream (GAAW_STREAM_*) reads or writes buf's memory, so that a free
 * does not hand it out again before that stream's work is done. Not collective. */
void gaaw_buffer_use_on_stream(gaaw_buffer_t buf, int stream);
/* Moves the pending blocks whose events have all happened to the cache (or back to
 * the backend with the cache off). Called by every allocation. Not collective. */
void gaaw_allocator_collect(gaaw_context_t ctx);
/* Frees every cached block, and the pending ones whose events have happened (at
 * finalize, or on request). */
void gaaw_allocator_release_cached(gaaw_context_t ctx);
/* Frees every pending block without asking its events: for a backend's close,
 * after its streams are idle. */
void gaaw_allocator_release_pending(gaaw_context_t ctx);

/* Host memory for data that moves to and from the device (offload): pinned where
 * the backend has it, else aligned to 4096 bytes (O_DIRECT) from the heap; bytes 0
 * allocates one page. NULL when none; free with gaaw_host_free on the same ctx
 * (NULL is a no-op). Not collective. */
void *gaaw_host_alloc(gaaw_context_t ctx, size_t bytes);
void gaaw_host_free(gaaw_context_t ctx, void *ptr);
/* What gaaw_host_alloc takes for a request of bytes: whole pages of 4096 bytes, at
 * least one (the memory estimate counts host memory with it). */
size_t gaaw_host_bytes(size_t bytes);
/* The bytes gaaw_host_alloc holds now and held at most since the context began (or
 * since gaaw_memory_reset_peak). Either may be NULL. Not collective. */
void gaaw_host_usage(gaaw_context_t ctx, size_t *current, size_t *peak);
/* Frees the host blocks' table (the blocks must be freed already: a bug otherwise,
 * said in the log). */
void gaaw_host_blocks_release(gaaw_context_t ctx);

#endif
