/* The model hooks through which ZeRO moves buckets while forward and backward run:
 *   - gradients: each bucket's reduction over dp is started as soon as backward
 *     completes the bucket (stages 0 and 1 on the step's last microbatch; stage
 *     2 on every microbatch into the shard, or in a pipeline once after the
 *     chunk's last microbatch; stage 3 on every microbatch), so that on a backend with a
 *     communication stream it runs while backward goes on below;
 *   - stage 3 parameters: a layer's buckets are all-gathered (from the shard,
 *     wherever offload_params keeps it: zero/param_shard.c) before it runs, the
 *     next layer's are started one layer ahead (prefetch), and each is freed after
 *     its last use in the pass (with zero_keep_gathered, at the optimizer step).
 * Started collectives are waited for before their memory is read, reused or freed;
 * on the MPI communicator they run at that wait (backends/comm_request.c). */
#include "zero/zero_impl.h"

/* ---------------------------------------------------------------- stage 3: parameters */

/* Points the views of bucket b's parameters (or gradients) at buf (NULL: unbound). */
static void bind_bucket(gaaw_optimizer_t opt, int b, int grads, gaaw_buffer_t buf)
{
  gaaw_model_t m = opt->model;
  const zero_bucket *k = &opt->buckets[b];
  for (int i = 0; i < m->params.count; i++) {
    gaaw_param *p = &m->params.items[i];
    if (gaaw_zero_bucket_of_param(opt, p) == b) gaaw_param_bind(p, grads, buf, buf ? p->offset - k->lo : 0, opt->dtype);
  }
}

/* Starts gathering bucket b's parameters from the dp shards, in place in a
 * whole-bucket buffer, and binds the parameter views to it. Returns 1 in *started
 * when it was neither resident nor on its way. */
static gaaw_status_t start_gather(gaaw_optimizer_t opt, int b, int *started)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  *started = 0;
  if (k->whole_params) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, (size_t)k->len * gaaw_dtype_size(opt->dtype), GAAW_MEM_PARAMS, &k->whole_params));
  gaaw_tensor_t whole = gaaw_zero_view(k->whole_params, opt->dtype, 0, k->len);
  gaaw_tensor_t mine = gaaw_zero_view(k->whole_params, opt->dtype, gaaw_zero_piece_at(opt, k), k->piece);
  gaaw_status_t st = gaaw_zero_shard_to_device(opt, b, &mine);
  if (st == GAAW_SUCCESS) st = gaaw_comm_allgather_start(gaaw_zero_comm(opt, k), &mine, &whole, &k->gather);
  if (st != GAAW_SUCCESS) { /* not resident after all: the next use starts over */
    gaaw_buffer_free(ctx, &k->whole_params);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  bind_bucket(opt, b, 0, k->whole_params);
  *started = 1;
  return GAAW_SUCCESS;
}

/* Bucket b's parameters, resident and complete. */
static gaaw_status_t gather_bucket(gaaw_optimizer_t opt, int b)
{
  gaaw_context_t ctx = opt->ctx;
  int started;
  GAAW_CHECK(start_gather(opt, b, &started));
  GAAW_CHECK(gaaw_comm_wait(&opt->buckets[b].gather));
  return GAAW_SUCCESS;
}

/* Frees bucket b's gathered parameters; with keep, this rank's piece is first
 * copied back to the shard (after gaaw_model_set_param). */
