/* The blocked attention of a block of queries against a block of keys (ring
 * attention's kernels, gaaw_attention_block_* and gaaw_attention_merge), as the
 * OpenCL ones (kernels/attention.cl): a block of THREADS threads per row, keys (or
 * queries) taken THREADS at a time, one per thread, with the online softmax; no
 * (Tq, Tk) matrix. Thread l owns the output columns d = l, l + THREADS, ... of its
 * row (at most COLS of them: D <= COLS x THREADS), accumulated in f32 registers and
 * summed over the blocks in order, so results are bit-identical run to run. Query
 * row t is at position q_start + t, key row j at k_start + j; causal: a row sees the
 * keys at its position and before. q, out, dout, dq: (BH, Tq, D); k, v, dk, dv:
 * (BH, Tk, D); lse, delta: (BH, Tq) f32. */
#include <math.h>

#include "backends/cuda/cuda_common.cuh"

using namespace gaaw_cuda;

namespace {

constexpr int COLS = GAAW_CUDA_ATTENTION_MAX_D / THREADS;

__device__ __forceinline__ int64_t keys_seen(int64_t t, int64_t Tk, int64_t q_start, int64_t k_start, int causal)
{
  if (!causal) return Tk;
  int64_t n = q_start + t - k_start + 1;
  return n < 0 ? 0 : n < Tk ? n : Tk;
}

template <typename T> __device__ __forceinline__ float dot_rows(const T *a, const T *b, int64_t D)
{
  float acc = 0.0f;
  for (int64_t d = 0; d < D; d++) acc += to_f32(a[d]) * to_f32(b[d]);
  return acc;
}

/* Row r = (h, t) per block: out = softmax v over the keys it sees, lse; a row that
 * sees none gets out 0 and lse -inf. */
template <typename T>
__global__ void block_forward_kernel(int64_t rows, int64_t Tq, int64_t Tk, int64_t D, float scale, int64_t q_start,
                                     int64_t k_start, int causal, const T *q, const T *k, const T *v, T *out,
                                     float *lse)
{
  __shared__ float scratch[WARPS], p[THREADS];
  int l = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t t = r % Tq, head = r / Tq * Tk * D, seen = keys_seen(t, Tk, q_start, k_start, causal);
    const T *qr = q + r * D, *kh = k + head, *vh = v + head;
    float acc[COLS], m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < COLS; c++) acc[c] = 0.0f;
    for (int64_t j0 = 0; j0 < seen; j0 += THREADS) {
      int64_t j = j0 + l, n = seen - j0 < THREADS ? seen - j0 : THREADS;
      float s = j < seen ? scale * dot_rows(qr, kh + j * D, D) : -INFINITY;
      float mnew = fmaxf(m, block_max(s, scratch)), alpha = m == -INFINITY ? 0.0f : expf(m - mnew);
      float pj = j < seen ? expf(s - mnew) : 0.0f;
      p[l] = pj;
      sum = sum * alpha + block_sum(pj, scratch); /* its barriers make p visible */
      m = mnew;
      for (int c = 0; c < COLS; c++) {
        int64_t d = l + (int64_t)c * THREADS;
        if (d >= D) break;
        float a = acc[c] * alpha;
        for (int64_t x = 0; x < n; x++) a += p[x] * to_f32(vh[(j0 + x) * D + d]);
        acc[c] = a;
      }
      __syncthreads(); /* every thread has read p before the next block writes it */
    }
    float inv = seen ? 1.0f / sum : 0.0f;
    for (int c = 0; c < COLS; c++) {
      int64_t d = l + (int64_t)c * THREADS;
      if (d < D) out[r * D + d] = from_f32<T>(acc[c] * inv);
    }
    if (l == 0) lse[r] = seen ? m + logf(sum) : -INFINITY;
  }
}

