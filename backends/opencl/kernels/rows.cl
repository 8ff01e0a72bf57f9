/* Row kernels of attention and the loss: one work-group of ROW_WG items per row. */

/* Causal softmax of (batch, T, T) scores, row r = (b, t) sees columns 0..t.
 * y may be x: every element is read before it is written by the same item. */
__kernel void causal_softmax_forward(float scale, TEN(x), TEN(y), long T)
{
  __local float scratch[ROW_WG];
  long r = get_group_id(0), t = r % T, row = r * T;
  int l = get_local_id(0);
  float mx = -INFINITY;
  for (long j = l; j <= t; j += ROW_WG) mx = fmax(mx, scale * LD(x, row + j));
  mx = wg_max(mx, scratch);
  float s = 0.0f;
  for (long j = l; j <= t; j += ROW_WG) s += exp(scale * LD(x, row + j) - mx);
  float inv = 1.0f / wg_sum(s, scratch);
  for (long j = l; j < T; j += ROW_WG) ST(y, row + j, j <= t ? exp(scale * LD(x, row + j) - mx) * inv : 0.0f);
}

/* dx (+)= scale y (dy - sum_j dy y); without accumulate dx may be dy and the
 * masked columns are zeroed. */
__kernel void causal_softmax_backward(float scale, TEN(y), TEN(dy), TEN(dx), long T, int accumulate)
{
  __local float scratch[ROW_WG];
  long r = get_group_id(0), t = r % T, row = r * T;
  int l = get_local_id(0);
  float dot = 0.0f;
  for (long j = l; j <= t; j += ROW_WG) dot += LD(dy, row + j) * LD(y, row + j);
  dot = wg_sum(dot, scratch);
  for (long j = l; j < T; j += ROW_WG) {
    float g = j <= t ? scale * LD(y, row + j) * (LD(dy, row + j) - dot) : 0.0f;
    if (accumulate) {
      if (j <= t) ST(dx, row + j, LD(dx, row + j) + g);
    } else {
      ST(dx, row + j, g);
    }
  }
}

/* Of row n of logits (N, V), by the group's items: the max, the sum of exp(l - m). */
float max_of_row(TEN(logits), long n, long V, __local float *scratch)
{
  float m = -INFINITY;
  for (long v = get_local_id(0); v < V; v += ROW_WG) m = fmax(m, LD(logits, n * V + v));
  return wg_max(m, scratch);
}

float sum_exp_of_row(TEN(logits), long n, long V, float m, __local float *scratch)
{
  float s = 0.0f;
  for (long v = get_local_id(0); v < V; v += ROW_WG) s += exp(LD(logits, n * V + v) - m);
  return wg_sum(s, scratch);
}

/* logits: (N, V)   max: (N) f32 */
__kernel void row_max(TEN(logits), TEN(rowmax), long V)
{
  __local float scratch[ROW_WG];
  float m = max_of_row(PASS(logits), get_group_id(0), V, scratch);
  if (get_local_id(0) == 0) F32(rowmax)[get_group_id(0)] = m;
}

__kernel void row_sum_exp(TEN(logits), TEN(rowmax), TEN(sumexp), long V)
{
  __local float scratch[ROW_WG];
  long n = get_group_id(0);
  float s = sum_exp_of_row(PASS(logits), n, V, F32(rowmax)[n], scratch);
  if (get_local_id(0) == 0) F32(sumexp)[n] = s;
}

/* The column of row n's target inside the slice, or -1 (outside, or ignored). */
long target_column(__global const int *targets, long n, long vocab_start, long V)
{
  if (targets[n] < 0) return -1;
  long col = (long)targets[n] - vocab_start;
  return col >= 0 && col < V ? col : -1;
}

/* One item per row. */
__kernel void target_logit(TEN(logits), TEN(targets), long vocab_start, TEN(target), long V, long N)
{
  long n = get_global_id(0);
  if (n >= N) return;
  long col = target_column(I32(targets), n, vocab_start, V);
  F32(target)[n] = col >= 0 ? LD(logits, n * V + col) : 0.0f;
}

/* Element (n, v)'s dlogits + dloss (softmax - onehot(target)). */
float gradient_at(TEN(logits), TEN(dlogits), long n, long v, long V, float m, float inv, long col, float dloss)
{
  float d = LD(dlogits, n * V + v) + dloss * exp(LD(logits, n * V + v) - m) * inv;
  return col == v ? d - dloss : d;
}

/* dlogits += dloss (softmax - onehot(target)); one item per element of (N, V). */
__kernel void cross_entropy_backward(TEN(logits), TEN(rowmax), TEN(sumexp), TEN(targets), long vocab_start,
                                     float dloss, TEN(dlogits), long V, long total)
{
  long i = get_global_id(0);
  if (i >= total) return;
  long n = i / V, v = i % V;
  if (I32(targets)[n] < 0) return; /* ignored row: no gradient */
  float inv = 1.0f / F32(sumexp)[n];
  long col = target_column(I32(targets), n, vocab_start, V);
  ST(dlogits, i, gradient_at(PASS(logits), PASS(dlogits), n, v, V, F32(rowmax)[n], inv, col, dloss));
}

/* The four above for row n in one group (backends/fused.h); has_grad 0: no dlogits. */
__kernel void cross_entropy_forward(TEN(logits), TEN(targets), long vocab_start, float dloss, TEN(rowmax),
                                    TEN(sumexp), TEN(target), TEN(dlogits), int has_grad, long V)
{
  __local float scratch[ROW_WG];
  long n = get_group_id(0);
  int l = get_local_id(0);
  float m = max_of_row(PASS(logits), n, V, scratch);
  float s = sum_exp_of_row(PASS(logits), n, V, m, scratch);
  long col = target_column(I32(targets), n, vocab_start, V);
  if (l == 0) {
    F32(rowmax)[n] = m;
    F32(sumexp)[n] = s;
    F32(target)[n] = col >= 0 ? LD(logits, n * V + col) : 0.0f;
  }
  if (!has_grad || I32(targets)[n] < 0) return;
  float inv = 1.0f / s;
  for (long v = l; v < V; v += ROW_WG)
    ST(dlogits, n * V + v, gradient_at(PASS(logits), PASS(dlogits), n, v, V, m, inv, col, dloss));
}
