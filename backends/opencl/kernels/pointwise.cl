/* Elementwise kernels: one work-item per element (EW_WG per group, guarded). */

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBE 0.044715f

/* The elementwise activations; ACT_* are gaaw_activation_t's values, given as -D
 * options (opencl_program.c). */
float act_value(int act, float v)
{
  switch (act) {
  case ACT_GELU: return 0.5f * v * (1.0f + tanh(GELU_SCALE * (v + GELU_CUBE * v * v * v)));
  case ACT_RELU: return v > 0.0f ? v : 0.0f;
  case ACT_TANH: return tanh(v);
  case ACT_SILU: return v / (1.0f + exp(-v));
  default: return v;
  }
}

/* GELU: d/dx [0.5 x (1 + tanh u)], u = s (x + c x^3);  SiLU: sig (1 + x (1 - sig)) */
float act_slope(int act, float v)
{
  switch (act) {
  case ACT_GELU: {
    float t = tanh(GELU_SCALE * (v + GELU_CUBE * v * v * v));
    float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * v * v);
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
  }
  case ACT_RELU: return v > 0.0f ? 1.0f : 0.0f;
  case ACT_TANH: {
    float t = tanh(v);
    return 1.0f - t * t;
  }
  case ACT_SILU: {
    float sig = 1.0f / (1.0f + exp(-v));
    return sig * (1.0f + v * (1.0f - sig));
  }
  default: return 1.0f;
  }
}

__kernel void activation_forward(TEN(x), TEN(y), int act, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(y, i, act_value(act, LD(x, i)));
}

/* dx += dy act'(x) */
__kernel void activation_backward(TEN(dy), TEN(x), TEN(dx), int act, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(dx, i, LD(dx, i) + LD(dy, i) * act_slope(act, LD(x, i)));
}

/* x: (N, 2H) = [a | g]   y: (N, H) = silu(a) g;  i runs over (N, H) */
__kernel void swiglu_forward(TEN(x), TEN(y), long H, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  long row = i / H, h = i % H;
  float a = LD(x, row * 2 * H + h), g = LD(x, row * 2 * H + H + h);
  ST(y, i, a / (1.0f + exp(-a)) * g);
}

/* da += dy g sig(a) (1 + a (1 - sig(a))),  dg += dy silu(a) */
__kernel void swiglu_backward(TEN(dy), TEN(x), TEN(dx), long H, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  long row = i / H, h = i % H, ia = row * 2 * H + h, ig = ia + H;
  float a = LD(x, ia), g = LD(x, ig), d = LD(dy, i);
  float sig = 1.0f / (1.0f + exp(-a));
  ST(dx, ia, LD(dx, ia) + d * g * sig * (1.0f + a * (1.0f - sig)));
  ST(dx, ig, LD(dx, ig) + d * a * sig);
}

/* Rotary position embedding on x, y: (B*T, NH, D), table: (T, D) = (cos | sin); one
 * item per pair (i, i + D/2) of a head; heads from `heads` on are copied unless y is
 * x (copy 0). sign -1: the inverse rotation. */
__kernel void rope(TEN(x), TEN(table), TEN(y), long T, long NH, long D, long heads, float sign, int copy, long n)
{
  long o = get_global_id(0);
  if (o >= n) return;
  long hd = D / 2, i = o % hd, r = o / hd, h = r % NH, bt = r / NH;
  long ia = (bt * NH + h) * D + i, ib = ia + hd;
  float xa = LD(x, ia), xb = LD(x, ib);
  if (h < heads) {
    long t = bt % T;
    float c = LD(table, t * D + i), s = sign * LD(table, t * D + hd + i);
    ST(y, ia, xa * c - xb * s);
    ST(y, ib, xb * c + xa * s);
  } else if (copy) {
    ST(y, ia, xa);
    ST(y, ib, xb);
  }
}

/* dx = dy gelu'(x), whatever dx held: the bits of gaaw_fill(dx, 0) then
 * activation_backward (0 + the product, rounded to dx's dtype) */
