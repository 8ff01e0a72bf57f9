/* LayerNorm, RMSNorm and the bias gradient.
 *
 * Forward: one warp per row, with butterfly warp sums (mean first, then the
 * variance around it, as the host does, so there is no cancellation).
 * Backward: one block per chunk of GAAW_CUDA_CHUNK_ROWS rows. The block first sums
 * each row's two reductions (block_sum) into shared memory; then each thread walks
 * its own columns down the chunk, adding dx and summing the dw, db terms in
 * registers, and writes the chunk's partial sums once, so no two threads write one
 * value and no partial is read back. A second pass adds the chunks in order into
 * dw, db.
 * No atomics: the results are bit-identical run to run. */
#include "backends/cuda/cuda_common.cuh"

using namespace gaaw_cuda;

namespace {

/* ---------------------------------------------------------------- forward: a warp per row */

/* x, y: (N, C)   w, b: (C)   mean, rstd: (N); b == nullptr for RMSNorm (then mean unused). */
template <typename T, bool RMS>
__global__ void norm_forward_kernel(int64_t N, int64_t C, const T *x, const T *w, const T *b, float eps, T *y,
                                    float *mean, float *rstd)
{
  int lane = threadIdx.x & 31;
  int64_t warp = global_index() >> 5, warps = global_stride() >> 5;
  for (int64_t row = warp; row < N; row += warps) {
    const T *xr = x + row * C;
    T *yr = y + row * C;
    float m = 0.0f;
    if (!RMS) {
      float s = 0.0f;
      for (int64_t c = lane; c < C; c += 32) s += to_f32(xr[c]);
      m = warp_sum(s) / (float)C;
    }
    float ss = 0.0f;
    for (int64_t c = lane; c < C; c += 32) {
      float d = to_f32(xr[c]) - m;
      ss += d * d;
    }
    float rs = 1.0f / sqrtf(warp_sum(ss) / (float)C + eps);
    for (int64_t c = lane; c < C; c += 32) {
      float v = (to_f32(xr[c]) - m) * rs * to_f32(w[c]);
      yr[c] = from_f32<T>(RMS ? v : v + to_f32(b[c]));
    }
    if (lane == 0) {
      if (!RMS) mean[row] = m;
      rstd[row] = rs;
    }
  }
}

/* ---------------------------------------------------------------- backward: a block per chunk of rows */

/* The rows of chunk k: [begin, end). */
__device__ __forceinline__ void chunk_rows(int64_t k, int64_t N, int64_t *begin, int64_t *end)
{
  *begin = k * GAAW_CUDA_CHUNK_ROWS;
  *end = *begin + GAAW_CUDA_CHUNK_ROWS < N ? *begin + GAAW_CUDA_CHUNK_ROWS : N;
}

/* dx += (dy w - mean(dy w) - xhat mean(dy w xhat)) rstd;
 * pdw[k] = sum over chunk k of dy xhat, pdb[k] = sum of dy.   pdw, pdb: (chunks, C)
 * First the row reductions of the chunk's rows (block sums, kept in shared
 * memory), then each thread walks its own columns down the chunk, adding dx and
 * keeping its dw, db sums in registers: each partial is written once. */
template <typename T>
__global__ void layernorm_backward_kernel(int64_t N, int64_t C, const T *dy, const T *x, const T *w,
                                          const float *mean, const float *rstd, T *dx, float *pdw, float *pdb)
{
  __shared__ float scratch[WARPS];
  __shared__ float row_dmean[GAAW_CUDA_CHUNK_ROWS], row_dproj[GAAW_CUDA_CHUNK_ROWS];
  int64_t chunks = row_chunks(N);
  for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    int64_t begin, end;
    chunk_rows(k, N, &begin, &end);
    for (int64_t n = begin; n < end; n++) {
      const T *xr = x + n * C, *dyr = dy + n * C;
      float m = mean[n], rs = rstd[n], dmean = 0.0f, dproj = 0.0f;
      for (int64_t c = threadIdx.x; c < C; c += THREADS) {
        float dn = to_f32(dyr[c]) * to_f32(w[c]);
        dmean += dn;
        dproj += dn * (to_f32(xr[c]) - m) * rs;
      }
      dmean = block_sum(dmean, scratch);
      dproj = block_sum(dproj, scratch);
      if (threadIdx.x == 0) {
        row_dmean[n - begin] = dmean / (float)C;
        row_dproj[n - begin] = dproj / (float)C;
      }
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < C; c += THREADS) {
      float wc = to_f32(w[c]), sdw = 0.0f, sdb = 0.0f;
      for (int64_t n = begin; n < end; n++) {
        float d = to_f32(dy[n * C + c]), xhat = (to_f32(x[n * C + c]) - mean[n]) * rstd[n];
        add_to(dx, n * C + c, (d * wc - row_dmean[n - begin] - xhat * row_dproj[n - begin]) * rstd[n]);
        sdw += d * xhat;
        sdb += d;
      }
      pdw[k * C + c] = sdw;
      pdb[k * C + c] = sdb;
    }
    __syncthreads(); /* the row sums of this chunk are read before the next chunk's */
  }
}

/* dx += rstd (dy w - x rstd^2 mean(dy w x));  pdw[k] = sum over chunk k of dy x rstd,
 * in the same two phases. */
