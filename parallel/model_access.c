/* Reading and writing the model from outside: parameters and gradients by name in
 * their global layout (gathered over tp, from the owning pipeline stage), the
 * catalog, zeroing gradients, and the layer and pipeline times. */
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/runtime/half.h"
#include "parallel/model_impl.h"
#include "parallel/tp.h"

gaaw_status_t gaaw_model_zero_grad(gaaw_model_t m)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_model_grads_access(m, 1));
  for (int c = 0; c < m->params.nchunks; c++) {
    const gaaw_param_chunk *ch = &m->params.chunks[c];
    if (!ch->grads || ch->hi == ch->lo) continue; /* sharded away (ZeRO 2, 3): the hook zeroed the shard */
    gaaw_tensor_t all = gaaw_params_span(&m->params, 1, ch->lo, ch->hi - ch->lo);
    GAAW_CHECK(gaaw_fill(ctx, &all, 0.0f));
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_layer_count(gaaw_model_t m, int *count)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_NOT_NULL(m->ctx, count);
  *count = m->nlayers;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_layer_times(gaaw_model_t m, int index, const char **kind, double *forward_seconds,
                                     double *backward_seconds)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_CHECK(m->ctx, index >= 0 && index < m->nlayers, "layer index %d is not in 0..%d", index, m->nlayers - 1);
  const gaaw_layer *l = &m->layers[index];
  if (kind) *kind = l->ops->kind;
  if (forward_seconds) *forward_seconds = l->forward_seconds;
  if (backward_seconds) *backward_seconds = l->backward_seconds;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_pipeline_times(gaaw_model_t m, double *idle_seconds, double *total_seconds)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  if (idle_seconds) *idle_seconds = m->pipe_idle;
  if (total_seconds) *total_seconds = m->pipe_wall;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_reset_times(gaaw_model_t m)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  for (int i = 0; i < m->nlayers; i++) m->layers[i].forward_seconds = m->layers[i].backward_seconds = 0.0;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_param_count(gaaw_model_t m, int *count)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_NOT_NULL(m->ctx, count);
  *count = m->ncatalog;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_param_info(gaaw_model_t m, int index, const char **name, int *ndim, int64_t shape[2])
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_CHECK(ctx, index >= 0 && index < m->ncatalog, "parameter index %d is not in 0..%d", index,
                 m->ncatalog - 1);
  const gaaw_param_entry *p = &m->catalog[index];
  if (name) *name = p->name;
  if (ndim) *ndim = p->ndim;
  if (shape) {
    shape[0] = p->shape[0];
    shape[1] = p->shape[1];
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_num_params(gaaw_model_t m, int64_t *global_count, int64_t *local_count)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  int64_t global = 0, local = 0;
  for (int k = 0; k < m->ncatalog; k++) global += m->catalog[k].shape[0] * m->catalog[k].shape[1];
  for (int k = 0; k < m->params.count; k++) local += m->params.items[k].local_numel;
  if (global_count) *global_count = global;
  if (local_count) *local_count = local;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_flops_per_token(gaaw_model_t m, double *flops)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_NOT_NULL(m->ctx, flops);
  int64_t n = 0;
  double lookups = 0, extra = 0;
  GAAW_CHECK_CTX(m->ctx, gaaw_model_num_params(m, &n, NULL));
  m->kind_ops->flops(m, &lookups, &extra);
  *flops = 6 * ((double)n - lookups) + extra;
  return GAAW_SUCCESS;
}

static gaaw_status_t find_param(gaaw_model_t m, const char *name, gaaw_param **p)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, name);
  int k = gaaw_params_find(&m->params, name);
  if (k < 0) GAAW_FAIL(ctx, GAAW_ERR_NOT_FOUND, "the model has no parameter named '%s'", name);
  *p = &m->params.items[k];
  return GAAW_SUCCESS;
}

/* Gathers slice t of parameter p from every tp rank (or, split by rows over ep,
 * every ep rank) into its global layout (f32). */
