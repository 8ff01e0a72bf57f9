/* The GPT (DESIGN.md section 6a): the builder, the embedding layer and the head
 * (final norm, LM head, vocab-parallel cross-entropy). The blocks are in
 * gpt_block.c.
 * Shapes (P = tp, r = tp rank, N = B*T, Nl = N/P with sequence parallelism else N,
 * Vl = padded vocab / P rows per rank, of which nv are real):
 *   tokens, targets, positions: (N) i32   wte slice: (Vl, C)   wpe: (max_seq, C)
 *   embedding out: (Nl, C)   logits: (N, nv)   max, sumexp, target: (N) */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/fused.h"
#include "backends/runtime/half.h"
#include "parallel/linear.h"
#include "parallel/gpt.h"
#include "parallel/norm.h"
#include "parallel/tp.h"


static int sequence_parallel(gaaw_model_t m)
{
  return m->gpt.sequence_parallel && m->tp_size > 1;
}

static int64_t local_rows(gaaw_model_t m, const gaaw_frame *f)
{
  return sequence_parallel(m) ? f->rows / m->tp_size : f->rows;
}

static int learned_positions(gaaw_model_t m)
{
  return m->gpt.position == GAAW_POSITION_LEARNED;
}

static int64_t vocab_start(gaaw_model_t m)
{
  return m->tp_rank * m->vocab_local;
}

/* ---------------------------------------------------------------- embedding */

enum { E_WTE, E_WPE };

