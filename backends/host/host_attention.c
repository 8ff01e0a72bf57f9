/* Scaled causal softmax and causal attention (scores = q k^T, probs = causal softmax
 * of scores / sqrt(D), out = probs v): one-thread GEMMs on blocks of rows of each
 * head, the softmax of those rows in between. */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/host/host.h"
#include "backends/host/host_math.h"
#include "backends/runtime/error.h"

/* ---------------------------------------------------------------- f32 cores */

/* Row t of a causal softmax of T columns: y[0..t] = softmax(scale x[0..t]), y[t+1..T) = 0
 * (y may be x: each element is read before it is written).
 * The last, partial group of lanes runs as a whole vector when the row has room for
 * it: its lanes right of the diagonal compute e^(whatever they hold) and are then
 * set to 0, which adds +0 to their partial sums, so the bits are those of one lane
 * at a time (about a sixth of the time at T = 128, where these rows average 8
 * scalar exponentials). */
HOST_VECTOR_CLONES static void causal_softmax_row(int64_t t, int64_t T, float scale, const float *xr, float *yr)
{
  int64_t n = t + 1, full = n / HOST_SUM_LANES * HOST_SUM_LANES;
  int64_t padded = full < n && full + HOST_SUM_LANES <= T ? full + HOST_SUM_LANES : n;
  float max = -INFINITY, part[HOST_SUM_LANES] = {0};
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < n; j++) max = scale * xr[j] > max ? scale * xr[j] : max;
  for (int64_t j0 = 0; j0 < full; j0 += HOST_SUM_LANES) /* sum in the lanes' order (host_math.h) */
#pragma omp simd
    for (int l = 0; l < HOST_SUM_LANES; l++) {
      float e = host_expf(scale * xr[j0 + l] - max);
      yr[j0 + l] = e;
      part[l] += e;
    }
  if (padded > n) {
#pragma omp simd
    for (int l = 0; l < HOST_SUM_LANES; l++) {
      float e = host_expf(scale * xr[full + l] - max);
      e = full + l < n ? e : 0.0f;
      yr[full + l] = e;
      part[l] += e;
    }
  } else {
    for (int64_t j = full; j < n; j++) {
      float e = host_expf(scale * xr[j] - max);
      yr[j] = e;
      part[j - full] += e;
    }
  }
  float inv = 1.0f / host_lanes_total(part);
#pragma omp simd
  for (int64_t j = 0; j < n; j++) yr[j] *= inv;
  for (int64_t j = padded; j < T; j++) yr[j] = 0.0f;
}

/* Row t of the softmax's backward: dx[0..t] (+)= scale y (dy - sum_j dy y); without
 * accumulate, dx[t+1..T) = 0 (dx may be dy then: dot is complete before any write). */
HOST_VECTOR_CLONES static void causal_softmax_backward_row(int64_t t, int64_t T, float scale, const float *yr,
                                                           const float *dyr, float *dxr, int accumulate)
{
  int64_t n = t + 1;
  float dot = host_lanes_dot(n, dyr, yr);
  if (accumulate) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) dxr[j] += scale * yr[j] * (dyr[j] - dot);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) dxr[j] = scale * yr[j] * (dyr[j] - dot);
    for (int64_t j = n; j < T; j++) dxr[j] = 0.0f;
  }
}

/* Causal softmax of (batch, T, T) f32 scores (y may be x). */
static void causal_softmax_forward_f32(int64_t batch, int64_t T, float scale, const float *x, float *y)
{
  int64_t rows = batch * T;
#pragma omp parallel for if (rows * T > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t r = 0; r < rows; r++) causal_softmax_row(r % T, T, scale, x + r * T, y + r * T);
}

/* dx (+)= the softmax's backward; dx may be dy when accumulate is 0. */
static void causal_softmax_backward_f32(int64_t batch, int64_t T, float scale, const float *y, const float *dy,
                                        float *dx, int accumulate)
{
  int64_t rows = batch * T;
#pragma omp parallel for if (rows * T > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t r = 0; r < rows; r++)
    causal_softmax_backward_row(r % T, T, scale, y + r * T, dy + r * T, dx + r * T, accumulate);
}

