/* Cross-entropy pieces on a vocabulary slice: row max, sum of exp, target logit, and
 * the gradient, apart and fused into one pass per row (backends/fused.h); and the elementwise regression losses (MSE, L1, Huber). Sums of exp are in f32: every term is in (0, 1], so there is no
 * cancellation, and the vectorised sum keeps the rounding error near sqrt(V) ulp. */
#include <math.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"

/* The column of row n's target inside the slice, or -1 (outside, or ignored). */
static inline int64_t target_column(const int32_t *targets, int64_t n, int64_t vocab_start, int64_t V)
{
  if (targets[n] < 0) return -1;
  int64_t col = (int64_t)targets[n] - vocab_start;
  return col >= 0 && col < V ? col : -1;
}

/* ---------------------------------------------------------------- rows; l, dl: (V) */

/* Each row function is built for the widest vector unit (HOST_VECTOR_CLONES); the
 * max is exact in any order, the sum of exp is in the lanes' order (host_math.h), so
 * every vector width gives the same bits. */

/* max_v l[v], nan ignored as fmaxf does (-inf for a row of nan) */
HOST_VECTOR_CLONES static float max_of_row(int64_t V, const float *l)
{
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t v = 0; v < V; v++) m = l[v] > m ? l[v] : m;
  return m;
}

HOST_VECTOR_CLONES static float sum_exp_of_row(int64_t V, const float *l, float m)
{
  float part[HOST_SUM_LANES] = {0};
  int64_t full = V / HOST_SUM_LANES * HOST_SUM_LANES;
  for (int64_t v0 = 0; v0 < full; v0 += HOST_SUM_LANES)
#pragma omp simd
    for (int k = 0; k < HOST_SUM_LANES; k++) part[k] += host_expf(l[v0 + k] - m);
  for (int64_t v = full; v < V; v++) part[v - full] += host_expf(l[v] - m);
  return host_lanes_total(part);
}

/* dl += dloss (softmax - onehot(col)), col < 0: no target in the slice. */
HOST_VECTOR_CLONES static void gradient_of_row(int64_t V, const float *l, float m, float sumexp, int64_t col,
                                               float dloss, float *dl)
{
  float inv = 1.0f / sumexp;
#pragma omp simd
  for (int64_t v = 0; v < V; v++) dl[v] += dloss * host_expf(l[v] - m) * inv;
  if (col >= 0) dl[col] -= dloss;
}

/* ---------------------------------------------------------------- f32 cores; logits: (N, V) */

static void row_max_f32(int64_t N, int64_t V, const float *logits, float *max)
{
#pragma omp parallel for if (N * V > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) max[n] = max_of_row(V, logits + n * V);
}

static void row_sum_exp_f32(int64_t N, int64_t V, const float *logits, const float *max, float *sumexp)
{
#pragma omp parallel for if (N * V > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) sumexp[n] = sum_exp_of_row(V, logits + n * V, max[n]);
}

static void target_logit_f32(int64_t N, int64_t V, const float *logits, const int32_t *targets, int64_t vocab_start,
                             float *target)
{
  for (int64_t n = 0; n < N; n++) {
    int64_t col = target_column(targets, n, vocab_start, V);
    target[n] = col >= 0 ? logits[n * V + col] : 0.0f;
  }
}

static void cross_entropy_backward_f32(int64_t N, int64_t V, const float *logits, const float *max,
                                       const float *sumexp, const int32_t *targets, int64_t vocab_start, float dloss,
                                       float *dlogits)
{
#pragma omp parallel for if (N * V > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    if (targets[n] < 0) continue; /* ignored row: no gradient */
    gradient_of_row(V, logits + n * V, max[n], sumexp[n], target_column(targets, n, vocab_start, V), dloss,
                    dlogits + n * V);
  }
}

/* The four above, row by row while the row is in cache (backends/fused.h);
 * dlogits NULL: no gradient. */
static void cross_entropy_forward_f32(int64_t N, int64_t V, const float *logits, const int32_t *targets,
                                      int64_t vocab_start, float dloss, float *max, float *sumexp, float *target,
                                      float *dlogits)
{
#pragma omp parallel for if (N * V > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float *l = logits + n * V;
    int64_t col = target_column(targets, n, vocab_start, V);
    max[n] = max_of_row(V, l);
    sumexp[n] = sum_exp_of_row(V, l, max[n]);
    target[n] = col >= 0 ? l[col] : 0.0f;
    if (dlogits && targets[n] >= 0) gradient_of_row(V, l, max[n], sumexp[n], col, dloss, dlogits + n * V);
  }
}

