/* All-to-all attention (a2a_attention.h). What moves: a rank's tensors of its
 * pieces are (n, P B, cp, R) with R = (heads here / cp) x c x D, the heads grouped
 * by the rank that will compute them; packed to (cp, n, P B, R), block g goes to
 * rank g, which receives (cp, n, P B, R): every rank's pieces of its head group.
 * The way back is the same exchange and the inverse permutation. On the timeline:
 * each exchange and the blocks' compute on the row "cp a2a". */
#include "parallel/a2a_attention.h"

#include "backends/runtime/trace.h"
#include "parallel/cp_blocks.h"

typedef struct {
  gaaw_model_t m;
  int cp;
  int64_t PB, R;         /* pieces x sequences; the elements of one head group of one of them */
  int64_t heads_c_d[3];  /* (P B H / cp, c, D): a rank's pieces of one head group */
  gaaw_cp_blocks blocks;
} a2a;

/* out (P BH, c, D) of this rank's frame: its shapes. */
static a2a a2a_of(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *out)
{
  int64_t PB = (int64_t)f->batch * f->pieces, bh = out->shape[0] / m->cp_size;
  a2a x = {m, m->cp_size, PB, bh / PB * out->shape[1] * out->shape[2], {bh, out->shape[1], out->shape[2]},
           {m->ctx, m->cp_size, f->pieces, (int64_t)f->seq * m->cp_size}};
  return x;
}

static gaaw_tensor_t as4(const gaaw_tensor_t *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
  return gaaw_reshape(t, 4, (int64_t[]){a, b, c, d});
}

/* src (n, PB, cp, R) -> send (cp, n, PB, R), through tmp (as large). */
static gaaw_status_t pack(const a2a *x, int n, const gaaw_tensor_t *src, gaaw_tensor_t *tmp, gaaw_tensor_t *send)
{
  gaaw_context_t ctx = x->m->ctx;
  gaaw_tensor_t in = as4(src, n, x->PB, x->cp, x->R), mid = as4(tmp, n, x->cp, x->PB, x->R);
  GAAW_CHECK(gaaw_permute_0213(ctx, &in, &mid));
  gaaw_tensor_t mid2 = as4(tmp, 1, n, x->cp, x->PB * x->R), out = as4(send, 1, x->cp, n, x->PB * x->R);
  GAAW_CHECK(gaaw_permute_0213(ctx, &mid2, &out));
  return GAAW_SUCCESS;
}

/* The inverse: recv (cp, n, PB, R) -> dst (n, PB, cp, R), through tmp. */
static gaaw_status_t unpack(const a2a *x, int n, const gaaw_tensor_t *recv, gaaw_tensor_t *tmp, gaaw_tensor_t *dst)
{
  gaaw_context_t ctx = x->m->ctx;
  gaaw_tensor_t in = as4(recv, 1, x->cp, n, x->PB * x->R), mid = as4(tmp, 1, n, x->cp, x->PB * x->R);
  GAAW_CHECK(gaaw_permute_0213(ctx, &in, &mid));
  gaaw_tensor_t mid2 = as4(tmp, n, x->cp, x->PB, x->R), out = as4(dst, n, x->PB, x->cp, x->R);
  GAAW_CHECK(gaaw_permute_0213(ctx, &mid2, &out));
  return GAAW_SUCCESS;
}

/* Part k (of n) of rank g's block of a head-grouped buffer (cp, n, PB, R), as (PB H/cp, c, D); count
 * parts together from k. */
static gaaw_tensor_t part_of(const a2a *x, const gaaw_tensor_t *buf, int n, int g, int k, int count)
{
  gaaw_tensor_t v = gaaw_reshape(buf, 4, (int64_t[]){count, x->heads_c_d[0], x->heads_c_d[1], x->heads_c_d[2]});
  size_t unit = (size_t)(x->PB * x->R) * gaaw_dtype_size(buf->dtype);
  v.offset += ((size_t)g * (size_t)n + (size_t)k) * unit;
  if (count == 1) v = gaaw_reshape(&v, 3, x->heads_c_d);
  return v;
}

/* Rank g's lse (PB H/cp, c) of the head-sharded lse. */
static gaaw_tensor_t lse_of(const a2a *x, const gaaw_tensor_t *lse, int g)
{
  gaaw_tensor_t v = gaaw_reshape(lse, 2, (int64_t[]){x->heads_c_d[0], x->heads_c_d[1]});
  v.offset += (size_t)g * (size_t)gaaw_tensor_numel(&v) * sizeof(float);
  return v;
}

