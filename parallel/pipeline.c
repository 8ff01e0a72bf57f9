/* The pipeline executor: a step's microbatches through this rank's list of the
 * schedule (parallel/schedule.h), activations and their gradients between stages
 * through non-blocking send/recv under the communicator's deadline.
 *
 * State per (microbatch, chunk) of this rank: the receive of F's input (into the
 * frame's acts[lo]), the receive of B's output gradient, B's input gradient to send,
 * and the sends in flight. A run of SEND/RECV actions is one exchange: all are
 * started; a receive is waited for by the compute action that needs it. A send is
 * not waited for there: MPI's large messages move when the receiver takes them
 * (rendezvous), and a sender waiting at once would idle until the receiver's next
 * call into MPI, however early the receive was posted. Each exchange frees what
 * the completed sends held (gaaw_comm_test), and the step waits for the rest.
 * BW is the whole backward of (mb, chunk). A schedule with W actions (ZB-H1)
 * splits it: B computes the input gradients and leaves the linears' weight
 * gradients in the frame (f->defer_weights, parallel/weight_grads.c), and W(mb,
 * chunk) computes them later; the data-parallel hooks see a layer's gradient
 * complete only after its W. A B without W actions in the schedule is the whole
 * backward.
 *
 * Shapes (Nl = rows of a microbatch on this rank: batch * seq, / tp with sequence
 * parallelism; C = the width of the boundary layer): every message is (Nl, C), fixed
 * by the config and the batch shape that every rank agreed on, and checked before
 * it is sent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/trace.h"
#include "parallel/model_impl.h"

typedef struct {
  gaaw_comm_request_t act_in;  /* F's input, into the frame's acts[lo] */
  gaaw_comm_request_t grad_in; /* B's output gradient, into dy */
  gaaw_comm_request_t act_out;  /* the send of F's output activation, in flight */
  gaaw_comm_request_t grad_out; /* the send of B's input gradient, in flight */
  gaaw_tensor_t dy;            /* (Nl, C) gradient of the chunk's output, for B */
  gaaw_tensor_t dx;            /* (Nl, C) B's input gradient, to send (or for chunk - 1 here) */
  double posted[4];            /* when each message was posted, by gaaw_sched_op - SEND_ACT (the timeline) */
} pipe_slot;

typedef struct {
  gaaw_model_t m;
  const gaaw_sched_t *s;
  gaaw_frame *frames; /* one per microbatch */
  pipe_slot *slots;   /* [mb * chunks + chunk] */
  int microbatches;
  int split;          /* this rank's list has W actions: B defers the weight gradients */
  double waited;      /* seconds in waits for peers */
  int *sends;         /* indices in this rank's list of the sends in flight, oldest first */
  int nsends;
} pipe_run;

static pipe_slot *slot_of(pipe_run *r, int mb, int chunk)
{
  return &r->slots[mb * r->m->chunks + chunk];
}

/* What an action of (mb, chunk) works on: the chunk's virtual stage and layers
 * [lo, hi), the microbatch's frame and its slot. */
typedef struct {
  int vs, lo, hi;
  gaaw_frame *f;
  pipe_slot *sl;
} pipe_place;

static pipe_place place_of(pipe_run *r, const gaaw_sched_action_t *a)
{
  pipe_place p;
  p.vs = gaaw_model_chunk_stage(r->m, a->chunk, &p.lo, &p.hi);
  p.f = &r->frames[a->mb];
  p.sl = slot_of(r, a->mb, a->chunk);
  return p;
}

/* Tags stay within 0..32767, MPI's guaranteed bound (gaaw_comm_send checks it):
 * messages of one pair of ranks are matched in order anyway, the tag only
 * cross-checks (microbatch, chunk), so wrapping it loses nothing in order. */
static int message_tag(pipe_run *r, const gaaw_sched_action_t *a)
{
  return gaaw_sched_tag(r->s, r->m->pp_rank, a) % 32768;
}

/* The timeline's names of the actions: a full backward (BW) is a B there. */
static const char *const action_names[GAAW_SCHED_OP_COUNT] = {
  [GAAW_SCHED_F] = "F",           [GAAW_SCHED_B] = "B",           [GAAW_SCHED_W] = "W",
  [GAAW_SCHED_BW] = "B",          [GAAW_SCHED_SEND_ACT] = "send", [GAAW_SCHED_RECV_ACT] = "recv",
  [GAAW_SCHED_SEND_GRAD] = "send", [GAAW_SCHED_RECV_GRAD] = "recv"};

