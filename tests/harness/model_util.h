/* Helpers for model tests: batches, whole-model gradient/parameter snapshots, and
 * their comparison parameter by parameter (the comparisons themselves are in
 * test_util.h). */
#ifndef GAAW_TEST_MODEL_UTIL_H
#define GAAW_TEST_MODEL_UTIL_H

#include "tests/harness/test_util.h"

/* Random tokens and next-token targets in 0..vocab-1; every 7th target ignored (-1). */
static inline void model_random_batch(int batch, int seq, int vocab, uint64_t seed, int32_t *tokens, int32_t *targets)
{
  for (long i = 0; i < (long)batch * seq; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    tokens[i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
  }
  for (long i = 0; i < (long)batch * seq; i++)
    targets[i] = i % 7 == 3 ? -1 : tokens[(i + 1) % ((long)batch * seq)];
}

/* The small GPT the training tests use: vocabulary 40, 2 layers, 2 heads, width
 * 16, context seq. */
static inline gaaw_gpt_config_t model_tiny_gpt(int seq, gaaw_dtype_t dtype)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 40;
  g.max_seq = seq;
  g.layers = 2;
  g.heads = 2;
  g.dim = 16;
  g.dtype = dtype;
  return g;
}

/* The small LLaMA-class GPT of the LLaMA tests: vocabulary 1,001, 2 layers, 4
 * query heads of width 8 over kv_heads key/value heads, dim 24 (so head_dim !=
 * dim / heads), LLaMA's ffn 8/3 x 24 = 64, context seq. */
static inline gaaw_gpt_config_t model_tiny_llama(int seq, int kv_heads)
{
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 1001;
  g.max_seq = seq;
  g.layers = 2;
  g.heads = 4;
  g.dim = 24;
  g.head_dim = 8;
  g.ffn = 0;
  gaaw_gpt_config_llama(&g);
  g.kv_heads = kv_heads;
  return g;
}

/* steps training steps of model and opt: step s runs the random batch (batch x seq)
 * of seed seed0 + seed_step * s, and its loss goes to losses[s]. Collective over
 * the world. */
static inline void model_train(gaaw_context_t ctx, gaaw_model_t model, gaaw_optimizer_t opt, int steps, int batch,
                               int seq, int vocab, uint64_t seed0, uint64_t seed_step, float *losses)
{
  size_t bytes = sizeof(int32_t) * (size_t)batch * (size_t)seq;
  int32_t *tokens = malloc(bytes), *targets = malloc(bytes);
  for (int s = 0; s < steps; s++) {
    model_random_batch(batch, seq, vocab, seed0 + seed_step * (uint64_t)s, tokens, targets);
    gaaw_batch_t b = {.batch = batch, .seq = seq, .tokens = tokens, .targets = targets};
    require_ok(ctx, gaaw_model_forward_backward(model, &b, &losses[s]));
    require_ok(ctx, gaaw_optimizer_step(opt));
  }
  free(tokens);
  free(targets);
}

/* Every parameter's (get = 0) value or (get = 1) gradient, concatenated in
 * registry order; *n receives the total. Collective over tp. */
static inline float *model_snapshot(gaaw_model_t model, int grads, long *n)
{
  int count;
  require_ok(NULL, gaaw_model_param_count(model, &count));
  long total = 0;
  for (int i = 0; i < count; i++) {
    int64_t shape[2];
    gaaw_model_param_info(model, i, NULL, NULL, shape);
    total += (long)(shape[0] * shape[1]);
  }
  float *all = malloc(sizeof(float) * (size_t)(total + 1)), *p = all;
  for (int i = 0; i < count; i++) {
    const char *name;
    int64_t shape[2];
    gaaw_model_param_info(model, i, &name, NULL, shape);
    require_ok(NULL, grads ? gaaw_model_get_grad(model, name, p) : gaaw_model_get_param(model, name, p));
    p += shape[0] * shape[1];
  }
  *n = total;
  return all;
}

/* Where each parameter lies in a snapshot (registry order): parameter k is
 * name[k], elements offset[k] .. offset[k+1]-1. Outlives the model it came from. */
typedef struct {
  int count;
  long *offset;      /* count + 1 */
  const char **name; /* copies */
} model_layout;

static inline model_layout model_layout_of(gaaw_model_t model)
{
  model_layout l = {0, NULL, NULL};
  require_ok(NULL, gaaw_model_param_count(model, &l.count));
  l.offset = malloc(sizeof(long) * (size_t)(l.count + 1));
  l.name = malloc(sizeof(char *) * (size_t)(l.count + 1));
  l.offset[0] = 0;
  for (int i = 0; i < l.count; i++) {
    const char *name;
    int64_t shape[2];
    require_ok(NULL, gaaw_model_param_info(model, i, &name, NULL, shape));
    l.name[i] = strdup(name);
    l.offset[i + 1] = l.offset[i] + (long)(shape[0] * shape[1]);
  }
  return l;
}

static inline void model_layout_free(model_layout *l)
{
  for (int i = 0; i < l->count; i++) free((char *)l->name[i]);
  free(l->offset);
  free(l->name);
  l->count = 0;
  l->offset = NULL;
  l->name = NULL;
}

/* Two snapshots of layout l: every parameter within tol of its own largest |value|
 * (expect_close_pieces), every element finite. */
#define expect_close_layout(l, got, want, tol, what) \
  expect_close_pieces((got), (want), (l)->count, (l)->offset, (l)->name, (tol), (what))