/* out, lse <- the merge of (out, lse) and (part_out, part_lse), a thread per row. */
template <typename T>
__global__ void merge_kernel(int64_t rows, int64_t D, T *out, float *lse, const T *part_out, const float *part_lse)
{
  for (int64_t r = global_index(); r < rows; r += global_stride()) {
    float a = lse[r], b = part_lse[r], m = fmaxf(a, b);
    if (m == -INFINITY) continue; /* neither side has seen a key */
    float wa = expf(a - m), wb = expf(b - m), inv = 1.0f / (wa + wb);
    for (int64_t d = 0; d < D; d++)
      out[r * D + d] = from_f32<T>((wa * to_f32(out[r * D + d]) + wb * to_f32(part_out[r * D + d])) * inv);
    lse[r] = m + logf(wa + wb);
  }
}

/* Query row r = (h, t) per block: delta = rowsum(dout * out), then dq += ds k over
 * the keys it sees (out and lse: the row's over every block, after the last merge). */
template <typename T>
__global__ void block_backward_dq_kernel(int64_t rows, int64_t Tq, int64_t Tk, int64_t D, float scale,
                                         int64_t q_start, int64_t k_start, int causal, const T *dout, const T *q,
                                         const T *k, const T *v, const T *out, const float *lse, float *delta, T *dq)
{
  __shared__ float scratch[WARPS], ds[THREADS];
  int l = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t t = r % Tq, head = r / Tq * Tk * D, seen = keys_seen(t, Tk, q_start, k_start, causal);
    const T *qr = q + r * D, *dor = dout + r * D, *orow = out + r * D, *kh = k + head, *vh = v + head;
    float part = 0.0f, acc[COLS];
    for (int64_t d = l; d < D; d += THREADS) part += to_f32(dor[d]) * to_f32(orow[d]);
    float dlt = block_sum(part, scratch), lr = lse[r];
    if (l == 0) delta[r] = dlt;
    for (int c = 0; c < COLS; c++) acc[c] = 0.0f;
    for (int64_t j0 = 0; j0 < seen; j0 += THREADS) {
      int64_t j = j0 + l, n = seen - j0 < THREADS ? seen - j0 : THREADS;
      float g = 0.0f;
      if (j < seen) {
        float pj = expf(scale * dot_rows(qr, kh + j * D, D) - lr);
        g = pj * (dot_rows(dor, vh + j * D, D) - dlt) * scale;
      }
      ds[l] = g;
      __syncthreads();
      for (int c = 0; c < COLS; c++) {
        int64_t d = l + (int64_t)c * THREADS;
        if (d >= D) break;
        float a = acc[c];
        for (int64_t x = 0; x < n; x++) a += ds[x] * to_f32(kh[(j0 + x) * D + d]);
        acc[c] = a;
      }
      __syncthreads();
    }
    for (int c = 0; c < COLS; c++) {
      int64_t d = l + (int64_t)c * THREADS;
      if (d < D) add_to(dq, r * D + d, acc[c]);
    }
  }
}

/* Key row r = (h, j) per block: dv += p^T dout and dk += ds^T q over the query rows
 * that see it (delta from block_backward_dq_kernel, run first). */
