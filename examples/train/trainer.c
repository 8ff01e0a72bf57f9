/* gaaw-train's steps: training, validation and generation on the GPT. */
#include "examples/train/trainer.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* Records a failed call in t->err and returns its status. */
static gaaw_status_t failed(trainer *t, gaaw_status_t st, const char *call)
{
  const char *report = gaaw_last_error(t->ctx);
  if (!report[0]) report = gaaw_last_error(NULL); /* raised without the context */
  snprintf(t->err, sizeof t->err, "%s failed: %s\n%s", call, gaaw_status_name(st), report);
  return st;
}

/* The same for a call on a file or directory: "gaaw_checkpoint_load(ck) failed". */
static gaaw_status_t failed_on(trainer *t, gaaw_status_t st, const char *function, const char *path)
{
  char call[TRAIN_STRING_MAX + 64];
  snprintf(call, sizeof call, "%s(%s)", function, path);
  return failed(t, st, call);
}

#define TRY(t, call)                                       \
  do {                                                     \
    gaaw_status_t st_ = (call);                            \
    if (st_ != GAAW_SUCCESS) return failed(t, st_, #call); \
  } while (0)

/* The same for the dataset's batches, which fail on every rank together, unless
 * the agreement itself could not finish (a peer gone: COMM, TIMEOUT). */
#define TRY_DATA(t, call)                                                          \
  do {                                                                             \
    gaaw_status_t st_ = (call);                                                    \
    if (st_ != GAAW_SUCCESS) {                                                     \
      (t)->agreed = st_ != GAAW_ERR_COMM && st_ != GAAW_ERR_TIMEOUT;               \
      return failed(t, st_, "reading a batch");                                    \
    }                                                                              \
  } while (0)

void trainer_optimizer_config(const train_options *o, int microbatches, gaaw_optimizer_config_t *c)
{
  gaaw_optimizer_config_default(c);
  c->kind = !strcmp(o->optimizer, "sgd") ? GAAW_SGD : GAAW_ADAMW;
  c->zero_stage = (int)o->zero;
  c->lr = (float)o->lr;
  c->min_lr = (float)o->min_lr;
  c->warmup_steps = (int)o->warmup;
  c->decay_steps = (int)o->steps; /* cosine down to min_lr at the last step */
  c->weight_decay = (float)o->weight_decay;
  c->clip_norm = (float)o->clip;
  c->accumulation = (int)o->accum * microbatches;
}

gaaw_status_t trainer_setup(trainer *t, gaaw_context_t ctx, const train_options *opts, const train_data *data)
{
  memset(t, 0, sizeof *t);
  t->dp_comm = MPI_COMM_NULL;
  t->opts = opts;
  t->data = data;
  t->ctx = ctx;
  int tp_rank, cp, cp_rank;
  gaaw_config_t cfg;
  int64_t microbatches = 1;
  TRY(t, gaaw_topology_sizes(ctx, &t->dp, &t->pp, &t->tp));
  TRY(t, gaaw_topology_coords(ctx, &t->dp_rank, &t->pp_rank, &tp_rank));
  TRY(t, gaaw_topology_cp(ctx, &cp, &cp_rank));
  /* collective over the world, before anything can fail on one rank only; the
   * ranks that differ in dp alone */
  int others = (t->pp_rank * cp + cp_rank) * t->tp + tp_rank;
  if (MPI_Comm_split(MPI_COMM_WORLD, others, t->dp_rank, &t->dp_comm) != MPI_SUCCESS) {
    t->dp_comm = MPI_COMM_NULL;
    snprintf(t->err, sizeof t->err, "MPI_Comm_split (the dp group of the loss means) failed");
    return GAAW_ERR_COMM;
  }
  TRY(t, gaaw_context_config(ctx, &cfg));
  TRY(t, gaaw_config_get_int(cfg, "microbatches", &microbatches));
  t->microbatches = (int)microbatches;
  size_t n = (size_t)t->microbatches * (size_t)opts->batch * opts->seq;
  t->tokens = malloc(n * sizeof *t->tokens);
  t->targets = malloc(n * sizeof *t->targets);
  t->logits = malloc((size_t)opts->seq * opts->vocab * sizeof *t->logits);
  if (!t->tokens || !t->targets || !t->logits) return failed(t, GAAW_ERR_NO_MEMORY, "allocating the batch");

  gaaw_gpt_config_t g;
  gaaw_optimizer_config_t oc;
  train_gpt_config(opts, &g);
  trainer_optimizer_config(opts, t->microbatches, &oc);
  TRY(t, gaaw_model_create_gpt(ctx, &g, &t->model));
  if (opts->import[0]) { /* before the optimizer copies them */
    gaaw_status_t st = gaaw_model_import(t->model, opts->import);
    if (st != GAAW_SUCCESS) return failed_on(t, st, "gaaw_model_import", opts->import);
  }
  TRY(t, gaaw_optimizer_create(t->model, &oc, &t->opt));
  return GAAW_SUCCESS;
}

gaaw_status_t trainer_resume(trainer *t, const char *path, int64_t *step)
{
  gaaw_step_stats_t stats;
  *step = 0;
  gaaw_status_t st = gaaw_checkpoint_load(t->opt, path);
  if (st != GAAW_SUCCESS) return failed_on(t, st, "gaaw_checkpoint_load", path);
  TRY(t, gaaw_optimizer_stats(t->opt, &stats));
  *step = stats.step;
  return GAAW_SUCCESS;
}

gaaw_status_t trainer_save(trainer *t, int last, double *ms)
{
  double start = MPI_Wtime();
  gaaw_status_t st = gaaw_checkpoint_save(t->opt, t->opts->save_dir);
  if (st != GAAW_SUCCESS) return failed_on(t, st, "gaaw_checkpoint_save", t->opts->save_dir);
  /* with checkpoint_async the save commits at the next step: the last one has none */
  if (last && (st = gaaw_checkpoint_wait(t->opt)) != GAAW_SUCCESS)
    return failed_on(t, st, "gaaw_checkpoint_wait", t->opts->save_dir);
  *ms = (MPI_Wtime() - start) * 1000;
  return GAAW_SUCCESS;
}

gaaw_status_t trainer_export(trainer *t)
{
  gaaw_status_t st = gaaw_model_export(t->model, t->opts->export);
  return st == GAAW_SUCCESS ? st : failed_on(t, st, "gaaw_model_export", t->opts->export);
}

void trainer_free(trainer *t)
{
  gaaw_optimizer_destroy(&t->opt);
  gaaw_model_destroy(&t->model);
  if (t->dp_comm != MPI_COMM_NULL) MPI_Comm_free(&t->dp_comm);
  free(t->tokens);
  free(t->targets);
  free(t->logits);
  t->tokens = t->targets = NULL;
  t->logits = NULL;
}

/* The mean of x over the dp group. */
static gaaw_status_t dp_mean(trainer *t, float *x)
{
  if (t->dp == 1) return GAAW_SUCCESS;
  if (MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_FLOAT, MPI_SUM, t->dp_comm) != MPI_SUCCESS) {
    snprintf(t->err, sizeof t->err, "MPI_Allreduce (a loss mean over dp) failed");
    return GAAW_ERR_COMM;
  }
  *x /= (float)t->dp;
  return GAAW_SUCCESS;
}

