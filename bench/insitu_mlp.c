/* The gaaw side of bench/insitu_mlp.sh: an in-situ surrogate, the MLP 8 -> 256 ->
 * 256 -> 8 with GELU (tanh) and a mean-squared-error loss, trained with AdamW (lr
 * 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1, ZeRO 0), f32, on the host
 * backend, batch B per dp rank. A training step is gaaw_model_forward_backward then
 * gaaw_optimizer_step; predict is gaaw_model_predict on a batch of the same size.
 *
 *   mpiexec -n P ./bench/insitu_mlp [--batch B] [--steps K] [--warmup W]
 *                                   [--predicts R] [--layers-profile 1]
 *                                   [--GAAW_OPTION=VALUE ...]   (e.g. --threads 2)
 *
 * Runs W untimed steps, K timed steps, then W untimed and R timed predicts, then the
 * step's matrix products alone (gemm_s: the 8 GEMMs of a training step through
 * gaaw_gemm on the model's shapes; predict_gemm_s: the 3 of predict), W untimed
 * and R timed. Each step (predict, GEMM set) is timed on its own on every rank; its
 * time is the slowest rank's, and the result is the median over the K steps (R
 * predicts, R GEMM sets). Rank 0 prints:
 *   insitu_mlp_gaaw np=P dp=P batch=B steps=K predicts=R threads=T step_s=..
 *   samples_s=.. predict_s=.. gemm_s=.. predict_gemm_s=.. cpu_s_per_step=..
 *   loss_first=.. loss_last=.. predict_hash=..
 * step_s - gemm_s is the time a step spends outside its matrix products.
 * predict_hash is a hash of the last predict's output bytes on rank 0: the same hash
 * from two builds means bit-identical training and inference. samples_s counts every rank's batch (P x B per step). cpu_s_per_step is the user +
 * system time of every thread of every rank over the timed steps / K. With
 * --layers-profile 1 it also prints, per layer, the mean forward and backward
 * milliseconds per timed step (gaaw_model_layer_times, rank 0).
 * The data are bench/insitu_mlp_torch.py's: inputs x in [-1, 1) from a hash of
 * (dp rank, batch slot, element), targets y_j = sin(pi x_j) x_{(j+3) % 8}; four
 * batches are made before timing and used in turn. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "gaaw.h"
#include "bench/bench_util.h"

enum { IN = 8, HIDDEN = 256, OUT = 8, SLOTS = 4 };

static gaaw_context_t ctx;

#define CHECK(call) BENCH_CHECK("insitu_mlp bench", ctx, call)

/* Element e of batch slot s on dp rank r, in [-1, 1); bench/insitu_mlp_torch.py
 * computes the same. */
static float input_value(int r, int s, int64_t e)
{
  uint32_t h = (uint32_t)r * 1000003u + (uint32_t)s * 7919u + (uint32_t)e;
  h *= 2654435761u;
  h ^= h >> 15;
  return (float)(h & 65535u) / 32768.0f - 1.0f;
}

/* x: (batch, IN), y: (batch, OUT) */
static void make_batch(int r, int s, int batch, float *x, float *y)
{
  for (int64_t e = 0; e < (int64_t)batch * IN; e++) x[e] = input_value(r, s, e);
  for (int b = 0; b < batch; b++)
    for (int j = 0; j < OUT; j++)
      y[b * OUT + j] = sinf(3.14159265f * x[b * IN + j]) * x[b * IN + (j + 3) % IN];
}

/* The matrix products of one training step (forward 3, backward 5: each linear's
 * weight gradient, and the input gradients of the two upper linears) through
 * gaaw_gemm on tensors of the model's shapes, N = batch; their time is the floor
 * under a step whose other work took no time. forward_only: predict's 3. */
typedef struct {
  gaaw_tensor_t x, h1, h2, y, w1, w2, w3; /* (N, IN) (N, HIDDEN) (N, HIDDEN) (N, OUT) (HIDDEN, IN) ... */
} gemm_operands;

