/* The GPT's mixture-of-experts MLPs (doc/moe.md): a block's MLP replaced by the
 * layer of parallel/moe.h over the block's N tokens, its kept tensors in the
 * block's saved slots from GAAW_GPT_MOE_SAVED on, what it measured recorded per
 * frame, the step's records, and gaaw_model_moe_metrics.
 * Shapes (N tokens, C = dim, E = experts, El = E / ep here, k = top_k, F = moe_ffn,
 * P = N k, R rows for this rank's experts: P, or at ep > 1 what the exchange brings):
 *   h, y: (N, C)   router: (E, C)   w13: (El 2F, C)   w2: (El C, F)
 *   kept: logits, scores (N, E) f32; lse (N) f32; idx, pos (N, k) i32; weights (N, k)
 *         f32; src (P) i32; xp (R, C); yp (P, C); u (R, 2F); a (R, F); coefs (E + 1) f32 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "parallel/gpt.h"
#include "parallel/moe.h"

int gaaw_gpt_block_is_moe(const gaaw_gpt_config_t *g, int i)
{
  int every = g->moe_every > 0 ? g->moe_every : 1;
  return g->experts > 0 && i % every == 0;
}

gaaw_status_t gaaw_gpt_add_moe(gaaw_model_t m, gaaw_layer *l, int block)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  int64_t C = g->dim, E = g->experts, F = g->moe_ffn;
  float std = 0.02f, residual_std = 0.02f / sqrtf(2.0f * (float)g->layers);
  char name[GAAW_PARAM_NAME_MAX];
#define NAME(suffix) (snprintf(name, sizeof name, "h.%d.mlp.%s", block, suffix), name)
  GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param(m, l, GAAW_GPT_MOE_ROUTER, NAME("gate.weight"), 2, E, C, -1, 1,
                                              GAAW_INIT_NORMAL, std));
  const int64_t S = g->shared_ffn;
  if (S) {
    GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param(m, l, GAAW_GPT_MOE_S13, NAME("shared_expert.w13.weight"), 2, 2 * S, C,
                                                -1, 1, GAAW_INIT_NORMAL, std));
    GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param(m, l, GAAW_GPT_MOE_S2, NAME("shared_expert.w2.weight"), 2, C, S, -1,
                                                1, GAAW_INIT_NORMAL, residual_std));
  }
  if (S && g->shared_gate)
    GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param(m, l, GAAW_GPT_MOE_SGATE, NAME("shared_expert_gate.weight"), 2, 1, C,
                                                -1, 1, GAAW_INIT_NORMAL, std));
  /* the experts last: at ep > 1 split by rows (E / ep experts each), a bucket of their own */
  if (m->ep_size > 1) gaaw_layer_begin_experts(m, l);
  GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param(m, l, GAAW_GPT_MOE_W13, NAME("experts.w13.weight"), 2, E * 2 * F, C,
                                              -1, 1, GAAW_INIT_NORMAL, std));
  GAAW_CHECK_CTX(m->ctx, gaaw_layer_split_experts(m, l, GAAW_GPT_MOE_W13));
  GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param(m, l, GAAW_GPT_MOE_W2, NAME("experts.w2.weight"), 2, E * C, F, -1, 1,
                                              GAAW_INIT_NORMAL, residual_std));
  GAAW_CHECK_CTX(m->ctx, gaaw_layer_split_experts(m, l, GAAW_GPT_MOE_W2));
#undef NAME
  /* replicated over tp, each tp rank routing its own share of the tokens: their
   * gradients are summed over tp (as sequence parallelism's norms') */
  for (int k = GAAW_GPT_MOE_ROUTER; k <= GAAW_GPT_MOE_SGATE; k++) gaaw_layer_mark_partial(m, l, k, m->tp_size > 1);
  return GAAW_SUCCESS;
}

static gaaw_moe_spec spec_of(gaaw_model_t m)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  return (gaaw_moe_spec){g->experts,        g->top_k,          g->router_score == GAAW_ROUTER_SIGMOID,
                         !g->moe_raw_weights, g->aux_loss_coef,  g->z_loss_coef,
                         g->capacity_factor,  g->drop_policy == GAAW_DROP_POSITION};
}