static gaaw_batch_t batch_of(trainer *t, int batch, int seq)
{
  return (gaaw_batch_t){.batch = batch, .seq = seq, .tokens = t->tokens, .targets = t->targets};
}

gaaw_status_t trainer_step(trainer *t, int64_t step, float *loss)
{
  const train_options *o = t->opts;
  gaaw_batch_t b = batch_of(t, (int)o->batch, (int)o->seq);
  b.microbatches = t->microbatches;
  size_t n = (size_t)o->batch * (size_t)o->seq;
  float sum = 0, l;
  t->idle = t->busy = 0;
  int64_t per_rank = (int64_t)o->accum * t->microbatches; /* microbatches of a dp rank per step */
  int64_t global = per_rank * t->dp * o->batch;             /* rows of the step's global batch */
  for (int a = 0; a < o->accum; a++) {
    /* microbatch a x microbatches + k of this dp rank: its rows of the global batch
     * (a token outside the vocabulary fails every rank here, before the step) */
    for (int k = 0; k < t->microbatches; k++) {
      int64_t first = ((int64_t)t->dp_rank * per_rank + (int64_t)a * t->microbatches + k) * o->batch;
      TRY_DATA(t, gaaw_dataset_train_batch(t->data->set, (uint64_t)o->seed, step, global, first, (int)o->batch,
                                      t->tokens + k * n, t->targets + k * n));
    }
    TRY(t, gaaw_model_forward_backward(t->model, &b, &l));
    double idle, total;
    TRY(t, gaaw_model_pipeline_times(t->model, &idle, &total));
    t->idle += idle;
    t->busy += total;
    sum += l;
  }
  TRY(t, gaaw_optimizer_step(t->opt));
  *loss = sum / (float)o->accum;
  return dp_mean(t, loss);
}

