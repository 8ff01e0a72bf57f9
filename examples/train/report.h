/* gaaw-train's output on rank 0: one log line per step, validation losses, the
 * generated sample, the closing summary, and the metrics file (one JSON object per
 * step). */
#ifndef GAAW_TRAIN_REPORT_H
#define GAAW_TRAIN_REPORT_H

#include <stdio.h>
#include <sys/types.h>

#include "gaaw.h"

typedef struct {
  FILE *metrics; /* NULL: no metrics file */
  int64_t steps;      /* the run's last step (--steps) */
  int64_t start;      /* the step it started after: 0, or the loaded checkpoint's */
  int64_t done;       /* steps this process trained */
  off_t line_start;   /* where the metrics file's last line starts */
  float first_loss, last_loss, first_val, last_val;
  double timed_seconds, timed_tokens; /* every step but the first (warm-up) */
  double seconds, tokens;             /* every step */
  double flops_per_token; /* the model's training FLOPs per token (gaaw_model_flops_per_token) */
  double peak_tflops;     /* one rank's peak, 0 = unknown: no MFU */
  int world;              /* ranks the job's tokens/s is shared by */
} train_report;

/* What one step did, for the log line and the metrics file. */
typedef struct {
  int64_t step;
  float loss;
  const gaaw_step_stats_t *stats;
  double ms, tokens;
  double save_ms; /* the checkpoint saved after the step, < 0: none */
  size_t params_bytes, grads_bytes, optimizer_bytes; /* model state on this rank, by category */
  size_t activation_peak;
  size_t device_peak;         /* the most device memory in use at one instant so far, the largest rank's */
  gaaw_moe_metrics_t moe;     /* the MoE layers' (moe.layers 0: a dense model) */
  int ranks;                  /* pp > 1: rank_figures holds, per world rank, the fraction of */
  const double *rank_figures; /* its forward_backward time spent waiting for pipeline peers,
                                 then its activation peak in bytes; else 0 and NULL */
} train_step_info;

void report_step(train_report *r, const train_step_info *s);
/* The metrics file of a run that starts after step start: emptied when start is
 * 0, else cut to its complete lines of steps 1..start (what an earlier run wrote
 * before the checkpoint it resumes from), so that it continues as one file.
 * Returns 0 with the reason in err on failure. */
int report_metrics_restart(FILE *f, const char *path, int64_t start, char *err, size_t len);

/* step r->start is the evaluation before training. */
void report_eval(train_report *r, int64_t step, float val_loss);
/* The step's JSON object, as one line, flushed; val_loss is written when have_val. */
void report_metrics(train_report *r, const train_step_info *s, int have_val, float val_loss);
/* Writes the last line again, in its place (with the save's time, once known). */
void report_metrics_amend(train_report *r, const train_step_info *s, int have_val, float val_loss);
void report_sample(const unsigned char *text, size_t n, size_t prompt_len, double temperature);
void report_summary(const train_report *r);

#endif
