/* The parameter registry of a safetensors export or import (zero/safetensors_registry.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/runtime/error.h"
#include "zero/safetensors_registry.h"


void gaaw_st_registry_free(st_registry *r)
{
  for (int k = 0; r->hf && k < r->n; k++) free(r->t[k].name);
  free(r->t);
  free(r->param);
  free(r->row0);
  free(r->transposed);
  free(r->param_name);
  free(r->param_numel);
  memset(r, 0, sizeof *r);
}

/* The file tensor holding (the first rows of) parameter `name`, or -1. */
int gaaw_st_registry_find(const st_registry *r, const char *name)
{
  for (int k = 0; k < r->n; k++)
    if (strcmp(r->param_name[r->param[k]], name) == 0) return k;
  return -1;
}

int gaaw_st_registry_find_file(const st_registry *r, const char *name)
{
  for (int k = 0; k < r->n; k++)
    if (strcmp(r->t[k].name, name) == 0) return k;
  return -1;
}

/* Appends parameter p's file tensors (shape: its global shape); parts: room for
 * its pieces. */
static gaaw_status_t add_parts(gaaw_model_t m, st_registry *r, int p, const char *name, int ndim, const int64_t *shape,
                               gaaw_hf_parts *parts)
{
  gaaw_context_t ctx = m->ctx;
  if (!r->hf || !gaaw_hf_parts_of(m, r->hf, name, shape[0], parts)) {
    if (r->hf) GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "parameter %s has no Hugging Face name", name);
    parts->n = 1, parts->transposed = 0, parts->row0[0] = 0, parts->rows[0] = shape[0];
  }
  for (int k = 0; k < parts->n; k++) {
    gaaw_st_tensor *t = &r->t[r->n];
    t->ndim = ndim;
    t->shape[0] = parts->rows[k];
    if (ndim == 2) t->shape[1] = shape[1];
    r->transposed[r->n] = parts->transposed && ndim == 2;
    if (r->transposed[r->n]) t->shape[0] = shape[1], t->shape[1] = shape[0];
    t->name = r->hf ? strdup(parts->name[k]) : (char *)name; /* never written through */
    if (!t->name) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy a tensor name");
    r->param[r->n] = p;
    r->row0[r->n] = parts->row0[k];
    r->n++;
    r->digest = r->digest * 1099511628211ull ^ gaaw_digest(t->name, strlen(t->name)) ^
                gaaw_digest(t->shape, (size_t)t->ndim * sizeof t->shape[0]);
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t registry_add(gaaw_model_t m, st_registry *r, int p, const char *name, int ndim,
                                  const int64_t *shape)
{
  gaaw_hf_parts *parts = malloc(sizeof *parts); /* Mixtral's experts make it large */
  if (!parts) GAAW_FAIL(m->ctx, GAAW_ERR_NO_MEMORY, "cannot hold the file tensors of %s", name);
  gaaw_status_t st = add_parts(m, r, p, name, ndim, shape, parts);
  free(parts);
  return st;
}

gaaw_status_t gaaw_st_registry_read(gaaw_model_t m, st_registry *r)
{
  gaaw_context_t ctx = m->ctx;
  memset(r, 0, sizeof *r);
  GAAW_CHECK(gaaw_model_param_count(m, &r->nparams));
  size_t cap = (size_t)gaaw_hf_tensor_bound(m, r->nparams);
  r->t = calloc(cap, sizeof *r->t);
  r->param = calloc(cap, sizeof *r->param);
  r->row0 = calloc(cap, sizeof *r->row0);
  r->transposed = calloc(cap, sizeof *r->transposed);
  r->param_name = calloc(cap, sizeof *r->param_name);
  r->param_numel = calloc(cap, sizeof *r->param_numel);
  if (!r->t || !r->param || !r->row0 || !r->transposed || !r->param_name || !r->param_numel)
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d registry entries", r->nparams);
  r->hf = gaaw_hf_layout(m);
  if (r->hf == GAAW_HF_GPT2) GAAW_CHECK(gaaw_hf_gpt2_check(m));
  r->max_numel = 1;
  for (int p = 0; p < r->nparams; p++) {
    const char *name;
    int ndim;
    int64_t shape[2] = {0, 1};
    GAAW_CHECK(gaaw_model_param_info(m, p, &name, &ndim, shape));
    r->param_name[p] = name;
    r->param_numel[p] = shape[0] * (ndim == 2 ? shape[1] : 1);
    if (r->param_numel[p] > r->max_numel) r->max_numel = r->param_numel[p];
    GAAW_CHECK(registry_add(m, r, p, name, ndim, shape));
  }
  r->gpt = m->kind_ops->kind == GAAW_MODEL_GPT;
  r->tied = r->gpt && m->gpt.tied_embeddings;
  return GAAW_SUCCESS;
}

int64_t gaaw_st_numel(const gaaw_st_tensor *t)
{
  int64_t n = 1;
  for (int k = 0; k < t->ndim; k++) n *= t->shape[k];
  return n;
}

/* Where element e of file tensor k is in its parameter's (row-major) values: after
 * its first row, or for a transpose of shape (in, out), at (e % out, e / out). */
int64_t gaaw_st_param_index(const st_registry *r, int k, int64_t e)
{
  const gaaw_st_tensor *t = &r->t[k];
  if (r->transposed[k]) return e % t->shape[1] * t->shape[0] + e / t->shape[1];
  return r->row0[k] * (t->ndim == 2 ? t->shape[1] : 1) + e;
}

/* "[3, 4]" */
const char *gaaw_st_shape_text(const gaaw_st_tensor *t, char *out, size_t size)
{
  size_t at = (size_t)snprintf(out, size, "[");
  for (int k = 0; k < t->ndim && at < size; k++)
    at += (size_t)snprintf(out + at, size - at, "%s%lld", k ? ", " : "", (long long)t->shape[k]);
  if (at < size) snprintf(out + at, size - at, "]");
  return out;
}

const char *gaaw_st_strip_prefix(const char *name)
{
  return strncmp(name, GAAW_ST_NANOGPT_PREFIX, sizeof GAAW_ST_NANOGPT_PREFIX - 1) == 0 ? name + sizeof GAAW_ST_NANOGPT_PREFIX - 1 : name;
}

/* The registry's name of the file's tensor `name`: nanoGPT's names drop the
 * prefix "transformer.", LLaMA's are as they are, and GPT-2's keep it, adding it
 * where the file lacks it (as the Hub's gpt2 files, written by GPT2Model, do) but
 * to lm_head.weight. */
const char *gaaw_st_registry_key(const st_registry *r, const char *name, char *buf, size_t size)
{
  if (r->hf == GAAW_HF_NONE) return gaaw_st_strip_prefix(name);
  if (r->hf == GAAW_HF_LLAMA || gaaw_st_strip_prefix(name) != name || strcmp(name, "lm_head.weight") == 0) return name;
  snprintf(buf, size, "%s%s", GAAW_ST_NANOGPT_PREFIX, name);
  return buf;
}

