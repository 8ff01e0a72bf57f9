/* The parameter registry of a model: each parameter's name, global shape and
 * tensor-parallel split, its slice on this rank, and its views into the model's
 * flat parameter and gradient buffers. */
#ifndef GAAW_PARALLEL_PARAMS_H
#define GAAW_PARALLEL_PARAMS_H

#include "gaaw/model.h"

#define GAAW_PARAM_NAME_MAX 64

typedef enum { GAAW_INIT_NORMAL = 0, GAAW_INIT_CONSTANT = 1 } gaaw_init_kind;

#define GAAW_PARAM_MAX_BLOCKS 4

/* How a parameter's split axis divides over the tp group: n fused blocks one after
 * the other (the attention's q, k and v), each with its global extent, each cut
 * into `parts` pieces on its own. parts = tp: tp rank r holds piece r. parts a
 * proper divisor of tp: the block is replicated, tp / parts ranks hold each piece
 * (rank r holds piece r / (tp / parts)): grouped-query attention's key and value
 * heads when tp exceeds kv_heads. A single block may be padded to a multiple of tp
 * (the vocabulary); fused blocks split exactly. */
typedef struct {
  int n;
  int64_t extent[GAAW_PARAM_MAX_BLOCKS];
  int parts[GAAW_PARAM_MAX_BLOCKS];
} gaaw_param_blocks;

typedef struct {
  char name[GAAW_PARAM_NAME_MAX];
  int ndim;                /* 1 or 2 */
  int64_t shape[2];        /* global, as stored in checkpoints: [out, in] for linears */
  int split_axis;          /* -1: replicated on every tp rank; 0 or 1: split over tp */
  gaaw_param_blocks blocks; /* the split axis's blocks (one unless fused) */
  int64_t block_local[GAAW_PARAM_MAX_BLOCKS]; /* each block's extent on this rank (padded) */
  int64_t local_shape[2];  /* this rank's slice (padded) */
  int64_t local_numel;
  int64_t offset;          /* elements from the start of the flat buffers */
  gaaw_init_kind init;
  float init_value;        /* normal: the std; constant: the value */
  int row_parts;           /* > 1: split by rows over the ep group (an MoE layer's experts,
                              expert parallelism): this rank holds rows [row0, row0 +
                              local_shape[0]) of the global axis 0; else 1 */
  int64_t row0;
  int grad_is_partial;     /* replicated, but each tp rank sees only its tokens (sequence
                              parallelism): the gradient is all-reduced over tp */
  int owner;               /* the layer that declared it (the first to use it) */
  int tied_peer;           /* pp > 1: the pipeline rank holding the other copy of a tied
                              weight (its gradients are summed over both), else -1 */
  gaaw_tensor_t value;     /* view of the slice in the parameter buffer, local_shape */
  gaaw_tensor_t grad;      /* view in the gradient buffer */
} gaaw_param;

/* One model chunk's flat buffers (DESIGN.md section 6): the table's elements
 * [lo, hi), element `lo` at the start of both buffers. A model has a single
 * dtype, so (chunk, dtype) pairs are chunks. The gradient buffers come with the
 * first backward pass or gradient access (gaaw_params_ensure_grads), not with the
 * model: ZeRO 2 and 3 take the gradients over first (and stage 3 frees the values),
 * keeping shards of their own, so that a model larger than the device's share
 * never needs its whole gradient there. */
typedef struct {
  int64_t lo, hi;
  gaaw_buffer_t values, grads;
} gaaw_param_chunk;

typedef enum {
  GAAW_GRADS_LATER = 0,     /* not yet: allocated and zeroed at the first need */
  GAAW_GRADS_ALLOCATED = 1, /* in the chunks' grads buffers */
  GAAW_GRADS_TAKEN = 2      /* released to the optimizer (ZeRO 2, 3), which binds its own */
} gaaw_grads_state;

typedef struct {
  gaaw_param *items;
  int count, capacity;
  int64_t numel;           /* local elements of all parameters, over every chunk */
  gaaw_dtype_t dtype;      /* of values and grads */
  gaaw_param_chunk *chunks; /* in element order; one covering everything unless split */
  int nchunks;
  gaaw_grads_state grads;  /* whether the chunks' gradient buffers exist */
} gaaw_param_table;

