/* The insides of a dataset blend (gaaw/data.h): the mapped token streams, and the
 * pure pieces around them: the structural checks of each format (data/formats.c,
 * fuzzed by tests/fuzz/fuzz_data_formats.c), the windows and the blend
 * (data/windows.c). data/dataset.c opens and maps. */
#ifndef GAAW_DATA_DATA_IMPL_H
#define GAAW_DATA_DATA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gaaw/data.h"

/* One dataset's token stream as its format lays it out. */
typedef struct {
  int token_bytes;      /* 1, 2, 4 or 8 */
  int is_signed;        /* int16, int32, int64 (a negative token is out of range) */
  uint64_t data_offset; /* where the tokens start in the token file */
  int64_t tokens;
} gaaw_data_stream;

/* Megatron-LM's .idx (idx_size bytes, idx names it in messages) against its .bin of
 * bin_size bytes: the checks of gaaw_dataset_open; *out the stream of the .bin. Any
 * input gives GAAW_SUCCESS or GAAW_ERR_CORRUPT naming the file and the byte offset;
 * pure, ctx may be NULL. */
gaaw_status_t gaaw_data_check_megatron(gaaw_context_t ctx, const char *idx, const unsigned char *bytes,
                                       size_t idx_size, const char *bin, uint64_t bin_size, gaaw_data_stream *out);
/* llm.c's token file of file_size bytes, head its first min(file_size, 1024) bytes. */
gaaw_status_t gaaw_data_check_llmc(gaaw_context_t ctx, const char *file, const unsigned char *head,
                                   uint64_t file_size, gaaw_data_stream *out);
/* Whether head (n bytes) starts with llm.c's magic, and with Megatron's. */
int gaaw_data_is_llmc(const unsigned char *head, size_t n);
int gaaw_data_is_megatron(const unsigned char *head, size_t n);

typedef struct {
  char *path;              /* the token file (PREFIX.bin, the llm.c file, the bytes) */
  gaaw_data_format_t format;
  gaaw_data_stream s;
  const unsigned char *map; /* the whole token file, mapped read-only */
  size_t map_size;
  int64_t train_tokens, val_tokens; /* the splits: first train_tokens, then val_tokens */
  int64_t windows;                  /* training windows W */
  uint64_t digest;                  /* of the index (Megatron), else the file's first MiB: the ranks compare it */
} gaaw_data_set;

struct gaaw_dataset_s {
  gaaw_context_t ctx;
  int count, seq, vocab;
  gaaw_data_set set[GAAW_DATA_MAX_DATASETS];
  double weight[GAAW_DATA_MAX_DATASETS]; /* normalised */
  int legacy_bytes;                       /* one bytes dataset: gaaw-train's historical windows */
};

/* The dataset of the blend's m-th sample and its index k among that dataset's
 * samples (0-based), and the counts of the first n samples. Pure. */
void gaaw_blend_pick(const gaaw_dataset_t d, int64_t m, int *dataset, int64_t *k);
void gaaw_blend_counts(const gaaw_dataset_t d, int64_t n, int64_t *counts);
/* perm(i) for a permutation of 0..n-1 keyed by key (n >= 1, 0 <= i < n). Pure. */
int64_t gaaw_data_permute(uint64_t key, int64_t n, int64_t i);
/* splitmix64's finaliser: a bijective mix of 64 bits. */
uint64_t gaaw_data_mix(uint64_t x);

#endif
