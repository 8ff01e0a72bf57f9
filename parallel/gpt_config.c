/* The GPT's configuration: its defaults (GPT-2, LLaMA), the checks of its fields
 * with the layout's tp and cp, and the fields every rank must share. Not
 * collective. */
#include <limits.h>
#include <math.h>

#include "backends/agree.h"
#include "parallel/gpt.h"
#include "parallel/norm.h"

void gaaw_gpt_config_default(gaaw_gpt_config_t *cfg)
{
  if (!cfg) return;
  cfg->vocab = 256;
  cfg->max_seq = 128;
  cfg->layers = 4;
  cfg->heads = 4;
  cfg->dim = 256;
  cfg->ffn = 0;
  cfg->norm = GAAW_NORM_LAYERNORM;
  cfg->activation = GAAW_ACT_GELU;
  cfg->tied_embeddings = 1;
  cfg->sequence_parallel = 0;
  cfg->seed = 1337;
  cfg->dtype = GAAW_F32;
  cfg->kv_heads = 0;
  cfg->head_dim = 0;
  cfg->position = GAAW_POSITION_LEARNED;
  cfg->rope_theta = 10000.0;
  cfg->no_bias = 0;
  cfg->norm_eps = GAAW_NORM_EPS;
  cfg->experts = 0;
  cfg->top_k = 2;
  cfg->moe_every = 1;
  cfg->moe_ffn = 0;
  cfg->router_score = GAAW_ROUTER_SOFTMAX;
  cfg->moe_raw_weights = 0;
  cfg->aux_loss_coef = 0.01f;
  cfg->z_loss_coef = 0;
  cfg->capacity_factor = 0;
  cfg->drop_policy = GAAW_DROP_PROBS;
  cfg->shared_ffn = 0;
  cfg->shared_gate = 0;
}

void gaaw_gpt_config_llama(gaaw_gpt_config_t *cfg)
{
  if (!cfg) return;
  cfg->position = GAAW_POSITION_ROPE;
  if (cfg->rope_theta == 0) cfg->rope_theta = 10000.0;
  cfg->norm = GAAW_NORM_RMSNORM;
  cfg->activation = GAAW_ACT_SWIGLU;
  cfg->no_bias = 1;
  cfg->tied_embeddings = 0;
  if (cfg->ffn == 0 && cfg->dim > 0) {
    int64_t multiple = cfg->dim >= 1024 ? 256 : 32, hidden = 8 * (int64_t)cfg->dim / 3;
    hidden = (hidden + multiple - 1) / multiple * multiple;
    cfg->ffn = hidden <= INT_MAX ? (int)hidden : 0; /* too large: gaaw_model_create_gpt says so */
  }
}

static const char *position_name(gaaw_position_t p)
{
  return p == GAAW_POSITION_LEARNED ? "learned" : p == GAAW_POSITION_ROPE ? "rope" : "?";
}

/* The attention's sizes with a zeroed field's default: kv heads and head width. */
int gaaw_gpt_kv_heads(const gaaw_gpt_config_t *g)
{
  return g->kv_heads ? g->kv_heads : g->heads;
}

int gaaw_gpt_head_dim(const gaaw_gpt_config_t *g)
{
  return g->head_dim ? g->head_dim : g->heads ? g->dim / g->heads : 0;
}

