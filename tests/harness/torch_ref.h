/* Running the PyTorch reference GPT (tests/reference/gpt_reference.py) on a gaaw
 * model's current parameters and a batch. */
#ifndef GAAW_TEST_TORCH_REF_H
#define GAAW_TEST_TORCH_REF_H

#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness/tensor_file.h"
#include "tests/harness/test_util.h"
#include "tests/harness/torch_config.h"

#ifndef GAAW_SRCDIR
#define GAAW_SRCDIR "."
#endif

/* The reference run by its own options: steps optimizer steps (0: gradients only)
 * of AdamW with adam (lr, beta1, beta2, eps, weight decay), or of SGD when sgd is not
 * NULL (lr, momentum, weight decay: torch.optim.SGD's). Returns the output records
 * (count in *n); NULL with *skipped = 1 when Python or PyTorch is not installed (the
 * only reasons to skip); NULL on any other failure, with a message. */
static inline tf_tensor *torch_reference_run(gaaw_context_t ctx, gaaw_model_t model, const gaaw_gpt_config_t *g,
                                             int B, int T, const int32_t *tokens, const int32_t *targets, int steps,
                                             const float adam[5], const float sgd[3], int *n, int *skipped)
{
  char in[64], out[64], cmd[512];
  const char *python = "/usr/bin/python3";
  *n = -1;
  *skipped = access(python, X_OK) != 0;
  if (*skipped) {
    fprintf(stderr, "torch_reference: %s is not installed\n", python);
    return NULL;
  }
  snprintf(in, sizeof in, "torch_ref_in.%d.bin", (int)getpid());
  snprintf(out, sizeof out, "torch_ref_out.%d.bin", (int)getpid());
  FILE *f = fopen(in, "wb");
  if (!f) {
    fprintf(stderr, "torch_reference: cannot write %s\n", in);
    return NULL;
  }
  const float no_adam[5] = {0};
  torch_write_config(f, g, B, T, steps);
  tf_write(f, "tokens", 1, 2, (int64_t[]){B, T}, tokens);
  tf_write(f, "targets", 1, 2, (int64_t[]){B, T}, targets);
  tf_write(f, "adam", 0, 1, (int64_t[]){5}, adam ? adam : no_adam);
  if (sgd) tf_write(f, "sgd", 0, 1, (int64_t[]){3}, sgd);
  int count;
  gaaw_model_param_count(model, &count);
  for (int i = 0; i < count; i++) {
    const char *name;
    int ndim;
    int64_t shape[2];
    gaaw_model_param_info(model, i, &name, &ndim, shape);
    float *v = malloc(sizeof(float) * shape[0] * shape[1]);
    require_ok(ctx, gaaw_model_get_param(model, name, v));
    tf_write(f, name, 0, ndim, shape, v);
    free(v);
  }
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s %s/tests/reference/gpt_reference.py %s %s", python, GAAW_SRCDIR, in, out);
  int rc = system(cmd);
  remove(in);
  *skipped = WIFEXITED(rc) && WEXITSTATUS(rc) == 77;
  tf_tensor *ref = NULL;
  if (rc == 0) *n = tf_read(out, &ref);
  remove(out);
  if (*skipped)
    fprintf(stderr, "torch_reference: PyTorch is not installed (%s exited with 77)\n", cmd);
  else if (*n <= 0)
    fprintf(stderr, "torch_reference: %s failed (status %d, %d records)\n", cmd, rc, *n);
  return *n > 0 ? ref : NULL;
}

/* The reference's output records (count in *n), NULL with *skipped = 1 when
 * PyTorch is missing, NULL on failure. adam: lr, beta1, beta2, eps, weight decay;
 * adam_steps AdamW steps on the batch. */
static inline tf_tensor *torch_reference(gaaw_context_t ctx, gaaw_model_t model, const gaaw_gpt_config_t *g, int B,
                                         int T, const int32_t *tokens, const int32_t *targets, int adam_steps,
                                         const float adam[5], int *n, int *skipped)
{
  return torch_reference_run(ctx, model, g, B, T, tokens, targets, adam_steps, adam, NULL, n, skipped);
}

/* Every parameter of model against the reference's "param.NAME" (its values after
 * the optimizer steps), within tol of each tensor's largest |value|, labelled
 * "NAME after <steps>". fix, when not NULL, may first look at and adjust a tensor's
 * values (got and want, n each). Collective over the model's work group. */
static inline void expect_params_match_torch(gaaw_context_t ctx, gaaw_model_t model, const tf_tensor *ref, int nref,
                                             double tol, const char *steps,
                                             void (*fix)(const char *name, float *got, const float *want, int64_t n))
{
  int count;
  gaaw_model_param_count(model, &count);
  for (int i = 0; ref && i < count; i++) {
    const char *name;
    int64_t shape[2];
    char what[128];
    gaaw_model_param_info(model, i, &name, NULL, shape);
    snprintf(what, sizeof what, "param.%s", name);
    const tf_tensor *t = tf_find(ref, nref, what);
    expect_true(t != NULL, "the reference has no %s", what);
    if (!t) continue;
    float *v = malloc(sizeof(float) * (size_t)(shape[0] * shape[1]));
    require_ok(ctx, gaaw_model_get_param(model, name, v));
    if (fix) fix(name, v, (const float *)t->data, t->count);
    snprintf(what, sizeof what, "%s after %s", name, steps);
    expect_close_scaled(v, (const float *)t->data, t->count, tol, what);
    free(v);
  }
}

#endif
