/* One rank's part of the MPMD agreement test (tests/mpi/test_agree_mpmd.sh): ranks
 * started with different arguments must all stop with the same named error.
 * Arguments are key=value: the tiny GPT's fields (vocab, max_seq, layers, heads,
 * dim, dtype, seed, norm, activation, tied_embeddings), the optimizer's (zero_stage, lr,
 * kind) and the training batch's (batch <= 2 rows, seq <= 8); anything else is a gaaw
 * option (tp, ...). The program builds the model and
 * the optimizer and trains one step. It prints one line,
 *   "rank R: trained" or "rank R: failed in STAGE after S s: REPORT",
 * and exits 0 or 3. */
#include <mpi.h>

#include "tests/harness/model_util.h"

static int parse_dtype(const char *v)
{
  return !strcmp(v, "bf16") ? GAAW_BF16 : !strcmp(v, "f16") ? GAAW_F16 : GAAW_F32;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gaaw_gpt_config_t g = model_tiny_gpt(8, GAAW_F32);
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  int rows = 2, seq = 8;
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_parse(cfg, "backend=host comm_timeout=60"));
  for (int i = 1; i < argc; i++) {
    char key[64];
    const char *eq = strchr(argv[i], '=');
    if (!eq || eq - argv[i] >= (long)sizeof key) continue;
    snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
    const char *v = eq + 1;
    if (!strcmp(key, "vocab")) g.vocab = atoi(v);
    else if (!strcmp(key, "max_seq")) g.max_seq = atoi(v);
    else if (!strcmp(key, "layers")) g.layers = atoi(v);
    else if (!strcmp(key, "heads")) g.heads = atoi(v);
    else if (!strcmp(key, "dim")) g.dim = atoi(v);
    else if (!strcmp(key, "dtype")) g.dtype = (gaaw_dtype_t)parse_dtype(v);
    else if (!strcmp(key, "seed")) g.seed = strtoull(v, NULL, 10);
    else if (!strcmp(key, "norm")) g.norm = !strcmp(v, "rmsnorm") ? GAAW_NORM_RMSNORM : GAAW_NORM_LAYERNORM;
    else if (!strcmp(key, "activation")) g.activation = !strcmp(v, "swiglu") ? GAAW_ACT_SWIGLU : GAAW_ACT_GELU;
    else if (!strcmp(key, "tied_embeddings")) g.tied_embeddings = atoi(v);
    else if (!strcmp(key, "zero_stage")) oc.zero_stage = atoi(v);
    else if (!strcmp(key, "lr")) oc.lr = (float)atof(v);
    else if (!strcmp(key, "kind")) oc.kind = !strcmp(v, "sgd") ? GAAW_SGD : GAAW_ADAMW;
    else if (!strcmp(key, "batch")) rows = atoi(v) < 2 ? atoi(v) : 2;
    else if (!strcmp(key, "seq")) seq = atoi(v) < 8 ? atoi(v) : 8;
    else require_ok(NULL, gaaw_config_parse(cfg, argv[i]));
  }
  double start = MPI_Wtime();
  const char *stage = "gaaw_init";
  gaaw_context_t ctx = NULL;
  gaaw_model_t model = NULL;
  gaaw_optimizer_t opt = NULL;
  gaaw_status_t st = gaaw_init(MPI_COMM_WORLD, cfg, &ctx);
  if (st == GAAW_SUCCESS) stage = "gaaw_model_create_gpt", st = gaaw_model_create_gpt(ctx, &g, &model);
  if (st == GAAW_SUCCESS) stage = "gaaw_optimizer_create", st = gaaw_optimizer_create(model, &oc, &opt);
  if (st == GAAW_SUCCESS) {
    stage = "training";
    int32_t tokens[2 * 8], targets[2 * 8];
    model_random_batch(2, 8, 40, 5, tokens, targets);
    gaaw_batch_t batch = {.batch = rows, .seq = seq, .tokens = tokens, .targets = targets};
    float loss;
    st = gaaw_model_forward_backward(model, &batch, &loss);
    if (st == GAAW_SUCCESS) st = gaaw_optimizer_step(opt);
  }
  if (st == GAAW_SUCCESS)
    printf("rank %d: trained\n", rank);
  else
    printf("rank %d: failed in %s after %.2f s: %s\n", rank, stage, MPI_Wtime() - start, gaaw_last_error(ctx));
  fflush(stdout);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return st == GAAW_SUCCESS ? 0 : 3;
}
