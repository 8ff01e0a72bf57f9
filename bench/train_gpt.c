/* The gaaw side of bench/train_gpt.sh: training steps of the reference GPT (DESIGN.md
 * section 6a at gaaw_gpt_config_default's sizes: vocab 256, seq 128, 4 layers, 4
 * heads, dim 256, tied, f32), or with --arch llama of the LLaMA-class GPT at those
 * sizes (gaaw_gpt_config_llama: RoPE, RMSNorm, SwiGLU of width 704, no biases,
 * untied) with 2 kv heads, with AdamW (lr 3e-4, betas (0.9, 0.95), weight decay
 * 0.1), batch 8 per dp rank. A step is gaaw_model_forward_backward on this rank's
 * microbatch then gaaw_optimizer_step.
 *
 *   mpiexec -n P ./bench/train_gpt [--steps K] [--warmup W] [--zero Z] [--tp T]
 *                                  [--batch B] [--arch gpt2|llama] [--threads N]
 *                                  [--GAAW_OPTION=VALUE ...]
 *
 * Runs W untimed steps, then K steps timed from a barrier to the last rank's return
 * (step_s = that time / K), and prints on rank 0 one line:
 *   train_gpt_gaaw np=P tp=T dp=D zero=Z batch=B seq=128 steps=K step_s=.. tok_per_step=..
 *   tok_s=.. cpu_s_per_step=.. loss_first=.. loss_last=..
 * cpu_s_per_step is the user + system time of every thread of every rank over the
 * timed steps (getrusage, summed over ranks) divided by K. The backend is host unless
 * --backend says otherwise. The batch is a hash of (dp rank, step, position), the
 * same bytes bench/train_gpt_torch.py generates. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"
#include "bench/bench_util.h"

#define CHECK(call) BENCH_CHECK("train_gpt bench", ctx, call)

typedef struct {
  int steps, warmup, zero, tp, batch;
} bench_options;

/* Takes --steps, --warmup, --zero, --tp and --batch; what remains goes to gaaw's
 * option parser. */
static int parse_options(int *argc, char **argv, bench_options *o)
{
  static const char *const keys[] = {"steps", "warmup", "zero", "tp", "batch"};
  int *const slots[] = {&o->steps, &o->warmup, &o->zero, &o->tp, &o->batch};
  if (!bench_take_int_options("train_gpt bench", argc, argv, keys, slots, 5)) return 0;
  return o->steps > 0 && o->tp > 0 && o->batch > 0;
}

/* Takes "--arch NAME" or "--arch=NAME" out of argv; 1 for llama, 0 for gpt2 (the
 * default), -1 for anything else. */
static int take_arch(int *argc, char **argv)
{
  int llama = 0, out = 1;
  for (int i = 1; i < *argc; i++) {
    const char *value = !strncmp(argv[i], "--arch=", 7) ? argv[i] + 7
                        : !strcmp(argv[i], "--arch") && i + 1 < *argc ? argv[++i] : NULL;
    if (!value) {
      argv[out++] = argv[i];
      continue;
    }
    llama = !strcmp(value, "llama") ? 1 : !strcmp(value, "gpt2") ? 0 : -1;
    if (llama < 0) break;
  }
  *argc = out;
  return llama;
}

