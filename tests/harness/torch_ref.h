/* Running the PyTorch reference GPT (tests/reference/gpt_reference.py) on a gaaw
 * model's current parameters and a batch. */
#ifndef GAAW_TEST_TORCH_REF_H
#define GAAW_TEST_TORCH_REF_H

#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness/tensor_file.h"
#include "tests/harness/test_util.h"

#ifndef GAAW_SRCDIR
#define GAAW_SRCDIR "."
#endif

/* The reference's output records (count in *n), NULL with *skipped = 1 when
 * PyTorch is missing, NULL on failure. adam: lr, beta1, beta2, eps, weight decay. */
static inline tf_tensor *torch_reference(gaaw_context_t ctx, gaaw_model_t model, const gaaw_gpt_config_t *g, int B,
                                         int T, const int32_t *tokens, const int32_t *targets, int adam_steps,
                                         const float adam[5], int *n, int *skipped)
{
  char in[64], out[64], cmd[512];
  snprintf(in, sizeof in, "torch_ref_in.%d.bin", (int)getpid());
  snprintf(out, sizeof out, "torch_ref_out.%d.bin", (int)getpid());
  FILE *f = fopen(in, "wb");
  int32_t cfg[12] = {g->vocab, g->max_seq, g->layers, g->heads, g->dim, g->ffn ? g->ffn : 4 * g->dim,
                     g->norm, g->activation, g->tied_embeddings, B, T, adam_steps};
  tf_write(f, "config", 1, 1, (int64_t[]){12}, cfg);
  tf_write(f, "tokens", 1, 2, (int64_t[]){B, T}, tokens);
  tf_write(f, "targets", 1, 2, (int64_t[]){B, T}, targets);
  tf_write(f, "adam", 0, 1, (int64_t[]){5}, adam);
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
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/reference/gpt_reference.py %s %s", GAAW_SRCDIR, in, out);
  int rc = system(cmd);
  remove(in);
  *skipped = WIFEXITED(rc) && WEXITSTATUS(rc) == 77;
  tf_tensor *ref = NULL;
  *n = rc == 0 ? tf_read(out, &ref) : -1;
  remove(out);
  if (!*skipped && *n <= 0) fprintf(stderr, "%s failed (exit %d)\n", cmd, rc);
  return *n > 0 ? ref : NULL;
}

#endif
