/* Model spec strings, so that job scripts and config files can name a model:
 *   "mlp sizes=6,64,64,1 activation=gelu loss=mse"
 * the model kind, then key=value words separated by spaces or tabs (each key at
 * most once): sizes (required; 2..GAAW_MLP_MAX_LAYERS+1 integers >= 1, comma
 * separated), activation (gelu, swiglu, none, relu, tanh, silu; default gelu),
 * loss (mse, l1, huber; default mse), huber_delta (> 0; default 1), seed (default
 * 1, at most 2^63 - 1), dtype (f32, bf16, f16; default f32). An error names the
 * word, its position (from 1) and what was expected. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "parallel/model_impl.h"

enum { WORD_MAX = 256 };

typedef struct {
  gaaw_context_t ctx;
  int index;            /* the word's position, from 1 */
  char word[WORD_MAX];  /* the whole word, for messages */
  const char *value;    /* after '=' */
} spec_word;

#define WORD_FAIL(w, ...)                                                                                   \
  do {                                                                                                     \
    char what_[2 * WORD_MAX + 128];                                                                        \
    snprintf(what_, sizeof what_, __VA_ARGS__);                                                            \
    GAAW_FAIL((w)->ctx, GAAW_ERR_INVALID_ARG, "model spec word %d '%s': %s", (w)->index, (w)->word, what_); \
  } while (0)

/* An integer in [lo, hi], the whole of text. */
static int parse_int(const char *text, long long lo, long long hi, long long *out)
{
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static gaaw_status_t parse_sizes(const spec_word *w, gaaw_mlp_config_t *c)
{
  char buf[WORD_MAX];
  snprintf(buf, sizeof buf, "%s", w->value);
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    long long v;
    if (n == GAAW_MLP_MAX_LAYERS + 1) WORD_FAIL(w, "at most %d sizes", GAAW_MLP_MAX_LAYERS + 1);
    if (!parse_int(tok, 1, 1 << 30, &v)) WORD_FAIL(w, "size '%s' is not an integer in 1..%d", tok, 1 << 30);
    c->sizes[n++] = (int)v;
  }
  /* strtok_r skips empty pieces: "6,,1" and a trailing comma are errors too */
  if (strstr(w->value, ",,") || w->value[0] == ',' || (w->value[0] && w->value[strlen(w->value) - 1] == ','))
    WORD_FAIL(w, "an empty size");
  if (n < 2) WORD_FAIL(w, "sizes needs at least 2 integers (inputs and outputs), got %d", n);
  c->nsizes = n;
  return GAAW_SUCCESS;
}

/* The value's index among count names given by name_of(0..count-1), or -1. */
static int lookup(const char *value, int count, const char *(*name_of)(int))
{
  for (int i = 0; i < count; i++)
    if (strcmp(value, name_of(i)) == 0) return i;
  return -1;
}
static const char *activation_at(int i) { return gaaw_activation_name((gaaw_activation_t)i); }
static const char *loss_at(int i) { return gaaw_loss_name((gaaw_loss_t)i); }
static const char *float_dtype_at(int i) { return gaaw_dtype_name((gaaw_dtype_t)i); }