/* tokens, targets: (batch, seq); each row is seq + 1 consecutive stream bytes. */
static void make_batch(int dp_rank, int step, int batch, int seq, int32_t *tokens, int32_t *targets)
{
  for (int b = 0; b < batch; b++)
    for (int t = 0; t < seq; t++) {
      int pos = b * (seq + 1) + t;
      tokens[b * seq + t] = bench_stream_byte(dp_rank, step, pos);
      targets[b * seq + t] = bench_stream_byte(dp_rank, step, pos + 1);
    }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  gaaw_context_t ctx = NULL;
  bench_options o = {.steps = 10, .warmup = 2, .zero = 0, .tp = 1, .batch = 8};
  int llama = take_arch(&argc, argv);
  if (llama < 0 || !parse_options(&argc, argv, &o)) {
    if (rank == 0)
      fprintf(stderr, "usage: train_gpt [--steps K>0] [--warmup W] [--zero 0..3] [--tp T>0] [--batch B>0] "
                      "[--arch gpt2|llama] [--GAAW_OPTION=VALUE ...]\n");
    MPI_Finalize();
    return 2;
  }
  gaaw_config_t cfg;
  CHECK(gaaw_config_create(&cfg));
  CHECK(gaaw_config_set(cfg, "backend", "host"));
  CHECK(gaaw_config_set_int(cfg, "tp", o.tp));
  if (bench_gaaw_start("train_gpt bench", cfg, &argc, argv, &ctx)) {
    MPI_Finalize();
    return 2;
  }
  int dp, pp, tp, dp_rank, pp_rank, tp_rank;
  CHECK(gaaw_topology_sizes(ctx, &dp, &pp, &tp));
  CHECK(gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank));

  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g); /* the sizes named above */
  if (llama) {
    gaaw_gpt_config_llama(&g);
    g.kv_heads = 2;
  }
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc); /* AdamW 3e-4, (0.9, 0.95), wd 0.1, constant lr */
  oc.zero_stage = o.zero;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  CHECK(gaaw_model_create_gpt(ctx, &g, &model));
  CHECK(gaaw_optimizer_create(model, &oc, &opt));

  int seq = g.max_seq;
  size_t n = (size_t)o.batch * (size_t)seq;
  int32_t *tokens = malloc(n * sizeof *tokens), *targets = malloc(n * sizeof *targets);
  if (!tokens || !targets) MPI_Abort(MPI_COMM_WORLD, 1);
  gaaw_batch_t batch = {.batch = o.batch, .seq = seq, .tokens = tokens, .targets = targets};

  float loss = 0, loss_first = 0;
  double t0 = 0, cpu0 = 0;
  for (int step = 0; step < o.warmup + o.steps; step++) {
    if (step == o.warmup) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      cpu0 = bench_cpu_seconds();
    }
    make_batch(dp_rank, step, o.batch, seq, tokens, targets);
    CHECK(gaaw_model_forward_backward(model, &batch, &loss));
    CHECK(gaaw_optimizer_step(opt));
    if (step == 0) loss_first = loss;
  }
  double times[2] = {MPI_Wtime() - t0, bench_cpu_seconds() - cpu0}, slowest, cpu_total;
  MPI_Reduce(&times[0], &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&times[1], &cpu_total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  /* Model FLOPs per token trained (forward + backward), as PaLM's MFU counts them
   * (gaaw_model_flops_per_token): 6 per weight of every matrix product plus 12
   * layers seq heads head_dim for attention's two products. */
  double flops_per_token = 0;
  CHECK(gaaw_model_flops_per_token(model, &flops_per_token));
  if (rank == 0) {
    double step_s = slowest / o.steps, tokens_per_step = (double)n * dp;
    /* rank 0's loss is its own microbatch's (dp rank 0), as on the PyTorch side */
    printf("train_gpt_gaaw arch=%s np=%d tp=%d dp=%d zero=%d batch=%d seq=%d steps=%d step_s=%.6f tok_per_step=%.0f "
           "tok_s=%.1f cpu_s_per_step=%.4f loss_first=%.4f loss_last=%.4f model_flops_per_token=%.0f\n",
           llama ? "llama" : "gpt2", world, tp, dp, o.zero, o.batch, seq, o.steps, step_s, tokens_per_step, tokens_per_step / step_s,
           cpu_total / o.steps, loss_first, loss, flops_per_token);
    fflush(stdout);
  }
  free(tokens);
  free(targets);
  CHECK(gaaw_optimizer_destroy(&opt));
  CHECK(gaaw_model_destroy(&model));
  CHECK(gaaw_finalize(&ctx));
  CHECK(gaaw_config_destroy(&cfg));
  MPI_Finalize();
  return 0;
}
