/* Activations: GELU (tanh approximation) and SwiGLU, forward and backward.
 * GELU is computed as x sigmoid(2u), u = s (x + c x^3), which equals
 * 0.5 x (1 + tanh u) without tanh's cancellation near -1 and in loops that
 * vectorize, 16 lanes wide on AVX-512 (host_math.h). */
#include <math.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBE 0.044715f

/* ---------------------------------------------------------------- f32 cores */

/* Elements [lo, hi) of gelu_forward_f32. */
HOST_VECTOR_CLONES static void gelu_forward_block(int64_t lo, int64_t hi, const float *x, float *y)
{
#pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float v = x[i];
    y[i] = v * host_sigmoidf(2.0f * GELU_SCALE * (v + GELU_CUBE * v * v * v));
  }
}

static void gelu_forward_f32(int64_t n, const float *x, float *y)
{
  int64_t blocks = (n + HOST_VECTOR_BLOCK - 1) / HOST_VECTOR_BLOCK;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < blocks; k++)
    gelu_forward_block(k * HOST_VECTOR_BLOCK, k + 1 < blocks ? (k + 1) * HOST_VECTOR_BLOCK : n, x, y);
}

/* dx += dy * d/dx [x sig(2u)] = dy (sig + 2 x sig (1 - sig) du/dx),  u = s (x + c x^3),
 * on elements [lo, hi). */
HOST_VECTOR_CLONES static void gelu_backward_block(int64_t lo, int64_t hi, const float *dy, const float *x,
                                                   float *dx)
{
#pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float v = x[i], sig = host_sigmoidf(2.0f * GELU_SCALE * (v + GELU_CUBE * v * v * v));
    float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * v * v);
    dx[i] += dy[i] * (sig + 2.0f * v * sig * (1.0f - sig) * du);
  }
}

static void gelu_backward_f32(int64_t n, const float *dy, const float *x, float *dx)
{
  int64_t blocks = (n + HOST_VECTOR_BLOCK - 1) / HOST_VECTOR_BLOCK;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < blocks; k++)
    gelu_backward_block(k * HOST_VECTOR_BLOCK, k + 1 < blocks ? (k + 1) * HOST_VECTOR_BLOCK : n, dy, x, dx);
}

/* x: (N, 2H) = [a | g]   y: (N, H) = silu(a) g */
static void swiglu_forward_f32(int64_t N, int64_t H, const float *x, float *y)
{
#pragma omp parallel for if (N * H > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float *a = x + n * 2 * H, *g = a + H;
    float *yr = y + n * H;
#pragma omp simd
    for (int64_t h = 0; h < H; h++) yr[h] = a[h] * host_sigmoidf(a[h]) * g[h];
  }
}

/* da += dy g sig(a) (1 + a (1 - sig(a))),  dg += dy silu(a). */
static void swiglu_backward_f32(int64_t N, int64_t H, const float *dy, const float *x, float *dx)
{
#pragma omp parallel for if (N * H > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float *a = x + n * 2 * H, *g = a + H, *dyr = dy + n * H;
    float *da = dx + n * 2 * H, *dg = da + H;
#pragma omp simd
    for (int64_t h = 0; h < H; h++) {
      float sig = host_sigmoidf(a[h]);
      da[h] += dyr[h] * g[h] * sig * (1.0f + a[h] * (1.0f - sig));
      dg[h] += dyr[h] * a[h] * sig;
    }
  }
}

/* ---------------------------------------------------------------- table entries */

gaaw_status_t host_gelu_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x);
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS) gelu_forward_f32(gaaw_tensor_numel(x), px, py);
  return host_stage_end(&s);
}

gaaw_status_t host_gelu_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_ten dx)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdy = host_in(&s, dy), *px = host_in(&s, x);
  float *pdx = host_inout(&s, dx);
  if (s.status == GAAW_SUCCESS) gelu_backward_f32(gaaw_tensor_numel(x), pdy, px, pdx);
  return host_stage_end(&s);
}

gaaw_status_t host_swiglu_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x);
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS) swiglu_forward_f32(host_rows(y), host_cols(y), px, py);
  return host_stage_end(&s);
}

gaaw_status_t host_swiglu_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_ten dx)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdy = host_in(&s, dy), *px = host_in(&s, x);
  float *pdx = host_inout(&s, dx);
  if (s.status == GAAW_SUCCESS) swiglu_backward_f32(host_rows(dy), host_cols(dy), pdy, px, pdx);
  return host_stage_end(&s);
}
