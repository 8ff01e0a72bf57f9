/* Device helpers shared by the CUDA kernels: f32 loads and stores of every storage
 * type, dtype dispatch, launch sizes, and deterministic warp and block reductions. */
#ifndef GAAW_CUDA_COMMON_CUH
#define GAAW_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "backends/cuda/cuda_kernels.h"

namespace gaaw_cuda {

/* Threads per block of every kernel; block reductions assume it. */
constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;

/* ---------------------------------------------------------------- conversions */

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(int32_t v) { return (float)v; }

/* Round to nearest even, as the host backend does; i32 rounds toward zero. */
template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ int32_t from_f32<int32_t>(float v) { return (int32_t)v; }

/* p[i] += v, computed in f32 and rounded once. */
template <typename T> __device__ __forceinline__ void add_to(T *p, int64_t i, float v)
{
  p[i] = from_f32<T>(to_f32(p[i]) + v);
}

/* ---------------------------------------------------------------- dispatch */

/* Runs the statements with T bound to the storage type of dtype (float types). */
#define GAAW_CUDA_DISPATCH_FLOAT(dtype, T, ...)                                                   \
  switch (dtype) {                                                                                \
  case GAAW_CUDA_F32: { typedef float T; __VA_ARGS__; } break;                                    \
  case GAAW_CUDA_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;                           \
  case GAAW_CUDA_F16: { typedef __half T; __VA_ARGS__; } break;                                   \
  default: return cudaErrorInvalidValue;                                                          \
  }
/* The same with i32 too. */
#define GAAW_CUDA_DISPATCH_ANY(dtype, T, ...)                                                     \
  switch (dtype) {                                                                                \
  case GAAW_CUDA_F32: { typedef float T; __VA_ARGS__; } break;                                    \
  case GAAW_CUDA_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;                           \
  case GAAW_CUDA_F16: { typedef __half T; __VA_ARGS__; } break;                                   \
  case GAAW_CUDA_I32: { typedef int32_t T; __VA_ARGS__; } break;                                  \
  default: return cudaErrorInvalidValue;                                                          \
  }

/* ---------------------------------------------------------------- launch sizes */

/* Blocks for `items` work items of `per_block` each, capped: kernels loop with a
 * grid stride, so a cap only means more iterations per block. */
static inline unsigned blocks_for(int64_t items, int64_t per_block)
{
  int64_t b = (items + per_block - 1) / per_block;
  const int64_t cap = 1 << 20;
  return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

/* gaaw_cuda_row_chunks for device code too. */
__host__ __device__ __forceinline__ int64_t row_chunks(int64_t N)
{
  return (N + GAAW_CUDA_CHUNK_ROWS - 1) / GAAW_CUDA_CHUNK_ROWS;
}

/* The global index and stride of a grid-stride loop. */
__device__ __forceinline__ int64_t global_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t global_stride() { return (int64_t)gridDim.x * blockDim.x; }

/* A grid-stride walk over the elements of a (rows, cols) matrix, row-major, that
 * keeps (row, col) up to date by addition: one 64-bit division per thread at the
 * start, none per element. Use as
 *   for (grid_2d g(cols); g.row < rows; g.next()) ... g.row * cols + g.col ... */
struct grid_2d {
  int64_t row, col, cols, step_rows, step_cols;
  __device__ __forceinline__ explicit grid_2d(int64_t cols_) : cols(cols_)
  {
    int64_t i = global_index(), s = global_stride();
    row = i / cols;
    col = i - row * cols;
    step_rows = s / cols;
    step_cols = s - step_rows * cols;
  }
  __device__ __forceinline__ void next()
  {
    row += step_rows;
    col += step_cols;
    if (col >= cols) {
      col -= cols;
      row++;
    }
  }
};

/* The same over the digits of a mixed-radix index (radix[0] fastest): digit[k] of
 * the element this thread is at; the top digit may run past its radix (the end). */
template <int K> struct grid_nd {
  int64_t digit[K], radix[K], step[K];
  __device__ __forceinline__ explicit grid_nd(const int64_t (&radix_)[K])
  {
    int64_t i = global_index(), s = global_stride();
    for (int k = 0; k < K; k++) {
      radix[k] = radix_[k];
      if (k < K - 1) {
        digit[k] = i % radix[k];
        i /= radix[k];
        step[k] = s % radix[k];
        s /= radix[k];
      } else {
        digit[k] = i;
        step[k] = s;
      }
    }
  }
  __device__ __forceinline__ void next()
  {
    int64_t carry = 0;
    for (int k = 0; k < K - 1; k++) {
      digit[k] += step[k] + carry;
      carry = 0;
      while (digit[k] >= radix[k]) { /* at most twice: step, carry < radix */
        digit[k] -= radix[k];
        carry++;
      }
    }
    digit[K - 1] += step[K - 1] + carry;
  }
};

/* ---------------------------------------------------------------- reductions */

/* Butterfly reductions over a full warp: every lane ends with the same value, and
 * the order of the additions is fixed, so results are reproducible. */
template <typename F> __device__ __forceinline__ F warp_sum(F v)
{
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v)
{
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/* Sum over a block of THREADS threads, returned to every thread; warp totals are
 * added in warp order. scratch: WARPS values of shared memory. Every thread of the
 * block must call it. */
template <typename F> __device__ __forceinline__ F block_sum(F v, F *scratch)
{
  v = warp_sum(v);
  __syncthreads(); /* earlier readers of scratch are done */
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  F total = 0;
  for (int w = 0; w < WARPS; w++) total += scratch[w];
  return total;
}
__device__ __forceinline__ float block_max(float v, float *scratch)
{
  v = warp_max(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < WARPS; w++) m = fmaxf(m, scratch[w]);
  return m;
}

} /* namespace gaaw_cuda */

#endif