static void gemm_operands_create(int batch, gemm_operands *g)
{
  gaaw_tensor_t *all[] = {&g->x, &g->h1, &g->h2, &g->y, &g->w1, &g->w2, &g->w3};
  int64_t shapes[][2] = {{batch, IN}, {batch, HIDDEN}, {batch, HIDDEN}, {batch, OUT},
                         {HIDDEN, IN}, {HIDDEN, HIDDEN}, {OUT, HIDDEN}};
  for (int i = 0; i < 7; i++) {
    int64_t n = shapes[i][0] * shapes[i][1];
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int64_t e = 0; e < n; e++) v[e] = input_value(i, 0, e) * 0.1f;
    CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 2, shapes[i], GAAW_MEM_WORKSPACE, all[i]));
    CHECK(gaaw_buffer_write(ctx, all[i]->buf, 0, v, (size_t)n * sizeof *v));
    free(v);
  }
}

static void gemm_operands_destroy(gemm_operands *g)
{
  gaaw_tensor_t *all[] = {&g->x, &g->h1, &g->h2, &g->y, &g->w1, &g->w2, &g->w3};
  for (int i = 0; i < 7; i++) CHECK(gaaw_buffer_free(ctx, &all[i]->buf));
}

static void step_gemms(gemm_operands *g, int forward_only)
{
  CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_T, 1.0f, &g->x, &g->w1, 0.0f, &g->h1));  /* h1 = x W1^T */
  CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_T, 1.0f, &g->h1, &g->w2, 0.0f, &g->h2)); /* h2 = h1 W2^T */
  CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_T, 1.0f, &g->h2, &g->w3, 0.0f, &g->y));  /* y = h2 W3^T */
  if (forward_only) return;
  /* the same shapes backward (dy in y's place, dh in h's): dW += dy^T x, dx = dy W */
  CHECK(gaaw_gemm(ctx, GAAW_OP_T, GAAW_OP_N, 1.0f, &g->y, &g->h2, 1.0f, &g->w3));
  CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &g->y, &g->w3, 0.0f, &g->h2));
  CHECK(gaaw_gemm(ctx, GAAW_OP_T, GAAW_OP_N, 1.0f, &g->h2, &g->h1, 1.0f, &g->w2));
  CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &g->h2, &g->w2, 0.0f, &g->h1));
  CHECK(gaaw_gemm(ctx, GAAW_OP_T, GAAW_OP_N, 1.0f, &g->h1, &g->x, 1.0f, &g->w1));
}

/* FNV-1a over the bytes of v[0..n): equal hashes across builds say the results are
 * bit-identical. */