/* The attention core, one head at a time, in blocks of ATT_ROWS rows of the (T, T)
 * matrices: queries [i0, e) see keys [0, e) only, so every product skips the blocks
 * above the diagonal, whose probabilities are 0 (the terms dropped are exact zeros:
 * trailing ones for scores, out and dq, leading ones for dv and dk). Each block runs
 * on one thread while its rows are in cache, softmax included, and writes its own rows
 * (or columns), so the bits do not depend on the thread count nor on whether the
 * threads take whole heads or (head, block) items (whole_heads).
 * 64 rows: at T = 128 the GEMMs do 3/4 of the full products' work. 32 rows would do
 * 10/16, but each block repacks the keys and values it reads (OpenBLAS copies every
 * operand before multiplying), and at these sizes the copies cost about what the
 * skipped work saved: forward and backward took the same time at 32 and 64 rows
 * (32 heads, T = 128, D = 64). */
enum { ATT_ROWS = 64 };

/* Where each head's rows lie. q, k, v, dq, dk, dv share one layout ("in"), out and
 * dout another: head bh (sequence b = bh / heads, head h = bh % heads) starts at
 * b seq_in + h D (b seq_out + h D), and its rows are ld_in (ld_out) apart.
 *   (BH, T, D) tensors (gaaw_attention_*): heads 1, ld D, seq T D;
 *   the QKV projection's (B, T, 3H, D) and the merged (B, T, H, D) (attention_qkv_*):
 *   heads H, ld_in 3 H D, seq_in T 3 H D, ld_out H D, seq_out T H D. */
typedef struct {
  int64_t heads, ld_in, seq_in, ld_out, seq_out;
} att_layout;

static att_layout head_major_layout(int64_t T, int64_t D)
{
  return (att_layout){1, D, T * D, D, T * D};
}

static att_layout qkv_layout(int64_t T, int64_t H, int64_t D)
{
  return (att_layout){H, 3 * H * D, T * 3 * H * D, H * D, T * H * D};
}

typedef struct {
  gaaw_context_t ctx;
  int64_t T, D;
  float scale; /* 1 / sqrt(D) */
  att_layout lay;
  float grad_beta; /* backward: 1 adds to dq, dk, dv (gaaw_attention_backward), 0 overwrites them */
} att_dims;

/* Offsets of head bh's first row in the "in" and "out" layouts. */
static int64_t in_at(const att_dims *a, int64_t bh)
{
  return bh / a->lay.heads * a->lay.seq_in + bh % a->lay.heads * a->D;
}

static int64_t out_at(const att_dims *a, int64_t bh)
{
  return bh / a->lay.heads * a->lay.seq_out + bh % a->lay.heads * a->D;
}

static int64_t att_blocks(int64_t T)
{
  return (T + ATT_ROWS - 1) / ATT_ROWS;
}

/* The (head, block) items of a pass, BH * att_blocks(T) of them, handed out
 * dynamically with the costly ones first: item it is head it % BH and the block
 * it / BH counted from the heaviest (the last rows, the first columns). */
static int64_t att_items(int64_t BH, int64_t T)
{
  return BH * att_blocks(T);
}

/* Heads per thread from which a pass hands out whole heads instead of (head, block)
 * items: each thread then runs all the blocks of its heads back to back, so a head's
 * keys, values, probabilities and (backward) score gradients stay in that core's cache
 * between its blocks and passes, and the equal-sized heads still balance. */
enum { HEADS_PER_THREAD = 4 };

static int whole_heads(int64_t BH)
{
#ifdef _OPENMP
  return BH >= HEADS_PER_THREAD * (int64_t)omp_get_max_threads();
#else
  return 1;
#endif
}

/* Whether the pass is worth a parallel region. */
static int att_parallel(int64_t BH, int64_t T, int64_t D)
{
  return BH * T * T * D > HOST_PARALLEL_MIN;
}

/* Query rows [i0, e) of one head (q, k, v, out at its first row): probs rows
 * (softmax of q k^T scaled, 0 above the diagonal) and out rows. */
