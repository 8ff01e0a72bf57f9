/* The GPT transformer block on this rank (pre-norm; GPT-2, or LLaMA's with RoPE,
 * grouped-query attention and no biases):
 *   x2  = x  + attn(norm_1(x))     heads split over tp: QKV column-parallel,
 *                                  output projection row-parallel
 *   out = x2 + mlp(norm_2(x2))     c_fc column-parallel, c_proj row-parallel
 * Shapes (P = tp, N = B*T tokens, Nl = N/P with sequence parallelism else N,
 * at cp > 1: B = sequences x their 2 pieces here, T = tokens of a piece (cp_split.h),
 * C = dim, Hl = heads/P query heads, Kl = this rank's kv heads (kv_heads/P, or 1
 * when P exceeds kv_heads: replicated), D = head_dim, Ql = Hl D, Fl = ffn/P):
 *   x, x2, out: (Nl, C)   qkv: (N, (Hl + 2 Kl) D) = (B, T, Hl + 2 Kl, D)
 *   q, k, v: (B Hl, T, D) (k and v repeated over their query heads)   att: (N, Ql)
 *   u: (N, Fl) or (N, 2 Fl) for SwiGLU   a: (N, Fl) */
#include <string.h>

#include "backends/fused.h"
#include "parallel/a2a_attention.h"
#include "parallel/gpt.h"
#include "parallel/linear.h"
#include "parallel/norm.h"
#include "parallel/ring_attention.h"
#include "parallel/tp.h"

/* parameter slots */
enum { P_LN1_W, P_LN1_B, P_ATTN_W, P_ATTN_B, P_PROJ_W, P_PROJ_B, P_LN2_W, P_LN2_B, P_FC_W, P_FC_B, P_FC2_W, P_FC2_B };
/* saved-for-backward slots (S_PROBS with the matrix attention, S_LSE with the blocked;
 * S_QKVP: q, k, v as (3, B Hl, T, D), or the projection's (N, 3 Ql) with qkv_core) */
enum { S_H1, S_MEAN1, S_RSTD1, S_H1G, S_QKVP, S_PROBS, S_ATT, S_X2, S_H2, S_MEAN2, S_RSTD2, S_H2G, S_U, S_A, S_LSE };
/* an MoE MLP (gpt_moe.c) keeps its tensors after these, in place of S_U and S_A */
_Static_assert((int)S_LSE < (int)GAAW_GPT_MOE_SAVED && (int)P_FC_W == (int)GAAW_GPT_MOE_ROUTER, "gpt_moe.c's slots");

typedef struct {
  gaaw_frame *f; /* the microbatch */
  int64_t B, T, N, Nl, C, Hl, Kl, D, Ql, QKVl, Fl, Fu;
  int sp;
  int ring;     /* context parallelism: the attention core is the ring (ring_attention.h) */
  int a2a;      /* ... or the all-to-all (a2a_attention.h) */
  int blocked;  /* the attention core: blocked (1) or matrix (0), blocked_attention */
  int qkv_core; /* the matrix core reads the QKV projection's layout (qkv_attention) */
} block_dims;

static int blocked_attention(gaaw_model_t m, int64_t T);
static int qkv_attention(gaaw_model_t m, int blocked);

static block_dims dims_of(gaaw_model_t m, gaaw_frame *f)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  block_dims d;
  d.f = f;
  d.B = (int64_t)f->batch * f->pieces; /* a piece is a sequence to the per-token work */
  d.T = f->seq / f->pieces;
  d.N = d.B * d.T;
  d.sp = g->sequence_parallel && m->tp_size > 1;
  d.Nl = d.sp ? d.N / m->tp_size : d.N;
  d.C = g->dim;
  d.Hl = g->heads / m->tp_size;
  d.Kl = g->kv_heads >= m->tp_size ? g->kv_heads / m->tp_size : 1;
  d.D = g->head_dim;
  d.Ql = d.Hl * d.D;
  d.QKVl = (d.Hl + 2 * d.Kl) * d.D;
  d.Fl = g->ffn / m->tp_size;
  d.Fu = g->activation == GAAW_ACT_SWIGLU ? 2 * d.Fl : d.Fl;
  d.a2a = m->cp_a2a;
  d.ring = m->cp_size > 1 && !d.a2a;
  d.blocked = m->cp_size > 1 || blocked_attention(m, d.T); /* context parallelism's blocks are the blocked kernels */
  d.qkv_core = qkv_attention(m, d.blocked);
  return d;
}

#define PARAM(k) gaaw_layer_param(m, l, (k))
#define GRAD(k) gaaw_layer_grad(m, l, (k))
#define NORM_BIAS(k) (m->gpt.norm == GAAW_NORM_LAYERNORM ? PARAM(k) : NULL)
#define NORM_BIAS_GRAD(k) (m->gpt.norm == GAAW_NORM_LAYERNORM ? GRAD(k) : NULL)
/* a linear's bias, or its slot for the gradient; NULL and -1 without biases */
#define BIAS(k) (m->gpt.no_bias ? NULL : PARAM(k))
#define BIAS_GRAD(k) (m->gpt.no_bias ? NULL : GRAD(k))
#define BIAS_SLOT(k) (m->gpt.no_bias ? -1 : (k))

/* ---------------------------------------------------------------- shared pieces */

/* Into the tensor-parallel region: h (Nl, C) -> hg (N, C). Without sequence
 * parallelism the input is already whole (copy_to_tp: identity), and *hg = h. */
