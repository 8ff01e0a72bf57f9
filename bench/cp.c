/* Context parallelism (doc/context-parallel.md) on 4 ranks: the ring against the
 * all-to-all, and both against cp 1, at each sequence length.
 *
 *   mpiexec -n 4 ./bench/cp [--seqs 2048,4096,8192] [--steps K >= 2] [--dim C] [--layers L] [--zero Z]
 *                          [--arch gpt2|llama]
 *
 * A GPT (vocab 256, 4 heads, dim 256, 2 layers, f32, blocked attention; GPT-2's
 * architecture, or with --arch llama LLaMA's: RoPE instead of a max_seq x dim position
 * table, RMSNorm, SwiGLU) trains K steps
 * (default 2) of AdamW at ZeRO Z (default 1; the state is cut over dp x cp = 4 in every
 * layout), each dp replica on one sequence of each length, in
 * each layout of the 4 ranks: cp 1 x dp 4, cp 4 ring, cp 4 a2a, cp 2 x dp 2 ring,
 * cp 2 x dp 2 a2a. A rank thus holds a whole sequence at cp 1 and a cp-th of one
 * above; tokens_per_s counts the dp sequences of a step. A step is timed from a barrier to the slowest rank's return; its
 * time is the median of steps 2..K (the first warms up). Rank 0 prints one line per
 * layout:
 *   cp seq=S layout=.. kind=.. step_s=.. tokens_per_s=.. peak_mib=.. estimate_mib=..
 *   estimate_err=..% peak_vs_cp1=.. activations_vs_cp1=.. overlap=.. planned_step_s=.. planned_mib=..
 * peak_mib is the largest rank's device peak (gaaw_memory_total), estimate_mib the
 * memory estimate's largest rank, peak_vs_cp1 the peak over cp 1's at the same
 * length, activations_vs_cp1 the same of the activations category's peak alone. overlap is the ring's: the share of its messages' time (post to
 * completion, the trace's "cp ring p2p" row) during which the rank computed a block
 * (the "cp ring" row), summed over the steps; "-" for the all-to-all (its exchanges
 * do not overlap compute) and at cp 1. planned_* are gaaw_plan_predict's step and
 * memory per rank for the layout on this machine as gaaw_plan_calibrate measures it
 * (one node of 4 ranks, every rank measuring at once), calibrated once per length. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gaaw.h"
#include "bench/bench_util.h"

#define CHECK(call) BENCH_CHECK("cp bench", ctx, call)
enum { RANKS = 4, MAX_SEQS = 8, SPANS = 1 << 16 };

typedef struct {
  int seqs[MAX_SEQS], nseqs, steps, dim, layers, zero, llama;
} bench_options;

typedef struct {
  const char *name, *kind;
  int cp;
} layout;

typedef struct {
  double step_s, peak, estimate, overlap;
  double activations; /* the largest rank's peak of the activations category alone */
} result;

static int parse(int argc, char **argv, bench_options *o)
{
  o->nseqs = 3, o->seqs[0] = 2048, o->seqs[1] = 4096, o->seqs[2] = 8192;
  o->steps = 2, o->dim = 256, o->layers = 2, o->zero = 1, o->llama = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seqs") && i + 1 < argc) {
      o->nseqs = 0;
      for (char *p = strtok(argv[++i], ","); p && o->nseqs < MAX_SEQS; p = strtok(NULL, ",")) o->seqs[o->nseqs++] = atoi(p);
    } else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      o->steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dim") && i + 1 < argc)
      o->dim = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
      o->layers = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--zero") && i + 1 < argc)
      o->zero = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
      o->llama = !strcmp(argv[++i], "llama");
    else
      return 0;
  }
  for (int k = 0; k < o->nseqs; k++)
    if (o->seqs[k] < 8 || o->seqs[k] % 8) return 0; /* 2 x cp pieces at cp 4 */
  return o->steps >= 2 && o->dim >= 4 && o->dim % 4 == 0 && o->layers >= 1 && o->zero >= 0 && o->zero <= 3;
}

/* The share of the message spans' time during which a compute span ran, from this
 * rank's trace file (spans do not nest within a row). */
