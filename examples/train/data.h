/* gaaw-train's data: a text file read as bytes (token = byte value), split into
 * the first 90% for training and the last 10% for validation, and cut into
 * microbatches of (batch, seq) windows. Training windows start at offsets drawn
 * from a counter-based hash of (seed, step, microbatch, dp rank, row), so each dp
 * rank sees different data, and the same seed and layout see the same data. */
#ifndef GAAW_TRAIN_DATA_H
#define GAAW_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  unsigned char *bytes;
  size_t size;
  const unsigned char *train, *val; /* views into bytes */
  size_t train_size, val_size;
  uint64_t checksum; /* FNV-1a of every byte, to check that all ranks read the same */
} train_data;

/* The corpus shipped with gaaw: the installed copy, else the source tree's (for a
 * build that is not installed). NULL when neither exists. */
const char *train_data_default_path(void);

/* Reads path and splits it. Fails (0 returned, reason in err) on an unreadable or
 * empty file, a byte >= vocab, or a split shorter than one sequence of seq + 1
 * bytes (inputs and their next-byte targets). Returns 1 on success. */
int train_data_load(train_data *d, const char *path, int seq, int vocab, char *err, size_t len);
void train_data_free(train_data *d);

/* A training microbatch: tokens and targets, (batch, seq) i32. */
void train_data_batch(const train_data *d, uint64_t seed, int64_t step, int micro, int dp_rank, int batch, int seq,
                      int32_t *tokens, int32_t *targets);

/* Validation microbatch `index` of dp rank dp_rank, out of count per rank: the
 * windows of all ranks and microbatches are spread evenly over the validation
 * split and are the same at every evaluation. (batch, seq) i32. */
void train_data_val_batch(const train_data *d, int index, int count, int dp_rank, int dp, int batch, int seq,
                          int32_t *tokens, int32_t *targets);

#endif