static gaaw_status_t enter_tp(gaaw_model_t m, gaaw_layer *l, int slot, const block_dims *d, gaaw_tensor_t *h,
                              gaaw_tensor_t **hg)
{
  gaaw_context_t ctx = m->ctx;
  if (!d->sp) {
    *hg = h;
    return GAAW_SUCCESS;
  }
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, slot, 0, GAAW_SHAPE(d->N, d->C), hg));
  GAAW_CHECK(gaaw_tp_gather_rows(m->tp, h, *hg));
  return GAAW_SUCCESS;
}

/* Out of it: partial sums y (N, C) -> the (Nl, C) result, plus the replicated bias
 * (NULL: left to the caller, which fuses it into the residual add). */
static gaaw_status_t leave_tp(gaaw_model_t m, const block_dims *d, gaaw_scratch *s, gaaw_tensor_t *y,
                              const gaaw_tensor_t *bias, gaaw_tensor_t **out)
{
  gaaw_context_t ctx = m->ctx;
  if (d->sp) {
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->Nl, d->C), out));
    GAAW_CHECK(gaaw_tp_reduce_scatter_rows(m->tp, y, *out));
  } else {
    GAAW_CHECK(gaaw_tp_allreduce(m->tp, y));
    *out = y;
  }
  if (bias) GAAW_CHECK(gaaw_bias_add(ctx, *out, bias));
  return GAAW_SUCCESS;
}

/* The conjugates in backward: d(out) (Nl, C) -> d(y) (N, C) ... */
static gaaw_status_t enter_tp_backward(gaaw_model_t m, const block_dims *d, gaaw_scratch *s,
                                       const gaaw_tensor_t *dout, const gaaw_tensor_t **dy)
{
  gaaw_context_t ctx = m->ctx;
  if (!d->sp) {
    *dy = dout;
    return GAAW_SUCCESS;
  }
  gaaw_tensor_t *g;
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->C), &g));
  GAAW_CHECK(gaaw_tp_gather_rows(m->tp, dout, g));
  *dy = g;
  return GAAW_SUCCESS;
}

/* ... and d(hg) (N, C), partial over tp -> d(h) (Nl, C). */
static gaaw_status_t leave_tp_backward(gaaw_model_t m, const block_dims *d, gaaw_scratch *s, gaaw_tensor_t *dhg,
                                       gaaw_tensor_t **dh)
{
  gaaw_context_t ctx = m->ctx;
  if (!d->sp) {
    GAAW_CHECK(gaaw_tp_allreduce(m->tp, dhg));
    *dh = dhg;
    return GAAW_SUCCESS;
  }
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->Nl, d->C), dh));
  GAAW_CHECK(gaaw_tp_reduce_scatter_rows(m->tp, dhg, *dh));
  return GAAW_SUCCESS;
}

/* A (B, X, Y, D) view of a contiguous tensor. */
static gaaw_tensor_t as4(const gaaw_tensor_t *t, int64_t a, int64_t b, int64_t c, int64_t e)
{
  return gaaw_reshape(t, 4, (int64_t[]){a, b, c, e});
}

/* Slice `which` (0 q, 1 k, 2 v) of qkvp (3, B Hl, T, D) as (B Hl, T, D). */
static gaaw_tensor_t qkv_part(const gaaw_tensor_t *qkvp, const block_dims *d, int which)
{
  gaaw_tensor_t v = gaaw_reshape(qkvp, 3, (int64_t[]){d->B * d->Hl, d->T, d->D});
  v.offset += (size_t)(which * d->B * d->Hl * d->T * d->D) * gaaw_dtype_size(qkvp->dtype);
  return v;
}

/* ---------------------------------------------------------------- the attention core */

/* Which attention core runs (option attention) for sequences of T tokens. With auto,
 * the default: the blocked kernel (gaaw_flash_attention_*) from T = 512 up wherever
 * the backend has it (host, OpenCL), else the (T, T) matrix kernel. The blocked one
 * saves memory, not time: on the host its forward + backward took about twice as
 * long as the matrix core's at every T from 128 to 2048 (doc/benchmarks.md), but the
 * matrix core keeps (B Hl, T, T) probabilities per layer, small below 512 tokens and
 * what grows above (attention=matrix keeps the faster core where memory allows).
 * The choice depends on T only, not on recompute, so every recompute mode gives the
 * same bits. blocked on a backend without it fails at the first forward with
 * GAAW_ERR_UNSUPPORTED.
 *   blocked: keeps lse (B Hl, T) f32; the probabilities are recomputed block by block
 *            inside the backward kernel, so no (T, T) matrix exists at any time, and
 *            selective recomputation has nothing left to drop (it then runs as none);
 *   matrix:  keeps probs (B Hl, T, T), which selective recomputation drops after
 *            forward and recomputes in backward (recompute_probs).
 * Both keep q, k, v (qkvp) and the merged output (att). */
static int blocked_attention(gaaw_model_t m, int64_t T)
{
  const char *mode = gaaw_ctx_string(m->ctx, "attention"); /* checked at init */
  if (strcmp(mode, "auto") != 0) return strcmp(mode, "blocked") == 0;
  if (T < 512) return 0;
  int fwd = 0, bwd = 0;
  return gaaw_kernel_available(m->ctx, "attention_block_forward", &fwd) == GAAW_SUCCESS &&
         gaaw_kernel_available(m->ctx, "attention_block_backward", &bwd) == GAAW_SUCCESS && fwd && bwd;
}

/* Whether the matrix core runs on the QKV projection's (B, T, 3 Hl, D) layout and
 * writes the merged (B, T, Hl, D) (gaaw_attention_qkv_*, host and OpenCL): no
 * reshuffles into heads and back, which took 3% of a step of the host path; CUDA
 * (and grouped-query attention everywhere) cuts the heads out with qkv_heads. */