/* loss = w l(d), grad = w l'(d), d = pred - target (gaaw/kernels.h); w NULL: 1. */
static void regression_loss_f32(gaaw_loss_t kind, float delta, int64_t n, const float *pred, const float *target,
                                const float *w, float *loss, float *grad)
{
#pragma omp parallel for simd if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    float d = pred[i] - target[i], a = fabsf(d), sign = d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f;
    float l, g;
    if (kind == GAAW_LOSS_MSE) {
      l = d * d, g = 2.0f * d;
    } else if (kind == GAAW_LOSS_L1) {
      l = a, g = sign;
    } else if (a < delta) {
      l = 0.5f * d * d, g = d;
    } else {
      l = delta * (a - 0.5f * delta), g = delta * sign;
    }
    float wi = w ? w[i] : 1.0f;
    loss[i] = wi * l;
    grad[i] = wi * g;
  }
}

/* ---------------------------------------------------------------- table entries */

gaaw_status_t host_row_max(gaaw_context_t ctx, gaaw_cten logits, gaaw_ten max)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pl = host_in(&s, logits);
  float *pm = host_out(&s, max);
  if (s.status == GAAW_SUCCESS) row_max_f32(host_rows(logits), host_cols(logits), pl, pm);
  return host_stage_end(&s);
}

gaaw_status_t host_row_sum_exp(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten max, gaaw_ten sumexp)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pl = host_in(&s, logits), *pm = host_in(&s, max);
  float *ps = host_out(&s, sumexp);
  if (s.status == GAAW_SUCCESS) row_sum_exp_f32(host_rows(logits), host_cols(logits), pl, pm, ps);
  return host_stage_end(&s);
}

gaaw_status_t host_target_logit(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten targets, int64_t vocab_start,
                                gaaw_ten target)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pl = host_in(&s, logits);
  const int32_t *pt = host_raw(&s, targets);
  float *pout = host_out(&s, target);
  if (s.status == GAAW_SUCCESS) target_logit_f32(host_rows(logits), host_cols(logits), pl, pt, vocab_start, pout);
  return host_stage_end(&s);
}

gaaw_status_t host_cross_entropy_backward(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten max, gaaw_cten sumexp,
                                          gaaw_cten targets, int64_t vocab_start, float dloss, gaaw_ten dlogits)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pl = host_in(&s, logits), *pm = host_in(&s, max), *ps = host_in(&s, sumexp);
  const int32_t *pt = host_raw(&s, targets);
  float *pd = host_inout(&s, dlogits);
  if (s.status == GAAW_SUCCESS)
    cross_entropy_backward_f32(host_rows(logits), host_cols(logits), pl, pm, ps, pt, vocab_start, dloss, pd);
  return host_stage_end(&s);
}

gaaw_status_t host_cross_entropy_forward(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten targets, int64_t vocab_start,
                                         float dloss, gaaw_ten max, gaaw_ten sumexp, gaaw_ten target, gaaw_ten dlogits)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pl = host_in(&s, logits);
  const int32_t *pt = host_raw(&s, targets);
  float *pm = host_out(&s, max), *ps = host_out(&s, sumexp), *pout = host_out(&s, target);
  float *pd = dlogits ? host_inout(&s, dlogits) : NULL;
  if (s.status == GAAW_SUCCESS)
    cross_entropy_forward_f32(host_rows(logits), host_cols(logits), pl, pt, vocab_start, dloss, pm, ps, pout, pd);
  return host_stage_end(&s);
}

gaaw_status_t host_regression_loss(gaaw_context_t ctx, gaaw_loss_t kind, float delta, gaaw_cten pred, gaaw_cten target,
                                   gaaw_cten weights, gaaw_ten loss, gaaw_ten grad)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pp = host_in(&s, pred), *pt = host_in(&s, target), *pw = weights ? host_in(&s, weights) : NULL;
  float *pl = host_out(&s, loss), *pg = host_out(&s, grad);
  if (s.status == GAAW_SUCCESS) regression_loss_f32(kind, delta, gaaw_tensor_numel(pred), pp, pt, pw, pl, pg);
  return host_stage_end(&s);
}
