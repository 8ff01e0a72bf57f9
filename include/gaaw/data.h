/* gaaw datasets: token corpora prepared once (Megatron-LM's indexed dataset,
 * llm.c's token files, or plain bytes) read by every run through mmap, never
 * whole, cut into training windows by a pure function of the sample's number, and
 * blended by weight.
 *
 * A dataset is one token stream: its documents concatenated in file order (the
 * document boundaries are not used for sampling). Its first 90% of tokens are the
 * training split, the last 10% (rounded down) the validation split, as gaaw-train
 * has always split its text. Training window k of a dataset holds tokens
 * [k x seq, k x seq + seq] of its training split (seq inputs and their next-token
 * targets; consecutive windows share one token), and the blend's global sample n
 * (step x global batch + global row) is window perm_e(k mod W) of its dataset d,
 * where d and k (the sample's index among d's) come from the blend's weights, W is
 * d's window count, e = k / W the epoch and perm_e a permutation of 0..W-1 seeded
 * by (seed, d, e) and computed on the fly (no stored shuffle: memory does not grow
 * with the corpus). So any layout with the same global batch, and any resume,
 * reads the same tokens, and the same tokens in either token format give the same
 * windows. gaaw does not reproduce Megatron-LM's sample order.
 *
 * One plain-bytes dataset alone keeps gaaw-train's historical windows instead: a
 * start at any byte, drawn with replacement from a hash of (seed, step, global
 * row), so `--data-format bytes` runs are unchanged.
 *
 * Blends: a balanced binary tree over the datasets splits the samples reaching a
 * node between its two halves by rounding: among the first m samples of a node,
 * floor(m p + 1/2) go left (p: the left half's share of the node's weight). So
 * every dataset's count among the first n samples is within depth/2 of its share
 * (1.5 samples for up to 8 datasets, 2 for up to 16), and is computed for any n in
 * O(datasets): a resume at sample 10^9 replays nothing and stores nothing.
 * (Megatron-LM instead gives each sample to the dataset furthest behind its share,
 * which needs the counts so far.) */
#ifndef GAAW_DATA_H
#define GAAW_DATA_H

#include <stdint.h>

#include "gaaw/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gaaw_dataset_s *gaaw_dataset_t;

typedef enum {
  GAAW_DATA_AUTO = 0,     /* by the file: PREFIX.idx + PREFIX.bin, llm.c's magic, else bytes */
  GAAW_DATA_MEGATRON = 1, /* Megatron-LM's indexed dataset: PREFIX.bin and PREFIX.idx */
  GAAW_DATA_LLMC = 2,     /* llm.c's token file: a 1024-byte header, uint16 or uint32 tokens */
  GAAW_DATA_BYTES = 3     /* any file, one token per byte */
} gaaw_data_format_t;

/* The most datasets one blend holds. */
#define GAAW_DATA_MAX_DATASETS 64

/* Opens count datasets (paths[i]: a Megatron prefix, with or without .bin or .idx,
 * or a file) as one blend of weights[i] (> 0, normalised here; NULL: equal), all
 * read in `format` (AUTO: each by its file), for windows of seq tokens and a
 * vocabulary of vocab (a token >= vocab is found when a window holding it is
 * read). Each file is mapped read-only and checked at open: Megatron's magic,
 * version, dtype code (uint8, int16, uint16, int32, int64), an index of exactly the
 * size its counts imply, sequence lengths >= 0, byte pointers that start at 0 and
 * each follow the previous sequence (so monotone and inside the .bin), document
 * indices rising from 0 to the sequence count, the .bin of exactly the pointed
 * bytes; llm.c's magic 20240520, version 1 (uint16) or 2 (uint32) and a token
 * count that fills the file; every dataset's splits holding at least one window of
 * seq + 1 tokens; the sidecar gaaw-prep writes (PREFIX.gaaw.json beside a Megatron
 * dataset, FILE.gaaw.json beside another file), when present, giving a
 * "vocab_size" no larger than vocab (else GAAW_ERR_INVALID_ARG naming both). A
 * failure is GAAW_ERR_CORRUPT naming the file and the byte
 * offset (GAAW_ERR_IO for a file that cannot be read, GAAW_ERR_INVALID_ARG for a
 * bad argument). Collective over world: every rank opens the files, and the paths,
 * weights, format, seq, vocab and the files (format, token count, and the bytes of
 * a Megatron index, else of the file's first MiB) must agree; any rank's failure
 * is every rank's, with its message, before any step. *out is NULL after one. */
gaaw_status_t gaaw_dataset_open(gaaw_context_t ctx, int count, const char *const *paths, const double *weights,
                                gaaw_data_format_t format, int seq, int vocab, gaaw_dataset_t *out);
/* Every token of dataset i (0 <= i < count) against the vocabulary given at open:
 * GAAW_ERR_CORRUPT naming the file and the byte offset of the first token outside
 * it (gaaw-prep --verify). Reads the whole file, once. Not collective. */
gaaw_status_t gaaw_dataset_verify(gaaw_dataset_t d, int i);
/* Unmaps the files and frees the blend; NULL or *d NULL is a no-op. Not collective. */
gaaw_status_t gaaw_dataset_close(gaaw_dataset_t *d);

/* Dataset i of the blend (0 <= i < count): its format as opened (never AUTO), bytes
 * per token, tokens in its stream, and training windows W (any pointer may be
 * NULL). Not collective. */
gaaw_status_t gaaw_dataset_info(gaaw_dataset_t d, int i, gaaw_data_format_t *format, int *token_bytes,
                                int64_t *tokens, int64_t *windows);

/* Where global training sample n (>= 0) comes from: its dataset and the start of
 * its window in that dataset's token stream (for the historical bytes windows,
 * which depend on the step and row, use gaaw_dataset_train_batch). Not collective. */
gaaw_status_t gaaw_dataset_sample_source(gaaw_dataset_t d, uint64_t seed, int64_t n, int *dataset, int64_t *start);
/* How many of the first n global samples (n >= 0) each dataset gives: counts[i]
 * for i < count, summing to n; O(datasets). Not collective. */
gaaw_status_t gaaw_dataset_blend_counts(gaaw_dataset_t d, int64_t n, int64_t *counts);

/* Rows first_row .. first_row + batch - 1 of step's global batch of global_batch
 * rows (samples step x global_batch + row), as tokens and their targets, (batch,
 * seq) i32. Collective over world: every rank calls it the same number of times,
 * each with its own rows; a token >= vocab in any rank's windows is
 * GAAW_ERR_CORRUPT on every rank, naming the file and the token's byte offset, so
 * that the step is not taken. */
gaaw_status_t gaaw_dataset_train_batch(gaaw_dataset_t d, uint64_t seed, int64_t step, int64_t global_batch,
                                       int64_t first_row, int batch, int32_t *tokens, int32_t *targets);
/* Rows first_row .. first_row + batch - 1 of a validation set of `rows` windows:
 * row r goes to a dataset as the blend sends sample r, and a dataset's R rows are
 * spread evenly over its validation split (the first at its start, the last at
 * its end), the same at every evaluation and in every layout that evaluates the
 * same number of rows. Collective over world, as gaaw_dataset_train_batch. */
gaaw_status_t gaaw_dataset_val_batch(gaaw_dataset_t d, int64_t first_row, int64_t rows, int batch, int32_t *tokens,
                                     int32_t *targets);

/* "auto", "megatron", "llmc", "bytes"; NULL for another value. */
const char *gaaw_data_format_name(gaaw_data_format_t format);

#ifdef __cplusplus
}
#endif

#endif