static int qkv_attention(gaaw_model_t m, int blocked)
{
  int fwd = 0, bwd = 0;
  return !blocked && m->gpt.kv_heads == m->gpt.heads && /* multi-head: the kernels read 3 Hl heads */ gaaw_kernel_available(m->ctx, "attention_qkv_forward", &fwd) == GAAW_SUCCESS &&
         gaaw_kernel_available(m->ctx, "attention_qkv_backward", &bwd) == GAAW_SUCCESS && fwd && bwd;
}

/* k and v, consecutive in qkvp, as one (2, B Hl, T, D) tensor: what the ring passes on;
 * q, k and v as one (3, B Hl, T, D): what the all-to-all exchanges. */
static gaaw_tensor_t kv_pair(const gaaw_tensor_t *k, const block_dims *d)
{
  return gaaw_reshape(k, 4, (int64_t[]){2, d->B * d->Hl, d->T, d->D});
}

static gaaw_tensor_t qkv_stack(const gaaw_tensor_t *q, const block_dims *d)
{
  return gaaw_reshape(q, 4, (int64_t[]){3, d->B * d->Hl, d->T, d->D});
}

/* lse of the blocked core, slot S_LSE (B Hl T) f32, seen as (B Hl, T). */
static gaaw_tensor_t lse_view(const gaaw_tensor_t *lse, const block_dims *d)
{
  return gaaw_reshape(lse, 2, (int64_t[]){d->B * d->Hl, d->T});
}

/* o (B Hl, T, D) = attention of q, k, v, keeping what the core's backward needs. */
static gaaw_status_t attention_core(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s,
                                    const gaaw_tensor_t *q, const gaaw_tensor_t *k, const gaaw_tensor_t *v,
                                    gaaw_tensor_t **o)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *keep;
  if (d->blocked) {
    GAAW_CHECK(gaaw_layer_alloc_stat(m, d->f, l, S_LSE, d->B * d->Hl * d->T, &keep));
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->B * d->Hl, d->T, d->D), o));
    gaaw_tensor_t lse = lse_view(keep, d);
    if (d->ring) {
      gaaw_tensor_t kv = kv_pair(k, d);
      GAAW_CHECK(gaaw_ring_attention_forward(m, d->f, q, &kv, *o, &lse));
    } else if (d->a2a) {
      gaaw_tensor_t qkv = qkv_stack(q, d);
      GAAW_CHECK(gaaw_a2a_attention_forward(m, d->f, &qkv, *o, &lse));
    } else
      GAAW_CHECK(gaaw_flash_attention_forward(ctx, q, k, v, *o, &lse));
  } else {
    GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_PROBS, 0, GAAW_SHAPE(d->B * d->Hl, d->T, d->T), &keep));
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->B * d->Hl, d->T, d->D), o));
    GAAW_CHECK(gaaw_attention_forward(ctx, q, k, v, keep, *o));
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- forward */

/* y (Nl, C) = the output projection of att (N, Ql), before its bias. */
static gaaw_status_t project_attention(gaaw_model_t m, const block_dims *d, gaaw_scratch *s, gaaw_layer *l,
                                       const gaaw_tensor_t *att, gaaw_tensor_t **y)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *proj;
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->C), &proj));
  GAAW_CHECK(gaaw_linear_forward(ctx, att, PARAM(P_PROJ_W), NULL, proj));
  GAAW_CHECK(leave_tp(m, d, s, proj, NULL, y));
  return GAAW_SUCCESS;
}

/* RoPE on the q and k heads of qkv (N, QKVl) = (B, T, Hl + 2 Kl, D), in place
 * (inverse: its backward on dqkv); nothing with learned positions. */
static gaaw_status_t rotate_qk(gaaw_model_t m, const block_dims *d, gaaw_tensor_t *qkv, int inverse)
{
  gaaw_context_t ctx = m->ctx;
  if (m->gpt.position != GAAW_POSITION_ROPE) return GAAW_SUCCESS;
  /* each piece's rows (cp_split.h) at the positions of its tokens */
  int pieces = d->f->pieces;
  int64_t sequences = d->B / pieces;
  for (int i = 0; i < pieces; i++) {
    gaaw_tensor_t rows = gaaw_rows_view(qkv, i * sequences * d->T, sequences * d->T);
    gaaw_tensor_t x = as4(&rows, sequences, d->T, d->Hl + 2 * d->Kl, d->D);
    gaaw_tensor_t table = gaaw_rows_view(&m->rope_table, d->f->piece_start[i], d->T);
    if (inverse)
      GAAW_CHECK(gaaw_rope_backward(ctx, &x, &table, d->Hl + d->Kl, &x));
    else
      GAAW_CHECK(gaaw_rope_forward(ctx, &x, &table, d->Hl + d->Kl, &x));
  }
  return GAAW_SUCCESS;
}

/* q, k, v of the kept qkvp (3, B Hl, T, D), each as (B, Hl, T, D). */
static void qkv_heads_of(const gaaw_tensor_t *qkvp, const block_dims *d, gaaw_tensor_t out[3])
{
  for (int k = 0; k < 3; k++) {
    gaaw_tensor_t part = qkv_part(qkvp, d, k);
    out[k] = as4(&part, d->B, d->Hl, d->T, d->D);
  }
}

/* y (Nl, C): the attention branch before its output bias (added by mlp_forward's
 * fused residual add and norm_2). */
