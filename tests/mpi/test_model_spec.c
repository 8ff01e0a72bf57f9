/* Model spec strings, on 2 ranks:
 *  - gaaw_mlp_config_parse: a full spec gives every field; defaults (gelu, mse,
 *    delta 1, seed 1, f32); each kind of bad word (unknown kind, key, activation,
 *    loss, dtype; bad sizes, delta, seed; a key twice; no sizes; empty) is
 *    GAAW_ERR_INVALID_ARG naming that word and leaves the config unchanged;
 *  - gaaw_model_create_from_spec builds the model gaaw_model_create_mlp builds from
 *    the parsed config (the same parameters and loss, bit for bit);
 *  - a bad spec on one rank only, or specs that differ between ranks, fail both. */
#include <mpi.h>

#include "tests/harness/model_util.h"

static int rank;

static void expect_bad(const char *spec, const char *needle)
{
  gaaw_mlp_config_t c = {.nsizes = 77};
  expect_status(gaaw_mlp_config_parse(NULL, spec, &c), GAAW_ERR_INVALID_ARG);
  const char *msg = gaaw_last_error(NULL);
  expect_true(strstr(msg, needle) != NULL, "spec \"%s\": the error \"%s\" should contain \"%s\"", spec, msg, needle);
  expect_true(c.nsizes == 77, "spec \"%s\": a failed parse changed the config", spec);
}

static void parse_cases(void)
{
  gaaw_mlp_config_t c;
  require_ok(NULL, gaaw_mlp_config_parse(NULL, "  mlp\tsizes=6,64,32,1 activation=silu loss=huber huber_delta=0.25 "
                                               "seed=42 dtype=bf16  ", &c));
  expect_true(c.nsizes == 4 && c.sizes[0] == 6 && c.sizes[1] == 64 && c.sizes[2] == 32 && c.sizes[3] == 1,
              "sizes parsed as %d: %d,%d,%d,%d", c.nsizes, c.sizes[0], c.sizes[1], c.sizes[2], c.sizes[3]);
  expect_true(c.activation == GAAW_ACT_SILU && c.loss == GAAW_LOSS_HUBER && c.huber_delta == 0.25f && c.seed == 42 &&
                  c.dtype == GAAW_BF16,
              "activation %d loss %d delta %g seed %llu dtype %d", c.activation, c.loss, (double)c.huber_delta,
              (unsigned long long)c.seed, c.dtype);
  require_ok(NULL, gaaw_mlp_config_parse(NULL, "mlp sizes=3,2", &c));
  expect_true(c.nsizes == 2 && c.activation == GAAW_ACT_GELU && c.loss == GAAW_LOSS_MSE && c.huber_delta == 1.0f &&
                  c.seed == 1 && c.dtype == GAAW_F32,
              "defaults");
  expect_bad("gpt sizes=3,2", "word 1 'gpt': unknown model kind");
  expect_bad("mlp sizes=3,2 activation=gleu", "word 3 'activation=gleu': unknown activation 'gleu'");
  expect_bad("mlp sizes=3,2 loss=l2", "word 3 'loss=l2': unknown loss 'l2'");
  expect_bad("mlp sizes=3,2 dtype=f64", "unknown dtype 'f64'");
  expect_bad("mlp sizes=3,x", "size 'x' is not an integer");
  expect_bad("mlp sizes=3,0", "size '0' is not an integer in 1..");
  expect_bad("mlp sizes=3,,2", "an empty size");
  expect_bad("mlp sizes=3,2,", "an empty size");
  expect_bad("mlp sizes=3", "at least 2 integers");
  expect_bad("mlp sizes=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18", "at most 17 sizes");
  expect_bad("mlp sizes=3,2 huber_delta=-1", "huber_delta '-1' is not a finite number > 0");
  expect_bad("mlp sizes=3,2 huber_delta=1e40", "huber_delta '1e40'");
  expect_bad("mlp sizes=3,2 huber_delta=1e-60", "huber_delta '1e-60'"); /* > 0 as a double, 0 as a float */
  expect_bad("mlp sizes=3,2 seed=-3", "seed '-3'");
  expect_bad("mlp sizes=3,2 sizes=4,2", "word 3 'sizes=4,2': sizes is given twice");
  expect_bad("mlp sizes=3,2 depth=4", "unknown key 'depth'");
  expect_bad("mlp sizes=3,2 =4", "expected key=value");
  expect_bad("mlp sizes=3,2 relu", "word 3 'relu': expected key=value");
  expect_bad("mlp activation=relu", "has no sizes");
  expect_bad("   ", "empty");
  expect_status(gaaw_mlp_config_parse(NULL, NULL, &c), GAAW_ERR_INVALID_ARG);
}

static void create_cases(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2");
  const char *spec = "mlp sizes=3,8,2 activation=tanh loss=l1 seed=5";
  gaaw_mlp_config_t c;
  require_ok(ctx, gaaw_mlp_config_parse(ctx, spec, &c));
  gaaw_model_t a = NULL, b = NULL;
  require_ok(ctx, gaaw_model_create_from_spec(ctx, spec, &a));
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &b));
  long na, nb;
  float *pa = model_snapshot(a, 0, &na), *pb = model_snapshot(b, 0, &nb);
  expect_true(na == nb && memcmp(pa, pb, sizeof(float) * (size_t)na) == 0, "the spec's model has the config's weights");
  float x[6] = {0.5f, -1, 2, 0, 1, -0.5f}, t[4] = {1, 0, -1, 2}, la, lb;
  gaaw_batch_t batch = {.batch = 2, .inputs = x, .outputs = t};
  require_ok(ctx, gaaw_model_forward(a, &batch, &la));
  require_ok(ctx, gaaw_model_forward(b, &batch, &lb));
  expect_true(la == lb, "losses %.9g and %.9g", (double)la, (double)lb);
  free(pa), free(pb);
  gaaw_model_destroy(&a);
  gaaw_model_destroy(&b);
  /* bad on one rank only; good but different */
  expect_status_ctx(ctx, gaaw_model_create_from_spec(ctx, rank == 1 ? "mlp sizes=3,8,2 loss=l3" : spec, &a),
                    GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "unknown loss 'l3'") != NULL, "every rank gets rank 1's message: %s",
              gaaw_last_error(ctx));
  expect_true(a == NULL, "no model after a failure");
  expect_status_ctx(ctx, gaaw_model_create_from_spec(ctx, rank == 1 ? "mlp sizes=3,8,2 activation=relu" : spec, &a),
                    GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_model_create_from_spec(ctx, "mlp sizes=3,7,2", &a), GAAW_ERR_INVALID_ARG); /* 7 % tp */
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  parse_cases();
  create_cases();
  return test_finish_mpi("test_model_spec_np2");
}
