/* Parameter registry, flat buffers, slicing and counter-based initialisation. */
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/context_impl.h"
#include "backends/runtime/half.h"
#include "parallel/params.h"
#include "parallel/rng.h"

gaaw_param_blocks gaaw_param_equal_blocks(int64_t extent, int n, int tp_size)
{
  gaaw_param_blocks b = {.n = n};
  for (int k = 0; k < n && k < GAAW_PARAM_MAX_BLOCKS; k++) {
    b.extent[k] = extent / n;
    b.parts[k] = tp_size;
  }
  return b;
}

int gaaw_param_block_replicas(const gaaw_param *p, int b, int tp_size)
{
  return p->split_axis < 0 ? tp_size : tp_size / p->blocks.parts[b];
}

int gaaw_param_has_replicas(const gaaw_param *p, int tp_size)
{
  for (int b = 0; p->split_axis >= 0 && b < p->blocks.n; b++)
    if (gaaw_param_block_replicas(p, b, tp_size) > 1) return 1;
  return 0;
}

void gaaw_param_block_span(const gaaw_param *p, int b, int64_t *at, int64_t *count)
{
  int64_t cols = p->ndim == 2 ? p->local_shape[1] : 1, rows = 0;
  for (int k = 0; k < b; k++) rows += p->block_local[k];
  *at = rows * cols;
  *count = p->block_local[b] * cols;
}

/* The blocks of p's split axis (extent e over tp ranks): checks them and sets
 * each block's local extent; returns the local extent of the axis. */
