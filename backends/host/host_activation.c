/* Activations, forward and backward: the elementwise kinds (GELU, ReLU, tanh, SiLU,
 * none) through one pair of entries taking the kind, SwiGLU, and the fused bias add
 * and GELU of the MLP (backends/fused.h).
 * GELU is computed as x sigmoid(2u), u = s (x + c x^3), which equals
 * 0.5 x (1 + tanh u) without tanh's cancellation near -1 and in loops that
 * vectorize, 16 lanes wide on AVX-512 (host_math.h). */
#include <math.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"

/* GELU's tanh form: 0.5 x (1 + tanh u) = x sigmoid(2u), u = s (x + c x^3), with
 * s = sqrt(2 / pi) and c = 0.044715; 2u = x (2s + 2sc x^2), du/dx = s + 3sc x^2. */
#define GELU_SCALE 0.7978845608028654f   /* s */
#define GELU_2S 1.5957691216057308f      /* 2s */
#define GELU_2SC 0.07135481627260025f    /* 2sc */
#define GELU_3SC 0.10703222440890038f    /* 3sc */

/* ---------------------------------------------------------------- f32 cores */

/* act(v) and act'(v); called with a constant kind, so each loop below is
 * specialised to one branch. */
static inline float act_value(gaaw_activation_t act, float v)
{
  switch (act) {
  case GAAW_ACT_GELU: return v * host_sigmoidf(v * (GELU_2S + GELU_2SC * (v * v)));
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
    float v2 = v * v, sig = host_sigmoidf(v * (GELU_2S + GELU_2SC * v2));
    float du = GELU_SCALE + GELU_3SC * v2;
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

/* Elements [lo, hi) of one kind's forward and backward, a function per kind so that
 * each is compiled for the widest vector unit (HOST_VECTOR_CLONES) with `kind` a
 * constant; the threaded loops below call them on blocks. (An `if` on a combined
 * `parallel for simd` would also turn the simd off below the threading threshold.) */
#define ACTIVATION_BLOCKS(name, kind)                                                                      \
  HOST_VECTOR_CLONES static void name##_forward_block(int64_t lo, int64_t hi, const float *x, float *y)     \
  {                                                                                                        \
    _Pragma("omp simd") for (int64_t i = lo; i < hi; i++) y[i] = act_value(kind, x[i]);                    \
  }                                                                                                        \
  HOST_VECTOR_CLONES static void name##_backward_block(int64_t lo, int64_t hi, const float *dy,             \
                                                       const float *x, float *dx)                          \
  {                                                                                                        \
    _Pragma("omp simd") for (int64_t i = lo; i < hi; i++) dx[i] += dy[i] * act_slope(kind, x[i]);          \
  }
ACTIVATION_BLOCKS(gelu, GAAW_ACT_GELU)
ACTIVATION_BLOCKS(relu, GAAW_ACT_RELU)
ACTIVATION_BLOCKS(tanh, GAAW_ACT_TANH)
ACTIVATION_BLOCKS(silu, GAAW_ACT_SILU)
ACTIVATION_BLOCKS(identity, GAAW_ACT_NONE)

/* GELU's backward into dx: dx = 0 + dy gelu'(x), the bits of a zeroed dx added to
 * (the sign of a zero result included). */
HOST_VECTOR_CLONES static void gelu_backward_set_block(int64_t lo, int64_t hi, const float *dy, const float *x,
                                                       float *dx)
{
#pragma omp simd
  for (int64_t i = lo; i < hi; i++) dx[i] = 0.0f + dy[i] * act_slope(GAAW_ACT_GELU, x[i]);
}

typedef void (*forward_block_fn)(int64_t lo, int64_t hi, const float *x, float *y);
typedef void (*backward_block_fn)(int64_t lo, int64_t hi, const float *dy, const float *x, float *dx);

/* One specialised pair per kind. */
static void pick_blocks(gaaw_activation_t act, forward_block_fn *f, backward_block_fn *b)
{
  switch (act) {
  case GAAW_ACT_GELU: *f = gelu_forward_block, *b = gelu_backward_block; return;
  case GAAW_ACT_RELU: *f = relu_forward_block, *b = relu_backward_block; return;
  case GAAW_ACT_TANH: *f = tanh_forward_block, *b = tanh_backward_block; return;
  case GAAW_ACT_SILU: *f = silu_forward_block, *b = silu_backward_block; return;
  default: *f = identity_forward_block, *b = identity_backward_block; return;
  }
}

static void act_forward_f32(gaaw_activation_t act, int64_t n, const float *x, float *y)
{
  forward_block_fn f;
  backward_block_fn unused;
  pick_blocks(act, &f, &unused);
  int64_t blocks = (n + HOST_VECTOR_BLOCK - 1) / HOST_VECTOR_BLOCK;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < blocks; k++) f(k * HOST_VECTOR_BLOCK, k + 1 < blocks ? (k + 1) * HOST_VECTOR_BLOCK : n, x, y);
}

