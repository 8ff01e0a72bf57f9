/* bench/pipeline: pipeline parallelism on the reference GPT (gaaw_gpt_config_default:
 * vocab 256, seq 128, 4 layers, 4 heads, dim 256, tied, f32), host backend, one
 * thread per rank, on 2 ranks:
 *   mpiexec -n 2 ./bench/pipeline [--steps K] [--repeats R] [--batch B]
 * Every configuration below runs a step of the same tokens (microbatches x B
 * sequences of 128), AdamW; each is built once, warmed up one step, then timed K
 * steps at a time, the configurations alternating, R rounds; figures are medians
 * (defaults K = 1, R = 9: on a shared machine a stall of one rank, tens of ms now
 * and then, shows as the other's idle time; the median of single steps drops it).
 * Lines (rank 0), one per figure:
 *   pipeline_bubble pp=2 schedule=1f1b m=M measured=.. expected=.. step_s=..
 *     measured: 1 - the ranks' busy time (forward_backward time less waits for
 *     peers, gaaw_model_pipeline_times) / (p x the slowest forward_backward time);
 *     expected (p-1)/(m+p-1);
 *   pipeline_tok_s config=pp2|dp2|tp2 m=8 tok_s=.. ratio_to_dp2=..
 *   pipeline_schedule pp=2 m=8 schedule=1f1b|interleaved(v=2)|zb-h1 step_s=.. bubble=.. ratio_to_1f1b=..
 *   pipeline_cores dp2 compute_s rank0=.. rank1=.. ratio=..
 *     the two ranks' layer compute seconds over every dp 2 step (the same work on
 *     each): a ratio above 1 is a machine whose cores run at different speeds,
 *     which shows in every pipeline figure as idle time of the faster rank
 * Runs under the machine's OPENBLAS_* settings, whatever they are (printed). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "gaaw.h"

#define CHECK(ctx, call)                                                                             \
  do {                                                                                               \
    gaaw_status_t st_ = (call);                                                                      \
    if (st_ != GAAW_SUCCESS) {                                                                       \
      fprintf(stderr, "pipeline bench: %s failed: %s\n%s\n", #call, gaaw_status_name(st_),           \
              gaaw_last_error(ctx)[0] ? gaaw_last_error(ctx) : gaaw_last_error(NULL));               \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                  \
    }                                                                                                \
  } while (0)

enum { MAX_CONFIGS = 16, MAX_ROUNDS = 32 };

typedef struct {
  const char *label;   /* for the output */
  char options[160];   /* gaaw_init options besides backend and threads */
  int microbatches;    /* per forward_backward on each rank */
  int calls;           /* forward_backward calls per step (dp: fewer rows each) */
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  double step_s[MAX_ROUNDS], bubble[MAX_ROUNDS];
} config;

static int world_rank, world_size, batch = 1;
static int32_t *tokens, *targets;

