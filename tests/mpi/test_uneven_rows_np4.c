/* Rows that differ across data-parallel replicas (gaaw_batch_t, doc/uneven.md): the
 * same global batch of each step (POOL sequences per microbatch) split unevenly
 * over the dp replicas (3, 5, 2, 6 at dp 4; 5, 11 at dp 2) or evenly (4 each; 8
 * each) gives, after STEPS AdamW steps with gradient clipping, the same parameters
 * within 1e-6 of their largest magnitude, and the same global loss (the
 * row-weighted mean of the replicas' losses), at ZeRO 0, 1, 2, 3 on dp 4, and on
 * tp 2 x dp 2 and pp 2 x dp 2 (2 microbatches); the uneven run twice is
 * bit-identical; even rows weigh exactly 1 (the gradient seed is unchanged, so
 * the results are those of the path without weights). Refused on every rank at
 * once with GAAW_ERR_INVALID_ARG: rows that differ inside a tp group or a
 * pipeline (pp) group, a seq that differs between replicas. */
#include <math.h>
#include <mpi.h>

#include "parallel/model_impl.h"
#include "tests/harness/model_util.h"

enum { T = 8, VOCAB = 40, POOL = 16, STEPS = 5 };
static int world_rank;

typedef struct {
  const char *options; /* "tp=2", "pp=2", "" */
  int zero_stage, microbatches;
} layout;

/* The first row of dp rank d's share of a pool. */
static int offset_of(const int *rows, int d)
{
  int o = 0;
  for (int i = 0; i < d; i++) o += rows[i];
  return o;
}

/* STEPS steps with dp rank d taking rows[d] of each microbatch's pool; the global
 * losses go to losses, the parameters are returned. */
static float *train(const layout *l, const int *rows, float *losses, long *count)
{
  char options[128];
  snprintf(options, sizeof options, "backend=host comm_timeout=60 zero_bucket_bytes=0 %s", l->options);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  int dp_rank, dp_size;
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, &dp_size));
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  model_randomise(model, 7);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = l->zero_stage;
  oc.accumulation = l->microbatches; /* a step's microbatches */
  oc.lr = 3e-3f;
  oc.clip_norm = 0.5f; /* the norms here are about 1: clipping acts */
  oc.eps = 1e-5f;      /* see tests/mpi/test_zero.c: the key bias's gradient is rounding noise */
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int mine = rows[dp_rank], M = l->microbatches;
  int32_t pool_tokens[POOL * T], pool_targets[POOL * T];
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(M * mine * T)), *targets = malloc(sizeof(int32_t) * (size_t)(M * mine * T));
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < M; i++) {
      model_random_batch(POOL, T, VOCAB, 500 + 31 * (uint64_t)s + (uint64_t)i, pool_tokens, pool_targets);
      for (int k = 0; k < POOL * T; k++)
        if (pool_targets[k] < 0) pool_targets[k] = 0; /* every row counts all its tokens */
      size_t from = (size_t)offset_of(rows, dp_rank) * T, n = (size_t)mine * T;
      memcpy(tokens + (size_t)i * n, pool_tokens + from, n * sizeof(int32_t));
      memcpy(targets + (size_t)i * n, pool_targets + from, n * sizeof(int32_t));
    }
    gaaw_batch_t b = {.batch = mine, .seq = T, .microbatches = M, .tokens = tokens, .targets = targets};
    float loss;
    require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
    expect_true(model->rows_weight == (float)((double)dp_size * mine / (double)(offset_of(rows, dp_size))),
                "%s: rows_weight %.9g with %d of %d rows over dp %d", options, model->rows_weight, mine,
                offset_of(rows, dp_size), dp_size);
    require_ok(ctx, gaaw_optimizer_step(opt));
    /* every rank of a replica has its loss: the global mean weighs each by its rows */
    double part[2] = {(double)mine * loss, (double)mine}, sum[2];
    MPI_Allreduce(part, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    losses[s] = (float)(sum[0] / sum[1]);
  }
  float *params = model_snapshot(model, 0, count);
  free(tokens);
  free(targets);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return params;
}

static double max_rel_diff(const float *a, const float *b, long n)
{
  double diff = 0, scale = 0;
  for (long i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
    scale = fmax(scale, fabs((double)b[i]));
  }
  return diff / scale;
}

