/* Mixture of experts (include/gaaw/kernels.h's MoE section), the host's loops
 * (backends/host/host_moe.c) thread by thread: a thread per row of the router and
 * top-k, per element of the permutations, per (token, choice) of the combine's
 * backward. Sums in the host's order in f32, each output written once: no atomics. */
#include "backends/cuda/cuda_common.cuh"

using namespace gaaw_cuda;

namespace {

__global__ void router_kernel(int64_t T, int64_t E, const float *logits, int sigmoid, float *scores, float *lse)
{
  for (int64_t t = global_index(); t < T; t += global_stride()) {
    const float *l = logits + t * E;
    float *s = scores + t * E;
    float m = -INFINITY, sum = 0.0f;
    for (int64_t e = 0; e < E; e++) m = fmaxf(m, l[e]);
    for (int64_t e = 0; e < E; e++) sum += expf(l[e] - m);
    lse[t] = m + logf(sum);
    for (int64_t e = 0; e < E; e++) s[e] = sigmoid ? 1.0f / (1.0f + expf(-l[e])) : expf(l[e] - m) / sum;
  }
}

__global__ void router_backward_kernel(int64_t T, int64_t E, const float *logits, const float *scores,
                                       const float *lse, const float *dscores, int sigmoid, float zscale,
                                       float *dlogits)
{
  for (int64_t t = global_index(); t < T; t += global_stride()) {
    const float *l = logits + t * E, *s = scores + t * E, *ds = dscores + t * E;
    float *dl = dlogits + t * E, z = lse[t], dot = 0.0f;
    if (!sigmoid)
      for (int64_t e = 0; e < E; e++) dot += s[e] * ds[e];
    for (int64_t e = 0; e < E; e++) {
      float g = sigmoid ? ds[e] * s[e] * (1.0f - s[e]) : s[e] * (ds[e] - dot);
      dl[e] = g + zscale * z * expf(l[e] - z);
    }
  }
}

/* The k largest of scores + bias (nan as -inf), ties to the lower index: each pick
 * the largest (value, -index) below the one before. */
__global__ void topk_kernel(int64_t T, int64_t E, int64_t k, const float *scores, const float *bias, int renormalize,
                            int32_t *idx, float *weights)
{
  for (int64_t t = global_index(); t < T; t += global_stride()) {
    const float *v = scores + t * E;
    int32_t *ix = idx + t * k;
    float *w = weights + t * k, prev_v = INFINITY, sum = 0.0f;
    int64_t prev_e = -1;
    for (int64_t j = 0; j < k; j++) {
      float best_v = -INFINITY;
      int64_t best_e = -1;
      for (int64_t e = 0; e < E; e++) {
        float x = v[e] + (bias ? bias[e] : 0.0f);
        if (x != x) x = -INFINITY;
        bool below = x < prev_v || (x == prev_v && e > prev_e);
        if (below && (best_e < 0 || x > best_v)) best_v = x, best_e = e;
      }
      ix[j] = (int32_t)best_e;
      prev_v = best_v, prev_e = best_e;
      w[j] = v[best_e];
      sum += w[j];
    }
    if (renormalize)
      for (int64_t j = 0; j < k; j++) w[j] = sum > 0.0f ? w[j] / sum : 0.0f;
  }
}

__global__ void topk_backward_kernel(int64_t T, int64_t E, int64_t k, const float *scores, const int32_t *idx,
                                     const float *weights, const float *dweights, int renormalize, float *dscores)
{
  for (int64_t t = global_index(); t < T; t += global_stride()) {
    const int32_t *ix = idx + t * k;
    const float *w = weights + t * k, *dw = dweights + t * k;
    float *ds = dscores + t * E, sum = 0.0f, dot = 0.0f;
    for (int64_t j = 0; j < k; j++) {
      int64_t e = ix[j];
      sum += e >= 0 && e < E ? scores[t * E + e] : 0.0f;
      dot += dw[j] * w[j];
    }
    for (int64_t e = 0; e < E; e++) ds[e] = 0.0f;
    for (int64_t j = 0; j < k; j++) {
      int64_t e = ix[j];
      if (e < 0 || e >= E) continue;
      ds[e] = renormalize ? (sum > 0.0f ? (dw[j] - dot) / sum : 0.0f) : dw[j];
    }
  }
}

template <typename T>
__global__ void permute_kernel(int64_t Tn, int64_t P, int64_t C, const T *x, const int32_t *src, T *out)
{
  for (grid_2d g(C); g.row < P; g.next()) {
    int64_t t = src[g.row];
    out[g.row * C + g.col] = t >= 0 && t < Tn ? x[t * C + g.col] : from_f32<T>(0.0f);
  }
}

/* out[t] = sum_j weights[t][j] (NULL: 1) y[pos[t][j]]: the weighted combine, and
 * with weights 1 the permutation's backward */
template <typename T>
__global__ void combine_kernel(int64_t Tn, int64_t P, int64_t C, int64_t k, const T *y, const int32_t *pos,
                               const float *weights, T *out)
{
  for (grid_2d g(C); g.row < Tn; g.next()) {
    float acc = 0.0f;
    for (int64_t j = 0; j < k; j++) {
      int64_t p = pos[g.row * k + j];
      if (p >= 0 && p < P) acc += (weights ? weights[g.row * k + j] : 1.0f) * to_f32(y[p * C + g.col]);
    }
    out[g.row * C + g.col] = from_f32<T>(acc);
  }
}

template <typename T>
__global__ void unpermute_backward_kernel(int64_t Tn, int64_t P, int64_t C, int64_t k, const T *dout, const T *y,
                                          const int32_t *pos, const float *weights, T *dy, float *dweights)
{
  for (int64_t i = global_index(); i < Tn * k; i += global_stride()) {
    int64_t t = i / k, p = pos[i];
    float w = weights[i], dot = 0.0f;
    if (p >= 0 && p < P)
      for (int64_t c = 0; c < C; c++) {
        float d = to_f32(dout[t * C + c]);
        dot += d * to_f32(y[p * C + c]);
        dy[p * C + c] = from_f32<T>(w * d);
      }
    dweights[i] = dot;
  }
}

} // namespace

