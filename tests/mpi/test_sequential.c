/* Sequential models (gaaw_model_create), on 2 ranks:
 *  - a model with every spec kind (linears paired and unpaired, a fused and a
 *    standalone activation, SwiGLU fused into a gathering linear, layernorm,
 *    RMSnorm, a residual group, Huber loss): its gradients against central finite
 *    differences of its loss (tp 1, f32 on both sides: h = 1e-2, tolerance 2e-3 of
 *    the largest |gradient|, which a wrong sign or a missing residual path exceed
 *    by far); at tp 2 the loss, every gradient and the predictions equal tp 1's
 *    (1e-5 of the largest |value|, summation order only);
 *  - gaaw_model_create_mlp is its shortcut: the same MLP from specs gives the same
 *    parameters and loss, bit for bit;
 *  - a bad spec on one rank only fails both ranks naming the spec; specs that
 *    differ between ranks fail both naming "specs". */
#include <mpi.h>

#include "tests/harness/model_util.h"

enum { B = 5, NIN = 4, NOUT = 4 };
static int rank;
static float x[B * NIN], t[B * NOUT];

#define LINEAR(n) {.kind = GAAW_SPEC_LINEAR, .size = (n)}
#define ACT(a) {.kind = GAAW_SPEC_ACTIVATION, .activation = (a)}
static const gaaw_layer_spec_t every_kind[] = {
  LINEAR(8), ACT(GAAW_ACT_TANH),            /* unpaired: gathers at tp 2 */
  {.kind = GAAW_SPEC_RESIDUAL, .size = 4},  /* the next 4 specs */
  {.kind = GAAW_SPEC_LAYERNORM}, LINEAR(16), ACT(GAAW_ACT_GELU), LINEAR(8), /* a column/row pair */
  {.kind = GAAW_SPEC_RMSNORM},
  LINEAR(6), ACT(GAAW_ACT_SWIGLU),          /* (12, 8) weight, gathered as [a | g] */
  ACT(GAAW_ACT_SILU),                       /* standalone */
  LINEAR(NOUT),
  {.kind = GAAW_SPEC_LOSS, .loss = GAAW_LOSS_HUBER, .huber_delta = 2.0f},
};
enum { NSPECS = sizeof every_kind / sizeof every_kind[0] };

/* Every parameter normal(0, 0.5), norm weights 1 + normal(0, 0.2): gradients of
 * order 0.1, far above the loss's f32 resolution over 2 h. */
static gaaw_model_t create(gaaw_context_t ctx, const gaaw_layer_spec_t *specs, int n)
{
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create(ctx, NIN, specs, n, 5, GAAW_F32, &model));
  int count;
  uint64_t state = 21;
  require_ok(ctx, gaaw_model_param_count(model, &count));
  for (int i = 0; i < count; i++) {
    const char *name;
    int64_t shape[2];
    gaaw_model_param_info(model, i, &name, NULL, shape);
    int norm_weight = strncmp(name, "norm.", 5) == 0 && strstr(name, ".weight") != NULL;
    float v[256];
    expect_true(shape[0] * shape[1] <= 256, "%s fits the buffer", name);
    for (long j = 0; j < shape[0] * shape[1]; j++)
      v[j] = (float)(norm_weight ? 1.0 + 0.2 * model_normal(&state) : 0.5 * model_normal(&state));
    require_ok(ctx, gaaw_model_set_param(model, name, v));
  }
  return model;
}

static float loss_of(gaaw_model_t model)
{
  gaaw_batch_t b = {.batch = B, .inputs = x, .outputs = t};
  float loss = NAN;
  require_ok(NULL, gaaw_model_forward(model, &b, &loss));
  return loss;
}

static double loss_at(gaaw_model_t model, void *data)
{
  (void)data;
  return loss_of(model);
}

/* Every gradient against central differences of the loss, one rank alone. */
static void finite_differences(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_SELF, "backend=host");
  gaaw_model_t model = create(ctx, every_kind, NSPECS);
  long n;
  gaaw_batch_t b = {.batch = B, .inputs = x, .outputs = t};
  float loss;
  require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
  float *grads = model_snapshot(model, 1, &n), *fd = malloc(sizeof(float) * (size_t)n);
  model_finite_differences(model, loss_at, NULL, 1e-2f, fd);
  expect_close_model(model, grads, fd, 2e-3, "every spec kind: gradients against finite differences");
  free(grads), free(fd);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

/* Loss, gradients and predictions under options. */
static float run(const char *options, float **grads, long *n, float *pred)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_model_t model = create(ctx, every_kind, NSPECS);
  gaaw_batch_t b = {.batch = B, .inputs = x, .outputs = t};
  float loss = NAN;
  expect_status_ctx(ctx, gaaw_model_forward_backward(model, &b, &loss), GAAW_SUCCESS);
  *grads = model_snapshot(model, 1, n);
  expect_status_ctx(ctx, gaaw_model_predict(model, &b, pred), GAAW_SUCCESS);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return loss;
}

/* The loss, predictions and gradients under options against those under dp 2 (one
 * model per rank), within 1e-5 of their scale. */
