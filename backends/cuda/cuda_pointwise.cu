/* Pointwise kernels: activations, bias and residual adds, axpy, scale, cast, fill,
 * permute, finite check, and AdamW (128-bit loads where the pointers allow). The
 * formulas are the host backend's (backends/host), in the same order. */
#include "backends/cuda/cuda_common.cuh"

using namespace gaaw_cuda;

namespace {

constexpr float GELU_SCALE = 0.7978845608028654f; /* sqrt(2 / pi) */
constexpr float GELU_CUBE = 0.044715f;

/* ---------------------------------------------------------------- activations */

__device__ float act_value(gaaw_cuda_activation act, float v)
{
  switch (act) {
  case GAAW_CUDA_ACT_GELU: return 0.5f * v * (1.0f + tanhf(GELU_SCALE * (v + GELU_CUBE * v * v * v)));
  case GAAW_CUDA_ACT_RELU: return v > 0.0f ? v : 0.0f;
  case GAAW_CUDA_ACT_TANH: return tanhf(v);
  case GAAW_CUDA_ACT_SILU: return v / (1.0f + expf(-v));
  default: return v;
  }
}

/* GELU: d/dx [0.5 x (1 + tanh u)], u = s (x + c x^3);  SiLU: sig (1 + x (1 - sig)) */
__device__ float act_slope(gaaw_cuda_activation act, float v)
{
  switch (act) {
  case GAAW_CUDA_ACT_GELU: {
    float t = tanhf(GELU_SCALE * (v + GELU_CUBE * v * v * v));
    float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * v * v);
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
  }
  case GAAW_CUDA_ACT_RELU: return v > 0.0f ? 1.0f : 0.0f;
  case GAAW_CUDA_ACT_TANH: {
    float t = tanhf(v);
    return 1.0f - t * t;
  }
  case GAAW_CUDA_ACT_SILU: {
    float sig = 1.0f / (1.0f + expf(-v));
    return sig * (1.0f + v * (1.0f - sig));
  }
  default: return 1.0f;
  }
}

template <typename T>
__global__ void activation_forward_kernel(gaaw_cuda_activation act, int64_t n, const T *x, T *y)
{
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = from_f32<T>(act_value(act, to_f32(x[i])));
}

template <typename T>
__global__ void activation_backward_kernel(gaaw_cuda_activation act, int64_t n, const T *dy, const T *x, T *dx)
{
  for (int64_t i = global_index(); i < n; i += global_stride())
    add_to(dx, i, to_f32(dy[i]) * act_slope(act, to_f32(x[i])));
}

template <typename T>
__global__ void regression_loss_kernel(int kind, float delta, int64_t n, const T *pred, const T *target, const float *w,
                                       float *loss, T *grad)
{
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    float d = to_f32(pred[i]) - to_f32(target[i]), a = fabsf(d), sign = d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f;
    float l, g;
    if (kind == 0) {
      l = d * d, g = 2.0f * d;
    } else if (kind == 1) {
      l = a, g = sign;
    } else if (a < delta) {
      l = 0.5f * d * d, g = d;
    } else {
      l = delta * (a - 0.5f * delta), g = delta * sign;
    }
    float wi = w ? w[i] : 1.0f;
    loss[i] = wi * l;
    grad[i] = from_f32<T>(wi * g);
  }
}

/* x: (N, 2H) = [a | g]   y: (N, H) = silu(a) g; one thread per element of y. */
template <typename T> __global__ void swiglu_forward_kernel(int64_t N, int64_t H, const T *x, T *y)
{
  for (grid_2d it(H); it.row < N; it.next()) {
    int64_t n = it.row, h = it.col, i = n * H + h;
    float a = to_f32(x[n * 2 * H + h]), g = to_f32(x[n * 2 * H + H + h]);
    y[i] = from_f32<T>(a / (1.0f + expf(-a)) * g);
  }
}

template <typename T> __global__ void swiglu_backward_kernel(int64_t N, int64_t H, const T *dy, const T *x, T *dx)
{
  for (grid_2d it(H); it.row < N; it.next()) {
    int64_t n = it.row, h = it.col, i = n * H + h, ia = n * 2 * H + h, ig = ia + H;
    float a = to_f32(x[ia]), g = to_f32(x[ig]), d = to_f32(dy[i]);
    float sig = 1.0f / (1.0f + expf(-a));
    add_to(dx, ia, d * g * sig * (1.0f + a * (1.0f - sig)));
    add_to(dx, ig, d * a * sig);
  }
}