static gaaw_moe_weights weights_of(gaaw_model_t m, gaaw_layer *l)
{
  gaaw_moe_weights w = {gaaw_layer_param(m, l, GAAW_GPT_MOE_ROUTER), gaaw_layer_param(m, l, GAAW_GPT_MOE_W13),
                        gaaw_layer_param(m, l, GAAW_GPT_MOE_W2),     gaaw_layer_grad(m, l, GAAW_GPT_MOE_ROUTER),
                        gaaw_layer_grad(m, l, GAAW_GPT_MOE_W13),      gaaw_layer_grad(m, l, GAAW_GPT_MOE_W2)};
  if (m->gpt.shared_ffn) {
    w.s13 = gaaw_layer_param(m, l, GAAW_GPT_MOE_S13), w.d_s13 = gaaw_layer_grad(m, l, GAAW_GPT_MOE_S13);
    w.s2 = gaaw_layer_param(m, l, GAAW_GPT_MOE_S2), w.d_s2 = gaaw_layer_grad(m, l, GAAW_GPT_MOE_S2);
  }
  if (m->gpt.shared_ffn && m->gpt.shared_gate)
    w.sgate = gaaw_layer_param(m, l, GAAW_GPT_MOE_SGATE), w.d_sgate = gaaw_layer_grad(m, l, GAAW_GPT_MOE_SGATE);
  return w;
}

/* The token group beyond this rank's tokens: its tp group's (each tp rank routes its
 * share of the block's tokens), then, with the data-parallel hooks installed (the
 * passes then run on every replica together), the dp x cp group, whose replicas
 * share the aux losses; *replicas: the dp replicas in it, over which the
 * optimizer averages the gradients. Without the hooks, replicas may run apart:
 * each tp x cp group is its own token group. The first non-NULL group comes first. */
static gaaw_status_t token_group(gaaw_model_t m, gaaw_comm_t group[2], int *replicas)
{
  gaaw_context_t ctx = m->ctx;
  int rank, size, n = 0;
  group[0] = group[1] = NULL;
  *replicas = 1;
  if (m->tp_size > 1) group[n++] = m->tp;
  if (!m->hooks.user && m->cp_size == 1) return GAAW_SUCCESS;
  gaaw_group_t which = m->hooks.user ? GAAW_GROUP_DP_CP : GAAW_GROUP_CP;
  GAAW_CHECK(gaaw_topology_group_rank(ctx, which, &rank, &size));
  if (size > 1) GAAW_CHECK(gaaw_topology_comm(ctx, which, &group[n]));
  if (m->hooks.user) GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &rank, replicas));
  return GAAW_SUCCESS;
}

/* The layer's kept tensors go to the block's saved slots. */
typedef struct {
  gaaw_model_t m;
  gaaw_frame *f;
  gaaw_layer *l;
} frame_slots;

static gaaw_status_t keep_in_frame(void *user, int which, gaaw_dtype_t dtype, int ndim, const int64_t *shape,
                                   gaaw_tensor_t **t)
{
  frame_slots *fs = user;
  return gaaw_layer_alloc_as(fs->m, fs->f, fs->l, GAAW_GPT_MOE_SAVED + which, dtype, ndim, shape, t);
}

/* The layer's saved state over the frame's slots, its experts split over ep when ep > 1. */
static gaaw_moe_saved saved_in_frame(gaaw_model_t m, frame_slots *fs)
{
  gaaw_moe_saved s = {.keep = keep_in_frame, .user = fs, .kept = gaaw_layer_saved(fs->f, fs->l) + GAAW_GPT_MOE_SAVED};
  s.ep = m->ep_size > 1 ? m->ep : NULL;
  return s;
}