static gaaw_status_t release_bucket(gaaw_optimizer_t opt, int b, int keep)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (!k->whole_params) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_comm_wait(&k->gather)); /* never free memory a collective still fills */
  if (keep) {
    gaaw_tensor_t mine = gaaw_zero_view(k->whole_params, opt->dtype, gaaw_zero_piece_at(opt, k), k->piece);
    GAAW_CHECK(gaaw_zero_shard_from_device(opt, b, &mine));
  }
  bind_bucket(opt, b, 0, NULL);
  GAAW_CHECK(gaaw_buffer_free(ctx, &k->whole_params));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_zero_release_gathered(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  for (int b = 0; b < opt->nbuckets; b++) GAAW_CHECK(release_bucket(opt, b, 0));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- gradients */

/* Stages 2, 3: a zeroed whole-bucket gradient buffer for backward to accumulate into. */
static gaaw_status_t open_grad_bucket(gaaw_optimizer_t opt, int b)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (k->whole_grads) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_buffer_alloc(ctx, (size_t)k->len * gaaw_dtype_size(opt->dtype), GAAW_MEM_GRADS, &k->whole_grads));
  gaaw_tensor_t whole = gaaw_zero_view(k->whole_grads, opt->dtype, 0, k->len);
  GAAW_CHECK(gaaw_fill(ctx, &whole, 0.0f));
  bind_bucket(opt, b, 1, k->whole_grads);
  return GAAW_SUCCESS;
}

/* Stages 2, 3: drops the whole-bucket gradients a failed backward left open (not
 * reduced), so that no rank reduces what its peers do not; with keep_tied, not
 * those that stay open over the step on purpose (tied buckets, see tied_grads;
 * stage 2 with a pipeline, see close_grad_bucket). */
static void drop_open_grad_buckets(gaaw_optimizer_t opt, int keep_tied)
{
  for (int b = 0; b < opt->nbuckets; b++) {
    zero_bucket *k = &opt->buckets[b];
    if (!k->whole_grads || k->reduction != ZERO_LOCAL || (keep_tied && (k->tied || k->held))) continue;
    bind_bucket(opt, b, 1, NULL);
    gaaw_buffer_free(opt->ctx, &k->whole_grads);
  }
}

/* Starts reducing bucket b's gradients over dp: stage 0 all-reduces the whole
 * bucket in place; the other stages reduce-scatter it in place, so that this rank's
 * piece of the sum lands on its own piece (stages 2, 3: of the whole-bucket buffer,
 * whose views are unbound at once: nothing may read it until the reduction ends). */
static gaaw_status_t start_reduction(gaaw_optimizer_t opt, int b)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (k->reduction != ZERO_LOCAL) return GAAW_SUCCESS;
  /* (len) the bucket's gradient: whole_grads, or its span of the chunk's buffer */
  gaaw_tensor_t whole = opt->is.shard_grads ? gaaw_zero_view(k->whole_grads, opt->dtype, 0, k->len)
                                            : gaaw_params_span(&opt->model->params, 1, k->lo, k->len);
  if (!whole.buf) return GAAW_SUCCESS;
  gaaw_tensor_t mine = whole; /* (piece) this rank's */
  mine.offset += (size_t)gaaw_zero_piece_at(opt, k) * gaaw_dtype_size(opt->dtype);
  mine.shape[0] = k->piece;
  if (gaaw_zero_size(opt, k) > 1 && !opt->is.shard_state)
    GAAW_CHECK(gaaw_comm_allreduce_start(gaaw_zero_comm(opt, k), &whole, &whole, GAAW_SUM, &k->reduce));
  if (gaaw_zero_size(opt, k) > 1 && opt->is.shard_state)
    GAAW_CHECK(gaaw_comm_reduce_scatter_start(gaaw_zero_comm(opt, k), &whole, &mine, GAAW_SUM, &k->reduce));
  if (opt->is.shard_grads) bind_bucket(opt, b, 1, NULL);
  k->reduction = ZERO_REDUCING;
  return GAAW_SUCCESS;
}

/* Waits for bucket b's reduction; stages 2, 3 then add the reduced piece to the
 * shard's gradient (microbatches accumulate there) and free the bucket. */
