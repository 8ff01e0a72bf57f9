/* The C twin of tests/fortran/fortran_train.f90's training loop: the same MLP, the
 * same optimizer and the same data through the C API, in the same program, so the
 * Fortran side can compare the two results bit for bit. */
#include <gaaw.h>

/* Trains an MLP of sizes[0..nsizes) with activation on this rank's (nbatch) samples x, y
 * for steps AdamW steps (ZeRO stage 1, learning rate lr) on a context of tp ranks
 * per group over MPI_COMM_WORLD, then predicts yhat (ntest) at xtest. loss gets the
 * last step's loss. Returns the first failing status (the Fortran side reports it). */
int c_twin_train(int tp, int nsizes, const int *sizes, int activation, int nbatch, const float *x, const float *y, int steps, float lr,
                 int ntest, const float *xtest, float *yhat, float *loss)
{
  gaaw_config_t cfg = NULL;
  gaaw_context_t ctx = NULL;
  gaaw_model_t model = NULL;
  gaaw_optimizer_t opt = NULL;
  gaaw_status_t st = gaaw_config_create(&cfg);
  if (st == GAAW_SUCCESS) st = gaaw_config_set(cfg, "backend", "host");
  if (st == GAAW_SUCCESS) st = gaaw_config_set_int(cfg, "tp", tp);
  if (st == GAAW_SUCCESS) st = gaaw_init(MPI_COMM_WORLD, cfg, &ctx);
  gaaw_mlp_config_t mlp = {.nsizes = nsizes, .activation = activation, .seed = 1};
  for (int i = 0; i < nsizes && i <= GAAW_MLP_MAX_LAYERS; i++) mlp.sizes[i] = sizes[i];
  if (st == GAAW_SUCCESS) st = gaaw_model_create_mlp(ctx, &mlp, &model);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  oc.lr = lr;
  if (st == GAAW_SUCCESS) st = gaaw_optimizer_create(model, &oc, &opt);
  gaaw_batch_t b = {.batch = nbatch, .inputs = x, .outputs = y};
  for (int step = 0; step < steps && st == GAAW_SUCCESS; step++) {
    st = gaaw_model_forward_backward(model, &b, loss);
    if (st == GAAW_SUCCESS) st = gaaw_optimizer_step(opt);
  }
  gaaw_batch_t test = {.batch = ntest, .inputs = xtest};
  if (st == GAAW_SUCCESS) st = gaaw_model_predict(model, &test, yhat);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  return st;
}
