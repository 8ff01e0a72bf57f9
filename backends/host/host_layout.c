/* Layout kernels: moving rows of elements without arithmetic, for any dtype. */
#include <string.h>

#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"

/* y[a][c][b][:] = x[a][b][c][:]   x: (A, B, C, D)   y: (A, C, B, D) */
gaaw_status_t host_permute_0213(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const char *src = host_raw(&s, x);
  char *dst = host_raw(&s, y);
  int64_t A = x->shape[0], B = x->shape[1], C = x->shape[2];
  size_t row = (size_t)x->shape[3] * gaaw_dtype_size(x->dtype);
  if (src && dst && row) {
#pragma omp parallel for collapse(2) if (A * B * C * (int64_t)row > 4 * HOST_PARALLEL_MIN)
    for (int64_t a = 0; a < A; a++)
      for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++)
          memcpy(dst + (((size_t)a * C + c) * B + b) * row, src + (((size_t)a * B + b) * C + c) * row, row);
  }
  return host_stage_end(&s);
}

/* qkv (B, T, Hq + 2 Hkv, D) <-> q, k, v (B, Hq, T, D); key/value head j serves query
 * heads j g .. j g + g - 1. Backward sums each group in f32, in head order
 * (the first head's value, then + each next). */
static void qkv_heads_f32(int64_t B, int64_t H, int64_t T, int64_t D, int64_t Hkv, int backward, float *qkv, float *q,
                          float *k, float *v)
{
  const int64_t NH = H + 2 * Hkv, g = H / Hkv;
#pragma omp parallel for collapse(2) if (B * T * NH * D > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) {
      float *row = qkv + (b * T + t) * NH * D;
      for (int64_t h = 0; h < NH; h++) {
        /* head h of the row: query h, or key / value head j = (h - H) mod Hkv */
        int64_t part = h < H ? 0 : h < H + Hkv ? 1 : 2, j = part == 0 ? h : (h - H) % Hkv;
        float *dst = part == 0 ? q : part == 1 ? k : v, *x = row + h * D;
        int64_t first = part == 0 ? j : j * g, count = part == 0 ? 1 : g;
        if (!backward) {
          for (int64_t r = first; r < first + count; r++) memcpy(dst + ((b * H + r) * T + t) * D, x, sizeof(float) * D);
          continue;
        }
        for (int64_t i = 0; i < D; i++) {
          float sum = dst[((b * H + first) * T + t) * D + i];
          for (int64_t r = first + 1; r < first + count; r++) sum += dst[((b * H + r) * T + t) * D + i];
          x[i] = sum;
        }
      }
    }
}

gaaw_status_t host_qkv_heads(gaaw_context_t ctx, gaaw_ten qkv, int64_t kv_heads, int backward, gaaw_ten q, gaaw_ten k,
                             gaaw_ten v)
{
  host_stage s;
  host_stage_init(&s, ctx);
  float *pqkv, *pq, *pk, *pv;
  if (backward) {
    pq = (float *)host_in(&s, q), pk = (float *)host_in(&s, k), pv = (float *)host_in(&s, v);
    pqkv = host_out(&s, qkv);
  } else {
    pqkv = (float *)host_in(&s, qkv);
    pq = host_out(&s, q), pk = host_out(&s, k), pv = host_out(&s, v);
  }
  if (s.status == GAAW_SUCCESS)
    qkv_heads_f32(q->shape[0], q->shape[1], q->shape[2], q->shape[3], kv_heads, backward, pqkv, pq, pk, pv);
  return host_stage_end(&s);
}