static gaaw_status_t embedding_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *unused,
                                       gaaw_tensor_t *y)
{
  gaaw_context_t ctx = m->ctx;
  int64_t C = m->gpt.dim, N = f->rows, Nl = local_rows(m, f);
  gaaw_scratch s = {0};
  gaaw_tensor_t *full, *pe;
  gaaw_tensor_t pos = gaaw_rows_view(&f->positions, sequence_parallel(m) ? m->tp_rank * Nl : 0, Nl);
  /* this rank's vocabulary slice gives its tokens' rows, zeros for the others;
   * summed over tp (reduce_from_tp), or reduce-scattered to Nl rows */
  gaaw_status_t st = gaaw_act_alloc(m, GAAW_SHAPE(Nl, C), y);
  if (st == GAAW_SUCCESS) st = gaaw_scratch_alloc(m, &s, 0, GAAW_SHAPE(N, C), &full);
  if (st == GAAW_SUCCESS) st = gaaw_embedding_forward(ctx, &f->tokens, gaaw_layer_param(m, l, E_WTE), vocab_start(m), full);
  if (st == GAAW_SUCCESS && sequence_parallel(m)) st = gaaw_tp_reduce_scatter_rows(m->tp, full, y);
  if (st == GAAW_SUCCESS && !sequence_parallel(m)) st = gaaw_tp_allreduce(m->tp, full);
  if (st == GAAW_SUCCESS && !sequence_parallel(m)) st = gaaw_cast(ctx, full, y);
  if (learned_positions(m)) { /* RoPE adds its positions inside attention */
    if (st == GAAW_SUCCESS) st = gaaw_scratch_alloc(m, &s, 0, GAAW_SHAPE(Nl, C), &pe);
    if (st == GAAW_SUCCESS) st = gaaw_embedding_forward(ctx, &pos, gaaw_layer_param(m, l, E_WPE), 0, pe);
    if (st == GAAW_SUCCESS) st = gaaw_add(ctx, y, pe, y);
  }
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t embedding_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                                        gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  int64_t C = m->gpt.dim, N = f->rows, Nl = local_rows(m, f);
  gaaw_tensor_t pos = gaaw_rows_view(&f->positions, sequence_parallel(m) ? m->tp_rank * Nl : 0, Nl);
  if (learned_positions(m)) GAAW_CHECK(gaaw_embedding_backward(ctx, &pos, dy, 0, gaaw_layer_grad(m, l, E_WPE)));
  if (!sequence_parallel(m)) {
    GAAW_CHECK(gaaw_embedding_backward(ctx, &f->tokens, dy, vocab_start(m), gaaw_layer_grad(m, l, E_WTE)));
    return GAAW_SUCCESS;
  }
  gaaw_scratch s = {0};
  gaaw_tensor_t *full;
  gaaw_status_t st = gaaw_scratch_alloc(m, &s, 0, GAAW_SHAPE(N, C), &full);
  if (st == GAAW_SUCCESS) st = gaaw_tp_gather_rows(m->tp, dy, full);
  if (st == GAAW_SUCCESS)
    st = gaaw_embedding_backward(ctx, &f->tokens, full, vocab_start(m), gaaw_layer_grad(m, l, E_WTE));
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* What embedding_forward and embedding_backward allocate (model_memory.c). */
static void embedding_memory(gaaw_model_t m, const gaaw_layer *l, gaaw_mem_walk *w, int backward)
{
  (void)l;
  const gaaw_frame *f = gaaw_mem_frame(w);
  int64_t C = m->gpt.dim;
  if (!backward) {
    gaaw_mem_output(w, gaaw_mem_act(m, local_rows(m, f) * C));
    gaaw_mem_scratch(w, gaaw_mem_act(m, f->rows * C));
    if (learned_positions(m)) gaaw_mem_scratch(w, gaaw_mem_act(m, local_rows(m, f) * C));
  } else if (sequence_parallel(m)) {
    gaaw_mem_scratch(w, gaaw_mem_act(m, f->rows * C));
  }
}

const gaaw_layer_ops gaaw_gpt_embedding_ops = {"embedding", embedding_forward, embedding_backward, 0,
                                               embedding_memory};

/* ---------------------------------------------------------------- head */

enum { H_LNF_W, H_LNF_B, H_LM };
enum { HS_H, HS_MEAN, HS_RSTD, HS_HG, HS_LOGITS, HS_MAX, HS_SUMEXP, HS_TARGET };

/* The LM head rows of this rank that are real vocabulary (not padding). */
static gaaw_tensor_t valid_rows(gaaw_model_t m, const gaaw_tensor_t *w)
{
  return gaaw_rows_view(w, 0, m->vocab_valid_local);
}

/* Mean over counted targets of log(sumexp) + max - target logit. */
static gaaw_status_t reduce_loss(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f)
{
  gaaw_context_t ctx = m->ctx;
  int64_t N = f->rows;
  float *host = malloc((size_t)N * 3 * sizeof *host);
  int32_t *targets = malloc((size_t)N * sizeof *targets);
  gaaw_status_t st = host && targets ? GAAW_SUCCESS
                                     : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                        "cannot allocate the loss of %lld tokens", (long long)N);
  for (int k = 0; k < 3 && st == GAAW_SUCCESS; k++) {
    const gaaw_tensor_t *t = &gaaw_layer_saved(f, l)[HS_MAX + k];
    st = gaaw_buffer_read(ctx, t->buf, t->offset, host + k * N, (size_t)N * sizeof *host);
  }
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, f->targets.buf, f->targets.offset, targets, (size_t)N * 4);
  double sum = 0;
  for (int64_t i = 0; st == GAAW_SUCCESS && i < N; i++)
    if (targets[i] >= 0) sum += log((double)host[N + i]) + host[i] - host[2 * N + i];
  f->loss = f->counted ? (float)(sum / (double)f->counted) : 0.0f;
  free(host);
  free(targets);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t head_forward_body(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x)
{
  gaaw_context_t ctx = m->ctx;
  int64_t C = m->gpt.dim, N = f->rows, Nl = local_rows(m, f);
  gaaw_tensor_t *h, *mean = NULL, *rstd, *hg, *logits, *max, *sumexp, *target;
  int layernorm = m->gpt.norm == GAAW_NORM_LAYERNORM;
  GAAW_CHECK(gaaw_layer_alloc(m, f, l, HS_H, 0, GAAW_SHAPE(Nl, C), &h));
  if (layernorm) GAAW_CHECK(gaaw_layer_alloc_stat(m, f, l, HS_MEAN, Nl, &mean));
  GAAW_CHECK(gaaw_layer_alloc_stat(m, f, l, HS_RSTD, Nl, &rstd));
  GAAW_CHECK(gaaw_norm_forward(ctx, m->gpt.norm, m->gpt.norm_eps, x, gaaw_layer_param(m, l, H_LNF_W),
                               layernorm ? gaaw_layer_param(m, l, H_LNF_B) : NULL, h, mean, rstd));
  hg = h;
  if (sequence_parallel(m)) {
    GAAW_CHECK(gaaw_layer_alloc(m, f, l, HS_HG, 0, GAAW_SHAPE(N, C), &hg));
    GAAW_CHECK(gaaw_tp_gather_rows(m->tp, h, hg));
  }
  gaaw_tensor_t w = valid_rows(m, gaaw_layer_param(m, l, H_LM));
  GAAW_CHECK(gaaw_layer_alloc(m, f, l, HS_LOGITS, 0, GAAW_SHAPE(N, m->vocab_valid_local), &logits));
  GAAW_CHECK(gaaw_linear_forward(ctx, hg, &w, NULL, logits));
  GAAW_CHECK(gaaw_layer_alloc_stat(m, f, l, HS_MAX, N, &max));
  GAAW_CHECK(gaaw_layer_alloc_stat(m, f, l, HS_SUMEXP, N, &sumexp));
  GAAW_CHECK(gaaw_layer_alloc_stat(m, f, l, HS_TARGET, N, &target));
  if (m->tp_size == 1) {
    /* the whole vocabulary here: one pass per row */
    GAAW_CHECK(
      gaaw_cross_entropy_forward(ctx, logits, &f->targets, vocab_start(m), 0.0f, max, sumexp, target, NULL));
  } else {
    /* vocab-parallel cross-entropy: three all-reduces over tp */
    GAAW_CHECK(gaaw_row_max(ctx, logits, max));
    GAAW_CHECK(gaaw_comm_allreduce(m->tp, max, max, GAAW_MAX));
    GAAW_CHECK(gaaw_row_sum_exp(ctx, logits, max, sumexp));
    GAAW_CHECK(gaaw_tp_allreduce(m->tp, sumexp));
    GAAW_CHECK(gaaw_target_logit(ctx, logits, &f->targets, vocab_start(m), target));
    GAAW_CHECK(gaaw_tp_allreduce(m->tp, target));
  }
  GAAW_CHECK(reduce_loss(m, l, f));
  return GAAW_SUCCESS;
}

