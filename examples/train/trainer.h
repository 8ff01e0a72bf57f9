/* gaaw-train's training state and its steps: the model, the optimizer, one
 * microbatch buffer and the dp group on which losses are averaged. Every function
 * returns a gaaw status; on failure t->err holds the failed call and gaaw's report. */
#ifndef GAAW_TRAIN_TRAINER_H
#define GAAW_TRAIN_TRAINER_H

#include <mpi.h>

#include "examples/train/data.h"
#include "examples/train/options.h"

typedef struct {
  const train_options *opts;
  const train_data *data;
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  MPI_Comm dp_comm;          /* the ranks of other dp coordinates, for the loss means: plain MPI, so that
                                the optimizer's dp traffic (the step's dp_comm_bytes) is its own */
  int dp, tp, dp_rank, pp, pp_rank;
  int microbatches;          /* per forward_backward (the library option microbatches) */
  double idle, busy;         /* the last step's seconds waiting for pipeline peers, and in forward_backward */
  int32_t *tokens, *targets; /* (microbatches x batch, seq) */
  float *logits;             /* (seq, vocab), for the sample */
  char err[4096];
  int agreed;                 /* the failure in err is every rank's (a dataset read): no rank is left in a collective */
} trainer;

/* The optimizer's configuration from opts (microbatches: the library option's
 * value), as trainer_setup builds it, beside train_gpt_config (options.h); the
 * memory estimate reads the same. Not collective. */
void trainer_optimizer_config(const train_options *opts, int microbatches, gaaw_optimizer_config_t *c);

/* Builds the GPT and its optimizer from opts, with the weights of --import if
 * given. Collective over the world. */
gaaw_status_t trainer_setup(trainer *t, gaaw_context_t ctx, const train_options *opts, const train_data *data);
void trainer_free(trainer *t);

/* Loads the checkpoint at path (a save directory or a step-* directory) into the
 * model and the optimizer; *step: the step it was saved after. GAAW_ERR_NOT_FOUND
 * when path holds none (t->err says so too). Collective over the world. */
gaaw_status_t trainer_resume(trainer *t, const char *path, int64_t *step);

/* Saves a checkpoint into --save-dir; *ms: how long it took on this rank (with
 * the library option checkpoint_async, the copy; the write goes on during the
 * next step, which commits it). The last save of a run is committed before it
 * returns. Collective over the world. */
gaaw_status_t trainer_save(trainer *t, int last, double *ms);

/* Writes the weights to the --export file. Collective over the world. */
gaaw_status_t trainer_export(trainer *t);

/* One optimizer step (step counts from 1): --accum microbatches of forward and
 * backward (this dp rank's rows of the step's global batch, data.h), then the
 * optimizer. *loss: the step's training loss averaged over the
 * microbatches and over dp. Collective over the world. */
gaaw_status_t trainer_step(trainer *t, int64_t step, float *loss);

/* The validation loss over --eval-batches global batches of windows (dp x accum x
 * microbatches x batch each, the same in every layout of the same global batch),
 * each dp rank evaluating its share one microbatch at a time, averaged over them
 * and over dp. Collective over the world. */
gaaw_status_t trainer_eval(trainer *t, float *loss);

/* Generates n bytes after the prompt: out (strlen(prompt) + n bytes) gets the
 * prompt and then each byte, greedy or sampled at --temperature from a generator
 * seeded by --seed. Collective over the tp group. */
gaaw_status_t trainer_sample(trainer *t, const char *prompt, int n, unsigned char *out);

#endif
