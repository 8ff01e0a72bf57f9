/* gaaw-train: trains the GPT on bytes of text (token = byte) with tensor
 * parallelism (--tp) and data parallelism (dp = world / tp) with ZeRO (--zero).
 *
 *   mpiexec -n 4 gaaw-train --tp 2 --zero 1 --steps 200 --data my.txt
 *
 * Rank 0 logs one line per step (loss averaged over dp, lr, grad norm, time,
 * tokens/s, model TFLOP/s and MFU, memory), the validation loss before training,
 * every --eval-every steps and at the end, a generated sample, and a summary line;
 * on a terminal also a progress line on stderr (--progress). With --save-dir it saves
 * a checkpoint every --save-every steps and after the last; --resume auto|DIR
 * continues a run from one (the same losses, bit for bit, as the run that was never
 * stopped; doc/gaaw-train.md). --help lists every
 * option. Exit status: 0 done, 1 a failure while running, 2 bad options (the
 * trainer's and the library's), config file, data or layout, or a model and batch
 * that cannot fit the node's memory or whose memory estimate exceeds
 * device_memory_limit (reported before any training, by one rank,
 * the same on all; everything but the data, what only gaaw_init can judge, such
 * as a device index, and the memory estimate, which needs the context, before the
 * data file is read).
 *
 * Files: train/options.c (the options and their checks), train/data.c (the text,
 * its split and microbatches), train/trainer.c (steps, validation, sampling),
 * train/estimate.c (the memory estimate before training, and the refusal of a
 * job that exceeds device_memory_limit), train/report.c (log lines and the
 * metrics file), train/peak.c (the peak
 * behind the MFU), train/progress.c (the progress line on stderr), train/plot.c
 * (--plot: gaaw-plot on the metrics file at the end). */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/train/data.h"
#include "examples/train/estimate.h"
#include "examples/train/layout.h"
#include "examples/train/options.h"
#include "examples/train/plot.h"
#include "examples/train/progress.h"
#include "examples/train/report.h"
#include "examples/train/peak.h"
#include "examples/train/trainer.h"
#include "gaaw.h"

static int world_rank = 0, world_size = 1;

/* Every rank learns the worst exit status of all; the reason is printed once: by
 * rank 0 if it failed there, else by the lowest rank that failed. */
static int agree_hint(int code, const char *reason, int hint)
{
  int worst, first = code ? world_rank : world_size, lowest;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (worst && world_rank == lowest) {
    if (lowest == 0) fprintf(stderr, "gaaw-train: %s\n", reason);
    else fprintf(stderr, "gaaw-train: rank %d: %s\n", world_rank, reason);
    if (hint) fprintf(stderr, "gaaw-train: --help lists the options\n");
  }
  return worst;
}

static int agree(int code, const char *reason)
{
  return agree_hint(code, reason, 0);
}

/* Reads --data-path (or --data, or the shipped corpus); the files are opened by
 * train() once the context exists. */
static int parse_data(const train_options *o, train_data *data, char *err, size_t len)
{
  return agree(train_data_parse(o, data, err, len), err);
}

static void print_header(trainer *t)
{
  const train_options *o = t->opts;
  const char *backend = "?";
  int64_t params = 0, local = 0;
  gaaw_backend_name(t->ctx, &backend);
  gaaw_model_num_params(t->model, &params, &local);
  int cp = 1;
  gaaw_topology_cp(t->ctx, &cp, NULL);
  char pp[32] = "", cps[32] = ""; /* the axes above 1 only */
  if (t->pp > 1) snprintf(pp, sizeof pp, " x pp %d", t->pp);
  if (cp > 1) snprintf(cps, sizeof cps, " x cp %d", cp);
  printf("gaaw-train: world %d = dp %d%s%s x tp %d, backend %s, ZeRO %ld, %s\n", world_size, t->dp, pp, cps, t->tp,
         backend, o->zero, o->optimizer);
  printf("model: GPT %ld layers, %ld heads, dim %ld, seq %ld, vocab %ld, %s, %.3f M parameters\n", o->layers,
         o->heads, o->dim, o->seq, o->vocab, o->dtype, (double)params / 1e6);
  printf("steps %ld x (%ld microbatch%s x %ld sequences x dp %d) = %.0f tokens per step, lr %g (warmup %ld, "
         "cosine to %g), clip %g, seed %ld\n",
         o->steps, o->accum * t->microbatches, o->accum * t->microbatches == 1 ? "" : "es", o->batch, t->dp,
         (double)o->accum * t->microbatches * (double)o->batch * (double)o->seq * t->dp, o->lr, o->warmup, o->min_lr,
         o->clip, o->seed);
  fflush(stdout);
}

