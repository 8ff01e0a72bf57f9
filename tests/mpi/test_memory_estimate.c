/* The memory estimate against the measured device peak on 4 ranks (built as
 * test_memory_estimate_np4), host backend, a tiny GPT, two training steps of two
 * microbatches each, from a fresh context per layout:
 *  - ZeRO stages 0..3 x offload_optimizer {none, host, nvme} (at stage 3 with the
 *    state off the device, x offload_params {none, host, nvme}) x dp {1, 2, 4} (the
 *    world split into groups of dp ranks) x recompute {none, selective, full}: on every
 *    rank the estimate for that rank (gaaw_memory_estimate with the context's own
 *    options) equals the peak of gaaw_memory_total within 2%, and but for sequence
 *    parallelism (and Open MPI's pipelines: see UNDER_MPICH) is below it by at most
 *    the host kernels' partial sums;
 *  - pp 2 x dp 2 with gpipe, 1f1b, interleaved (2 virtual stages) and zb-h1, stage
 *    1 and 2; interleaved with 2 virtual stages on pp 1 x dp 4;
 *  - the LLaMA-class GPT (2 kv heads, vocabulary 1,001) at tp 2 x dp 2 and at tp 4
 *    (kv heads replicated), ZeRO 1 and 3, recompute none, selective and full, and
 *    at ZeRO 2 with a bucket per layer; the
 *    GPT-2 (with biases) over 1 kv head at tp 2 x dp 2;
 *  - sequence parallelism at tp 2 x dp 2, ZeRO 1 and 3;
 *  - context parallelism (the ring's and the all-to-all's buffers; the state cut
 *    over dp x cp): the ring at cp 2 x dp 2, cp 4 at ZeRO 3 with full recomputation,
 *    cp 2 x tp 2 (LLaMA, selective), cp 2 x pp 2 under 1F1B, and the LLaMA at cp 2 x
 *    dp 2, ZeRO 3; all-to-all at cp 2 x dp 2, cp 4 (LLaMA, ZeRO 3, full) and cp 2 x
 *    tp 2 (LLaMA, selective);
 *  - mixture-of-experts MLPs (LLaMA, 8 experts, top-2, a gated shared expert) at dp 2, dp 4 with ZeRO 3
 *    and full recomputation, pp 2 x dp 2 under 1F1B (4 experts, selective), tp 2 x
 *    dp 2 (a tp-th of the tokens routed on each rank, gathered back) and with
 *    sequence parallelism at ZeRO 3 and full recomputation; at ep 2 (dp 2) and ep 4
 *    (dp 4, ZeRO 3, full recomputation) the estimate is a bound: the parameters,
 *    gradients and optimizer state to the byte, the activations, communication and
 *    total at or above the measured peaks (the rows a rank's experts receive depend
 *    on the routing);
 *  - every category's peak but the workspace's (the host kernels' own scratch) to
 *    the byte, and with sequence parallelism the communication's (the tp ring's
 *    scratch is not estimated); the workspace's above by at most the host kernels'
 *    partial sums;
 *  - the estimate with rank -1 is the largest of the ranks';
 *  - ten estimates leave the heap as they found it (under MPICH: see UNDER_MPICH);
 *  - a 1024-device layout of a 1.3B GPT is estimated from one process;
 *  - bad input gets the named error on every rank.
 * Prints the largest relative difference seen. */
#include <malloc.h>
#include <math.h>
#include <mpi.h>
#include <time.h>

#include "backends/runtime/allocator.h"
#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"

enum { B = 1, T = 8, STEPS = 2, MICRO = 2 };
/* The estimate takes a pipeline send's tensor as freed at the exchange that posted
 * it: MPICH completes these small sends there; Open MPI later, so that a stage's
 * activations peak a boundary tensor above the estimate (its total stays within
 * 2%). Open MPI's progress thread also allocates while the heap is watched. */
#ifdef MPICH_VERSION
#define UNDER_MPICH 1
#else
#define UNDER_MPICH 0
#endif
static int world_rank;
static double worst = 0;
static int configs = 0;

