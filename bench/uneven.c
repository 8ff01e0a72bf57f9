/* Devices of unequal speed (doc/uneven.md): data parallelism over ranks of which
 * some are slow (option compute_slowdown, set per rank: bench/uneven.sh), the same
 * global batch each step split evenly over the dp ranks, then in shares sized to
 * the ranks' speeds by gaaw_plan_shares. The reference GPT (gaaw_gpt_config_default:
 * vocab 256, seq 128, 4 layers, 4 heads, dim 256, tied, f32), AdamW at ZeRO --zero
 * with eps 10^-E (default 1e-5, as tests/mpi/test_zero.c: the key bias's gradient is
 * rounding noise, which Adam's default eps 1e-8 turns into steps of lr that differ
 * with any change of summation order, uneven rows or another layout alike).
 *
 *   mpiexec -n 2 ./bench/uneven : -n 2 env GAAW_COMPUTE_SLOWDOWN=2 ./bench/uneven
 *           [--steps K > 5] [--global-batch G] [--zero Z] [--eps-exp E] [--GAAW_OPTION=VALUE ...]
 *
 * Each split trains a fresh model K steps (default 15) on the same global batches (G
 * sequences a step, default 16, rows of one stream, dp rank d taking the rows after
 * those of ranks < d). The even split runs 5 steps first: the speeds are each rank's
 * rows per second of its layers' own compute in the fastest of steps 2..5
 * (gaaw_model_layer_times, which leaves out the waits for slower ranks), all-gathered,
 * and gaaw_plan_shares sizes the planned split from them; that one runs its first 5
 * steps, then the two alternate step by step, so both see the same load on a shared
 * machine. A step is timed from a barrier to the slowest rank's return; each split's
 * step time is the median of its steps 6..K. Rank 0 prints one line:
 *   uneven np=P dp=D zero=Z global_batch=G steps=K slowdowns=a,b,.. speeds=.. shares=..
 *   even_step_s=.. planned_step_s=.. speedup=.. param_rel_diff=.. worst_param=NAME
 *   eps=.. loss_even=.. loss_planned=..
 * slowdowns are the ranks' GAAW_COMPUTE_SLOWDOWN, speeds relative to the fastest;
 * param_rel_diff is the largest parameter difference between the two runs after 5
 * steps over the largest parameter magnitude (worst_param: where it is); loss_* the
 * global loss of step 5 (the row-weighted mean of the replicas'). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"
#include "bench/bench_util.h"
#include "tests/harness/model_util.h"

#define CHECK(call) BENCH_CHECK("uneven bench", ctx, call)
enum { COMPARE_STEP = 5, CALIBRATE = 5 };

typedef struct {
  int steps, global_batch, zero, eps_exp;
} bench_options;

/* One split's training: its model, its rows, and what it gave. */
typedef struct {
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  int mine, first, seq, done; /* this rank's rows, the first of them, steps done */
  int32_t *tokens, *targets;
  double *times;              /* each step's, the slowest rank's */
  float loss;                 /* global, after COMPARE_STEP steps */
  float *params;              /* after COMPARE_STEP steps */
  long count;
  model_layout layout;        /* which parameter each of params is */
} run;

static void run_open(gaaw_context_t ctx, const bench_options *o, run *r)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = o->zero;
  oc.eps = (float)pow(10, -o->eps_exp);
  CHECK(gaaw_model_create_gpt(ctx, &g, &r->model));
  CHECK(gaaw_optimizer_create(r->model, &oc, &r->opt));
  r->seq = g.max_seq;
  r->times = malloc((size_t)o->steps * sizeof *r->times);
  if (!r->times) MPI_Abort(MPI_COMM_WORLD, 1);
}

