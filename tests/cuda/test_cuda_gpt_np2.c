/* The GPT on the CUDA backend, one GPU per rank (skipped otherwise, exit 77):
 *   - ZeRO stages 1, 2, 3, three training steps each, with the gradient and
 *     parameter collectives on NCCL and on the MPI backend (nccl=no): the losses
 *     and the last step's gradient norm agree within 1e-4 relative;
 *   - the same NCCL configuration run twice gives bit-identical losses and norms,
 *     and so does a run with the caching allocator off (allocator_cache=0): the
 *     stream-aware allocator changes where memory comes from, never the results.
 * Also runs on one rank (dp 1). With --bench it instead times GPT-2 124M training
 * steps (vocab 50304, seq 1024, 12 layers, 12 heads, dim 768, bf16, ZeRO 1) and
 * prints one line: tokens/s, MFU against --peak-tflops (default 989, an H200's
 * dense bf16), and the cuBLASLt GEMM cache's hit rate over the timed steps.
 *   mpiexec -n P test_cuda_gpt_np2 [--bench [--batch B] [--steps K] [--peak-tflops F]] */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/harness/test_util.h"

enum { STEPS = 3, BATCH = 4 };

typedef struct {
  float loss[STEPS];
  float grad_norm;
} run_result;

static void make_batch(int dp_rank, int step, int batch, int seq, int vocab, int32_t *tokens, int32_t *targets)
{
  for (int b = 0; b < batch; b++)
    for (int t = 0; t <= seq; t++) {
      uint32_t h = (uint32_t)(dp_rank * 7919 + step * 104729 + b * 1299709) + (uint32_t)t * 2654435761u;
      h ^= h >> 13;
      h *= 2246822519u;
      int32_t v = (int32_t)((h ^ (h >> 16)) % (uint32_t)vocab);
      if (t < seq) tokens[b * seq + t] = v;
      if (t > 0) targets[b * seq + t - 1] = v;
    }
}

/* STEPS training steps of the default GPT at ZeRO `zero` in a context with options. */
static run_result train(const char *options, int zero)
{
  run_result out;
  memset(&out, 0, sizeof out);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  int dp, pp, tp, dp_rank, pp_rank, tp_rank;
  require_ok(ctx, gaaw_topology_sizes(ctx, &dp, &pp, &tp));
  require_ok(ctx, gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank));
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = zero;
  gaaw_model_t model = NULL;
  gaaw_optimizer_t opt = NULL;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int seq = g.max_seq;
  int32_t *tokens = malloc(sizeof(int32_t) * BATCH * seq), *targets = malloc(sizeof(int32_t) * BATCH * seq);
  gaaw_batch_t batch = {.batch = BATCH, .seq = seq, .tokens = tokens, .targets = targets};
  for (int s = 0; s < STEPS; s++) {
    make_batch(dp_rank, s, BATCH, seq, g.vocab, tokens, targets);
    require_ok(ctx, gaaw_model_forward_backward(model, &batch, &out.loss[s]));
    require_ok(ctx, gaaw_optimizer_step(opt));
  }
  gaaw_step_stats_t st;
  require_ok(ctx, gaaw_optimizer_stats(opt, &st));
  out.grad_norm = st.grad_norm;
  free(tokens);
  free(targets);
  require_ok(ctx, gaaw_optimizer_destroy(&opt));
  require_ok(ctx, gaaw_model_destroy(&model));
  require_ok(ctx, gaaw_finalize(&ctx));
  return out;
}

static void expect_same_bits(const run_result *a, const run_result *b, const char *what, int zero)
{
  expect_true(memcmp(a, b, sizeof *a) == 0, "ZeRO %d, %s: losses %.9g %.9g %.9g norm %.9g vs %.9g %.9g %.9g norm %.9g",
              zero, what, a->loss[0], a->loss[1], a->loss[2], a->grad_norm, b->loss[0], b->loss[1], b->loss[2],
              b->grad_norm);
}

static void expect_near(const run_result *a, const run_result *b, const char *what, int zero)
{
  float x[STEPS + 1], y[STEPS + 1];
  memcpy(x, a->loss, sizeof a->loss);
  memcpy(y, b->loss, sizeof b->loss);
  x[STEPS] = a->grad_norm;
  y[STEPS] = b->grad_norm;
  char label[96];
  snprintf(label, sizeof label, "ZeRO %d: %s (losses of 3 steps, then the gradient norm)", zero, what);
  expect_close(x, y, STEPS + 1, 1e-4, label);
}