typedef struct {
  int dp, stage, layers;
  const char *options;
  int llama; /* model_tiny_llama with 2 kv heads instead of model_tiny_gpt */
  int sequence_parallel;
  int kv_heads; /* model_tiny_gpt's (biases and all) kv heads; 0: one per head */
  int experts;  /* > 0: the LLaMA's MLPs mixtures of this many experts, top-2 */
} run_case;

/* STEPS steps of MICRO microbatches of (B, T) each. */
static void train(gaaw_context_t ctx, gaaw_model_t model, gaaw_optimizer_t opt, int vocab, uint64_t seed)
{
  int32_t tokens[MICRO * B * T], targets[MICRO * B * T];
  for (int s = 0; s < STEPS; s++) {
    model_random_batch(MICRO * B, T, vocab, seed + 13 * (uint64_t)s, tokens, targets);
    gaaw_batch_t b = {.batch = B, .seq = T, .microbatches = MICRO, .tokens = tokens, .targets = targets};
    float loss;
    require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
    require_ok(ctx, gaaw_optimizer_step(opt));
  }
}

/* Trains the case on comm and compares the estimate with the measured peak. */
static void check_case(MPI_Comm comm, const run_case *c)
{
  char list[512];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 microbatches=%d %s", MICRO, c->options);
  gaaw_context_t ctx = test_context(comm, list);
  gaaw_gpt_config_t g = c->llama ? model_tiny_llama(T, 2) : model_tiny_gpt(T, GAAW_F32);
  g.layers = c->layers;
  if (c->kv_heads) { /* dim 64: the bias's replicated blocks (3 x 32 f32 a rank) outweigh the
                      * workspace's tolerance */
    g.kv_heads = c->kv_heads;
    g.dim = 64;
  }
  g.sequence_parallel = c->sequence_parallel;
  if (c->experts) {
    g.experts = c->experts;
    g.moe_ffn = 16;
    g.shared_ffn = c->experts == 8 ? 8 : 0; /* a gated shared expert with 8 */
    g.shared_gate = 1;
  }
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = c->stage;
  oc.accumulation = MICRO;
  /* the estimate first: nothing is allocated yet */
  gaaw_estimate_options_t eo;
  gaaw_estimate_options_default(&eo);
  eo.batch = B;
  eo.seq = T;
  int rank;
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_WORLD, &rank, NULL));
  eo.rank = rank;
  gaaw_memory_estimate_t est, largest;
  require_ok(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, &est));
  eo.rank = -1;
  require_ok(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, &largest));
  size_t before;
  require_ok(ctx, gaaw_memory_total(ctx, &before, NULL));
  require_ok(ctx, gaaw_memory_reset_peak(ctx));
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int dp_rank; /* the ranks of a tp group train on the same batch */
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, NULL));
  train(ctx, model, opt, g.vocab, 77 + (uint64_t)dp_rank);
  size_t now, peak, cat_peak[GAAW_MEM_CATEGORY_COUNT];
  require_ok(ctx, gaaw_memory_total(ctx, &now, &peak));
  for (int k = 0; k < GAAW_MEM_CATEGORY_COUNT; k++)
    require_ok(ctx, gaaw_memory_usage(ctx, (gaaw_mem_category_t)k, NULL, &cat_peak[k]));
  double measured = (double)(peak - before), want = (double)est.total[GAAW_SPACE_DEVICE];
  double rel = fabs(want - measured) / measured;
  if (rel > worst) worst = rel;
  configs++;
  char cats[512];
  size_t at = 0;
  for (int k = 0; k < GAAW_MEM_CATEGORY_COUNT && at < sizeof cats; k++)
    if (cat_peak[k] != est.bytes[GAAW_SPACE_DEVICE][k])
      at += (size_t)snprintf(cats + at, sizeof cats - at, " %s %zu/%llu", gaaw_mem_category_name((gaaw_mem_category_t)k),
                             cat_peak[k], (unsigned long long)est.bytes[GAAW_SPACE_DEVICE][k]);
  cats[at] = 0;
  /* expert parallelism: the rows a rank's experts receive depend on the routing;
   * the estimate bounds them by every row of the ep group (doc/moe.md) */
  const int bound = strstr(c->options, "ep=") != NULL;
  if (bound) {
    for (int k = 0; k < GAAW_MEM_CATEGORY_COUNT; k++) {
      int routed = k == GAAW_MEM_ACTIVATIONS || k == GAAW_MEM_COMMUNICATION;
      if (k == GAAW_MEM_WORKSPACE) continue; /* the host kernels' own scratch: checked below */
      expect_true(routed ? cat_peak[k] <= est.bytes[GAAW_SPACE_DEVICE][k] : cat_peak[k] == est.bytes[GAAW_SPACE_DEVICE][k],
                  "rank %d, %s: the %s peak is %zu bytes, the estimate %s %llu", world_rank, c->options,
                  gaaw_mem_category_name((gaaw_mem_category_t)k), cat_peak[k], routed ? "bounds it by" : "says",
                  (unsigned long long)est.bytes[GAAW_SPACE_DEVICE][k]);
    }
    expect_true(measured <= want, "rank %d, %s: the device peak %.0f is above the estimate's bound %.0f", world_rank,
                c->options, measured, want);
    if (world_rank == 0)
      printf("dp %d stage %d %-60s bound %8.0f measured %8.0f (%.1f%% above)\n", c->dp, c->stage, c->options, want,
             measured, 100 * (want - measured) / measured);
  }
  expect_true(bound || rel <= 0.02, "rank %d, dp %d stage %d %s: estimated device peak %.0f, measured %.0f (%.2f%%); "
              "category peaks measured/estimated:%s", world_rank, c->dp, c->stage, c->options, want, measured,
              100 * rel, cats);
  /* each category but the workspace to the byte (the activations with pipeline
   * stages only where sends complete where they are posted, UNDER_MPICH): the
   * host backend's kernels take
   * scratch of their own there (host_stage.c), which the estimate leaves out; so
   * does it the tp communicator's ring scratch (a known gap, doc/offload.md), which
   * only sequence parallelism's reduce-scatters take at this size */
  int late_sends = strstr(c->options, "pp=2") && !UNDER_MPICH;
  for (int k = 0; k < GAAW_MEM_CATEGORY_COUNT; k++)
    expect_true(bound || k == GAAW_MEM_WORKSPACE || (k == GAAW_MEM_COMMUNICATION && c->sequence_parallel) ||
                  (k == GAAW_MEM_ACTIVATIONS && late_sends) || cat_peak[k] == est.bytes[GAAW_SPACE_DEVICE][k],
                "rank %d, dp %d stage %d %s%s: the %s peak is %zu bytes, the estimate says %llu", world_rank, c->dp,
                c->stage, c->options, c->sequence_parallel ? " sequence_parallel" : "",
                gaaw_mem_category_name((gaaw_mem_category_t)k), cat_peak[k],
                (unsigned long long)est.bytes[GAAW_SPACE_DEVICE][k]);
  /* the workspace: what the estimate knows of, plus at most the host kernels' own
   * partial sums, an f32 row per 32 rows of the widest of a norm's backward (2 x dim)
   * and a bias gradient's (the MLP's ffn / tp columns; 256 bytes for the GPT at tp 1) */
  int tp = 1;
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_TP, NULL, &tp));
  int64_t ffn = g.ffn ? g.ffn : 4 * g.dim, widest = ffn / tp > 2 * g.dim && !g.no_bias ? ffn / tp : 2 * g.dim;
  uint64_t ws_est = est.bytes[GAAW_SPACE_DEVICE][GAAW_MEM_WORKSPACE],
           slack = (uint64_t)(4 * widest * ((B * T + 31) / 32));
  expect_true(cat_peak[GAAW_MEM_WORKSPACE] >= ws_est && cat_peak[GAAW_MEM_WORKSPACE] <= ws_est + slack,
              "rank %d, dp %d stage %d %s: the workspace peak is %zu bytes, the estimate's %llu plus at most %llu",
              world_rank, c->dp, c->stage, c->options, cat_peak[GAAW_MEM_WORKSPACE], (unsigned long long)ws_est,
              (unsigned long long)slack);
  /* the total likewise, where every other category is exact at every moment, not only
   * at its peak (so that a bucket freed late or early shows) */
  if (!late_sends && !c->sequence_parallel && !bound)
    expect_true(measured >= want && measured <= want + (double)slack,
                "rank %d, dp %d stage %d %s: the device peak is %.0f bytes, the estimate's %.0f plus at most %llu",
                world_rank, c->dp, c->stage, c->options, measured, want, (unsigned long long)slack);
  if (world_rank == 0 && !bound && (rel > 0 || getenv("GAAW_TEST_VERBOSE")))
    printf("dp %d stage %d %-60s estimate %8.0f measured %8.0f (%.3f%%)%s\n", c->dp, c->stage, c->options, want,
           measured, 100 * rel, cats);
  expect_true(largest.total[GAAW_SPACE_DEVICE] >= est.total[GAAW_SPACE_DEVICE],
              "rank %d: the largest rank's estimate %llu is below this rank's %llu", world_rank,
              (unsigned long long)largest.total[GAAW_SPACE_DEVICE], (unsigned long long)est.total[GAAW_SPACE_DEVICE]);
  int host = strstr(c->options, "offload_optimizer=host") != NULL, nvme = strstr(c->options, "=nvme") != NULL;
  expect_true(host || nvme ? est.bytes[GAAW_SPACE_DEVICE][GAAW_MEM_OPTIMIZER] == 0 && est.total[GAAW_SPACE_HOST] > 0
                           : est.total[GAAW_SPACE_HOST] == 0,
              "rank %d, %s: optimizer state device %llu, host %llu", world_rank, c->options,
              (unsigned long long)est.bytes[GAAW_SPACE_DEVICE][GAAW_MEM_OPTIMIZER],
              (unsigned long long)est.total[GAAW_SPACE_HOST]);
  expect_true(nvme == (est.total[GAAW_SPACE_NVME] > 0), "rank %d, %s: %llu bytes on nvme", world_rank, c->options,
              (unsigned long long)est.total[GAAW_SPACE_NVME]);
  /* host memory to the byte: the offload stores' buffers and ZeRO 3's host shard or
   * staging, all that gaaw_host_alloc gave since the context began */
  size_t host_peak;
  gaaw_host_usage(ctx, NULL, &host_peak);
  expect_true(host_peak == est.total[GAAW_SPACE_HOST], "rank %d, dp %d stage %d %s: the host peak is %zu bytes, the "
              "estimate says %llu", world_rank, c->dp, c->stage, c->options, host_peak,
              (unsigned long long)est.total[GAAW_SPACE_HOST]);
  int params_off = strstr(c->options, "offload_params=host") || strstr(c->options, "offload_params=nvme");
  uint64_t params_away = est.bytes[GAAW_SPACE_HOST][GAAW_MEM_PARAMS] + est.bytes[GAAW_SPACE_NVME][GAAW_MEM_PARAMS];
  expect_true(params_off == (params_away > 0), "rank %d, %s: %llu bytes of parameters off the device", world_rank,
              c->options, (unsigned long long)params_away);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

