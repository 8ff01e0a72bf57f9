/* One optimizer step: reduce the gradients over dp, measure them (global norm,
 * overflow), update this rank's shard, and gather the parameters back. */
#include <math.h>

#include "backends/agree.h"
#include "backends/runtime/trace.h"
#include "zero/zero_impl.h"

gaaw_status_t gaaw_zero_gather_params(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  if (!opt->is.shard_state || opt->is.shard_params) return GAAW_SUCCESS;
  for (int b = 0; b < opt->nbuckets; b++) {
    const zero_bucket *k = &opt->buckets[b];
    if (gaaw_zero_size(opt, k) == 1) continue;
    gaaw_tensor_t whole = gaaw_params_span(&opt->model->params, 0, k->lo, k->len);
    gaaw_tensor_t mine = gaaw_zero_param_piece(opt, b);
    GAAW_CHECK(gaaw_comm_allgather(gaaw_zero_comm(opt, k), &mine, &whole));
  }
  return GAAW_SUCCESS;
}

/* Sum of squares of the gradients this rank counts (see zero_norm_segment), in
 * units of the raw (summed, loss-scaled) gradients. Stage 0's whole buckets are
 * held alike by every rank of their group, so each counts a 1 / size share. */
static gaaw_status_t local_sum_squares(gaaw_optimizer_t opt, double *total)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_tensor_t out;
  int64_t one = 1;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &one, GAAW_MEM_WORKSPACE, &out));
  gaaw_status_t st = GAAW_SUCCESS;
  *total = 0;
  for (int s = 0; s < opt->nsegments && st == GAAW_SUCCESS; s++) {
    const zero_norm_segment *seg = &opt->segments[s];
    gaaw_tensor_t piece = gaaw_zero_grad_piece(opt, seg->bucket), part = piece;
    part.offset += (size_t)seg->at * gaaw_dtype_size(opt->dtype);
    part.shape[0] = seg->len;
    float v = 0;
    st = gaaw_sum_squares(ctx, &part, &out);
    if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, out.buf, out.offset, &v, sizeof v);
    *total += opt->is.shard_state ? (double)v : (double)v / gaaw_zero_size(opt, &opt->buckets[seg->bucket]);
  }
  gaaw_buffer_free(ctx, &out.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* The global sum over the world (every rank the same number). */
static gaaw_status_t global_sum_squares(gaaw_optimizer_t opt, double *total)
{
  gaaw_context_t ctx = opt->ctx;
  double mine = 0;
  GAAW_CHECK(local_sum_squares(opt, &mine));
  gaaw_tensor_t t;
  int64_t one = 1;
  float v = (float)mine;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &one, GAAW_MEM_WORKSPACE, &t));
  gaaw_status_t st = gaaw_buffer_write(ctx, t.buf, 0, &v, sizeof v);
  if (st == GAAW_SUCCESS) st = gaaw_comm_allreduce(opt->world, &t, &t, GAAW_SUM);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, 0, &v, sizeof v);
  gaaw_buffer_free(ctx, &t.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  *total = (double)v;
  return GAAW_SUCCESS;
}

/* Linear warmup, then cosine decay to min_lr at decay_steps. step counts from 1. */
static float schedule(const gaaw_optimizer_config_t *c, int64_t step)
{
  if (c->warmup_steps > 0 && step <= c->warmup_steps) return c->lr * (float)step / (float)c->warmup_steps;
  if (c->decay_steps <= c->warmup_steps) return c->lr;
  double progress = (double)(step - c->warmup_steps) / (double)(c->decay_steps - c->warmup_steps);
  if (progress > 1) progress = 1;
  return c->min_lr + (float)(0.5 * (c->lr - c->min_lr) * (1.0 + cos(M_PI * progress)));
}

/* Dynamic loss scaling (f16): halve at the `hysteresis`-th overflow since the scale
 * last changed (clean steps between them do not reset the count), double after
 * `loss_scale_window` clean steps in a row. */