gaaw_status_t gaaw_gpt_moe_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *h,
                                   gaaw_tensor_t *y)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_moe_spec spec = spec_of(m);
  gaaw_moe_weights w = weights_of(m, l);
  frame_slots fs = {m, f, l};
  gaaw_moe_saved s = saved_in_frame(m, &fs);
  s.margins = gaaw_ctx_bool(ctx, "moe_margins");
  int replicas;
  GAAW_CHECK(token_group(m, s.group, &replicas));
  gaaw_moe_record *r = &f->moe[l->moe_layer - 1];
  gaaw_moe_losses losses = {.counts = r->counts};
  gaaw_status_t st = gaaw_moe_forward(ctx, &spec, &w, h, y, &s, &losses);
  gaaw_moe_release(ctx, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  /* assigned, not added: full recomputation runs forward again, to the same bits */
  r->aux = losses.aux, r->z = losses.z, r->margin = losses.margin, r->tokens = losses.tokens, r->ran = 1;
  r->dropped = losses.dropped;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_gpt_moe_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *h,
                                    const gaaw_tensor_t *dy, gaaw_tensor_t *dh)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_moe_spec spec = spec_of(m);
  gaaw_moe_weights w = weights_of(m, l);
  frame_slots fs = {m, f, l};
  gaaw_moe_saved s = saved_in_frame(m, &fs);
  int replicas;
  GAAW_CHECK(token_group(m, s.group, &replicas));
  /* the aux losses count once in the mean over the replicas that share them */
  float aux_scale = m->loss_scale * (float)replicas;
  gaaw_status_t st = gaaw_moe_backward(ctx, &spec, &w, &s, h, dy, aux_scale, dh);
  gaaw_moe_release(ctx, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Dropless, a rank's experts compute R = P rows; at ep > 1 what the exchange brings,
 * at most every row of the ep group (ep P): the estimate's bound. */
void gaaw_gpt_moe_memory(gaaw_model_t m, gaaw_mem_walk *w, int backward, int64_t N)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  int64_t C = g->dim, E = g->experts, k = g->top_k, F = g->moe_ffn, P = N * k, S = g->shared_ffn;
  const int ep = m->ep_size > 1;
  const int64_t R = ep ? m->ep_size * P : P;
  /* the exchange's two row maps (i32); its (R, C) message buffer is communication memory */
  const int64_t exchange = ep ? 2 * gaaw_mem_stat(R) : 0;
  if (ep) gaaw_mem_comm_transient(w, gaaw_mem_act(m, R * C));
  int gated = S && g->shared_gate;
  if (!backward) {
    int64_t kept_stats[] = {N * E, N * E, N, N * k, N * k, N * k, P};
    for (size_t i = 0; i < sizeof kept_stats / sizeof kept_stats[0]; i++) gaaw_mem_save(w, gaaw_mem_stat(kept_stats[i]));
    int64_t kept_acts[] = {R * C, R * 2 * F, R * F, P * C};
    for (size_t i = 0; i < sizeof kept_acts / sizeof kept_acts[0]; i++) gaaw_mem_save(w, gaaw_mem_act(m, kept_acts[i]));
    gaaw_mem_save(w, gaaw_mem_stat(E + 1));
    /* ep: this rank's permuted rows, and the experts' output before it returns */
    if (ep) gaaw_mem_transient(w, gaaw_mem_act(m, P * C) + gaaw_mem_act(m, R * C) + exchange);
    if (S) { /* the shared expert: su, sa, so; its gate's logit, sigmoid and lse; the scaling's temporaries */
      gaaw_mem_save(w, gaaw_mem_act(m, N * 2 * S));
      gaaw_mem_save(w, gaaw_mem_act(m, N * S));
      gaaw_mem_save(w, gaaw_mem_act(m, N * C));
      for (int i = 0; gated && i < 3; i++) gaaw_mem_save(w, gaaw_mem_stat(N));
      if (gated) gaaw_mem_transient(w, gaaw_mem_stat(N) + gaaw_mem_act(m, N * C) + (ep ? 2 * gaaw_mem_stat(R) : 0));
    }
    gaaw_mem_transient(w, gaaw_mem_stat(E) + gaaw_mem_stat(1) + gaaw_mem_stat(2 * E + 2) +
                              (ep ? 2 * gaaw_mem_stat(R) : 0)); /* group statistics */
    return;
  }
  /* gaaw_moe_backward's temporaries, all alive at once, and the shared expert's among them;
   * ep: the rows' gradients on the experts' side (dye, dxe) and the exchange */
  int64_t shared = !S ? 0
                      : gaaw_mem_act(m, N * C) + gaaw_mem_act(m, N * S) + gaaw_mem_act(m, N * 2 * S) +
                          (gated ? gaaw_mem_stat(N) + gaaw_mem_act(m, N * C) + 2 * gaaw_mem_stat(N) : 0);
  gaaw_mem_transient(w, gaaw_mem_act(m, P * C) * 2 + gaaw_mem_stat(N * k) + gaaw_mem_act(m, R * F) +
                          gaaw_mem_act(m, R * 2 * F) + 2 * gaaw_mem_stat(N * E) + gaaw_mem_act(m, N * C) +
                          gaaw_mem_stat(E) + shared + (ep ? 2 * gaaw_mem_act(m, R * C) + exchange : 0));
}

double gaaw_moe_step_record(gaaw_model_t m, const gaaw_frame *frames, int n)
{
  if (!m->moe_layers || !m->moe_step) return 0;
  const int E = m->gpt.experts;
  double total = 0;
  for (int j = 0; j < m->moe_layers; j++) {
    gaaw_moe_record *s = &m->moe_step[j];
    s->aux = s->z = 0, s->margin = INFINITY, s->tokens = s->dropped = 0, s->ran = 0;
    memset(s->counts, 0, sizeof(int64_t) * (size_t)E);
    for (int i = 0; i < n; i++) {
      const gaaw_moe_record *r = frames[i].moe ? &frames[i].moe[j] : NULL;
      if (!r || !r->ran) continue;
      s->aux += r->aux / n, s->z += r->z / n, s->tokens += r->tokens, s->dropped += r->dropped, s->ran = 1;
      s->margin = fmin(s->margin, r->margin);
      for (int e = 0; e < E; e++) s->counts[e] += r->counts[e];
      total += r->aux + r->z;
    }
  }
  return total / n;
}

/* ---------------------------------------------------------------- gaaw_model_moe_metrics */