static gaaw_status_t set_blocks(gaaw_context_t ctx, gaaw_param *p, int64_t e, int tp_size,
                                const gaaw_param_blocks *blocks, int64_t *local)
{
  p->blocks = blocks ? *blocks : gaaw_param_equal_blocks(e, 1, tp_size);
  const gaaw_param_blocks *b = &p->blocks;
  GAAW_ARG_CHECK(ctx, b->n >= 1 && b->n <= GAAW_PARAM_MAX_BLOCKS, "parameter %s: %d fused blocks (1 to %d)", p->name,
                 b->n, GAAW_PARAM_MAX_BLOCKS);
  int64_t sum = 0;
  *local = 0;
  for (int k = 0; k < b->n; k++) {
    GAAW_ARG_CHECK(ctx, b->parts[k] >= 1 && tp_size % b->parts[k] == 0,
                   "parameter %s: block %d splits into %d parts, which must divide tp = %d", p->name, k, b->parts[k],
                   tp_size);
    /* fused blocks are split one by one, so no block may need padding */
    GAAW_ARG_CHECK(ctx, b->n == 1 || b->extent[k] % b->parts[k] == 0,
                   "parameter %s: fused block %d (%lld rows) must divide into %d parts (tp = %d)", p->name, k,
                   (long long)b->extent[k], b->parts[k], tp_size);
    p->block_local[k] = (b->extent[k] + b->parts[k] - 1) / b->parts[k];
    *local += p->block_local[k];
    sum += b->extent[k];
  }
  GAAW_ARG_CHECK(ctx, sum == e, "parameter %s: its fused blocks hold %lld rows of %lld", p->name, (long long)sum,
                 (long long)e);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_params_add(gaaw_context_t ctx, gaaw_param_table *table, int tp_size, const char *name,
                              int ndim, const int64_t *shape, int split_axis, const gaaw_param_blocks *blocks,
                              gaaw_init_kind init, float init_value, int *index)
{
  GAAW_ARG_CHECK(ctx, strlen(name) < GAAW_PARAM_NAME_MAX, "parameter name '%s' is too long", name);
  GAAW_ARG_CHECK(ctx, gaaw_params_find(table, name) < 0, "parameter '%s' declared twice", name);
  GAAW_ARG_CHECK(ctx, ndim == 1 || ndim == 2, "parameter %s: ndim %d", name, ndim);
  GAAW_ARG_CHECK(ctx, split_axis >= -1 && split_axis < ndim, "parameter %s: split axis %d", name, split_axis);
  if (table->count == table->capacity) {
    int cap = table->capacity ? 2 * table->capacity : 64;
    gaaw_param *grown = realloc(table->items, (size_t)cap * sizeof *grown);
    if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot grow the parameter table to %d entries", cap);
    table->items = grown;
    table->capacity = cap;
  }
  gaaw_param *p = &table->items[table->count];
  memset(p, 0, sizeof *p);
  strcpy(p->name, name);
  p->ndim = ndim;
  p->split_axis = split_axis;
  p->blocks = gaaw_param_equal_blocks(1, 1, tp_size);
  p->init = init;
  p->init_value = init_value;
  p->tied_peer = -1;
  p->row_parts = 1;
  p->local_numel = 1;
  for (int d = 0; d < ndim; d++) {
    GAAW_ARG_CHECK(ctx, shape[d] > 0, "parameter %s: extent %lld on axis %d", name, (long long)shape[d], d);
    p->shape[d] = shape[d];
    p->local_shape[d] = shape[d];
    if (d == split_axis) GAAW_CHECK(set_blocks(ctx, p, shape[d], tp_size, blocks, &p->local_shape[d]));
    p->local_numel *= p->local_shape[d];
  }
  GAAW_ARG_CHECK(ctx, p->blocks.n == 1 || split_axis == 0 || !gaaw_param_has_replicas(p, tp_size),
                 "parameter %s: replicated blocks must lie on axis 0", name);
  p->offset = table->numel;
  /* keep every parameter 16-element aligned (64 bytes in f32) */
  table->numel += (p->local_numel + 15) / 16 * 16;
  *index = table->count++;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_params_split_rows(gaaw_context_t ctx, gaaw_param_table *table, int index, int parts, int part)
{
  gaaw_param *p = &table->items[index];
  GAAW_ARG_CHECK(ctx, index == table->count - 1 && p->split_axis < 0 && parts >= 1 && part >= 0 && part < parts &&
                        p->shape[0] % parts == 0,
                 "parameter %s: %lld rows cannot be split into %d pieces (piece %d)", p->name, (long long)p->shape[0],
                 parts, part);
  p->row_parts = parts;
  p->local_shape[0] = p->shape[0] / parts;
  p->row0 = part * p->local_shape[0];
  p->local_numel = p->local_shape[0] * (p->ndim == 2 ? p->local_shape[1] : 1);
  table->numel = p->offset + (p->local_numel + 15) / 16 * 16;
  return GAAW_SUCCESS;
}

int gaaw_params_find(const gaaw_param_table *table, const char *name)
{
  for (int i = 0; i < table->count; i++)
    if (strcmp(table->items[i].name, name) == 0) return i;
  return -1;
}

int64_t gaaw_param_global_index(const gaaw_param *p, int tp_rank, int tp_size, int64_t i)
{
  int64_t coord[2] = {0, 0};
  if (p->ndim == 2) {
    coord[0] = i / p->local_shape[1];
    coord[1] = i % p->local_shape[1];
  } else {
    coord[0] = i;
  }
  if (p->split_axis >= 0) {
    /* local index along the split axis -> (block, position in this rank's piece) */
    int a = p->split_axis, b = 0;
    int64_t j = coord[a], start = 0;
    while (b + 1 < p->blocks.n && j >= p->block_local[b]) {
      j -= p->block_local[b];
      start += p->blocks.extent[b];
      b++;
    }
    int64_t piece = tp_rank / gaaw_param_block_replicas(p, b, tp_size), within = piece * p->block_local[b] + j;
    if (within >= p->blocks.extent[b]) return -1; /* vocabulary padding */
    coord[a] = start + within;
  }
  coord[0] += p->row0; /* split by rows over ep (never with a split on axis 0) */
  return p->ndim == 2 ? coord[0] * p->shape[1] + coord[1] : coord[0];
}

void gaaw_params_align(gaaw_param_table *table, int64_t multiple)
{
  table->numel = (table->numel + multiple - 1) / multiple * multiple;
}

void gaaw_param_bind(gaaw_param *p, int grad, gaaw_buffer_t buf, int64_t at, gaaw_dtype_t dtype)
{
  gaaw_tensor_t *t = grad ? &p->grad : &p->value;
  memset(t, 0, sizeof *t);
  t->buf = buf;
  t->offset = (size_t)at * gaaw_dtype_size(dtype);
  t->dtype = dtype;
  t->ndim = p->ndim;
  for (int d = 0; d < p->ndim; d++) t->shape[d] = p->local_shape[d];
}

gaaw_status_t gaaw_params_set_chunks(gaaw_context_t ctx, gaaw_param_table *table, int n, const int64_t *starts)
{
  GAAW_ARG_CHECK(ctx, n >= 1 && starts[0] == 0, "a parameter table splits into n >= 1 chunks from element 0");
  for (int c = 1; c < n; c++)
    GAAW_ARG_CHECK(ctx, starts[c] >= starts[c - 1] && starts[c] <= table->numel,
                   "chunk %d of the parameters starts at element %lld, after %lld and within %lld", c,
                   (long long)starts[c], (long long)starts[c - 1], (long long)table->numel);
  free(table->chunks);
  table->chunks = calloc((size_t)n, sizeof *table->chunks);
  if (!table->chunks) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d parameter chunks", n);
  table->nchunks = n;
  for (int c = 0; c < n; c++) {
    table->chunks[c].lo = starts[c];
    table->chunks[c].hi = c + 1 < n ? starts[c + 1] : table->numel;
  }
  return GAAW_SUCCESS;
}

int gaaw_params_chunk_of(const gaaw_param_table *table, int64_t at)
{
  int c = 0;
  while (c + 1 < table->nchunks && table->chunks[c].hi <= at) c++;
  return c;
}

gaaw_tensor_t gaaw_params_span(const gaaw_param_table *table, int grad, int64_t at, int64_t count)
{
  const gaaw_param_chunk *c = &table->chunks[gaaw_params_chunk_of(table, at)];
  gaaw_tensor_t t;
  memset(&t, 0, sizeof t);
  t.buf = grad ? c->grads : c->values;
  t.offset = (size_t)(at - c->lo) * gaaw_dtype_size(table->dtype);
  t.dtype = table->dtype;
  t.ndim = 1;
  t.shape[0] = count;
  return t;
}

void gaaw_params_release(gaaw_context_t ctx, gaaw_param_table *table, int grad)
{
  if (grad) table->grads = GAAW_GRADS_TAKEN;
  for (int i = 0; i < table->count; i++) gaaw_param_bind(&table->items[i], grad, NULL, 0, table->dtype);
  for (int c = 0; c < table->nchunks; c++) gaaw_buffer_free(ctx, grad ? &table->chunks[c].grads : &table->chunks[c].values);
}

size_t gaaw_params_chunk_bytes(const gaaw_param_table *table, int c)
{
  const gaaw_param_chunk *ch = &table->chunks[c];
  return (size_t)(ch->hi > ch->lo ? ch->hi - ch->lo : 1) * gaaw_dtype_size(table->dtype);
}

/* Chunk c's value buffer, initialised from host (the whole table's values). */
static gaaw_status_t allocate_chunk(gaaw_context_t ctx, gaaw_param_table *table, int c, float *host)
{
  gaaw_param_chunk *ch = &table->chunks[c];
  size_t es = gaaw_dtype_size(table->dtype);
  GAAW_CHECK(gaaw_buffer_alloc(ctx, gaaw_params_chunk_bytes(table, c), GAAW_MEM_PARAMS, &ch->values));
  float *mine = host + ch->lo;
  /* in place to the storage dtype (2-byte elements overwrite what was read) */
  for (size_t i = 0; i < (size_t)(ch->hi - ch->lo); i++) gaaw_store_f32(mine, table->dtype, (int64_t)i, mine[i]);
  if (ch->hi > ch->lo) GAAW_CHECK(gaaw_buffer_write(ctx, ch->values, 0, mine, (size_t)(ch->hi - ch->lo) * es));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_params_ensure_grads(gaaw_context_t ctx, gaaw_param_table *table)
{
  if (table->grads != GAAW_GRADS_LATER) return GAAW_SUCCESS;
  for (int c = 0; c < table->nchunks; c++) {
    gaaw_param_chunk *ch = &table->chunks[c];
    size_t bytes = gaaw_params_chunk_bytes(table, c);
    int64_t n = (int64_t)(bytes / gaaw_dtype_size(table->dtype));
    gaaw_tensor_t all;
    GAAW_CHECK(gaaw_buffer_alloc(ctx, bytes, GAAW_MEM_GRADS, &ch->grads));
    GAAW_CHECK(gaaw_tensor_view(ch->grads, 0, table->dtype, 1, &n, &all));
    GAAW_CHECK(gaaw_fill(ctx, &all, 0.0f));
  }
  for (int k = 0; k < table->count; k++) {
    gaaw_param *p = &table->items[k];
    const gaaw_param_chunk *ch = &table->chunks[gaaw_params_chunk_of(table, p->offset)];
    gaaw_param_bind(p, 1, ch->grads, p->offset - ch->lo, table->dtype);
  }
  table->grads = GAAW_GRADS_ALLOCATED;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_params_allocate(gaaw_context_t ctx, gaaw_param_table *table, int tp_rank, int tp_size,
                                   uint64_t seed)
{
  if (!table->nchunks) {
    int64_t zero = 0;
    GAAW_CHECK(gaaw_params_set_chunks(ctx, table, 1, &zero));
  }
  size_t n = (size_t)(table->numel > 0 ? table->numel : 1);
  float *host = calloc(n, sizeof *host);
  if (!host) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %zu floats to initialise parameters", n);
  for (int k = 0; k < table->count; k++) {
    gaaw_param *p = &table->items[k];
    uint64_t stream = gaaw_rng_stream(seed, p->name);
    for (int64_t i = 0; i < p->local_numel; i++) {
      int64_t g = gaaw_param_global_index(p, tp_rank, tp_size, i);
      float v = 0;
      if (g >= 0) v = p->init == GAAW_INIT_NORMAL ? (float)(p->init_value * gaaw_rng_normal(stream, (uint64_t)g))
                                                  : p->init_value;
      host[p->offset + i] = v;
    }
  }
  gaaw_status_t st = GAAW_SUCCESS;
  for (int c = 0; c < table->nchunks && st == GAAW_SUCCESS; c++) st = allocate_chunk(ctx, table, c, host);
  free(host);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  for (int k = 0; k < table->count; k++) {
    gaaw_param *p = &table->items[k];
    const gaaw_param_chunk *ch = &table->chunks[gaaw_params_chunk_of(table, p->offset)];
    gaaw_param_bind(p, 0, ch->values, p->offset - ch->lo, table->dtype);
  }
  return GAAW_SUCCESS;
}

void gaaw_params_free(gaaw_context_t ctx, gaaw_param_table *table)
{
  for (int c = 0; c < table->nchunks; c++) {
    gaaw_buffer_free(ctx, &table->chunks[c].values);
    gaaw_buffer_free(ctx, &table->chunks[c].grads);
  }
  free(table->chunks);
  free(table->items);
  memset(table, 0, sizeof *table);
}
