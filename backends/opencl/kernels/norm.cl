/* LayerNorm and RMSNorm: one work-group of ROW_WG items per row (statistics by
 * wg_sum), parameter gradients by column_sums (reduce.cl). */

/* Row n of x, y: (N, C) by the group's items; w, b: (C)   mean, rstd: (N) f32. */
void layernorm_row(TEN(x), TEN(w), TEN(b), float eps, TEN(y), TEN(mean), TEN(rstd), long n, long C,
                   __local float *scratch)
{
  long row = n * C;
  int l = get_local_id(0);
  float s = 0.0f;
  for (long c = l; c < C; c += ROW_WG) s += LD(x, row + c);
  float m = wg_sum(s, scratch) / (float)C;
  float var = 0.0f; /* two passes: no cancellation */
  for (long c = l; c < C; c += ROW_WG) {
    float d = LD(x, row + c) - m;
    var += d * d;
  }
  float rs = 1.0f / sqrt(wg_sum(var, scratch) / (float)C + eps);
  for (long c = l; c < C; c += ROW_WG) ST(y, row + c, (LD(x, row + c) - m) * rs * LD(w, c) + LD(b, c));
  if (l == 0) {
    F32(mean)[n] = m;
    F32(rstd)[n] = rs;
  }
}

/* x, y: (N, C)   w, b: (C)   mean, rstd: (N) f32; group n normalises row n. */
__kernel void layernorm_forward(TEN(x), TEN(w), TEN(b), float eps, TEN(y), TEN(mean), TEN(rstd), long C)
{
  __local float scratch[ROW_WG];
  layernorm_row(PASS(x), PASS(w), PASS(b), eps, PASS(y), PASS(mean), PASS(rstd), get_group_id(0), C, scratch);
}

/* x2 = x + (y + bias) (has_bias 0: x + y), then layernorm_row of x2; each item reads
 * back the x2 elements it stored (rounded to x2's dtype), as the unfused sequence. */
__kernel void add_layernorm_forward(TEN(x), TEN(y), TEN(bias), int has_bias, TEN(w), TEN(b), float eps, TEN(x2),
                                    TEN(h), TEN(mean), TEN(rstd), long C)
{
  __local float scratch[ROW_WG];
  long n = get_group_id(0), row = n * C;
  for (long c = get_local_id(0); c < C; c += ROW_WG)
    ST(x2, row + c, add_bias_at(PASS(x), PASS(y), PASS(bias), has_bias, row + c, c));
  layernorm_row(PASS(x2), PASS(w), PASS(b), eps, PASS(h), PASS(mean), PASS(rstd), n, C, scratch);
}

/* dx += (dy w - mean(dy w) - xhat mean(dy w xhat)) rstd */
__kernel void layernorm_backward(TEN(dy), TEN(x), TEN(w), TEN(mean), TEN(rstd), TEN(dx), long C)
{
  __local float scratch[ROW_WG];
  long n = get_group_id(0), row = n * C;
  int l = get_local_id(0);
  float m = F32(mean)[n], rs = F32(rstd)[n], dmean = 0.0f, dproj = 0.0f;
  for (long c = l; c < C; c += ROW_WG) {
    float dn = LD(dy, row + c) * LD(w, c);
    dmean += dn;
    dproj += dn * (LD(x, row + c) - m) * rs;
  }
  dmean = wg_sum(dmean, scratch) / (float)C;
  dproj = wg_sum(dproj, scratch) / (float)C;
  for (long c = l; c < C; c += ROW_WG) {
    float xhat = (LD(x, row + c) - m) * rs;
    ST(dx, row + c, LD(dx, row + c) + (LD(dy, row + c) * LD(w, c) - dmean - xhat * dproj) * rs);
  }
}

/* y = x rstd w, rstd = 1 / sqrt(mean(x^2) + eps) */
__kernel void rmsnorm_forward(TEN(x), TEN(w), float eps, TEN(y), TEN(rstd), long C)
{
  __local float scratch[ROW_WG];
  long row = get_group_id(0) * C;
  int l = get_local_id(0);
  float ss = 0.0f;
  for (long c = l; c < C; c += ROW_WG) {
    float v = LD(x, row + c);
    ss += v * v;
  }
  float rs = 1.0f / sqrt(wg_sum(ss, scratch) / (float)C + eps);
  for (long c = l; c < C; c += ROW_WG) ST(y, row + c, LD(x, row + c) * rs * LD(w, c));
  if (l == 0) F32(rstd)[get_group_id(0)] = rs;
}

/* dx += rs (dy w - x rs^2 mean(dy w x)) */
__kernel void rmsnorm_backward(TEN(dy), TEN(x), TEN(w), TEN(rstd), TEN(dx), long C)
{
  __local float scratch[ROW_WG];
  long n = get_group_id(0), row = n * C;
  int l = get_local_id(0);
  float rs = F32(rstd)[n], dot = 0.0f;
  for (long c = l; c < C; c += ROW_WG) dot += LD(dy, row + c) * LD(w, c) * LD(x, row + c);
  float coef = rs * rs * wg_sum(dot, scratch) / (float)C;
  for (long c = l; c < C; c += ROW_WG)
    ST(dx, row + c, LD(dx, row + c) + rs * (LD(dy, row + c) * LD(w, c) - LD(x, row + c) * coef));
}