static gaaw_status_t head_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x,
                                  gaaw_tensor_t *y)
{
  (void)y; /* the loss is the output */
  GAAW_CHECK_CTX(m->ctx, head_forward_body(m, l, f, x));
  return GAAW_SUCCESS;
}

static gaaw_status_t head_backward_body(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, gaaw_scratch *s,
                                        gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  int64_t C = m->gpt.dim, N = f->rows;
  gaaw_tensor_t *sv = gaaw_layer_saved(f, l), *dlogits, *dhg, *dh;
  const gaaw_tensor_t *hg = sequence_parallel(m) ? &sv[HS_HG] : &sv[HS_H];
  float dloss = f->counted ? gaaw_model_seed_scale(m) / (float)f->counted : 0.0f;
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 1, GAAW_SHAPE(N, m->vocab_valid_local), &dlogits));
  GAAW_CHECK(gaaw_cross_entropy_backward(ctx, &sv[HS_LOGITS], &sv[HS_MAX], &sv[HS_SUMEXP], &f->targets,
                                         vocab_start(m), dloss, dlogits));
  gaaw_tensor_t w = valid_rows(m, gaaw_layer_param(m, l, H_LM));
  GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(N, C), &dhg));
  /* the weight gradient, real vocabulary rows only (W's with a split backward) */
  GAAW_CHECK(gaaw_layer_linear_backward(m, l, f, dlogits, hg, &w, dhg, H_LM, m->vocab_valid_local, -1));
  /* conjugate of copy_to_tp (or of gather_from_sequence) */
  if (sequence_parallel(m)) {
    GAAW_CHECK(gaaw_scratch_alloc(m, s, 0, GAAW_SHAPE(local_rows(m, f), C), &dh));
    GAAW_CHECK(gaaw_tp_reduce_scatter_rows(m->tp, dhg, dh));
  } else {
    GAAW_CHECK(gaaw_tp_allreduce(m->tp, dhg));
    dh = dhg;
  }
  int layernorm = m->gpt.norm == GAAW_NORM_LAYERNORM;
  GAAW_CHECK(gaaw_norm_backward(ctx, m->gpt.norm, dh, gaaw_layer_input(f, l), gaaw_layer_param(m, l, H_LNF_W),
                                &sv[HS_MEAN], &sv[HS_RSTD], dx, gaaw_layer_grad(m, l, H_LNF_W),
                                layernorm ? gaaw_layer_grad(m, l, H_LNF_B) : NULL));
  return GAAW_SUCCESS;
}

