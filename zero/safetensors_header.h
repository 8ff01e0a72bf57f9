/* The safetensors header <-> a table of tensors: the only code that knows the
 * layout of a safetensors file (an 8-byte little-endian header length N, N bytes
 * of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
 * "__metadata__": {str: str}}, then the raw little-endian data, offsets relative
 * to the data's start). Pure: no MPI, no device, so that it can be fuzzed
 * (tests/fuzz/fuzz_safetensors_header.c). JSON through Jansson. */
#ifndef GAAW_ZERO_SAFETENSORS_HEADER_H
#define GAAW_ZERO_SAFETENSORS_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "gaaw/status.h"
#include "gaaw/context.h"

/* The dtypes gaaw reads; every other dtype of the format is GAAW_ST_OTHER. */
typedef enum { GAAW_ST_F32 = 0, GAAW_ST_BF16 = 1, GAAW_ST_F16 = 2, GAAW_ST_OTHER = 3 } gaaw_st_dtype;

#define GAAW_ST_MAX_DIMS 8
/* The largest header the reader accepts (the format's own limit). */
#define GAAW_ST_MAX_HEADER 100000000u

typedef struct {
  char *name;                       /* as in the file (UTF-8, NUL-free) */
  char dtype_name[16];              /* as in the file: "F32", "I64", ... */
  gaaw_st_dtype dtype;
  int elem_size;                    /* bytes per element */
  int ndim;                         /* 0..GAAW_ST_MAX_DIMS */
  int64_t shape[GAAW_ST_MAX_DIMS];
  uint64_t begin, end;              /* data_offsets: [begin, end) after the header */
} gaaw_st_tensor;

typedef struct {
  gaaw_st_tensor *tensors;          /* in the order of their data (by begin) */
  int count;
  uint64_t data_start;              /* 8 + N: the file offset of the data */
} gaaw_st_header;

/* Parses and checks a whole safetensors file of size bytes (file names it in
 * messages): the header length fits in the file; the header is one JSON object
 * (no duplicate keys) whose entries each have a known dtype, a shape of at most
 * GAAW_ST_MAX_DIMS non-negative dimensions and data_offsets whose length is
 * the shape's size in bytes; __metadata__, when present, maps strings to
 * strings; the tensors' data tile the rest of the file exactly (no gap, no
 * overlap, nothing after). Any input gives a status, never a read out of bytes:
 * GAAW_ERR_CORRUPT naming the file, the tensor and the offset, or
 * GAAW_ERR_NO_MEMORY; on failure *h is empty. Not collective; ctx may be NULL. */
gaaw_status_t gaaw_st_header_parse(gaaw_context_t ctx, const char *file, const unsigned char *bytes, size_t size,
                                   gaaw_st_header *h);
/* Frees what parse or build allocated; *h is empty after. */
void gaaw_st_header_free(gaaw_st_header *h);

/* The header of a file of one dtype (F32, BF16 or F16) holding tensors[0..count)
 * one after the other in that order (their begin and end are set here, dtype and
 * elem_size too): the
 * 8-byte length and the JSON, padded with spaces to a multiple of 8 bytes so the
 * data starts aligned, with __metadata__ {"format": "pt"} as PyTorch's writers
 * put it. *out is malloc'ed (free it), *size its bytes. Not collective. */
gaaw_status_t gaaw_st_header_build(gaaw_context_t ctx, gaaw_st_dtype dtype, gaaw_st_tensor *tensors, int count,
                                   unsigned char **out, size_t *size);

/* Hugging Face's index of a sharded set (model.safetensors.index.json):
 * {"metadata": {...}, "weight_map": {tensor: file}}, read from size bytes of text
 * (index names it in messages). Checks: one JSON object without duplicate keys; a
 * non-empty "weight_map" object whose values are plain file names (no '/', not
 * "." or "..": a shard lies beside its index). file[f] are the distinct files in
 * order of first mention, tensor[k] the tensors, file_of[k] the file of tensor[k].
 * Any input gives a status (GAAW_ERR_CORRUPT naming the file and what is wrong,
 * or GAAW_ERR_NO_MEMORY), never a read out of bytes; on failure *ix is empty.
 * Pure and not collective; ctx may be NULL (tests/fuzz/fuzz_safetensors_index.c). */
typedef struct {
  char **tensor, **file;
  int *file_of;
  int ntensors, nfiles;
} gaaw_st_index;
gaaw_status_t gaaw_st_index_parse(gaaw_context_t ctx, const char *index, const char *text, size_t size,
                                  gaaw_st_index *ix);
/* The file of tensor `name` in ix, or NULL when ix does not name it. */
const char *gaaw_st_index_file_of(const gaaw_st_index *ix, const char *name);
void gaaw_st_index_free(gaaw_st_index *ix);

/* Element i of tensor t's data (at data), as f32; t is F32, BF16 or F16. */
float gaaw_st_load(const gaaw_st_tensor *t, const unsigned char *data, int64_t i);
/* v as element i of data in dtype (F32, BF16 or F16; little-endian, rounded to
 * nearest even). */
void gaaw_st_store(gaaw_st_dtype dtype, unsigned char *data, int64_t i, float v);
/* Bytes per element of F32, BF16 or F16. */
int gaaw_st_dtype_size(gaaw_st_dtype dtype);

#endif
