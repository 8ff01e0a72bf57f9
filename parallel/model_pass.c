/* The pass driver: a microbatch's forward, backward or (split backward) weight
 * pass over a range of layers, inside the data-parallel hooks; full
 * recomputation, sequence parallelism's partial gradients and the layer times
 * happen here. Both drivers of a step, the single-stage API (model_step.c,
 * model_infer.c) and the pipeline executor (pipeline.c), run layers only through
 * gaaw_pass_forward, gaaw_pass_backward and gaaw_pass_weight. */
#include "backends/runtime/trace.h"
#include "parallel/model_impl.h"
#include "parallel/tp.h"

double gaaw_pass_clock(void)
{
  return gaaw_clock_seconds(); /* the timeline's clock too */
}

/* Layer i's span on the timeline's "layers" row. */
static void trace_layer(gaaw_model_t m, int i, const char *what, double t0)
{
  if (gaaw_trace_on(m->ctx))
    gaaw_trace_span(m->ctx, gaaw_trace_lane(m->ctx, "layers"), what, t0, "\"layer\":%d,\"kind\":\"%s\"", i,
                    m->layers[i].ops->kind);
}

/* Full recomputation of layer l: nothing saved past its forward. */
static int recomputes(gaaw_model_t m, const gaaw_layer *l)
{
  return m->recompute == GAAW_RECOMPUTE_FULL && l->ops->recomputable;
}

/* Forward of frame f over layers [lo, hi). */
static gaaw_status_t forward_range(gaaw_model_t m, gaaw_frame *f, int lo, int hi)
{
  /* the first layer reads the batch itself; acts[0] stays empty */
  for (int i = lo; i < hi; i++) {
    gaaw_layer *l = &m->layers[i];
    double t0 = gaaw_pass_clock();
    GAAW_CHECK_CTX(m->ctx, gaaw_model_before_layer(m, i, GAAW_PHASE_FORWARD));
    GAAW_CHECK_CTX(m->ctx, l->ops->forward(m, l, f, &f->acts[i], &f->acts[i + 1]));
    /* inference keeps nothing but the last layer's (what predict returns); full
     * recomputation keeps only the input acts[i] */
    int inference = f->inference && i + 1 < m->nlayers;
    if (inference || recomputes(m, l)) gaaw_layer_release(m, f, l);
    if (inference && !l->keeps_input) gaaw_act_free(m, &f->acts[i]);
    GAAW_CHECK_CTX(m->ctx, gaaw_model_after_layer(m, i, GAAW_PHASE_FORWARD));
    l->forward_seconds += gaaw_pass_clock() - t0; /* with the hooks: ZeRO 3's gathers count */
    trace_layer(m, i, "forward", t0);
  }
  return GAAW_SUCCESS;
}

/* Copies layer i's partial gradients into packed (to_packed) or back from it;
 * returns their element count in *count. */
static gaaw_status_t copy_partial_grads(gaaw_model_t m, int layer, gaaw_tensor_t *packed, int to_packed,
                                        int64_t *count)
{
  gaaw_context_t ctx = m->ctx;
  int64_t at = 0;
  for (int k = 0; k < m->params.count; k++) {
    gaaw_param *p = &m->params.items[k];
    if (!p->grad_is_partial || p->owner != layer) continue;
    if (packed) {
      gaaw_tensor_t slot = *packed, grad = gaaw_reshape(&p->grad, 1, &p->local_numel);
      slot.shape[0] = p->local_numel;
      slot.offset += (size_t)at * gaaw_dtype_size(m->dtype);
      GAAW_CHECK(to_packed ? gaaw_cast(ctx, &grad, &slot) : gaaw_cast(ctx, &slot, &grad));
    }
    at += p->local_numel;
  }
  *count = at;
  return GAAW_SUCCESS;
}

int64_t gaaw_pass_partial_numel(gaaw_model_t m, int layer)
{
  int64_t total = 0;
  copy_partial_grads(m, layer, NULL, 0, &total); /* counting only: cannot fail */
  return total;
}

/* Replicated parameters that saw only this rank's tokens (sequence parallelism)
 * have partial gradients: what this microbatch adds must be summed over tp, and
 * only that (the gradient may already hold earlier microbatches' sums). So before
 * the layer's backward their accumulated gradients move aside into *held (and the
 * gradients are zeroed); after it the new part is all-reduced over tp in one packed
 * copy and the held sums added back (before a data-parallel engine reduces them).
 * held stays empty when the layer has none or tp is 1. */