/* The GPT's training FLOPs per token (gaaw_model_flops_per_token). */
static double model_flops(trainer *t)
{
  double flops = 0;
  gaaw_model_flops_per_token(t->model, &flops);
  return flops;
}

/* A failure inside the loop may leave other ranks inside a collective: report it
 * from this rank and stop the job. */
static void abort_run(trainer *t)
{
  fprintf(stderr, "gaaw-train: rank %d: %s\n", world_rank, t->err);
  MPI_Abort(MPI_COMM_WORLD, TRAIN_EXIT_FAILURE);
}

/* A failed call of the loop: one that every rank has (t->agreed: a dataset read)
 * is reported once, by rank 0, and the loop returns on every rank, so that the job
 * ends normally (an abort could lose the message in the launcher); any other
 * aborts the job. Returns 1 for the caller to return. */
static int stop_run(trainer *t)
{
  if (!t->agreed) abort_run(t);
  if (world_rank == 0) fprintf(stderr, "gaaw-train: %s\n", t->err);
  return 1;
}

/* Training from the step after start to --steps (none when start is there
 * already), with a save after every --save-every-th step and the last, then the
 * --export file and the sample. */
static int train_loop(trainer *t, FILE *metrics, int64_t start, double peak)
{
  const train_options *o = t->opts;
  train_report r = {.metrics = metrics, .steps = o->steps > start ? o->steps : start, .start = start,
                    .flops_per_token = model_flops(t), .peak_tflops = peak, .world = world_size};
  train_progress progress;
  double *ranks = malloc(sizeof(double) * 2 * (size_t)world_size);
  if (!ranks) {
    snprintf(t->err, sizeof t->err, "cannot allocate the per-rank figures of %d ranks", world_size);
    abort_run(t);
  }
  float val = 0;
  if (trainer_eval(t, &val) && stop_run(t)) {
    free(ranks);
    return TRAIN_EXIT_FAILURE;
  }
  if (world_rank == 0) report_eval(&r, start, val);
  progress_start(&progress, o->progress, world_rank, start, r.steps);
  for (int64_t step = start + 1; step <= o->steps; step++) {
    gaaw_step_stats_t stats;
    train_step_info s = {.step = step, .stats = &stats, .save_ms = -1};
    size_t current;
    double began = MPI_Wtime();
    if (trainer_step(t, step, &s.loss) && stop_run(t)) {
      progress_clear(&progress);
      free(ranks);
      return TRAIN_EXIT_FAILURE;
    }
    s.ms = (MPI_Wtime() - began) * 1000;
    s.tokens = (double)o->accum * t->microbatches * o->batch * o->seq * t->dp;
    if (gaaw_optimizer_stats(t->opt, &stats) || gaaw_optimizer_memory(t->opt, &s.params_bytes, &s.grads_bytes, &s.optimizer_bytes) ||
        gaaw_memory_usage(t->ctx, GAAW_MEM_ACTIVATIONS, &current, &s.activation_peak) ||
        gaaw_memory_total(t->ctx, &current, &s.device_peak) || gaaw_model_moe_metrics(t->model, &s.moe, NULL, 0)) {
      snprintf(t->err, sizeof t->err, "reading the step's statistics failed:\n%s", gaaw_last_error(t->ctx));
      abort_run(t);
    }
    /* the largest rank's device peak so far, for rank 0's line */
    unsigned long long own = s.device_peak, largest = 0;
    MPI_Reduce(&own, &largest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    s.device_peak = (size_t)largest;
    if (t->pp > 1) { /* every rank's measured bubble and activation peak, for rank 0's line */
      double mine[2] = {t->busy > 0 ? t->idle / t->busy : 0, (double)s.activation_peak};
      MPI_Gather(mine, 2, MPI_DOUBLE, ranks, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      s.ranks = world_size;
      s.rank_figures = ranks;
    }
    int have_val = step == o->steps || (o->eval_every > 0 && step % o->eval_every == 0);
    if (have_val && trainer_eval(t, &val) && stop_run(t)) {
      progress_clear(&progress);
      free(ranks);
      return TRAIN_EXIT_FAILURE;
    }
    /* the step's metrics line is in the file before its checkpoint is, so that a
     * run resumed from that checkpoint finds it there; then it gets the save's time */
    if (world_rank == 0) report_metrics(&r, &s, have_val, val);
    if (o->save_dir[0] && (step % o->save_every == 0 || step == o->steps)) {
      if (trainer_save(t, step == o->steps, &s.save_ms)) abort_run(t);
      if (world_rank == 0) report_metrics_amend(&r, &s, have_val, val);
    }
    if (world_rank == 0) {
      progress_clear(&progress);
      report_step(&r, &s);
      if (have_val) report_eval(&r, step, val);
      progress_draw(&progress, step, s.loss, s.tokens / (s.ms / 1000));
    }
  }
  progress_clear(&progress);
  if (o->export[0]) {
    if (trainer_export(t)) abort_run(t);
    if (world_rank == 0) printf("export: the weights after step %lld in %s\n", (long long)r.steps, o->export);
  }
  if (o->sample > 0) {
    size_t n = strlen(o->prompt) + (size_t)o->sample;
    unsigned char *text = malloc(n);
    if (!text) {
      snprintf(t->err, sizeof t->err, "cannot allocate the %zu-byte sample", n);
      abort_run(t);
    }
    if (trainer_sample(t, o->prompt, (int)o->sample, text)) abort_run(t);
    if (world_rank == 0) report_sample(text, n, strlen(o->prompt), o->temperature);
    free(text);
  }
  if (world_rank == 0) report_summary(&r);
  free(ranks);
  return TRAIN_EXIT_OK;
}

/* The peak of one rank from option peak_tflops (0: unknown), measured on every
 * rank for `measure` (the mean of the ranks' figures, the same on all); rank 0
 * prints the model's FLOPs per token and the peak. */
static int find_peak(trainer *t, double *peak)
{
  int measure = 0;
  double mine = 0, sum = 0;
  train_peak_option(t->ctx, peak, &measure);
  if (measure) {
    int code = agree(train_peak_measure(t->ctx, &mine, t->err, sizeof t->err) ? TRAIN_EXIT_OK : TRAIN_EXIT_FAILURE,
                     t->err);
    if (code) return code;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *peak = sum / world_size;
    gaaw_memory_reset_peak(t->ctx); /* the GEMM's tensors are not the run's memory */
  }
  if (world_rank == 0) {
    const char *backend = "?";
    gaaw_backend_name(t->ctx, &backend);
    printf("flops: %.4g MFLOP per token (6 x parameters without wpe + 12 x layers x seq x dim)", model_flops(t) / 1e6);
    if (measure)
      printf(", peak %.4g TFLOP/s per rank (measured: f32 GEMM %d^3 through gaaw_gemm on %s, the mean over %d "
             "rank%s of each one's fastest of 5)\n", *peak, 1024, backend, world_size, world_size == 1 ? "" : "s");
    else if (*peak > 0) printf(", peak %g TFLOP/s per rank (peak_tflops)\n", *peak);
    else printf(", peak unknown: no MFU (set peak_tflops to a figure or to measure)\n");
    fflush(stdout);
  }
  return TRAIN_EXIT_OK;
}

/* A status of what the user named (a file of another model, one that is not
 * there or damaged, mismatched options) is a usage error; anything else a failure. */
static int usage_or_failure(gaaw_status_t st)
{
  if (st == GAAW_SUCCESS) return TRAIN_EXIT_OK;
  return st == GAAW_ERR_INVALID_ARG || st == GAAW_ERR_NOT_FOUND || st == GAAW_ERR_CORRUPT ? TRAIN_EXIT_USAGE
                                                                                            : TRAIN_EXIT_FAILURE;
}

/* --resume's checkpoint, loaded into t: *start is its
 * step, 0 for a fresh start (--resume auto with no checkpoint in --save-dir, or no
 * --resume). A checkpoint beyond --steps (but for --steps 0) is a usage error. */
static int resume(trainer *t, int64_t *start)
{
  const train_options *o = t->opts;
  int automatic = !strcmp(o->resume, "auto");
  const char *path = automatic ? o->save_dir : o->resume;
  *start = 0;
  if (!o->resume[0]) return TRAIN_EXIT_OK;
  gaaw_status_t st = trainer_resume(t, path, start);
  if (st == GAAW_ERR_NOT_FOUND && automatic) { /* the first run of a resubmitted job */
    if (world_rank == 0) {
      if (o->import[0]) printf("resume: no checkpoint in %s: a fresh start from %s\n", path, o->import);
      else printf("resume: no checkpoint in %s: a fresh start\n", path);
      fflush(stdout);
    }
    return TRAIN_EXIT_OK;
  }
  int code = agree(usage_or_failure(st), t->err);
  if (code) return code;
  if (o->steps > 0 && *start > o->steps) {
    snprintf(t->err, sizeof t->err, "the checkpoint in %s is at step %lld, beyond --steps %ld", path,
             (long long)*start, o->steps);
    return agree(TRAIN_EXIT_USAGE, t->err);
  }
  if (world_rank == 0) {
    if (o->steps == 0 || *start == o->steps)
      printf("resume: step %lld from %s: nothing left to train, evaluating\n", (long long)*start, path);
    else
      printf("resume: step %lld from %s, training steps %lld-%ld\n", (long long)*start, path, (long long)*start + 1,
             o->steps);
    fflush(stdout);
  }
  return TRAIN_EXIT_OK;
}

static int train(gaaw_config_t cfg, train_options *o, train_data *data, FILE *metrics)
{
  gaaw_context_t ctx = NULL;
  trainer t;
  char err[4096], chosen[512];
  int planned = agree(train_layout_auto(cfg, o, chosen, sizeof chosen, err, sizeof err), err);
  if (planned != TRAIN_EXIT_OK) return planned;
  gaaw_status_t st = gaaw_init(MPI_COMM_WORLD, cfg, &ctx);
  if (st != GAAW_SUCCESS) {
    /* an option gaaw_init judges with the device in hand (a device index that does
     * not exist, a backend with no device here) is a bad option too */
    int bad_option = st == GAAW_ERR_INVALID_ARG || st == GAAW_ERR_UNSUPPORTED;
    snprintf(err, sizeof err, "gaaw_init failed:\n%s", gaaw_last_error(NULL));
    return agree(bad_option ? TRAIN_EXIT_USAGE : TRAIN_EXIT_FAILURE, err);
  }
  /* before the model: a job whose estimate exceeds device_memory_limit stops here,
   * and a dataset that cannot be read (every rank has the library's verdict) */
  train_estimate estimate;
  int code = agree(train_estimate_check(ctx, o, &estimate, err, sizeof err), err);
  if (code == TRAIN_EXIT_OK) code = agree(train_data_open(ctx, o, data, err, sizeof err), err);
  if (code != TRAIN_EXIT_OK) {
    train_data_close(data);
    gaaw_finalize(&ctx);
    return code;
  }
  /* the library refuses a model or optimizer whose settings differ across ranks
   * (an MPMD launch with other options) as invalid: a usage error too */
  gaaw_status_t setup = trainer_setup(&t, ctx, o, data);
  code = agree(usage_or_failure(setup), t.err);
  int64_t start = 0;
  if (code == TRAIN_EXIT_OK && world_rank == 0) {
    if (chosen[0]) printf("%s\n", chosen);
    print_header(&t);
    train_estimate_print(&estimate);
  }
  if (code == TRAIN_EXIT_OK) code = resume(&t, &start);
  double peak = 0;
  if (code == TRAIN_EXIT_OK) code = find_peak(&t, &peak);
  if (code == TRAIN_EXIT_OK && o->metrics[0]) { /* rank 0's file continues after the loaded step */
    int ok = !metrics || report_metrics_restart(metrics, o->metrics, start, err, sizeof err);
    code = agree(ok ? TRAIN_EXIT_OK : TRAIN_EXIT_FAILURE, err);
  }
  if (code == TRAIN_EXIT_OK) code = train_loop(&t, metrics, start, peak);
  trainer_free(&t);
  train_data_close(data);
  gaaw_finalize(&ctx);
  return code;
}

/* The world, the ranks on this node and the node's physical memory. */
static void find_machine(train_machine *m)
{
  MPI_Comm node;
  m->world = world_size;
  m->node_ranks = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &m->node_ranks);
    MPI_Comm_free(&node);
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  m->node_memory = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

static int run(int argc, char **argv)
{
  gaaw_config_t cfg = NULL;
  train_machine machine;
  train_options *opts = calloc(1, sizeof *opts);
  train_data data = {0};
  FILE *metrics = NULL;
  char err[4096] = "out of memory";
  int help = 0, code = TRAIN_EXIT_FAILURE;
  find_machine(&machine); /* collective: before anything that may fail on one rank */
  if (opts && gaaw_config_create(&cfg) != GAAW_SUCCESS) {
    snprintf(err, sizeof err, "%s", gaaw_last_error(NULL)); /* a malformed GAAW_* variable */
    code = TRAIN_EXIT_USAGE;
  } else if (opts) {
    code = train_options_load(opts, cfg, argc, argv, &machine, &help, err, sizeof err);
  }
  if (help && code == TRAIN_EXIT_OK) { /* the same command line everywhere: no need to agree */
    if (world_rank == 0) train_options_usage(stdout, "gaaw-train");
    goto done;
  }
  code = agree_hint(code, err, code == TRAIN_EXIT_USAGE);
  if (code == TRAIN_EXIT_OK) code = parse_data(opts, &data, err, sizeof err);
  if (code == TRAIN_EXIT_OK) {
    int local = TRAIN_EXIT_OK;
    /* the name fits: checked with the options */
    if (opts->plot[0] && !opts->metrics[0] &&
        snprintf(opts->metrics, sizeof opts->metrics, "%s/metrics.jsonl", opts->plot) >= (int)sizeof opts->metrics)
      opts->metrics[0] = '\0';
    /* before training: that gnuplot is there, not only at the end */
    if (world_rank == 0 && opts->plot[0] &&
        !(train_plot_check(err, sizeof err) && train_plot_prepare(opts->plot, err, sizeof err)))
      local = TRAIN_EXIT_USAGE;
    else if (world_rank == 0 && opts->metrics[0] && !(metrics = fopen(opts->metrics, "a"))) {
      /* "a": not emptied before a resumed run knows which lines to keep */
      snprintf(err, sizeof err, "cannot write the metrics file '%s': %s", opts->metrics, strerror(errno));
      local = TRAIN_EXIT_USAGE;
    }
    code = agree(local, err);
  }
  if (code == TRAIN_EXIT_OK) code = train(cfg, opts, &data, metrics);
  if (code == TRAIN_EXIT_OK && world_rank == 0 && opts->plot[0]) { /* the metrics complete, then drawn */
    int closed = !metrics || fclose(metrics) == 0;
    metrics = NULL;
    if (!closed) snprintf(err, sizeof err, "cannot write the metrics file '%s': %s", opts->metrics, strerror(errno));
    if (!closed || !train_plot_run(opts->plot, opts->metrics, err, sizeof err)) {
      fprintf(stderr, "gaaw-train: %s\n", err);
      code = TRAIN_EXIT_FAILURE;
    }
  }
done:
  if (metrics) fclose(metrics);
  gaaw_config_destroy(&cfg);
  free(opts);
  return code;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int code = run(argc, argv);
  MPI_Finalize();
  return code;
}