static gaaw_status_t attention_forward(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s,
                                       const gaaw_tensor_t *x, gaaw_tensor_t **y)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *h1, *mean1 = NULL, *rstd1, *h1g, *qkv, *qkvp, *o, *att;
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_H1, 0, GAAW_SHAPE(d->Nl, d->C), &h1));
  if (m->gpt.norm == GAAW_NORM_LAYERNORM) GAAW_CHECK(gaaw_layer_alloc_stat(m, d->f, l, S_MEAN1, d->Nl, &mean1));
  GAAW_CHECK(gaaw_layer_alloc_stat(m, d->f, l, S_RSTD1, d->Nl, &rstd1));
  GAAW_CHECK(
    gaaw_norm_forward(ctx, m->gpt.norm, m->gpt.norm_eps, x, PARAM(P_LN1_W), NORM_BIAS(P_LN1_B), h1, mean1, rstd1));
  GAAW_CHECK(enter_tp(m, l, S_H1G, d, h1, &h1g));
  if (d->qkv_core) {
    /* qkv (N, 3 Ql) = (B, T, 3 Hl, D), kept (rotated); att (N, Ql) = (B, T, Hl, D) */
    GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_QKVP, 0, GAAW_SHAPE(d->N, d->QKVl), &qkv));
    GAAW_CHECK(gaaw_linear_forward(ctx, h1g, PARAM(P_ATTN_W), BIAS(P_ATTN_B), qkv));
    GAAW_CHECK(rotate_qk(m, d, qkv, 0));
    gaaw_tensor_t *probs;
    GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_PROBS, 0, GAAW_SHAPE(d->B * d->Hl, d->T, d->T), &probs));
    GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_ATT, 0, GAAW_SHAPE(d->N, d->Ql), &att));
    gaaw_tensor_t qkv4 = as4(qkv, d->B, d->T, 3 * d->Hl, d->D), att4 = as4(att, d->B, d->T, d->Hl, d->D);
    GAAW_CHECK(gaaw_attention_qkv_forward(ctx, &qkv4, probs, &att4));
    return project_attention(m, d, s, l, att, y);
  }
  /* qkv (N, QKVl) = (B, T, Hl + 2 Kl, D), rotated -> q, k, v (3, B Hl, T, D) */
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->QKVl), &qkv));
  GAAW_CHECK(gaaw_linear_forward(ctx, h1g, PARAM(P_ATTN_W), BIAS(P_ATTN_B), qkv));
  GAAW_CHECK(rotate_qk(m, d, qkv, 0));
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_QKVP, 0, GAAW_SHAPE(1, 3, d->B, d->Hl * d->T * d->D), &qkvp));
  gaaw_tensor_t in = as4(qkv, d->B, d->T, d->Hl + 2 * d->Kl, d->D), heads[3];
  qkv_heads_of(qkvp, d, heads);
  GAAW_CHECK(gaaw_qkv_heads_forward(ctx, &in, d->Kl, &heads[0], &heads[1], &heads[2]));
  gaaw_tensor_t q = qkv_part(qkvp, d, 0), k = qkv_part(qkvp, d, 1), v = qkv_part(qkvp, d, 2);
  GAAW_CHECK(attention_core(m, l, d, s, &q, &k, &v, &o));
  /* merge heads: (B, Hl, T, D) -> (B, T, Hl, D) = (N, Ql) */
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_ATT, 0, GAAW_SHAPE(d->N, d->Ql), &att));
  in = as4(o, d->B, d->Hl, d->T, d->D);
  gaaw_tensor_t out4 = as4(att, d->B, d->T, d->Hl, d->D);
  GAAW_CHECK(gaaw_permute_0213(ctx, &in, &out4));
  return project_attention(m, d, s, l, att, y);
}

/* The rows an MoE MLP routes here: sequence parallelism's own, else (tp > 1) a
 * tp-th of the whole t, rows [r N / P, (r + 1) N / P) on tp rank r. */
static gaaw_tensor_t moe_rows(gaaw_model_t m, const block_dims *d, const gaaw_tensor_t *t)
{
  if (d->sp || m->tp_size == 1) return *t;
  int64_t n = d->N / m->tp_size;
  return gaaw_rows_view(t, m->tp_rank * n, n);
}

/* out = x2 + the MoE MLP of h2 (Nl, C): this rank's rows through it, gathered over
 * tp when each rank held them all. */
static gaaw_status_t moe_forward(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s,
                                 const gaaw_tensor_t *h2, const gaaw_tensor_t *x2, gaaw_tensor_t *out)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t hl = moe_rows(m, d, h2), *zl, *z;
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(hl.shape[0], d->C), &zl));
  GAAW_CHECK(gaaw_gpt_moe_forward(m, l, d->f, &hl, zl));
  z = zl;
  if (!d->sp && m->tp_size > 1) {
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->C), &z));
    GAAW_CHECK(gaaw_tp_gather_rows(m->tp, zl, z));
  }
  GAAW_CHECK(gaaw_add(ctx, x2, z, out));
  return GAAW_SUCCESS;
}

/* x2 = x + y + attention's output bias, fused with norm_2; then the MLP branch,
 * its bias fused with the GELU, c_proj's with the residual add. y (Nl, C) is
 * attention_forward's scratch. */
