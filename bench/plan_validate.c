/* bench/plan_validate: the cost model (gaaw_plan_predict) against measured step
 * times, on the reference GPT (gaaw_gpt_config_default: vocab 256, seq 128, 4
 * layers, 4 heads, dim 256, f32), host backend, one thread per rank, 4 ranks:
 *   mpiexec -n 4 ./bench/plan_validate [--steps K] [--repeats R] [--global-batch G]
 * It calibrates this machine first (gaaw_plan_calibrate, every rank at once), then
 * builds every layout below, each training on the same G sequences per step
 * (default 16) with AdamW, warms each up one step, and times K steps at a time, the
 * layouts alternating, R rounds (defaults K = 2, R = 5); measured figures are the
 * medians. Lines (rank 0):
 *   plan_calibration gemm_tflops=.. memory_gbps=.. allreduce_latency_us=.. allreduce_gbps=.. host_update_gbps=..
 *   plan_validate layout=NAME dp=.. pp=.. tp=.. v=.. microbatch=.. microbatches=.. schedule=..
 *     zero=.. recompute=.. predicted_s=.. measured_s=.. error=..   (error: predicted / measured - 1)
 *   plan_validate_summary layouts=N within_20pct=K max_abs_error=.. spearman=..
 * Runs under the machine's OPENBLAS_* settings, whatever they are (printed). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "gaaw.h"

#define PROGRAM "plan_validate"
#define CHECK(ctx, call) BENCH_CHECK(PROGRAM, ctx, call)

enum { MAX_ROUNDS = 32, SEQ = 128 };

/* One layout: its options, what the model predicts, and its measured steps. */
typedef struct {
  const char *name;
  int dp, pp, tp, v, microbatches, zero, recompute; /* recompute: 0 none, 1 selective, 2 full */
  const char *schedule;
  gaaw_plan_layout_t plan;
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  double step_s[MAX_ROUNDS];
} layout;

static const char *const recompute_names[] = {"none", "selective", "full"};

static layout layouts[] = {
    {"dp4-zero0", 4, 1, 1, 1, 1, 0, 0, "1f1b"},
    {"dp4-zero1", 4, 1, 1, 1, 1, 1, 0, "1f1b"},
    {"dp4-zero2", 4, 1, 1, 1, 1, 2, 0, "1f1b"},
    {"dp4-zero3", 4, 1, 1, 1, 1, 3, 0, "1f1b"},
    {"dp4-full-recompute", 4, 1, 1, 1, 1, 0, 2, "1f1b"},
    {"tp2-dp2", 2, 1, 2, 1, 1, 1, 0, "1f1b"},
    {"tp4", 1, 1, 4, 1, 1, 0, 0, "1f1b"},
    {"pp2-dp2-1f1b", 2, 2, 1, 1, 4, 0, 0, "1f1b"},
    {"pp4-1f1b", 1, 4, 1, 1, 8, 0, 0, "1f1b"},
    {"pp4-gpipe", 1, 4, 1, 1, 8, 0, 0, "gpipe"},
    {"pp2-dp2-interleaved", 2, 2, 1, 2, 4, 0, 0, "interleaved"},
    {"pp2-tp2-zb-h1", 1, 2, 2, 1, 4, 0, 0, "zb-h1"},
};
enum { NLAYOUTS = sizeof layouts / sizeof layouts[0] };

static int world_rank, global_batch = 16;
static int32_t *tokens, *targets;

static int rows_per_microbatch(const layout *l) { return global_batch / (l->dp * l->microbatches); }

static void open_layout(layout *l)
{
  gaaw_config_t cfg;
  char options[256];
  snprintf(options, sizeof options,
           "backend=host threads=1 dp=%d pp=%d tp=%d virtual_stages=%d microbatches=%d pp_schedule=%s recompute=%s",
           l->dp, l->pp, l->tp, l->v, l->microbatches, l->schedule, recompute_names[l->recompute]);
  CHECK(NULL, gaaw_config_create(&cfg));
  CHECK(NULL, gaaw_config_parse(cfg, options));
  CHECK(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &l->ctx));
  gaaw_config_destroy(&cfg);
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  CHECK(l->ctx, gaaw_model_create_gpt(l->ctx, &g, &l->model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = l->zero;
  oc.accumulation = l->microbatches;
  CHECK(l->ctx, gaaw_optimizer_create(l->model, &oc, &l->opt));
}

static void close_layout(layout *l)
{
  gaaw_optimizer_destroy(&l->opt);
  gaaw_model_destroy(&l->model);
  gaaw_finalize(&l->ctx);
}

/* One optimizer step on this rank's rows of the global batch. */
static void step(layout *l)
{
  int dp_rank = 0;
  gaaw_topology_coords(l->ctx, &dp_rank, NULL, NULL);
  long at = (long)dp_rank * l->microbatches * rows_per_microbatch(l) * SEQ;
  gaaw_batch_t b = {.batch = rows_per_microbatch(l), .seq = SEQ, .microbatches = l->microbatches,
                    .tokens = tokens + at, .targets = targets + at};
  float loss;
  CHECK(l->ctx, gaaw_model_forward_backward(l->model, &b, &loss));
  CHECK(l->ctx, gaaw_optimizer_step(l->opt));
}

/* K steps from a barrier to the last rank's end: seconds per step. */
static double timed(layout *l, int steps)
{
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int s = 0; s < steps; s++) step(l);
  double mine = MPI_Wtime() - t0, slowest;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest / steps;
}