cudaError_t gaaw_cuda_moe_router(cudaStream_t s, int64_t T, int64_t E, const float *logits, int sigmoid,
                                 float *scores, float *lse)
{
  if (T == 0) return cudaSuccess;
  router_kernel<<<blocks_for(T, THREADS), THREADS, 0, s>>>(T, E, logits, sigmoid, scores, lse);
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_moe_router_backward(cudaStream_t s, int64_t T, int64_t E, const float *logits,
                                          const float *scores, const float *lse, const float *dscores, int sigmoid,
                                          float zscale, float *dlogits)
{
  if (T == 0) return cudaSuccess;
  router_backward_kernel<<<blocks_for(T, THREADS), THREADS, 0, s>>>(T, E, logits, scores, lse, dscores, sigmoid,
                                                                     zscale, dlogits);
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_moe_topk(cudaStream_t s, int64_t T, int64_t E, int64_t k, const float *scores,
                               const float *bias, int renormalize, int32_t *idx, float *weights)
{
  if (T == 0) return cudaSuccess;
  topk_kernel<<<blocks_for(T, THREADS), THREADS, 0, s>>>(T, E, k, scores, bias, renormalize, idx, weights);
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_moe_topk_backward(cudaStream_t s, int64_t T, int64_t E, int64_t k, const float *scores,
                                        const int32_t *idx, const float *weights, const float *dweights,
                                        int renormalize, float *dscores)
{
  if (T == 0) return cudaSuccess;
  topk_backward_kernel<<<blocks_for(T, THREADS), THREADS, 0, s>>>(T, E, k, scores, idx, weights, dweights,
                                                                   renormalize, dscores);
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_moe_permute(cudaStream_t s, gaaw_cuda_dtype dt, int64_t Tn, int64_t P, int64_t C, const void *x,
                                  const int32_t *src, void *out)
{
  if (P * C == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, permute_kernel<T><<<blocks_for(P * C, THREADS), THREADS, 0, s>>>(
                                      Tn, P, C, (const T *)x, src, (T *)out));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_moe_combine(cudaStream_t s, gaaw_cuda_dtype dt, int64_t Tn, int64_t P, int64_t C, int64_t k,
                                  const void *y, const int32_t *pos, const float *weights, void *out)
{
  if (Tn * C == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, combine_kernel<T><<<blocks_for(Tn * C, THREADS), THREADS, 0, s>>>(
                                      Tn, P, C, k, (const T *)y, pos, weights, (T *)out));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_moe_unpermute_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t Tn, int64_t P, int64_t C,
                                             int64_t k, const void *dout, const void *y, const int32_t *pos,
                                             const float *weights, void *dy, float *dweights)
{
  if (Tn * k == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, unpermute_backward_kernel<T><<<blocks_for(Tn * k, THREADS), THREADS, 0, s>>>(
                                      Tn, P, C, k, (const T *)dout, (const T *)y, pos, weights, (T *)dy, dweights));
  return cudaGetLastError();
}
