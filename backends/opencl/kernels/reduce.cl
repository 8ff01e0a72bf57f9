/* Reductions with a fixed order: column sums over rows (one item per column, rows
 * in order), the sum of squares (fixed chunks, tree inside a chunk, chunks in
 * order), and the finite check. */

/* Parameter gradients summed over the N rows of dy (N, C), item c for column c:
 *   mode 0 (layernorm): dw += sum dy xhat, db += sum dy   (xhat from mean, rstd)
 *   mode 1 (rmsnorm):   dw += sum dy x rstd
 *   mode 2 (bias):      db += sum dy
 * Tensors a mode does not use may be any valid buffer. */
__kernel void column_sums(int mode, TEN(dy), TEN(x), TEN(mean), TEN(rstd), TEN(dw), TEN(db), long N, long C)
{
  long c = get_global_id(0);
  if (c >= C) return;
  float sw = 0.0f, sb = 0.0f;
  for (long n = 0; n < N; n++) {
    float d = LD(dy, n * C + c);
    if (mode == 0) {
      sw += d * (LD(x, n * C + c) - F32(mean)[n]) * F32(rstd)[n];
      sb += d;
    } else if (mode == 1) {
      sw += d * LD(x, n * C + c) * F32(rstd)[n];
    } else {
      sb += d;
    }
  }
  if (mode != 2) ST(dw, c, LD(dw, c) + sw);
  if (mode != 1) ST(db, c, LD(db, c) + sb);
}

/* partial[g] = sum of x^2 over chunk g (SUMSQ_CHUNK elements) by one group. */
__kernel void sum_squares_partial(TEN(x), __global float *partial, long n)
{
  __local float scratch[ROW_WG];
  long begin = get_group_id(0) * SUMSQ_CHUNK, end = min(begin + SUMSQ_CHUNK, n);
  float s = 0.0f;
  for (long i = begin + get_local_id(0); i < end; i += ROW_WG) {
    float v = LD(x, i);
    s += v * v;
  }
  s = wg_sum(s, scratch);
  if (get_local_id(0) == 0) partial[get_group_id(0)] = s;
}

/* out[0] = the chunks' totals added in order (compensated: many chunks). One item. */
__kernel void sum_squares_final(__global const float *partial, long chunks, TEN(out))
{
  if (get_global_id(0) != 0) return;
  float s = 0.0f, comp = 0.0f;
  for (long k = 0; k < chunks; k++) {
    float y = partial[k] - comp, t = s + y;
    comp = (t - s) - y;
    s = t;
  }
  F32(out)[0] = s;
}

/* flag[0] = 1 when an element has the all-ones exponent (inf or nan); every item
 * that finds one writes the same value, so the result does not depend on order. */
__kernel void check_finite(TEN(x), TEN(flag), long n)
{
  long i = get_global_id(0);
  if (i >= n) return;
  int bad;
  if (x_t == DT_F32)
    bad = (((__global const uint *)BASE(x))[i] & 0x7f800000u) == 0x7f800000u;
  else {
    ushort mask = x_t == DT_BF16 ? 0x7f80u : 0x7c00u;
    bad = (((__global const ushort *)BASE(x))[i] & mask) == mask;
  }
  if (bad) I32(flag)[0] = 1;
}
