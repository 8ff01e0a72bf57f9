/* gaaw-train's output on rank 0: one log line per step, validation losses, the
 * generated sample, the closing summary, and the metrics file (one JSON object per
 * step). */
#ifndef GAAW_TRAIN_REPORT_H
#define GAAW_TRAIN_REPORT_H

#include <stdio.h>

#include "gaaw.h"

typedef struct {
  FILE *metrics; /* NULL: no metrics file */
  int64_t steps;
  float first_loss, last_loss, first_val, last_val;
  double timed_seconds, timed_tokens; /* every step but the first (warm-up) */
  double seconds, tokens;             /* every step */
} train_report;

/* What one step did, for the log line and the metrics file. */
typedef struct {
  int64_t step;
  float loss;
  const gaaw_step_stats_t *stats;
  double ms, tokens;
  size_t params_bytes, grads_bytes, optimizer_bytes; /* model state on this rank, by category */
  size_t activation_peak;
  int ranks;                  /* pp > 1: rank_figures holds, per world rank, the fraction of */
  const double *rank_figures; /* its forward_backward time spent waiting for pipeline peers,
                                 then its activation peak in bytes; else 0 and NULL */
} train_step_info;

void report_step(train_report *r, const train_step_info *s);
/* step 0 is the evaluation before training. */
void report_eval(train_report *r, int64_t step, float val_loss);
/* Ends the step's JSON object; val_loss is written when have_val. */
void report_metrics(train_report *r, const train_step_info *s, int have_val, float val_loss);
void report_sample(const unsigned char *text, size_t n, size_t prompt_len, double temperature);
void report_summary(const train_report *r);

#endif