static void open_config(config *c)
{
  gaaw_config_t cfg;
  CHECK(NULL, gaaw_config_create(&cfg));
  CHECK(NULL, gaaw_config_parse(cfg, "backend=host threads=1"));
  CHECK(NULL, gaaw_config_parse(cfg, c->options));
  CHECK(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &c->ctx));
  gaaw_config_destroy(&cfg);
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  CHECK(c->ctx, gaaw_model_create_gpt(c->ctx, &g, &c->model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.accumulation = c->microbatches * c->calls;
  CHECK(c->ctx, gaaw_optimizer_create(c->model, &oc, &c->opt));
}

/* One optimizer step; adds this rank's waiting and forward_backward seconds. */
static void step(config *c, double *idle, double *total)
{
  int rows = c->microbatches * batch;
  for (int k = 0; k < c->calls; k++) {
    int dp_rank = 0;
    gaaw_topology_coords(c->ctx, &dp_rank, NULL, NULL);
    long at = ((long)dp_rank * c->calls + k) * rows * 128;
    gaaw_batch_t b = {.batch = batch, .seq = 128, .microbatches = c->microbatches, .tokens = tokens + at,
                      .targets = targets + at};
    float loss;
    CHECK(c->ctx, gaaw_model_forward_backward(c->model, &b, &loss));
    double i, t;
    gaaw_model_pipeline_times(c->model, &i, &t);
    *idle += i;
    *total += t;
  }
  CHECK(c->ctx, gaaw_optimizer_step(c->opt));
}

/* K timed steps: the wall time from a barrier to the last rank's end, per step, and
 * the bubble as DESIGN.md section 10 defines it: 1 - every rank's busy time (its
 * forward_backward time less its waits for peers) / (p x the slowest rank's
 * forward_backward time), so that a rank done early counts as idle until the end. */
static void timed(config *c, int steps, int round)
{
  double idle = 0, total = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int s = 0; s < steps; s++) step(c, &idle, &total);
  double mine = MPI_Wtime() - t0, slowest, busy = total - idle, busy_sum, makespan;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&busy, &busy_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&total, &makespan, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  c->step_s[round] = slowest / steps;
  c->bubble[round] = makespan > 0 ? 1 - busy_sum / (world_size * makespan) : 0;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int steps = 1, rounds = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--repeats")) rounds = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
  }
  if (world_size != 2 || steps < 1 || rounds < 1 || rounds > MAX_ROUNDS || batch < 1) {
    if (world_rank == 0) fprintf(stderr, "usage: mpiexec -n 2 %s [--steps K] [--repeats R<=32] [--batch B]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  /* the most rows any configuration reads: 16 microbatches of B, or dp 2 x 4 x B */
  size_t n = (size_t)16 * (size_t)batch * 128;
  tokens = malloc(n * sizeof *tokens);
  targets = malloc(n * sizeof *targets);
  uint64_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tokens[i] = (int32_t)((x >> 33) % 256);
  }
  for (size_t i = 0; i < n; i++) targets[i] = tokens[(i + 1) % n];

  config c[MAX_CONFIGS];
  int nc = 0;
  memset(c, 0, sizeof c);
  int bubble_m[4] = {2, 4, 8, 16};
  for (int k = 0; k < 4; k++) {
    c[nc] = (config){.label = "bubble", .microbatches = bubble_m[k], .calls = 1};
    snprintf(c[nc++].options, sizeof c[0].options, "pp=2 pp_schedule=1f1b microbatches=%d", bubble_m[k]);
  }
  int pp2 = 2; /* the m = 8, 1f1b configuration above */
  c[nc] = (config){.label = "dp2", .microbatches = 4, .calls = 1};
  snprintf(c[nc++].options, sizeof c[0].options, "dp=2 microbatches=4");
  c[nc] = (config){.label = "tp2", .microbatches = 8, .calls = 1};
  snprintf(c[nc++].options, sizeof c[0].options, "tp=2 microbatches=8");
  c[nc] = (config){.label = "interleaved(v=2)", .microbatches = 8, .calls = 1};
  snprintf(c[nc++].options, sizeof c[0].options, "pp=2 pp_schedule=interleaved virtual_stages=2 microbatches=8");
  c[nc] = (config){.label = "zb-h1", .microbatches = 8, .calls = 1};
  snprintf(c[nc++].options, sizeof c[0].options, "pp=2 pp_schedule=zb-h1 microbatches=8");
  for (int k = 0; k < nc; k++) {
    open_config(&c[k]);
    double i = 0, t = 0;
    step(&c[k], &i, &t); /* warm-up: first-touch of every buffer */
  }
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < nc; k++) timed(&c[k], steps, r);
  double compute = 0, computes[2];
  int layers = 0;
  gaaw_model_layer_count(c[4].model, &layers);
  for (int i = 0; i < layers; i++) {
    double f = 0, b = 0;
    gaaw_model_layer_times(c[4].model, i, NULL, &f, &b);
    compute += f + b;
  }
  MPI_Gather(&compute, 1, MPI_DOUBLE, computes, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  double tokens_per_step = 8.0 * batch * 128;
  if (world_rank == 0) {
    const char *blas = getenv("OPENBLAS_CORETYPE");
    printf("# pipeline bench: reference GPT, host backend, 1 thread per rank, np 2, batch %d x seq 128 per "
           "microbatch, %d steps x %d rounds (medians), OPENBLAS_CORETYPE=%s\n", batch, steps, rounds,
           blas ? blas : "(unset)");
    for (int k = 0; k < 4; k++) {
      double m = bubble_m[k];
      printf("pipeline_bubble pp=2 schedule=1f1b m=%d measured=%.4f expected=%.4f step_s=%.4f\n", bubble_m[k],
             bench_median(c[k].bubble, rounds), 1.0 / (m + 1.0), bench_median(c[k].step_s, rounds));
    }
    double dp_s = bench_median(c[4].step_s, rounds);
    const int order[3] = {pp2, 4, 5};
    const char *names[3] = {"pp2", "dp2", "tp2"};
    for (int k = 0; k < 3; k++) {
      double s = bench_median(c[order[k]].step_s, rounds);
      printf("pipeline_tok_s config=%s m=8 tok_s=%.1f ratio_to_dp2=%.3f\n", names[k], tokens_per_step / s, dp_s / s);
    }
    double base = bench_median(c[pp2].step_s, rounds);
    const int sched[3] = {pp2, 6, 7};
    for (int k = 0; k < 3; k++) {
      double s = bench_median(c[sched[k]].step_s, rounds);
      printf("pipeline_schedule pp=2 m=8 schedule=%s step_s=%.4f bubble=%.4f ratio_to_1f1b=%.3f\n",
             k == 0 ? "1f1b" : c[sched[k]].label, s, bench_median(c[sched[k]].bubble, rounds), s / base);
    }
    double lo = computes[0] < computes[1] ? computes[0] : computes[1];
    printf("pipeline_cores dp2 compute_s rank0=%.4f rank1=%.4f ratio=%.3f\n", computes[0], computes[1],
           lo > 0 ? (computes[0] + computes[1] - lo) / lo : 0);
  }
  for (int k = 0; k < nc; k++) {
    gaaw_optimizer_destroy(&c[k].opt);
    gaaw_model_destroy(&c[k].model);
    gaaw_finalize(&c[k].ctx);
  }
  free(tokens);
  free(targets);
  MPI_Finalize();
  return 0;
}
