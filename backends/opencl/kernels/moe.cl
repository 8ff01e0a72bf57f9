/* Mixture of experts (include/gaaw/kernels.h's MoE section), the host's loops item
 * by item (backends/host/host_moe.c): one item per row of the router and top-k, per
 * element of the permutations, per (token, choice) of the combine's backward. Every
 * sum runs in the host's order in f32; each output element is written once. */

__kernel void moe_router(TEN(logits), int sigmoid, TEN(scores), TEN(lse), long T, long E)
{
  long t = get_global_id(0);
  if (t >= T) return;
  __global const float *l = F32(logits) + t * E;
  __global float *s = F32(scores) + t * E;
  float m = -INFINITY, sum = 0.0f;
  for (long e = 0; e < E; e++) m = fmax(m, l[e]);
  for (long e = 0; e < E; e++) sum += exp(l[e] - m);
  F32(lse)[t] = m + log(sum);
  for (long e = 0; e < E; e++) s[e] = sigmoid ? 1.0f / (1.0f + exp(-l[e])) : exp(l[e] - m) / sum;
}

__kernel void moe_router_backward(TEN(logits), TEN(scores), TEN(lse), TEN(dscores), int sigmoid, float zscale,
                                  TEN(dlogits), long T, long E)
{
  long t = get_global_id(0);
  if (t >= T) return;
  __global const float *l = F32(logits) + t * E, *s = F32(scores) + t * E, *ds = F32(dscores) + t * E;
  __global float *dl = F32(dlogits) + t * E;
  float z = F32(lse)[t], dot = 0.0f;
  if (!sigmoid)
    for (long e = 0; e < E; e++) dot += s[e] * ds[e];
  for (long e = 0; e < E; e++) {
    float g = sigmoid ? ds[e] * s[e] * (1.0f - s[e]) : s[e] * (ds[e] - dot);
    dl[e] = g + zscale * z * exp(l[e] - z);
  }
}

/* The k largest of scores + bias (nan as -inf), ties to the lower index: each pick
 * the largest (value, -index) below the one before. */
__kernel void moe_topk(TEN(scores), TEN(bias), int has_bias, int renormalize, TEN(idx), TEN(weights), long T, long E,
                       long k)
{
  long t = get_global_id(0);
  if (t >= T) return;
  __global const float *v = F32(scores) + t * E;
  __global int *ix = I32(idx) + t * k;
  __global float *w = F32(weights) + t * k;
  float prev_v = INFINITY, sum = 0.0f;
  long prev_e = -1;
  for (long j = 0; j < k; j++) {
    float best_v = -INFINITY;
    long best_e = -1;
    for (long e = 0; e < E; e++) {
      float x = v[e] + (has_bias ? F32(bias)[e] : 0.0f);
      if (isnan(x)) x = -INFINITY;
      int below = x < prev_v || (x == prev_v && e > prev_e);
      if (below && (best_e < 0 || x > best_v)) {
        best_v = x;
        best_e = e;
      }
    }
    ix[j] = (int)best_e;
    prev_v = best_v;
    prev_e = best_e;
    w[j] = v[best_e];
    sum += w[j];
  }
  if (renormalize)
    for (long j = 0; j < k; j++) w[j] = sum > 0.0f ? w[j] / sum : 0.0f;
}

__kernel void moe_topk_backward(TEN(scores), TEN(idx), TEN(weights), TEN(dweights), int renormalize, TEN(dscores),
                                long T, long E, long k)
{
  long t = get_global_id(0);
  if (t >= T) return;
  __global const int *ix = I32(idx) + t * k;
  __global const float *w = F32(weights) + t * k, *dw = F32(dweights) + t * k;
  __global float *ds = F32(dscores) + t * E;
  float sum = 0.0f, dot = 0.0f;
  for (long j = 0; j < k; j++) {
    long e = ix[j];
    sum += e >= 0 && e < E ? F32(scores)[t * E + e] : 0.0f;
    dot += dw[j] * w[j];
  }
  for (long e = 0; e < E; e++) ds[e] = 0.0f;
  for (long j = 0; j < k; j++) {
    long e = ix[j];
    if (e < 0 || e >= E) continue;
    ds[e] = renormalize ? (sum > 0.0f ? (dw[j] - dot) / sum : 0.0f) : dw[j];
  }
}

/* out[p] = x[src[p]]: one item per element of out */
__kernel void moe_permute(TEN(x), TEN(src), TEN(out), long T, long C, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  long p = i / C, c = i % C, t = I32(src)[p];
  ST(out, i, t >= 0 && t < T ? LD(x, t * C + c) : 0.0f);
}

/* out[t] = sum_j weights[t][j] (has_weights 0: 1) y[pos[t][j]]: the weighted
 * combine, and with weights 1 the permutation's backward; one item per element */
__kernel void moe_combine(TEN(y), TEN(pos), TEN(weights), int has_weights, TEN(out), long P, long C, long k, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  long t = i / C, c = i % C;
  float acc = 0.0f;
  for (long j = 0; j < k; j++) {
    long p = I32(pos)[t * k + j];
    if (p >= 0 && p < P) acc += (has_weights ? F32(weights)[t * k + j] : 1.0f) * LD(y, p * C + c);
  }
  ST(out, i, acc);
}

/* dy[pos[t][j]] = weights[t][j] dout[t], dweights[t][j] = dout[t] . y[pos[t][j]]:
 * one item per (t, j) */
__kernel void moe_unpermute_backward(TEN(dout), TEN(y), TEN(pos), TEN(weights), TEN(dy), TEN(dweights), long P,
                                     long C, long k, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  long t = i / k, p = I32(pos)[i];
  float w = F32(weights)[i], dot = 0.0f;
  if (p >= 0 && p < P)
    for (long c = 0; c < C; c++) {
      float d = LD(dout, t * C + c);
      dot += d * LD(y, p * C + c);
      ST(dy, p * C + c, w * d);
    }
  F32(dweights)[i] = dot;
}
