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

/* logits: (N, V)   max: (N) f32 */
__kernel void row_max(TEN(logits), TEN(rowmax), long V)
{
  __local float scratch[ROW_WG];
  long n = get_group_id(0), row = n * V;
  int l = get_local_id(0);
  float m = -INFINITY;
  for (long v = l; v < V; v += ROW_WG) m = fmax(m, LD(logits, row + v));
  m = wg_max(m, scratch);
  if (l == 0) F32(rowmax)[n] = m;
}

__kernel void row_sum_exp(TEN(logits), TEN(rowmax), TEN(sumexp), long V)
{
  __local float scratch[ROW_WG];
  long n = get_group_id(0), row = n * V;
  int l = get_local_id(0);
  float m = F32(rowmax)[n], s = 0.0f;
  for (long v = l; v < V; v += ROW_WG) s += exp(LD(logits, row + v) - m);
  s = wg_sum(s, scratch);
  if (l == 0) F32(sumexp)[n] = s;
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

/* dlogits += dloss (softmax - onehot(target)); one item per element of (N, V). */
__kernel void cross_entropy_backward(TEN(logits), TEN(rowmax), TEN(sumexp), TEN(targets), long vocab_start,
                                     float dloss, TEN(dlogits), long V, long total)
{
  long i = get_global_id(0);
  if (i >= total) return;
  long n = i / V, v = i % V;
  if (I32(targets)[n] < 0) return; /* ignored row: no gradient */
  float inv = 1.0f / F32(sumexp)[n];
  float d = LD(dlogits, i) + dloss * exp(LD(logits, i) - F32(rowmax)[n]) * inv;
  if (target_column(I32(targets), n, vocab_start, V) == v) d -= dloss;
  ST(dlogits, i, d);
}