/* n stacked tensors (n, P BH, c, D) of this rank to its head group's (cp, n, ...) of
 * every rank, in *grouped (allocated here; the caller frees it). The packing's two
 * buffers are freed before it returns: at its peak, three of the size are held. */
static gaaw_status_t exchange(const a2a *x, int n, const gaaw_tensor_t *stacked, gaaw_tensor_t *grouped)
{
  gaaw_model_t m = x->m;
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t tmp = {0}, send = {0};
  int64_t numel = gaaw_tensor_numel(stacked);
  gaaw_status_t st = gaaw_act_alloc(m, GAAW_SHAPE(numel), &tmp);
  if (st == GAAW_SUCCESS) st = gaaw_act_alloc(m, GAAW_SHAPE(numel), &send);
  if (st == GAAW_SUCCESS) st = gaaw_act_alloc(m, GAAW_SHAPE(numel), grouped);
  if (st == GAAW_SUCCESS) st = pack(x, n, stacked, &tmp, &send);
  double t0 = gaaw_pass_clock();
  if (st == GAAW_SUCCESS) st = gaaw_comm_alltoall(m->cp, &send, grouped);
  if (st == GAAW_SUCCESS && gaaw_trace_on(ctx))
    gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "cp a2a"), "all-to-all", t0, "\"tensors\":%d", n);
  gaaw_act_free(m, &tmp);
  gaaw_act_free(m, &send);
  if (st != GAAW_SUCCESS) {
    gaaw_act_free(m, grouped);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

/* The way back: grouped (cp, n, PB, R) to this rank's (n, P BH, c, D) in dst,
 * through two buffers of grouped's size. */
static gaaw_status_t exchange_back(const a2a *x, int n, const gaaw_tensor_t *grouped, gaaw_tensor_t *dst)
{
  gaaw_model_t m = x->m;
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t tmp = {0}, recv = {0};
  int64_t numel = gaaw_tensor_numel(grouped);
  gaaw_status_t st = gaaw_act_alloc(m, GAAW_SHAPE(numel), &recv);
  if (st == GAAW_SUCCESS) st = gaaw_act_alloc(m, GAAW_SHAPE(numel), &tmp);
  double t0 = gaaw_pass_clock();
  if (st == GAAW_SUCCESS) st = gaaw_comm_alltoall(m->cp, grouped, &recv);
  if (st == GAAW_SUCCESS && gaaw_trace_on(ctx))
    gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "cp a2a"), "all-to-all back", t0, "\"tensors\":%d", n);
  if (st == GAAW_SUCCESS) st = unpack(x, n, &recv, &tmp, dst);
  gaaw_act_free(m, &recv);
  gaaw_act_free(m, &tmp);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Rank g's query pieces over every rank's keys, for each g. */
static gaaw_status_t forward_blocks(const a2a *x, const gaaw_tensor_t *grouped, gaaw_tensor_t *out_h,
                                    gaaw_tensor_t *lse, gaaw_tensor_t *part, gaaw_tensor_t *part_lse)
{
  gaaw_context_t ctx = x->m->ctx;
  double t0 = gaaw_pass_clock();
  for (int g = 0; g < x->cp; g++) {
    int started[2] = {0, 0};
    gaaw_tensor_t q = part_of(x, grouped, 3, g, 0, 1), o = part_of(x, out_h, 1, g, 0, 1), l = lse_of(x, lse, g);
    for (int h = 0; h < x->cp; h++) {
      gaaw_tensor_t kv = part_of(x, grouped, 3, h, 1, 2);
      GAAW_CHECK(gaaw_cp_blocks_forward(&x->blocks, g, &q, h, &kv, &o, &l, part, part_lse, started));
    }
  }
  if (gaaw_trace_on(ctx)) gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "cp a2a"), "attention", t0, "\"cp\":%d", x->cp);
  return GAAW_SUCCESS;
}

/* What it holds at its peak (the walk's gaaw_mem_transient): part_lse, then the
 * three buffers of q, k and v's exchange (the rest is less). */
