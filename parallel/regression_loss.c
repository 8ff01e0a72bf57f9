/* The regression loss layer of MLPs and sequential models: MSE, L1 or Huber of the
 * model's output y against the batch's outputs t, weighted by the batch's weights
 * w (all 1 without):
 *   loss = sum_i w_i l(y_i - t_i) / sum_i w_i
 * The elementwise kernel gives w l and w l' in one pass; the loss is the column
 * sums of w l (a fixed-order kernel) added in double on the host. Its output y is
 * whole on every rank of the tp group, so every rank computes the same loss.
 * Shapes (N = batch, C = outputs): y, t, w: (N, C). */
#include <stdlib.h>

#include "parallel/model_impl.h"

enum { RL_GRAD }; /* saved: w l'(y - t), (N, C) in the compute dtype */

static gaaw_status_t loss_sum(gaaw_context_t ctx, const gaaw_tensor_t *elems, double *total)
{
  int64_t C = elems->shape[elems->ndim - 1];
  gaaw_tensor_t sums;
  float *host = malloc(sizeof(float) * (size_t)C);
  if (!host) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld loss sums", (long long)C);
  gaaw_status_t st = gaaw_tensor_alloc(ctx, GAAW_F32, 1, &C, GAAW_MEM_WORKSPACE, &sums);
  if (st == GAAW_SUCCESS) st = gaaw_fill(ctx, &sums, 0.0f);
  if (st == GAAW_SUCCESS) st = gaaw_bias_backward(ctx, elems, &sums); /* sums[c] = sum_n elems[n][c] */
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, sums.buf, sums.offset, host, sizeof(float) * (size_t)C);
  *total = 0;
  for (int64_t c = 0; st == GAAW_SUCCESS && c < C; c++) *total += host[c];
  if (sums.buf) gaaw_buffer_free(ctx, &sums.buf);
  free(host);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t regression_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *y,
                                        gaaw_tensor_t *out)
{
  (void)out; /* the loss layer ends the model: its result is f->loss */
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *grad, elems = {0};
  gaaw_loss_t kind = (gaaw_loss_t)(l->ops - gaaw_regression_loss_ops);
  GAAW_CHECK(gaaw_layer_alloc(m, f, l, RL_GRAD, 0, y->ndim, y->shape, &grad));
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, y->ndim, y->shape, GAAW_MEM_WORKSPACE, &elems));
  double total = 0;
  gaaw_status_t st = gaaw_regression_loss(ctx, kind, l->loss_delta, y, &f->outputs, f->weights.buf ? &f->weights : NULL,
                                          &elems, grad);
  if (st == GAAW_SUCCESS) st = loss_sum(ctx, &elems, &total);
  gaaw_buffer_free(ctx, &elems.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  f->loss = (float)(total / f->weight_sum);
  return GAAW_SUCCESS;
}

/* dy = w l'(y - t) / sum(w), times the loss scale */
static gaaw_status_t regression_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dout,
                                         gaaw_tensor_t *dy)
{
  (void)dout;
  gaaw_context_t ctx = m->ctx;
  const gaaw_tensor_t *grad = &gaaw_layer_saved(f, l)[RL_GRAD];
  GAAW_CHECK(gaaw_act_zeros(m, grad->ndim, grad->shape, dy));
  GAAW_CHECK(gaaw_axpy(ctx, (float)(gaaw_model_seed_scale(m) / f->weight_sum), grad, dy));
  return GAAW_SUCCESS;
}

const gaaw_layer_ops gaaw_regression_loss_ops[GAAW_LOSS_COUNT] = {
  [GAAW_LOSS_MSE] = {"mean squared error", regression_forward, regression_backward},
  [GAAW_LOSS_L1] = {"L1 loss", regression_forward, regression_backward},
  [GAAW_LOSS_HUBER] = {"Huber loss", regression_forward, regression_backward},
};