/* One key=value word into c; seen records the keys already given. */
static gaaw_status_t parse_pair(const spec_word *w, const char *key, gaaw_mlp_config_t *c, unsigned *seen)
{
  static const char *const keys[] = {"sizes", "activation", "loss", "huber_delta", "seed", "dtype"};
  int k = 0, nkeys = (int)(sizeof keys / sizeof keys[0]);
  while (k < nkeys && strcmp(key, keys[k]) != 0) k++;
  if (k == nkeys) WORD_FAIL(w, "unknown key '%s' (sizes, activation, loss, huber_delta, seed, dtype)", key);
  if (*seen >> k & 1u) WORD_FAIL(w, "%s is given twice", key);
  *seen |= 1u << k;
  const char *v = w->value;
  long long iv;
  int found;
  switch (k) {
  case 0: return parse_sizes(w, c);
  case 1:
    if ((found = lookup(v, GAAW_ACT_COUNT, activation_at)) < 0)
      WORD_FAIL(w, "unknown activation '%s' (gelu, swiglu, none, relu, tanh, silu)", v);
    c->activation = (gaaw_activation_t)found;
    return GAAW_SUCCESS;
  case 2:
    if ((found = lookup(v, GAAW_LOSS_COUNT, loss_at)) < 0) WORD_FAIL(w, "unknown loss '%s' (mse, l1, huber)", v);
    c->loss = (gaaw_loss_t)found;
    return GAAW_SUCCESS;
  case 3: {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !((float)d > 0) || !isfinite((float)d)) /* > 0 as the float it is stored as */
      WORD_FAIL(w, "huber_delta '%s' is not a finite number > 0", v);
    c->huber_delta = (float)d;
    return GAAW_SUCCESS;
  }
  case 4:
    if (!parse_int(v, 0, INT64_MAX, &iv)) WORD_FAIL(w, "seed '%s' is not an integer >= 0", v);
    c->seed = (uint64_t)iv;
    return GAAW_SUCCESS;
  default:
    if ((found = lookup(v, GAAW_I32, float_dtype_at)) < 0) WORD_FAIL(w, "unknown dtype '%s' (f32, bf16, f16)", v);
    c->dtype = (gaaw_dtype_t)found;
    return GAAW_SUCCESS;
  }
}

gaaw_status_t gaaw_mlp_config_parse(gaaw_context_t ctx, const char *spec, gaaw_mlp_config_t *cfg)
{
  GAAW_ARG_NOT_NULL(ctx, spec);
  GAAW_ARG_NOT_NULL(ctx, cfg);
  gaaw_mlp_config_t c = {.activation = GAAW_ACT_GELU, .loss = GAAW_LOSS_MSE, .huber_delta = 1.0f, .seed = 1};
  unsigned seen = 0;
  spec_word w = {.ctx = ctx};
  const char *p = spec;
  for (;;) {
    p += strspn(p, " \t");
    if (!*p) break;
    size_t len = strcspn(p, " \t");
    w.index++;
    snprintf(w.word, sizeof w.word, "%.*s", (int)(len < WORD_MAX - 1 ? len : WORD_MAX - 1), p);
    if (len >= WORD_MAX) WORD_FAIL(&w, "longer than %d characters", WORD_MAX - 1);
    p += len;
    char *eq = strchr(w.word, '=');
    if (w.index == 1) {
      if (strcmp(w.word, "mlp") != 0) WORD_FAIL(&w, "unknown model kind (mlp)");
      continue;
    }
    if (!eq || eq == w.word) WORD_FAIL(&w, "expected key=value");
    char key[WORD_MAX];
    snprintf(key, sizeof key, "%.*s", (int)(eq - w.word), w.word);
    w.value = eq + 1;
    GAAW_CHECK(parse_pair(&w, key, &c, &seen));
  }
  GAAW_ARG_CHECK(ctx, w.index >= 1, "the model spec is empty; expected e.g. \"mlp sizes=6,64,64,1\"");
  GAAW_ARG_CHECK(ctx, seen & 1u, "the model spec \"%.200s\" has no sizes=...", spec);
  *cfg = c;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_create_from_spec(gaaw_context_t ctx, const char *spec, gaaw_model_t *model)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  gaaw_mlp_config_t c;
  gaaw_status_t st = model ? GAAW_SUCCESS
                           : gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                                              "model must not be NULL");
  if (model) *model = NULL;
  if (st == GAAW_SUCCESS) st = gaaw_mlp_config_parse(ctx, spec, &c);
  gaaw_field text = GAAW_FIELD_TEXT("spec", spec);
  /* every rank parses, then all agree (the same text everywhere) before building */
  st = gaaw_agree_world(ctx, st, "the model spec", &text, st == GAAW_SUCCESS ? 1 : 0);
  if (st == GAAW_SUCCESS) st = gaaw_model_create_mlp(ctx, &c, model);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