/* Action a's span on the timeline: compute actions on the "pipeline" row,
 * messages (from their post to their completion) on "pipeline p2p". */
static void trace_action(pipe_run *r, const gaaw_sched_action_t *a, double t0)
{
  gaaw_context_t ctx = r->m->ctx;
  if (!gaaw_trace_on(ctx)) return;
  int message = a->op >= GAAW_SCHED_SEND_ACT;
  const char *carries = a->op == GAAW_SCHED_SEND_ACT || a->op == GAAW_SCHED_RECV_ACT ? "activation" : "gradient";
  gaaw_trace_span(ctx, gaaw_trace_lane(ctx, message ? "pipeline p2p" : "pipeline"), action_names[a->op], t0,
                  "\"mb\":%d,\"chunk\":%d,\"peer\":%d,\"carries\":\"%s\"", a->mb, a->chunk,
                  message ? a->peer : -1, message ? carries : "");
}

/* Waits for req, a failure naming this stage, the action and its microbatch. */
static gaaw_status_t wait_for(pipe_run *r, gaaw_comm_request_t *req, const gaaw_sched_action_t *a)
{
  gaaw_context_t ctx = r->m->ctx;
  double t0 = gaaw_pass_clock();
  gaaw_status_t st = gaaw_comm_wait(req);
  r->waited += gaaw_pass_clock() - t0;
  if (st == GAAW_SUCCESS) {
    trace_action(r, a, place_of(r, a).sl->posted[a->op - GAAW_SCHED_SEND_ACT]);
    return GAAW_SUCCESS;
  }
  char what[96], why[1024];
  gaaw_sched_action_text(a, what, sizeof what);
  gaaw_error_first_line(ctx, why, sizeof why);
  return gaaw_error_raise(ctx, st, __FILE__, __LINE__, __func__, "pipeline rank %d, %s (microbatch %d): %s",
                          r->m->pp_rank, what, a->mb, why);
}

/* Waits for the receive (op, from peer) that feeds compute action a, if one is
 * posted (none between two chunks of one rank). */
static gaaw_status_t wait_input(pipe_run *r, gaaw_comm_request_t *req, int op, const gaaw_sched_action_t *a, int peer)
{
  if (!*req) return GAAW_SUCCESS;
  gaaw_sched_action_t recv = {op, a->mb, a->chunk, peer};
  GAAW_CHECK_CTX(r->m->ctx, wait_for(r, req, &recv));
  return GAAW_SUCCESS;
}

/* Whether the virtual stage next to vs (step +1 or -1) is on this rank (pp 1). */
static int here(gaaw_model_t m, int vs)
{
  return vs % m->pp_size == m->pp_rank;
}

/* A message's tensor has the boundary shape of acts[i] in frame f. */
static gaaw_status_t check_boundary(gaaw_model_t m, const gaaw_frame *f, int i, const gaaw_tensor_t *t,
                                    const char *what)
{
  int64_t shape[2];
  gaaw_model_boundary_shape(m, f, i, shape);
  GAAW_ARG_CHECK(m->ctx, t->buf && t->ndim == 2 && t->shape[0] == shape[0] && t->shape[1] == shape[1],
                 "pipeline rank %d: the %s at layer %d is (%lld, %lld), the config gives (%lld, %lld)",
                 m->pp_rank, what, i, (long long)t->shape[0], (long long)t->shape[1], (long long)shape[0],
                 (long long)shape[1]);
  return GAAW_SUCCESS;
}

static gaaw_status_t run_forward(pipe_run *r, const gaaw_sched_action_t *a)
{
  gaaw_model_t m = r->m;
  gaaw_context_t ctx = m->ctx;
  pipe_place p = place_of(r, a);
  if (p.vs > 0) {
    GAAW_CHECK(wait_input(r, &p.sl->act_in, GAAW_SCHED_RECV_ACT, a, (p.vs - 1) % m->pp_size));
    GAAW_CHECK(check_boundary(m, p.f, p.lo, &p.f->acts[p.lo], "input activation"));
  }
  GAAW_CHECK(gaaw_pass_forward(m, p.f, a->mb, a->chunk, p.lo, p.hi));
  return GAAW_SUCCESS;
}