static gaaw_status_t head_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *unused,
                                   gaaw_tensor_t *dx)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_scratch s = {0};
  gaaw_status_t st = gaaw_act_zeros(m, GAAW_SHAPE(local_rows(m, f), m->gpt.dim), dx);
  if (st == GAAW_SUCCESS) st = head_backward_body(m, l, f, &s, dx);
  gaaw_scratch_free(m, &s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* What head_forward and head_backward allocate (model_memory.c). */
static void head_memory(gaaw_model_t m, const gaaw_layer *l, gaaw_mem_walk *w, int backward)
{
  (void)l;
  const gaaw_frame *f = gaaw_mem_frame(w);
  int64_t C = m->gpt.dim, N = f->rows, Nl = local_rows(m, f), nv = m->vocab_valid_local;
  int ln = m->gpt.norm == GAAW_NORM_LAYERNORM;
  if (!backward) {
    gaaw_mem_save(w, gaaw_mem_act(m, Nl * C));
    if (ln) gaaw_mem_save(w, gaaw_mem_stat(Nl));
    gaaw_mem_save(w, gaaw_mem_stat(Nl));
    if (sequence_parallel(m)) gaaw_mem_save(w, gaaw_mem_act(m, N * C));
    gaaw_mem_save(w, gaaw_mem_act(m, N * nv));
    for (int k = 0; k < 3; k++) gaaw_mem_save(w, gaaw_mem_stat(N));
    return;
  }
  gaaw_mem_output(w, gaaw_mem_act(m, Nl * C)); /* dx, zeroed */
  gaaw_mem_scratch(w, gaaw_mem_act(m, N * nv));
  gaaw_mem_scratch(w, gaaw_mem_act(m, N * C));
  gaaw_mem_linear_backward(w, gaaw_mem_act(m, N * nv), gaaw_mem_act(m, N * C));
  if (sequence_parallel(m)) gaaw_mem_scratch(w, gaaw_mem_act(m, Nl * C));
}

const gaaw_layer_ops gaaw_gpt_head_ops = {"lm head and cross-entropy", head_forward, head_backward, 0, head_memory};

/* ---------------------------------------------------------------- builder */

static gaaw_status_t add_norm(gaaw_model_t m, gaaw_layer *l, int slot_w, int slot_b, const char *prefix)
{
  char name[GAAW_PARAM_NAME_MAX];
  int partial = sequence_parallel(m);
  snprintf(name, sizeof name, "%s.weight", prefix);
  GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param(m, l, slot_w, name, 1, m->gpt.dim, 0, -1, 1, GAAW_INIT_CONSTANT, 1.0f));
  gaaw_layer_mark_partial(m, l, slot_w, partial);
  if (m->gpt.norm == GAAW_NORM_LAYERNORM) {
    snprintf(name, sizeof name, "%s.bias", prefix);
    GAAW_CHECK_CTX(m->ctx, gaaw_model_add_param(m, l, slot_b, name, 1, m->gpt.dim, 0, -1, 1, GAAW_INIT_CONSTANT, 0.0f));
    gaaw_layer_mark_partial(m, l, slot_b, partial);
  }
  return GAAW_SUCCESS;
}

/* The fused QKV's blocks on the split axis (heads x head_dim rows each): q split
 * over tp, k and v split over tp or, when tp exceeds kv_heads, into kv_heads parts
 * each replicated on tp / kv_heads ranks. */
static gaaw_param_blocks qkv_blocks(gaaw_model_t m)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  int kv_parts = g->kv_heads % m->tp_size == 0 ? m->tp_size : g->kv_heads;
  int64_t q = (int64_t)g->heads * g->head_dim, kv = (int64_t)g->kv_heads * g->head_dim;
  return (gaaw_param_blocks){3, {q, kv, kv}, {m->tp_size, kv_parts, kv_parts}};
}

/* Parameters of block i, in the slots of gpt_block.c, with nanoGPT's names; the
 * biases only without no_bias. */
