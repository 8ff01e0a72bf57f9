/* Blocked causal attention (opencl_flash_attention.c): one work-group of ROW_WG
 * items per row, keys (or queries) taken ROW_WG at a time, one per item; no (T, T)
 * matrix. Item l owns the output columns d = l, l + ROW_WG, ... of its row, and sums
 * them over the blocks in order (bit-identical run to run). Tensors are f32 (the
 * host side stages 16-bit ones): q, k, v, out, dout, dq, dk, dv (BH, T, D);
 * lse, delta (BH, T). */

/* q_a . k_b over D */
float flash_dot(__global const float *a, __global const float *b, long D)
{
  float acc = 0.0f;
  for (long d = 0; d < D; d++) acc += a[d] * b[d];
  return acc;
}

/* Row r = (h, t): the online softmax over key blocks, out = softmax v, lse. */
__kernel void flash_attention_forward(TEN(q), TEN(k), TEN(v), TEN(out), TEN(lse), long T, long D, float scale)
{
  __local float scratch[ROW_WG], p[ROW_WG];
  long r = get_group_id(0), t = r % T, head = (r - t) * D;
  int l = get_local_id(0);
  __global const float *qr = F32(q) + r * D, *kh = F32(k) + head, *vh = F32(v) + head;
  __global float *orow = F32(out) + r * D;
  float m = -INFINITY, sum = 0.0f;
  for (long d = l; d < D; d += ROW_WG) orow[d] = 0.0f;
  for (long j0 = 0; j0 <= t; j0 += ROW_WG) {
    long j = j0 + l, n = min((long)ROW_WG, t - j0 + 1);
    float s = j <= t ? scale * flash_dot(qr, kh + j * D, D) : -INFINITY;
    float mnew = fmax(m, wg_max(s, scratch)), alpha = exp(m - mnew);
    float pj = j <= t ? exp(s - mnew) : 0.0f;
    p[l] = pj; /* every item has left the previous block's loop: wg_max waited for it */
    sum = sum * alpha + wg_sum(pj, scratch);
    m = mnew;
    for (long d = l; d < D; d += ROW_WG) {
      float acc = orow[d] * alpha;
      for (long c = 0; c < n; c++) acc += p[c] * vh[(j0 + c) * D + d];
      orow[d] = acc;
    }
  }
  float inv = 1.0f / sum;
  for (long d = l; d < D; d += ROW_WG) orow[d] *= inv;
  if (l == 0) F32(lse)[r] = m + log(sum);
}

/* Query row r = (h, t): delta = rowsum(dout * out), then dq += ds k over its keys. */
__kernel void flash_attention_backward_dq(TEN(dout), TEN(q), TEN(k), TEN(v), TEN(out), TEN(lse), TEN(delta),
                                          TEN(dq), long T, long D, float scale)
{
  __local float scratch[ROW_WG], ds[ROW_WG];
  long r = get_group_id(0), t = r % T, head = (r - t) * D;
  int l = get_local_id(0);
  __global const float *qr = F32(q) + r * D, *dor = F32(dout) + r * D, *orow = F32(out) + r * D;
  __global const float *kh = F32(k) + head, *vh = F32(v) + head;
  __global float *dqr = F32(dq) + r * D;
  float part = 0.0f;
  for (long d = l; d < D; d += ROW_WG) part += dor[d] * orow[d];
  float dlt = wg_sum(part, scratch), lr = F32(lse)[r];
  if (l == 0) F32(delta)[r] = dlt;
  for (long j0 = 0; j0 <= t; j0 += ROW_WG) {
    long j = j0 + l, n = min((long)ROW_WG, t - j0 + 1);
    float g = 0.0f;
    if (j <= t) {
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

/* Key row r = (h, j): dv += p^T dout and dk += ds^T q over the queries i >= j
 * (delta from flash_attention_backward_dq, run first). */
__kernel void flash_attention_backward_dkv(TEN(dout), TEN(q), TEN(k), TEN(v), TEN(lse), TEN(delta), TEN(dk),
                                           TEN(dv), long T, long D, float scale)
{
  __local float p[ROW_WG], ds[ROW_WG];
  long r = get_group_id(0), j = r % T, h = r - j, head = h * D;
  int l = get_local_id(0);
  __global const float *kr = F32(k) + r * D, *vr = F32(v) + r * D, *qh = F32(q) + head, *doh = F32(dout) + head;
  __global const float *lh = F32(lse) + h, *dh = F32(delta) + h;
  __global float *dkr = F32(dk) + r * D, *dvr = F32(dv) + r * D;
  for (long i0 = j; i0 < T; i0 += ROW_WG) {
    long i = i0 + l, n = min((long)ROW_WG, T - i0);
    float pi = 0.0f, g = 0.0f;
    if (i < T) {
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
