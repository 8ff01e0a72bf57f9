/* The GPT against PyTorch 1.13 (tests/reference/gpt_reference.py, the reference
 * GPT of DESIGN.md section 6a) from the same weights and batch: loss, logits and
 * every parameter gradient, for GPT-2 (layernorm, GELU, tied head) and for the
 * RMSnorm + SwiGLU + untied variant. Host backend, one rank. Skips (77) without
 * PyTorch. Tolerance: f32 against f32 with other summation orders, 2e-5 of each
 * tensor's largest value (logits, loss) and 1e-4 for gradients. */
#include <mpi.h>

#include "tests/harness/model_util.h"
#include "tests/harness/torch_ref.h"

/* 0 on success, 77 when PyTorch is missing, 1 otherwise. */
static int run_case(gaaw_context_t ctx, gaaw_norm_t norm, gaaw_activation_t act, int tied)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 61; /* odd on purpose */
  g.max_seq = 16;
  g.layers = 2;
  g.heads = 4;
  g.dim = 32;
  g.ffn = 48;
  g.norm = norm;
  g.activation = act;
  g.tied_embeddings = tied;
  const int B = 2, T = 12;
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  int32_t tokens[2 * 12], targets[2 * 12];
  model_random_batch(B, T, g.vocab, 99, tokens, targets);
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  float loss;
  float *logits = malloc(sizeof(float) * B * T * g.vocab);
  require_ok(ctx, gaaw_model_forward(model, &batch, &loss));
  require_ok(ctx, gaaw_model_get_logits(model, logits));
  require_ok(ctx, gaaw_model_backward(model));

  const float adam[5] = {0};
  int nref, skipped;
  tf_tensor *ref = torch_reference(ctx, model, &g, B, T, tokens, targets, 0, adam, &nref, &skipped);
  if (skipped) {
    gaaw_model_destroy(&model);
    free(logits);
    return 77;
  }
  expect_true(ref != NULL, "cannot run the reference");
  int count;
  gaaw_model_param_count(model, &count);
  if (nref > 0) {
    const char *variant = norm == GAAW_NORM_LAYERNORM ? "gpt2" : "rmsnorm-swiglu-untied";
    char what[160];
    const tf_tensor *t = tf_find(ref, nref, "loss");
    expect_close_scaled(&loss, (float *)t->data, 1, 2e-5, "loss");
    fprintf(stderr, "%s: loss gaaw %.7f torch %.7f\n", variant, loss, ((float *)t->data)[0]);
    t = tf_find(ref, nref, "logits");
    expect_true(t && t->count == (int64_t)B * T * g.vocab, "logits shape");
    if (t) expect_close_scaled(logits, (float *)t->data, t->count, 2e-5, "logits");
    for (int i = 0; i < count; i++) {
      const char *name;
      int64_t shape[2];
      gaaw_model_param_info(model, i, &name, NULL, shape);
      snprintf(what, sizeof what, "grad.%s", name);
      t = tf_find(ref, nref, what);
      expect_true(t != NULL, "the reference has no %s", what);
      if (!t) continue;
      float *grad = malloc(sizeof(float) * shape[0] * shape[1]);
      require_ok(ctx, gaaw_model_get_grad(model, name, grad));
      snprintf(what, sizeof what, "%s: gradient of %s", variant, name);
      expect_close_scaled(grad, (float *)t->data, t->count, 1e-4, what);
      free(grad);
    }
    tf_free(ref, nref);
  }
  gaaw_model_destroy(&model);
  free(logits);
  return 0;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  int rc = run_case(ctx, GAAW_NORM_LAYERNORM, GAAW_ACT_GELU, 1);
  if (rc != 77) rc = run_case(ctx, GAAW_NORM_RMSNORM, GAAW_ACT_SWIGLU, 0);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  if (rc == 77) {
    fprintf(stderr, "test_gpt_torch: PyTorch (python3-torch) is missing: skipped\n");
    return 77;
  }
  return test_finish("test_gpt_torch");
}
