/* Scaled causal softmax and causal attention, composed from batched GEMM and the
 * softmax (scores = q k^T, probs = causal softmax of scores / sqrt(D), out = probs v). */
#include <math.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"
#include "backends/runtime/error.h"

/* ---------------------------------------------------------------- f32 cores */

/* Causal softmax of (batch, T, T) f32 scores (y may be x). */
static void causal_softmax_forward_f32(int64_t batch, int64_t T, float scale, const float *x, float *y)
{
  int64_t rows = batch * T;
#pragma omp parallel for if (rows * T > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    int64_t t = r % T; /* row t sees columns 0..t */
    const float *xr = x + r * T;
    float *yr = y + r * T;
    float max = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j <= t; j++) max = fmaxf(max, scale * xr[j]);
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j <= t; j++) { /* reads xr[j] before writing yr[j]: y may be x */
      float e = host_expf(scale * xr[j] - max);
      yr[j] = e;
      sum += e;
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j <= t; j++) yr[j] *= inv;
    for (int64_t j = t + 1; j < T; j++) yr[j] = 0.0f;
  }
}

/* dx (+)= scale y (dy - sum_j dy y); dx may be dy when accumulate is 0. */
static void causal_softmax_backward_f32(int64_t batch, int64_t T, float scale, const float *y, const float *dy,
                                        float *dx, int accumulate)
{
  int64_t rows = batch * T;
#pragma omp parallel for if (rows * T > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    int64_t t = r % T;
    const float *yr = y + r * T, *dyr = dy + r * T;
    float *dxr = dx + r * T, dot = 0.0f;
    for (int64_t j = 0; j <= t; j++) dot += dyr[j] * yr[j];
    if (accumulate) {
      for (int64_t j = 0; j <= t; j++) dxr[j] += scale * yr[j] * (dyr[j] - dot);
    } else { /* dx may be dy: dot is complete before any write */
      for (int64_t j = 0; j <= t; j++) dxr[j] = scale * yr[j] * (dyr[j] - dot);
      for (int64_t j = t + 1; j < T; j++) dxr[j] = 0.0f;
    }
  }
}

/* q, k, v, out: (BH, T, D)   probs: (BH, T, T) */
static gaaw_status_t attention_forward_f32(gaaw_context_t ctx, int64_t BH, int64_t T, int64_t D, const float *q,
                                           const float *k, const float *v, float *probs, float *out)
{
  GAAW_CHECK(gaaw_host_sgemm_batched(ctx, GAAW_OP_N, GAAW_OP_T, BH, T, T, D, 1.0f, q, k, 0.0f, probs));
  causal_softmax_forward_f32(BH, T, 1.0f / sqrtf((float)D), probs, probs);
  GAAW_CHECK(gaaw_host_sgemm_batched(ctx, GAAW_OP_N, GAAW_OP_N, BH, T, D, T, 1.0f, probs, v, 0.0f, out));
  return GAAW_SUCCESS;
}

static gaaw_status_t attention_backward_f32(gaaw_context_t ctx, int64_t BH, int64_t T, int64_t D,
                                            const float *dout, const float *q, const float *k, const float *v,
                                            const float *probs, float *dprobs, float *dq, float *dk, float *dv)
{
  /* dv += probs^T dout;  dprobs = dout v^T */
  GAAW_CHECK(gaaw_host_sgemm_batched(ctx, GAAW_OP_T, GAAW_OP_N, BH, T, D, T, 1.0f, probs, dout, 1.0f, dv));
  GAAW_CHECK(gaaw_host_sgemm_batched(ctx, GAAW_OP_N, GAAW_OP_T, BH, T, T, D, 1.0f, dout, v, 0.0f, dprobs));
  /* dscores (in dprobs) = scale probs (dprobs - rowsum(dprobs probs)) */
  causal_softmax_backward_f32(BH, T, 1.0f / sqrtf((float)D), probs, dprobs, dprobs, 0);
  /* dq += dscores k;  dk += dscores^T q */
  GAAW_CHECK(gaaw_host_sgemm_batched(ctx, GAAW_OP_N, GAAW_OP_N, BH, T, D, T, 1.0f, dprobs, k, 1.0f, dq));
  GAAW_CHECK(gaaw_host_sgemm_batched(ctx, GAAW_OP_T, GAAW_OP_N, BH, T, D, T, 1.0f, dprobs, q, 1.0f, dk));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- table entries */

/* (batch, T) of a (..., T, T) tensor. */
static void square_dims(const gaaw_tensor_t *t, int64_t *batch, int64_t *T)
{
  *T = host_cols(t);
  *batch = *T ? host_rows(t) / *T : 0;
}

gaaw_status_t host_causal_softmax_forward(gaaw_context_t ctx, float scale, gaaw_cten x, gaaw_ten y)
{
  int64_t batch, T;
  square_dims(x, &batch, &T);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x);
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS) causal_softmax_forward_f32(batch, T, scale, px, py);
  return host_stage_end(&s);
}

gaaw_status_t host_causal_softmax_backward(gaaw_context_t ctx, float scale, gaaw_cten y, gaaw_cten dy, gaaw_ten dx)
{
  int64_t batch, T;
  square_dims(y, &batch, &T);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *py = host_in(&s, y), *pdy = host_in(&s, dy);
  float *pdx = host_inout(&s, dx);
  if (s.status == GAAW_SUCCESS) causal_softmax_backward_f32(batch, T, scale, py, pdy, pdx, 1);
  return host_stage_end(&s);
}

gaaw_status_t host_attention_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v, gaaw_ten probs,
                                     gaaw_ten out)
{
  int64_t BH, T, D = host_cols(q);
  square_dims(probs, &BH, &T);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pq = host_in(&s, q), *pk = host_in(&s, k), *pv = host_in(&s, v);
  float *pp = host_out(&s, probs), *po = host_out(&s, out);
  if (s.status == GAAW_SUCCESS) s.status = attention_forward_f32(ctx, BH, T, D, pq, pk, pv, pp, po);
  return host_stage_end(&s);
}

gaaw_status_t host_attention_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                      gaaw_cten probs, gaaw_ten dprobs, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)
{
  int64_t BH, T, D = host_cols(q);
  square_dims(probs, &BH, &T);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdo = host_in(&s, dout), *pq = host_in(&s, q), *pk = host_in(&s, k), *pv = host_in(&s, v);
  const float *pp = host_in(&s, probs);
  float *pdp = host_out(&s, dprobs), *pdq = host_inout(&s, dq), *pdk = host_inout(&s, dk), *pdv = host_inout(&s, dv);
  if (s.status == GAAW_SUCCESS)
    s.status = attention_backward_f32(ctx, BH, T, D, pdo, pq, pk, pv, pp, pdp, pdq, pdk, pdv);
  return host_stage_end(&s);
}
