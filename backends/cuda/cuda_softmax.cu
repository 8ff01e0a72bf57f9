/* Causal softmax (a warp per row), the cross-entropy pieces (a block per row) and
 * the sum of squares (chunk sums, then one block adding the chunk totals in double).
 * Every reduction has a fixed order: results are bit-identical run to run. */
#include <math.h>

#include "backends/cuda/cuda_common.cuh"

using namespace gaaw_cuda;

namespace {

/* ---------------------------------------------------------------- causal softmax */

/* x, y: (batch * T rows, T); row r is row t = r % T of its matrix and sees columns
 * 0..t. y may be x: each lane reads x[j] before it writes y[j]. */
template <typename T>
__global__ void causal_softmax_forward_kernel(int64_t rows, int64_t Tn, float scale, const T *x, T *y)
{
  int lane = threadIdx.x & 31;
  int64_t warp = global_index() >> 5, warps = global_stride() >> 5;
  for (int64_t r = warp; r < rows; r += warps) {
    int64_t t = r % Tn;
    const T *xr = x + r * Tn;
    T *yr = y + r * Tn;
    float max = -INFINITY, sum = 0.0f;
    for (int64_t j = lane; j <= t; j += 32) max = fmaxf(max, scale * to_f32(xr[j]));
    max = warp_max(max);
    for (int64_t j = lane; j <= t; j += 32) sum += expf(scale * to_f32(xr[j]) - max);
    float inv = 1.0f / warp_sum(sum);
    for (int64_t j = lane; j <= t; j += 32) yr[j] = from_f32<T>(expf(scale * to_f32(xr[j]) - max) * inv);
    for (int64_t j = t + 1 + lane; j < Tn; j += 32) yr[j] = from_f32<T>(0.0f);
  }
}

/* dx (+)= scale y (dy - sum_j dy y). Without accumulate dx may be dy: the row's dot
 * product is complete (warp_sum synchronises the warp) before any lane writes. */
template <typename T>
__global__ void causal_softmax_backward_kernel(int64_t rows, int64_t Tn, float scale, const T *y, const T *dy, T *dx,
                                               int accumulate)
{
  int lane = threadIdx.x & 31;
  int64_t warp = global_index() >> 5, warps = global_stride() >> 5;
  for (int64_t r = warp; r < rows; r += warps) {
    int64_t t = r % Tn;
    const T *yr = y + r * Tn, *dyr = dy + r * Tn;
    T *dxr = dx + r * Tn;
    float dot = 0.0f;
    for (int64_t j = lane; j <= t; j += 32) dot += to_f32(dyr[j]) * to_f32(yr[j]);
    dot = warp_sum(dot);
    for (int64_t j = lane; j <= t; j += 32) {
      float g = scale * to_f32(yr[j]) * (to_f32(dyr[j]) - dot);
      dxr[j] = from_f32<T>(accumulate ? to_f32(dxr[j]) + g : g);
    }
    if (!accumulate)
      for (int64_t j = t + 1 + lane; j < Tn; j += 32) dxr[j] = from_f32<T>(0.0f);
  }
}

/* ---------------------------------------------------------------- cross-entropy: logits (N, V) */

/* The column of row n's target inside the slice, or -1 (outside, or ignored). */
__device__ __forceinline__ int64_t target_column(const int32_t *targets, int64_t n, int64_t vocab_start, int64_t V)
{
  if (targets[n] < 0) return -1;
  int64_t col = (int64_t)targets[n] - vocab_start;
  return col >= 0 && col < V ? col : -1;
}

template <typename T> __global__ void row_max_kernel(int64_t N, int64_t V, const T *logits, float *max)
{
  __shared__ float scratch[WARPS];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T *l = logits + n * V;
    float m = -INFINITY;
    for (int64_t v = threadIdx.x; v < V; v += THREADS) m = fmaxf(m, to_f32(l[v]));
    m = block_max(m, scratch);
    if (threadIdx.x == 0) max[n] = m;
  }
}

template <typename T>
__global__ void row_sum_exp_kernel(int64_t N, int64_t V, const T *logits, const float *max, float *sumexp)
{
  __shared__ float scratch[WARPS];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T *l = logits + n * V;
    float m = max[n], s = 0.0f;
    for (int64_t v = threadIdx.x; v < V; v += THREADS) s += expf(to_f32(l[v]) - m);
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) sumexp[n] = s;
  }
}

template <typename T>
__global__ void target_logit_kernel(int64_t N, int64_t V, const T *logits, const int32_t *targets,
                                    int64_t vocab_start, float *target)
{
  for (int64_t n = global_index(); n < N; n += global_stride()) {
    int64_t col = target_column(targets, n, vocab_start, V);
    target[n] = col >= 0 ? to_f32(logits[n * V + col]) : 0.0f;
  }
}

