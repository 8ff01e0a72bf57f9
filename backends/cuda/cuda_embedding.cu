/* Embedding lookup and its deterministic scatter-add.
 *
 * Backward: the positions n are sorted by table row with a stable radix sort, so
 * each row's occurrences are contiguous and in the order of n; then one block per
 * distinct row sums its dy rows in that order and adds the sum once. No atomics:
 * bit-identical run to run however often a token repeats. */
#include <cub/device/device_radix_sort.cuh>

#include "backends/cuda/cuda_common.cuh"

using namespace gaaw_cuda;

namespace {

/* tokens: (N)   table: (V, C)   y: (N, C) */
template <typename T>
__global__ void embedding_forward_kernel(int64_t N, int64_t V, int64_t C, const int32_t *tokens, const T *table,
                                         int64_t vocab_start, T *y)
{
  for (int64_t i = global_index(); i < N * C; i += global_stride()) {
    int64_t n = i / C, c = i - n * C, row = (int64_t)tokens[n] - vocab_start;
    y[i] = row >= 0 && row < V ? table[row * C + c] : from_f32<T>(0.0f);
  }
}

/* Sort keys: the table row, or `outside` for a token outside the slice (sorted last
 * and skipped); values: the position n. */
__global__ void embedding_keys_kernel(int64_t N, int64_t V, const int32_t *tokens, int64_t vocab_start,
                                      uint32_t outside, uint32_t *keys, uint32_t *positions)
{
  for (int64_t n = global_index(); n < N; n += global_stride()) {
    int64_t row = (int64_t)tokens[n] - vocab_start;
    keys[n] = row >= 0 && row < V ? (uint32_t)row : outside;
    positions[n] = (uint32_t)n;
  }
}

/* A block per sorted position p that starts a run of equal keys: dtable[key] += the
 * dy rows of the run, summed in order. */
template <typename T>
__global__ void embedding_accumulate_kernel(int64_t N, int64_t C, const uint32_t *keys, const uint32_t *positions,
                                            uint32_t outside, const T *dy, T *dtable)
{
  for (int64_t p = blockIdx.x; p < N; p += gridDim.x) {
    uint32_t key = keys[p];
    if (key == outside || (p > 0 && keys[p - 1] == key)) continue;
    int64_t end = p + 1;
    while (end < N && keys[end] == key) end++;
    for (int64_t c = threadIdx.x; c < C; c += THREADS) {
      float s = 0.0f;
      for (int64_t q = p; q < end; q++) s += to_f32(dy[(int64_t)positions[q] * C + c]);
      add_to(dtable, (int64_t)key * C + c, s);
    }
  }
}

/* The key for tokens outside the slice: above every row that a token can name. */
uint32_t outside_key(int64_t V)
{
  return V < (int64_t)UINT32_MAX ? (uint32_t)V : UINT32_MAX;
}

/* Bits the sort must look at to order keys up to `outside`. */
int key_bits(uint32_t outside)
{
  int bits = 1;
  while (bits < 32 && (outside >> bits) != 0) bits++;
  return bits;
}

size_t round_up(size_t bytes)
{
  return (bytes + 255) & ~(size_t)255;
}

/* The workspace: keys and positions, in and out of the sort, then CUB's own. */
struct layout {
  size_t array, cub, total;
};
cudaError_t workspace_layout(int64_t N, int64_t V, layout *l)
{
  uint32_t outside = outside_key(V);
  l->array = round_up((size_t)N * sizeof(uint32_t));
  l->cub = 0;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(nullptr, l->cub, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                                    (const uint32_t *)nullptr, (uint32_t *)nullptr, (int)N, 0,
                                                    key_bits(outside));
  l->total = 4 * l->array + round_up(l->cub);
  return err;
}

} /* namespace */

extern "C" {

cudaError_t gaaw_cuda_embedding_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, int64_t C,
                                        const int32_t *tokens, const void *table, int64_t vocab_start, void *y)
{
  if (N * C == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, embedding_forward_kernel<T><<<blocks_for(N * C, THREADS), THREADS, 0, s>>>(
                                      N, V, C, tokens, (const T *)table, vocab_start, (T *)y));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_embedding_backward_workspace(int64_t N, int64_t V, size_t *bytes)
{
  if (N > INT32_MAX) return cudaErrorInvalidValue; /* CUB sorts int-sized ranges */
  layout l;
  cudaError_t err = workspace_layout(N, V, &l);
  *bytes = l.total;
  return err;
}

cudaError_t gaaw_cuda_embedding_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t V, int64_t C,
                                         const int32_t *tokens, const void *dy, int64_t vocab_start, void *dtable,
                                         void *workspace, size_t workspace_bytes)
{
  if (N == 0 || C == 0) return cudaSuccess;
  if (N > INT32_MAX) return cudaErrorInvalidValue;
  layout l;
  cudaError_t err = workspace_layout(N, V, &l);
  if (err != cudaSuccess) return err;
  if (workspace_bytes < l.total) return cudaErrorInvalidValue;
  char *base = (char *)workspace;
  uint32_t *keys_in = (uint32_t *)base, *keys = (uint32_t *)(base + l.array);
  uint32_t *pos_in = (uint32_t *)(base + 2 * l.array), *pos = (uint32_t *)(base + 3 * l.array);
  void *cub_temp = base + 4 * l.array;
  uint32_t outside = outside_key(V);
  embedding_keys_kernel<<<blocks_for(N, THREADS), THREADS, 0, s>>>(N, V, tokens, vocab_start, outside, keys_in,
                                                                   pos_in);
  err = cub::DeviceRadixSort::SortPairs(cub_temp, l.cub, keys_in, keys, pos_in, pos, (int)N, 0, key_bits(outside), s);
  if (err != cudaSuccess) return err;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, embedding_accumulate_kernel<T><<<blocks_for(N, 1), THREADS, 0, s>>>(
                                      N, C, keys, pos, outside, (const T *)dy, (T *)dtable));
  return cudaGetLastError();
}

} /* extern "C" */