/* As expect_close_layout, the layout read from model (snapshots of it). */
static inline int expect_close_model_at(gaaw_model_t model, const float *got, const float *want, double tol,
                                        const char *what, const char *file, int line)
{
  model_layout l = model_layout_of(model);
  int pass = expect_close_pieces_at(got, want, l.count, l.offset, l.name, tol, what, file, line);
  model_layout_free(&l);
  return pass;
}
#define expect_close_model(model, got, want, tol, what) \
  expect_close_model_at((model), (got), (want), (tol), (what), __FILE__, __LINE__)

/* The key bias of every layer (elements dim .. 2 dim - 1 of h.L.attn.c_attn.bias, the
 * global q|k|v layout) has a gradient of exactly zero in exact arithmetic (a constant
 * added to every key of a row leaves its softmax unchanged), so runs that round
 * differently see only their own rounding noise there, which Adam normalises into
 * steps of either sign: those elements of two AdamW runs are compared only in that
 * both stay within bound (e.g. steps x lr from a zero start). Returns a copy of got
 * (n values; free it) holding want's values there, for comparing the whole tensors
 * on their real gradients. */
static inline float *model_set_aside_key_bias(const model_layout *l, int dim, const float *got_in, const float *want,
                                              double bound, const char *what)
{
  long n = l->offset[l->count];
  float *got = malloc(sizeof(float) * (size_t)(n + 1));
  memcpy(got, got_in, sizeof(float) * (size_t)n);
  for (int k = 0; k < l->count; k++) {
    const char *name = l->name[k];
    size_t len = strlen(name), tail = strlen(".attn.c_attn.bias");
    if (len < tail || strcmp(name + len - tail, ".attn.c_attn.bias") != 0) continue;
    for (long i = l->offset[k] + dim; i < l->offset[k] + 2 * dim; i++) {
      expect_true(fabs(got[i]) <= bound && fabs(want[i]) <= bound, "%s: %s[%ld] is %g, expected %g: a key bias moved "
                  "more than %g, like a real gradient", what, name, i - l->offset[k], got[i], want[i], bound);
      got[i] = want[i];
    }
  }
  return got;
}

/* A normal(0, 1) deviate from a 64-bit state (splitmix64 + Box-Muller). */
static inline double model_normal(uint64_t *state)
{
  double u[2];
  for (int k = 0; k < 2; k++) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    u[k] = ((double)(z >> 11) + 0.5) / 9007199254740992.0; /* in (0, 1) */
  }
  return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* Parameters away from initialisation, where every bias is 0 and every norm weight
 * 1 and a bias dropped or added twice is invisible: every bias normal(0, 0.1), every
 * norm weight (ln_*.weight) 1 + normal(0, 0.1), every other weight normal(0, 0.1),
 * drawn from seed in registry order, so every rank and every layout sets the same
 * values. Before gaaw_optimizer_create (the optimizer copies the parameters).
 * Not collective. */
static inline void model_randomise(gaaw_model_t model, uint64_t seed)
{
  int count;
  require_ok(NULL, gaaw_model_param_count(model, &count));
  uint64_t state = seed;
  for (int i = 0; i < count; i++) {
    const char *name;
    int64_t shape[2];
    gaaw_model_param_info(model, i, &name, NULL, shape);
    long n = (long)(shape[0] * shape[1]);
    size_t len = strlen(name);
    int is_norm = strstr(name, "ln_") != NULL && len > 7 && strcmp(name + len - 7, ".weight") == 0;
    float *v = malloc(sizeof(float) * (size_t)n);
    for (long j = 0; j < n; j++) v[j] = (float)((is_norm ? 1.0 : 0.0) + 0.1 * model_normal(&state));
    require_ok(NULL, gaaw_model_set_param(model, name, v));
    free(v);
  }
}

/* Central differences of loss(model, data) over every parameter, in
 * model_snapshot's order, into fd (as many values as the model has parameters):
 * each element set to v + h and v - h through gaaw_model_set_param, then put back.
 * Not collective unless loss is. */
static inline void model_finite_differences(gaaw_model_t model, double (*loss)(gaaw_model_t model, void *data),
                                            void *data, float h, float *fd)
{
  int count;
  require_ok(NULL, gaaw_model_param_count(model, &count));
  long at = 0;
  for (int i = 0; i < count; i++) {
    const char *name;
    int64_t shape[2];
    gaaw_model_param_info(model, i, &name, NULL, shape);
    long k = (long)(shape[0] * shape[1]);
    float *v = malloc(sizeof(float) * (size_t)k);
    require_ok(NULL, gaaw_model_get_param(model, name, v));
    for (long j = 0; j < k; j++) {
      float keep = v[j];
      v[j] = keep + h;
      require_ok(NULL, gaaw_model_set_param(model, name, v));
      double lp = loss(model, data);
      v[j] = keep - h;
      require_ok(NULL, gaaw_model_set_param(model, name, v));
      double lm = loss(model, data);
      v[j] = keep;
      fd[at + j] = (float)((lp - lm) / (2 * h));
    }
    require_ok(NULL, gaaw_model_set_param(model, name, v));
    free(v);
    at += k;
  }
}

/* sqrt(sum of squares) of n values, in double. */
static inline double model_norm2(const float *v, long n)
{
  double s = 0;
  for (long i = 0; i < n; i++) s += (double)v[i] * v[i];
  return sqrt(s);
}

#endif