/* Declares a parameter; returns its index. blocks: how its split axis divides
 * (NULL: one block split over tp; ignored when split_axis is -1). Views are set by
 * gaaw_params_allocate. */
gaaw_status_t gaaw_params_add(gaaw_context_t ctx, gaaw_param_table *table, int tp_size, const char *name,
                              int ndim, const int64_t *shape, int split_axis, const gaaw_param_blocks *blocks,
                              gaaw_init_kind init, float init_value, int *index);
/* Splits parameter `index` (the last added, replicated over tp) by rows into
 * `parts` equal pieces, this rank holding piece `part` (expert parallelism). */
gaaw_status_t gaaw_params_split_rows(gaaw_context_t ctx, gaaw_param_table *table, int index, int parts, int part);
/* n equal blocks of extent / n rows each, every one split over tp. */
gaaw_param_blocks gaaw_param_equal_blocks(int64_t extent, int n, int tp_size);
/* How many tp ranks hold each piece of block b (1 unless it is replicated). */
int gaaw_param_block_replicas(const gaaw_param *p, int b, int tp_size);
/* Block b's first element among p's local ones (split axis 0), and its count. */
void gaaw_param_block_span(const gaaw_param *p, int b, int64_t *at, int64_t *count);
/* Whether some block of p is replicated over tp ranks. */
int gaaw_param_has_replicas(const gaaw_param *p, int tp_size);
/* Pads the flat size up to a multiple of `multiple` elements (so that the next
 * parameters start a new bucket that splits evenly over dp). */
void gaaw_params_align(gaaw_param_table *table, int64_t multiple);
/* Splits the table into n chunks, chunk c starting at element starts[c]
 * (starts[0] = 0, non-decreasing, the last ending at table->numel); before
 * gaaw_params_allocate. Without it the table is one chunk. */
gaaw_status_t gaaw_params_set_chunks(gaaw_context_t ctx, gaaw_param_table *table, int n, const int64_t *starts);
/* Allocates each chunk's flat value buffer in table->dtype, sets every value view
 * and initialises the values from (seed, name, global index). */
gaaw_status_t gaaw_params_allocate(gaaw_context_t ctx, gaaw_param_table *table, int tp_rank, int tp_size,
                                   uint64_t seed);
/* Bytes of chunk c's value buffer (and of its gradient buffer). */
size_t gaaw_params_chunk_bytes(const gaaw_param_table *table, int c);
/* The chunk holding element `at` (the last chunk for at == numel). */
int gaaw_params_chunk_of(const gaaw_param_table *table, int64_t at);
/* A 1-D view of the table's elements [at, at + count), which must lie in one
 * chunk, in its value (or, with grad, gradient) buffer; buf NULL once freed. */
gaaw_tensor_t gaaw_params_span(const gaaw_param_table *table, int grad, int64_t at, int64_t count);
/* The gradient buffers, allocated, zeroed and bound unless they exist or were taken
 * (before a backward pass and any gradient access). */
gaaw_status_t gaaw_params_ensure_grads(gaaw_context_t ctx, gaaw_param_table *table);
/* Frees every chunk's value (or gradient: then taken for good) buffer and unbinds
 * the views into it. */
void gaaw_params_release(gaaw_context_t ctx, gaaw_param_table *table, int grad);
/* Points p's value (or grad) view at element `at` of buf (NULL buf: unbound). */
void gaaw_param_bind(gaaw_param *p, int grad, gaaw_buffer_t buf, int64_t at, gaaw_dtype_t dtype);
void gaaw_params_free(gaaw_context_t ctx, gaaw_param_table *table);
/* Index of the parameter called name, or -1. */
int gaaw_params_find(const gaaw_param_table *table, const char *name);

/* Global element index (flattened over the global shape) of local element i of p
 * on tp rank r, or -1 for a padding element. */
int64_t gaaw_param_global_index(const gaaw_param *p, int tp_rank, int tp_size, int64_t i);

#endif