static gaaw_status_t check_attention(gaaw_context_t ctx, const gaaw_gpt_config_t *g, int tp)
{
  int kv = gaaw_gpt_kv_heads(g), hd = gaaw_gpt_head_dim(g);
  GAAW_ARG_CHECK(ctx, g->kv_heads >= 0, "kv_heads must be >= 0 (0 = heads), got %d", g->kv_heads);
  GAAW_ARG_CHECK(ctx, g->head_dim >= 0, "head_dim must be >= 0 (0 = dim / heads), got %d", g->head_dim);
  GAAW_ARG_CHECK(ctx, g->head_dim || g->dim % g->heads == 0,
                 "dim (%d) must be divisible by heads (%d), or head_dim given", g->dim, g->heads);
  GAAW_ARG_CHECK(ctx, hd >= 1, "head_dim is %d: dim / heads must be >= 1", hd);
  GAAW_ARG_CHECK(ctx, g->heads % kv == 0, "heads (%d) must be divisible by kv_heads (%d)", g->heads, kv);
  GAAW_ARG_CHECK(ctx, g->heads % tp == 0, "heads (%d) must be divisible by tp (%d)", g->heads, tp);
  GAAW_ARG_CHECK(ctx, kv % tp == 0 || tp % kv == 0,
                 "kv_heads (%d) and tp (%d): one must divide the other (kv heads split over tp, or each replicated on "
                 "tp / kv_heads ranks)", kv, tp);
  GAAW_ARG_CHECK(ctx, g->position == GAAW_POSITION_LEARNED || g->position == GAAW_POSITION_ROPE,
                 "position %d is not a gaaw_position_t", (int)g->position);
  GAAW_ARG_CHECK(ctx, g->position != GAAW_POSITION_ROPE || hd % 2 == 0, "RoPE needs an even head_dim, got %d", hd);
  GAAW_ARG_CHECK(ctx, isfinite(g->rope_theta) && g->rope_theta >= 0 && (g->rope_theta == 0 || g->rope_theta > 1),
                 "rope_theta must be > 1 (0 = 10000), got %g", g->rope_theta);
  GAAW_ARG_CHECK(ctx, isfinite(g->norm_eps) && g->norm_eps >= 0, "norm_eps must be finite and >= 0 (0 = 1e-5), got %g",
                 (double)g->norm_eps);
  return GAAW_SUCCESS;
}

static const char *router_score_name(gaaw_router_score_t r)
{
  return r == GAAW_ROUTER_SOFTMAX ? "softmax" : r == GAAW_ROUTER_SIGMOID ? "sigmoid" : "?";
}