static gaaw_status_t run_backward(pipe_run *r, const gaaw_sched_action_t *a)
{
  gaaw_model_t m = r->m;
  gaaw_context_t ctx = m->ctx;
  pipe_place p = place_of(r, a);
  gaaw_tensor_t dy = {0}; /* the last stage starts from the loss */
  if (p.vs + 1 < m->stages.count) {
    if (p.sl->grad_in) {
      GAAW_CHECK(wait_input(r, &p.sl->grad_in, GAAW_SCHED_RECV_GRAD, a, (p.vs + 1) % m->pp_size));
      dy = p.sl->dy;
    } else if (here(m, p.vs + 1)) { /* the next chunk on this rank left it */
      dy = slot_of(r, a->mb, a->chunk + 1)->dx;
      slot_of(r, a->mb, a->chunk + 1)->dx = (gaaw_tensor_t){0};
    }
    p.sl->dy = (gaaw_tensor_t){0};
    GAAW_CHECK(check_boundary(m, p.f, p.hi, &dy, "output gradient"));
  }
  p.f->defer_weights = r->split;
  GAAW_CHECK(gaaw_pass_backward(m, p.f, a->mb, a->chunk, p.lo, p.hi, &dy, p.vs > 0 ? &p.sl->dx : NULL));
  /* the received input: its backward is done (W works on its own copies) */
  if (p.vs > 0) gaaw_act_free(m, &p.f->acts[p.lo]);
  return GAAW_SUCCESS;
}

/* W(mb, chunk): the weight gradients its B left in the frame. */
static gaaw_status_t run_weight(pipe_run *r, const gaaw_sched_action_t *a)
{
  pipe_place p = place_of(r, a);
  GAAW_CHECK_CTX(r->m->ctx, gaaw_pass_weight(r->m, p.f, a->mb, a->chunk, p.lo, p.hi));
  return GAAW_SUCCESS;
}

/* Posts one SEND/RECV action (the exchange waits for the sends). */
static gaaw_status_t post_message(pipe_run *r, const gaaw_sched_action_t *a)
{
  gaaw_model_t m = r->m;
  gaaw_context_t ctx = m->ctx;
  pipe_place p = place_of(r, a);
  gaaw_frame *f = p.f;
  int64_t shape[2];
  int tag = message_tag(r, a);
  p.sl->posted[a->op - GAAW_SCHED_SEND_ACT] = gaaw_pass_clock();
  switch (a->op) {
  case GAAW_SCHED_SEND_ACT:
    GAAW_CHECK(check_boundary(m, f, p.hi, &f->acts[p.hi], "output activation"));
    GAAW_CHECK(gaaw_comm_send_start(m->pp, &f->acts[p.hi], a->peer, tag, &p.sl->act_out));
    break;
  case GAAW_SCHED_SEND_GRAD:
    GAAW_CHECK(check_boundary(m, f, p.lo, &p.sl->dx, "input gradient"));
    GAAW_CHECK(gaaw_comm_send_start(m->pp, &p.sl->dx, a->peer, tag, &p.sl->grad_out));
    break;
  case GAAW_SCHED_RECV_ACT:
    gaaw_model_boundary_shape(m, f, p.lo, shape);
    GAAW_CHECK(gaaw_act_alloc(m, 2, shape, &f->acts[p.lo]));
    GAAW_CHECK(gaaw_comm_recv_start(m->pp, &f->acts[p.lo], a->peer, tag, &p.sl->act_in));
    break;
  case GAAW_SCHED_RECV_GRAD:
    gaaw_model_boundary_shape(m, f, p.hi, shape);
    GAAW_CHECK(gaaw_act_alloc(m, 2, shape, &p.sl->dy));
    GAAW_CHECK(gaaw_comm_recv_start(m->pp, &p.sl->dy, a->peer, tag, &p.sl->grad_in));
    break;
  }
  return GAAW_SUCCESS;
}

/* Completes the sends in flight (all of them, or those that have completed
 * already); what a completed one sent is no longer needed here. */
