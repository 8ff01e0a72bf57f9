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