static gaaw_status_t add_block(gaaw_model_t m, gaaw_layer *l, int i)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_gpt_config_t *g = &m->gpt;
  int64_t C = g->dim, F = g->ffn, Fu = g->activation == GAAW_ACT_SWIGLU ? 2 * F : F;
  int64_t Q = (int64_t)g->heads * g->head_dim, QKV = Q + 2 * (int64_t)g->kv_heads * g->head_dim;
  int fu_blocks = g->activation == GAAW_ACT_SWIGLU ? 2 : 1, bias = !g->no_bias;
  float std = 0.02f, residual_std = 0.02f / sqrtf(2.0f * (float)g->layers);
  gaaw_param_blocks qkv = qkv_blocks(m);
  char p[32], name[GAAW_PARAM_NAME_MAX];
  snprintf(p, sizeof p, "h.%d", i);
#define NAME(suffix) (snprintf(name, sizeof name, "%s.%s", p, suffix), name)
  snprintf(name, sizeof name, "%s.ln_1", p);
  GAAW_CHECK(add_norm(m, l, 0, 1, name));
  GAAW_CHECK(gaaw_model_add_param_blocks(m, l, 2, NAME("attn.c_attn.weight"), 2, QKV, C, 0, &qkv, GAAW_INIT_NORMAL,
                                         std));
  if (bias)
    GAAW_CHECK(gaaw_model_add_param_blocks(m, l, 3, NAME("attn.c_attn.bias"), 1, QKV, 0, 0, &qkv, GAAW_INIT_CONSTANT,
                                           0));
  GAAW_CHECK(gaaw_model_add_param(m, l, 4, NAME("attn.c_proj.weight"), 2, C, Q, 1, 1, GAAW_INIT_NORMAL, residual_std));
  if (bias) GAAW_CHECK(gaaw_model_add_param(m, l, 5, NAME("attn.c_proj.bias"), 1, C, 0, -1, 1, GAAW_INIT_CONSTANT, 0));
  gaaw_layer_mark_partial(m, l, 5, sequence_parallel(m));
  snprintf(name, sizeof name, "%s.ln_2", p);
  GAAW_CHECK(add_norm(m, l, 6, 7, name));
  if (l->moe_layer) {
    GAAW_CHECK(gaaw_gpt_add_moe(m, l, i));
    return GAAW_SUCCESS;
  }
  GAAW_CHECK(gaaw_model_add_param(m, l, 8, NAME("mlp.c_fc.weight"), 2, Fu, C, 0, fu_blocks, GAAW_INIT_NORMAL, std));
  if (bias)
    GAAW_CHECK(gaaw_model_add_param(m, l, 9, NAME("mlp.c_fc.bias"), 1, Fu, 0, 0, fu_blocks, GAAW_INIT_CONSTANT, 0));
  GAAW_CHECK(gaaw_model_add_param(m, l, 10, NAME("mlp.c_proj.weight"), 2, C, F, 1, 1, GAAW_INIT_NORMAL, residual_std));
  if (bias) GAAW_CHECK(gaaw_model_add_param(m, l, 11, NAME("mlp.c_proj.bias"), 1, C, 0, -1, 1, GAAW_INIT_CONSTANT, 0));
  gaaw_layer_mark_partial(m, l, 11, sequence_parallel(m));
#undef NAME
  return GAAW_SUCCESS;
}

/* Pipeline stages over embedding, blocks and head, balanced by forward FLOPs per
 * token: a block's projections (2 C (heads + 2 kv_heads) D for QKV, 2 heads D C for
 * the output) and MLP (4 C ffn: SwiGLU's third matrix is left out, as it always
 * was, to keep the stage plans of existing runs) and attention (4 T heads D), the
 * head's 2 C V; the embedding's lookup is nearly free. */
