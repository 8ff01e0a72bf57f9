/* A loss computed by the caller: gaaw_model_forward_outputs then
 * gaaw_model_backward_from, on 2 ranks.
 *  - A "physics" loss L(y) = sum(a y + y^2 / 2) of a model with a layernorm and a
 *    residual group: the gradients from d_outputs = a + y against central finite
 *    differences of L (tp 1; h = 1e-2, tolerance 2e-3 of the largest |gradient|);
 *  - d_outputs = d MSE / dy gives the gradients of gaaw_model_forward_backward with
 *    the MSE loss (1e-6 of the largest), and the outputs equal gaaw_model_predict's
 *    bit for bit;
 *  - tp 2 gives the tp 1 gradients (1e-5); with an optimizer at dp 2 a step follows;
 *  - backward_from without a forward, backward after forward_outputs (no loss), a
 *    non-finite d_outputs on one rank only and d_outputs that differ over tp fail
 *    every rank, with the same error. */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 4, NIN = 3, NOUT = 2 };
static int rank;
static float x[B * NIN], t[B * NOUT], a[B * NOUT];

#define LINEAR(n) {.kind = GAAW_SPEC_LINEAR, .size = (n)}
static const gaaw_layer_spec_t specs[] = {
  LINEAR(6), {.kind = GAAW_SPEC_ACTIVATION, .activation = GAAW_ACT_TANH},
  {.kind = GAAW_SPEC_RESIDUAL, .size = 3}, {.kind = GAAW_SPEC_LAYERNORM}, LINEAR(8), LINEAR(6),
  LINEAR(NOUT), {.kind = GAAW_SPEC_LOSS, .loss = GAAW_LOSS_MSE},
};
enum { NSPECS = sizeof specs / sizeof specs[0] };

static gaaw_model_t create(gaaw_context_t ctx)
{
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create(ctx, NIN, specs, NSPECS, 3, GAAW_F32, &model));
  model_randomise(model, 8);
  return model;
}

/* L(y) = sum(a y + y^2 / 2) in double, and its gradient a + y. */
static double physics_loss(const float *y, float *dy)
{
  double L = 0;
  for (int i = 0; i < B * NOUT; i++) {
    L += (double)a[i] * y[i] + 0.5 * (double)y[i] * y[i];
    if (dy) dy[i] = a[i] + y[i];
  }
  return L;
}

static double loss_at(gaaw_model_t model, void *data)
{
  (void)data;
  gaaw_batch_t b = {.batch = B, .inputs = x};
  float y[B * NOUT];
  require_ok(NULL, gaaw_model_predict(model, &b, y));
  return physics_loss(y, NULL);
}

static float *physics_grads(gaaw_context_t ctx, gaaw_model_t model, long *n)
{
  gaaw_batch_t b = {.batch = B, .inputs = x};
  float y[B * NOUT], dy[B * NOUT];
  expect_status_ctx(ctx, gaaw_model_forward_outputs(model, &b, y), GAAW_SUCCESS);
  physics_loss(y, dy);
  expect_status_ctx(ctx, gaaw_model_backward_from(model, dy), GAAW_SUCCESS);
  return model_snapshot(model, 1, n);
}

