/* Layout and lookup kernels: moving elements without arithmetic, and embeddings. */

/* y[a][c][b][:] = x[a][b][c][:] in 16-bit units (any dtype: D2 = row bytes / 2).
 * One item per unit of y (A, C, B, D2). */
__kernel void permute_0213(__global const ushort *x, ulong xo, __global ushort *y, ulong yo, long B, long C,
                           long D2, long total)
{
  long o = get_global_id(0);
  if (o >= total) return;
  long d = o % D2, r = o / D2, b = r % B;
  r /= B;
  long c = r % C, a = r / C;
  y[yo + o] = x[xo + ((a * B + b) * C + c) * D2 + d];
}

/* y[n] = table[tokens[n] - vocab_start], zeros outside the slice; one item per (n, c). */
__kernel void embedding_forward(TEN(tokens), TEN(table), long vocab_start, TEN(y), long V, long C, long total)
{
  long i = get_global_id(0);
  if (i >= total) return;
  long n = i / C, c = i % C, row = (long)I32(tokens)[n] - vocab_start;
  ST(y, i, row >= 0 && row < V ? LD(table, row * C + c) : 0.0f);
}

/* dtable[tokens[n] - vocab_start] += dy[n] over n in order, item c for column c:
 * repeated tokens sum in a fixed order with no atomics. dtable is f32 (the host
 * side stages 16-bit tables, so each element is rounded once). */
__kernel void embedding_backward(TEN(tokens), TEN(dy), long vocab_start, TEN(dtable), long N, long V, long C)
{
  long c = get_global_id(0);
  if (c >= C) return;
  for (long n = 0; n < N; n++) {
    long row = (long)I32(tokens)[n] - vocab_start;
    if (row >= 0 && row < V) F32(dtable)[row * C + c] += LD(dy, n * C + c);
  }
}

/* Grouped-query attention's heads, forward: q, k, v (B, H, T, D) from qkv
 * (B, T, H + 2 Hkv, D), key/value head j serving query heads j g .. j g + g - 1;
 * one item per element of q (and the same element of k and v). */
__kernel void qkv_heads_forward(TEN(qkv), TEN(q), TEN(k), TEN(v), long H, long T, long D, long Hkv, long n)
{
  long o = get_global_id(0);
  if (o >= n) return;
  long d = o % D, r = o / D, t = r % T;
  r /= T;
  long h = r % H, b = r / H, NH = H + 2 * Hkv, j = h / (H / Hkv), row = (b * T + t) * NH;
  ST(q, o, LD(qkv, (row + h) * D + d));
  ST(k, o, LD(qkv, (row + H + j) * D + d));
  ST(v, o, LD(qkv, (row + H + Hkv + j) * D + d));
}

/* Backward: one item per element of dqkv; a key or value head's gradient is the sum
 * of its g query heads' (the first, then + each next, in f32). */
__kernel void qkv_heads_backward(TEN(dq), TEN(dk), TEN(dv), TEN(dqkv), long H, long T, long D, long Hkv, long n)
{
  long o = get_global_id(0);
  if (o >= n) return;
  long NH = H + 2 * Hkv, g = H / Hkv, d = o % D, r = o / D, h = r % NH, bt = r / NH, t = bt % T, b = bt / T;
  if (h < H) {
    ST(dqkv, o, LD(dq, ((b * H + h) * T + t) * D + d));
    return;
  }
  long j = h < H + Hkv ? h - H : h - H - Hkv, first = j * g;
  float sum = h < H + Hkv ? LD(dk, ((b * H + first) * T + t) * D + d) : LD(dv, ((b * H + first) * T + t) * D + d);
  for (long s = first + 1; s < first + g; s++)
    sum += h < H + Hkv ? LD(dk, ((b * H + s) * T + t) * D + d) : LD(dv, ((b * H + s) * T + t) * D + d);
  ST(dqkv, o, sum);
}