static gaaw_status_t mlp_forward(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s,
                                 const gaaw_tensor_t *x, gaaw_tensor_t *ya, gaaw_tensor_t *out)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *x2, *h2, *mean2 = NULL, *rstd2, *h2g, *u, *a, *z, *y;
  int swiglu = m->gpt.activation == GAAW_ACT_SWIGLU;
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_X2, 0, GAAW_SHAPE(d->Nl, d->C), &x2));
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_H2, 0, GAAW_SHAPE(d->Nl, d->C), &h2));
  if (m->gpt.norm == GAAW_NORM_LAYERNORM) GAAW_CHECK(gaaw_layer_alloc_stat(m, d->f, l, S_MEAN2, d->Nl, &mean2));
  GAAW_CHECK(gaaw_layer_alloc_stat(m, d->f, l, S_RSTD2, d->Nl, &rstd2));
  GAAW_CHECK(gaaw_add_norm_forward(ctx, m->gpt.norm, m->gpt.norm_eps, x, ya, BIAS(P_PROJ_B), PARAM(P_LN2_W),
                                   NORM_BIAS(P_LN2_B), x2, h2, mean2, rstd2));
  if (l->moe_layer) return moe_forward(m, l, d, s, h2, x2, out);
  GAAW_CHECK(enter_tp(m, l, S_H2G, d, h2, &h2g));
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_U, 0, GAAW_SHAPE(d->N, d->Fu), &u));
  GAAW_CHECK(gaaw_linear_forward(ctx, h2g, PARAM(P_FC_W), swiglu ? BIAS(P_FC_B) : NULL, u));
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_A, 0, GAAW_SHAPE(d->N, d->Fl), &a));
  if (swiglu)
    GAAW_CHECK(gaaw_swiglu_forward(ctx, u, a));
  else if (m->gpt.no_bias)
    GAAW_CHECK(gaaw_gelu_forward(ctx, u, a));
  else
    GAAW_CHECK(gaaw_bias_gelu_forward(ctx, u, PARAM(P_FC_B), a));
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->C), &z));
  GAAW_CHECK(gaaw_linear_forward(ctx, a, PARAM(P_FC2_W), NULL, z));
  GAAW_CHECK(leave_tp(m, d, s, z, NULL, &y));
  if (m->gpt.no_bias)
    GAAW_CHECK(gaaw_add(ctx, x2, y, out));
  else
    GAAW_CHECK(gaaw_bias_residual_add(ctx, x2, y, PARAM(P_FC2_B), out));
  return GAAW_SUCCESS;
}

static gaaw_status_t block_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x,
                                   gaaw_tensor_t *out)
{
  gaaw_context_t ctx = m->ctx;
  block_dims d = dims_of(m, f);
  gaaw_scratch s = {0};
  gaaw_tensor_t *y = NULL;
  gaaw_status_t st = gaaw_act_alloc(m, GAAW_SHAPE(d.Nl, d.C), out);
  if (st == GAAW_SUCCESS) st = attention_forward(m, l, &d, &s, x, &y);
  if (st == GAAW_SUCCESS) st = mlp_forward(m, l, &d, &s, x, y, out);
  /* selective recomputation: the (B Hl, T, T) probabilities of the matrix core are
   * the s^2 part; backward recomputes them from the kept q and k (the blocked core
   * keeps none) */
  if (st == GAAW_SUCCESS && m->recompute == GAAW_RECOMPUTE_SELECTIVE && !d.blocked)
    gaaw_act_free(m, &gaaw_layer_saved(f, l)[S_PROBS]);
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- backward */

/* dx2 += d(norm_2)/dx2, given dh2. */
static gaaw_status_t norm_2_backward(gaaw_model_t m, gaaw_layer *l, const block_dims *d, const gaaw_tensor_t *dh2,
                                     gaaw_tensor_t *dx2)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *sv = gaaw_layer_saved(d->f, l);
  GAAW_CHECK(gaaw_norm_backward(ctx, m->gpt.norm, dh2, &sv[S_X2], PARAM(P_LN2_W), &sv[S_MEAN2], &sv[S_RSTD2], dx2,
                                GRAD(P_LN2_W), NORM_BIAS_GRAD(P_LN2_B)));
  return GAAW_SUCCESS;
}

/* dx2 += d(mlp branch)/dx2, given dout = d(out). */
static gaaw_status_t mlp_backward(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s,
                                  const gaaw_tensor_t *dout, gaaw_tensor_t *dx2)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *sv = gaaw_layer_saved(d->f, l), *da, *du, *dh2g, *dh2;
  const gaaw_tensor_t *dz, *h2g = d->sp ? &sv[S_H2G] : &sv[S_H2];
  if (l->moe_layer) { /* this rank's rows, their dh2 gathered over tp when each rank holds them all */
    gaaw_tensor_t hl = moe_rows(m, d, &sv[S_H2]), dyl = moe_rows(m, d, dout), *dhl;
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(hl.shape[0], d->C), &dhl));
    GAAW_CHECK(gaaw_gpt_moe_backward(m, l, d->f, &hl, &dyl, dhl));
    dh2 = dhl;
    if (!d->sp && m->tp_size > 1) {
      GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->C), &dh2));
      GAAW_CHECK(gaaw_tp_gather_rows(m->tp, dhl, dh2));
    }
    return norm_2_backward(m, l, d, dh2, dx2);
  }
  if (!m->gpt.no_bias) GAAW_CHECK(gaaw_bias_backward(ctx, dout, GRAD(P_FC2_B)));
  GAAW_CHECK(enter_tp_backward(m, d, s, dout, &dz));
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->Fl), &da));
  GAAW_CHECK(gaaw_layer_linear_backward(m, l, d->f, dz, &sv[S_A], PARAM(P_FC2_W), da, P_FC2_W, -1, -1));
  int swiglu = m->gpt.activation == GAAW_ACT_SWIGLU; /* its backward adds to a zeroed du */
  GAAW_CHECK(gaaw_scratch_alloc(m, s, swiglu, GAAW_SHAPE(d->N, d->Fu), &du));
  GAAW_CHECK(swiglu ? gaaw_swiglu_backward(ctx, da, &sv[S_U], du) : gaaw_gelu_backward_set(ctx, da, &sv[S_U], du));
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->C), &dh2g));
  GAAW_CHECK(gaaw_layer_linear_backward(m, l, d->f, du, h2g, PARAM(P_FC_W), dh2g, P_FC_W, -1, BIAS_SLOT(P_FC_B)));
  GAAW_CHECK(leave_tp_backward(m, d, s, dh2g, &dh2));
  return norm_2_backward(m, l, d, dh2, dx2);
}

