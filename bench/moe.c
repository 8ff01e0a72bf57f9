/* A dense LLaMA against mixture-of-experts ones of the same active parameters, on 4
 * ranks (dp 4), the MoE of half-width experts at ep 1, 2 and 4 (expert parallelism:
 * E / ep experts per rank, the tokens exchanged with an alltoallv).
 *
 *   mpiexec -n 4 ./bench/moe [--steps K >= 2] [--dim C] [--layers L] [--seq T] [--batch B]
 *
 * A LLaMA (vocab 256, 4 heads, dim C = 256, L = 4 layers, ffn F = 2C, f32, host
 * backend) trains K steps (default 4) of AdamW at ZeRO 1, each dp replica on B = 4
 * sequences of T = 256 tokens, as: dense (every MLP SwiGLU of width F); MoE 8 x
 * top-2 with experts of width F / 2 (the same active MLP parameters: 2 x 3 C F / 2);
 * at ep 1, 2 and 4; and MoE 8 x top-1 with experts of width F. A step is timed from
 * a barrier to the slowest rank's return; its time is the median of steps 2..K.
 * Rank 0 prints one line per model:
 *   moe model=.. ep=.. experts=.. top_k=.. moe_ffn=.. params_m=.. active_params_m=.. step_s=..
 *       tokens_per_s=.. vs_dense=.. peak_mib=.. aux_loss=.. drop_fraction=.. a2a_bytes=.. a2a_formula=..
 * a2a_bytes: the last step's alltoallv bytes summed over the ranks' ep communicators;
 * a2a_formula: doc/moe.md's, 2 passes x 2 directions x the step's assignments (the
 * metrics' per-expert counts, summed) x C x 4 bytes.
 * params_m counts every parameter (millions), active_params_m those a token passes
 * through (all but the experts it skips: what MFU counts), vs_dense the
 * tokens/s over the dense model's, peak_mib the largest rank's device peak. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"
#include "bench/bench_util.h"

#define CHECK(call) BENCH_CHECK("moe bench", ctx, call)
enum { RANKS = 4, MAX_STEPS = 64 };

typedef struct {
  int steps, dim, layers, seq, batch;
} bench_options;

typedef struct {
  const char *name;
  int experts, top_k, ffn_div, ep;
} model_kind;

static int parse(int argc, char **argv, bench_options *o)
{
  *o = (bench_options){4, 256, 4, 256, 4};
  for (int i = 1; i < argc; i++) {
    int *v = !strcmp(argv[i], "--steps")    ? &o->steps
             : !strcmp(argv[i], "--dim")    ? &o->dim
             : !strcmp(argv[i], "--layers") ? &o->layers
             : !strcmp(argv[i], "--seq")    ? &o->seq
             : !strcmp(argv[i], "--batch")  ? &o->batch
                                            : NULL;
    if (!v || i + 1 >= argc || (*v = atoi(argv[++i])) < 1) return 0;
  }
  return o->steps >= 2 && o->steps <= MAX_STEPS && o->dim % 4 == 0;
}

/* Trains model k; returns its tokens/s (every rank). */
static double run(const bench_options *o, const model_kind *k, double dense_tps)
{
  gaaw_config_t cfg;
  gaaw_context_t ctx = NULL;
  CHECK(gaaw_config_create(&cfg));
  char options[64];
  snprintf(options, sizeof options, "backend=host ep=%d", k->ep);
  CHECK(gaaw_config_parse(cfg, options));
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 256, g.max_seq = o->seq, g.layers = o->layers, g.heads = 4, g.dim = o->dim, g.ffn = 2 * o->dim;
  gaaw_gpt_config_llama(&g);
  g.experts = k->experts, g.top_k = k->top_k, g.moe_ffn = g.ffn / k->ffn_div;
  gaaw_model_t m;
  CHECK(gaaw_model_create_gpt(ctx, &g, &m));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  gaaw_optimizer_t opt;
  CHECK(gaaw_optimizer_create(m, &oc, &opt));
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t n = (size_t)o->batch * (size_t)o->seq;
  int32_t *tokens = malloc(sizeof(int32_t) * (n + 1)), *targets = malloc(sizeof(int32_t) * (n + 1));
  double times[MAX_STEPS];
  gaaw_moe_metrics_t mm = {0};
  int64_t *counts = calloc((size_t)(o->layers * 8 + 1), sizeof(int64_t));
  gaaw_comm_t ep;
  uint64_t calls = 0, mine_bytes = 0, bytes = 0;
  CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_EP, &ep));
  for (int s = 0; s < o->steps; s++) {
    for (size_t i = 0; i < n; i++) tokens[i] = bench_stream_byte(rank, s, (int)i);
    for (size_t i = 0; i < n; i++) targets[i] = bench_stream_byte(rank, s, (int)i + 1);
    gaaw_batch_t b = {.batch = o->batch, .seq = o->seq, .tokens = tokens, .targets = targets};
    float loss;
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(gaaw_comm_stats_reset(ep));
    double t0 = MPI_Wtime(), mine, slowest;
    CHECK(gaaw_model_forward_backward(m, &b, &loss));
    CHECK(gaaw_optimizer_step(opt));
    mine = MPI_Wtime() - t0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times[s] = slowest;
    CHECK(gaaw_model_moe_metrics(m, &mm, counts, k->experts ? o->layers * k->experts : 0));
  }
  CHECK(gaaw_comm_stats(ep, GAAW_COMM_ALLTOALLV, &calls, &mine_bytes));
  MPI_Allreduce(&mine_bytes, &bytes, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  int64_t assignments = 0;
  for (int i = 0; k->experts && i < o->layers * k->experts; i++) assignments += counts[i];
  double formula = k->ep > 1 ? 2.0 * 2.0 * (double)assignments * g.dim * 4.0 : 0;
  double step_s = bench_median(times + 1, o->steps - 1), tps = RANKS * (double)n / step_s;
  int64_t params = 0;
  size_t current, peak, largest;
  CHECK(gaaw_model_num_params(m, &params, NULL));
  double skipped = k->experts ? (double)o->layers * (k->experts - k->top_k) * 3.0 * g.dim * g.moe_ffn : 0;
  CHECK(gaaw_memory_total(ctx, &current, &peak));
  MPI_Reduce(&peak, &largest, 1, MPI_UNSIGNED_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("moe model=%s ep=%d experts=%d top_k=%d moe_ffn=%d params_m=%.3f active_params_m=%.3f step_s=%.4f "
           "tokens_per_s=%.0f vs_dense=%.3f peak_mib=%.1f aux_loss=%.5f drop_fraction=%.3f a2a_bytes=%llu "
           "a2a_formula=%.0f\n",
           k->name, k->ep, k->experts, k->experts ? k->top_k : 0, k->experts ? g.moe_ffn : 0, params / 1e6,
           (params - skipped) / 1e6, step_s, tps, dense_tps > 0 ? tps / dense_tps : 1.0, largest / 1048576.0,
           mm.aux_loss, mm.drop_fraction, (unsigned long long)bytes, formula);
  free(counts);
  free(tokens);
  free(targets);
  CHECK(gaaw_optimizer_destroy(&opt));
  CHECK(gaaw_model_destroy(&m));
  CHECK(gaaw_finalize(&ctx));
  gaaw_config_destroy(&cfg);
  return tps;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bench_options o;
  if (size != RANKS || !parse(argc, argv, &o)) {
    fprintf(stderr, "usage: mpiexec -n 4 %s [--steps K >= 2] [--dim C (multiple of 4)] [--layers L] [--seq T] "
                    "[--batch B]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  static const model_kind kinds[] = {{"dense", 0, 0, 1, 1},   {"moe-8x2", 8, 2, 2, 1}, {"moe-8x2", 8, 2, 2, 2},
                                     {"moe-8x2", 8, 2, 2, 4}, {"moe-8x1", 8, 1, 1, 1}};
  double dense = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    double tps = run(&o, &kinds[k], dense);
    if (k == 0) dense = tps;
  }
  MPI_Finalize();
  return 0;
}
