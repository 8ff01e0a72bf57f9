/* What the caller adds to a checkpoint, kept in the optimizer's checkpoint state:
 * its own key = value entries (a simulation's time step), set before a save and
 * read after a load, and its sample buffers. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zero/checkpoint_impl.h"

static int key_ok(const char *k)
{
  size_t n = strlen(k);
  if (n < 1 || n > 63) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= '0' && k[i] <= '9') ||
          k[i] == '_' || k[i] == '.' || k[i] == '-'))
      return 0;
  return 1;
}

/* Whether s is UTF-8 that meta.json can carry: Jansson's own test (overlong
 * forms, surrogates and code points past U+10FFFF are refused). */
static int utf8_ok(const char *s)
{
  json_t *v = json_string(s);
  json_decref(v);
  return v != NULL;
}

gaaw_status_t gaaw_checkpoint_set_entry(gaaw_optimizer_t opt, const char *key, const char *value)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  gaaw_context_t ctx = opt->ctx;
  GAAW_ARG_NOT_NULL(ctx, key);
  GAAW_ARG_NOT_NULL(ctx, value);
  GAAW_ARG_CHECK(ctx, key_ok(key), "entry key '%.80s' must be 1-63 characters of [A-Za-z0-9_.-]", key);
  GAAW_ARG_CHECK(ctx, strlen(value) <= 4095 && utf8_ok(value),
                 "the value of entry %s must be UTF-8 of at most 4095 bytes", key);
  GAAW_CHECK(gaaw_ckpt_state_ensure(opt));
  struct gaaw_ckpt_state *s = opt->ckpt;
  char *copy = strdup(value);
  if (!copy) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy entry %s", key);
  for (int i = 0; i < s->nentries; i++)
    if (!strcmp(s->entries[i].key, key)) {
      free(s->entries[i].value);
      s->entries[i].value = copy;
      return GAAW_SUCCESS;
    }
  ckpt_entry *grown = realloc(s->entries, sizeof *grown * (size_t)(s->nentries + 1));
  if (!grown) {
    free(copy);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot add entry %s", key);
  }
  s->entries = grown;
  snprintf(grown[s->nentries].key, sizeof grown[0].key, "%s", key);
  grown[s->nentries++].value = copy;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_checkpoint_get_entry(gaaw_optimizer_t opt, const char *key, char *value, size_t size)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  gaaw_context_t ctx = opt->ctx;
  GAAW_ARG_NOT_NULL(ctx, key);
  GAAW_ARG_NOT_NULL(ctx, value);
  for (int i = 0; opt->ckpt && i < opt->ckpt->nentries; i++)
    if (!strcmp(opt->ckpt->entries[i].key, key)) {
      size_t n = strlen(opt->ckpt->entries[i].value);
      GAAW_ARG_CHECK(ctx, n < size, "entry %s holds %zu bytes: value[%zu] is too small", key, n + 1, size);
      memcpy(value, opt->ckpt->entries[i].value, n + 1);
      return GAAW_SUCCESS;
    }
  GAAW_FAIL(ctx, GAAW_ERR_NOT_FOUND, "no checkpoint entry %s", key);
}

gaaw_status_t gaaw_ckpt_take_entries(gaaw_optimizer_t opt, ckpt_meta *meta)
{
  GAAW_CHECK_CTX(opt->ctx, gaaw_ckpt_state_ensure(opt));
  struct gaaw_ckpt_state *s = opt->ckpt;
  for (int i = 0; i < s->nentries; i++) free(s->entries[i].value);
  free(s->entries);
  s->entries = meta->entries, s->nentries = meta->nentries;
  meta->entries = NULL, meta->nentries = 0;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_checkpoint_add_sampler(gaaw_optimizer_t opt, gaaw_sampler_t sampler)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  gaaw_context_t ctx = opt->ctx;
  GAAW_ARG_NOT_NULL(ctx, sampler);
  GAAW_CHECK(gaaw_ckpt_state_ensure(opt));
  struct gaaw_ckpt_state *s = opt->ckpt;
  for (int i = 0; i < s->nsamplers; i++)
    GAAW_ARG_CHECK(ctx, s->samplers[i] != sampler, "this sampler was added already (as sample buffer %d)", i);
  gaaw_sampler_t *grown = realloc(s->samplers, sizeof *grown * (size_t)(s->nsamplers + 1));
  if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot add a sampler");
  s->samplers = grown;
  grown[s->nsamplers++] = sampler;
  return GAAW_SUCCESS;
}