static void against_one(const char *options, const char *what)
{
  float *g1, *g2, p1[B * NOUT], p2[B * NOUT];
  long n1, n2;
  float l1 = run("backend=host dp=2", &g1, &n1, p1), l2 = run(options, &g2, &n2, p2);
  char label[96];
  snprintf(label, sizeof label, "every spec kind: loss, %s", what);
  expect_close_scaled(&l2, &l1, 1, 1e-5, label);
  snprintf(label, sizeof label, "every spec kind: predictions, %s", what);
  expect_close_scaled(p2, p1, B * NOUT, 1e-5, label);
  expect_true(n1 == n2, "gradient counts %ld and %ld", n1, n2);
  snprintf(label, sizeof label, "every spec kind: gradients, %s", what);
  if (n1 == n2) expect_close_scaled(g2, g1, n1, 1e-5, label);
  if (rank == 0) fprintf(stderr, "every spec kind: loss dp 2 %.7f, %s %.7f\n", l1, options, l2);
  free(g1), free(g2);
}

/* pp 2: the residual group inside the first stage (its 10 layers before the loss cut
 * 6 + 4) gives the pp 1 answer; a cut inside the group is refused on both ranks. */
static void pipeline_stages(void)
{
  against_one("backend=host pp=2 pp_layout=6:4", "pp 2 against pp 1");
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host pp=2 pp_layout=3:7");
  gaaw_model_t model;
  expect_status_ctx(ctx, gaaw_model_create(ctx, NIN, every_kind, NSPECS, 5, GAAW_F32, &model), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "spans pipeline stages") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_finalize(&ctx);
}

static void mlp_is_a_shortcut(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2");
  gaaw_mlp_config_t c = {.nsizes = 4, .sizes = {NIN, 6, 8, NOUT}, .activation = GAAW_ACT_RELU, .seed = 9,
                         .loss = GAAW_LOSS_L1};
  const gaaw_layer_spec_t specs[] = {LINEAR(6), ACT(GAAW_ACT_RELU), LINEAR(8), ACT(GAAW_ACT_RELU), LINEAR(NOUT),
                                     {.kind = GAAW_SPEC_LOSS, .loss = GAAW_LOSS_L1}};
  gaaw_model_t a, b;
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &a));
  require_ok(ctx, gaaw_model_create(ctx, NIN, specs, 6, 9, GAAW_F32, &b));
  long na, nb;
  float *pa = model_snapshot(a, 0, &na), *pb = model_snapshot(b, 0, &nb);
  expect_true(na == nb && memcmp(pa, pb, sizeof(float) * (size_t)na) == 0,
              "the MLP and its specs have the same initial parameters");
  float la = loss_of(a), lb = loss_of(b);
  expect_true(la == lb, "the MLP's loss %.9g and its specs' %.9g differ", (double)la, (double)lb);
  free(pa), free(pb);
  gaaw_model_destroy(&a);
  gaaw_model_destroy(&b);
  gaaw_finalize(&ctx);
}

static void bad_specs(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2");
  gaaw_layer_spec_t specs[NSPECS];
  memcpy(specs, every_kind, sizeof specs);
  gaaw_model_t model = NULL;
  if (rank == 1) specs[2].size = 40; /* a residual group past the end, on one rank */
  expect_status_ctx(ctx, gaaw_model_create(ctx, NIN, specs, NSPECS, 5, GAAW_F32, &model), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "spec 2 (residual)") != NULL, "the error names the spec: %s",
              gaaw_last_error(ctx));
  expect_true(model == NULL, "no model after a failed creation");
  memcpy(specs, every_kind, sizeof specs);
  if (rank == 1) specs[4].size = 18; /* good, but not rank 0's */
  expect_status_ctx(ctx, gaaw_model_create(ctx, NIN, specs, NSPECS, 5, GAAW_F32, &model), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "specs") != NULL, "the error names the specs: %s", gaaw_last_error(ctx));
  memcpy(specs, every_kind, sizeof specs);
  specs[4].size = 15; /* column-parallel, odd at tp 2: on both */
  expect_status_ctx(ctx, gaaw_model_create(ctx, NIN, specs, NSPECS, 5, GAAW_F32, &model), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "divisible by tp") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_layer_spec_t no_loss[] = {LINEAR(4)};
  expect_status_ctx(ctx, gaaw_model_create(ctx, NIN, no_loss, 1, 5, GAAW_F32, &model), GAAW_ERR_INVALID_ARG);
  gaaw_layer_spec_t width[] = {{.kind = GAAW_SPEC_RESIDUAL, .size = 1}, LINEAR(6),
                               {.kind = GAAW_SPEC_LOSS}}; /* 4 -> 6 inside a residual group */
  expect_status_ctx(ctx, gaaw_model_create(ctx, NIN, width, 3, 5, GAAW_F32, &model), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "must keep it") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  uint64_t state = 31;
  for (int i = 0; i < B * NIN; i++) x[i] = (float)model_normal(&state);
  for (int i = 0; i < B * NOUT; i++) t[i] = (float)model_normal(&state);
  finite_differences();
  against_one("backend=host tp=2", "tp 2 against tp 1");
  pipeline_stages();
  mlp_is_a_shortcut();
  bad_specs();
  return test_finish_mpi("test_sequential_np2");
}