gaaw_status_t gaaw_a2a_attention_forward(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *qkv,
                                         gaaw_tensor_t *out, gaaw_tensor_t *lse)
{
  gaaw_context_t ctx = m->ctx;
  a2a x = a2a_of(m, f, out);
  gaaw_tensor_t part_lse = {0}, grouped = {0}, out_h = {0}, part = {0};
  int64_t piece = x.heads_c_d[0] / f->pieces;
  gaaw_status_t st = gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){piece, x.heads_c_d[1]}, GAAW_MEM_ACTIVATIONS,
                                       &part_lse);
  if (st == GAAW_SUCCESS) st = exchange(&x, 3, qkv, &grouped);
  if (st == GAAW_SUCCESS) st = gaaw_act_alloc(m, GAAW_SHAPE(gaaw_tensor_numel(out)), &out_h);
  if (st == GAAW_SUCCESS) st = gaaw_act_alloc(m, GAAW_SHAPE(piece, x.heads_c_d[1], x.heads_c_d[2]), &part);
  if (st == GAAW_SUCCESS) st = forward_blocks(&x, &grouped, &out_h, lse, &part, &part_lse);
  gaaw_act_free(m, &part);
  gaaw_act_free(m, &grouped);
  if (st == GAAW_SUCCESS) st = exchange_back(&x, 1, &out_h, out);
  gaaw_act_free(m, &out_h);
  gaaw_act_free(m, &part_lse);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* dq, dk, dv of every rank's pieces of this head group, into dgrouped. */
static gaaw_status_t backward_blocks(const a2a *x, const gaaw_tensor_t *grouped, const gaaw_tensor_t *grouped_do,
                                     const gaaw_tensor_t *lse, gaaw_tensor_t *dgrouped)
{
  gaaw_context_t ctx = x->m->ctx;
  double t0 = gaaw_pass_clock();
  for (int g = 0; g < x->cp; g++) {
    gaaw_tensor_t q = part_of(x, grouped, 3, g, 0, 1), dq = part_of(x, dgrouped, 3, g, 0, 1);
    gaaw_tensor_t d = part_of(x, grouped_do, 2, g, 0, 1), o = part_of(x, grouped_do, 2, g, 1, 1), l = lse_of(x, lse, g);
    for (int h = 0; h < x->cp; h++) {
      gaaw_tensor_t kv = part_of(x, grouped, 3, h, 1, 2), dkv = part_of(x, dgrouped, 3, h, 1, 2);
      GAAW_CHECK(gaaw_cp_blocks_backward(&x->blocks, g, &d, &q, h, &kv, &o, &l, &dq, &dkv));
    }
  }
  if (gaaw_trace_on(ctx))
    gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "cp a2a"), "attention backward", t0, "\"cp\":%d", x->cp);
  return GAAW_SUCCESS;
}

/* dout and out (n each) stacked into both (2 n), then exchanged. */
static gaaw_status_t exchange_pair(const a2a *x, const gaaw_tensor_t *dout, const gaaw_tensor_t *out,
                                   gaaw_tensor_t *grouped_do)
{
  gaaw_model_t m = x->m;
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t both = {0};
  int64_t n = gaaw_tensor_numel(out);
  gaaw_status_t st = gaaw_act_alloc(m, GAAW_SHAPE(2, n), &both);
  gaaw_tensor_t first = gaaw_rows_view(&both, 0, 1), second = gaaw_rows_view(&both, 1, 1);
  gaaw_tensor_t dflat = gaaw_reshape(dout, 2, (int64_t[]){1, n}), oflat = gaaw_reshape(out, 2, (int64_t[]){1, n});
  if (st == GAAW_SUCCESS) st = gaaw_cast(ctx, &dflat, &first);
  if (st == GAAW_SUCCESS) st = gaaw_cast(ctx, &oflat, &second);
  if (st == GAAW_SUCCESS) st = exchange(x, 2, &both, grouped_do);
  gaaw_act_free(m, &both);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Its peak: q, k and v exchanged (3 S), dout and out stacked (2 S) during their own
 * exchange (6 S): 11 S, with S the elements of out. */
gaaw_status_t gaaw_a2a_attention_backward(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *dout,
                                          const gaaw_tensor_t *qkv, const gaaw_tensor_t *out, const gaaw_tensor_t *lse,
                                          gaaw_tensor_t *dqkv)
{
  gaaw_context_t ctx = m->ctx;
  a2a x = a2a_of(m, f, out);
  gaaw_tensor_t grouped = {0}, grouped_do = {0}, dgrouped = {0};
  gaaw_status_t st = exchange(&x, 3, qkv, &grouped);
  if (st == GAAW_SUCCESS) st = exchange_pair(&x, dout, out, &grouped_do);
  if (st == GAAW_SUCCESS) st = gaaw_act_zeros(m, GAAW_SHAPE(3 * gaaw_tensor_numel(out)), &dgrouped);
  if (st == GAAW_SUCCESS) st = backward_blocks(&x, &grouped, &grouped_do, lse, &dgrouped);
  gaaw_act_free(m, &grouped);
  gaaw_act_free(m, &grouped_do);
  if (st == GAAW_SUCCESS) st = exchange_back(&x, 3, &dgrouped, dqkv);
  gaaw_act_free(m, &dgrouped);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