static gaaw_status_t finish_reduction(gaaw_optimizer_t opt, int b)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (k->reduction != ZERO_REDUCING) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_comm_wait(&k->reduce));
  k->reduction = ZERO_REDUCED;
  if (!opt->is.shard_grads) return GAAW_SUCCESS;
  gaaw_tensor_t mine = gaaw_zero_view(k->whole_grads, opt->dtype, gaaw_zero_piece_at(opt, k), k->piece);
  gaaw_tensor_t shard = gaaw_zero_grad_piece(opt, b);
  GAAW_CHECK(gaaw_axpy(ctx, 1.0f, &mine, &shard));
  GAAW_CHECK(gaaw_buffer_free(ctx, &k->whole_grads));
  k->reduction = ZERO_LOCAL;
  return GAAW_SUCCESS;
}

/* Finishes the reductions in flight (except bucket skip's). */
static gaaw_status_t finish_started_reductions(gaaw_optimizer_t opt, int skip)
{
  gaaw_context_t ctx = opt->ctx;
  for (int b = 0; b < opt->nbuckets; b++)
    if (b != skip) GAAW_CHECK(finish_reduction(opt, b));
  return GAAW_SUCCESS;
}

/* The step's accumulation starts over (gaaw_model_zero_grad, also at the end of
 * every step). */
static void restart_accumulation(gaaw_optimizer_t opt)
{
  for (int b = 0; b < opt->nbuckets; b++) {
    opt->buckets[b].reduction = ZERO_LOCAL;
    opt->buckets[b].held = 0;
  }
  opt->backward_passes = 0;
}

/* A tied weight's two copies (embedding on the first pipeline stage, head on the
 * last) each hold the gradient of their own uses: both are replaced by the sum,
 * exchanged between the pair over the pp group, before the dp reduction. The same
 * two addends on both sides give the same sum bit for bit. Not collective: the
 * pair only. */