static gaaw_status_t finish_sends(pipe_run *r, int all)
{
  gaaw_model_t m = r->m;
  gaaw_context_t ctx = m->ctx;
  const gaaw_sched_rank_t *mine = &r->s->ranks[m->pp_rank];
  int kept = 0;
  for (int i = 0; i < r->nsends; i++) {
    const gaaw_sched_action_t *a = &mine->actions[r->sends[i]];
    pipe_place p = place_of(r, a);
    int act = a->op == GAAW_SCHED_SEND_ACT;
    gaaw_comm_request_t *req = act ? &p.sl->act_out : &p.sl->grad_out;
    if (!all && !gaaw_comm_test(*req)) {
      r->sends[kept++] = r->sends[i];
      continue;
    }
    GAAW_CHECK(wait_for(r, req, a));
    gaaw_act_free(m, act ? &p.f->acts[p.hi] : &p.sl->dx);
  }
  r->nsends = kept;
  return GAAW_SUCCESS;
}

static int is_message(int op)
{
  return op == GAAW_SCHED_SEND_ACT || op == GAAW_SCHED_RECV_ACT || op == GAAW_SCHED_SEND_GRAD ||
         op == GAAW_SCHED_RECV_GRAD;
}

static gaaw_status_t run_actions(pipe_run *r)
{
  gaaw_context_t ctx = r->m->ctx;
  const gaaw_sched_rank_t *mine = &r->s->ranks[r->m->pp_rank];
  for (int k = 0; k < mine->count;) {
    const gaaw_sched_action_t *a = &mine->actions[k];
    if (is_message(a->op)) {
      for (; k < mine->count && is_message(mine->actions[k].op); k++) {
        GAAW_CHECK(post_message(r, &mine->actions[k]));
        int op = mine->actions[k].op;
        if (op == GAAW_SCHED_SEND_ACT || op == GAAW_SCHED_SEND_GRAD) r->sends[r->nsends++] = k;
      }
      GAAW_CHECK(finish_sends(r, 0));
      continue;
    }
    double t0 = gaaw_pass_clock();
    if (a->op == GAAW_SCHED_F) GAAW_CHECK(run_forward(r, a));
    if (a->op == GAAW_SCHED_B || a->op == GAAW_SCHED_BW) GAAW_CHECK(run_backward(r, a));
    if (a->op == GAAW_SCHED_W) GAAW_CHECK(run_weight(r, a));
    trace_action(r, a, t0);
    k++;
  }
  GAAW_CHECK(finish_sends(r, 1));
  return GAAW_SUCCESS;
}

/* The schedule of this step's shape, generated and verified once and kept. */
static gaaw_status_t step_schedule(gaaw_model_t m, int microbatches)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_sched_t *s = m->sched;
  if (s && s->microbatches == microbatches) return GAAW_SUCCESS;
  gaaw_sched_destroy(&m->sched);
  GAAW_CHECK(gaaw_sched_create(ctx, m->pp_kind, m->pp_size, microbatches, m->chunks, &m->sched));
  return GAAW_SUCCESS;
}

/* The mean of the microbatches' losses, from the last stage to every rank. */
static gaaw_status_t step_loss(pipe_run *r, float *loss)
{
  double sum = 0;
  for (int i = 0; i < r->microbatches; i++) sum += r->frames[i].loss;
  float mean = (float)(sum / r->microbatches);
  GAAW_CHECK_CTX(r->m->ctx, gaaw_model_share_loss(r->m, &mean, gaaw_moe_step_record(r->m, r->frames, r->microbatches)));
  if (loss) *loss = mean;
  return GAAW_SUCCESS;
}

static void free_run(pipe_run *r)
{
  gaaw_model_t m = r->m;
  if (r->slots)
    for (int i = 0; i < r->microbatches * m->chunks; i++) {
      pipe_slot *sl = &r->slots[i];
      gaaw_comm_cancel(&sl->act_in);
      gaaw_comm_cancel(&sl->grad_in);
      gaaw_comm_cancel(&sl->act_out);
      gaaw_comm_cancel(&sl->grad_out);
      gaaw_act_free(m, &sl->dy);
      gaaw_act_free(m, &sl->dx);
    }
  if (r->frames)
    for (int i = 0; i < r->microbatches; i++) gaaw_frame_free(m, &r->frames[i]);
  free(r->slots);
  free(r->frames);
  free(r->sends);
}

/* Everything a step needs, checked on this rank: the schedule for its
 * microbatches, each microbatch's data, and the data-parallel engine's say. */