static void forward_rows(const att_dims *a, int64_t i0, const float *q, const float *k, const float *v, float *probs,
                         float *out)
{
  int64_t T = a->T, D = a->D, e = i0 + ATT_ROWS < T ? i0 + ATT_ROWS : T, ldi = a->lay.ld_in, ldo = a->lay.ld_out;
  float *p = probs + i0 * T;
  gaaw_host_sgemm_serial_ld(a->ctx, GAAW_OP_N, GAAW_OP_T, e - i0, e, D, 1.0f, q + i0 * ldi, ldi, k, ldi, 0.0f, p, T);
  for (int64_t t = i0; t < e; t++) causal_softmax_row(t, T, a->scale, probs + t * T, probs + t * T);
  gaaw_host_sgemm_serial_ld(a->ctx, GAAW_OP_N, GAAW_OP_N, e - i0, D, e, 1.0f, p, T, v, ldi, 0.0f, out + i0 * ldo, ldo);
}

/* BH heads of T rows of D (q, k, v, out: head 0's first row, in a's layout);
 * probs: (BH, T, T) */
static void attention_forward_f32(const att_dims *a, int64_t BH, const float *q, const float *k, const float *v,
                                  float *probs, float *out)
{
  int64_t T = a->T, hp = T * T, last = att_blocks(T) - 1;
  if (whole_heads(BH)) {
#pragma omp parallel for if (att_parallel(BH, T, a->D)) schedule(static)
    for (int64_t h = 0; h < BH; h++) {
      int64_t hi = in_at(a, h);
      for (int64_t b = last; b >= 0; b--)
        forward_rows(a, b * ATT_ROWS, q + hi, k + hi, v + hi, probs + h * hp, out + out_at(a, h));
    }
    return;
  }
#pragma omp parallel for if (att_parallel(BH, T, a->D)) schedule(dynamic)
  for (int64_t it = 0; it < att_items(BH, T); it++) {
    int64_t h = it % BH, i0 = (last - it / BH) * ATT_ROWS, hi = in_at(a, h);
    forward_rows(a, i0, q + hi, k + hi, v + hi, probs + h * hp, out + out_at(a, h));
  }
}

/* Query rows [i0, e): dscores (in dprobs) = scale probs (dprobs - rowsum(dprobs
 * probs)) with dprobs = dout v^T, 0 above the diagonal; dq += dscores k. */
static void backward_rows(const att_dims *a, int64_t i0, const float *dout, const float *k, const float *v,
                          const float *probs, float *dprobs, float *dq)
{
  int64_t T = a->T, D = a->D, e = i0 + ATT_ROWS < T ? i0 + ATT_ROWS : T, ldi = a->lay.ld_in, ldo = a->lay.ld_out;
  float *ds = dprobs + i0 * T;
  gaaw_host_sgemm_serial_ld(a->ctx, GAAW_OP_N, GAAW_OP_T, e - i0, e, D, 1.0f, dout + i0 * ldo, ldo, v, ldi, 0.0f, ds,
                            T);
  for (int64_t t = i0; t < e; t++) /* in place; 0 right of the diagonal */
    causal_softmax_backward_row(t, T, a->scale, probs + t * T, ds + (t - i0) * T, ds + (t - i0) * T, 0);
  gaaw_host_sgemm_serial_ld(a->ctx, GAAW_OP_N, GAAW_OP_N, e - i0, D, e, 1.0f, ds, T, k, ldi, a->grad_beta, dq + i0 * ldi,
                            ldi);
}

/* Key columns [j0, f), from the rows that see them ([j0, T)): dv += probs^T dout,
 * dk += dscores^T q. */