/* dx += dy act'(x), or with b given, whatever b does on blocks. */
static void act_backward_f32(gaaw_activation_t act, int64_t n, const float *dy, const float *x, float *dx,
                             backward_block_fn b)
{
  forward_block_fn unused;
  if (!b) pick_blocks(act, &unused, &b);
  int64_t blocks = (n + HOST_VECTOR_BLOCK - 1) / HOST_VECTOR_BLOCK;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < blocks; k++)
    b(k * HOST_VECTOR_BLOCK, k + 1 < blocks ? (k + 1) * HOST_VECTOR_BLOCK : n, dy, x, dx);
}

/* u: (N, F) += b: (F), then a: (N, F) = gelu(u), row by row while the row is in
 * cache; each element as bias_add_f32 and gelu_forward_block compute it, u rounded
 * to dtype in between as the unfused sequence stores it. */
static void bias_gelu_forward_f32(int64_t N, int64_t F, float *u, const float *b, float *a, gaaw_dtype_t dtype)
{
#pragma omp parallel for if (N * F > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float *ur = u + n * F;
#pragma omp simd
    for (int64_t c = 0; c < F; c++) ur[c] += b[c];
    host_round(ur, F, dtype);
    gelu_forward_block(n * F, (n + 1) * F, u, a);
  }
}

/* One row of SwiGLU, a: (H) and g: (H) the row's two halves, y: (H) = silu(a) g;
 * a function of its own so that it is compiled for the widest vector unit, as the
 * GELU blocks are (a plain `omp simd` row loop ran 7x slower per element). */
HOST_VECTOR_CLONES static void swiglu_forward_row(int64_t H, const float *a, const float *g, float *y)
{
#pragma omp simd
  for (int64_t h = 0; h < H; h++) y[h] = a[h] * host_sigmoidf(a[h]) * g[h];
}

/* da += dy g sig(a) (1 + a (1 - sig(a))),  dg += dy silu(a), one row. */
HOST_VECTOR_CLONES static void swiglu_backward_row(int64_t H, const float *dy, const float *a, const float *g,
                                                   float *da, float *dg)
{
#pragma omp simd
  for (int64_t h = 0; h < H; h++) {
    float sig = host_sigmoidf(a[h]);
    da[h] += dy[h] * g[h] * sig * (1.0f + a[h] * (1.0f - sig));
    dg[h] += dy[h] * a[h] * sig;
  }
}

/* x: (N, 2H) = [a | g]   y: (N, H) = silu(a) g */
static void swiglu_forward_f32(int64_t N, int64_t H, const float *x, float *y)
{
#pragma omp parallel for if (N * H > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) swiglu_forward_row(H, x + n * 2 * H, x + n * 2 * H + H, y + n * H);
}

/* dx: (N, 2H) += the gradient of y = swiglu(x) given dy: (N, H) */
static void swiglu_backward_f32(int64_t N, int64_t H, const float *dy, const float *x, float *dx)
{
#pragma omp parallel for if (N * H > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++)
    swiglu_backward_row(H, dy + n * H, x + n * 2 * H, x + n * 2 * H + H, dx + n * 2 * H, dx + n * 2 * H + H);
}

/* ---------------------------------------------------------------- table entries */

gaaw_status_t host_activation_forward(gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten x, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x);
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS) act_forward_f32(act, gaaw_tensor_numel(x), px, py);
  return host_stage_end(&s);
}

gaaw_status_t host_activation_backward(gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten dy, gaaw_cten x,
                                       gaaw_ten dx)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdy = host_in(&s, dy), *px = host_in(&s, x);
  float *pdx = host_inout(&s, dx);
  if (s.status == GAAW_SUCCESS) act_backward_f32(act, gaaw_tensor_numel(x), pdy, px, pdx, NULL);
  return host_stage_end(&s);
}

gaaw_status_t host_gelu_backward_set(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_ten dx)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdy = host_in(&s, dy), *px = host_in(&s, x);
  float *pdx = host_out(&s, dx);
  if (s.status == GAAW_SUCCESS)
    act_backward_f32(GAAW_ACT_GELU, gaaw_tensor_numel(x), pdy, px, pdx, gelu_backward_set_block);
  return host_stage_end(&s);
}

gaaw_status_t host_bias_gelu_forward(gaaw_context_t ctx, gaaw_ten u, gaaw_cten b, gaaw_ten a)
{
  host_stage s;
  host_stage_init(&s, ctx);
  float *pu = host_inout(&s, u), *pa = host_out(&s, a);
  const float *pb = host_in(&s, b);
  if (s.status == GAAW_SUCCESS) bias_gelu_forward_f32(host_rows(u), host_cols(u), pu, pb, pa, u->dtype);
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