static void update_loss_scale(gaaw_optimizer_t opt, int overflow)
{
  if (opt->dtype != GAAW_F16) return;
  if (overflow) {
    opt->good_steps = 0;
    if (++opt->overflows_since_change >= opt->cfg.hysteresis) {
      opt->overflows_since_change = 0;
      if (opt->loss_scale > 1) opt->loss_scale /= 2;
    }
  } else if (++opt->good_steps >= opt->cfg.loss_scale_window) {
    opt->good_steps = 0;
    opt->overflows_since_change = 0;
    opt->loss_scale *= 2;
  }
}

/* Updates every piece of the shard where its state lives; grad_scale turns raw
 * gradients into the mean gradient (and clips). A store whose updates can fail on
 * one rank alone (I/O) has the ranks agree on the outcome, so that a failure is
 * every rank's error before the all-gather rather than a wait in it. */
static gaaw_status_t update_shard(gaaw_optimizer_t opt, float grad_scale)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_cpu_update_args args = {opt->cfg.kind,
                               {opt->lr, opt->cfg.beta1, opt->cfg.beta2, opt->cfg.eps, opt->cfg.weight_decay,
                                grad_scale, opt->updates},
                               opt->cfg.momentum};
  gaaw_status_t st = GAAW_SUCCESS;
  for (int b = 0; b < opt->nbuckets && st == GAAW_SUCCESS; b++) st = opt->store->update(opt, b, &args);
  if (opt->store->finish) {
    gaaw_status_t done = opt->store->finish(opt);
    if (st == GAAW_SUCCESS) st = done;
  }
  if (opt->store->local_failures) st = gaaw_agree_world(ctx, st, "the optimizer's update", NULL, 0);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_optimizer_step(gaaw_optimizer_t opt)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  gaaw_context_t ctx = opt->ctx;
  double t0 = gaaw_clock_seconds();
  /* a step without gradients would still decay and move the weights */
  gaaw_status_t ready = opt->backward_passes > 0
                          ? GAAW_SUCCESS
                          : gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__,
                                             "no backward pass since the last step (or gaaw_model_zero_grad): "
                                             "there are no gradients to step with");
  gaaw_field passes = GAAW_FIELD_INT("backward passes since the last step", opt->backward_passes);
  GAAW_CHECK(gaaw_agree_world(ctx, ready, "gaaw_optimizer_step", &passes, ready == GAAW_SUCCESS));
  if (opt->ckpt_commit) GAAW_CHECK(opt->ckpt_commit(opt)); /* a pending asynchronous save */
  GAAW_CHECK(gaaw_zero_finish_reductions(opt));
  GAAW_CHECK(gaaw_zero_release_gathered(opt));
  double sumsq = 0;
  GAAW_CHECK(global_sum_squares(opt, &sumsq));
  /* the mean gradient over dp replicas, microbatches and the loss scale (the cp ranks
   * of a replica each hold their tokens' share of its sum) */
  double raw_to_mean = 1.0 / ((double)opt->replicas * opt->cfg.accumulation * opt->loss_scale);
  double norm = sqrt(sumsq) * raw_to_mean;
  int overflow = !isfinite(norm);
  opt->steps++;
  opt->grad_norm = (float)norm;
  opt->skipped = overflow;
  if (!overflow) {
    double scale = raw_to_mean;
    if (opt->cfg.clip_norm > 0 && norm > opt->cfg.clip_norm) scale *= opt->cfg.clip_norm / (norm + 1e-6);
    opt->updates++;
    opt->lr = schedule(&opt->cfg, opt->updates);
    GAAW_CHECK(update_shard(opt, (float)scale));
    GAAW_CHECK(gaaw_zero_gather_params(opt));
  }
  update_loss_scale(opt, overflow);
  opt->model->loss_scale = opt->loss_scale;
  GAAW_CHECK(gaaw_model_zero_grad(opt->model)); /* the shard's too (zero/hooks.c) */
  uint64_t now = gaaw_zero_comm_bytes(opt);
  opt->last_comm = now - opt->comm_mark;
  opt->comm_mark = now;
  if (gaaw_trace_on(ctx))
    gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "optimizer"), "optimizer step", t0, "\"step\":%lld,\"skipped\":%d",
                    (long long)opt->steps, opt->skipped);
  return GAAW_SUCCESS;
}