static void backward_columns(const att_dims *a, int64_t j0, const float *dout, const float *q, const float *probs,
                             const float *dscores, float *dk, float *dv)
{
  int64_t T = a->T, D = a->D, f = j0 + ATT_ROWS < T ? j0 + ATT_ROWS : T, rows = T - j0;
  int64_t ldi = a->lay.ld_in, ldo = a->lay.ld_out;
  const float *p = probs + j0 * T + j0, *ds = dscores + j0 * T + j0;
  gaaw_host_sgemm_serial_ld(a->ctx, GAAW_OP_T, GAAW_OP_N, f - j0, D, rows, 1.0f, p, T, dout + j0 * ldo, ldo,
                            a->grad_beta, dv + j0 * ldi, ldi);
  gaaw_host_sgemm_serial_ld(a->ctx, GAAW_OP_T, GAAW_OP_N, f - j0, D, rows, 1.0f, ds, T, q + j0 * ldi, ldi,
                            a->grad_beta, dk + j0 * ldi, ldi);
}

/* dq, dk, dv (in a's "in" layout) += (grad_beta 1) or = (0) the gradients from dout
 * ("out" layout): each of their rows is written by one GEMM call. */
static void attention_backward_f32(const att_dims *a, int64_t BH, const float *dout, const float *q, const float *k,
                                   const float *v, const float *probs, float *dprobs, float *dq, float *dk, float *dv)
{
  int64_t T = a->T, hp = T * T, last = att_blocks(T) - 1;
  if (whole_heads(BH)) {
#pragma omp parallel for if (att_parallel(BH, T, a->D)) schedule(static)
    for (int64_t h = 0; h < BH; h++) {
      int64_t hi = in_at(a, h), ho = out_at(a, h);
      for (int64_t b = last; b >= 0; b--)
        backward_rows(a, b * ATT_ROWS, dout + ho, k + hi, v + hi, probs + h * hp, dprobs + h * hp, dq + hi);
      for (int64_t b = 0; b <= last; b++)
        backward_columns(a, b * ATT_ROWS, dout + ho, q + hi, probs + h * hp, dprobs + h * hp, dk + hi, dv + hi);
    }
    return;
  }
#pragma omp parallel for if (att_parallel(BH, T, a->D)) schedule(dynamic)
  for (int64_t it = 0; it < att_items(BH, T); it++) {
    int64_t h = it % BH, i0 = (last - it / BH) * ATT_ROWS, hi = in_at(a, h);
    backward_rows(a, i0, dout + out_at(a, h), k + hi, v + hi, probs + h * hp, dprobs + h * hp, dq + hi);
  }
  /* the columns need every row's dscores: a second pass */
#pragma omp parallel for if (att_parallel(BH, T, a->D)) schedule(dynamic)
  for (int64_t it = 0; it < att_items(BH, T); it++) {
    int64_t h = it % BH, j0 = (it / BH) * ATT_ROWS, hi = in_at(a, h);
    backward_columns(a, j0, dout + out_at(a, h), q + hi, probs + h * hp, dprobs + h * hp, dk + hi, dv + hi);
  }
}

/* ---------------------------------------------------------------- table entries */

/* (batch, T) of a (..., T, T) tensor. */
static void square_dims(const gaaw_tensor_t *t, int64_t *batch, int64_t *T)
{
  *T = host_cols(t);
  *batch = *T ? host_rows(t) / *T : 0;
}

gaaw_status_t host_causal_softmax_forward(gaaw_context_t ctx, float scale, gaaw_cten x, gaaw_ten y)
{
  int64_t batch, T;
  square_dims(x, &batch, &T);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *px = host_in(&s, x);
  float *py = host_out(&s, y);
  if (s.status == GAAW_SUCCESS) causal_softmax_forward_f32(batch, T, scale, px, py);
  return host_stage_end(&s);
}

gaaw_status_t host_causal_softmax_backward(gaaw_context_t ctx, float scale, gaaw_cten y, gaaw_cten dy, gaaw_ten dx)
{
  int64_t batch, T;
  square_dims(y, &batch, &T);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *py = host_in(&s, y), *pdy = host_in(&s, dy);
  float *pdx = host_inout(&s, dx);
  if (s.status == GAAW_SUCCESS) causal_softmax_backward_f32(batch, T, scale, py, pdy, pdx, 1);
  return host_stage_end(&s);
}

