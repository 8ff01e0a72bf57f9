/* gaaw-train's data: the datasets of --data-path (or --data, or the corpus shipped
 * with gaaw) opened through the library (gaaw/data.h), which cuts them into
 * windows and blends them.
 *
 * A step's global batch is dp x accum x microbatches x batch rows, numbered dp rank
 * first, then the microbatch (accumulation index a and pipeline microbatch k as
 * a x microbatches + k), then the row:
 *   global row = (dp_rank x accum x microbatches + microbatch) x batch + row.
 * The library draws training window (step, global row) as a pure function of them
 * and the seed, so any layout with the same global batch (dp 2 x batch 4, one rank
 * x batch 8, one rank x batch 4 x accum 2) trains on the same windows, and the data
 * of step s does not depend on how the run got there (a resumed run sees what the
 * uninterrupted one saw). */
#ifndef GAAW_TRAIN_DATA_H
#define GAAW_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "examples/train/options.h"

typedef struct {
  gaaw_dataset_t set;
  int count;
  char words[TRAIN_STRING_MAX]; /* --data-path's words, cut into paths */
  const char *paths[GAAW_DATA_MAX_DATASETS];
  double weights[GAAW_DATA_MAX_DATASETS];
  gaaw_data_format_t format;
} train_data;

/* The corpus shipped with gaaw: the installed copy, else the source tree's (for a
 * build that is not installed). NULL when neither exists. */
const char *train_data_default_path(void);

/* Reads the options' datasets: --data-path (one path, or weights and paths in
 * pairs), else --data (bytes), else the shipped corpus (bytes). Not collective.
 * Returns TRAIN_EXIT_OK, or TRAIN_EXIT_USAGE with the reason in err. */
int train_data_parse(const train_options *o, train_data *d, char *err, size_t len);
/* Opens them for windows of --seq tokens below --vocab. Collective over ctx's
 * world: every rank gets the same verdict. Returns TRAIN_EXIT_OK, or
 * TRAIN_EXIT_USAGE with the reason in err. Rank 0 prints a line per dataset. */
int train_data_open(gaaw_context_t ctx, const train_options *o, train_data *d, char *err, size_t len);
void train_data_close(train_data *d);

#endif
