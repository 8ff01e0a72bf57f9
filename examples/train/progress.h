/* gaaw-train's progress line: rank 0 redraws one line on stderr after every step
 * (step k/N, percentage, elapsed time, ETA, loss, tokens/s) and clears it at the
 * end. Option --progress: auto (when stderr is a terminal), yes, no. */
#ifndef GAAW_TRAIN_PROGRESS_H
#define GAAW_TRAIN_PROGRESS_H

#include <stdint.h>

typedef struct {
  int on;              /* the line is drawn */
  int shown;           /* it is on the screen now */
  int64_t start, steps; /* this run trains steps start+1..steps */
  double began;        /* MPI_Wtime when training started */
} train_progress;

/* mode is the option's value; rank 0 alone draws. */
void progress_start(train_progress *p, const char *mode, int rank, int64_t start, int64_t steps);
/* Removes the line, so that stdout's next line starts on a clean row. */
void progress_clear(train_progress *p);
/* Draws the line after step (its loss and tokens/s). */
void progress_draw(train_progress *p, int64_t step, float loss, double tokens_per_s);

#endif
