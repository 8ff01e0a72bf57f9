/* Embedding lookup and its scatter-add for a vocabulary slice [vocab_start, +V). */
#include <string.h>

#include "backends/host/host.h"

/* Columns per task in the backward: each task adds every row of dy into its columns
 * in the order of n, so repeated tokens sum in a fixed order with no atomics. */
enum { EMBED_COLUMN_BLOCK = 64 };

/* tokens: (N)   table: (V, C)   y: (N, C) */
static void embedding_forward_f32(int64_t N, int64_t V, int64_t C, const int32_t *tokens, const float *table,
                                  int64_t vocab_start, float *y)
{
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    int64_t row = (int64_t)tokens[n] - vocab_start;
    if (row >= 0 && row < V)
      memcpy(y + n * C, table + row * C, (size_t)C * sizeof(float));
    else
      memset(y + n * C, 0, (size_t)C * sizeof(float));
  }
}

static void embedding_backward_f32(int64_t N, int64_t V, int64_t C, const int32_t *tokens, const float *dy,
                                   int64_t vocab_start, float *dtable)
{
  int64_t blocks = (C + EMBED_COLUMN_BLOCK - 1) / EMBED_COLUMN_BLOCK;
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN && blocks > 1) schedule(static)
  for (int64_t cb = 0; cb < blocks; cb++) {
    int64_t c0 = cb * EMBED_COLUMN_BLOCK, c1 = c0 + EMBED_COLUMN_BLOCK < C ? c0 + EMBED_COLUMN_BLOCK : C;
    for (int64_t n = 0; n < N; n++) {
      int64_t row = (int64_t)tokens[n] - vocab_start;
      if (row < 0 || row >= V) continue;
      float *dst = dtable + row * C;
      const float *src = dy + n * C;
#pragma omp simd
      for (int64_t c = c0; c < c1; c++) dst[c] += src[c];
    }
  }
}

gaaw_status_t host_embedding_forward(gaaw_context_t ctx, gaaw_cten tokens, gaaw_cten table, int64_t vocab_start,
                                     gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const int32_t *pt = host_raw(&s, tokens);
  const float *ptab = host_in(&s, table);
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS)
    embedding_forward_f32(gaaw_tensor_numel(tokens), host_rows(table), host_cols(table), pt, ptab, vocab_start, py);
  return host_stage_end(&s);
}

gaaw_status_t host_embedding_backward(gaaw_context_t ctx, gaaw_cten tokens, gaaw_cten dy, int64_t vocab_start,
                                      gaaw_ten dtable)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const int32_t *pt = host_raw(&s, tokens);
  const float *pdy = host_in(&s, dy);
  float *pdt = host_inout(&s, dtable);
  if (s.status == GAAW_SUCCESS)
    embedding_backward_f32(gaaw_tensor_numel(tokens), host_rows(dtable), host_cols(dtable), pt, pdy, vocab_start,
                           pdt);
  return host_stage_end(&s);
}
