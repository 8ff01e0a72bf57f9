/* gaaw-train's data: a text file read as bytes (token = byte value), split into
 * the first 90% for training and the last 10% for validation, and cut into
 * microbatches of (batch, seq) windows.
 *
 * A step's global batch is dp x accum x microbatches x batch rows, numbered dp rank
 * first, then the microbatch (accumulation index a and pipeline microbatch k as
 * a x microbatches + k), then the row:
 *   global row = (dp_rank x accum x microbatches + microbatch) x batch + row.
 * Training window g of step s starts at an offset drawn from a counter-based hash
 * of (seed, s, g), so any layout with the same global batch (dp 2 x batch 4, one
 * rank x batch 8, one rank x batch 4 x accum 2) trains on the same windows, and the
 * data of step s does not depend on how the run got there (a resumed run sees what
 * the uninterrupted one saw). */
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

/* Rows first_row .. first_row + batch - 1 of step's global batch, as a training
 * microbatch: tokens and targets, (batch, seq) i32. */
void train_data_batch(const train_data *d, uint64_t seed, int64_t step, int64_t first_row, int batch, int seq,
                      int32_t *tokens, int32_t *targets);

/* Rows first_row .. first_row + batch - 1 of the validation set of `rows` windows,
 * spread evenly over the validation split (the first at its start, the last at its
 * end), the same at every evaluation and in every layout that evaluates the same
 * number of rows. (batch, seq) i32. */
void train_data_val_batch(const train_data *d, int64_t first_row, int64_t rows, int batch, int seq, int32_t *tokens,
                          int32_t *targets);

#endif