/* Selective recomputation with the matrix core: the softmax of the scores again, by
 * the forward's own kernel on the kept q, k, v (so bit-identical), into the saved slot;
 * the output o is scratch. */
static gaaw_status_t recompute_probs(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *sv = gaaw_layer_saved(d->f, l), *probs, *o;
  GAAW_CHECK(gaaw_layer_alloc(m, d->f, l, S_PROBS, 0, GAAW_SHAPE(d->B * d->Hl, d->T, d->T), &probs));
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->B * d->Hl, d->T, d->D), &o));
  if (d->qkv_core) { /* the kept qkv (B, T, 3 Hl, D); o merged, (B, T, Hl, D) */
    gaaw_tensor_t qkv4 = as4(&sv[S_QKVP], d->B, d->T, 3 * d->Hl, d->D), o4 = as4(o, d->B, d->T, d->Hl, d->D);
    GAAW_CHECK(gaaw_attention_qkv_forward(ctx, &qkv4, probs, &o4));
    return GAAW_SUCCESS;
  }
  gaaw_tensor_t q = qkv_part(&sv[S_QKVP], d, 0), k = qkv_part(&sv[S_QKVP], d, 1), v = qkv_part(&sv[S_QKVP], d, 2);
  GAAW_CHECK(gaaw_attention_forward(ctx, &q, &k, &v, probs, o));
  return GAAW_SUCCESS;
}

/* dq, dk, dv += the attention core's gradients from dout (B Hl, T, D). */
static gaaw_status_t attention_core_backward(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s,
                                             const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                             const gaaw_tensor_t *k, const gaaw_tensor_t *v, gaaw_tensor_t *dq,
                                             gaaw_tensor_t *dk, gaaw_tensor_t *dv)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *sv = gaaw_layer_saved(d->f, l), *o, *dprobs;
  if (d->blocked) {
    /* the core's output o (B Hl, T, D), from the kept att (B, T, Hl, D) */
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->B, d->Hl, d->T, d->D), &o));
    gaaw_tensor_t in = as4(&sv[S_ATT], d->B, d->T, d->Hl, d->D);
    GAAW_CHECK(gaaw_permute_0213(ctx, &in, o));
    gaaw_tensor_t o3 = gaaw_reshape(o, 3, (int64_t[]){d->B * d->Hl, d->T, d->D}), lse = lse_view(&sv[S_LSE], d);
    if (d->ring) { /* dk and dv come home whole: the pair is overwritten */
      gaaw_tensor_t kv = kv_pair(k, d), dkv = kv_pair(dk, d);
      GAAW_CHECK(gaaw_ring_attention_backward(m, d->f, dout, q, &kv, &o3, &lse, dq, &dkv));
    } else if (d->a2a) { /* the same: dq, dk and dv overwritten */
      gaaw_tensor_t qkv = qkv_stack(q, d), dqkv = qkv_stack(dq, d);
      GAAW_CHECK(gaaw_a2a_attention_backward(m, d->f, dout, &qkv, &o3, &lse, &dqkv));
    } else
      GAAW_CHECK(gaaw_flash_attention_backward(ctx, dout, q, k, v, &o3, &lse, dq, dk, dv));
    return GAAW_SUCCESS;
  }
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->B * d->Hl, d->T, d->T), &dprobs));
  if (!sv[S_PROBS].buf) GAAW_CHECK(recompute_probs(m, l, d, s));
  GAAW_CHECK(gaaw_attention_backward(ctx, dout, q, k, v, &sv[S_PROBS], dprobs, dq, dk, dv));
  return GAAW_SUCCESS;
}

/* dx += d(norm_1, the QKV projection and RoPE)/dx, given dqkv (N, QKVl), which
 * RoPE's backward rotates back in place. */
static gaaw_status_t qkv_backward(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s,
                                  const gaaw_tensor_t *x, gaaw_tensor_t *dqkv, gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *sv = gaaw_layer_saved(d->f, l), *dh1g, *dh1;
  GAAW_CHECK(rotate_qk(m, d, dqkv, 1));
  const gaaw_tensor_t *h1g = d->sp ? &sv[S_H1G] : &sv[S_H1];
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->C), &dh1g));
  GAAW_CHECK(
    gaaw_layer_linear_backward(m, l, d->f, dqkv, h1g, PARAM(P_ATTN_W), dh1g, P_ATTN_W, -1, BIAS_SLOT(P_ATTN_B)));
  GAAW_CHECK(leave_tp_backward(m, d, s, dh1g, &dh1));
  GAAW_CHECK(gaaw_norm_backward(ctx, m->gpt.norm, dh1, x, PARAM(P_LN1_W), &sv[S_MEAN1], &sv[S_RSTD1], dx,
                                GRAD(P_LN1_W), NORM_BIAS_GRAD(P_LN1_B)));
  return GAAW_SUCCESS;
}