static gaaw_status_t plan_gpt_stages(gaaw_model_t m)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  int n = g->layers + 2;
  double C = g->dim, F = g->ffn, T = g->max_seq, V = g->vocab, HD = (double)g->heads * g->head_dim;
  double KD = (double)g->kv_heads * g->head_dim;
  double *cost = malloc(sizeof(double) * (size_t)n);
  if (!cost) GAAW_FAIL(m->ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d layer costs", n);
  cost[0] = 2 * C;
  /* an MoE MLP: its router and the top_k experts a token visits */
  double moe = 2 * C * g->experts + 4 * C * ((double)g->moe_ffn * g->top_k + g->shared_ffn);
  for (int i = 1; i <= g->layers; i++)
    cost[i] = 2 * C * (HD + 2 * KD) + 2 * HD * C + (gaaw_gpt_block_is_moe(g, i - 1) ? moe : 4 * C * F) + 4 * T * HD;
  cost[n - 1] = 2 * C * V;
  gaaw_status_t st = gaaw_model_plan_stages(m, n, 1, 1, cost);
  free(cost);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* RoPE's cos | sin table for positions 0..max_seq-1, on the device (f32). */
static gaaw_status_t upload_rope_table(gaaw_model_t m)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_gpt_config_t *g = &m->gpt;
  if (g->position != GAAW_POSITION_ROPE || m->planned_only) return GAAW_SUCCESS;
  int64_t T = g->max_seq, D = g->head_dim;
  float *host = malloc(sizeof(float) * (size_t)(T * D));
  if (!host) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the RoPE table (%lld x %lld)", (long long)T,
                       (long long)D);
  gaaw_status_t st = gaaw_rope_table(T, D, 0, g->rope_theta, host);
  if (st == GAAW_SUCCESS) st = gaaw_tensor_alloc(ctx, GAAW_F32, 2, (int64_t[]){T, D}, GAAW_MEM_PARAMS, &m->rope_table);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, m->rope_table.buf, 0, host, sizeof(float) * (size_t)(T * D));
  free(host);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t build_gpt(gaaw_model_t m)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_gpt_config_t *g = &m->gpt;
  gaaw_layer *l;
  m->vocab_local = ((int64_t)g->vocab + m->tp_size - 1) / m->tp_size;
  int64_t valid = g->vocab - m->tp_rank * m->vocab_local;
  m->vocab_valid_local = valid < m->vocab_local ? valid : m->vocab_local;
  GAAW_CHECK(plan_gpt_stages(m));

  GAAW_CHECK(gaaw_model_add_layer(m, &gaaw_gpt_embedding_ops, &l));
  GAAW_CHECK(gaaw_model_add_param(m, l, E_WTE, "wte.weight", 2, g->vocab, g->dim, 0, 1, GAAW_INIT_NORMAL, 0.02f));
  if (learned_positions(m)) {
    GAAW_CHECK(gaaw_model_add_param(m, l, E_WPE, "wpe.weight", 2, g->max_seq, g->dim, -1, 1, GAAW_INIT_NORMAL, 0.02f));
    gaaw_layer_mark_partial(m, l, E_WPE, sequence_parallel(m));
  }
  int wte = l->params[E_WTE];
  for (int i = 0; i < g->layers; i++) {
    GAAW_CHECK(gaaw_model_add_layer(m, &gaaw_gpt_block_ops, &l));
    l->in_features = g->dim;
    if (gaaw_gpt_block_is_moe(g, i)) l->moe_layer = ++m->moe_layers;
    GAAW_CHECK(add_block(m, l, i));
  }
  GAAW_CHECK(gaaw_model_add_layer(m, &gaaw_gpt_head_ops, &l));
  l->in_features = g->dim;
  GAAW_CHECK(add_norm(m, l, H_LNF_W, H_LNF_B, "ln_f"));
  if (g->tied_embeddings && wte >= 0) {
    l->params[H_LM] = wte; /* the embedding is on this rank too */
  } else if (g->tied_embeddings) {
    /* the first stage holds the embedding: the head keeps its own copy of wte,
     * initialised alike, whose gradient the optimizer sums with the first's */
    GAAW_CHECK(gaaw_model_add_param(m, l, H_LM, "wte.weight", 2, g->vocab, g->dim, 0, 1, GAAW_INIT_NORMAL, 0.02f));
    if (l->params[H_LM] >= 0) m->params.items[l->params[H_LM]].tied_peer = gaaw_model_layer_rank(m, 0);
  } else
    GAAW_CHECK(gaaw_model_add_param(m, l, H_LM, "lm_head.weight", 2, g->vocab, g->dim, 0, 1, GAAW_INIT_NORMAL, 0.02f));
  if (wte >= 0 && g->tied_embeddings && !gaaw_model_owns_layer(m, m->nlayers - 1))
    m->params.items[wte].tied_peer = gaaw_model_layer_rank(m, m->nlayers - 1);
  if (m->moe_layers && !(m->moe_step = gaaw_moe_records_new(m)))
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold the records of %d MoE layers", m->moe_layers);
  GAAW_CHECK(gaaw_model_finish(m, g->seed));
  GAAW_CHECK(upload_rope_table(m));
  return GAAW_SUCCESS;
}