template <typename T>
__global__ void block_backward_dkv_kernel(int64_t krows, int64_t Tq, int64_t Tk, int64_t D, float scale,
                                          int64_t q_start, int64_t k_start, int causal, const T *dout, const T *q,
                                          const T *k, const T *v, const float *lse, const float *delta, T *dk, T *dv)
{
  __shared__ float p[THREADS], ds[THREADS];
  int l = threadIdx.x;
  for (int64_t r = blockIdx.x; r < krows; r += gridDim.x) {
    int64_t j = r % Tk, h = r / Tk, qhead = h * Tq * D;
    int64_t first = causal ? k_start + j - q_start : 0; /* the first query row that sees key j */
    if (first < 0) first = 0;
    const T *kr = k + r * D, *vr = v + r * D, *qh = q + qhead, *doh = dout + qhead;
    const float *lh = lse + h * Tq, *dh = delta + h * Tq;
    float ak[COLS], av[COLS];
    for (int c = 0; c < COLS; c++) ak[c] = av[c] = 0.0f;
    for (int64_t i0 = first; i0 < Tq; i0 += THREADS) {
      int64_t i = i0 + l, n = Tq - i0 < THREADS ? Tq - i0 : THREADS;
      float pi = 0.0f, g = 0.0f;
      if (i < Tq) {
        pi = expf(scale * dot_rows(qh + i * D, kr, D) - lh[i]);
        g = pi * (dot_rows(doh + i * D, vr, D) - dh[i]) * scale;
      }
      p[l] = pi;
      ds[l] = g;
      __syncthreads();
      for (int c = 0; c < COLS; c++) {
        int64_t d = l + (int64_t)c * THREADS;
        if (d >= D) break;
        float a = av[c], b = ak[c];
        for (int64_t x = 0; x < n; x++) {
          a += p[x] * to_f32(doh[(i0 + x) * D + d]);
          b += ds[x] * to_f32(qh[(i0 + x) * D + d]);
        }
        av[c] = a, ak[c] = b;
      }
      __syncthreads();
    }
    for (int c = 0; c < COLS; c++) {
      int64_t d = l + (int64_t)c * THREADS;
      if (d < D) add_to(dv, r * D + d, av[c]), add_to(dk, r * D + d, ak[c]);
    }
  }
}

} /* namespace */

cudaError_t gaaw_cuda_attention_block_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t BH, int64_t Tq, int64_t Tk,
                                              int64_t D, int64_t q_start, int64_t k_start, int causal, const void *q,
                                              const void *k, const void *v, void *out, float *lse)
{
  int64_t rows = BH * Tq;
  if (rows == 0) return cudaSuccess;
  if (D > GAAW_CUDA_ATTENTION_MAX_D) return cudaErrorInvalidValue;
  float scale = 1.0f / sqrtf((float)D);
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, block_forward_kernel<T><<<blocks_for(rows, 1), THREADS, 0, s>>>(
                                      rows, Tq, Tk, D, scale, q_start, k_start, causal, (const T *)q, (const T *)k,
                                      (const T *)v, (T *)out, lse));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_attention_merge(cudaStream_t s, gaaw_cuda_dtype dt, int64_t rows, int64_t D, void *out,
                                      float *lse, const void *part_out, const float *part_lse)
{
  if (rows == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, merge_kernel<T><<<blocks_for(rows, THREADS), THREADS, 0, s>>>(
                                      rows, D, (T *)out, lse, (const T *)part_out, part_lse));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_attention_block_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t BH, int64_t Tq,
                                               int64_t Tk, int64_t D, int64_t q_start, int64_t k_start, int causal,
                                               const void *dout, const void *q, const void *k, const void *v,
                                               const void *out, const float *lse, float *delta, void *dq, void *dk,
                                               void *dv)
{
  int64_t rows = BH * Tq, krows = BH * Tk;
  if (rows == 0 || krows == 0) return cudaSuccess;
  if (D > GAAW_CUDA_ATTENTION_MAX_D) return cudaErrorInvalidValue;
  float scale = 1.0f / sqrtf((float)D);
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, block_backward_dq_kernel<T><<<blocks_for(rows, 1), THREADS, 0, s>>>(
                                      rows, Tq, Tk, D, scale, q_start, k_start, causal, (const T *)dout,
                                      (const T *)q, (const T *)k, (const T *)v, (const T *)out, lse, delta, (T *)dq));
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, block_backward_dkv_kernel<T><<<blocks_for(krows, 1), THREADS, 0, s>>>(
                                      krows, Tq, Tk, D, scale, q_start, k_start, causal, (const T *)dout,
                                      (const T *)q, (const T *)k, (const T *)v, lse, delta, (T *)dk, (T *)dv));
  return cudaGetLastError();
}
