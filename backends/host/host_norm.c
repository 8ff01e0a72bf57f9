/* LayerNorm and RMSNorm over the last dimension, forward and backward, and the
 * residual add fused with the layernorm after it (backends/fused.h).
 * Row statistics are summed in f32 (two passes for the variance, so no cancellation);
 * dw and db are summed over rows in fixed chunks (host_sum_chunks), so they are
 * bit-identical for any thread count. */
#include <math.h>
#include <string.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"

/* ---------------------------------------------------------------- f32 cores */

/* One row: xr, yr: (C)   w, b: (C); its mean and rstd. Sums in the lanes' order
 * (host_math.h), so every vector width gives the same bits. */
HOST_VECTOR_CLONES static void layernorm_row(int64_t C, const float *xr, const float *w, const float *b, float eps,
                                             float *yr, float *mean, float *rstd)
{
  float m = host_lanes_sum(C, xr) / (float)C, part[HOST_SUM_LANES] = {0};
  int64_t full = C / HOST_SUM_LANES * HOST_SUM_LANES;
  for (int64_t c0 = 0; c0 < full; c0 += HOST_SUM_LANES)
#pragma omp simd
    for (int l = 0; l < HOST_SUM_LANES; l++) part[l] += (xr[c0 + l] - m) * (xr[c0 + l] - m);
  for (int64_t c = full; c < C; c++) part[c - full] += (xr[c] - m) * (xr[c] - m);
  float rs = 1.0f / sqrtf(host_lanes_total(part) / (float)C + eps);
#pragma omp simd
  for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - m) * rs * w[c] + b[c];
  *mean = m;
  *rstd = rs;
}

/* One row of layernorm's backward: dxr += ..; kdw += dy xhat, kdb += dy (the chunk's
 * partial sums). */
HOST_VECTOR_CLONES static void layernorm_backward_row(int64_t C, const float *dyr, const float *xr, const float *w,
                                                      float m, float rs, float *dxr, float *kdw, float *kdb)
{
  float pmean[HOST_SUM_LANES] = {0}, pproj[HOST_SUM_LANES] = {0};
  int64_t full = C / HOST_SUM_LANES * HOST_SUM_LANES;
  for (int64_t c0 = 0; c0 < full; c0 += HOST_SUM_LANES)
#pragma omp simd
    for (int l = 0; l < HOST_SUM_LANES; l++) {
      float dn = dyr[c0 + l] * w[c0 + l];
      pmean[l] += dn;
      pproj[l] += dn * (xr[c0 + l] - m) * rs;
    }
  for (int64_t c = full; c < C; c++) {
    float dn = dyr[c] * w[c];
    pmean[c - full] += dn;
    pproj[c - full] += dn * (xr[c] - m) * rs;
  }
  float dmean = host_lanes_total(pmean) / (float)C, dproj = host_lanes_total(pproj) / (float)C;
#pragma omp simd
  for (int64_t c = 0; c < C; c++) {
    float xhat = (xr[c] - m) * rs;
    dxr[c] += (dyr[c] * w[c] - dmean - xhat * dproj) * rs;
    kdw[c] += dyr[c] * xhat;
    kdb[c] += dyr[c];
  }
}

/* x, y: (N, C)   w, b: (C)   mean, rstd: (N) */
static void layernorm_forward_f32(int64_t N, int64_t C, const float *x, const float *w, const float *b, float eps,
                                  float *y, float *mean, float *rstd)
{
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) layernorm_row(C, x + n * C, w, b, eps, y + n * C, mean + n, rstd + n);
}

/* x2 = x + (y + bias) (bias NULL: x + y), then layernorm_row of x2, row by row.
 * x, y, x2, h: (N, C)   bias, w, b: (C)   mean, rstd: (N) */
static void add_layernorm_forward_f32(int64_t N, int64_t C, const float *x, const float *y, const float *bias,
                                      const float *w, const float *b, float eps, float *x2, float *h, float *mean,
                                      float *rstd, gaaw_dtype_t dtype)
{
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float *x2r = x2 + n * C;
    host_add_bias_row(C, x + n * C, y + n * C, bias, x2r, dtype);
    layernorm_row(C, x2r, w, b, eps, h + n * C, mean + n, rstd + n);
  }
}

/* dx += ..., dw += sum_n dy xhat, db += sum_n dy. */
static void layernorm_backward_f32(int64_t N, int64_t C, const float *dy, const float *x, const float *w,
                                   const float *mean, const float *rstd, float *dx, float *dw, float *db,
                                   float *partial /* 2 * chunks * C */)
{
  int64_t chunks = (N + HOST_CHUNK_ROWS - 1) / HOST_CHUNK_ROWS;
  float *pdw = partial, *pdb = partial + chunks * C;
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < chunks; k++) {
    float *kdw = pdw + k * C, *kdb = pdb + k * C;
    memset(kdw, 0, (size_t)C * sizeof(float));
    memset(kdb, 0, (size_t)C * sizeof(float));
    int64_t end = (k + 1) * HOST_CHUNK_ROWS < N ? (k + 1) * HOST_CHUNK_ROWS : N;
    for (int64_t n = k * HOST_CHUNK_ROWS; n < end; n++)
      layernorm_backward_row(C, dy + n * C, x + n * C, w, mean[n], rstd[n], dx + n * C, kdw, kdb);
  }
  host_sum_chunks(pdw, chunks, C, dw, 1);
  host_sum_chunks(pdb, chunks, C, db, 1);
}