/* Rotary position embedding on x, y: (B*T, NH, D), table: (T, D) f32 = (cos | sin); one
 * thread per pair (i, i + D/2) of a head, read whole before it is written (y may be x);
 * heads from `heads` on are copied when copy is set. sign -1: the inverse rotation. */
template <typename T>
__global__ void rope_kernel(int64_t n, int64_t Tn, int64_t NH, int64_t D, int64_t heads, float sign, int copy,
                            const T *x, const float *table, T *y)
{
  const int64_t hd = D / 2;
  for (int64_t o = global_index(); o < n; o += global_stride()) {
    int64_t i = o % hd, r = o / hd, h = r % NH, bt = r / NH;
    int64_t ia = (bt * NH + h) * D + i, ib = ia + hd;
    float xa = to_f32(x[ia]), xb = to_f32(x[ib]);
    if (h < heads) {
      const float *row = table + (bt % Tn) * D;
      float c = row[i], sn = sign * row[hd + i];
      y[ia] = from_f32<T>(xa * c - xb * sn);
      y[ib] = from_f32<T>(xb * c + xa * sn);
    } else if (copy) {
      y[ia] = x[ia];
      y[ib] = x[ib];
    }
  }
}

/* Grouped-query attention's heads: forward one thread per element of q (and of k
 * and v), (B, H, T, D) from qkv (B, T, H + 2 Hkv, D), key/value head j serving query
 * heads j g .. j g + g - 1; backward one per element of dqkv, a key or value head's
 * the sum of its g query heads' (the first, then + each next, in f32). */
template <typename T>
__global__ void qkv_heads_forward_kernel(int64_t n, int64_t H, int64_t Tn, int64_t D, int64_t Hkv, const T *qkv, T *q,
                                         T *k, T *v)
{
  for (int64_t o = global_index(); o < n; o += global_stride()) {
    int64_t d = o % D, r = o / D, t = r % Tn;
    r /= Tn;
    int64_t h = r % H, b = r / H, NH = H + 2 * Hkv, j = h / (H / Hkv), row = (b * Tn + t) * NH;
    q[o] = qkv[(row + h) * D + d];
    k[o] = qkv[(row + H + j) * D + d];
    v[o] = qkv[(row + H + Hkv + j) * D + d];
  }
}

template <typename T>
__global__ void qkv_heads_backward_kernel(int64_t n, int64_t H, int64_t Tn, int64_t D, int64_t Hkv, const T *dq,
                                          const T *dk, const T *dv, T *dqkv)
{
  const int64_t NH = H + 2 * Hkv, g = H / Hkv;
  for (int64_t o = global_index(); o < n; o += global_stride()) {
    int64_t d = o % D, r = o / D, h = r % NH, bt = r / NH, t = bt % Tn, b = bt / Tn;
    if (h < H) {
      dqkv[o] = dq[((b * H + h) * Tn + t) * D + d];
      continue;
    }
    const T *src = h < H + Hkv ? dk : dv;
    int64_t first = (h < H + Hkv ? h - H : h - H - Hkv) * g;
    float sum = to_f32(src[((b * H + first) * Tn + t) * D + d]);
    for (int64_t s = first + 1; s < first + g; s++) sum += to_f32(src[((b * H + s) * Tn + t) * D + d]);
    dqkv[o] = from_f32<T>(sum);
  }
}

/* ---------------------------------------------------------------- elementwise */

template <typename T> __global__ void bias_add_kernel(int64_t N, int64_t C, T *y, const T *b)
{
  for (grid_2d g(C); g.row < N; g.next()) add_to(y, g.row * C + g.col, to_f32(b[g.col]));
}