/* This rank takes rows[dp_rank] rows of each step's global batch from now on. */
static void run_rows(run *r, const int64_t *rows, int dp_rank)
{
  r->mine = (int)rows[dp_rank];
  r->first = 0;
  for (int d = 0; d < dp_rank; d++) r->first += (int)rows[d];
  size_t n = (size_t)r->mine * (size_t)r->seq;
  r->tokens = malloc(n * sizeof *r->tokens), r->targets = malloc(n * sizeof *r->targets);
  if (!r->tokens || !r->targets) MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One timed step (from a barrier to the slowest rank's return). */
static void run_step(gaaw_context_t ctx, run *r)
{
  int step = r->done++, seq = r->seq;
  for (int b = 0; b < r->mine; b++)
    for (int t = 0; t < seq; t++) {
      r->tokens[b * seq + t] = bench_stream_byte(r->first + b, step, t);
      r->targets[b * seq + t] = bench_stream_byte(r->first + b, step, t + 1);
    }
  gaaw_batch_t batch = {.batch = r->mine, .seq = seq, .tokens = r->tokens, .targets = r->targets};
  float loss;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  CHECK(gaaw_model_forward_backward(r->model, &batch, &loss));
  CHECK(gaaw_optimizer_step(r->opt));
  double took = MPI_Wtime() - t0;
  MPI_Allreduce(&took, &r->times[step], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (step + 1 == COMPARE_STEP) {
    double part[2] = {(double)r->mine * loss, (double)r->mine}, sum[2];
    MPI_Allreduce(part, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    r->loss = (float)(sum[0] / sum[1]);
    r->params = model_snapshot(r->model, 0, &r->count);
    r->layout = model_layout_of(r->model);
  }
}

/* This rank's seconds in its layers' own compute since the last reset. */
static double run_compute_seconds(gaaw_context_t ctx, run *r)
{
  int layers;
  double sum = 0;
  CHECK(gaaw_model_layer_count(r->model, &layers));
  for (int i = 0; i < layers; i++) {
    double f, b;
    CHECK(gaaw_model_layer_times(r->model, i, NULL, &f, &b));
    sum += f + b;
  }
  return sum;
}

static void run_close(gaaw_context_t ctx, run *r)
{
  free(r->tokens), free(r->targets), free(r->times), free(r->params);
  model_layout_free(&r->layout);
  CHECK(gaaw_optimizer_destroy(&r->opt));
  CHECK(gaaw_model_destroy(&r->model));
}

/* "a,b,c" of n values. */
static void join(char *out, size_t size, const double *v, const int64_t *iv, int n)
{
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    size_t len = strlen(out);
    if (v) snprintf(out + len, size - len, "%s%.3g", i ? "," : "", v[i]);
    else snprintf(out + len, size - len, "%s%lld", i ? "," : "", (long long)iv[i]);
  }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  gaaw_context_t ctx = NULL;
  bench_options o = {.steps = 15, .global_batch = 16, .zero = 0, .eps_exp = 5};
  static const char *const keys[] = {"steps", "global-batch", "zero", "eps-exp"};
  int *const slots[] = {&o.steps, &o.global_batch, &o.zero, &o.eps_exp};
  if (!bench_take_int_options("uneven bench", &argc, argv, keys, slots, 4) || o.steps <= CALIBRATE) {
    if (rank == 0)
      fprintf(stderr, "usage: uneven [--steps K>%d] [--global-batch G] [--zero 0..3] [--eps-exp E] "
              "[--GAAW_OPTION=VALUE ...]\n", CALIBRATE);
    MPI_Finalize();
    return 2;
  }
  gaaw_config_t cfg;
  CHECK(gaaw_config_create(&cfg));
  CHECK(gaaw_config_set(cfg, "backend", "host"));
  if (bench_gaaw_start("uneven bench", cfg, &argc, argv, &ctx)) {
    MPI_Finalize();
    return 2;
  }
  int dp, pp, tp, dp_rank, pp_rank, tp_rank;
  CHECK(gaaw_topology_sizes(ctx, &dp, &pp, &tp));
  CHECK(gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank));
  if (tp * pp != 1 || o.global_batch < dp) {
    if (rank == 0) fprintf(stderr, "uneven bench: runs dp only (tp %d, pp %d) with --global-batch >= dp\n", tp, pp);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double *speeds = malloc((size_t)dp * sizeof *speeds), *slowdowns = malloc((size_t)dp * sizeof *slowdowns);
  int64_t *even = malloc((size_t)dp * sizeof *even), *shares = malloc((size_t)dp * sizeof *shares);
  if (!speeds || !slowdowns || !even || !shares) MPI_Abort(MPI_COMM_WORLD, 1);
  const char *env = getenv("GAAW_COMPUTE_SLOWDOWN"); /* printed only: the library reads its option itself */
  double slowdown = env ? atof(env) : 1;
  MPI_Allgather(&slowdown, 1, MPI_DOUBLE, slowdowns, 1, MPI_DOUBLE, MPI_COMM_WORLD);
  for (int d = 0; d < dp; d++) speeds[d] = 1;
  CHECK(gaaw_plan_shares(ctx, dp, speeds, o.global_batch, even));

  /* the even split's first CALIBRATE steps (the first untimed: allocations) give
   * the speeds; then the planned split catches up, and the two alternate, so that
   * both see the same load on a shared machine */
  run a = {0}, b = {0};
  run_open(ctx, &o, &a);
  run_rows(&a, even, dp_rank);
  double compute[CALIBRATE];
  for (int step = 0; step < CALIBRATE; step++) {
    CHECK(gaaw_model_reset_times(a.model));
    run_step(ctx, &a);
    compute[step] = run_compute_seconds(ctx, &a);
  }
  double fastest = compute[1]; /* the step least disturbed by the ranks sharing its cores */
  for (int step = 2; step < CALIBRATE; step++) fastest = fmin(fastest, compute[step]);
  double mine = (double)even[dp_rank] / fastest;
  MPI_Allgather(&mine, 1, MPI_DOUBLE, speeds, 1, MPI_DOUBLE, MPI_COMM_WORLD);
  CHECK(gaaw_plan_shares(ctx, dp, speeds, o.global_batch, shares));
  run_open(ctx, &o, &b);
  run_rows(&b, shares, dp_rank);
  while (b.done < a.done) run_step(ctx, &b);
  while (a.done < o.steps) {
    run_step(ctx, &a);
    run_step(ctx, &b);
  }
  int timed = o.steps - CALIBRATE;
  double even_s = bench_median(a.times + CALIBRATE, timed), planned_s = bench_median(b.times + CALIBRATE, timed);

  double diff = 0, scale = 0;
  long worst = 0;
  for (long i = 0; i < a.count; i++) {
    double d = fabs((double)a.params[i] - (double)b.params[i]);
    if (d > diff) diff = d, worst = i;
    scale = fmax(scale, fabs((double)a.params[i]));
  }
  int worst_param = 0;
  while (worst_param + 1 < a.layout.count && a.layout.offset[worst_param + 1] <= worst) worst_param++;
  if (rank == 0) {
    double top = 0;
    for (int d = 0; d < dp; d++) top = fmax(top, speeds[d]);
    for (int d = 0; d < dp; d++) speeds[d] /= top;
    char s_slow[256], s_speed[256], s_share[256];
    join(s_slow, sizeof s_slow, slowdowns, NULL, dp);
    join(s_speed, sizeof s_speed, speeds, NULL, dp);
    join(s_share, sizeof s_share, NULL, shares, dp);
    printf("uneven np=%d dp=%d zero=%d global_batch=%d steps=%d slowdowns=%s speeds=%s shares=%s even_step_s=%.4f "
           "planned_step_s=%.4f speedup=%.3f param_rel_diff=%.3g worst_param=%s eps=%g loss_even=%.6f loss_planned=%.6f\n",
           world, dp, o.zero, o.global_batch, o.steps, s_slow, s_speed, s_share, even_s, planned_s,
           even_s / planned_s, diff / scale, a.layout.name[worst_param], pow(10, -o.eps_exp), a.loss, b.loss);
    fflush(stdout);
  }
  run_close(ctx, &a);
  run_close(ctx, &b);
  free(speeds), free(slowdowns), free(even), free(shares);
  CHECK(gaaw_finalize(&ctx));
  CHECK(gaaw_config_destroy(&cfg));
  MPI_Finalize();
  return 0;
}
