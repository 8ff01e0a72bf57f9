/* Blocked attention (opencl_flash_attention.c): one work-group of ROW_WG items per
 * row, keys (or queries) taken ROW_WG at a time, one per item; no (Tq, Tk) matrix.
 * Item l owns the output columns d = l, l + ROW_WG, ... of its row, and sums them
 * over the blocks in order (bit-identical run to run). Query row t is at position
 * q_start + t, key row j at k_start + j; causal: a row sees the keys at its position
 * and before. Tensors are f32 (the host side stages 16-bit ones): q, out, dout, dq
 * (BH, Tq, D); k, v, dk, dv (BH, Tk, D); lse, delta (BH, Tq). */

/* q_a . k_b over D */
float flash_dot(__global const float *a, __global const float *b, long D)
{
  float acc = 0.0f;
  for (long d = 0; d < D; d++) acc += a[d] * b[d];
  return acc;
}

/* How many keys (0..Tk, from the first) query row t sees. */
long flash_seen(long t, long Tk, long q_start, long k_start, int causal)
{
  if (!causal) return Tk;
  long n = q_start + t - k_start + 1;
  return n < 0 ? 0 : n < Tk ? n : Tk;
}

/* Row r = (h, t): the online softmax over the key blocks it sees, out = softmax v,
 * lse; a row that sees no key gets out 0 and lse -inf. */
__kernel void attention_block_forward(TEN(q), TEN(k), TEN(v), TEN(out), TEN(lse), long Tq, long Tk, long D,
                                      float scale, long q_start, long k_start, int causal)
{
  __local float scratch[ROW_WG], p[ROW_WG];
  long r = get_group_id(0), t = r % Tq, head = (r - t) / Tq * Tk * D;
  long seen = flash_seen(t, Tk, q_start, k_start, causal);
  int l = get_local_id(0);
  __global const float *qr = F32(q) + r * D, *kh = F32(k) + head, *vh = F32(v) + head;
  __global float *orow = F32(out) + r * D;
  float m = -INFINITY, sum = 0.0f;
  for (long d = l; d < D; d += ROW_WG) orow[d] = 0.0f;
  for (long j0 = 0; j0 < seen; j0 += ROW_WG) {
    long j = j0 + l, n = min((long)ROW_WG, seen - j0);
    float s = j < seen ? scale * flash_dot(qr, kh + j * D, D) : -INFINITY;
    float mnew = fmax(m, wg_max(s, scratch)), alpha = exp(m - mnew);
    float pj = j < seen ? exp(s - mnew) : 0.0f;
    p[l] = pj; /* every item has left the previous block's loop: wg_max waited for it */
    sum = sum * alpha + wg_sum(pj, scratch);
    m = mnew;
    for (long d = l; d < D; d += ROW_WG) {
      float acc = orow[d] * alpha;
      for (long c = 0; c < n; c++) acc += p[c] * vh[(j0 + c) * D + d];
      orow[d] = acc;
    }
  }
  if (seen == 0) {
    if (l == 0) F32(lse)[r] = -INFINITY;
    return;
  }
  float inv = 1.0f / sum;
  for (long d = l; d < D; d += ROW_WG) orow[d] *= inv;
  if (l == 0) F32(lse)[r] = m + log(sum);
}

/* out, lse <- the merge of (out, lse) and (part_out, part_lse), one row per item. */
__kernel void attention_merge(TEN(out), TEN(lse), TEN(part_out), TEN(part_lse), long rows, long D)
{
  long r = get_global_id(0);
  if (r >= rows) return;
  float a = F32(lse)[r], b = F32(part_lse)[r], m = fmax(a, b);
  if (m == -INFINITY) return; /* neither side has seen a key */
  float wa = exp(a - m), wb = exp(b - m), inv = 1.0f / (wa + wb);
  __global float *o = F32(out) + r * D;
  __global const float *po = F32(part_out) + r * D;
  for (long d = 0; d < D; d++) o[d] = (wa * o[d] + wb * po[d]) * inv;
  F32(lse)[r] = m + log(wa + wb);
}

