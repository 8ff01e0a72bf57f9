/* Inference (gaaw_model_predict) and the caller's own loss
 * (gaaw_model_forward_outputs, then gaaw_model_backward_from with its gradient). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "parallel/model_impl.h"

/* b with what predict does not need filled in (by the model kind: GPT targets all
 * ignored, MLP outputs zero), no loss weights. The filler arrays are returned in
 * *filler (free them). */
static gaaw_status_t predict_batch(gaaw_model_t m, const gaaw_batch_t *b, gaaw_batch_t *full, void **filler)
{
  gaaw_context_t ctx = m->ctx;
  *filler = NULL;
  GAAW_ARG_NOT_NULL(ctx, b);
  GAAW_ARG_CHECK(ctx, b->batch >= 1 && b->seq >= 0, "batch must be >= 1 (got %d) and seq >= 0 (got %d)", b->batch,
                 b->seq);
  *full = *b;
  full->weights = NULL; /* no loss */
  GAAW_CHECK(m->kind_ops->fill_targets(m, b, full, filler));
  return GAAW_SUCCESS;
}

/* pp > 1: the last stage's outputs go to the others of its pp group. */
static gaaw_status_t share_outputs(gaaw_model_t m, const gaaw_batch_t *b, float *out)
{
  gaaw_context_t ctx = m->ctx;
  if (m->pp_size == 1) return GAAW_SUCCESS;
  int64_t n = m->kind_ops->output_count(m, b);
  int last = gaaw_model_layer_rank(m, m->nlayers - 1);
  gaaw_tensor_t t;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &t));
  gaaw_status_t st = GAAW_SUCCESS;
  if (m->pp_rank == last) st = gaaw_buffer_write(ctx, t.buf, 0, out, (size_t)n * sizeof(float));
  if (st == GAAW_SUCCESS) st = gaaw_comm_broadcast(m->pp, &t, last);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, 0, out, (size_t)n * sizeof(float));
  gaaw_buffer_free(ctx, &t.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_predict(gaaw_model_t m, const gaaw_batch_t *b, float *outputs)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame f;
  gaaw_batch_t full;
  void *filler = NULL;
  gaaw_status_t st = gaaw_frame_init(m, &f);
  if (st == GAAW_SUCCESS && !outputs)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "outputs must not be NULL");
  if (st == GAAW_SUCCESS) st = gaaw_model_check_one_microbatch(m, b, "gaaw_model_predict");
  if (st == GAAW_SUCCESS && m->cp_size > 1)
    st = gaaw_error_raise(ctx, GAAW_ERR_UNSUPPORTED, __FILE__, __LINE__, __func__, "gaaw_model_predict at cp = %d: "
                          "the logits of a split sequence are not gathered yet; predict at cp = 1", m->cp_size);
  if (st == GAAW_SUCCESS) st = predict_batch(m, b, &full, &filler);
  if (st == GAAW_SUCCESS) st = gaaw_model_load_batch(m, &f, &full);
  st = gaaw_model_agree_batch(m, st, &full, 1);
  if (st == GAAW_SUCCESS) {
    f.inference = 1;
    int hi = m->kind_ops->inference_layers(m);
    st = m->pp_size > 1 ? gaaw_pipeline_forward_only(m, &f, hi) : gaaw_pass_forward(m, &f, 0, 0, 0, hi);
    if (st == GAAW_SUCCESS && gaaw_model_owns_layer(m, m->nlayers - 1)) st = m->kind_ops->read_outputs(m, &f, outputs);
    if (st == GAAW_SUCCESS) st = share_outputs(m, &full, outputs);
    if (st != GAAW_SUCCESS) st = gaaw_model_fail_together(m, st);
  }
  gaaw_frame_free(m, &f);
  free(filler);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t forward_outputs_local(gaaw_model_t m, const gaaw_batch_t *b, float *outputs, gaaw_batch_t *full,
                                           void **filler)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_CHECK(ctx, m->kind_ops->kind == GAAW_MODEL_MLP,
                 "gaaw_model_forward_outputs is for sequential models and MLPs (a GPT's loss is its own)");
  GAAW_ARG_NOT_NULL(ctx, outputs);
  if (m->pp_size > 1)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "gaaw_model_forward_outputs and gaaw_model_backward_from run at pp 1 only");
  GAAW_CHECK(gaaw_model_check_one_microbatch(m, b, "gaaw_model_forward_outputs"));
  GAAW_CHECK(predict_batch(m, b, full, filler));
  GAAW_CHECK(gaaw_model_load_batch(m, &m->frame, full));
  GAAW_CHECK(gaaw_model_check_pass(m, GAAW_PHASE_FORWARD, 1));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_forward_outputs(gaaw_model_t m, const gaaw_batch_t *b, float *outputs)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  gaaw_batch_t full = {0};
  void *filler = NULL;
  gaaw_frame_drop_forward(m, f);
  gaaw_frame_free_batch(m, f);
  gaaw_status_t st = forward_outputs_local(m, b, outputs, &full, &filler);
  st = gaaw_model_agree_batch(m, st, &full, 1);
  free(filler);
  if (st != GAAW_SUCCESS) {
    gaaw_frame_free_batch(m, f);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  /* every layer but the loss, keeping what backward needs */
  st = gaaw_pass_forward(m, f, 0, 0, 0, m->nlayers - 1);
  if (st == GAAW_SUCCESS) st = m->kind_ops->read_outputs(m, f, outputs);
  if (st != GAAW_SUCCESS) {
    gaaw_frame_drop_forward(m, f);
    return gaaw_error_trace(ctx, gaaw_model_fail_together(m, st), __FILE__, __LINE__, __func__);
  }
  f->have_forward = 1;
  f->outputs_only = 1;
  return GAAW_SUCCESS;
}