/* y may be a or b: each thread reads its element before writing it. */
template <typename T> __global__ void add_kernel(int64_t n, const T *a, const T *b, T *y)
{
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

template <typename T> __global__ void axpy_kernel(int64_t n, float alpha, const T *x, T *y)
{
  for (int64_t i = global_index(); i < n; i += global_stride()) add_to(y, i, alpha * to_f32(x[i]));
}

template <typename T> __global__ void scale_kernel(int64_t n, T *x, float alpha)
{
  for (int64_t i = global_index(); i < n; i += global_stride()) x[i] = from_f32<T>(to_f32(x[i]) * alpha);
}

template <typename X, typename Y> __global__ void cast_kernel(int64_t n, const X *x, Y *y)
{
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = from_f32<Y>(to_f32(x[i]));
}

template <typename U> __global__ void fill_kernel(int64_t n, U bits, U *x)
{
  for (int64_t i = global_index(); i < n; i += global_stride()) x[i] = bits;
}

/* One thread per element of y (A, C, B, D). */
template <typename U>
__global__ void permute_0213_kernel(int64_t A, int64_t B, int64_t C, int64_t D, const U *x, U *y)
{
  /* y's index in digits (d, b, c, a), fastest first */
  for (grid_nd<4> g({D, B, C, A}); g.digit[3] < A; g.next()) {
    int64_t d = g.digit[0], b = g.digit[1], c = g.digit[2], a = g.digit[3];
    y[((a * C + c) * B + b) * D + d] = x[((a * B + b) * C + c) * D + d];
  }
}

/* An all-ones exponent means inf or nan; every thread that finds one writes the same 1. */
template <typename U> __global__ void check_finite_kernel(int64_t n, const U *x, U mask, int32_t *flag)
{
  int bad = 0;
  for (int64_t i = global_index(); i < n; i += global_stride()) bad |= (x[i] & mask) == mask;
  if (bad) flag[0] = 1;
}

/* ---------------------------------------------------------------- AdamW */

struct adamw_step {
  gaaw_cuda_adamw_consts c;
  __device__ __forceinline__ void operator()(float grad, float &w, float &m, float &v) const
  {
    float g = grad * c.grad_scale;
    float mi = c.beta1 * m + (1.0f - c.beta1) * g;
    float vi = c.beta2 * v + (1.0f - c.beta2) * g * g;
    w = w - c.lr * (mi / c.bias_correction1 / (sqrtf(vi / c.bias_correction2) + c.eps) + c.weight_decay * w);
    m = mi;
    v = vi;
  }
};

/* Four consecutive elements as f32, with one 128-bit (f32) or 64-bit (16-bit types)
 * access; p + i must be aligned to 4 elements. */
__device__ __forceinline__ void load4(const float *p, int64_t i, float f[4])
{
  float4 q = *reinterpret_cast<const float4 *>(p + i);
  f[0] = q.x, f[1] = q.y, f[2] = q.z, f[3] = q.w;
}
__device__ __forceinline__ void store4(float *p, int64_t i, const float f[4])
{
  *reinterpret_cast<float4 *>(p + i) = make_float4(f[0], f[1], f[2], f[3]);
}
template <typename T> __device__ __forceinline__ void load4(const T *p, int64_t i, float f[4])
{
  uint2 q = *reinterpret_cast<const uint2 *>(p + i);
  T h[4];
  memcpy(h, &q, sizeof q);
  for (int k = 0; k < 4; k++) f[k] = to_f32(h[k]);
}
template <typename T> __device__ __forceinline__ void store4(T *p, int64_t i, const float f[4])
{
  T h[4];
  for (int k = 0; k < 4; k++) h[k] = from_f32<T>(f[k]);
  uint2 q;
  memcpy(&q, h, sizeof q);
  *reinterpret_cast<uint2 *>(p + i) = q;
}

/* w, m, v (f32) updated; out = w (P) when given. With vec, the first n / 4 * 4
 * elements go four at a time (all pointers aligned to 4 elements). */
template <typename G, typename P>
__global__ void adamw_kernel(int64_t n, const G *grads, float *w, float *m, float *v, P *out, adamw_step step,
                             bool vec)
{
  int64_t n4 = vec ? n / 4 : 0;
  for (int64_t q = global_index(); q < n4; q += global_stride()) {
    int64_t i = 4 * q;
    float g[4], wf[4], mf[4], vf[4];
    load4(grads, i, g);
    load4(w, i, wf);
    load4(m, i, mf);
    load4(v, i, vf);
    for (int k = 0; k < 4; k++) step(g[k], wf[k], mf[k], vf[k]);
    store4(w, i, wf);
    store4(m, i, mf);
    store4(v, i, vf);
    if (out) store4(out, i, wf);
  }
  for (int64_t i = 4 * n4 + global_index(); i < n; i += global_stride()) {
    float wi = w[i], mi = m[i], vi = v[i];
    step(to_f32(grads[i]), wi, mi, vi);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
    if (out) out[i] = from_f32<P>(wi);
  }
}

int aligned(const void *p, size_t bytes)
{
  return p == nullptr || (uintptr_t)p % bytes == 0;
}

/* Launch shapes of a pointwise kernel over n items. */
#define GAAW_POINTWISE(n) blocks_for((n), THREADS), THREADS, 0, s

} /* namespace */

