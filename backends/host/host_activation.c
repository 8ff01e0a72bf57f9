/* Activations, forward and backward: the elementwise kinds (GELU, ReLU, tanh, SiLU,
 * none) through one pair of entries taking the kind, and SwiGLU.
 * GELU is computed as x sigmoid(2u), u = s (x + c x^3), which equals
 * 0.5 x (1 + tanh u) without tanh's cancellation near -1 and in loops that
 * vectorize (host_math.h). */
#include <math.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBE 0.044715f

/* ---------------------------------------------------------------- f32 cores */

/* act(v) and act'(v); called with a constant kind, so each loop below is
 * specialised to one branch. */
static inline float act_value(gaaw_activation_t act, float v)
{
  switch (act) {
  case GAAW_ACT_GELU: return v * host_sigmoidf(2.0f * GELU_SCALE * (v + GELU_CUBE * v * v * v));
  case GAAW_ACT_RELU: return v > 0.0f ? v : 0.0f;
  case GAAW_ACT_TANH: return tanhf(v);
  case GAAW_ACT_SILU: return v * host_sigmoidf(v);
  default: return v;
  }
}

/* GELU: d/dx [x sig(2u)] = sig + 2 x sig (1 - sig) du/dx;  SiLU: sig (1 + x (1 - sig)). */
static inline float act_slope(gaaw_activation_t act, float v)
{
  switch (act) {
  case GAAW_ACT_GELU: {
    float sig = host_sigmoidf(2.0f * GELU_SCALE * (v + GELU_CUBE * v * v * v));
    float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * v * v);
    return sig + 2.0f * v * sig * (1.0f - sig) * du;
  }
  case GAAW_ACT_RELU: return v > 0.0f ? 1.0f : 0.0f;
  case GAAW_ACT_TANH: {
    float t = tanhf(v);
    return 1.0f - t * t;
  }
  case GAAW_ACT_SILU: {
    float sig = host_sigmoidf(v);
    return sig * (1.0f + v * (1.0f - sig));
  }
  default: return 1.0f;
  }
}

static inline void act_forward_loop(gaaw_activation_t act, int64_t n, const float *x, float *y)
{
#pragma omp parallel for simd if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = act_value(act, x[i]);
}

static inline void act_backward_loop(gaaw_activation_t act, int64_t n, const float *dy, const float *x, float *dx)
{
#pragma omp parallel for simd if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * act_slope(act, x[i]);
}

/* One specialised loop per kind (the switch outside the loop). */
#define FOR_EACH_KIND(act, loop, ...)                             \
  switch (act) {                                                  \
  case GAAW_ACT_GELU: loop(GAAW_ACT_GELU, __VA_ARGS__); break;    \
  case GAAW_ACT_RELU: loop(GAAW_ACT_RELU, __VA_ARGS__); break;    \
  case GAAW_ACT_TANH: loop(GAAW_ACT_TANH, __VA_ARGS__); break;    \
  case GAAW_ACT_SILU: loop(GAAW_ACT_SILU, __VA_ARGS__); break;    \
  default: loop(GAAW_ACT_NONE, __VA_ARGS__); break;               \
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

gaaw_status_t host_activation_forward(gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten x, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x);
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS) FOR_EACH_KIND(act, act_forward_loop, gaaw_tensor_numel(x), px, py);
  return host_stage_end(&s);
}

gaaw_status_t host_activation_backward(gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten dy, gaaw_cten x,
                                       gaaw_ten dx)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdy = host_in(&s, dy), *px = host_in(&s, x);
  float *pdx = host_inout(&s, dx);
  if (s.status == GAAW_SUCCESS) FOR_EACH_KIND(act, act_backward_loop, gaaw_tensor_numel(x), pdy, px, pdx);
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