static void check_layout(const layout *l, const int *even, const int *uneven)
{
  float loss_even[STEPS], loss_uneven[STEPS], loss_again[STEPS];
  long n_even, n_uneven, n_again;
  float *p_even = train(l, even, loss_even, &n_even);
  float *p_uneven = train(l, uneven, loss_uneven, &n_uneven);
  float *p_again = train(l, uneven, loss_again, &n_again);
  expect_true(n_even == n_uneven && n_again == n_uneven, "sizes");
  double rel = max_rel_diff(p_uneven, p_even, n_even);
  expect_true(rel <= 1e-6, "'%s' zero %d: uneven rows: the parameters differ from the even split's by %.3g of their "
              "largest", l->options, l->zero_stage, rel);
  for (int s = 0; s < STEPS; s++)
    expect_true(fabs(loss_uneven[s] - loss_even[s]) <= 1e-6 * fabs(loss_even[s]), "'%s' zero %d step %d: loss %.9g "
                "uneven, %.9g even", l->options, l->zero_stage, s, loss_uneven[s], loss_even[s]);
  expect_true(memcmp(p_uneven, p_again, sizeof(float) * (size_t)n_uneven) == 0 &&
                memcmp(loss_uneven, loss_again, sizeof loss_again) == 0,
              "'%s' zero %d: two uneven runs differ", l->options, l->zero_stage);
  if (world_rank == 0)
    printf("'%s' zero %d microbatches %d: parameters within %.3g, final loss %.7f (even %.7f)\n", l->options,
           l->zero_stage, l->microbatches, rel, loss_uneven[STEPS - 1], loss_even[STEPS - 1]);
  free(p_even), free(p_uneven), free(p_again);
}

/* One forward_backward with rank `who`'s batch changed by change; every rank
 * must get GAAW_ERR_INVALID_ARG naming `want`, at once. */
static void refused(const char *options, int who, int batch, int seq, const char *want)
{
  char list[128];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 %s", options);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, list);
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.accumulation = 2;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int32_t tokens[4 * T], targets[4 * T];
  model_random_batch(4, T, VOCAB, 3, tokens, targets);
  gaaw_batch_t b = {.batch = 2, .seq = T, .microbatches = 2, .tokens = tokens, .targets = targets};
  if (world_rank == who) b.batch = batch, b.seq = seq;
  float loss;
  double t0 = MPI_Wtime();
  gaaw_status_t st = gaaw_model_forward_backward(model, &b, &loss);
  expect_true(st == GAAW_ERR_INVALID_ARG && strstr(gaaw_last_error(ctx), want) != NULL && MPI_Wtime() - t0 < 2,
              "'%s', rank %d: %s (%s), expected GAAW_ERR_INVALID_ARG naming '%s' at once", options, world_rank,
              gaaw_status_name(st), gaaw_last_error(ctx), want);
  if (world_rank == 0) printf("refused ('%s'): %s\n", options, gaaw_last_error(ctx));
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const int even4[4] = {4, 4, 4, 4}, uneven4[4] = {3, 5, 2, 6}, even2[2] = {8, 8}, uneven2[2] = {5, 11};
  for (int stage = 0; stage <= 3; stage++) check_layout(&(layout){"", stage, 1}, even4, uneven4);
  check_layout(&(layout){"tp=2", 1, 1}, even2, uneven2);
  check_layout(&(layout){"tp=2", 3, 1}, even2, uneven2);
  check_layout(&(layout){"pp=2", 1, 2}, even2, uneven2);
  check_layout(&(layout){"pp=2", 2, 2}, even2, uneven2);
  /* world rank 1 is tp rank 1 of dp rank 0 at tp 2; pp rank 1 of dp rank 1 at pp 2
   * (rank = (pp_rank * dp + dp_rank) * tp + tp_rank) */
  refused("tp=2", 1, 1, T, "batch: 2 on rank 0, 1 on rank 1");
  refused("pp=2", 3, 1, T, "batch must be the same on every rank of one dp rank");
  refused("", 2, 2, T - 1, "seq: 8 on ranks 0-1,3, 7 on rank 2");
  return test_finish_mpi("test_uneven_rows_np4");
}
