/* Normalisation statistics and their use, on 2 ranks (dp 2) and on 4 (tp 2 x dp 2):
 *  - after two updates (each dp rank its own samples, batch sizes differing by rank
 *    and update), the count, means and stds equal the serial two-pass computation
 *    in f64 over every rank's samples (relative 1e-12), the same on every rank;
 *  - predictions are in physical units: the model with statistics predicts
 *    y' std + mean where y' is what the same model without statistics predicts for
 *    (x - mean) / std (1e-6 of the largest), and its loss is the loss of those
 *    normalised inputs and outputs;
 *  - a bad batch on one rank only (NULL outputs, a NaN input), and at tp 2 tp peers
 *    given different samples, fail every rank, and the statistics stay as they were. */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { NIN = 3, NOUT = 2, NF = NIN + NOUT, MAXB = 9 };
static int rank, size;

/* dp rank r's samples of update u: batch 4 + r + 2u, features with their own scale. */
static int samples(int r, int u, float *x, float *y)
{
  int b = 4 + r + 2 * u;
  uint64_t state = 1000 + 17 * (uint64_t)r + (uint64_t)u;
  for (int i = 0; i < b * NIN; i++) x[i] = (float)(3.0 * (i % NIN + 1) + (i % NIN + 1) * model_normal(&state));
  for (int i = 0; i < b * NOUT; i++) y[i] = (float)(-50.0 + 10.0 * model_normal(&state) * (i % NOUT + 1));
  return b;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *options = size == 4 ? "backend=host tp=2" : "backend=host dp=2";
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  int dp_rank, dp_size;
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, &dp_size));
  const gaaw_layer_spec_t specs[] = {{.kind = GAAW_SPEC_LINEAR, .size = 4},
                                     {.kind = GAAW_SPEC_ACTIVATION, .activation = GAAW_ACT_TANH},
                                     {.kind = GAAW_SPEC_LINEAR, .size = NOUT},
                                     {.kind = GAAW_SPEC_LOSS, .loss = GAAW_LOSS_MSE}};
  gaaw_model_t model, plain;
  require_ok(ctx, gaaw_model_create(ctx, NIN, specs, 4, 7, GAAW_F32, &model));
  require_ok(ctx, gaaw_model_create(ctx, NIN, specs, 4, 7, GAAW_F32, &plain));
  float x[MAXB * NIN], y[MAXB * NOUT];
  for (int u = 0; u < 2; u++) {
    int b = samples(dp_rank, u, x, y);
    gaaw_batch_t batch = {.batch = b, .inputs = x, .outputs = y};
    expect_status_ctx(ctx, gaaw_model_normalization_update(model, &batch), GAAW_SUCCESS);
  }
  /* the serial reference over every dp rank's samples */
  double n = 0, mean[NF] = {0}, m2[NF] = {0};
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1)
      for (int f = 0; f < NF; f++) mean[f] /= n; /* the first pass summed */
    for (int r = 0; r < dp_size; r++)
      for (int u = 0; u < 2; u++) {
        int b = samples(r, u, x, y);
        for (int s = 0; s < b; s++)
          for (int f = 0; f < NF; f++) {
            double v = f < NIN ? x[s * NIN + f] : y[s * NOUT + f - NIN];
            if (pass == 0)
              mean[f] += v;
            else
              m2[f] += (v - mean[f]) * (v - mean[f]);
          }
        if (pass == 0) n += b;
      }
  }
  double count, got_mean[NF], got_std[NF];
  require_ok(ctx, gaaw_model_normalization_stats(model, &count, got_mean, got_std));
  expect_true(count == n, "count %g, serial %g", count, n);
  for (int f = 0; f < NF; f++) {
    double sd = sqrt(m2[f] / n);
    expect_true(fabs(got_mean[f] - mean[f]) <= 1e-12 * fabs(mean[f]) && fabs(got_std[f] - sd) <= 1e-12 * sd,
                "feature %d: mean %.17g std %.17g, serial %.17g %.17g", f, got_mean[f], got_std[f], mean[f], sd);
  }
  double first = got_mean[0], all_first;
  MPI_Allreduce(&first, &all_first, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  expect_true(all_first == first, "every rank holds the same statistics");
  if (rank == 0) fprintf(stderr, "%g samples over %d dp ranks: input 0 mean %.6f std %.6f\n", n, dp_size, mean[0],
                         got_std[0]);

  /* physical units: the same weights without statistics, given normalised data */
  int b = samples(0, 0, x, y);
  float xn[MAXB * NIN], yn[MAXB * NOUT], pred[MAXB * NOUT], raw[MAXB * NOUT];
  for (int s = 0; s < b; s++) {
    for (int f = 0; f < NIN; f++) xn[s * NIN + f] = (float)((x[s * NIN + f] - got_mean[f]) / got_std[f]);
    for (int f = 0; f < NOUT; f++)
      yn[s * NOUT + f] = (float)((y[s * NOUT + f] - got_mean[NIN + f]) / got_std[NIN + f]);
  }
  gaaw_batch_t phys = {.batch = b, .inputs = x, .outputs = y}, norm = {.batch = b, .inputs = xn, .outputs = yn};
  require_ok(ctx, gaaw_model_predict(model, &phys, pred));
  require_ok(ctx, gaaw_model_predict(plain, &norm, raw));
  for (int s = 0; s < b; s++)
    for (int f = 0; f < NOUT; f++)
      raw[s * NOUT + f] = (float)(raw[s * NOUT + f] * got_std[NIN + f] + got_mean[NIN + f]);
  expect_close_scaled(pred, raw, b * NOUT, 1e-6, "predictions in physical units");
  float lp, ln;
  require_ok(ctx, gaaw_model_forward(model, &phys, &lp));
  require_ok(ctx, gaaw_model_forward(plain, &norm, &ln));
  expect_close_scaled(&lp, &ln, 1, 1e-6, "the loss is in normalised units");

  /* one rank bad: every rank fails, the statistics are kept */
  gaaw_batch_t bad = phys;
  if (rank == size - 1) bad.outputs = NULL;
  expect_status_ctx(ctx, gaaw_model_normalization_update(model, &bad), GAAW_ERR_INVALID_ARG);
  float keep = x[1];
  x[1] = rank == 0 ? NAN : keep;
  bad = phys;
  if (size == 4 && rank == 1) x[1] = NAN; /* rank 1 is rank 0's tp peer at tp 2 */
  expect_status_ctx(ctx, gaaw_model_normalization_update(model, &bad), GAAW_ERR_INVALID_ARG);
  x[1] = keep;
  if (size == 4) { /* tp peers given different (good) samples */
    x[1] = rank == 1 ? keep + 1.0f : keep;
    expect_status_ctx(ctx, gaaw_model_normalization_update(model, &phys), GAAW_ERR_INVALID_ARG);
    x[1] = keep;
  }
  double count2;
  require_ok(ctx, gaaw_model_normalization_stats(model, &count2, NULL, NULL));
  expect_true(count2 == n, "a failed update left count %g (was %g)", count2, n);
  gaaw_model_destroy(&model);
  gaaw_model_destroy(&plain);
  gaaw_finalize(&ctx);
  return test_finish_mpi(size == 4 ? "test_normalization_np4" : "test_normalization_np2");
}