static void run_on_groups(const run_case *c)
{
  MPI_Comm comm;
  int group = c->dp * (strstr(c->options, "pp=2") ? 2 : 1) * (strstr(c->options, "tp=2") ? 2 : 1) *
              (strstr(c->options, "tp=4") ? 4 : 1) * (strstr(c->options, "cp=2") ? 2 : 1) *
              (strstr(c->options, "cp=4") ? 4 : 1);
  MPI_Comm_split(MPI_COMM_WORLD, world_rank / group, world_rank, &comm);
  check_case(comm, c);
  MPI_Comm_free(&comm);
}

/* Bad input: the named error, the same on every rank (each rank alone decides). */
static void bad_input(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  gaaw_estimate_options_t eo;
  gaaw_estimate_options_default(&eo);
  eo.seq = T;
  gaaw_memory_estimate_t out;
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, NULL, NULL, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, NULL, NULL, &eo, &out), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, NULL, &out), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_memory_estimate(NULL, &g, NULL, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
  eo.seq = T + 1;
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
  eo.seq = T;
  eo.batch = 0;
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
  eo.batch = 1;
  eo.rank = 4;
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
  eo.rank = -1;
  oc.zero_stage = 4;
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, NULL, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
  oc.zero_stage = 1;
  struct {
    const char *options, *message;
  } layouts[] = {
    {"tp=4", "heads (2) must be divisible by tp (4)"},
    {"tp=3", "not divisible by tp x cp x pp"},
    {"pp=4 dp=1", "layers"},
    {"pp=2 dp=2 pp_schedule=interleaved virtual_stages=2", "virtual"},
    {"pp=2 dp=2 pp_layout=1:2", "pp_layout"},
    {"offload_optimizer=bogus", "offload_optimizer"},
    {"recompute=sometimes", "recompute"},
    {"pp=2 dp=2 microbatches=1048576", "is above"}, /* refused by the schedule the estimate walks */
  };
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    gaaw_config_t cfg;
    require_ok(NULL, gaaw_config_create(&cfg));
    require_ok(NULL, gaaw_config_parse(cfg, layouts[i].options));
    expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, cfg, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
    const char *why = gaaw_last_error(ctx);
    expect_true(why && strstr(why, layouts[i].message), "layout '%s': the error '%s' does not say '%s'",
                layouts[i].options, why ? why : "(none)", layouts[i].message);
    gaaw_config_destroy(&cfg);
  }
  /* cp 4: a sequence of 8 tokens cuts into 8 pieces, one of 6 does not */
  gaaw_config_t cp4;
  require_ok(NULL, gaaw_config_create(&cp4));
  require_ok(NULL, gaaw_config_parse(cp4, "cp=4"));
  eo.seq = 6;
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, cp4, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "at cp = 4 options->seq 6 must divide by 2 x cp = 8") != NULL, "cp=4: %s",
              gaaw_last_error(ctx));
  eo.seq = T;
  gaaw_config_destroy(&cp4);
  /* sequence parallelism cuts a rank's tokens over tp: 3 tokens do not cut in 2, nor
   * do a sequence of 4 cut over cp 2 (2 tokens a rank) over tp 4 (a layout for 8
   * ranks, estimated from these 4) */
  gaaw_gpt_config_t sp = model_tiny_llama(T, 2);
  sp.sequence_parallel = 1;
  const char *sp_layouts[] = {"tp=2", "tp=4 cp=2 dp=1"};
  const int sp_seqs[] = {3, 4};
  const char *sp_says[] = {"batch x seq / cp = 3 tokens must divide by tp = 2",
                           "batch x seq / cp = 2 tokens must divide by tp = 4"};
  for (int k = 0; k < 2; k++) {
    require_ok(NULL, gaaw_config_create(&cp4));
    require_ok(NULL, gaaw_config_parse(cp4, sp_layouts[k]));
    eo.seq = sp_seqs[k];
    expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &sp, cp4, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
    expect_true(strstr(gaaw_last_error(ctx), sp_says[k]) != NULL, "%s, seq %d: %s", sp_layouts[k], sp_seqs[k],
                gaaw_last_error(ctx));
    gaaw_config_destroy(&cp4);
  }
  eo.seq = T;
  /* all-to-all splits the 2 heads of this GPT: not over cp 4 */
  require_ok(NULL, gaaw_config_create(&cp4));
  require_ok(NULL, gaaw_config_parse(cp4, "cp=4 cp_kind=a2a"));
  expect_status_ctx(ctx, gaaw_memory_estimate(ctx, &g, cp4, &oc, &eo, &out), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "the 2 heads of a tp rank (heads 2 / tp 1) must divide by cp") != NULL,
              "a2a: %s", gaaw_last_error(ctx));
  gaaw_config_destroy(&cp4);
  /* the estimate gives back what it allocates (a planner calls it for every layout
   * it weighs): after a first call, ten more leave the heap in use as it was */
  gaaw_config_t small;
  require_ok(NULL, gaaw_config_create(&small));
  require_ok(NULL, gaaw_config_parse(small, "tp=2 pp=2 dp=1 microbatches=2 pp_schedule=1f1b"));
  eo.rank = -1;
  require_ok(ctx, gaaw_memory_estimate(ctx, &g, small, &oc, &eo, &out));
  size_t in_use = mallinfo2().uordblks;
  for (int k = 0; k < 10; k++) require_ok(ctx, gaaw_memory_estimate(ctx, &g, small, &oc, &eo, &out));
  expect_true(!UNDER_MPICH || mallinfo2().uordblks == in_use, "ten estimates left %lld bytes more in use on the heap",
              (long long)mallinfo2().uordblks - (long long)in_use);
  gaaw_config_destroy(&small);
  /* a planner's question: a 1.3B GPT on 1024 devices, from this one process */
  gaaw_gpt_config_t big;
  gaaw_gpt_config_default(&big);
  big.vocab = 50257;
  big.max_seq = 2048;
  big.layers = 24;
  big.heads = 16;
  big.dim = 2048;
  big.dtype = GAAW_BF16;
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_parse(cfg, "tp=4 pp=4 dp=64 microbatches=8 recompute=selective"));
  oc.zero_stage = 3;
  eo.batch = 1;
  eo.seq = 2048;
  eo.rank = -1;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  require_ok(ctx, gaaw_memory_estimate(ctx, &big, cfg, &oc, &eo, &out));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  expect_true(out.dp == 64 && out.tp == 4 && out.pp == 4 && out.total[GAAW_SPACE_DEVICE] > 0,
              "the 1024-device layout: dp %d tp %d pp %d, %llu bytes", out.dp, out.tp, out.pp,
              (unsigned long long)out.total[GAAW_SPACE_DEVICE]);
  if (world_rank == 0)
    printf("1.3B GPT, tp 4 pp 4 dp 64, ZeRO 3, selective: rank %d needs %.2f GiB of device memory (estimated in %.3f s)\n",
           out.rank, (double)out.total[GAAW_SPACE_DEVICE] / (1 << 30),
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  gaaw_config_destroy(&cfg);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  char nvme_dir[64];
  ckpt_test_dir(nvme_dir, sizeof nvme_dir, "estimate_nvme_");
  require_ok(NULL, nvme_dir[0] ? GAAW_SUCCESS : GAAW_ERR_IO);
  /* the optimizer's state on the device, host or nvme; at stage 3 with it off the
   * device, the parameter shard on the device, host or nvme too */
  const char *offloads[] = {"none", "host", "nvme"}, *params[] = {"none", "host", "nvme"};
  const char *recomputes[] = {"none", "selective", "full"};
  const int dps[] = {1, 2, 4};
  for (int d = 0; d < 3; d++)
    for (int stage = 0; stage <= 3; stage++)
      for (int o = 0; o < 3; o++)
        for (int p = 0; p < (stage == 3 && o > 0 ? 3 : 1); p++)
          for (int r = 0; r < 3; r++) {
            char options[256];
            snprintf(options, sizeof options, "offload_optimizer=%s offload_params=%s recompute=%s "
                     "zero_bucket_bytes=2048 nvme_path=%s", offloads[o], params[p], recomputes[r], nvme_dir);
            run_case c = {dps[d], stage, 2, options};
            run_on_groups(&c);
          }
  const char *schedules[] = {"pp_schedule=gpipe", "pp_schedule=1f1b",
                             "pp_schedule=interleaved virtual_stages=2", "pp_schedule=zb-h1"};
  for (int s = 0; s < 4; s++)
    for (int stage = 1; stage <= 2; stage++) {
      char options[256];
      snprintf(options, sizeof options, "pp=2 %s recompute=%s", schedules[s], s == 1 ? "full" : "none");
      run_case c = {2, stage, 4, options};
      run_on_groups(&c);
    }
  /* two virtual stages on one pipeline rank: chunk 1's input gradient stays here as
   * chunk 0's output gradient */
  run_case local_chunks = {4, 1, 4, "pp_schedule=interleaved virtual_stages=2"};
  run_on_groups(&local_chunks);
  /* sequence parallelism at tp 2 x dp 2: the partial gradients reduced over tp */
  for (int stage = 1; stage <= 3; stage += 2) {
    run_case c = {2, stage, 2, stage == 1 ? "tp=2 recompute=none" : "tp=2 recompute=selective", 0, 1};
    run_on_groups(&c);
  }
  /* the LLaMA-class GPT: tp 2 x dp 2, and tp 4 with each kv head replicated on 2 ranks */
  const char *llama[] = {"tp=2 recompute=none", "tp=2 recompute=selective", "tp=4 recompute=full",
                         "tp=4 recompute=none"};
  for (int k = 0; k < 4; k++) {
    run_case c = {k < 2 ? 2 : 1, k % 2 ? 3 : 1, 2, llama[k], 1};
    run_on_groups(&c);
  }
  /* its embedding (untied) a bucket of its own at ZeRO 2: the first microbatch's
   * reduction of it is finished as the second microbatch's backward begins */
  run_case untied = {2, 2, 2, "tp=2 recompute=none zero_bucket_bytes=2048", 1};
  run_on_groups(&untied);
  /* grouped-query attention with biases: tp 2 over 1 kv head, whose weight and bias
   * blocks are replicated on both tp ranks */
  run_case biased = {2, 1, 2, "tp=2 recompute=none", 0, 0, 1};
  run_on_groups(&biased);
  /* context parallelism: the ring's keys, values and gradients in flight, the loss
   * summed over cp, the state cut over dp x cp */
  const run_case cps[] = {
    {2, 1, 2, "cp=2 recompute=none"}, {1, 3, 2, "cp=4 recompute=full"}, {1, 2, 2, "cp=2 tp=2 recompute=selective", 1},
    {1, 1, 4, "cp=2 pp=2 pp_schedule=1f1b recompute=none"}, {2, 3, 2, "cp=2 recompute=none", 1},
    {2, 1, 2, "cp=2 cp_kind=a2a recompute=none"}, {1, 3, 2, "cp=4 cp_kind=a2a recompute=full", 1},
    {1, 2, 2, "cp=2 tp=2 cp_kind=a2a recompute=selective", 1},
  };
  for (size_t k = 0; k < sizeof cps / sizeof cps[0]; k++) run_on_groups(&cps[k]);
  /* mixtures of experts: the router's scores and maps, the permuted rows (dropless:
   * exactly k per token), the experts' activations; backward's temporaries */
  const run_case moes[] = {
    {2, 1, 2, "recompute=none", 1, 0, 0, 8}, {4, 3, 2, "recompute=full", 1, 0, 0, 8},
    {2, 2, 4, "pp=2 pp_schedule=1f1b recompute=selective", 1, 0, 0, 4},
    {2, 1, 2, "tp=2 recompute=none", 1, 0, 0, 8}, {2, 3, 2, "tp=2 recompute=full", 1, 1, 0, 8},
    /* expert parallelism: a bound (every row of the ep group may come to one rank) */
    {2, 1, 2, "ep=2 recompute=none", 1, 0, 0, 8}, {4, 3, 2, "ep=4 recompute=full", 1, 0, 0, 8},
  };
  for (size_t k = 0; k < sizeof moes / sizeof moes[0]; k++) run_on_groups(&moes[k]);
  ckpt_test_dir_remove(nvme_dir);
  bad_input();
  if (world_rank == 0) printf("%d layouts: the largest difference between estimate and measured peak %.3f%%\n",
                              configs, 100 * worst);
  return test_finish_mpi("test_memory_estimate");
}