static gaaw_status_t hold_partial_grads(gaaw_model_t m, int layer, gaaw_tensor_t *held)
{
  gaaw_context_t ctx = m->ctx;
  int64_t total = gaaw_pass_partial_numel(m, layer);
  if (total == 0 || m->tp_size == 1) return GAAW_SUCCESS;
  gaaw_tensor_t zeros = {0};
  GAAW_CHECK(gaaw_tensor_alloc(ctx, m->dtype, 1, &total, GAAW_MEM_COMMUNICATION, held));
  gaaw_status_t st = copy_partial_grads(m, layer, held, 1, &total);
  if (st == GAAW_SUCCESS) st = gaaw_tensor_alloc(ctx, m->dtype, 1, &total, GAAW_MEM_WORKSPACE, &zeros);
  if (st == GAAW_SUCCESS) st = gaaw_fill(ctx, &zeros, 0.0f);
  if (st == GAAW_SUCCESS) st = copy_partial_grads(m, layer, &zeros, 0, &total);
  gaaw_buffer_free(ctx, &zeros.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t reduce_partial_grads(gaaw_model_t m, int layer, const gaaw_tensor_t *held)
{
  gaaw_context_t ctx = m->ctx;
  int64_t total;
  if (!held->buf) return GAAW_SUCCESS;
  GAAW_CHECK(copy_partial_grads(m, layer, NULL, 0, &total));
  gaaw_tensor_t packed;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, m->dtype, 1, &total, GAAW_MEM_COMMUNICATION, &packed));
  gaaw_status_t st = copy_partial_grads(m, layer, &packed, 1, &total);
  if (st == GAAW_SUCCESS) st = gaaw_tp_allreduce(m->tp, &packed);
  if (st == GAAW_SUCCESS) st = gaaw_axpy(ctx, 1.0f, held, &packed);
  if (st == GAAW_SUCCESS) st = copy_partial_grads(m, layer, &packed, 0, &total);
  gaaw_buffer_free(ctx, &packed.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Full recomputation: layer l's forward again from its kept input, for what it
 * saves (its output is the next layer's input, which backward has freed already). */
static gaaw_status_t recompute_forward(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l)
{
  gaaw_tensor_t y = {0};
  double t0 = gaaw_pass_clock();
  gaaw_status_t st = l->ops->forward(m, l, f, gaaw_layer_input(f, l), &y);
  gaaw_act_free(m, &y);
  trace_layer(m, l->index, "recompute", t0);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Backward of layer i in frame f: dy in (freed), dx out; with f->defer_weights
 * its linears' weight gradients wait in f for gaaw_pass_weight. */
static gaaw_status_t layer_backward(gaaw_model_t m, gaaw_frame *f, int i, gaaw_tensor_t *dy, gaaw_tensor_t *dx)
{
  gaaw_layer *l = &m->layers[i];
  gaaw_tensor_t held = {0};
  gaaw_phase phase = f->defer_weights ? GAAW_PHASE_BACKWARD_INPUT : GAAW_PHASE_BACKWARD;
  gaaw_status_t st = gaaw_model_before_layer(m, i, phase);
  if (st == GAAW_SUCCESS && recomputes(m, l)) st = recompute_forward(m, f, l);
  if (st == GAAW_SUCCESS) st = hold_partial_grads(m, i, &held);
  if (st == GAAW_SUCCESS) st = l->ops->backward(m, l, f, dy, i > 0 ? dx : NULL);
  gaaw_act_free(m, dy);
  gaaw_layer_release(m, f, l);
  gaaw_act_free(m, &f->acts[i + 1]);
  if (st == GAAW_SUCCESS) st = reduce_partial_grads(m, i, &held);
  gaaw_buffer_free(m->ctx, &held.buf);
  if (st == GAAW_SUCCESS) st = gaaw_model_after_layer(m, i, phase);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Backward of frame f over layers [lo, hi), from dy (taken over) into *dx. */
static gaaw_status_t backward_range(gaaw_model_t m, gaaw_frame *f, int lo, int hi, gaaw_tensor_t *dy,
                                    gaaw_tensor_t *dx)
{
  gaaw_tensor_t grad = *dy;
  *dy = (gaaw_tensor_t){0}; /* taken over: freed by the first layer's backward */
  for (int i = hi - 1; i >= lo; i--) {
    gaaw_tensor_t below = {0};
    double t0 = gaaw_pass_clock();
    gaaw_status_t st = layer_backward(m, f, i, &grad, &below);
    m->layers[i].backward_seconds += gaaw_pass_clock() - t0;
    trace_layer(m, i, f->defer_weights ? "backward input" : "backward", t0);
    if (st != GAAW_SUCCESS) {
      gaaw_act_free(m, &below);
      return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
    }
    grad = below;
  }
  if (dx)
    *dx = grad;
  else
    gaaw_act_free(m, &grad);
  return GAAW_SUCCESS;
}

/* The weight gradients layers [lo, hi) deferred in frame f, in backward order. */
static gaaw_status_t weight_range(gaaw_model_t m, gaaw_frame *f, int lo, int hi)
{
  for (int i = hi - 1; i >= lo; i--) {
    gaaw_layer *l = &m->layers[i];
    double t0 = gaaw_pass_clock();
    gaaw_status_t st = gaaw_model_before_layer(m, i, GAAW_PHASE_WEIGHT);
    if (st == GAAW_SUCCESS) st = gaaw_layer_run_deferred(m, f, l);
    gaaw_layer_drop_deferred(m, f, l); /* when before_layer failed */
    if (st == GAAW_SUCCESS) st = gaaw_model_after_layer(m, i, GAAW_PHASE_WEIGHT);
    l->backward_seconds += gaaw_pass_clock() - t0;
    trace_layer(m, i, "weight", t0);
    if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_pass_forward(gaaw_model_t m, gaaw_frame *f, int mb, int chunk, int lo, int hi)
{
  gaaw_context_t ctx = m->ctx;
  if (f->inference) { /* keeps nothing for a backward: no pass for the hooks to see */
    GAAW_CHECK(forward_range(m, f, lo, hi));
    return GAAW_SUCCESS;
  }
  GAAW_CHECK(gaaw_model_begin_pass(m, GAAW_PHASE_FORWARD, mb, chunk));
  GAAW_CHECK(forward_range(m, f, lo, hi));
  GAAW_CHECK(gaaw_model_end_pass(m, GAAW_PHASE_FORWARD, mb, chunk));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_pass_backward(gaaw_model_t m, gaaw_frame *f, int mb, int chunk, int lo, int hi,
                                 gaaw_tensor_t *dy, gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_phase phase = f->defer_weights ? GAAW_PHASE_BACKWARD_INPUT : GAAW_PHASE_BACKWARD;
  GAAW_CHECK(gaaw_model_begin_pass(m, phase, mb, chunk));
  GAAW_CHECK(backward_range(m, f, lo, hi, dy, dx));
  GAAW_CHECK(gaaw_model_end_pass(m, phase, mb, chunk));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_pass_weight(gaaw_model_t m, gaaw_frame *f, int mb, int chunk, int lo, int hi)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_CHECK(gaaw_model_begin_pass(m, GAAW_PHASE_WEIGHT, mb, chunk));
  GAAW_CHECK(weight_range(m, f, lo, hi));
  GAAW_CHECK(gaaw_model_end_pass(m, GAAW_PHASE_WEIGHT, mb, chunk));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_share_loss(gaaw_model_t m, float *loss, double aux)
{
  gaaw_context_t ctx = m->ctx;
  if (m->pp_size == 1 && m->cp_size == 1) {
    if (m->moe_layers) *loss = (float)(*loss + aux);
    return GAAW_SUCCESS;
  }
  /* (the last stage's loss, this rank's aux losses): the aux losses are summed over
   * the stages, each holding its own layers' */
  float v[2] = {gaaw_model_owns_layer(m, m->nlayers - 1) ? *loss : 0.0f, (float)aux};
  gaaw_tensor_t t, first;
  int64_t n = m->moe_layers ? 2 : 1;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_COMMUNICATION, &t));
  first = gaaw_rows_view(&t, 0, 1);
  gaaw_status_t st = gaaw_buffer_write(ctx, t.buf, 0, v, sizeof(float) * (size_t)n);
  if (st == GAAW_SUCCESS && m->pp_size > 1)
    st = m->moe_layers ? gaaw_comm_allreduce(m->pp, &t, &t, GAAW_SUM)
                       : gaaw_comm_broadcast(m->pp, &first, gaaw_model_layer_rank(m, m->nlayers - 1));
  if (st == GAAW_SUCCESS && m->cp_size > 1) st = gaaw_comm_allreduce(m->cp, &first, &first, GAAW_SUM);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, 0, v, sizeof(float) * (size_t)n);
  gaaw_buffer_free(ctx, &t.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  *loss = m->moe_layers ? v[0] + v[1] : v[0];
  return GAAW_SUCCESS;
}
