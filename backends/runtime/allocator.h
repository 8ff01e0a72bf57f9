/* The caching allocator above a backend's raw allocation call, with memory
 * accounting by category. Freed blocks go to a cache keyed by size class and are
 * handed out again for requests of the same class, because fresh device memory is
 * slow (first touch of a page ~15 us on these VMs; cudaMalloc, clCreateBuffer). */
#ifndef GAAW_RUNTIME_ALLOCATOR_H
#define GAAW_RUNTIME_ALLOCATOR_H

#include <stddef.h>
#include "gaaw/tensor.h"

/* Size classes: powers of two up to 1 MiB, then multiples of 1 MiB... rounded to
 * 1/8 steps of the next power of two, so waste stays under 12.5%. */
#define GAAW_ALLOC_CLASSES 512

struct gaaw_buffer_s {
  gaaw_context_t ctx;
  void *handle;           /* the backend's memory */
  size_t bytes;           /* as asked for */
  size_t capacity;        /* as allocated (the size class) */
  gaaw_mem_category_t category;
  struct gaaw_buffer_s *next_free; /* in the cache */
};

typedef struct {
  int cache_enabled;
  struct gaaw_buffer_s *free_lists[GAAW_ALLOC_CLASSES];
  size_t cached_bytes;
  size_t current[GAAW_MEM_CATEGORY_COUNT];
  size_t peak[GAAW_MEM_CATEGORY_COUNT];
} gaaw_allocator;

/* Frees every cached block (at finalize, or on request). */
void gaaw_allocator_release_cached(gaaw_context_t ctx);

#endif
