/* Embedding lookup and its deterministic scatter-add.
 *
 * Backward: the positions n are sorted by table row with a stable radix sort, so
 * each row's occurrences are contiguous and in the order of n. The sorted positions
 * are cut into segments of SEGMENT; a block per segment sums each run of one row
 * inside it, and a run that crosses segments (a token repeated many times, such as
 * padding) is finished by adding its per-segment parts in order, so no block sums
 * a long run alone. No atomics: bit-identical run to run however often a token
 * repeats. */
#include <cub/device/device_radix_sort.cuh>

#include "backends/cuda/cuda_common.cuh"

using namespace gaaw_cuda;

namespace {

/* tokens: (N)   table: (V, C)   y: (N, C) */
template <typename T>
__global__ void embedding_forward_kernel(int64_t N, int64_t V, int64_t C, const int32_t *tokens, const T *table,
                                         int64_t vocab_start, T *y)
{
  for (grid_2d g(C); g.row < N; g.next()) {
    int64_t n = g.row, c = g.col, row = (int64_t)tokens[n] - vocab_start;
    y[n * C + c] = row >= 0 && row < V ? table[row * C + c] : from_f32<T>(0.0f);
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

/* Sorted positions per block of the accumulation: a token repeated R times is
 * summed by about R / SEGMENT blocks, not serially by one. */
constexpr int64_t SEGMENT = 64;

__host__ __device__ __forceinline__ int64_t segments(int64_t N)
{
  return (N + SEGMENT - 1) / SEGMENT;
}

/* Segment s (sorted positions [lo, hi)) sums each run of equal keys inside it, in
 * the order of the positions: a run wholly inside goes straight into dtable; the
 * part of a run that began before lo goes to head[s], that of a run that begins
 * here and goes on past hi to tail[s] (both (segments, C)); runs of `outside` are
 * skipped. One writer per value: no atomics. */
template <typename T>
__global__ void embedding_segment_kernel(int64_t N, int64_t C, const uint32_t *keys, const uint32_t *positions,
                                         uint32_t outside, const T *dy, T *dtable, float *head, float *tail)
{
  for (int64_t s = blockIdx.x; s < segments(N); s += gridDim.x) {
    int64_t lo = s * SEGMENT, hi = lo + SEGMENT < N ? lo + SEGMENT : N;
    for (int64_t p = lo; p < hi;) {
      uint32_t key = keys[p];
      int64_t q = p + 1;
      while (q < hi && keys[q] == key) q++;
      bool from_left = p == lo && lo > 0 && keys[lo - 1] == key;
      bool to_right = q == hi && hi < N && keys[hi] == key;
      if (key != outside)
        for (int64_t c = threadIdx.x; c < C; c += THREADS) {
          float sum = 0.0f;
          for (int64_t r = p; r < q; r++) sum += to_f32(dy[(int64_t)positions[r] * C + c]);
          if (from_left)
            head[s * C + c] = sum;
          else if (to_right)
            tail[s * C + c] = sum;
          else
            add_to(dtable, (int64_t)key * C + c, sum);
        }
      p = q;
    }
  }
}

/* The runs that cross segments: the segment where such a run begins adds its tail
 * and then the heads of the following segments the run covers, in order. */
template <typename T>
__global__ void embedding_crossing_kernel(int64_t N, int64_t C, const uint32_t *keys, uint32_t outside,
                                          const float *head, const float *tail, T *dtable)
{
  for (int64_t s = blockIdx.x; s < segments(N); s += gridDim.x) {
    int64_t lo = s * SEGMENT, hi = lo + SEGMENT;
    if (hi >= N) continue;
    uint32_t key = keys[hi - 1];
    if (key == outside || keys[hi] != key) continue;          /* the last run ends here */
    if (keys[lo] == key && lo > 0 && keys[lo - 1] == key) continue; /* it began before s */
    for (int64_t c = threadIdx.x; c < C; c += THREADS) {
      float sum = tail[s * C + c];
      for (int64_t t = s + 1; t < segments(N); t++) {
        sum += head[t * C + c];
        int64_t t_hi = (t + 1) * SEGMENT;
        if (t_hi >= N || keys[t_hi] != key) break; /* the run ends in segment t */
      }
      add_to(dtable, (int64_t)key * C + c, sum);
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

/* The workspace: keys and positions, in and out of the sort, CUB's own, then the
 * head and tail partial sums of the segments. */
struct layout {
  size_t array, cub, partials, total;
};
cudaError_t workspace_layout(int64_t N, int64_t V, int64_t C, layout *l)
{
  uint32_t outside = outside_key(V);
  l->array = round_up((size_t)N * sizeof(uint32_t));
  l->partials = round_up((size_t)segments(N) * (size_t)C * sizeof(float));
  l->cub = 0;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(nullptr, l->cub, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                                    (const uint32_t *)nullptr, (uint32_t *)nullptr, (int)N, 0,
                                                    key_bits(outside));
  l->total = 4 * l->array + round_up(l->cub) + 2 * l->partials;
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

cudaError_t gaaw_cuda_embedding_backward_workspace(int64_t N, int64_t V, int64_t C, size_t *bytes)
{
  if (N > INT32_MAX) return cudaErrorInvalidValue; /* CUB sorts int-sized ranges */
  layout l;
  cudaError_t err = workspace_layout(N, V, C, &l);
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
  cudaError_t err = workspace_layout(N, V, C, &l);
  if (err != cudaSuccess) return err;
  if (workspace_bytes < l.total) return cudaErrorInvalidValue;
  char *base = (char *)workspace;
  uint32_t *keys_in = (uint32_t *)base, *keys = (uint32_t *)(base + l.array);
  uint32_t *pos_in = (uint32_t *)(base + 2 * l.array), *pos = (uint32_t *)(base + 3 * l.array);
  void *cub_temp = base + 4 * l.array;
  float *head = (float *)(base + 4 * l.array + round_up(l.cub)), *tail = (float *)((char *)head + l.partials);
  uint32_t outside = outside_key(V);
  embedding_keys_kernel<<<blocks_for(N, THREADS), THREADS, 0, s>>>(N, V, tokens, vocab_start, outside, keys_in,
                                                                   pos_in);
  err = cub::DeviceRadixSort::SortPairs(cub_temp, l.cub, keys_in, keys, pos_in, pos, (int)N, 0, key_bits(outside), s);
  if (err != cudaSuccess) return err;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T,
    embedding_segment_kernel<T><<<blocks_for(segments(N), 1), THREADS, 0, s>>>(N, C, keys, pos, outside,
                                                                               (const T *)dy, (T *)dtable, head, tail);
    embedding_crossing_kernel<T><<<blocks_for(segments(N), 1), THREADS, 0, s>>>(N, C, keys, outside, head, tail,
                                                                                (T *)dtable));
  return cudaGetLastError();
}

} /* extern "C" */