/* Ranks of v[0..n) (1-based, ties averaged), into r. */
static void ranks_of(const double *v, int n, double *r)
{
  for (int i = 0; i < n; i++) {
    int below = 0, equal = 0;
    for (int j = 0; j < n; j++) below += v[j] < v[i], equal += v[j] == v[i];
    r[i] = below + (equal + 1) / 2.0;
  }
}

/* Spearman's rank correlation: Pearson's of the ranks. */
static double spearman(const double *x, const double *y, int n)
{
  double rx[NLAYOUTS], ry[NLAYOUTS], mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
  ranks_of(x, n, rx);
  ranks_of(y, n, ry);
  for (int i = 0; i < n; i++) mx += rx[i] / n, my += ry[i] / n;
  for (int i = 0; i < n; i++)
    sxy += (rx[i] - mx) * (ry[i] - my), sxx += (rx[i] - mx) * (rx[i] - mx), syy += (ry[i] - my) * (ry[i] - my);
  return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0;
}

static void calibrate_and_predict(gaaw_plan_cluster_t *cluster)
{
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  CHECK(NULL, gaaw_config_create(&cfg));
  CHECK(NULL, gaaw_config_parse(cfg, "backend=host threads=1"));
  CHECK(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_config_destroy(&cfg);
  gaaw_plan_request_t req;
  memset(&req, 0, sizeof req);
  gaaw_gpt_config_default(&req.model);
  req.global_batch = global_batch;
  CHECK(ctx, gaaw_plan_calibrate(ctx, &req.model, cluster));
  for (int i = 0; i < NLAYOUTS; i++) {
    layout *l = &layouts[i];
    gaaw_plan_layout_t *p = &l->plan;
    memset(p, 0, sizeof *p);
    p->dp = l->dp, p->pp = l->pp, p->tp = l->tp, p->virtual_stages = l->v;
    p->microbatch = rows_per_microbatch(l), p->microbatches = l->microbatches;
    for (int k = 0; k < GAAW_PLAN_SCHEDULE_COUNT; k++)
      if (!strcmp(gaaw_plan_schedule_name(k), l->schedule)) p->schedule = k;
    p->zero_stage = l->zero, p->recompute = l->recompute, p->offload = 0;
    CHECK(ctx, gaaw_plan_predict(ctx, &req, cluster, p));
  }
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int world_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int steps = 2, rounds = 5;
  const char *const keys[] = {"steps", "repeats", "global-batch"};
  int *slots[] = {&steps, &rounds, &global_batch};
  if (!bench_take_int_options(PROGRAM, &argc, argv, keys, slots, 3) || argc > 1 || world_size != 4 || steps < 1 ||
      rounds < 1 || rounds > MAX_ROUNDS || global_batch < 8 || global_batch % 8) {
    if (world_rank == 0)
      fprintf(stderr, "usage: mpiexec -n 4 %s [--steps K] [--repeats R<=32] [--global-batch G, a multiple of 8]\n",
              argv[0]);
    MPI_Finalize();
    return 2;
  }
  size_t n = (size_t)global_batch * SEQ;
  tokens = malloc(n * sizeof *tokens);
  targets = malloc(n * sizeof *targets);
  for (int row = 0; row < global_batch; row++) /* row r of every step: stream r */
    for (int t = 0; t < SEQ; t++) {
      tokens[(size_t)row * SEQ + t] = bench_stream_byte(row, 0, t);
      targets[(size_t)row * SEQ + t] = bench_stream_byte(row, 0, t + 1);
    }

  gaaw_plan_cluster_t cluster;
  calibrate_and_predict(&cluster);
  if (world_rank == 0) {
    double best = 0;
    for (int i = 0; i < cluster.device.gemm_points; i++) best = fmax(best, cluster.device.gemm[i].tflops);
    printf("plan_calibration gemm_tflops=%.4f memory_gbps=%.2f allreduce_latency_us=%.2f allreduce_gbps=%.2f "
           "host_update_gbps=%.2f openblas_coretype=%s\n",
           best, cluster.device.memory_gbps, cluster.intra_node_latency_us, cluster.intra_node_gbps,
           cluster.host_update_gbps, getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
    fflush(stdout);
  }
  for (int i = 0; i < NLAYOUTS; i++) {
    open_layout(&layouts[i]);
    step(&layouts[i]); /* warm-up: allocations, first touch */
  }
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < NLAYOUTS; i++) layouts[i].step_s[r] = timed(&layouts[i], steps);

  double predicted[NLAYOUTS], measured[NLAYOUTS], worst = 0;
  int within = 0;
  for (int i = 0; i < NLAYOUTS; i++) {
    layout *l = &layouts[i];
    predicted[i] = l->plan.step_seconds;
    measured[i] = bench_median(l->step_s, rounds);
    double error = predicted[i] / measured[i] - 1;
    worst = fmax(worst, fabs(error));
    within += fabs(error) <= 0.2;
    if (world_rank == 0)
      printf("plan_validate layout=%s dp=%d pp=%d tp=%d v=%d microbatch=%d microbatches=%d schedule=%s zero=%d "
             "recompute=%s predicted_s=%.4f measured_s=%.4f error=%+.3f\n",
             l->name, l->dp, l->pp, l->tp, l->v, rows_per_microbatch(l), l->microbatches, l->schedule, l->zero,
             recompute_names[l->recompute], predicted[i], measured[i], error);
  }
  if (world_rank == 0)
    printf("plan_validate_summary layouts=%d within_20pct=%d max_abs_error=%.3f spearman=%.3f\n", NLAYOUTS, within,
           worst, spearman(predicted, measured, NLAYOUTS));
  for (int i = 0; i < NLAYOUTS; i++) close_layout(&layouts[i]);
  free(tokens), free(targets);
  MPI_Finalize();
  return 0;
}