static uint64_t fnv1a(const float *v, size_t n)
{
  const unsigned char *p = (const unsigned char *)v;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n * sizeof *v; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* The OpenMP threads gaaw's host kernels run on (gaaw_init has set them). */
static int omp_threads(void)
{
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/* The median over n events of the slowest rank's time of each. */
static double slowest_median(double *t, int n)
{
  MPI_Allreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return bench_median(t, n);
}

static void print_layer_profile(gaaw_model_t model, int steps)
{
  int count;
  CHECK(gaaw_model_layer_count(model, &count));
  for (int i = 0; i < count; i++) {
    const char *kind;
    double f, b;
    CHECK(gaaw_model_layer_times(model, i, &kind, &f, &b));
    printf("insitu_mlp_gaaw_layer index=%d kind=\"%s\" forward_ms=%.4f backward_ms=%.4f\n", i, kind ? kind : "",
           1e3 * f / steps, 1e3 * b / steps);
  }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int batch = 64, steps = 100, warmup = 10, predicts = 100, profile = 0;
  static const char *const keys[] = {"batch", "steps", "warmup", "predicts", "layers-profile"};
  int *const slots[] = {&batch, &steps, &warmup, &predicts, &profile};
  if (!bench_take_int_options("insitu_mlp bench", &argc, argv, keys, slots, 5) || batch < 1 || steps < 1 ||
      predicts < 1) {
    if (rank == 0)
      fprintf(stderr, "usage: insitu_mlp [--batch B>0] [--steps K>0] [--warmup W] [--predicts R>0] "
                      "[--layers-profile 0|1] [--GAAW_OPTION=VALUE ...]\n");
    MPI_Finalize();
    return 2;
  }
  gaaw_config_t cfg;
  CHECK(gaaw_config_create(&cfg));
  CHECK(gaaw_config_set(cfg, "backend", "host"));
  if (bench_gaaw_start("insitu_mlp bench", cfg, &argc, argv, &ctx)) {
    MPI_Finalize();
    return 2;
  }
  int dp, pp, tp, dp_rank, pp_rank, tp_rank;
  CHECK(gaaw_topology_sizes(ctx, &dp, &pp, &tp));
  CHECK(gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank));

  gaaw_mlp_config_t mc = {.nsizes = 4, .sizes = {IN, HIDDEN, HIDDEN, OUT}, .activation = GAAW_ACT_GELU, .seed = 1337};
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc); /* AdamW 3e-4, (0.9, 0.95), eps 1e-8, wd 0.1, constant lr, ZeRO 0 */
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  CHECK(gaaw_model_create_mlp(ctx, &mc, &model));
  CHECK(gaaw_optimizer_create(model, &oc, &opt));

  float *x = malloc((size_t)SLOTS * batch * IN * sizeof *x), *y = malloc((size_t)SLOTS * batch * OUT * sizeof *y);
  float *pred = malloc((size_t)batch * OUT * sizeof *pred);
  int events = steps > predicts ? steps : predicts;
  double *times = malloc((size_t)events * sizeof *times);
  if (!x || !y || !pred || !times) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int s = 0; s < SLOTS; s++) make_batch(dp_rank, s, batch, x + (size_t)s * batch * IN, y + (size_t)s * batch * OUT);
  gaaw_batch_t slot[SLOTS];
  for (int s = 0; s < SLOTS; s++)
    slot[s] = (gaaw_batch_t){.batch = batch, .seq = 1, .inputs = x + (size_t)s * batch * IN,
                             .outputs = y + (size_t)s * batch * OUT};

  float loss = 0, loss_first = 0;
  double cpu0 = 0;
  for (int step = 0; step < warmup + steps; step++) {
    if (step == warmup) {
      CHECK(gaaw_model_reset_times(model));
      MPI_Barrier(MPI_COMM_WORLD);
      cpu0 = bench_cpu_seconds();
    }
    double t0 = MPI_Wtime();
    CHECK(gaaw_model_forward_backward(model, &slot[step % SLOTS], &loss));
    CHECK(gaaw_optimizer_step(opt));
    if (step >= warmup) times[step - warmup] = MPI_Wtime() - t0;
    if (step == 0) loss_first = loss;
  }
  double cpu = bench_cpu_seconds() - cpu0, cpu_total;
  MPI_Reduce(&cpu, &cpu_total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  double step_s = slowest_median(times, steps);
  if (profile && rank == 0) print_layer_profile(model, steps);

  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < warmup + predicts; i++) {
    double t0 = MPI_Wtime();
    CHECK(gaaw_model_predict(model, &slot[i % SLOTS], pred));
    if (i >= warmup) times[i - warmup] = MPI_Wtime() - t0;
  }
  double predict_s = slowest_median(times, predicts);

  gemm_operands g;
  gemm_operands_create(batch, &g);
  double gemm_s[2];
  for (int forward_only = 0; forward_only < 2; forward_only++) {
    for (int i = 0; i < warmup + predicts; i++) {
      double t0 = MPI_Wtime();
      step_gemms(&g, forward_only);
      if (i >= warmup) times[i - warmup] = MPI_Wtime() - t0;
    }
    gemm_s[forward_only] = slowest_median(times, predicts);
  }
  gemm_operands_destroy(&g);
  if (rank == 0) {
    printf("insitu_mlp_gaaw np=%d dp=%d batch=%d steps=%d predicts=%d threads=%d step_s=%.7f samples_s=%.1f "
           "predict_s=%.7f gemm_s=%.7f predict_gemm_s=%.7f cpu_s_per_step=%.6f loss_first=%.9g loss_last=%.9g "
           "predict_hash=%016llx\n",
           world, dp, batch, steps, predicts, omp_threads(), step_s, (double)batch * dp / step_s, predict_s, gemm_s[0], gemm_s[1],
           cpu_total / steps,
           loss_first, loss, (unsigned long long)fnv1a(pred, (size_t)batch * OUT));
    fflush(stdout);
  }
  free(x);
  free(y);
  free(pred);
  free(times);
  CHECK(gaaw_optimizer_destroy(&opt));
  CHECK(gaaw_model_destroy(&model));
  CHECK(gaaw_finalize(&ctx));
  CHECK(gaaw_config_destroy(&cfg));
  MPI_Finalize();
  return 0;
}