static gaaw_dtype_t gpt_dtype(const void *cfg)
{
  return ((const gaaw_gpt_config_t *)cfg)->dtype;
}

static gaaw_status_t gpt_adopt(gaaw_model_t m, const void *cfg)
{
  const gaaw_gpt_config_t *g = cfg;
  m->gpt = *g;
  GAAW_CHECK_CTX(m->ctx, gaaw_gpt_check_config(m->ctx, g, m->tp_size));
  /* the defaults of zeroed fields, resolved once (checked to fit) */
  if (!m->gpt.ffn) m->gpt.ffn = 4 * g->dim;
  m->gpt.kv_heads = gaaw_gpt_kv_heads(g);
  m->gpt.head_dim = gaaw_gpt_head_dim(g);
  if (m->gpt.rope_theta == 0) m->gpt.rope_theta = 10000.0;
  if (m->gpt.norm_eps == 0) m->gpt.norm_eps = GAAW_NORM_EPS;
  m->gpt.no_bias = g->no_bias != 0;
  GAAW_CHECK_CTX(m->ctx, gaaw_gpt_check_moe(m->ctx, g, m->tp_size, m->cp_size, m->ep_size));
  if (g->experts) {
    if (!m->gpt.top_k) m->gpt.top_k = g->experts > 1 ? 2 : 1;
    if (!m->gpt.moe_every) m->gpt.moe_every = 1;
    if (!m->gpt.moe_ffn) m->gpt.moe_ffn = m->gpt.ffn;
  }
  if (m->cp_size > 1 && strcmp(gaaw_ctx_string(m->ctx, "attention"), "matrix") == 0)
    GAAW_FAIL(m->ctx, GAAW_ERR_UNSUPPORTED, "attention=matrix at cp = %d: context parallelism computes with the "
              "blocked kernels; use attention=auto or blocked", m->cp_size);
  int heads_here = g->heads / m->tp_size;
  if (m->cp_a2a && heads_here % m->cp_size != 0)
    GAAW_FAIL(m->ctx, GAAW_ERR_INVALID_ARG, "cp_kind=a2a at cp = %d: the %d heads of a tp rank (heads %d / tp %d) "
              "must divide by cp, which splits them; use cp_kind=ring", m->cp_size, heads_here, g->heads, m->tp_size);
  return GAAW_SUCCESS;
}

/* The logits of frame f, (rows, vocab) f32 gathered over the tp group into
 * logits. Collective over tp. */