/* The step's records of every stage on every rank: summed over the pp group (each
 * layer lives on one stage; counts travel as two f32 halves, exact below 2^40),
 * the margin's minimum over world. */
enum { SUM_AUX, SUM_Z, SUM_TOKENS_HI, SUM_TOKENS_LO, SUM_DROPPED_HI, SUM_DROPPED_LO, SUM_COUNTS };
#define HALF 65536.0 /* 2^16: a sum of halves over up to 256 stages stays exact in f32 */

/* n as two halves into half[0..1], and back. */
static void split(int64_t n, double *half)
{
  half[0] = floor((double)n / HALF), half[1] = fmod((double)n, HALF);
}

static int64_t joined(const double *half)
{
  return (int64_t)(half[0] * HALF + half[1]);
}

static gaaw_status_t combine(gaaw_model_t m, double *sums, int64_t nsums, double *margin)
{
  gaaw_context_t ctx = m->ctx;
  float *v = malloc(sizeof(float) * (size_t)(nsums + 1));
  if (!v) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold %lld metrics", (long long)nsums);
  for (int64_t i = 0; i < nsums; i++) v[i] = (float)sums[i];
  v[nsums] = (float)-*margin;
  gaaw_tensor_t t = {0};
  gaaw_status_t st = gaaw_tensor_alloc(ctx, GAAW_F32, 1, (int64_t[]){nsums + 1}, GAAW_MEM_COMMUNICATION, &t);
  gaaw_tensor_t head = gaaw_rows_view(&t, 0, nsums), one = gaaw_rows_view(&t, nsums, 1);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, t.buf, t.offset, v, sizeof(float) * (size_t)(nsums + 1));
  if (st == GAAW_SUCCESS && m->pp_size > 1) st = gaaw_comm_allreduce(m->pp, &head, &head, GAAW_SUM);
  if (st == GAAW_SUCCESS) st = gaaw_comm_allreduce(m->world, &one, &one, GAAW_MAX);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, t.offset, v, sizeof(float) * (size_t)(nsums + 1));
  if (t.buf) gaaw_buffer_free(ctx, &t.buf);
  if (st == GAAW_SUCCESS && m->pp_size > 1)
    for (int64_t i = 0; i < nsums; i++) sums[i] = v[i];
  if (st == GAAW_SUCCESS) *margin = -(double)v[nsums];
  free(v);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_moe_metrics(gaaw_model_t m, gaaw_moe_metrics_t *out, int64_t *counts, int64_t counts_len)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  const int L = m->moe_layers, E = m->gpt.experts;
  gaaw_status_t ok = GAAW_SUCCESS;
  if (!out)
    ok = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "out must not be NULL");
  else if (counts && counts_len < (int64_t)L * E)
    ok = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "counts holds %lld values; the %d MoE layers x %d experts need %lld", (long long)counts_len,
                          L, E, (long long)L * E);
  GAAW_CHECK(gaaw_agree(m->world, ok, "gaaw_model_moe_metrics", NULL, 0));
  memset(out, 0, sizeof *out);
  out->layers = L;
  if (!L) return GAAW_SUCCESS;
  out->experts = E, out->top_k = m->gpt.top_k;
  const int64_t nsums = SUM_COUNTS + 2 * (int64_t)L * E;
  double *sums = calloc((size_t)nsums, sizeof *sums), margin = INFINITY;
  if (!sums) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold the counts of %d MoE layers", L);
  int64_t dropped = 0;
  for (int j = 0; j < L; j++) {
    const gaaw_moe_record *r = &m->moe_step[j];
    if (!r->ran) continue;
    sums[SUM_AUX] += r->aux, sums[SUM_Z] += r->z, margin = fmin(margin, r->margin);
    dropped += r->dropped;
    for (int e = 0; e < E; e++) split(r->counts[e], sums + SUM_COUNTS + 2 * (j * E + e));
  }
  /* every MoE layer sees the same tokens: the first one's, from its stage only */
  int64_t tokens = m->moe_step[0].ran ? m->moe_step[0].tokens : 0;
  split(tokens, sums + SUM_TOKENS_HI);
  split(dropped, sums + SUM_DROPPED_HI);
  gaaw_status_t st = combine(m, sums, nsums, &margin);
  if (st == GAAW_SUCCESS) {
    out->aux_loss = sums[SUM_AUX], out->z_loss = sums[SUM_Z], out->min_margin = margin;
    out->tokens = joined(sums + SUM_TOKENS_HI);
    int64_t assignments = out->tokens * m->gpt.top_k * L;
    out->drop_fraction = assignments ? (double)joined(sums + SUM_DROPPED_HI) / (double)assignments : 0;
    for (int64_t i = 0; counts && i < (int64_t)L * E; i++) counts[i] = joined(sums + SUM_COUNTS + 2 * i);
  }
  free(sums);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