/* dx += d(attention branch)/dx, given dx2 = d(x2). */
static gaaw_status_t attention_backward(gaaw_model_t m, gaaw_layer *l, const block_dims *d, gaaw_scratch *s,
                                        const gaaw_tensor_t *x, const gaaw_tensor_t *dx2, gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t *sv = gaaw_layer_saved(d->f, l), *datt, *dheads, *dqkvp, *dqkv;
  const gaaw_tensor_t *dy;
  if (!m->gpt.no_bias) GAAW_CHECK(gaaw_bias_backward(ctx, dx2, GRAD(P_PROJ_B)));
  GAAW_CHECK(enter_tp_backward(m, d, s, dx2, &dy));
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->Ql), &datt));
  GAAW_CHECK(gaaw_layer_linear_backward(m, l, d->f, dy, &sv[S_ATT], PARAM(P_PROJ_W), datt, P_PROJ_W, -1, -1));
  if (d->qkv_core) {
    /* dqkv (N, 3 Ql) = (B, T, 3 Hl, D) from datt (B, T, Hl, D) */
    gaaw_tensor_t *dprobs;
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->QKVl), &dqkv)); /* overwritten */
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->B * d->Hl, d->T, d->T), &dprobs));
    gaaw_tensor_t qkv4 = as4(&sv[S_QKVP], d->B, d->T, 3 * d->Hl, d->D), dqkv4 = as4(dqkv, d->B, d->T, 3 * d->Hl, d->D);
    gaaw_tensor_t datt4 = as4(datt, d->B, d->T, d->Hl, d->D);
    if (!sv[S_PROBS].buf) GAAW_CHECK(recompute_probs(m, l, d, s));
    GAAW_CHECK(gaaw_attention_qkv_backward(ctx, &datt4, &qkv4, &sv[S_PROBS], dprobs, &dqkv4));
    return qkv_backward(m, l, d, s, x, dqkv, dx);
  }
  /* (B, T, Hl, D) -> (B, Hl, T, D) */
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->B, d->Hl, d->T, d->D), &dheads));
  gaaw_tensor_t in = as4(datt, d->B, d->T, d->Hl, d->D);
  GAAW_CHECK(gaaw_permute_0213(ctx, &in, dheads));
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 1, GAAW_SHAPE(1, 3, d->B, d->Hl * d->T * d->D), &dqkvp));
  gaaw_tensor_t q = qkv_part(&sv[S_QKVP], d, 0), k = qkv_part(&sv[S_QKVP], d, 1), v = qkv_part(&sv[S_QKVP], d, 2);
  gaaw_tensor_t dq = qkv_part(dqkvp, d, 0), dk = qkv_part(dqkvp, d, 1), dv = qkv_part(dqkvp, d, 2);
  gaaw_tensor_t dout3 = gaaw_reshape(dheads, 3, (int64_t[]){d->B * d->Hl, d->T, d->D});
  GAAW_CHECK(attention_core_backward(m, l, d, s, &dout3, &q, &k, &v, &dq, &dk, &dv));
  /* (3, B Hl, T, D) -> (B, T, Hl + 2 Kl, D) = (N, QKVl), key and value heads summed over their groups */
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(d->N, d->QKVl), &dqkv));
  gaaw_tensor_t grads[3], out4 = as4(dqkv, d->B, d->T, d->Hl + 2 * d->Kl, d->D);
  qkv_heads_of(dqkvp, d, grads);
  GAAW_CHECK(gaaw_qkv_heads_backward(ctx, &grads[0], &grads[1], &grads[2], d->Kl, &out4));
  return qkv_backward(m, l, d, s, x, dqkv, dx);
}

static gaaw_status_t block_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dout,
                                    gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  if (!dx) GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "a transformer block cannot be the first layer");
  block_dims d = dims_of(m, f);
  gaaw_scratch s = {0};
  gaaw_tensor_t *dx2;
  /* residuals: d(x2) = d(out) + .., d(x) = d(x2) + .. */
  gaaw_status_t st = gaaw_scratch_alloc(m, &s, 0, GAAW_SHAPE(d.Nl, d.C), &dx2);
  if (st == GAAW_SUCCESS) st = gaaw_cast(ctx, dout, dx2);
  if (st == GAAW_SUCCESS) st = mlp_backward(m, l, &d, &s, dout, dx2);
  if (st == GAAW_SUCCESS) st = gaaw_act_copy(m, dx2, dx);
  if (st == GAAW_SUCCESS) st = attention_backward(m, l, &d, &s, gaaw_layer_input(f, l), dx2, dx);
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- memory */

/* Context parallelism's own buffers at their peak in forward (backward 0) or
 * backward, allocated and freed inside its core: the ring's keys and values in
 * flight (2, as k and v) with one piece's partial result and its lse in forward,
 * keys and their gradients (4) in backward; the all-to-all's (a2a_attention.c), with
 * S = one q-sized tensor, a piece's lse and q, k, v's exchange (9 S) in forward,
 * q, k, v (3 S) and the exchange of dout and out (8 S) in backward. */
static int64_t cp_core_bytes(gaaw_model_t m, const block_dims *d, int backward)
{
  int64_t heads = d->B * d->Hl * d->T * d->D, kv = gaaw_mem_act(m, 2 * heads), pieces = d->f->pieces;
  int64_t piece_lse = gaaw_mem_stat(d->B * d->Hl * d->T / pieces / (d->a2a ? m->cp_size : 1));
  if (d->a2a)
    return backward ? gaaw_mem_act(m, 3 * heads) + 4 * gaaw_mem_act(m, 2 * heads)
                    : piece_lse + 3 * gaaw_mem_act(m, 3 * heads);
  return backward ? 4 * kv : 2 * kv + gaaw_mem_act(m, heads / pieces) + piece_lse;
}