/* The local checks of d_outputs, then it goes up as the output gradient *dy. */
static gaaw_status_t backward_from_local(gaaw_model_t m, const float *d_outputs, gaaw_tensor_t *dy)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  GAAW_ARG_CHECK(ctx, m->kind_ops->kind == GAAW_MODEL_MLP, "gaaw_model_backward_from is for sequential models and MLPs");
  if (!f->have_forward)
    GAAW_FAIL(ctx, GAAW_ERR_STATE, "gaaw_model_backward_from needs a gaaw_model_forward_outputs (or forward) first");
  GAAW_ARG_NOT_NULL(ctx, d_outputs);
  int64_t n = (int64_t)f->batch * m->seq_outputs;
  for (int64_t i = 0; i < n; i++)
    GAAW_ARG_CHECK(ctx, isfinite(d_outputs[i]), "d_outputs[%lld] is %g; it must be finite", (long long)i,
                   (double)d_outputs[i]);
  GAAW_CHECK(gaaw_model_check_pass(m, GAAW_PHASE_BACKWARD, 1));
  if (gaaw_normalization_active(m)) { /* y = y' std + mean: dL/dy' = dL/dy std */
    float *d = malloc(sizeof(float) * (size_t)n);
    if (!d) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld gradients", (long long)n);
    memcpy(d, d_outputs, sizeof(float) * (size_t)n);
    gaaw_denormalize_outputs(m, f->batch, d, 1);
    gaaw_status_t st = gaaw_batch_upload_f32(m, f->batch, m->seq_outputs, d, dy);
    free(d);
    GAAW_CHECK(st);
  } else {
    GAAW_CHECK(gaaw_batch_upload_f32(m, f->batch, m->seq_outputs, d_outputs, dy));
  }
  float seed = gaaw_model_seed_scale(m);
  if (seed != 1.0f) GAAW_CHECK(gaaw_scale(ctx, dy, seed)); /* as the loss layer's would be */
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_backward_from(gaaw_model_t m, const float *d_outputs)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  gaaw_tensor_t dy = {0};
  gaaw_status_t st = backward_from_local(m, d_outputs, &dy);
  gaaw_field digest;
  int nfields = 0;
  if (st == GAAW_SUCCESS) {
    digest = GAAW_FIELD_DIGEST("d_outputs", gaaw_digest(d_outputs, sizeof(float) * (size_t)f->batch * m->seq_outputs));
    nfields = 1;
  }
  if (m->tp_size > 1) st = gaaw_agree(m->tp, st, "the output gradient of a tp group", &digest, nfields);
  gaaw_comm_t group = gaaw_model_work_group(m);
  if (group != m->tp) st = gaaw_agree(group, st, "gaaw_model_backward_from", NULL, 0);
  if (st == GAAW_SUCCESS) {
    st = gaaw_pass_backward(m, f, 0, 0, 0, m->nlayers - 1, &dy, NULL);
    if (st != GAAW_SUCCESS) st = gaaw_model_fail_together(m, st);
  }
  gaaw_act_free(m, &dy);
  gaaw_frame_drop_forward(m, f); /* as gaaw_model_backward: one backward per forward */
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