static gaaw_status_t tied_grads(gaaw_optimizer_t opt)
{
  gaaw_model_t m = opt->model;
  gaaw_context_t ctx = opt->ctx;
  for (int i = 0; i < m->params.count; i++) {
    gaaw_param *p = &m->params.items[i];
    if (p->tied_peer < 0 || !p->grad.buf) continue;
    gaaw_tensor_t theirs, mine = gaaw_reshape(&p->grad, 1, &p->local_numel);
    gaaw_comm_request_t send = NULL, recv = NULL;
    GAAW_CHECK(gaaw_tensor_alloc(ctx, opt->dtype, 1, &p->local_numel, GAAW_MEM_COMMUNICATION, &theirs));
    gaaw_status_t st = gaaw_comm_send_start(m->pp, &mine, p->tied_peer, 0, &send);
    if (st == GAAW_SUCCESS) st = gaaw_comm_recv_start(m->pp, &theirs, p->tied_peer, 0, &recv);
    if (st == GAAW_SUCCESS) st = gaaw_comm_wait(&send);
    if (st == GAAW_SUCCESS) st = gaaw_comm_wait(&recv);
    if (st == GAAW_SUCCESS) st = gaaw_axpy(ctx, 1.0f, &theirs, &mine);
    gaaw_comm_cancel(&send);
    gaaw_comm_cancel(&recv);
    gaaw_buffer_free(ctx, &theirs.buf);
    if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_zero_finish_reductions(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  if (opt->is.shard_grads) drop_open_grad_buckets(opt, 1);
  GAAW_CHECK(tied_grads(opt));
  for (int b = 0; b < opt->nbuckets; b++) {
    /* stages 0, 1 after fewer backward passes than accumulation; tied buckets
     * (every stage) only now */
    zero_bucket *k = &opt->buckets[b];
    if ((!opt->is.shard_grads && gaaw_zero_size(opt, k) > 1) || k->tied || k->held) GAAW_CHECK(start_reduction(opt, b));
    k->held = 0;
    GAAW_CHECK(finish_reduction(opt, b));
  }
  /* the step's gaaw_model_zero_grad restarts the accumulation (grads_access) */
  opt->last_reductions_in_backward = opt->reductions_in_backward;
  opt->last_gathers_ahead = opt->gathers_ahead;
  opt->reductions_in_backward = opt->gathers_ahead = 0;
  return GAAW_SUCCESS;
}

/* Backward has completed bucket b. Stages 2, 3 keep one reduction in flight (the
 * previous bucket's is finished first, bounding the gradient memory); stages 0, 1
 * reduce on the step's last microbatch only (the others accumulate locally), and so
 * does stage 2 in a pipeline, whose microbatches follow one another closely: the
 * bucket's whole gradient stays open (held) over the step and is reduce-scattered
 * once, after the chunk's last microbatch backward (or at the step, when the chunk's
 * last backward came before the rank's last one). Stage 3 reduces every microbatch,
 * keeping its memory at the formula. */
static gaaw_status_t close_grad_bucket(gaaw_optimizer_t opt, int b)
{
  gaaw_context_t ctx = opt->ctx;
  zero_bucket *k = &opt->buckets[b];
  if (k->tied) return GAAW_SUCCESS; /* reduced at the step, after tied_grads */
  int last = opt->backward_passes + 1 >= opt->cfg.accumulation;
  if (opt->is.shard_grads && !opt->is.shard_params && opt->model->pp_size > 1 && !last) { /* stage 2 */
    k->held = 1;
    return GAAW_SUCCESS;
  }
  k->held = 0;
  if (opt->is.shard_grads) {
    GAAW_CHECK(finish_started_reductions(opt, b));
  } else if (gaaw_zero_size(opt, k) == 1 || !last) {
    return GAAW_SUCCESS;
  }
  GAAW_CHECK(start_reduction(opt, b));
  if (gaaw_zero_size(opt, k) > 1) opt->reductions_in_backward++;
  return GAAW_SUCCESS;
}

/* Gradients read or zeroed through the model: what is in flight finishes first. */
static gaaw_status_t grads_access(gaaw_model_t m, int reset, void *user)
{
  gaaw_optimizer_t opt = user;
  gaaw_context_t ctx = opt->ctx;
  (void)m;
  if (opt->is.shard_grads) drop_open_grad_buckets(opt, !reset);
  GAAW_CHECK(finish_started_reductions(opt, -1));
  if (!reset) return GAAW_SUCCESS;
  restart_accumulation(opt);
  if (opt->is.shard_grads) {
    gaaw_tensor_t all = gaaw_zero_view(opt->shard_grads, opt->dtype, 0, opt->shard_numel);
    GAAW_CHECK(gaaw_fill(ctx, &all, 0.0f));
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- hooks */

/* The buckets layer i reads: its own and those of parameters it shares (tied head). */
int gaaw_zero_layer_buckets(gaaw_optimizer_t opt, int i, int *out)
{
  gaaw_model_t m = opt->model;
  int n = 0;
  for (int j = 0; j < GAAW_LAYER_MAX_PARAMS; j++) {
    int p = m->layers[i].params[j];
    if (p < 0) continue;
    int b = gaaw_zero_bucket_of_param(opt, &m->params.items[p]);
    int seen = 0;
    for (int q = 0; q < n; q++) seen |= out[q] == b;
    if (!seen && b >= 0) out[n++] = b;
  }
  return n;
}

/* Stage 3: starts gathering the buckets of the next layer with parameters in the
 * pass's direction, so that they arrive while layer i runs. */
static gaaw_status_t prefetch_after(gaaw_optimizer_t opt, int i, gaaw_phase phase)
{
  gaaw_context_t ctx = opt->ctx;
  int step = phase == GAAW_PHASE_FORWARD ? 1 : -1, used[GAAW_LAYER_MAX_PARAMS];
  for (int j = i + step; j >= 0 && j < opt->model->nlayers; j += step) {
    int n = gaaw_zero_layer_buckets(opt, j, used);
    for (int q = 0; q < n; q++) {
      int started;
      GAAW_CHECK(start_gather(opt, used[q], &started));
      opt->gathers_ahead += started;
    }
    if (n > 0) break;
  }
  return GAAW_SUCCESS;
}

/* `passes` backward passes may begin: at most `accumulation` per step, since
 * stages 0 and 1 start reducing on the last one (checked before the pass's
 * agreement). */
static gaaw_status_t check_pass(gaaw_model_t m, gaaw_phase phase, int passes, void *user)
{
  gaaw_optimizer_t opt = user;
  (void)m;
  if (phase == GAAW_PHASE_BACKWARD && opt->backward_passes + passes > opt->cfg.accumulation)
    GAAW_FAIL(opt->ctx, GAAW_ERR_STATE, "backward pass %d since the last gaaw_optimizer_step, but the optimizer's "
              "accumulation is %d: call gaaw_optimizer_step after every %d microbatches", opt->backward_passes + 1,
              opt->cfg.accumulation, opt->cfg.accumulation);
  return GAAW_SUCCESS;
}

/* A backward pass (or a split one's B or W) begins: stages 2, 3 finish the
 * previous pass's last reduction before its buckets can open again. A fused
 * microbatch's first backward chunk on this rank (its last chunk) also drops what
 * a failed pass left open; its later chunks must not, as a bucket shared across
 * chunks (a tied head and embedding on one rank) is open from the first, and
 * neither may a split backward's B or W: buckets stay open from a B to its W,
 * where other microbatches' B and W may come between. */
static gaaw_status_t begin_backward(gaaw_optimizer_t opt, int drop_open)
{
  gaaw_context_t ctx = opt->ctx;
  if (opt->is.shard_grads) {
    GAAW_CHECK(finish_started_reductions(opt, -1));
    if (drop_open) drop_open_grad_buckets(opt, 1); /* left by a failed pass */
  }
  return GAAW_SUCCESS;
}

static int is_backward(gaaw_phase phase)
{
  return phase == GAAW_PHASE_BACKWARD || phase == GAAW_PHASE_BACKWARD_INPUT || phase == GAAW_PHASE_WEIGHT;
}

/* Whether the phase completes the gradients of the layers it runs (a fused
 * backward, or a split one's W; not its B). */
static int completes_grads(gaaw_phase phase)
{
  return phase == GAAW_PHASE_BACKWARD || phase == GAAW_PHASE_WEIGHT;
}

static gaaw_status_t begin_pass(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk, void *user)
{
  (void)microbatch;
  if (is_backward(phase))
    GAAW_CHECK_CTX(((gaaw_optimizer_t)user)->ctx,
                   begin_backward(user, phase == GAAW_PHASE_BACKWARD && chunk == m->chunks - 1));
  return GAAW_SUCCESS;
}

/* A microbatch's backward is complete on this rank once its chunk 0 (every rank
 * has one) is done, its W with a split backward: that counts as one backward pass. */
static gaaw_status_t end_pass(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk, void *user)
{
  (void)m, (void)microbatch;
  gaaw_optimizer_t opt = user;
  if (completes_grads(phase) && chunk == 0) opt->backward_passes++;
  return GAAW_SUCCESS;
}

static gaaw_status_t before_layer(gaaw_model_t m, int i, gaaw_phase phase, void *user)
{
  gaaw_optimizer_t opt = user;
  gaaw_context_t ctx = opt->ctx;
  int used[GAAW_LAYER_MAX_PARAMS], n;
  if (phase == GAAW_PHASE_ACCESS) { /* one parameter of layer i is read or written: its buckets */
    n = 0;
    if (opt->bucket_of_layer[i] >= 0) used[n++] = opt->bucket_of_layer[i];
    if (opt->expert_bucket_of_layer[i] >= 0) used[n++] = opt->expert_bucket_of_layer[i];
  } else {
    n = gaaw_zero_layer_buckets(opt, i, used);
  }
  /* W reads no parameters: at stage 3 it gathers nothing */
  int reads_params = phase != GAAW_PHASE_WEIGHT;
  for (int q = 0; q < n; q++) {
    if (opt->is.shard_params && reads_params) GAAW_CHECK(gather_bucket(opt, used[q]));
    if (is_backward(phase) && opt->is.shard_grads) GAAW_CHECK(open_grad_bucket(opt, used[q]));
  }
  if (opt->is.shard_params && phase != GAAW_PHASE_ACCESS && reads_params) GAAW_CHECK(prefetch_after(opt, i, phase));
  return GAAW_SUCCESS;
}

static gaaw_status_t after_layer(gaaw_model_t m, int i, gaaw_phase phase, void *user)
{
  gaaw_optimizer_t opt = user;
  gaaw_context_t ctx = opt->ctx;
  int started = opt->reductions_in_backward;
  for (int b = 0; b < opt->nbuckets; b++) {
    zero_bucket *k = &opt->buckets[b];
    int done = phase == GAAW_PHASE_FORWARD ? k->last_forward == i
               : is_backward(phase)        ? k->last_backward == i
                                           : gaaw_zero_layer_owns(opt, i, b);
    if (!done) continue;
    if (completes_grads(phase)) GAAW_CHECK(close_grad_bucket(opt, b));
    int access = phase == GAAW_PHASE_ACCESS, kept = opt->keep_gathered && !access;
    if (opt->is.shard_params && phase != GAAW_PHASE_WEIGHT && !kept) GAAW_CHECK(release_bucket(opt, b, access));
  }
  /* A communicator without a communication stream (MPI) runs started collectives
   * only when they are waited for: run the reductions this layer started now,
   * between this layer's backward and the next, while the bucket is still in cache,
   * rather than all at the step. Every dp rank closes the same buckets after the
   * same layer, so the ranks run them in the same order. */
  if (opt->reductions_in_backward > started) GAAW_CHECK(gaaw_comm_run_deferred(opt->dp, NULL));
  if (opt->reductions_in_backward > started && opt->edp != opt->dp) GAAW_CHECK(gaaw_comm_run_deferred(opt->edp, NULL));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_zero_attach(gaaw_optimizer_t opt)
{
  gaaw_model_t m = opt->model;
  gaaw_context_t ctx = opt->ctx;
  size_t es = gaaw_dtype_size(opt->dtype), shard_bytes = (size_t)(opt->shard_numel ? opt->shard_numel : 1) * es;
  if (opt->is.shard_grads) {
    GAAW_CHECK(gaaw_buffer_alloc(ctx, shard_bytes, GAAW_MEM_GRADS, &opt->shard_grads));
    gaaw_tensor_t all = gaaw_zero_view(opt->shard_grads, opt->dtype, 0, opt->shard_numel);
    GAAW_CHECK(gaaw_fill(ctx, &all, 0.0f));
    gaaw_params_release(ctx, &m->params, 1);
  }
  if (opt->is.shard_params) {
    opt->keep_gathered = gaaw_ctx_bool(ctx, "zero_keep_gathered");
    GAAW_CHECK(gaaw_zero_shard_create(opt));
    for (int b = 0; b < opt->nbuckets; b++) {
      const zero_bucket *k = &opt->buckets[b];
      gaaw_tensor_t from = gaaw_params_span(&m->params, 0, gaaw_zero_piece_lo(opt, k), k->piece);
      GAAW_CHECK(gaaw_zero_shard_from_device(opt, b, &from));
    }
    gaaw_params_release(ctx, &m->params, 0);
  }
  gaaw_model_hooks hooks = {opt, before_layer, after_layer, grads_access, check_pass, begin_pass, end_pass};
  gaaw_model_set_hooks(m, &hooks);
  return GAAW_SUCCESS;
}

void gaaw_zero_detach(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  if (opt->model->hooks.user == opt) gaaw_model_set_hooks(opt->model, NULL);
  for (int b = 0; b < opt->nbuckets; b++) {
    zero_bucket *k = &opt->buckets[b];
    /* collectives still in flight end before their memory goes; deferred ones are
     * dropped, not run (a rank tearing down after a failure must not wait on peers) */
    gaaw_comm_cancel(&k->gather);
    gaaw_comm_cancel(&k->reduce);
    gaaw_buffer_free(ctx, &k->whole_params);
    gaaw_buffer_free(ctx, &k->whole_grads);
  }
}