/* dlogits[n][v] += dloss (softmax - [v is the target]); ignored rows are left alone. */
template <typename T>
__global__ void cross_entropy_backward_kernel(int64_t N, int64_t V, const T *logits, const float *max,
                                              const float *sumexp, const int32_t *targets, int64_t vocab_start,
                                              float dloss, T *dlogits)
{
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    if (targets[n] < 0) continue;
    const T *l = logits + n * V;
    T *dl = dlogits + n * V;
    float m = max[n], inv = 1.0f / sumexp[n];
    int64_t col = target_column(targets, n, vocab_start, V);
    for (int64_t v = threadIdx.x; v < V; v += THREADS) {
      float d = to_f32(dl[v]) + dloss * expf(to_f32(l[v]) - m) * inv;
      if (v == col) d -= dloss;
      dl[v] = from_f32<T>(d);
    }
  }
}

/* ---------------------------------------------------------------- sum of squares */

/* Elements per chunk: a constant, for a fixed summation order. */
constexpr int64_t SUMSQ_CHUNK = 4096;

template <typename T> __global__ void sum_squares_chunks_kernel(int64_t n, const T *x, float *partial)
{
  __shared__ float scratch[WARPS];
  int64_t chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
  for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    int64_t end = (k + 1) * SUMSQ_CHUNK < n ? (k + 1) * SUMSQ_CHUNK : n;
    float s = 0.0f;
    for (int64_t i = k * SUMSQ_CHUNK + threadIdx.x; i < end; i += THREADS) {
      float v = to_f32(x[i]);
      s += v * v;
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) partial[k] = s;
  }
}

/* One block: out[0] = the chunk totals summed in double. */
__global__ void sum_partials_kernel(int64_t chunks, const float *partial, float *out)
{
  __shared__ double scratch[WARPS];
  double s = 0.0;
  for (int64_t k = threadIdx.x; k < chunks; k += THREADS) s += partial[k];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) out[0] = (float)s;
}

} /* namespace */

/* ---------------------------------------------------------------- launchers */

extern "C" {

cudaError_t gaaw_cuda_causal_softmax_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t batch, int64_t T_,
                                             float scale, const void *x, void *y)
{
  int64_t rows = batch * T_;
  if (rows == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, causal_softmax_forward_kernel<T><<<blocks_for(rows, WARPS), THREADS, 0, s>>>(
                                      rows, T_, scale, (const T *)x, (T *)y));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_causal_softmax_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t batch, int64_t T_,
                                              float scale, const void *y, const void *dy, void *dx, int accumulate)
{
  int64_t rows = batch * T_;
  if (rows == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, causal_softmax_backward_kernel<T><<<blocks_for(rows, WARPS), THREADS, 0, s>>>(
                                      rows, T_, scale, (const T *)y, (const T *)dy, (T *)dx, accumulate));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_row_max(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, const void *logits,
                              float *max)
{
  if (N == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T,
                           row_max_kernel<T><<<blocks_for(N, 1), THREADS, 0, s>>>(N, V, (const T *)logits, max));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_row_sum_exp(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, const void *logits,
                                  const float *max, float *sumexp)
{
  if (N == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, row_sum_exp_kernel<T><<<blocks_for(N, 1), THREADS, 0, s>>>(
                                      N, V, (const T *)logits, max, sumexp));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_target_logit(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, const void *logits,
                                   const int32_t *targets, int64_t vocab_start, float *target)
{
  if (N == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, target_logit_kernel<T><<<blocks_for(N, THREADS), THREADS, 0, s>>>(
                                      N, V, (const T *)logits, targets, vocab_start, target));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_cross_entropy_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V,
                                             const void *logits, const float *max, const float *sumexp,
                                             const int32_t *targets, int64_t vocab_start, float dloss, void *dlogits)
{
  if (N == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, cross_entropy_backward_kernel<T><<<blocks_for(N, 1), THREADS, 0, s>>>(
                                      N, V, (const T *)logits, max, sumexp, targets, vocab_start, dloss, (T *)dlogits));
  return cudaGetLastError();
}

int64_t gaaw_cuda_sum_squares_partials(int64_t n)
{
  int64_t chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
  return chunks > 0 ? chunks : 1;
}

cudaError_t gaaw_cuda_sum_squares(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, const void *x, float *partial,
                                  float *out)
{
  int64_t chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
  if (chunks > 0) {
    GAAW_CUDA_DISPATCH_FLOAT(dt, T, sum_squares_chunks_kernel<T><<<blocks_for(chunks, 1), THREADS, 0, s>>>(
                                        n, (const T *)x, partial));
  }
  sum_partials_kernel<<<1, THREADS, 0, s>>>(chunks, partial, out); /* 0 for n == 0 */
  return cudaGetLastError();
}

} /* extern "C" */