static int bench(int argc, char **argv, int rank)
{
  int batch = 8, steps = 10;
  double peak = 989.0;
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--batch")) batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--peak-tflops")) peak = atof(argv[++i]);
  }
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=cuda");
  int dp, pp, tp, dp_rank, pp_rank, tp_rank, size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  require_ok(ctx, gaaw_topology_sizes(ctx, &dp, &pp, &tp));
  require_ok(ctx, gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank));
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 50304, g.max_seq = 1024, g.layers = 12, g.heads = 12, g.dim = 768, g.dtype = GAAW_BF16;
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  gaaw_model_t model = NULL;
  gaaw_optimizer_t opt = NULL;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int seq = g.max_seq;
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)batch * seq), *targets = malloc(sizeof(int32_t) * (size_t)batch * seq);
  gaaw_batch_t b = {.batch = batch, .seq = seq, .tokens = tokens, .targets = targets};
  float loss = 0;
  uint64_t h0 = 0, m0 = 0, h1 = 0, m1 = 0;
  double t0 = 0;
  for (int s = 0; s < 2 + steps; s++) {
    if (s == 2) {
      require_ok(ctx, gaaw_synchronize(ctx));
      MPI_Barrier(MPI_COMM_WORLD);
      gaaw_cuda_gemm_cache_stats(ctx, &h0, &m0);
      t0 = MPI_Wtime();
    }
    make_batch(dp_rank, s, batch, seq, g.vocab, tokens, targets);
    require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
    require_ok(ctx, gaaw_optimizer_step(opt));
  }
  require_ok(ctx, gaaw_synchronize(ctx));
  double dt = MPI_Wtime() - t0, slowest = dt;
  MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  gaaw_cuda_gemm_cache_stats(ctx, &h1, &m1);
  double d = g.dim, weights = g.layers * 12.0 * d * d + (double)g.vocab * d;
  double flops_per_token = 6.0 * weights + 12.0 * g.layers * (double)seq * d;
  double tok_s = (double)batch * seq * dp * steps / slowest;
  double hits = (double)(h1 - h0), lookups = (double)(h1 - h0 + m1 - m0);
  if (rank == 0)
    printf("gpt2_124m np=%d dp=%d batch=%d seq=%d steps=%d tok_s=%.0f mfu=%.3f peak_tflops=%.0f loss_last=%.4f "
           "gemm_cache_hits=%.0f gemm_cache_lookups=%.0f gemm_cache_hit_rate=%.4f\n",
           size, dp, batch, seq, steps, tok_s, tok_s * flops_per_token / (size * peak * 1e12), peak, loss, hits,
           lookups, lookups > 0 ? hits / lookups : 0.0);
  free(tokens);
  free(targets);
  require_ok(ctx, gaaw_optimizer_destroy(&opt));
  require_ok(ctx, gaaw_model_destroy(&model));
  require_ok(ctx, gaaw_finalize(&ctx));
  return 0;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!cuda_test_gpus_everywhere(1)) {
    if (rank == 0) fprintf(stderr, "test_cuda_gpt_np2: fewer GPUs than ranks on a node; skipped\n");
    MPI_Finalize();
    return TEST_SKIP;
  }
  if (argc > 1 && !strcmp(argv[1], "--bench")) {
    int rc = bench(argc, argv, rank);
    MPI_Finalize();
    return rc;
  }
  for (int zero = 1; zero <= 3; zero++) {
    run_result nccl = train("backend=cuda nccl=yes comm_timeout=120", zero);
    run_result again = train("backend=cuda nccl=yes comm_timeout=120", zero);
    run_result uncached = train("backend=cuda nccl=yes allocator_cache=0 comm_timeout=120", zero);
    run_result mpi = train("backend=cuda nccl=no comm_timeout=120", zero);
    expect_same_bits(&nccl, &again, "NCCL twice", zero);
    expect_same_bits(&nccl, &uncached, "NCCL with the allocator cache on and off", zero);
    expect_near(&nccl, &mpi, "NCCL against the MPI backend", zero);
    if (rank == 0)
      fprintf(stderr, "test_cuda_gpt_np2: ZeRO %d on %d ranks: loss %.6f -> %.6f (NCCL), %.6f -> %.6f (MPI)\n", zero,
              size, nccl.loss[0], nccl.loss[STEPS - 1], mpi.loss[0], mpi.loss[STEPS - 1]);
  }
  MPI_Finalize();
  return test_finish("test_cuda_gpt_np2");
}