/* ---------------------------------------------------------------- launchers */

extern "C" {

cudaError_t gaaw_cuda_activation_forward(cudaStream_t s, gaaw_cuda_dtype dt, gaaw_cuda_activation act, int64_t n,
                                         const void *x, void *y)
{
  if (n == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T,
                           activation_forward_kernel<<<GAAW_POINTWISE(n)>>>(act, n, (const T *)x, (T *)y));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_activation_backward(cudaStream_t s, gaaw_cuda_dtype dt, gaaw_cuda_activation act, int64_t n,
                                          const void *dy, const void *x, void *dx)
{
  if (n == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(
      dt, T, activation_backward_kernel<<<GAAW_POINTWISE(n)>>>(act, n, (const T *)dy, (const T *)x, (T *)dx));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_regression_loss(cudaStream_t s, gaaw_cuda_dtype dt, int kind, float delta, int64_t n,
                                      const void *pred, const void *target, const float *w, float *loss, void *grad)
{
  if (n == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T,
                           regression_loss_kernel<<<GAAW_POINTWISE(n)>>>(kind, delta, n, (const T *)pred,
                                                                         (const T *)target, w, loss, (T *)grad));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_swiglu_forward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t H, const void *x,
                                     void *y)
{
  if (N * H == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, swiglu_forward_kernel<<<GAAW_POINTWISE(N * H)>>>(N, H, (const T *)x, (T *)y));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_swiglu_backward(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t H, const void *dy,
                                      const void *x, void *dx)
{
  if (N * H == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(
      dt, T, swiglu_backward_kernel<<<GAAW_POINTWISE(N * H)>>>(N, H, (const T *)dy, (const T *)x, (T *)dx));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_rope(cudaStream_t s, gaaw_cuda_dtype dt, int64_t B, int64_t Tn, int64_t NH, int64_t D,
                           int64_t heads, int inverse, const void *x, const float *table, void *y)
{
  int64_t n = B * Tn * NH * (D / 2);
  if (n == 0) return cudaSuccess;
  float sign = inverse ? -1.0f : 1.0f;
  int copy = x != y;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T,
                           rope_kernel<<<GAAW_POINTWISE(n)>>>(n, Tn, NH, D, heads, sign, copy, (const T *)x, table,
                                                               (T *)y));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_qkv_heads(cudaStream_t s, gaaw_cuda_dtype dt, int64_t B, int64_t H, int64_t Tn, int64_t D,
                                int64_t Hkv, int backward, void *qkv, void *q, void *k, void *v)
{
  int64_t n = backward ? B * Tn * (H + 2 * Hkv) * D : B * H * Tn * D;
  if (n == 0) return cudaSuccess;
  if (backward) {
    GAAW_CUDA_DISPATCH_FLOAT(dt, T,
                             qkv_heads_backward_kernel<<<GAAW_POINTWISE(n)>>>(n, H, Tn, D, Hkv, (const T *)q,
                                                                              (const T *)k, (const T *)v, (T *)qkv));
  } else {
    GAAW_CUDA_DISPATCH_FLOAT(dt, T,
                             qkv_heads_forward_kernel<<<GAAW_POINTWISE(n)>>>(n, H, Tn, D, Hkv, (const T *)qkv, (T *)q,
                                                                             (T *)k, (T *)v));
  }
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_bias_add(cudaStream_t s, gaaw_cuda_dtype dt, int64_t N, int64_t C, void *y, const void *b)
{
  if (N * C == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, bias_add_kernel<<<GAAW_POINTWISE(N * C)>>>(N, C, (T *)y, (const T *)b));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_add(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, const void *a, const void *b, void *y)
{
  if (n == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, add_kernel<<<GAAW_POINTWISE(n)>>>(n, (const T *)a, (const T *)b, (T *)y));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_axpy(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, float alpha, const void *x, void *y)
{
  if (n == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, axpy_kernel<<<GAAW_POINTWISE(n)>>>(n, alpha, (const T *)x, (T *)y));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_scale(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, void *x, float alpha)
{
  if (n == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_FLOAT(dt, T, scale_kernel<<<GAAW_POINTWISE(n)>>>(n, (T *)x, alpha));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_cast(cudaStream_t s, gaaw_cuda_dtype xt, gaaw_cuda_dtype yt, int64_t n, const void *x, void *y)
{
  if (n == 0) return cudaSuccess;
  GAAW_CUDA_DISPATCH_ANY(
      xt, X, GAAW_CUDA_DISPATCH_ANY(yt, Y, cast_kernel<<<GAAW_POINTWISE(n)>>>(n, (const X *)x, (Y *)y)));
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_fill_bits(cudaStream_t s, size_t elem_size, int64_t n, uint32_t bits, void *x)
{
  if (n == 0) return cudaSuccess;
  if (elem_size == 4)
    fill_kernel<<<GAAW_POINTWISE(n)>>>(n, bits, (uint32_t *)x);
  else if (elem_size == 2)
    fill_kernel<<<GAAW_POINTWISE(n)>>>(n, (uint16_t)bits, (uint16_t *)x);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_permute_0213(cudaStream_t s, size_t elem_size, int64_t A, int64_t B, int64_t C, int64_t D,
                                   const void *x, void *y)
{
  int64_t total = A * B * C * D;
  if (total == 0) return cudaSuccess;
  if (elem_size == 4)
    permute_0213_kernel<<<GAAW_POINTWISE(total)>>>(A, B, C, D, (const uint32_t *)x, (uint32_t *)y);
  else if (elem_size == 2)
    permute_0213_kernel<<<GAAW_POINTWISE(total)>>>(A, B, C, D, (const uint16_t *)x, (uint16_t *)y);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_check_finite(cudaStream_t s, gaaw_cuda_dtype dt, int64_t n, const void *x, int32_t *flag)
{
  if (n == 0) return cudaSuccess;
  if (dt == GAAW_CUDA_F32)
    check_finite_kernel<<<GAAW_POINTWISE(n)>>>(n, (const uint32_t *)x, (uint32_t)0x7f800000u, flag);
  else if (dt == GAAW_CUDA_BF16 || dt == GAAW_CUDA_F16)
    check_finite_kernel<<<GAAW_POINTWISE(n)>>>(n, (const uint16_t *)x,
                                               (uint16_t)(dt == GAAW_CUDA_BF16 ? 0x7f80u : 0x7c00u), flag);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t gaaw_cuda_adamw(cudaStream_t s, gaaw_cuda_dtype grad_dt, gaaw_cuda_dtype out_dt, int64_t n,
                            const void *grads, float *w, float *m, float *v, void *out,
                            const gaaw_cuda_adamw_consts *c)
{
  if (n == 0) return cudaSuccess;
  adamw_step step = {*c};
  /* Four elements per access: 16 bytes of f32, 8 bytes of a 16-bit type. */
  size_t gsz = grad_dt == GAAW_CUDA_F32 ? 16 : 8, osz = out_dt == GAAW_CUDA_F32 ? 16 : 8;
  bool vec = aligned(grads, gsz) && aligned(w, 16) && aligned(m, 16) && aligned(v, 16) && aligned(out, osz);
  unsigned blocks = blocks_for(vec ? (n + 3) / 4 : n, THREADS);
  GAAW_CUDA_DISPATCH_FLOAT(grad_dt, G, GAAW_CUDA_DISPATCH_FLOAT(out_dt, P,
    adamw_kernel<<<blocks, THREADS, 0, s>>>(n, (const G *)grads, w, m, v, (P *)out, step, vec)));
  return cudaGetLastError();
}

} /* extern "C" */