/* What mlp_forward (after the attention branch) or mlp_backward allocates. */
static void mlp_memory(gaaw_model_t m, const gaaw_layer *l, const block_dims *d, gaaw_mem_walk *w, int backward)
{
  int ln = m->gpt.norm == GAAW_NORM_LAYERNORM;
  int64_t nlc = gaaw_mem_act(m, d->Nl * d->C), nc = gaaw_mem_act(m, d->N * d->C), stat = gaaw_mem_stat(d->Nl);
  int64_t u = gaaw_mem_act(m, d->N * d->Fu), a = gaaw_mem_act(m, d->N * d->Fl);
  if (!backward) { /* x2, then norm_2's output */
    gaaw_mem_save(w, nlc);
    gaaw_mem_save(w, nlc);
    if (ln) gaaw_mem_save(w, stat);
    gaaw_mem_save(w, stat);
  }
  if (l->moe_layer) { /* moe_forward, mlp_backward's MoE branch: this rank's rows, gathered over tp */
    int gather = !d->sp && m->tp_size > 1;
    int64_t rows = gather ? d->N / m->tp_size : d->Nl;
    gaaw_mem_scratch(w, gaaw_mem_act(m, rows * d->C));
    gaaw_gpt_moe_memory(m, w, backward, rows);
    if (gather) gaaw_mem_scratch(w, nc);
  } else if (!backward) {
    if (d->sp) gaaw_mem_save(w, nc);
    gaaw_mem_save(w, u);
    gaaw_mem_save(w, a);
    gaaw_mem_scratch(w, nc);
    if (d->sp) gaaw_mem_scratch(w, nlc);
  } else {
    if (d->sp) gaaw_mem_scratch(w, nc);
    gaaw_mem_scratch(w, a);
    gaaw_mem_linear_backward(w, nc, a);
    gaaw_mem_scratch(w, u);
    gaaw_mem_scratch(w, nc);
    gaaw_mem_linear_backward(w, u, nc);
    if (d->sp) gaaw_mem_scratch(w, nlc);
  }
}

/* What block_forward and block_backward allocate, in their order (model_memory.c).
 * dims_of reads only the frame's shape. */
static void block_memory(gaaw_model_t m, const gaaw_layer *l, gaaw_mem_walk *w, int backward)
{
  block_dims d = dims_of(m, (gaaw_frame *)gaaw_mem_frame(w));
  int ln = m->gpt.norm == GAAW_NORM_LAYERNORM, blocked = d.blocked;
  int64_t nlc = gaaw_mem_act(m, d.Nl * d.C), nc = gaaw_mem_act(m, d.N * d.C), heads = d.B * d.Hl * d.T * d.D;
  int64_t probs = gaaw_mem_act(m, d.B * d.Hl * d.T * d.T), stat = gaaw_mem_stat(d.Nl);
  int64_t lse = gaaw_mem_stat(d.B * d.Hl * d.T), selective = m->recompute == GAAW_RECOMPUTE_SELECTIVE && !blocked;
  int64_t qkv = gaaw_mem_act(m, d.N * d.QKVl), qkv4 = gaaw_mem_act(m, 3 * heads), att = gaaw_mem_act(m, d.N * d.Ql);
  if (!backward) {
    gaaw_mem_output(w, nlc);
    /* attention_forward */
    gaaw_mem_save(w, nlc);
    if (ln) gaaw_mem_save(w, stat);
    gaaw_mem_save(w, stat);
    if (d.sp) gaaw_mem_save(w, nc);
    if (d.qkv_core) {
      gaaw_mem_save(w, qkv);
      gaaw_mem_save(w, probs);
    } else {
      gaaw_mem_scratch(w, qkv);
      gaaw_mem_save(w, qkv4);
      gaaw_mem_save(w, blocked ? lse : probs); /* attention_core */
      gaaw_mem_scratch(w, gaaw_mem_act(m, heads));
      if (m->cp_size > 1) gaaw_mem_transient(w, cp_core_bytes(m, &d, 0));
    }
    gaaw_mem_save(w, att);
    gaaw_mem_scratch(w, nc); /* project_attention */
    if (d.sp) gaaw_mem_scratch(w, nlc);
    mlp_memory(m, l, &d, w, 0);
    if (selective) gaaw_mem_unsave(w, probs);
    return;
  }
  gaaw_mem_scratch(w, nlc); /* dx2 */
  mlp_memory(m, l, &d, w, 1);
  gaaw_mem_output(w, nlc); /* dx */
  /* attention_backward */
  if (d.sp) gaaw_mem_scratch(w, nc);
  gaaw_mem_scratch(w, att);
  gaaw_mem_linear_backward(w, nc, att);
  if (d.qkv_core) {
    gaaw_mem_scratch(w, qkv);
    gaaw_mem_scratch(w, probs);
  } else {
    gaaw_mem_scratch(w, gaaw_mem_act(m, heads));
    gaaw_mem_scratch(w, qkv4);
    /* attention_core_backward */
    gaaw_mem_scratch(w, blocked ? gaaw_mem_act(m, heads) : probs);
    if (m->cp_size > 1) gaaw_mem_transient(w, cp_core_bytes(m, &d, 1));
  }
  if (selective) { /* recompute_probs */
    gaaw_mem_save(w, probs);
    gaaw_mem_scratch(w, gaaw_mem_act(m, heads));
  }
  if (!d.qkv_core) gaaw_mem_scratch(w, qkv);
  gaaw_mem_scratch(w, nc); /* qkv_backward */
  gaaw_mem_linear_backward(w, qkv, nc);
  gaaw_mem_replica_sums(w, l, P_ATTN_W, BIAS_SLOT(P_ATTN_B));
  if (d.sp) gaaw_mem_scratch(w, nlc);
}

const gaaw_layer_ops gaaw_gpt_block_ops = {"transformer block", block_forward, block_backward, 1, block_memory};
