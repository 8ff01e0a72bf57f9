/* The host's rotary position embedding (gaaw_rope_forward / _backward): each pair
 * (i, i + D/2) of a rotated head is read whole before it is written, so y may be x. */
#include <string.h>

#include "backends/host/host.h"

/* x, y: (R, T, NH, D) with R = B   table: (T, D) = (cos | sin); sign -1 rotates back. */
static void rope_f32(int64_t B, int64_t T, int64_t NH, int64_t D, int64_t heads, float sign, const float *x,
                     const float *table, float *y)
{
  const int64_t half = D / 2;
#pragma omp parallel for if (B * T * NH * D > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t bt = 0; bt < B * T; bt++) {
    const float *cosv = table + (bt % T) * D, *sinv = cosv + half;
    const float *xr = x + bt * NH * D;
    float *yr = y + bt * NH * D;
    for (int64_t h = 0; h < heads; h++) {
      const float *a = xr + h * D, *b = a + half;
      float *ya = yr + h * D, *yb = ya + half;
#pragma omp simd
      for (int64_t i = 0; i < half; i++) {
        float c = cosv[i], s = sign * sinv[i], xa = a[i], xb = b[i];
        ya[i] = xa * c - xb * s;
        yb[i] = xb * c + xa * s;
      }
    }
    if (y != x && heads < NH) memcpy(yr + heads * D, xr + heads * D, (size_t)((NH - heads) * D) * sizeof(float));
  }
}

gaaw_status_t host_rope(gaaw_context_t ctx, gaaw_cten x, gaaw_cten table, int64_t heads, int inverse, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x), *pt = host_in(&s, table);
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS)
    rope_f32(x->shape[0], x->shape[1], x->shape[2], x->shape[3], heads, inverse ? -1.0f : 1.0f, px, pt, py);
  return host_stage_end(&s);
}