/* The mixture of experts' fields, when experts > 0 (ignored otherwise). */
gaaw_status_t gaaw_gpt_check_moe(gaaw_context_t ctx, const gaaw_gpt_config_t *g, int tp, int cp, int ep)
{
  GAAW_ARG_CHECK(ctx, g->experts >= 0, "experts must be >= 0 (0: dense MLPs), got %d", g->experts);
  GAAW_ARG_CHECK(ctx, ep == 1 || g->experts > 0, "ep = %d splits experts, but the model has none (experts = 0)", ep);
  if (g->experts == 0) return GAAW_SUCCESS;
  GAAW_ARG_CHECK(ctx, g->experts % ep == 0, "experts (%d) must divide over ep = %d ranks", g->experts, ep);
  GAAW_ARG_CHECK(ctx, g->top_k >= 0 && g->top_k <= g->experts, "top_k (%d) must be in 1..experts (%d), or 0 = 2",
                 g->top_k, g->experts);
  GAAW_ARG_CHECK(ctx, g->moe_every >= 0, "moe_every must be >= 0 (0 = 1: every block), got %d", g->moe_every);
  GAAW_ARG_CHECK(ctx, g->moe_ffn >= 0 && g->moe_ffn <= INT_MAX / 2,
                 "moe_ffn must be in 0..%d (0 = ffn; twice it is an expert's input width), got %d", INT_MAX / 2,
                 g->moe_ffn);
  GAAW_ARG_CHECK(ctx, g->router_score == GAAW_ROUTER_SOFTMAX || g->router_score == GAAW_ROUTER_SIGMOID,
                 "router_score %d is not a gaaw_router_score_t", (int)g->router_score);
  GAAW_ARG_CHECK(ctx, isfinite(g->aux_loss_coef) && g->aux_loss_coef >= 0 && isfinite(g->z_loss_coef) &&
                        g->z_loss_coef >= 0,
                 "aux_loss_coef and z_loss_coef must be finite and >= 0, got %g and %g", (double)g->aux_loss_coef,
                 (double)g->z_loss_coef);
  GAAW_ARG_CHECK(ctx, isfinite(g->capacity_factor) && g->capacity_factor >= 0,
                 "capacity_factor must be finite and >= 0 (0: dropless), got %g", (double)g->capacity_factor);
  GAAW_ARG_CHECK(ctx, g->shared_ffn >= 0 && g->shared_ffn <= INT_MAX / 2,
                 "shared_ffn must be in 0..%d (0: no shared expert), got %d", INT_MAX / 2, g->shared_ffn);
  GAAW_ARG_CHECK(ctx, g->drop_policy == GAAW_DROP_PROBS || g->drop_policy == GAAW_DROP_POSITION,
                 "drop_policy %d is not a gaaw_drop_policy_t", (int)g->drop_policy);
  if (g->dtype != GAAW_F32)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "experts = %d with dtype %s: the MoE layer computes in f32 only for now",
              g->experts, gaaw_dtype_name(g->dtype));
  if (cp > 1)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "experts = %d at cp = %d: the MoE layer runs at cp 1 only for now (its "
              "folding over cp is not built yet)", g->experts, cp);
  if (ep > 1 && tp > 1)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "ep = %d with tp = %d: expert parallelism folded over tp ranks is not "
              "built yet (use ep with tp 1)", ep, tp);
  if (tp > 1 && g->capacity_factor > 0)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "capacity_factor %g at tp = %d: the drop decision over a token group of "
              "tp ranks is not built yet (dropless works at any tp)", (double)g->capacity_factor, tp);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_gpt_check_config(gaaw_context_t ctx, const gaaw_gpt_config_t *g, int tp)
{
  GAAW_ARG_CHECK(ctx, g->vocab >= 1, "vocab must be >= 1, got %d", g->vocab);
  GAAW_ARG_CHECK(ctx, g->max_seq >= 1, "max_seq must be >= 1, got %d", g->max_seq);
  GAAW_ARG_CHECK(ctx, g->layers >= 1, "layers must be >= 1, got %d", g->layers);
  GAAW_ARG_CHECK(ctx, g->heads >= 1, "heads must be >= 1, got %d", g->heads);
  GAAW_ARG_CHECK(ctx, g->dim >= 1, "dim must be >= 1, got %d", g->dim);
  GAAW_ARG_CHECK(ctx, g->ffn >= 0, "ffn must be >= 0 (0 = 4 x dim), got %d", g->ffn);
  GAAW_CHECK(check_attention(ctx, g, tp));
  /* widths in 64 bits: each must fit the int of the config and of the kernels */
  int64_t ffn = g->ffn ? g->ffn : 4 * (int64_t)g->dim;
  int64_t fc = g->activation == GAAW_ACT_SWIGLU ? 2 * ffn : ffn;
  GAAW_ARG_CHECK(ctx, ffn <= INT_MAX, "dim %d is too large: the MLP width 4 x dim = %lld exceeds %d", g->dim,
                 (long long)ffn, INT_MAX);
  GAAW_ARG_CHECK(ctx, fc <= INT_MAX, "ffn %lld is too large for SwiGLU: its input width 2 x ffn = %lld exceeds %d",
                 (long long)ffn, (long long)fc, INT_MAX);
  int64_t qkv = ((int64_t)g->heads + 2 * (int64_t)gaaw_gpt_kv_heads(g)) * gaaw_gpt_head_dim(g);
  GAAW_ARG_CHECK(ctx, qkv <= INT_MAX, "the attention width (heads + 2 kv_heads) x head_dim = %lld exceeds %d",
                 (long long)qkv, INT_MAX);
  GAAW_ARG_CHECK(ctx, ffn % tp == 0, "ffn (%lld) must be divisible by tp (%d)", (long long)ffn, tp);
  GAAW_ARG_CHECK(ctx, g->norm == GAAW_NORM_LAYERNORM || g->norm == GAAW_NORM_RMSNORM, "norm %d is not a gaaw_norm_t",
                 (int)g->norm);
  GAAW_ARG_CHECK(ctx, g->activation == GAAW_ACT_GELU || g->activation == GAAW_ACT_SWIGLU,
                 "activation %d must be GAAW_ACT_GELU or GAAW_ACT_SWIGLU", (int)g->activation);
  int64_t vl = ((int64_t)g->vocab + tp - 1) / tp;
  GAAW_ARG_CHECK(ctx, g->vocab > (int64_t)(tp - 1) * vl,
                 "vocab %d is too small for tp %d: padded to %lld rows per rank, the last rank would hold none",
                 g->vocab, tp, (long long)vl);
  return GAAW_SUCCESS;
}

