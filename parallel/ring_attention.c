/* Ring attention (ring_attention.h): each step computes this rank's query pieces
 * against the keys that have arrived while the next keys travel. On the timeline:
 * each step's compute on the row "cp ring", each message from its post to its
 * completion on "cp ring p2p". */
#include "parallel/ring_attention.h"

#include "backends/runtime/trace.h"
#include "parallel/cp_blocks.h"

enum { TAG_KV = 1, TAG_KV_BACKWARD = 2, TAG_DKV = 3 };

typedef struct {
  gaaw_model_t m;
  int cp, rank, next, prev;
  gaaw_cp_blocks blocks;
} ring;

static ring ring_of(gaaw_model_t m, const gaaw_frame *f)
{
  ring r = {m, m->cp_size, m->cp_rank, (m->cp_rank + 1) % m->cp_size, (m->cp_rank + m->cp_size - 1) % m->cp_size,
            {m->ctx, m->cp_size, f->pieces, (int64_t)f->seq * m->cp_size}};
  return r;
}

/* A message round the ring: send to the next rank, receive from the previous. */
typedef struct {
  gaaw_comm_request_t send, recv;
  double posted;
  const char *carries;
} ring_message;

static gaaw_status_t pass_on(const ring *r, const gaaw_tensor_t *out, gaaw_tensor_t *in, int tag, const char *carries,
                             ring_message *msg)
{
  msg->posted = gaaw_pass_clock();
  msg->carries = carries;
  GAAW_CHECK_CTX(r->m->ctx, gaaw_comm_recv_start(r->m->cp, in, r->prev, tag, &msg->recv));
  GAAW_CHECK_CTX(r->m->ctx, gaaw_comm_send_start(r->m->cp, out, r->next, tag, &msg->send));
  return GAAW_SUCCESS;
}

/* Waits for both halves of msg (a message never posted is done). */
static gaaw_status_t arrive(const ring *r, int step, ring_message *msg)
{
  gaaw_context_t ctx = r->m->ctx;
  if (!msg->send && !msg->recv) return GAAW_SUCCESS;
  gaaw_status_t st = gaaw_comm_wait(&msg->send), got = gaaw_comm_wait(&msg->recv);
  if (gaaw_trace_on(ctx)) {
    int lane = gaaw_trace_lane(ctx, "cp ring p2p");
    gaaw_trace_span(ctx, lane, "send", msg->posted, "\"step\":%d,\"peer\":%d,\"carries\":\"%s\"", step, r->next,
                    msg->carries);
    gaaw_trace_span(ctx, lane, "recv", msg->posted, "\"step\":%d,\"peer\":%d,\"carries\":\"%s\"", step, r->prev,
                    msg->carries);
  }
  GAAW_CHECK_CTX(ctx, st);
  GAAW_CHECK_CTX(ctx, got);
  return GAAW_SUCCESS;
}

static void trace_step(const ring *r, const char *name, int step, int src, double t0)
{
  gaaw_context_t ctx = r->m->ctx;
  if (gaaw_trace_on(ctx))
    gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "cp ring"), name, t0, "\"step\":%d,\"keys_of\":%d", step, src);
}

static gaaw_status_t forward_ring(const ring *r, gaaw_scratch *s, const gaaw_tensor_t *q, const gaaw_tensor_t *kv,
                                  gaaw_tensor_t *out, gaaw_tensor_t *lse, gaaw_tensor_t *part_lse)
{
  gaaw_model_t m = r->m;
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *arrived[2], *part;
  for (int k = 0; k < 2; k++) GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, kv->ndim, kv->shape, &arrived[k]));
  int pieces = r->blocks.pieces;
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(q->shape[0] / pieces, q->shape[1], q->shape[2]), &part));
  const gaaw_tensor_t *here = kv;
  int started[2] = {0, 0};
  for (int step = 0; step < r->cp; step++) {
    int src = (r->rank - step + r->cp) % r->cp;
    ring_message msg = {0};
    if (step < r->cp - 1) GAAW_CHECK(pass_on(r, here, arrived[step % 2], TAG_KV, "kv", &msg));
    double t0 = gaaw_pass_clock();
    GAAW_CHECK(gaaw_cp_blocks_forward(&r->blocks, r->rank, q, src, here, out, lse, part, part_lse, started));
    trace_step(r, "attention", step, src, t0);
    GAAW_CHECK(arrive(r, step, &msg));
    here = arrived[step % 2];
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ring_attention_forward(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *q,
                                          const gaaw_tensor_t *kv, gaaw_tensor_t *out, gaaw_tensor_t *lse)
{
  gaaw_context_t ctx = m->ctx;
  ring r = ring_of(m, f);
  gaaw_scratch s = {0};
  gaaw_tensor_t part_lse = {0};
  gaaw_status_t st = gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){q->shape[0] / f->pieces, q->shape[1]},
                                       GAAW_MEM_ACTIVATIONS, &part_lse);
  if (st == GAAW_SUCCESS) st = forward_ring(&r, &s, q, kv, out, lse, &part_lse);
  gaaw_act_free(m, &part_lse);
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ring_attention_backward(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *dout,
                                           const gaaw_tensor_t *q, const gaaw_tensor_t *kv, const gaaw_tensor_t *out,
                                           const gaaw_tensor_t *lse, gaaw_tensor_t *dq, gaaw_tensor_t *dkv)
{
  gaaw_context_t ctx = m->ctx;
  ring r = ring_of(m, f);
  gaaw_scratch s = {0};
  gaaw_tensor_t *arrived[2] = {NULL, NULL}, *grads[2] = {NULL, NULL};
  gaaw_status_t st = GAAW_SUCCESS;
  for (int k = 0; k < 2 && st == GAAW_SUCCESS; k++) {
    st = gaaw_scratch_alloc(m, &s, 0, kv->ndim, kv->shape, &arrived[k]);
    if (st == GAAW_SUCCESS) st = gaaw_scratch_alloc(m, &s, k == 0, kv->ndim, kv->shape, &grads[k]);
  }
  /* step s holds the kv of rank rank - s and their gradient so far; after the last
   * step each gradient goes one rank on, which is home */
  const gaaw_tensor_t *here = kv;
  gaaw_tensor_t *dhere = grads[0];
  for (int step = 0; step < r.cp && st == GAAW_SUCCESS; step++) {
    int src = (r.rank - step + r.cp) % r.cp, last = step == r.cp - 1;
    ring_message keys = {0}, their_grads = {0};
    if (!last) st = pass_on(&r, here, arrived[step % 2], TAG_KV_BACKWARD, "kv", &keys);
    double t0 = gaaw_pass_clock();
    if (st == GAAW_SUCCESS) st = gaaw_cp_blocks_backward(&r.blocks, r.rank, dout, q, src, here, out, lse, dq, dhere);
    trace_step(&r, "attention backward", step, src, t0);
    gaaw_tensor_t *next = last ? dkv : grads[(step + 1) % 2];
    if (st == GAAW_SUCCESS) st = pass_on(&r, dhere, next, TAG_DKV, "dkv", &their_grads);
    if (st == GAAW_SUCCESS) st = arrive(&r, step, &keys);
    if (st == GAAW_SUCCESS) st = arrive(&r, step, &their_grads);
    here = arrived[step % 2];
    dhere = next;
  }
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