/* Query row r = (h, t): delta = rowsum(dout * out), then dq += ds k over the keys it
 * sees (out and lse: the row's over every block, after the last merge). */
__kernel void attention_block_backward_dq(TEN(dout), TEN(q), TEN(k), TEN(v), TEN(out), TEN(lse), TEN(delta),
                                          TEN(dq), long Tq, long Tk, long D, float scale, long q_start, long k_start,
                                          int causal)
{
  __local float scratch[ROW_WG], ds[ROW_WG];
  long r = get_group_id(0), t = r % Tq, head = (r - t) / Tq * Tk * D;
  long seen = flash_seen(t, Tk, q_start, k_start, causal);
  int l = get_local_id(0);
  __global const float *qr = F32(q) + r * D, *dor = F32(dout) + r * D, *orow = F32(out) + r * D;
  __global const float *kh = F32(k) + head, *vh = F32(v) + head;
  __global float *dqr = F32(dq) + r * D;
  float part = 0.0f;
  for (long d = l; d < D; d += ROW_WG) part += dor[d] * orow[d];
  float dlt = wg_sum(part, scratch), lr = F32(lse)[r];
  if (l == 0) F32(delta)[r] = dlt;
  for (long j0 = 0; j0 < seen; j0 += ROW_WG) {
    long j = j0 + l, n = min((long)ROW_WG, seen - j0);
    float g = 0.0f;
    if (j < seen) {
      float pj = exp(scale * flash_dot(qr, kh + j * D, D) - lr);
      g = pj * (flash_dot(dor, vh + j * D, D) - dlt) * scale;
    }
    ds[l] = g;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long d = l; d < D; d += ROW_WG) {
      float acc = dqr[d];
      for (long c = 0; c < n; c++) acc += ds[c] * kh[(j0 + c) * D + d];
      dqr[d] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* Key row r = (h, j): dv += p^T dout and dk += ds^T q over the query rows that see it
 * (delta from attention_block_backward_dq, run first). */
__kernel void attention_block_backward_dkv(TEN(dout), TEN(q), TEN(k), TEN(v), TEN(lse), TEN(delta), TEN(dk),
                                           TEN(dv), long Tq, long Tk, long D, float scale, long q_start,
                                           long k_start, int causal)
{
  __local float p[ROW_WG], ds[ROW_WG];
  long r = get_group_id(0), j = r % Tk, h = (r - j) / Tk, qhead = h * Tq * D;
  long first = causal ? k_start + j - q_start : 0; /* the first query row that sees key j */
  if (first < 0) first = 0;
  int l = get_local_id(0);
  __global const float *kr = F32(k) + r * D, *vr = F32(v) + r * D, *qh = F32(q) + qhead, *doh = F32(dout) + qhead;
  __global const float *lh = F32(lse) + h * Tq, *dh = F32(delta) + h * Tq;
  __global float *dkr = F32(dk) + r * D, *dvr = F32(dv) + r * D;
  for (long i0 = first; i0 < Tq; i0 += ROW_WG) {
    long i = i0 + l, n = min((long)ROW_WG, Tq - i0);
    float pi = 0.0f, g = 0.0f;
    if (i < Tq) {
      pi = exp(scale * flash_dot(qh + i * D, kr, D) - lh[i]);
      g = pi * (flash_dot(doh + i * D, vr, D) - dh[i]) * scale;
    }
    p[l] = pi;
    ds[l] = g;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long d = l; d < D; d += ROW_WG) {
      float av = dvr[d], ak = dkr[d];
      for (long c = 0; c < n; c++) {
        av += p[c] * doh[(i0 + c) * D + d];
        ak += ds[c] * qh[(i0 + c) * D + d];
      }
      dvr[d] = av;
      dkr[d] = ak;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}