static gaaw_status_t gather_logits(gaaw_model_t m, gaaw_frame *f, float *logits)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_tensor_t *mine = &gaaw_layer_saved(f, &m->layers[m->nlayers - 1])[HS_LOGITS];
  int64_t N = f->rows, Vl = m->vocab_local, nv = m->vocab_valid_local, P = m->tp_size, V = m->gpt.vocab;
  gaaw_dtype_t dt = mine->dtype;
  size_t es = gaaw_dtype_size(dt);
  /* (N, nv) padded to (N, Vl), so that every rank sends the same size */
  gaaw_tensor_t local = {0}, all = {0};
  gaaw_status_t st = gaaw_tensor_alloc(ctx, dt, 2, (int64_t[]){N, Vl}, GAAW_MEM_WORKSPACE, &local);
  if (st == GAAW_SUCCESS) st = gaaw_fill(ctx, &local, 0.0f);
  for (int64_t n = 0; n < N && st == GAAW_SUCCESS; n++) {
    gaaw_tensor_t src = gaaw_rows_view(mine, n, 1), dst = gaaw_rows_view(&local, n, 1);
    dst.shape[1] = nv;
    st = gaaw_cast(ctx, &src, &dst);
  }
  if (st == GAAW_SUCCESS) st = gaaw_tensor_alloc(ctx, dt, 2, (int64_t[]){P * N, Vl}, GAAW_MEM_WORKSPACE, &all);
  if (st == GAAW_SUCCESS) st = gaaw_tp_gather_rows(m->tp, &local, &all);
  void *host = st == GAAW_SUCCESS ? malloc((size_t)(P * N * Vl) * es) : NULL;
  if (st == GAAW_SUCCESS && !host) st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                         "cannot allocate %lld logits", (long long)(P * N * Vl));
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, all.buf, 0, host, (size_t)(P * N * Vl) * es);
  for (int64_t r = 0; st == GAAW_SUCCESS && r < P; r++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t j = 0; j < Vl && r * Vl + j < V; j++)
        logits[n * V + r * Vl + j] = gaaw_load_f32(host, dt, (r * N + n) * Vl + j);
  free(host);
  gaaw_buffer_free(ctx, &local.buf);
  gaaw_buffer_free(ctx, &all.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static int inference_layers(gaaw_model_t m)
{
  return m->nlayers; /* the head keeps the logits */
}

/* wpe, and wte unless the LM head is tied to it (then its logit matmul counts),
 * are table lookups; attention's QK^T and product with V over the full context
 * cost 4 FLOPs per position and query width (heads x head_dim) forward and 8
 * backward; RoPE and the norms are left out, as in Megatron's and PaLM's counts. */
static void gpt_flops(gaaw_model_t m, double *lookup_params, double *extra_flops)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  double C = g->dim, T = g->max_seq, HD = (double)g->heads * g->head_dim;
  *lookup_params = (learned_positions(m) ? T * C : 0) + (g->tied_embeddings ? 0 : (double)g->vocab * C);
  /* a token passes through top_k of an MoE layer's experts: the others' weights do
   * no work for it (MFU counts the active parameters) */
  *lookup_params += (double)m->moe_layers * (g->experts - g->top_k) * 3 * C * g->moe_ffn;
  *extra_flops = 12 * (double)g->layers * T * HD;
}

static const gaaw_model_kind_ops gpt_kind = {
  .kind = GAAW_MODEL_GPT,
  .article = "a GPT",
  .input_name = "tokens",
  .target_name = "targets",
  .output_name = "logits",
  .load_batch = gaaw_gpt_load_batch,
  .offset_batch = gaaw_gpt_offset_batch,
  .batch_digests = gaaw_gpt_batch_digests,
  .stream_rows = local_rows,
  .fill_targets = gaaw_gpt_fill_targets,
  .inference_layers = inference_layers,
  .read_outputs = gather_logits,
  .output_count = gaaw_gpt_output_count,
  .array_shapes = gaaw_gpt_array_shapes,
  .flops = gpt_flops,
};

static const gaaw_model_builder gpt_builder = {&gpt_kind, "GPT", gpt_dtype, gpt_adopt, gaaw_gpt_config_fields, build_gpt};

gaaw_status_t gaaw_model_create_gpt(gaaw_context_t ctx, const gaaw_gpt_config_t *cfg, gaaw_model_t *model)
{
  GAAW_CHECK_CTX(ctx, gaaw_model_build(ctx, &gpt_builder, cfg, model));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_plan_gpt(gaaw_context_t ctx, const gaaw_gpt_config_t *cfg, const gaaw_model_layout *layout,
                                  gaaw_model_t *model)
{
  GAAW_CHECK_CTX(ctx, gaaw_model_plan(ctx, &gpt_builder, cfg, layout, model));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_get_logits(gaaw_model_t m, float *logits)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_frame *f = &m->frame;
  gaaw_status_t ok = GAAW_SUCCESS;
  if (!logits || m->kind_ops->kind != GAAW_MODEL_GPT)
    ok = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          logits ? "only a GPT has logits" : "logits must not be NULL");
  else if (!f->have_forward)
    ok = gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__,
                          "logits exist between gaaw_model_forward and gaaw_model_backward only");
  else if (m->cp_size > 1) /* the same on every rank */
    ok = gaaw_error_raise(ctx, GAAW_ERR_UNSUPPORTED, __FILE__, __LINE__, __func__, "gaaw_model_get_logits at cp = %d: "
                          "the logits of a split sequence are not gathered yet", m->cp_size);
  GAAW_CHECK(gaaw_agree(m->tp, ok, "gaaw_model_get_logits", NULL, 0));
  GAAW_CHECK(gather_logits(m, f, logits));
  return GAAW_SUCCESS;
}