static gaaw_status_t prepare(pipe_run *r, const gaaw_batch_t *b)
{
  gaaw_model_t m = r->m;
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, b);
  r->microbatches = gaaw_model_microbatches(m, b);
  GAAW_ARG_CHECK(ctx, r->microbatches >= 1, "microbatches must be >= 0 (0: option microbatches), got %d",
                 b->microbatches);
  GAAW_CHECK(gaaw_sched_check(ctx, m->pp_kind, m->pp_size, r->microbatches, m->chunks));
  GAAW_CHECK(step_schedule(m, r->microbatches));
  r->s = m->sched;
  const gaaw_sched_rank_t *mine = &r->s->ranks[m->pp_rank];
  for (int k = 0; k < mine->count; k++) r->split |= mine->actions[k].op == GAAW_SCHED_W;
  r->frames = calloc((size_t)r->microbatches, sizeof *r->frames);
  r->slots = calloc((size_t)r->microbatches * (size_t)m->chunks, sizeof *r->slots);
  r->sends = malloc(((size_t)mine->count + 1) * sizeof *r->sends);
  if (!r->frames || !r->slots || !r->sends) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d microbatches", r->microbatches);
  for (int i = 0; i < r->microbatches; i++) {
    gaaw_batch_t one = gaaw_model_microbatch(m, b, i);
    GAAW_CHECK(gaaw_frame_init(m, &r->frames[i]));
    GAAW_CHECK(gaaw_model_load_batch(m, &r->frames[i], &one));
  }
  GAAW_CHECK(gaaw_model_check_pass(m, GAAW_PHASE_FORWARD, r->microbatches));
  GAAW_CHECK(gaaw_model_check_pass(m, GAAW_PHASE_BACKWARD, r->microbatches));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_pipeline_forward_backward(gaaw_model_t m, const gaaw_batch_t *b, float *loss)
{
  gaaw_context_t ctx = m->ctx;
  pipe_run r = {m, NULL, NULL, NULL, 0, 0, 0.0, NULL, 0};
  double t0 = gaaw_pass_clock();
  gaaw_status_t st = prepare(&r, b);
  /* the agreement and the loss broadcast wait for peers too: a stage done early
   * spends the rest of the step in the broadcast */
  double t_agree = gaaw_pass_clock();
  st = gaaw_model_agree_batch(m, st, b, st == GAAW_SUCCESS ? r.microbatches : 1);
  r.waited += gaaw_pass_clock() - t_agree;
  if (st == GAAW_SUCCESS) {
    st = run_actions(&r);
    double t_loss = gaaw_pass_clock();
    if (st == GAAW_SUCCESS) st = step_loss(&r, loss);
    r.waited += gaaw_pass_clock() - t_loss;
    if (st != GAAW_SUCCESS) st = gaaw_model_fail_together(m, st);
  }
  /* freeing cancels requests, which on an aborted context may report errors of
   * their own: the caller must still read the failure that stopped the step */
  gaaw_error_record failure;
  if (st != GAAW_SUCCESS) failure = *gaaw_error_record_of(ctx);
  free_run(&r);
  m->pipe_wall = gaaw_pass_clock() - t0;
  m->pipe_idle = r.waited;
  if (st != GAAW_SUCCESS) {
    *gaaw_error_record_of(ctx) = failure;
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_pipeline_forward_only(gaaw_model_t m, gaaw_frame *f, int stop)
{
  gaaw_context_t ctx = m->ctx;
  for (int vs = 0; vs < m->stages.count; vs++) {
    if (!here(m, vs)) continue;
    int lo = m->stages.lo[vs], hi = m->stages.hi[vs] < stop ? m->stages.hi[vs] : stop;
    int64_t shape[2];
    if (vs > 0 && !here(m, vs - 1)) {
      gaaw_model_boundary_shape(m, f, lo, shape);
      GAAW_CHECK(gaaw_act_alloc(m, 2, shape, &f->acts[lo]));
      GAAW_CHECK(gaaw_comm_recv(m->pp, &f->acts[lo], (vs - 1) % m->pp_size, vs % 32768));
    }
    GAAW_CHECK(gaaw_pass_forward(m, f, 0, vs / m->pp_size, lo, hi)); /* inference: no pass hooks */
    if (vs + 1 < m->stages.count && !here(m, vs + 1)) {
      GAAW_CHECK(check_boundary(m, f, hi, &f->acts[hi], "output activation"));
      GAAW_CHECK(gaaw_comm_send(m->pp, &f->acts[hi], (vs + 1) % m->pp_size, (vs + 1) % 32768));
      gaaw_act_free(m, &f->acts[hi]);
    }
  }
  return GAAW_SUCCESS;
}