template <typename T>
__global__ void rmsnorm_backward_kernel(int64_t N, int64_t C, const T *dy, const T *x, const T *w, const float *rstd,
                                        T *dx, float *pdw)
{
  __shared__ float scratch[WARPS];
  __shared__ float row_coef[GAAW_CUDA_CHUNK_ROWS];
  int64_t chunks = row_chunks(N);
  for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    int64_t begin, end;
    chunk_rows(k, N, &begin, &end);
    for (int64_t n = begin; n < end; n++) {
      const T *xr = x + n * C, *dyr = dy + n * C;
      float rs = rstd[n], dot = 0.0f;
      for (int64_t c = threadIdx.x; c < C; c += THREADS) dot += to_f32(dyr[c]) * to_f32(w[c]) * to_f32(xr[c]);
      dot = block_sum(dot, scratch);
      if (threadIdx.x == 0) row_coef[n - begin] = rs * rs * dot / (float)C;
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < C; c += THREADS) {
      float wc = to_f32(w[c]), sdw = 0.0f;
      for (int64_t n = begin; n < end; n++) {
        float d = to_f32(dy[n * C + c]), xv = to_f32(x[n * C + c]), rs = rstd[n];
        add_to(dx, n * C + c, rs * (d * wc - xv * row_coef[n - begin]));
        sdw += d * xv * rs;
      }
      pdw[k * C + c] = sdw;
    }
    __syncthreads();
  }
}

/* pdb[k] = sum over chunk k of dy. */
template <typename T> __global__ void bias_backward_kernel(int64_t N, int64_t C, const T *dy, float *pdb)
{
  int64_t chunks = row_chunks(N);
  for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    int64_t begin, end;
    chunk_rows(k, N, &begin, &end);
    for (int64_t c = threadIdx.x; c < C; c += THREADS) {
      float s = 0.0f;
      for (int64_t n = begin; n < end; n++) s += to_f32(dy[n * C + c]);
      pdb[k * C + c] = s;
    }
  }
}

/* out[c] += sum over chunks, in order, of partial[k][c]. */
template <typename T> __global__ void sum_chunks_kernel(int64_t chunks, int64_t C, const float *partial, T *out)
{
  for (int64_t c = global_index(); c < C; c += global_stride()) {
    float s = 0.0f;
    for (int64_t k = 0; k < chunks; k++) s += partial[k * C + c];
    add_to(out, c, s);
  }
}

unsigned row_blocks_for_warps(int64_t N)
{
  return blocks_for(N, WARPS);
}

unsigned chunk_blocks(int64_t N)
{
  return blocks_for(row_chunks(N), 1);
}

} /* namespace */

/* ---------------------------------------------------------------- launchers */

extern "C" {

cudaError_t gaaw_cuda_layernorm_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *x,
                                        const void *w, const void *b, float eps, void *y, float *mean, float *rstd)
{
  if (N == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, norm_forward_kernel<T, false><<<row_blocks_for_warps(N), THREADS, 0, s>>>(
                                      N, C, (const T *)x, (const T *)w, (const T *)b, eps, (T *)y, mean, rstd));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_rmsnorm_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *x,
                                      const void *w, float eps, void *y, float *rstd)
{
  if (N == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, norm_forward_kernel<T, true><<<row_blocks_for_warps(N), THREADS, 0, s>>>(
                                      N, C, (const T *)x, (const T *)w, nullptr, eps, (T *)y, nullptr, rstd));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_layernorm_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *dy,
                                         const void *x, const void *w, const float *mean, const float *rstd, void *dx,
                                         void *dw, void *db, float *partial)
{
  if (N == 0 || C == 0) return cudaSuccess;
  int64_t chunks = row_chunks(N);
  float *pdw = partial, *pdb = partial + chunks * C;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T,
    layernorm_backward_kernel<T><<<chunk_blocks(N), THREADS, 0, s>>>(N, C, (const T *)dy, (const T *)x,
                                                                      (const T *)w, mean, rstd, (T *)dx, pdw, pdb);
    sum_chunks_kernel<T><<<blocks_for(C, THREADS), THREADS, 0, s>>>(chunks, C, pdw, (T *)dw);
    sum_chunks_kernel<T><<<blocks_for(C, THREADS), THREADS, 0, s>>>(chunks, C, pdb, (T *)db));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_rmsnorm_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *dy,
                                       const void *x, const void *w, const float *rstd, void *dx, void *dw,
                                       float *partial)
{
  if (N == 0 || C == 0) return cudaSuccess;
  int64_t chunks = row_chunks(N);
  GAAW_CUDA_DISPATCH_FLOAT(dt, T,
    rmsnorm_backward_kernel<T><<<chunk_blocks(N), THREADS, 0, s>>>(N, C, (const T *)dy, (const T *)x, (const T *)w,
                                                                    rstd, (T *)dx, partial);
    sum_chunks_kernel<T><<<blocks_for(C, THREADS), THREADS, 0, s>>>(chunks, C, partial, (T *)dw));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_bias_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, const void *dy,
                                    void *db, float *partial)
{
  if (N == 0 || C == 0) return cudaSuccess;
  int64_t chunks = row_chunks(N);
  GAAW_CUDA_DISPATCH_FLOAT(dt, T,
    bias_backward_kernel<T><<<chunk_blocks(N), THREADS, 0, s>>>(N, C, (const T *)dy, partial);
    sum_chunks_kernel<T><<<blocks_for(C, THREADS), THREADS, 0, s>>>(chunks, C, partial, (T *)db));
  return cudaGetLastError();
}

} /* extern "C" */
