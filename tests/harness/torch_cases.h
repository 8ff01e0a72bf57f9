/* Several PyTorch reference cases (tests/reference/gpt_reference.py, or another
 * script taking IN OUT pairs: torch_cases_init_script) in one run of the script,
 * so that PyTorch starts once per test rather than once per model:
 *     torch_cases c;
 *     torch_cases_init(&c, "tp");
 *     torch_case_add(&c, model, &g, B, T, tokens, targets);   (for each case)
 *     torch_cases_run(&c);                                    (0, 77: skipped, 1)
 *     tf_tensor *ref = torch_case_result(&c, k, &n);          (case k's records)
 *     torch_cases_free(&c);
 * Each case is the reference's forward and backward from the model's current
 * parameters (loss, logits, every gradient). Another script's cases are written
 * with torch_case_begin, tf_write and torch_case_write_params, then fclose.
 * Not collective: one rank runs it. */
#ifndef GAAW_TEST_TORCH_CASES_H
#define GAAW_TEST_TORCH_CASES_H

#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness/tensor_file.h"
#include "tests/harness/torch_config.h"
#include "tests/harness/model_util.h"

#ifndef GAAW_SRCDIR
#define GAAW_SRCDIR "."
#endif

enum { TORCH_CASES_MAX = 32 };

typedef struct {
  char tag[32];
  const char *script; /* in tests/reference */
  int n;
  tf_tensor *results[TORCH_CASES_MAX];
  int counts[TORCH_CASES_MAX];
} torch_cases;

static inline void torch_case_path(const torch_cases *c, int k, const char *dir, char *path, size_t size)
{
  snprintf(path, size, "torch_%s_%s.%d.%d.bin", c->tag, dir, (int)getpid(), k);
}

static inline void torch_cases_init_script(torch_cases *c, const char *tag, const char *script)
{
  memset(c, 0, sizeof *c);
  snprintf(c->tag, sizeof c->tag, "%s", tag);
  c->script = script;
}

static inline void torch_cases_init(torch_cases *c, const char *tag)
{
  torch_cases_init_script(c, tag, "gpt_reference.py");
}

/* The next case's input file, open for writing (exits on failure). */
static inline FILE *torch_case_begin(torch_cases *c)
{
  if (c->n == TORCH_CASES_MAX) {
    fprintf(stderr, "torch_case_begin: more than %d cases\n", TORCH_CASES_MAX);
    exit(1);
  }
  char path[128];
  torch_case_path(c, c->n++, "in", path, sizeof path);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
  return f;
}

/* Every parameter of model as it is now, by name, in its global layout. */
static inline void torch_case_write_params(FILE *f, gaaw_model_t model)
{
  int count;
  require_ok(NULL, gaaw_model_param_count(model, &count));
  for (int i = 0; i < count; i++) {
    const char *name;
    int ndim;
    int64_t shape[2];
    gaaw_model_param_info(model, i, &name, &ndim, shape);
    float *v = malloc(sizeof(float) * (size_t)(shape[0] * shape[1]));
    require_ok(NULL, gaaw_model_get_param(model, name, v));
    tf_write(f, name, 0, ndim, shape, v);
    free(v);
  }
}

/* Writes the next case's input: the config, the batch and every parameter of
 * model as it is now. */
static inline void torch_case_add(torch_cases *c, gaaw_model_t model, const gaaw_gpt_config_t *g, int B, int T,
                                  const int32_t *tokens, const int32_t *targets)
{
  FILE *f = torch_case_begin(c);
  const float no_adam[5] = {0};
  torch_write_config(f, g, B, T, 0);
  tf_write(f, "tokens", 1, 2, (int64_t[]){B, T}, tokens);
  tf_write(f, "targets", 1, 2, (int64_t[]){B, T}, targets);
  tf_write(f, "adam", 0, 1, (int64_t[]){5}, no_adam);
  torch_case_write_params(f, model);
  fclose(f);
}

/* Runs the script once over every case added: 0 when every case has its results,
 * 77 when the script says PyTorch is missing, 1 otherwise (said on stderr). */
