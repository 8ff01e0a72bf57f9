/* Training next to a solver on 4 ranks: ranks 0-1 call gaaw_init on their own
 * communicator and train an MLP surrogate (dp 2, with samples from a sampler) while
 * ranks 2-3 only predict, each with a context of its own (MPI_COMM_SELF). After
 * training, rank 0 reads all parameters as one vector and broadcasts it over
 * MPI_COMM_WORLD; every rank then predicts the same inputs, and the predictions must
 * equal the trainers' bit for bit (same kernels, same weights). Also: the vector has
 * the global count; the trainer contexts see a world of 2; a NULL vector on one
 * trainer fails both trainers. */
#include <math.h>
#include <mpi.h>

#include "tests/harness/test_util.h"

enum { NIN = 2, NOUT = 1, BATCH = 32, STEPS = 40, NPRED = 16 };

static int rank;

static gaaw_mlp_config_t surrogate(void)
{
  gaaw_mlp_config_t c = {.nsizes = 4, .sizes = {NIN, 16, 16, NOUT}, .activation = GAAW_ACT_GELU, .seed = 21};
  return c;
}

/* The solver's field samples: y = sin(x0) cos(x1) on this rank's part of the square. */
static void solver_samples(int part, int n, float *x, float *y)
{
  for (int i = 0; i < n; i++) {
    x[NIN * i] = (float)part + (float)i / (float)n;
    x[NIN * i + 1] = (float)(i % 5) * 0.3f;
    y[i] = sinf(x[NIN * i]) * cosf(x[NIN * i + 1]);
  }
}

static void prediction_inputs(float *x)
{
  for (int i = 0; i < NPRED; i++) x[NIN * i] = 0.125f * (float)i, x[NIN * i + 1] = 0.5f;
}

/* Trains on the trainers' communicator; returns the model. */
static gaaw_model_t train(MPI_Comm comm, gaaw_context_t *out)
{
  gaaw_context_t ctx = test_context(comm, "backend=host");
  int dp, pp, tp, world;
  require_ok(ctx, gaaw_topology_sizes(ctx, &dp, &pp, &tp));
  require_ok(ctx, gaaw_world_size(ctx, &world));
  expect_true(dp == 2 && world == 2, "trainers: dp %d, world %d, want 2 and 2", dp, world);
  gaaw_mlp_config_t c = surrogate();
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.lr = 1e-2f;
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &model));
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  gaaw_sampler_config_t sc;
  gaaw_sampler_config_default(&sc);
  sc.inputs = NIN, sc.outputs = NOUT, sc.capacity = 256;
  gaaw_sampler_t samples;
  require_ok(ctx, gaaw_sampler_create(ctx, &sc, &samples));
  float x[NIN * 64], y[64], bx[NIN * BATCH], by[BATCH], loss = 0, first = 0;
  solver_samples(rank, 64, x, y);
  require_ok(ctx, gaaw_sampler_push(samples, 64, x, y));
  for (int step = 0; step < STEPS; step++) {
    require_ok(ctx, gaaw_sampler_draw(samples, BATCH, bx, by));
    gaaw_batch_t b = {.batch = BATCH, .inputs = bx, .outputs = by};
    require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
    require_ok(ctx, gaaw_optimizer_step(opt));
    if (step == 0) first = loss;
  }
  expect_true(loss < 0.5f * first, "training on the sub-communicator: loss %g after %d steps, from %g", loss,
              STEPS, first);
  expect_status_ctx(ctx, gaaw_model_get_params(model, rank == 1 ? NULL : bx), GAAW_ERR_INVALID_ARG);
  gaaw_sampler_destroy(&samples);
  gaaw_optimizer_destroy(&opt);
  *out = ctx;
  return model;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int trainer = rank < 2;
  MPI_Comm trainers;
  MPI_Comm_split(MPI_COMM_WORLD, trainer, rank, &trainers);

  gaaw_context_t ctx;
  gaaw_model_t model;
  if (trainer) {
    model = train(trainers, &ctx);
  } else {
    ctx = test_context(MPI_COMM_SELF, "backend=host");
    gaaw_mlp_config_t c = surrogate();
    c.seed = 99; /* other initial weights: the broadcast must replace them */
    require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &model));
  }
  int64_t count, local;
  require_ok(ctx, gaaw_model_num_params(model, &count, &local));
  float *weights = malloc(sizeof(float) * (size_t)count);
  if (trainer) require_ok(ctx, gaaw_model_get_params(model, weights));
  MPI_Bcast(weights, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (!trainer) require_ok(ctx, gaaw_model_set_params(model, weights));

  /* every rank predicts; rank 0's answer is the reference */
  float x[NIN * NPRED], yhat[NPRED], want[NPRED], err = 0;
  prediction_inputs(x);
  gaaw_batch_t b = {.batch = NPRED, .inputs = x};
  require_ok(ctx, gaaw_model_predict(model, &b, yhat));
  memcpy(want, yhat, sizeof want);
  MPI_Bcast(want, NPRED, MPI_FLOAT, 0, MPI_COMM_WORLD);
  expect_true(memcmp(yhat, want, sizeof want) == 0, "rank %d (%s) predicts other values than the trainers", rank,
              trainer ? "trainer" : "predictor");
  /* the vector reads back as it was set */
  float *back = malloc(sizeof(float) * (size_t)count);
  require_ok(ctx, gaaw_model_get_params(model, back));
  expect_true(memcmp(back, weights, sizeof(float) * (size_t)count) == 0, "get_params after set_params differs");
  for (int i = 0; i < NPRED; i++) err = fmaxf(err, fabsf(yhat[i] - sinf(x[NIN * i]) * cosf(0.5f)));
  if (rank == 0) fprintf(stderr, "surrogate max error on [0, 2]: %.3f\n", err);
  free(weights), free(back);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  MPI_Comm_free(&trainers);
  return test_finish_mpi("test_subcomm_np4");
}
