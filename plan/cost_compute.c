/* The compute side of the cost model: the job's sizes, a GEMM's rate on a device,
 * and the work of one microbatch through a GPT block and through the LM head.
 *
 * A block on one rank of a tp group of t and a cp group of c, microbatch of b
 * rows, N = b s / c tokens (the rank's pieces of its rows),
 * C = dim, H = heads, D = head_dim (C / H unless given), Q = H D, K = kv_heads,
 * Kl = K D / t (D when t exceeds K: one replicated kv head), F = ffn, Fu = c_fc
 * outputs (F, or 2 F for SwiGLU):
 *   c_attn   (N, Q/t + 2 Kl) = (N, C)  (C, Q/t + 2 Kl)   column-parallel
 *   scores   (s, s)    = (s, D)    (D, s)         b H / t of them, over c
 *   context  (s, D)    = (s, s)    (s, D)         b H / t of them, over c
 *   (at c > 1 the ring computes c blocks of (s/c, s/c) per head, a2a the whole
 *   (s, s) of H / (t c) heads: each a c-th of the core; plan/cost_cp.c adds their
 *   exchanges)
 *   c_proj   (N, C)    = (N, Q/t)  (Q/t, C)       row-parallel
 *   c_fc     (N, Fu/t) = (N, C)    (C, Fu/t)      column-parallel
 *   c_proj   (N, C)    = (N, F/t)  (F/t, C)       row-parallel
 * Each linear's backward is one GEMM of its FLOPs for the input gradient (B) and
 * one for the weight gradient (W); attention's scores and context have no weight:
 * their backward (twice their forward) is all B. Elementwise kernels (norms,
 * biases, residuals, GELU, softmax) read and write their tensors once forward and
 * twice backward, at the device's memory bandwidth; with sequence parallelism the
 * norms and residuals work on N / t tokens. Recompute: selective re-runs the
 * attention core (scores, softmax, context) in backward, full the whole forward. */
#include <math.h>

#include "plan/plan_impl.h"

void plan_shape_of(const gaaw_plan_request_t *r, plan_shape *sh)
{
  const gaaw_gpt_config_t *g = &r->model;
  sh->h = g->dim;
  sh->s = g->max_seq;
  sh->a = g->heads;
  sh->d = g->head_dim > 0 ? g->head_dim : (double)g->dim / g->heads;
  sh->kv = g->kv_heads > 0 ? g->kv_heads : g->heads;
  sh->q = sh->a * sh->d;
  sh->f = g->ffn > 0 ? g->ffn : 4.0 * g->dim;
  sh->fc1_out = g->activation == GAAW_ACT_SWIGLU ? 2 * sh->f : sh->f;
  sh->V = g->vocab;
  sh->L = g->layers;
  sh->e = (double)gaaw_dtype_size(g->dtype);
  double h = sh->h, qkv = sh->q + 2 * sh->kv * sh->d, bias = g->no_bias ? 0 : 1;
  double norm = g->norm == GAAW_NORM_LAYERNORM ? 2 * h : h;
  /* ln_1, c_attn, c_proj, ln_2, c_fc, c_proj: weights and biases (gpt.c's add_block) */
  sh->block_params = 2 * norm + h * qkv + sh->q * h + h * sh->fc1_out + sh->f * h +
                     bias * (qkv + h + sh->fc1_out + h);
  double wte = sh->V * h, wpe = g->position == GAAW_POSITION_LEARNED ? sh->s * h : 0, lnf = norm;
  sh->embed_params = wte * (g->tied_embeddings ? 1 : 2) + wpe + lnf;
  /* 6 N + 12 L s q, N without the looked-up tables (gaaw_model_flops_per_token) */
  double n = sh->L * sh->block_params + sh->embed_params - wpe - (g->tied_embeddings ? 0 : wte);
  sh->flops_per_token = 6 * n + 12 * sh->L * sh->s * sh->q;
}

/* The rate (FLOP/s) of a GEMM of `flops` FLOPs whose smallest dimension is dmin:
 * without measured points, peak x efficiency, falling as dmin / (dmin + 64) for thin
 * GEMMs (a tile of 128 is half used at 64); with points, the inverse-distance
 * weighted mean of their rates in (log FLOPs, log dmin), the nearest dominating. */