static double overlap_of(const char *path)
{
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  static double cs[SPANS], ce[SPANS], ms[SPANS], me[SPANS];
  int nc = 0, nm = 0, compute = -1, p2p = -1;
  char line[1024], name[64];
  int pid, tid;
  double ts, dur;
  /* the lanes' names come last: read them first */
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%63[^\"]", &pid,
               &tid, name) == 3) {
      if (!strcmp(name, "cp ring")) compute = tid;
      if (!strcmp(name, "cp ring p2p")) p2p = tid;
    }
  rewind(f);
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "{\"name\":\"%63[^\"]\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%lf,\"dur\":%lf", name, &pid, &tid,
               &ts, &dur) == 5) {
      if (tid == compute && nc < SPANS) cs[nc] = ts, ce[nc++] = ts + dur;
      if (tid == p2p && nm < SPANS) ms[nm] = ts, me[nm++] = ts + dur;
    }
  fclose(f);
  double total = 0, covered = 0;
  for (int i = 0; i < nm; i++) {
    total += me[i] - ms[i];
    for (int j = 0; j < nc; j++) {
      double a = ms[i] > cs[j] ? ms[i] : cs[j], b = me[i] < ce[j] ? me[i] : ce[j];
      if (b > a) covered += b - a;
    }
  }
  return total > 0 ? covered / total : -1;
}

/* The bench's GPT at seq tokens. */
static void model_of(const bench_options *o, int seq, gaaw_gpt_config_t *g)
{
  gaaw_gpt_config_default(g);
  if (o->llama) gaaw_gpt_config_llama(g); /* RoPE, RMSNorm, SwiGLU, no biases, untied */
  g->max_seq = seq, g->dim = o->dim, g->layers = o->layers, g->heads = 4;
  g->dtype = GAAW_F32;
}

/* A context on comm with the options of list (collective over comm). */
static void open_context(MPI_Comm comm, const char *list, gaaw_config_t *cfg, gaaw_context_t *out)
{
  gaaw_context_t ctx = NULL;
  CHECK(gaaw_config_create(cfg));
  CHECK(gaaw_config_parse(*cfg, list));
  CHECK(gaaw_init(comm, *cfg, out));
}

/* This machine calibrated for the GPT at seq (collective). */
static void calibrate(const bench_options *o, int seq, gaaw_plan_cluster_t *cluster)
{
  gaaw_config_t cfg;
  gaaw_context_t ctx = NULL;
  open_context(MPI_COMM_WORLD, "backend=host threads=1 attention=blocked", &cfg, &ctx);
  gaaw_gpt_config_t g;
  model_of(o, seq, &g);
  CHECK(gaaw_plan_calibrate(ctx, &g, cluster));
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
}

/* gaaw_plan_predict of layout l at seq on cluster: *step_s and *bytes. */
static void plan_layout(const bench_options *o, const layout *l, int seq, const gaaw_plan_cluster_t *cluster,
                        double *step_s, double *bytes)
{
  gaaw_config_t cfg;
  gaaw_context_t ctx = NULL;
  open_context(MPI_COMM_SELF, "backend=host threads=1", &cfg, &ctx);
  gaaw_plan_request_t req;
  memset(&req, 0, sizeof req);
  model_of(o, seq, &req.model);
  req.global_batch = RANKS / l->cp;
  gaaw_plan_layout_t pl;
  memset(&pl, 0, sizeof pl);
  pl.dp = RANKS / l->cp, pl.pp = 1, pl.tp = 1, pl.cp = l->cp, pl.cp_kind = !strcmp(l->kind, "a2a");
  pl.virtual_stages = 1, pl.microbatch = 1, pl.microbatches = 1, pl.schedule = GAAW_PLAN_1F1B;
  pl.zero_stage = o->zero;
  CHECK(gaaw_plan_predict(ctx, &req, cluster, &pl));
  *step_s = pl.step_seconds;
  *bytes = pl.memory_bytes_per_rank;
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
}