/* att_dims of a (BH, T, T) probs tensor, heads of D, in layout lay. */
static att_dims dims_of_probs(gaaw_context_t ctx, gaaw_cten probs, int64_t D, att_layout lay, int64_t *BH)
{
  int64_t T;
  square_dims(probs, BH, &T);
  return (att_dims){ctx, T, D, 1.0f / sqrtf((float)D), lay, 1.0f};
}

gaaw_status_t host_attention_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v, gaaw_ten probs,
                                     gaaw_ten out)
{
  int64_t BH, D = host_cols(q);
  att_dims a = dims_of_probs(ctx, probs, D, head_major_layout(host_cols(probs), D), &BH);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pq = host_in(&s, q), *pk = host_in(&s, k), *pv = host_in(&s, v);
  float *pp = host_out(&s, probs), *po = host_out(&s, out);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_host_check_gemm_sizes(ctx, a.T, a.T, a.T > D ? a.T : D);
  if (s.status == GAAW_SUCCESS) attention_forward_f32(&a, BH, pq, pk, pv, pp, po);
  return host_stage_end(&s);
}

gaaw_status_t host_attention_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                      gaaw_cten probs, gaaw_ten dprobs, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)
{
  int64_t BH, D = host_cols(q);
  att_dims a = dims_of_probs(ctx, probs, D, head_major_layout(host_cols(probs), D), &BH);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdo = host_in(&s, dout), *pq = host_in(&s, q), *pk = host_in(&s, k), *pv = host_in(&s, v);
  const float *pp = host_in(&s, probs);
  float *pdp = host_out(&s, dprobs), *pdq = host_inout(&s, dq), *pdk = host_inout(&s, dk), *pdv = host_inout(&s, dv);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_host_check_gemm_sizes(ctx, a.T, a.T, a.T > D ? a.T : D);
  if (s.status == GAAW_SUCCESS) attention_backward_f32(&a, BH, pdo, pq, pk, pv, pp, pdp, pdq, pdk, pdv);
  return host_stage_end(&s);
}

/* qkv: (B, T, 3H, D), its q, k and v parts H D apart in each row. */
static att_dims dims_of_qkv(gaaw_context_t ctx, gaaw_cten qkv, int64_t *BH, int64_t *HD)
{
  int64_t B = qkv->shape[0], T = qkv->shape[1], H = qkv->shape[2] / 3, D = qkv->shape[3];
  *BH = B * H;
  *HD = H * D;
  return (att_dims){ctx, T, D, 1.0f / sqrtf((float)D), qkv_layout(T, H, D), 0.0f};
}

gaaw_status_t host_attention_qkv_forward(gaaw_context_t ctx, gaaw_cten qkv, gaaw_ten probs, gaaw_ten out)
{
  int64_t BH, HD;
  att_dims a = dims_of_qkv(ctx, qkv, &BH, &HD);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pqkv = host_in(&s, qkv);
  float *pp = host_out(&s, probs), *po = host_out(&s, out);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_host_check_gemm_sizes(ctx, a.T, a.T, 3 * HD > a.T ? 3 * HD : a.T);
  if (s.status == GAAW_SUCCESS) attention_forward_f32(&a, BH, pqkv, pqkv + HD, pqkv + 2 * HD, pp, po);
  return host_stage_end(&s);
}

gaaw_status_t host_attention_qkv_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten qkv, gaaw_cten probs,
                                          gaaw_ten dprobs, gaaw_ten dqkv)
{
  int64_t BH, HD;
  att_dims a = dims_of_qkv(ctx, qkv, &BH, &HD);
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdo = host_in(&s, dout), *pqkv = host_in(&s, qkv), *pp = host_in(&s, probs);
  float *pdp = host_out(&s, dprobs), *pd = host_out(&s, dqkv);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_host_check_gemm_sizes(ctx, a.T, a.T, 3 * HD > a.T ? 3 * HD : a.T);
  if (s.status == GAAW_SUCCESS)
    attention_backward_f32(&a, BH, pdo, pqkv, pqkv + HD, pqkv + 2 * HD, pp, pdp, pd, pd + HD, pd + 2 * HD);
  return host_stage_end(&s);
}
