/* MLP losses with per-element weights, on 2 ranks:
 *  - tp 2 gives the tp 1 (dp 2) loss and gradients, for L1 and Huber with weights
 *    (tolerance 1e-6 of the largest |value|: the tp split changes summation order
 *    only);
 *  - bad weights on one rank only (a negative weight; all weights 0) fail both
 *    ranks with GAAW_ERR_INVALID_ARG, and the next good call still works;
 *  - the ranks of a tp group given different weights (or weights on one rank, none
 *    on the other) fail both;
 *  - a loss kind or Huber delta that differs between ranks fails the model's
 *    creation on both. */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 6, NIN = 3, NOUT = 4 };
static int rank;
static float x[B * NIN], t[B * NOUT], w[B * NOUT];

static gaaw_mlp_config_t config(gaaw_loss_t loss)
{
  gaaw_mlp_config_t c = {.nsizes = 4, .sizes = {NIN, 8, 6, NOUT}, .activation = GAAW_ACT_TANH, .seed = 3};
  c.loss = loss;
  c.huber_delta = 0.3f;
  return c;
}

/* Loss and every gradient of one forward and backward under options. */
static float loss_and_grads(const char *options, gaaw_loss_t loss, float **grads, long *n)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_mlp_config_t c = config(loss);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &model));
  model_randomise(model, 11);
  gaaw_batch_t b = {.batch = B, .inputs = x, .outputs = t, .weights = w};
  float value = NAN;
  expect_status_ctx(ctx, gaaw_model_forward_backward(model, &b, &value), GAAW_SUCCESS);
  *grads = model_snapshot(model, 1, n);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return value;
}

static void bad_weights(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2");
  gaaw_mlp_config_t c = config(GAAW_LOSS_HUBER);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &model));
  float bad[B * NOUT], zeros[B * NOUT] = {0}, other[B * NOUT], loss;
  memcpy(bad, w, sizeof bad);
  memcpy(other, w, sizeof other);
  bad[5] = -1.0f;
  other[2] += 0.5f;
  gaaw_batch_t b = {.batch = B, .inputs = x, .outputs = t, .weights = rank == 1 ? bad : w};
  expect_status_ctx(ctx, gaaw_model_forward(model, &b, &loss), GAAW_ERR_INVALID_ARG);
  b.weights = rank == 0 ? zeros : w;
  expect_status_ctx(ctx, gaaw_model_forward(model, &b, &loss), GAAW_ERR_INVALID_ARG);
  b.weights = rank == 1 ? other : w; /* both good, but not the same over tp */
  expect_status_ctx(ctx, gaaw_model_forward(model, &b, &loss), GAAW_ERR_INVALID_ARG);
  b.weights = rank == 1 ? NULL : w;
  expect_status_ctx(ctx, gaaw_model_forward(model, &b, &loss), GAAW_ERR_INVALID_ARG);
  b.weights = w;
  expect_status_ctx(ctx, gaaw_model_forward_backward(model, &b, &loss), GAAW_SUCCESS);
  expect_true(isfinite(loss) && loss > 0, "the good call after the bad ones gives loss %g", (double)loss);
  gaaw_model_destroy(&model);

  /* the loss configuration differs between ranks */
  gaaw_mlp_config_t differ = config(rank == 1 ? GAAW_LOSS_L1 : GAAW_LOSS_HUBER);
  expect_status_ctx(ctx, gaaw_model_create_mlp(ctx, &differ, &model), GAAW_ERR_INVALID_ARG);
  expect_true(model == NULL, "a failed creation leaves no model");
  differ = config(GAAW_LOSS_HUBER);
  differ.huber_delta = rank == 1 ? 0.5f : 0.3f;
  expect_status_ctx(ctx, gaaw_model_create_mlp(ctx, &differ, &model), GAAW_ERR_INVALID_ARG);
  differ.huber_delta = rank == 1 ? -1.0f : 0.3f; /* bad on one rank only */
  expect_status_ctx(ctx, gaaw_model_create_mlp(ctx, &differ, &model), GAAW_ERR_INVALID_ARG);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  uint64_t state = 77;
  for (int i = 0; i < B * NIN; i++) x[i] = (float)model_normal(&state);
  for (int i = 0; i < B * NOUT; i++) {
    t[i] = (float)model_normal(&state);
    w[i] = i % 5 == 0 ? 0.0f : (float)(0.5 + (i % 3) * 0.5);
  }
  static const gaaw_loss_t kinds[] = {GAAW_LOSS_L1, GAAW_LOSS_HUBER};
  for (int k = 0; k < 2; k++) {
    float *g1, *g2;
    long n1, n2;
    float l1 = loss_and_grads("backend=host dp=2", kinds[k], &g1, &n1);
    float l2 = loss_and_grads("backend=host tp=2", kinds[k], &g2, &n2);
    expect_close_scaled(&l2, &l1, 1, 1e-6, kinds[k] == GAAW_LOSS_L1 ? "weighted L1 loss, tp 2 against tp 1"
                                                                    : "weighted Huber loss, tp 2 against tp 1");
    expect_true(n1 == n2, "gradient counts %ld and %ld", n1, n2);
    if (n1 == n2)
      expect_close_scaled(g2, g1, n1, 1e-6, kinds[k] == GAAW_LOSS_L1 ? "weighted L1 gradients, tp 2 against tp 1"
                                                                     : "weighted Huber gradients, tp 2 against tp 1");
    if (rank == 0) fprintf(stderr, "loss %d: tp 1 %.7f, tp 2 %.7f\n", (int)kinds[k], l1, l2);
    free(g1), free(g2);
  }
  bad_weights();
  return test_finish_mpi("test_mlp_loss_np2");
}