static result run_layout(const bench_options *o, const layout *l, int seq, int world_rank, const char *trace)
{
  char list[1024];
  snprintf(list, sizeof list, "backend=host threads=1 comm_timeout=600 attention=blocked cp=%d cp_kind=%s%s%s", l->cp,
           l->kind, trace ? " trace=" : "", trace ? trace : "");
  gaaw_config_t cfg;
  gaaw_context_t ctx = NULL;
  open_context(MPI_COMM_WORLD, list, &cfg, &ctx);
  gaaw_gpt_config_t g;
  model_of(o, seq, &g);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = o->zero;
  int dp_rank, rows = 1;
  CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, NULL));
  gaaw_estimate_options_t eo;
  gaaw_estimate_options_default(&eo);
  eo.batch = rows, eo.seq = seq, eo.rank = -1;
  gaaw_memory_estimate_t est;
  CHECK(gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, &est));
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  CHECK(gaaw_memory_reset_peak(ctx));
  size_t before, peak;
  CHECK(gaaw_memory_total(ctx, &before, NULL));
  CHECK(gaaw_model_create_gpt(ctx, &g, &model));
  CHECK(gaaw_optimizer_create(model, &oc, &opt));
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)rows * (size_t)seq), *targets = malloc(sizeof(int32_t) * (size_t)rows * (size_t)seq);
  double *times = malloc(sizeof(double) * (size_t)o->steps);
  for (int s = 0; s < o->steps; s++) {
    for (int r = 0; r < rows; r++)
      for (int t = 0; t < seq; t++) {
        tokens[r * seq + t] = bench_stream_byte(dp_rank * rows + r, s, t);
        targets[r * seq + t] = bench_stream_byte(dp_rank * rows + r, s, t + 1);
      }
    gaaw_batch_t b = {.batch = rows, .seq = seq, .microbatches = 1, .tokens = tokens, .targets = targets};
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    CHECK(gaaw_model_forward_backward(model, &b, NULL));
    CHECK(gaaw_optimizer_step(opt));
    double mine = MPI_Wtime() - t0;
    MPI_Allreduce(&mine, &times[s], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  size_t act_peak;
  CHECK(gaaw_memory_total(ctx, NULL, &peak));
  CHECK(gaaw_memory_usage(ctx, GAAW_MEM_ACTIVATIONS, NULL, &act_peak));
  double used[2] = {(double)(peak - before), (double)act_peak}, largest[2];
  MPI_Allreduce(used, largest, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  result res = {bench_median(times + 1, o->steps - 1), largest[0], (double)est.total[GAAW_SPACE_DEVICE], -1,
                largest[1]};
  free(tokens);
  free(targets);
  free(times);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  if (trace && world_rank == 0) {
    char path[700];
    snprintf(path, sizeof path, "%s", trace);
    char *r = strstr(path, "%r");
    if (r) memmove(r + 1, r + 2, strlen(r + 2) + 1), r[0] = '0';
    res.overlap = overlap_of(path);
  }
  return res;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int world_rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bench_options o;
  if (!parse(argc, argv, &o) || size != RANKS) {
    if (world_rank == 0)
      fprintf(stderr, "usage: mpiexec -n 4 bench/cp [--seqs 2048,4096,8192] [--steps K >= 2] [--dim C] [--layers L] "
                      "[--zero Z] [--arch gpt2|llama]\n");
    MPI_Finalize();
    return 2;
  }
  char dir[] = "/tmp/gaaw-cp-bench-XXXXXX", trace[600];
  if (world_rank == 0 && !mkdtemp(dir)) dir[0] = 0;
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  snprintf(trace, sizeof trace, "%s/trace-%%r.json", dir);
  static const layout layouts[] = {
    {"cp1xdp4", "ring", 1}, {"cp4", "ring", 4}, {"cp4", "a2a", 4}, {"cp2xdp2", "ring", 2}, {"cp2xdp2", "a2a", 2},
  };
  for (int k = 0; k < o.nseqs; k++) {
    double base = 0, base_act = 0;
    gaaw_plan_cluster_t cluster;
    calibrate(&o, o.seqs[k], &cluster);
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
      const layout *l = &layouts[i];
      int ring = l->cp > 1 && !strcmp(l->kind, "ring");
      result r = run_layout(&o, l, o.seqs[k], world_rank, ring && dir[0] ? trace : NULL);
      if (i == 0) base = r.peak, base_act = r.activations;
      double planned_s = 0, planned_bytes = 0;
      if (world_rank == 0) plan_layout(&o, l, o.seqs[k], &cluster, &planned_s, &planned_bytes);
      if (world_rank == 0) {
        char overlap[32] = "-";
        if (r.overlap >= 0) snprintf(overlap, sizeof overlap, "%.2f", r.overlap);
        printf("cp arch=%s seq=%d zero=%d layout=%s kind=%s step_s=%.3f tokens_per_s=%.0f peak_mib=%.1f estimate_mib=%.1f "
               "estimate_err=%.2f%% peak_vs_cp1=%.3f activations_vs_cp1=%.3f overlap=%s planned_step_s=%.3f "
               "planned_mib=%.1f\n",
               o.llama ? "llama" : "gpt2", o.seqs[k], o.zero, l->name, l->cp > 1 ? l->kind : "-", r.step_s, RANKS / l->cp * (double)o.seqs[k] / r.step_s,
               r.peak / (1 << 20), r.estimate / (1 << 20), 100 * (r.estimate - r.peak) / r.peak, r.peak / base,
               r.activations / base_act, overlap,
               planned_s, planned_bytes / (1 << 20));
        fflush(stdout);
      }
    }
  }
  if (world_rank == 0 && dir[0]) {
    for (int r = 0; r < RANKS; r++) {
      char path[600];
      snprintf(path, sizeof path, "%s/trace-%d.json", dir, r);
      unlink(path);
    }
    rmdir(dir);
  }
  MPI_Finalize();
  return 0;
}