/* What every rank must share: the tp group splits one model, and the dp
 * replicas must be the same model. */
int gaaw_gpt_config_fields(const void *cfg, gaaw_field *f)
{
  const gaaw_gpt_config_t *g = cfg;
  int n = 0;
  f[n++] = GAAW_FIELD_INT("vocab", g->vocab);
  f[n++] = GAAW_FIELD_INT("max_seq", g->max_seq);
  f[n++] = GAAW_FIELD_INT("layers", g->layers);
  f[n++] = GAAW_FIELD_INT("heads", g->heads);
  f[n++] = GAAW_FIELD_INT("dim", g->dim);
  f[n++] = GAAW_FIELD_INT("ffn", g->ffn);
  f[n++] = GAAW_FIELD_NAMED("norm", g->norm, gaaw_norm_name(g->norm));
  f[n++] = GAAW_FIELD_NAMED("activation", g->activation, gaaw_activation_name(g->activation));
  f[n++] = GAAW_FIELD_INT("tied_embeddings", g->tied_embeddings != 0);
  f[n++] = GAAW_FIELD_INT("sequence_parallel", g->sequence_parallel != 0);
  f[n++] = GAAW_FIELD_INT("seed", (int64_t)g->seed);
  f[n++] = GAAW_FIELD_NAMED("dtype", g->dtype, gaaw_dtype_name(g->dtype));
  f[n++] = GAAW_FIELD_INT("kv_heads", g->kv_heads);
  f[n++] = GAAW_FIELD_INT("head_dim", g->head_dim);
  f[n++] = GAAW_FIELD_NAMED("position", g->position, position_name(g->position));
  f[n++] = GAAW_FIELD_REAL("rope_theta", g->rope_theta);
  f[n++] = GAAW_FIELD_INT("no_bias", g->no_bias != 0);
  f[n++] = GAAW_FIELD_FLOAT("norm_eps", g->norm_eps);
  f[n++] = GAAW_FIELD_INT("experts", g->experts);
  f[n++] = GAAW_FIELD_INT("top_k", g->top_k);
  f[n++] = GAAW_FIELD_INT("moe_every", g->moe_every);
  f[n++] = GAAW_FIELD_INT("moe_ffn", g->moe_ffn);
  f[n++] = GAAW_FIELD_NAMED("router_score", g->router_score, router_score_name(g->router_score));
  f[n++] = GAAW_FIELD_INT("moe_raw_weights", g->moe_raw_weights != 0);
  f[n++] = GAAW_FIELD_FLOAT("aux_loss_coef", g->aux_loss_coef);
  f[n++] = GAAW_FIELD_FLOAT("z_loss_coef", g->z_loss_coef);
  f[n++] = GAAW_FIELD_FLOAT("capacity_factor", g->capacity_factor);
  f[n++] = GAAW_FIELD_INT("shared_ffn", g->shared_ffn);
  f[n++] = GAAW_FIELD_INT("shared_gate", g->shared_gate != 0);
  f[n++] = GAAW_FIELD_NAMED("drop_policy", g->drop_policy, g->drop_policy == GAAW_DROP_PROBS ? "probs" :
                                                           g->drop_policy == GAAW_DROP_POSITION ? "position" : "?");
  return n;
}