gaaw_status_t trainer_eval(trainer *t, float *loss)
{
  const train_options *o = t->opts;
  gaaw_batch_t b = batch_of(t, (int)o->batch, (int)o->seq);
  float sum = 0, l;
  /* --eval-batches global batches, this dp rank's share of them in a row */
  int64_t count = o->eval_batches * o->accum * t->microbatches; /* microbatches per dp rank */
  int64_t rows = count * t->dp * o->batch;
  for (int64_t i = 0; i < count; i++) {
    TRY_DATA(t, gaaw_dataset_val_batch(t->data->set, ((int64_t)t->dp_rank * count + i) * o->batch, rows, (int)o->batch,
                                  t->tokens, t->targets));
    TRY(t, gaaw_model_forward(t->model, &b, &l));
    sum += l;
  }
  *loss = sum / (float)count;
  return dp_mean(t, loss);
}

/* splitmix64, for sampling. */
static uint64_t next_random(uint64_t *state)
{
  uint64_t x = (*state += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The next byte from one row of logits: the most likely one, or one drawn from
 * softmax(logits / temperature). Only byte values are candidates. */
static int pick(const float *logits, int vocab, double temperature, uint64_t *rng)
{
  int n = vocab < 256 ? vocab : 256, best = 0;
  for (int v = 1; v < n; v++)
    if (logits[v] > logits[best]) best = v;
  if (temperature <= 0) return best;
  double total = 0, u;
  for (int v = 0; v < n; v++) total += exp((logits[v] - logits[best]) / temperature);
  u = (double)(next_random(rng) >> 11) / 9007199254740992.0 * total; /* uniform in [0, total) */
  for (int v = 0; v < n; v++) {
    u -= exp((logits[v] - logits[best]) / temperature);
    if (u < 0) return v;
  }
  return best;
}

gaaw_status_t trainer_sample(trainer *t, const char *prompt, int n, unsigned char *out)
{
  const train_options *o = t->opts;
  int len = (int)strlen(prompt), vocab = (int)o->vocab;
  uint64_t rng = (uint64_t)o->seed ^ 0x53414d504c45ull; /* "SAMPLE" */
  memcpy(out, prompt, (size_t)len);
  for (int i = 0; i < n; i++, len++) {
    int ctx_len = len < o->seq ? len : (int)o->seq; /* the last seq bytes */
    for (int k = 0; k < ctx_len; k++) t->tokens[k] = t->targets[k] = out[len - ctx_len + k];
    gaaw_batch_t b = batch_of(t, 1, ctx_len);
    TRY(t, gaaw_model_predict(t->model, &b, t->logits)); /* every rank gets them, at any pp */
    out[len] = (unsigned char)pick(t->logits + (size_t)(ctx_len - 1) * vocab, vocab, o->temperature, &rng);
  }
  return GAAW_SUCCESS;
}
