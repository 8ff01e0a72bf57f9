/* What layers allocate and view: activations in the compute dtype, the slots a
 * layer saves in a microbatch's frame for its backward, a call's scratch
 * temporaries, and views of parameters and tensors. Not collective. */
#include <stdlib.h>

#include "parallel/model_impl.h"

gaaw_status_t gaaw_act_alloc(gaaw_model_t m, int ndim, const int64_t *shape, gaaw_tensor_t *t)
{
  return gaaw_tensor_alloc(m->ctx, m->dtype, ndim, shape, GAAW_MEM_ACTIVATIONS, t);
}

gaaw_status_t gaaw_act_zeros(gaaw_model_t m, int ndim, const int64_t *shape, gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_act_alloc(m, ndim, shape, t));
  GAAW_CHECK(gaaw_fill(ctx, t, 0.0f));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_act_copy(gaaw_model_t m, const gaaw_tensor_t *x, gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_act_alloc(m, x->ndim, x->shape, t));
  GAAW_CHECK(gaaw_cast(ctx, x, t));
  return GAAW_SUCCESS;
}

void gaaw_act_free(gaaw_model_t m, gaaw_tensor_t *t)
{
  if (t->buf) gaaw_buffer_free(m->ctx, &t->buf);
}

/* Slot `slot` of what layer l keeps in frame f, freed and ready to be reused. */
static gaaw_status_t saved_slot(gaaw_model_t m, gaaw_frame *f, const gaaw_layer *l, int slot, gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  if (slot < 0 || slot >= GAAW_LAYER_MAX_SAVED)
    GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "layer %d (%s): saved slot %d", l->index, l->ops->kind, slot);
  gaaw_saved *sv = &f->saved[l->index];
  gaaw_act_free(m, &sv->t[slot]);
  if (slot >= sv->n) sv->n = slot + 1;
  *t = &sv->t[slot];
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layer_alloc(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l, int slot, int zero, int ndim,
                               const int64_t *shape, gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(saved_slot(m, f, l, slot, t));
  GAAW_CHECK(zero ? gaaw_act_zeros(m, ndim, shape, *t) : gaaw_act_alloc(m, ndim, shape, *t));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layer_alloc_as(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l, int slot, gaaw_dtype_t dtype, int ndim,
                                  const int64_t *shape, gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(saved_slot(m, f, l, slot, t));
  GAAW_CHECK(gaaw_tensor_alloc(ctx, dtype, ndim, shape, GAAW_MEM_ACTIVATIONS, *t));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layer_alloc_stat(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l, int slot, int64_t n,
                                    gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_layer_alloc_as(m, f, l, slot, GAAW_F32, 1, &n, t));
  return GAAW_SUCCESS;
}

gaaw_tensor_t *gaaw_layer_saved(gaaw_frame *f, const gaaw_layer *l)
{
  return f->saved[l->index].t;
}

const gaaw_tensor_t *gaaw_layer_input(const gaaw_frame *f, const gaaw_layer *l)
{
  return &f->acts[l->index];
}

gaaw_status_t gaaw_scratch_alloc(gaaw_model_t m, gaaw_scratch *s, int zero, int ndim, const int64_t *shape,
                                 gaaw_tensor_t **t)
{
  gaaw_context_t ctx = m->ctx;
  if (s->n == GAAW_SCRATCH_MAX) GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "more than %d temporaries", GAAW_SCRATCH_MAX);
  gaaw_tensor_t *x = &s->t[s->n];
  GAAW_CHECK(zero ? gaaw_act_zeros(m, ndim, shape, x) : gaaw_act_alloc(m, ndim, shape, x));
  s->n++;
  *t = x;
  return GAAW_SUCCESS;
}

void gaaw_scratch_free(gaaw_model_t m, gaaw_scratch *s)
{
  for (int i = 0; i < s->n; i++) gaaw_act_free(m, &s->t[i]);
  s->n = 0;
}

void gaaw_layer_release(gaaw_model_t m, gaaw_frame *f, const gaaw_layer *l)
{
  gaaw_saved *sv = &f->saved[l->index];
  for (int i = 0; i < sv->n; i++) gaaw_act_free(m, &sv->t[i]);
  sv->n = 0;
}

gaaw_tensor_t *gaaw_layer_param(gaaw_model_t m, gaaw_layer *l, int k)
{
  return &m->params.items[l->params[k]].value;
}

gaaw_tensor_t *gaaw_layer_grad(gaaw_model_t m, gaaw_layer *l, int k)
{
  return &m->params.items[l->params[k]].grad;
}

gaaw_tensor_t gaaw_rows_view(const gaaw_tensor_t *t, int64_t row0, int64_t rows)
{
  gaaw_tensor_t v = *t;
  int64_t row_elems = gaaw_tensor_numel(t) / (t->shape[0] ? t->shape[0] : 1);
  v.offset += (size_t)(row0 * row_elems) * gaaw_dtype_size(t->dtype);
  v.shape[0] = rows;
  return v;
}

gaaw_tensor_t gaaw_reshape(const gaaw_tensor_t *t, int ndim, const int64_t *shape)
{
  gaaw_tensor_t v = *t;
  v.ndim = ndim;
  for (int d = 0; d < GAAW_MAX_DIMS; d++) v.shape[d] = d < ndim ? shape[d] : 0;
  return v;
}