static void finite_differences(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_SELF, "backend=host");
  gaaw_model_t model = create(ctx);
  long n;
  float *grads = physics_grads(ctx, model, &n), *fd = malloc(sizeof(float) * (size_t)n);
  model_finite_differences(model, loss_at, NULL, 1e-2f, fd);
  expect_close_model(model, grads, fd, 2e-3, "physics loss: gradients against finite differences");

  /* d MSE / dy = 2 (y - t) / count drives the same backward as the MSE loss */
  require_ok(ctx, gaaw_model_zero_grad(model));
  gaaw_batch_t b = {.batch = B, .inputs = x, .outputs = t};
  float y[B * NOUT], dy[B * NOUT], p[B * NOUT], loss;
  require_ok(ctx, gaaw_model_forward_outputs(model, &b, y));
  require_ok(ctx, gaaw_model_predict(model, &b, p));
  expect_true(memcmp(y, p, sizeof y) == 0, "forward_outputs' outputs equal predict's");
  for (int i = 0; i < B * NOUT; i++) dy[i] = 2.0f * (y[i] - t[i]) / (B * NOUT);
  require_ok(ctx, gaaw_model_backward_from(model, dy));
  long n2;
  float *from = model_snapshot(model, 1, &n2);
  require_ok(ctx, gaaw_model_zero_grad(model));
  require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
  float *mse = model_snapshot(model, 1, &n2);
  expect_close_model(model, from, mse, 1e-6, "backward_from(d MSE / dy) against the MSE loss's backward");
  free(grads), free(fd), free(from), free(mse);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

static float *grads_under(const char *options, long *n)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_model_t model = create(ctx);
  float *g = physics_grads(ctx, model, n);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return g;
}

static void errors_and_optimizer(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2");
  gaaw_model_t model = create(ctx);
  gaaw_batch_t b = {.batch = B, .inputs = x};
  float y[B * NOUT], dy[B * NOUT];
  expect_status_ctx(ctx, gaaw_model_backward_from(model, a), GAAW_ERR_STATE); /* no forward */
  require_ok(ctx, gaaw_model_forward_outputs(model, &b, y));
  expect_status_ctx(ctx, gaaw_model_backward(model), GAAW_ERR_STATE); /* no loss to go back from */
  require_ok(ctx, gaaw_model_forward_outputs(model, &b, y));
  physics_loss(y, dy);
  float bad[B * NOUT];
  memcpy(bad, dy, sizeof bad);
  bad[3] = NAN;
  expect_status_ctx(ctx, gaaw_model_backward_from(model, rank == 1 ? bad : dy), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "d_outputs[3]") != NULL, "the error names the element: %s",
              gaaw_last_error(ctx));
  require_ok(ctx, gaaw_model_forward_outputs(model, &b, y));
  bad[3] = dy[3] + 1.0f; /* finite, but not the other rank's */
  expect_status_ctx(ctx, gaaw_model_backward_from(model, rank == 1 ? bad : dy), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "d_outputs") != NULL, "%s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_model_forward_outputs(model, &b, rank == 0 ? NULL : y), GAAW_ERR_INVALID_ARG);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);

  /* with an optimizer over dp 2, a step follows the caller's backward */
  ctx = test_context(MPI_COMM_WORLD, "backend=host dp=2");
  model = create(ctx);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  require_ok(ctx, gaaw_model_forward_outputs(model, &b, y));
  physics_loss(y, dy);
  expect_status_ctx(ctx, gaaw_model_backward_from(model, dy), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_optimizer_step(opt), GAAW_SUCCESS);
  double before = physics_loss(y, NULL);
  require_ok(ctx, gaaw_model_forward_outputs(model, &b, y));
  expect_true(physics_loss(y, NULL) < before, "a step along the caller's gradient lowers its loss (%g -> %g)",
              before, physics_loss(y, NULL));
  require_ok(ctx, gaaw_model_backward_from(model, dy));
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  uint64_t state = 41;
  for (int i = 0; i < B * NIN; i++) x[i] = (float)model_normal(&state);
  for (int i = 0; i < B * NOUT; i++) t[i] = (float)model_normal(&state), a[i] = (float)model_normal(&state);
  finite_differences();
  long n1, n2;
  float *g1 = grads_under("backend=host dp=2", &n1), *g2 = grads_under("backend=host tp=2", &n2);
  expect_true(n1 == n2, "gradient counts %ld and %ld", n1, n2);
  if (n1 == n2) expect_close_scaled(g2, g1, n1, 1e-5, "physics loss: gradients, tp 2 against tp 1");
  free(g1), free(g2);
  errors_and_optimizer();
  return test_finish_mpi("test_backward_from_np2");
}