static gaaw_status_t gather_global(gaaw_model_t m, const gaaw_param *p, const gaaw_tensor_t *t, float *values)
{
  gaaw_context_t ctx = m->ctx;
  const int by_rows = p->row_parts > 1, parts = by_rows ? p->row_parts : m->tp_size;
  int64_t n = p->local_numel, all_n = n * parts;
  size_t es = gaaw_dtype_size(t->dtype);
  gaaw_tensor_t all, flat = gaaw_reshape(t, 1, &n);
  GAAW_CHECK(gaaw_tensor_alloc(ctx, t->dtype, 1, &all_n, GAAW_MEM_WORKSPACE, &all));
  gaaw_status_t st = by_rows ? gaaw_comm_allgather(m->ep, &flat, &all) : gaaw_tp_gather_rows(m->tp, &flat, &all);
  void *host = st == GAAW_SUCCESS ? malloc((size_t)all_n * es) : NULL;
  if (st == GAAW_SUCCESS && !host) st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                         "cannot allocate %lld elements", (long long)all_n);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, all.buf, 0, host, (size_t)all_n * es);
  if (st == GAAW_SUCCESS)
    for (int r = 0; r < parts; r++)
      for (int64_t i = 0; i < n; i++) { /* by rows: ep rank r's whole rows are elements r n .. */
        int64_t g = by_rows ? (int64_t)r * n + i : gaaw_param_global_index(p, r, m->tp_size, i);
        if (g >= 0) values[g] = gaaw_load_f32(host, t->dtype, r * n + i);
      }
  free(host);
  gaaw_buffer_free(ctx, &all.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Reads (or writes) parameter p's slice between the data-parallel engine's
 * ACCESS hooks, which make it resident when it is sharded (ZeRO 3). */
static gaaw_status_t access_param(gaaw_model_t m, gaaw_param *p, int write, const float *in, float *out)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_model_before_layer(m, p->owner, GAAW_PHASE_ACCESS));
  gaaw_status_t st = GAAW_SUCCESS;
  if (!write) {
    st = gather_global(m, p, &p->value, out);
  } else {
    size_t es = gaaw_dtype_size(m->dtype);
    void *slice = malloc((size_t)p->local_numel * es + 4);
    if (!slice) st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                      "cannot allocate %lld elements", (long long)p->local_numel);
    for (int64_t i = 0; st == GAAW_SUCCESS && i < p->local_numel; i++) {
      int64_t g = gaaw_param_global_index(p, m->tp_rank, m->tp_size, i);
      gaaw_store_f32(slice, m->dtype, i, g >= 0 ? in[g] : 0.0f);
    }
    if (st == GAAW_SUCCESS)
      st = gaaw_buffer_write(ctx, p->value.buf, p->value.offset, slice, (size_t)p->local_numel * es);
    free(slice);
  }
  gaaw_status_t st2 = gaaw_model_after_layer(m, p->owner, GAAW_PHASE_ACCESS);
  if (st == GAAW_SUCCESS) st = st2;
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Finds the parameter a collective read names; every rank of the work group must
 * name the same one and pass somewhere to put it. *p is NULL on a pipeline stage
 * that does not hold it (*entry says which one does). */
static gaaw_status_t agree_read(gaaw_model_t m, const char *name, const float *values, gaaw_param **p,
                                const gaaw_param_entry **entry)
{
  gaaw_context_t ctx = m->ctx;
  *p = NULL;
  *entry = name ? gaaw_model_catalog_find(m, name) : NULL;
  gaaw_status_t st = *entry && (*entry)->stage != m->pp_rank ? GAAW_SUCCESS : find_param(m, name, p);
  if (st == GAAW_SUCCESS && !values)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "values must not be NULL");
  gaaw_field f = GAAW_FIELD_TEXT("name", name);
  GAAW_CHECK(gaaw_agree(gaaw_model_work_group(m), st, "the parameter to read", &f, st == GAAW_SUCCESS));
  return GAAW_SUCCESS;
}

/* pp > 1: the stage that holds a parameter sends what it read (values, global
 * layout) to the others of its pp group. */
static gaaw_status_t share_read(gaaw_model_t m, const gaaw_param_entry *e, float *values)
{
  gaaw_context_t ctx = m->ctx;
  if (m->pp_size == 1) return GAAW_SUCCESS;
  int64_t n = e->shape[0] * e->shape[1];
  gaaw_tensor_t t;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &t));
  gaaw_status_t st = GAAW_SUCCESS;
  if (e->stage == m->pp_rank) st = gaaw_buffer_write(ctx, t.buf, 0, values, (size_t)n * sizeof(float));
  if (st == GAAW_SUCCESS) st = gaaw_comm_broadcast(m->pp, &t, e->stage);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, 0, values, (size_t)n * sizeof(float));
  gaaw_buffer_free(ctx, &t.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_get_param(gaaw_model_t m, const char *name, float *values)
{
  gaaw_param *p;
  const gaaw_param_entry *e;
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_CHECK_CTX(m->ctx, agree_read(m, name, values, &p, &e));
  if (p && e->stage == m->pp_rank) GAAW_CHECK_CTX(m->ctx, access_param(m, p, 0, NULL, values));
  GAAW_CHECK_CTX(m->ctx, share_read(m, e, values));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_set_param(gaaw_model_t m, const char *name, const float *values)
{
  gaaw_param *p;
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_NOT_NULL(m->ctx, name);
  /* another pipeline stage's parameter: that stage keeps it */
  if (m->pp_size > 1 && gaaw_model_catalog_find(m, name) && gaaw_params_find(&m->params, name) < 0) {
    GAAW_ARG_NOT_NULL(m->ctx, values);
    return GAAW_SUCCESS;
  }
  GAAW_CHECK_CTX(m->ctx, find_param(m, name, &p));
  GAAW_ARG_NOT_NULL(m->ctx, values);
  GAAW_CHECK_CTX(m->ctx, access_param(m, p, 1, values, NULL));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_get_grad(gaaw_model_t m, const char *name, float *values)
{
  gaaw_param *p;
  const gaaw_param_entry *e;
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(agree_read(m, name, values, &p, &e));
  GAAW_CHECK(gaaw_model_grads_access(m, 0));
  if (p && e->stage == m->pp_rank) {
    if (!p->grad.buf)
      GAAW_FAIL(ctx, GAAW_ERR_STATE, "the gradient of %s is sharded over dp (ZeRO stage 2 or 3) and has no "
                "whole copy to read", name);
    GAAW_CHECK(gather_global(m, p, &p->grad, values));
  }
  GAAW_CHECK(share_read(m, e, values));
  return GAAW_SUCCESS;
}
