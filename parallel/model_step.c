/* The training API of one microbatch (gaaw_model_forward, then gaaw_model_backward,
 * on the model's own frame) and of a step (gaaw_model_forward_backward, which runs
 * the pipeline executor, pp 1 included). */
#include "backends/agree.h"
#include "parallel/model_impl.h"

/* pp > 1: the loss of frame f's microbatch through the stages, keeping nothing
 * (a pipeline's backward runs in gaaw_model_forward_backward), on every rank. */
static gaaw_status_t pipeline_loss(gaaw_model_t m, gaaw_frame *f)
{
  f->inference = 1;
  GAAW_CHECK_CTX(m->ctx, gaaw_pipeline_forward_only(m, f, m->nlayers));
  GAAW_CHECK_CTX(m->ctx, gaaw_model_share_loss(m, &f->loss, gaaw_moe_step_record(m, f, 1)));
  return GAAW_SUCCESS;
}

/* Loads the batch and agrees on it, then runs forward (at pp 1 keeping what
 * gaaw_model_backward needs). */
static gaaw_status_t forward_agreed(gaaw_model_t m, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  gaaw_frame_drop_forward(m, f);
  gaaw_frame_free_batch(m, f);
  gaaw_status_t st = gaaw_model_check_one_microbatch(m, b, "gaaw_model_forward");
  if (st == GAAW_SUCCESS) st = gaaw_model_load_batch(m, f, b);
  if (st == GAAW_SUCCESS) st = gaaw_model_check_pass(m, GAAW_PHASE_FORWARD, 1);
  st = gaaw_model_agree_batch(m, st, b, 1);
  if (st != GAAW_SUCCESS) {
    gaaw_frame_free_batch(m, f);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  st = m->pp_size > 1 ? pipeline_loss(m, f) : gaaw_pass_forward(m, f, 0, 0, 0, m->nlayers);
  if (st == GAAW_SUCCESS && m->pp_size == 1) /* over cp */
    st = gaaw_model_share_loss(m, &f->loss, gaaw_moe_step_record(m, f, 1));
  if (st != GAAW_SUCCESS || m->pp_size > 1) gaaw_frame_drop_forward(m, f);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, gaaw_model_fail_together(m, st), __FILE__, __LINE__, __func__);
  f->have_forward = m->pp_size == 1;
  f->outputs_only = 0;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_forward(gaaw_model_t m, const gaaw_batch_t *b, float *loss)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_CHECK_CTX(m->ctx, forward_agreed(m, b));
  if (loss) *loss = m->frame.loss;
  return GAAW_SUCCESS;
}

/* Backward of the frame's forward, once every rank has agreed to run it. */
static gaaw_status_t backward_agreed(gaaw_model_t m)
{
  gaaw_tensor_t dy = {0}; /* the head starts from the loss */
  gaaw_status_t st = gaaw_pass_backward(m, &m->frame, 0, 0, 0, m->nlayers, &dy, NULL);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, gaaw_model_fail_together(m, st), __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_backward(gaaw_model_t m)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  gaaw_status_t st = f->have_forward ? GAAW_SUCCESS
                                     : gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__,
                                                        "gaaw_model_backward needs a gaaw_model_forward first");
  if (st == GAAW_SUCCESS && f->outputs_only)
    st = gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__,
                          "the forward was gaaw_model_forward_outputs (no loss): go back with gaaw_model_backward_from");
  if (st == GAAW_SUCCESS) st = gaaw_model_check_pass(m, GAAW_PHASE_BACKWARD, 1);
  st = gaaw_agree(gaaw_model_work_group(m), st, "gaaw_model_backward", NULL, 0);
  if (st == GAAW_SUCCESS) st = backward_agreed(m);
  gaaw_frame_drop_forward(m, f);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_forward_backward(gaaw_model_t m, const gaaw_batch_t *b, float *loss)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_frame_drop_forward(m, &m->frame); /* a forward held for gaaw_model_backward is given up */
  gaaw_frame_free_batch(m, &m->frame);
  GAAW_CHECK_CTX(m->ctx, gaaw_pipeline_forward_backward(m, b, loss));
  return GAAW_SUCCESS;
}
