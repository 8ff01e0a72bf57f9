/* Elementwise kernels: bias add and its backward, residual add (alone and with a
 * bias, fused: backends/fused.h), axpy, scale. Their
 * loops say `omp simd`: without it GCC keeps them scalar (it would need run-time
 * checks that the arrays do not overlap). Each element's operations are the same
 * either way (bias_backward still sums each column over rows in order). */
#include <string.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"

/* ---------------------------------------------------------------- f32 cores */

/* y: (N, C) += b: (C) */
static void bias_add_f32(int64_t N, int64_t C, float *y, const float *b)
{
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float *yr = y + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) yr[c] += b[c];
  }
}

/* kdb: (C) = sum of dy's rows [lo, hi), each column in row order (so the same bits at
 * every vector width). */
HOST_VECTOR_CLONES static void column_sums(int64_t lo, int64_t hi, int64_t C, const float *dy, float *kdb)
{
  memset(kdb, 0, (size_t)C * sizeof(float));
  for (int64_t n = lo; n < hi; n++)
#pragma omp simd
    for (int64_t c = 0; c < C; c++) kdb[c] += dy[n * C + c];
}

/* db: (C) += sum_n dy: (N, C), in fixed chunks of rows. */
static void bias_backward_f32(int64_t N, int64_t C, const float *dy, float *db, float *partial /* chunks * C */)
{
  int64_t chunks = (N + HOST_CHUNK_ROWS - 1) / HOST_CHUNK_ROWS;
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < chunks; k++)
    column_sums(k * HOST_CHUNK_ROWS, (k + 1) * HOST_CHUNK_ROWS < N ? (k + 1) * HOST_CHUNK_ROWS : N, C, dy,
                partial + k * C);
  host_sum_chunks(partial, chunks, C, db, 1);
}

void host_add_bias_row(int64_t C, const float *x, const float *y, const float *bias, float *out,
                       gaaw_dtype_t dtype)
{
  if (!bias) {
#pragma omp simd
    for (int64_t c = 0; c < C; c++) out[c] = x[c] + y[c];
  } else if (dtype == GAAW_F32) {
#pragma omp simd
    for (int64_t c = 0; c < C; c++) out[c] = x[c] + (y[c] + bias[c]);
  } else { /* out as the temporary: x and y are staged copies */
#pragma omp simd
    for (int64_t c = 0; c < C; c++) out[c] = y[c] + bias[c];
    host_round(out, C, dtype);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) out[c] = x[c] + out[c];
  }
  host_round(out, C, dtype);
}

/* out: (N, C) = x + (y + bias), row by row. */
static void bias_residual_add_f32(int64_t N, int64_t C, const float *x, const float *y, const float *bias, float *out,
                                  gaaw_dtype_t dtype)
{
#pragma omp parallel for if (N * C > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t n = 0; n < N; n++) host_add_bias_row(C, x + n * C, y + n * C, bias, out + n * C, dtype);
}

static void add_f32(int64_t n, const float *a, const float *b, float *y)
{
#pragma omp parallel for simd if (parallel : n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void axpy_f32(int64_t n, float alpha, const float *x, float *y)
{
#pragma omp parallel for simd if (parallel : n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

static void scale_f32(int64_t n, float alpha, float *x)
{
#pragma omp parallel for simd if (parallel : n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) x[i] *= alpha;
}

/* ---------------------------------------------------------------- table entries */

gaaw_status_t host_bias_add(gaaw_context_t ctx, gaaw_ten y, gaaw_cten b)
{
  host_stage s;
  host_stage_init(&s, ctx);
  float *py = host_inout(&s, y);
  const float *pb = host_in(&s, b);
  if (s.status == GAAW_SUCCESS) bias_add_f32(host_rows(y), host_cols(y), py, pb);
  return host_stage_end(&s);
}

gaaw_status_t host_bias_backward(gaaw_context_t ctx, gaaw_cten dy, gaaw_ten db)
{
  int64_t N = host_rows(dy), C = host_cols(dy);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdy = host_in(&s, dy);
  float *pdb = host_inout(&s, db);
  float *partial = host_scratch(&s, (N + HOST_CHUNK_ROWS - 1) / HOST_CHUNK_ROWS * C);
  if (s.status == GAAW_SUCCESS) bias_backward_f32(N, C, pdy, pdb, partial);
  return host_stage_end(&s);
}

gaaw_status_t host_add(gaaw_context_t ctx, gaaw_cten a, gaaw_cten b, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pa = host_in(&s, a), *pb = host_in(&s, b);
  /* y may alias a or b: a 16-bit y is staged after a and b were read into copies. */
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS) add_f32(gaaw_tensor_numel(y), pa, pb, py);
  return host_stage_end(&s);
}

gaaw_status_t host_bias_residual_add(gaaw_context_t ctx, gaaw_cten x, gaaw_cten y, gaaw_cten bias, gaaw_ten out)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x), *py = host_in(&s, y), *pb = host_in(&s, bias);
  float *pout = host_out(&s, out); /* after x and y, as in host_add */
  if (s.status == GAAW_SUCCESS) bias_residual_add_f32(host_rows(x), host_cols(x), px, py, pb, pout, x->dtype);
  return host_stage_end(&s);
}

gaaw_status_t host_axpy(gaaw_context_t ctx, float alpha, gaaw_cten x, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x);
  float *py = host_inout(&s, y);
  if (s.status == GAAW_SUCCESS) axpy_f32(gaaw_tensor_numel(y), alpha, px, py);
  return host_stage_end(&s);
}

gaaw_status_t host_scale(gaaw_context_t ctx, gaaw_ten x, float alpha)
{
  host_stage s;
  host_stage_init(&s, ctx);
  float *px = host_inout(&s, x);
  if (s.status == GAAW_SUCCESS) scale_f32(gaaw_tensor_numel(x), alpha, px);
  return host_stage_end(&s);
}