static double gemm_rate(const gaaw_plan_device_t *d, double flops, double dmin)
{
  if (d->gemm_points <= 0) return d->peak_tflops * PLAN_TFLOP * d->gemm_efficiency * dmin / (dmin + 64);
  double num = 0, den = 0;
  for (int i = 0; i < d->gemm_points && i < GAAW_PLAN_GEMM_POINTS; i++) {
    const gaaw_plan_gemm_point_t *p = &d->gemm[i];
    double pmin = fmin(p->m, fmin(p->n, p->k));
    double dx = log(flops / (2 * p->m * p->n * p->k)), dy = log(dmin / pmin);
    double wgt = 1 / (dx * dx + dy * dy + 1e-6);
    num += wgt * p->tflops;
    den += wgt;
  }
  return num / den * PLAN_TFLOP;
}

double plan_gemm_seconds(const gaaw_plan_device_t *d, double m, double n, double k, double count)
{
  double flops = 2 * m * n * k;
  return count * flops / gemm_rate(d, flops, fmin(m, fmin(n, k)));
}

/* Forward and backward of one linear (N, out) = (N, in) (in, out): forward in f,
 * input gradient in b, weight gradient in w. */
static void add_linear(const gaaw_plan_device_t *d, double N, double out, double in, plan_work *x)
{
  double t = plan_gemm_seconds(d, N, out, in, 1);
  x->f += t;
  x->b += t;
  x->w += t;
}

/* The attention core (scores and context) of one microbatch on a rank: forward
 * seconds. */
double plan_core_seconds(const plan_shape *sh, const gaaw_plan_device_t *d, const gaaw_plan_layout_t *l)
{
  double c = l->cp > 1 ? l->cp : 1, heads = l->microbatch * sh->a / l->tp, s = sh->s, D = sh->d;
  if (c > 1 && l->cp_kind == 0) /* ring: c (s/c, s/c) blocks per head */
    return plan_gemm_seconds(d, s / c, s / c, D, heads * c) + plan_gemm_seconds(d, s / c, D, s / c, heads * c);
  return plan_gemm_seconds(d, s, s, D, heads / c) + plan_gemm_seconds(d, s, D, s, heads / c);
}

void plan_block_work(const plan_shape *sh, const gaaw_plan_device_t *d, const gaaw_plan_layout_t *l,
                     int sequence_parallel, plan_work *out)
{
  double t = l->tp, c = l->cp > 1 ? l->cp : 1, b = l->microbatch, s = sh->s, h = sh->h, N = b * s / c, D = sh->d;
  double e = sh->e, kvl = sh->kv >= t ? sh->kv * D / t : D, qkvl = sh->q / t + 2 * kvl;
  double bw = d->memory_gbps * PLAN_GB;
  plan_work x = {0, 0, 0};
  add_linear(d, N, qkvl, h, &x);
  add_linear(d, N, h, sh->q / t, &x);
  add_linear(d, N, sh->fc1_out / t, h, &x);
  add_linear(d, N, h, sh->f / t, &x);
  double core = plan_core_seconds(sh, d, l);
  /* elementwise bytes forward: softmax and its scale and mask on the scores (read
   * and write, twice), biases and GELU on the column outputs, and the norms and
   * residuals on the (possibly sequence-split) stream */
  double tok = sequence_parallel ? N / t : N;
  double softmax = 4 * b * (sh->a / t) * s * s / c * e;
  double columns = 2 * N * (qkvl + sh->fc1_out / t) * e + 2 * N * sh->f / t * e;
  double stream = tok * (2 * 2 * h + 2 * 3 * h) * e + 2 * N * 2 * h / t * e;
  double elem = (softmax + columns + stream) / bw;
  x.f += core + elem;
  x.b += 2 * core + 2 * elem;
  if (l->recompute == 1) x.b += core + softmax / bw;
  if (l->recompute == 2) x.b += x.f;
  *out = x;
}

void plan_head_work(const plan_shape *sh, const gaaw_plan_device_t *d, const gaaw_plan_layout_t *l, plan_work *out)
{
  double N = (double)l->microbatch * sh->s / (l->cp > 1 ? l->cp : 1), Vt = ceil(sh->V / l->tp), e = sh->e;
  plan_work x = {0, 0, 0};
  add_linear(d, N, Vt, sh->h, &x);
  /* ln_f, then the logits read three times by the loss (max, sum of exp, gradient)
   * and written once; the embedding's lookup and position add */
  double elem = (N * 2 * sh->h * e + 4 * N * Vt * e + 3 * N * sh->h * e) / (d->memory_gbps * PLAN_GB);
  x.f += elem;
  x.b += elem;
  *out = x;
}