/* x, y: (N, C)   w: (C)   rstd: (N) */
static void rmsnorm_forward_f32(int64_t N, int64_t C, const float *x, const float *w, float eps, float *y,
                                float *rstd)
{
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float *xr = x + n * C;
    float *yr = y + n * C, ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; c++) ss += xr[c] * xr[c];
    float rs = 1.0f / sqrtf(ss / (float)C + eps);
    for (int64_t c = 0; c < C; c++) yr[c] = xr[c] * rs * w[c];
    rstd[n] = rs;
  }
}

/* dx += rs (dy w - x rs^2 mean(dy w x)), dw += sum_n dy x rs. */
static void rmsnorm_backward_f32(int64_t N, int64_t C, const float *dy, const float *x, const float *w,
                                 const float *rstd, float *dx, float *dw, float *partial /* chunks * C */)
{
  int64_t chunks = (N + HOST_CHUNK_ROWS - 1) / HOST_CHUNK_ROWS;
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < chunks; k++) {
    float *kdw = partial + k * C;
    memset(kdw, 0, (size_t)C * sizeof(float));
    int64_t end = (k + 1) * HOST_CHUNK_ROWS < N ? (k + 1) * HOST_CHUNK_ROWS : N;
    for (int64_t n = k * HOST_CHUNK_ROWS; n < end; n++) {
      const float *xr = x + n * C, *dyr = dy + n * C;
      float *dxr = dx + n * C;
      float rs = rstd[n], dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < C; c++) dot += dyr[c] * w[c] * xr[c];
      float coef = rs * rs * dot / (float)C;
      for (int64_t c = 0; c < C; c++) {
        dxr[c] += rs * (dyr[c] * w[c] - xr[c] * coef);
        kdw[c] += dyr[c] * xr[c] * rs;
      }
    }
  }
  host_sum_chunks(partial, chunks, C, dw, 1);
}

/* ---------------------------------------------------------------- table entries */

gaaw_status_t host_layernorm_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_cten w, gaaw_cten b, float eps,
                                     gaaw_ten y, gaaw_ten mean, gaaw_ten rstd)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x), *pw = host_in(&s, w), *pb = host_in(&s, b);
  float *py = host_out(&s, y), *pm = host_out(&s, mean), *pr = host_out(&s, rstd);
  if (s.status == GAAW_SUCCESS) layernorm_forward_f32(host_rows(x), host_cols(x), px, pw, pb, eps, py, pm, pr);
  return host_stage_end(&s);
}

gaaw_status_t host_add_layernorm_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_cten y, gaaw_cten bias, gaaw_cten w,
                                         gaaw_cten b, float eps, gaaw_ten x2, gaaw_ten h, gaaw_ten mean,
                                         gaaw_ten rstd)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x), *py = host_in(&s, y), *pbias = host_in(&s, bias);
  const float *pw = host_in(&s, w), *pb = host_in(&s, b);
  float *px2 = host_out(&s, x2), *ph = host_out(&s, h), *pm = host_out(&s, mean), *pr = host_out(&s, rstd);
  if (s.status == GAAW_SUCCESS)
    add_layernorm_forward_f32(host_rows(x), host_cols(x), px, py, pbias, pw, pb, eps, px2, ph, pm, pr, x->dtype);
  return host_stage_end(&s);
}

gaaw_status_t host_layernorm_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_cten w, gaaw_cten mean,
                                      gaaw_cten rstd, gaaw_ten dx, gaaw_ten dw, gaaw_ten db)
{
  int64_t N = host_rows(x), C = host_cols(x), chunks = (N + HOST_CHUNK_ROWS - 1) / HOST_CHUNK_ROWS;
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdy = host_in(&s, dy), *px = host_in(&s, x), *pw = host_in(&s, w);
  const float *pm = host_in(&s, mean), *pr = host_in(&s, rstd);
  float *pdx = host_inout(&s, dx), *pdw = host_inout(&s, dw), *pdb = host_inout(&s, db);
  float *partial = host_scratch(&s, 2 * chunks * C);
  if (s.status == GAAW_SUCCESS) layernorm_backward_f32(N, C, pdy, px, pw, pm, pr, pdx, pdw, pdb, partial);
  return host_stage_end(&s);
}

gaaw_status_t host_rmsnorm_forward(gaaw_context_t ctx, gaaw_cten x, gaaw_cten w, float eps, gaaw_ten y,
                                   gaaw_ten rstd)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x), *pw = host_in(&s, w);
  float *py = host_out(&s, y), *pr = host_out(&s, rstd);
  if (s.status == GAAW_SUCCESS) rmsnorm_forward_f32(host_rows(x), host_cols(x), px, pw, eps, py, pr);
  return host_stage_end(&s);
}

gaaw_status_t host_rmsnorm_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_cten w, gaaw_cten rstd,
                                    gaaw_ten dx, gaaw_ten dw)
{
  int64_t N = host_rows(x), C = host_cols(x), chunks = (N + HOST_CHUNK_ROWS - 1) / HOST_CHUNK_ROWS;
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdy = host_in(&s, dy), *px = host_in(&s, x), *pw = host_in(&s, w), *pr = host_in(&s, rstd);
  float *pdx = host_inout(&s, dx), *pdw = host_inout(&s, dw);
  float *partial = host_scratch(&s, chunks * C);
  if (s.status == GAAW_SUCCESS) rmsnorm_backward_f32(N, C, pdy, px, pw, pr, pdx, pdw, partial);
  return host_stage_end(&s);
}
