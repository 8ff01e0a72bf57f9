/* MLP surrogates against PyTorch 1.13 (tests/reference/mlp_reference.py) from the
 * same weights and batch: loss, predictions and every parameter gradient, for
 * every activation (GELU, SwiGLU, none, ReLU, tanh, SiLU) x loss (MSE, L1, Huber
 * with delta 0.5, so both of its branches are hit), half of them with per-element
 * loss weights (a mask with zeros and weights in [0, 2)). Weights and biases are
 * normal(0, 0.6), so the hidden pre-activations spread over about [-2, 2] and every
 * activation is away from its linear part. Host backend, one rank, a 3 -> 8 -> 6 ->
 * 2 MLP, batch 5, PyTorch started once; skips (77) when the reference says PyTorch
 * is missing.
 *
 * Tolerance, per tensor, of its largest |value|: both sides are f32 and differ in
 * summation order only (sums of at most 16 terms here), so 5e-6 for the loss and
 * predictions and 2e-5 for the gradients, as the GPT test (test_gpt_torch.c); the
 * smallest defect meant to be seen, a weight ignored for one element, moves the
 * loss by about 1e-2 of itself. */
#include <mpi.h>

#include "tests/harness/model_util.h"
#include "tests/harness/torch_cases.h"

enum { B = 5, NIN = 3, NOUT = 2, CASES = GAAW_ACT_COUNT * GAAW_LOSS_COUNT };
#define TOL_OUT 5e-6
#define TOL_GRAD 2e-5
#define DELTA 0.5f

static const char *const act_names[GAAW_ACT_COUNT] = {"gelu", "swiglu", "none", "relu", "tanh", "silu"};
static const char *const loss_names[GAAW_LOSS_COUNT] = {"mse", "l1", "huber"};

static gaaw_mlp_config_t case_config(int k)
{
  gaaw_mlp_config_t c = {.nsizes = 4, .sizes = {NIN, 8, 6, NOUT}, .seed = 7};
  c.activation = (gaaw_activation_t)(k / GAAW_LOSS_COUNT);
  c.loss = (gaaw_loss_t)(k % GAAW_LOSS_COUNT);
  c.huber_delta = DELTA;
  return c;
}

/* Every parameter normal(0, 0.6), drawn from seed in registry order. */
static void spread_params(gaaw_model_t model, uint64_t seed)
{
  int count;
  require_ok(NULL, gaaw_model_param_count(model, &count));
  for (int i = 0; i < count; i++) {
    const char *name;
    int64_t shape[2];
    gaaw_model_param_info(model, i, &name, NULL, shape);
    long n = (long)(shape[0] * shape[1]);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (long j = 0; j < n; j++) v[j] = (float)(0.6 * model_normal(&seed));
    require_ok(NULL, gaaw_model_set_param(model, name, v));
    free(v);
  }
}

typedef struct {
  gaaw_model_t model;
  float loss, pred[B * NOUT], *grads;
  long ngrads;
} mlp_run;

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  static mlp_run runs[CASES];
  torch_cases ref;
  torch_cases_init_script(&ref, "mlp", "mlp_reference.py");
  for (int k = 0; k < CASES; k++) {
    gaaw_mlp_config_t c = case_config(k);
    mlp_run *r = &runs[k];
    uint64_t state = 500 + (uint64_t)k;
    float x[B * NIN], t[B * NOUT], w[B * NOUT];
    for (int i = 0; i < B * NIN; i++) x[i] = (float)model_normal(&state);
    for (int i = 0; i < B * NOUT; i++) {
      t[i] = (float)model_normal(&state);
      w[i] = i % 3 == 0 ? 0.0f : (float)(1.0 + model_normal(&state) * 0.5);
      if (w[i] < 0) w[i] = -w[i];
    }
    int weighted = k % 2;
    require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &r->model));
    spread_params(r->model, 1000 + (uint64_t)k);
    gaaw_batch_t batch = {.batch = B, .inputs = x, .outputs = t, .weights = weighted ? w : NULL};
    require_ok(ctx, gaaw_model_forward_backward(r->model, &batch, &r->loss));
    require_ok(ctx, gaaw_model_predict(r->model, &batch, r->pred));
    r->grads = model_snapshot(r->model, 1, &r->ngrads);
    FILE *f = torch_case_begin(&ref);
    int32_t cfg[3] = {c.nsizes, c.activation, c.loss};
    float delta = DELTA;
    tf_write(f, "config", 1, 1, (int64_t[]){3}, cfg);
    tf_write(f, "sizes", 1, 1, (int64_t[]){c.nsizes}, c.sizes);
    tf_write(f, "delta", 0, 1, (int64_t[]){1}, &delta);
    tf_write(f, "inputs", 0, 2, (int64_t[]){B, NIN}, x);
    tf_write(f, "outputs", 0, 2, (int64_t[]){B, NOUT}, t);
    if (weighted) tf_write(f, "weights", 0, 2, (int64_t[]){B, NOUT}, w);
    torch_case_write_params(f, r->model);
    fclose(f);
  }
  int rc = torch_cases_run(&ref);
  expect_true(rc != 1, "the PyTorch reference failed");
  for (int k = 0; rc == 0 && k < CASES; k++) {
    gaaw_mlp_config_t c = case_config(k);
    char what[96];
    snprintf(what, sizeof what, "%s + %s%s", act_names[c.activation], loss_names[c.loss], k % 2 ? " weighted" : "");
    int nref;
    const tf_tensor *t = torch_case_result(&ref, k, &nref);
    expect_matches_torch(t, nref, runs[k].model, runs[k].loss, runs[k].pred, (long)B * NOUT, runs[k].grads, TOL_OUT,
                         TOL_GRAD, what);
    const tf_tensor *loss = tf_find(t, nref, "loss");
    if (loss) fprintf(stderr, "%s: loss gaaw %.7f torch %.7f\n", what, runs[k].loss, ((const float *)loss->data)[0]);
  }
  for (int k = 0; k < CASES; k++) {
    gaaw_model_destroy(&runs[k].model);
    free(runs[k].grads);
  }
  torch_cases_free(&ref);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  if (rc == 77) {
    fprintf(stderr, "test_mlp_torch: PyTorch (python3-torch) is missing: skipped\n");
    return 77;
  }
  return test_finish("test_mlp_torch");
}