static inline int torch_cases_run(torch_cases *c)
{
  size_t size = 256 + (size_t)c->n * 128;
  char *cmd = malloc(size);
  int len = snprintf(cmd, size, "/usr/bin/python3 %s/tests/reference/%s", GAAW_SRCDIR, c->script);
  for (int k = 0; k < c->n; k++) {
    char in[128], out[128];
    torch_case_path(c, k, "in", in, sizeof in);
    torch_case_path(c, k, "out", out, sizeof out);
    len += snprintf(cmd + len, size - (size_t)len, " %s %s", in, out);
  }
  int rc = system(cmd), status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, failed = 0;
  for (int k = 0; k < c->n; k++) {
    char in[128], out[128];
    torch_case_path(c, k, "in", in, sizeof in);
    torch_case_path(c, k, "out", out, sizeof out);
    remove(in);
    c->counts[k] = status == 0 ? tf_read(out, &c->results[k]) : -1;
    if (c->counts[k] <= 0) c->results[k] = NULL, failed = 1;
    remove(out);
  }
  if (status == 77) {
    free(cmd);
    return 77;
  }
  if (status != 0 || failed) fprintf(stderr, "%s failed (exit status %d)\n", cmd, status);
  free(cmd);
  return status != 0 || failed ? 1 : 0;
}

/* Case k's records (count in *n), NULL when it has none. */
static inline const tf_tensor *torch_case_result(const torch_cases *c, int k, int *n)
{
  *n = k < c->n ? c->counts[k] : -1;
  return k < c->n ? c->results[k] : NULL;
}

static inline void torch_cases_free(torch_cases *c)
{
  for (int k = 0; k < c->n; k++)
    if (c->results[k]) tf_free(c->results[k], c->counts[k]);
  c->n = 0;
}

/* A reference case against a gaaw run of the same model: loss, logits
 * ((batch * seq, vocab)) and every parameter gradient in grads (model_snapshot's
 * order), each tensor within its tolerance of its own largest |value|. */
static inline void expect_matches_torch_at(const tf_tensor *ref, int nref, gaaw_model_t model, float loss,
                                           const float *logits, long nlogits, const float *grads, double tol_out,
                                           double tol_grad, const char *what, const char *file, int line)
{
  char label[256];
  const tf_tensor *t = tf_find(ref, nref, "loss");
  snprintf(label, sizeof label, "%s: loss against PyTorch", what);
  if (!t) {
    test_checks++;
    test_failures++;
    fprintf(stderr, "FAIL %s:%d: %s: the reference has no loss\n", file, line, what);
    return;
  }
  expect_close_scaled_at(&loss, (const float *)t->data, 1, tol_out, label, file, line);
  t = tf_find(ref, nref, "logits");
  snprintf(label, sizeof label, "%s: logits against PyTorch", what);
  if (!t || t->count != nlogits) {
    test_checks++;
    test_failures++;
    fprintf(stderr, "FAIL %s:%d: %s: the reference's logits have %lld values, gaaw's %ld\n", file, line, what,
            t ? (long long)t->count : -1LL, nlogits);
  } else {
    expect_close_scaled_at(logits, (const float *)t->data, nlogits, tol_out, label, file, line);
  }
  /* the reference's gradients in model_snapshot's order, then tensor by tensor */
  int count;
  require_ok(NULL, gaaw_model_param_count(model, &count));
  int64_t total;
  require_ok(NULL, gaaw_model_num_params(model, &total, NULL));
  float *want = calloc((size_t)total + 1, sizeof(float));
  int complete = 1;
  long at = 0;
  for (int i = 0; i < count; i++) {
    const char *name;
    int64_t shape[2];
    gaaw_model_param_info(model, i, &name, NULL, shape);
    long n = (long)(shape[0] * shape[1]);
    char key[128];
    snprintf(key, sizeof key, "grad.%s", name);
    t = tf_find(ref, nref, key);
    if (t && t->count == n) {
      memcpy(want + at, t->data, sizeof(float) * (size_t)n);
    } else {
      complete = 0;
      fprintf(stderr, "FAIL %s:%d: %s: the reference has no gradient of %s (%ld values)\n", file, line, what, name, n);
    }
    at += n;
  }
  test_checks++;
  if (!complete) test_failures++;
  snprintf(label, sizeof label, "%s: gradient against PyTorch", what);
  if (complete) expect_close_model_at(model, grads, want, tol_grad, label, file, line);
  free(want);
}
#define expect_matches_torch(ref, nref, model, loss, logits, nlogits, grads, tol_out, tol_grad, what)           \
  expect_matches_torch_at((ref), (nref), (model), (loss), (logits), (nlogits), (grads), (tol_out), (tol_grad), \
                          (what), __FILE__, __LINE__)

#endif