__kernel void gelu_backward_set(TEN(dy), TEN(x), TEN(dx), long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(dx, i, 0.0f + LD(dy, i) * act_slope(ACT_GELU, LD(x, i)));
}

/* y: (N, C) += b: (C) */
__kernel void bias_add(TEN(y), TEN(b), long C, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(y, i, LD(y, i) + LD(b, i % C));
}

/* u: (N, F) += b: (F), then a = gelu(u) from the stored (rounded) u */
__kernel void bias_gelu_forward(TEN(u), TEN(b), TEN(a), long F, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(u, i, LD(u, i) + LD(b, i % F));
  ST(a, i, act_value(ACT_GELU, LD(u, i)));
}

/* x + (y + bias[c]) with y + bias rounded to y's dtype, as the unfused bias_add
 * stores it (has_bias 0: x + y). */
float add_bias_at(TEN(x), TEN(y), TEN(bias), int has_bias, long i, long c)
{
  float v = LD(y, i);
  if (has_bias) v = gaaw_round(v + LD(bias, c), y_t);
  return LD(x, i) + v;
}

/* out: (N, C) = x + (y + bias: (C)); out may be x or y */
__kernel void bias_residual_add(TEN(x), TEN(y), TEN(bias), TEN(out), long C, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(out, i, add_bias_at(PASS(x), PASS(y), PASS(bias), 1, i, i % C));
}

/* y = a + b (y may be a or b) */
__kernel void add(TEN(a), TEN(b), TEN(y), long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(y, i, LD(a, i) + LD(b, i));
}

/* y += alpha x */
__kernel void axpy(float alpha, TEN(x), TEN(y), long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(y, i, LD(y, i) + alpha * LD(x, i));
}

/* x *= alpha */
__kernel void scale(TEN(x), float alpha, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(x, i, LD(x, i) * alpha);
}

/* y = x in y's dtype (any two dtypes, i32 included). */
__kernel void cast(TEN(x), TEN(y), long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  ST(y, i, LD(x, i));
}

/* AdamW (include/gaaw/kernels.h): on master when has_master (params = its cast),
 * on f32 params otherwise. bc1, bc2: the bias corrections 1 - beta^step. */
__kernel void adamw_update(TEN(params), TEN(grads), TEN(master), TEN(m), TEN(v), int has_master, float b1,
                           float b2, float lr, float eps, float wd, float gs, float bc1, float bc2, long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  float g = LD(grads, i) * gs;
  float mi = b1 * F32(m)[i] + (1.0f - b1) * g;
  float vi = b2 * F32(v)[i] + (1.0f - b2) * g * g;
  float p = has_master ? F32(master)[i] : F32(params)[i];
  p = p - lr * (mi / bc1 / (sqrt(vi / bc2) + eps) + wd * p);
  F32(m)[i] = mi;
  F32(v)[i] = vi;
  if (has_master) F32(master)[i] = p;
  ST(params, i, p);
}

/* Regression losses of d = pred - target, weighted (has_w 0: weights unused, all 1):
 * loss = w l(d), grad = w l'(d); kind: 0 MSE, 1 L1, 2 Huber (gaaw_loss_t). */
__kernel void regression_loss(TEN(pred), TEN(target), TEN(w), int has_w, int kind, float delta, TEN(loss), TEN(grad),
                              long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  float d = LD(pred, i) - LD(target, i), a = fabs(d), sign = d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f;
  float l, g;
  if (kind == 0) {
    l = d * d;
    g = 2.0f * d;
  } else if (kind == 1) {
    l = a;
    g = sign;
  } else if (a < delta) {
    l = 0.5f * d * d;
    g = d;
  } else {
    l = delta * (a - 0.5f * delta);
    g = delta * sign;
  }
  float wi = has_w ? LD(w, i) : 1.0f;
  ST(loss, i, wi * l);
  ST(grad, i, wi * g);
}
