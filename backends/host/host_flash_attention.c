/* Blocked attention on the host (gaaw_attention_block_*, and gaaw_flash_attention_*
 * as its causal case on one whole sequence): the (Tq, Tk) matrix of probabilities
 * never exists, only one TILE x TILE block of it per thread, in cache. Query row t is
 * at position q_start + t, key row j at k_start + j; a causal mask lets a row see the
 * keys at its position and before, so that ring attention can give each rank's
 * block of queries the keys of another rank's block. A row that sees no key gets
 * out 0 and lse -inf (a merge then weighs it 0).
 *
 * Forward, for each (head, tile of TILE query rows i), over the key blocks j up to
 * the diagonal (those above it are skipped): s = q_i k_j^T / sqrt(D) (a GEMM of the
 * tiles), the online softmax of its rows (running max m and sum l; the output rows
 * already summed are rescaled by exp(m_old - m_new)), out_i += p v_j (a GEMM); then
 * out_i /= l and lse_i = m + log(l).
 *
 * Backward recomputes each block from q, k and lse: p = exp(s - lse),
 * dp = dout_i v_j^T, ds = p (dp - delta) / sqrt(D) with delta = rowsum(dout * out)
 * (equal to rowsum(dp * p)). One pass per key tile j writes dv_j += p^T dout_i and
 * dk_j += ds^T q_i over the query tiles i >= j; one pass per query tile i writes
 * dq_i += ds k_j over j <= i. So every output tile is written by one thread, with
 * no atomics, at the cost of computing s and dp twice (7 tile GEMMs where the
 * (T, T) path has 5 of the full size, half of it masked).
 *
 * Threads: OpenMP over (head, tile) items, dynamically (the tiles near the end of
 * the sequence have the most blocks, and go first). Every GEMM runs on one thread
 * with sizes fixed by TILE, and every element is summed in the order of the blocks,
 * so the results are bit-identical whatever the thread count. */
#include <math.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"
#include "backends/runtime/error.h"

/* Rows of a query tile and of a key block: two TILE x TILE f32 blocks (32 KiB) per
 * thread, on its stack, fit in L2 with the tiles of q, k and v they are made from. */
enum { TILE = 64 };

/* One head's problem: q, out, dout, dq (Tq, D); k, v, dk, dv (Tk, D); lse, delta (Tq). */
typedef struct {
  gaaw_context_t ctx;
  int64_t Tq, Tk, D;
  int64_t q_start, k_start; /* the positions of query row 0 and key row 0 */
  int causal;
  float scale; /* 1 / sqrt(D) */
} flash_dims;

static int64_t min64(int64_t a, int64_t b)
{
  return a < b ? a : b;
}

/* Columns of key block j0 (bk wide) that query row t sees: all, or under the causal
 * mask those at or before its position; maybe none. */
static int64_t seen(const flash_dims *f, int64_t t, int64_t j0, int64_t bk)
{
  if (!f->causal) return bk;
  int64_t n = (f->q_start + t) - (f->k_start + j0) + 1;
  return n < 0 ? 0 : n < bk ? n : bk;
}

/* Whether query rows [i0, i0 + bq) see any key of the block at j0. */
static int block_seen(const flash_dims *f, int64_t i0, int64_t bq, int64_t j0)
{
  return !f->causal || f->k_start + j0 <= f->q_start + i0 + bq - 1;
}

/* ---------------------------------------------------------------- forward */

/* Query rows [i0, i0 + bq) of one head: out rows and lse. s: TILE x TILE scratch. */
static void forward_tile(const flash_dims *f, int64_t i0, const float *q, const float *k, const float *v, float *out,
                         float *lse, float *s)
{
  int64_t D = f->D, bq = min64(TILE, f->Tq - i0);
  float m[TILE], l[TILE];
  for (int64_t r = 0; r < bq; r++) m[r] = -INFINITY, l[r] = 0.0f;
  int64_t j0 = 0;
  for (; j0 < f->Tk && block_seen(f, i0, bq, j0); j0 += TILE) {
    int64_t bk = min64(TILE, f->Tk - j0);
    /* s (bq, bk) = q_i k_j^T / sqrt(D) */
    gaaw_host_sgemm_serial(f->ctx, GAAW_OP_N, GAAW_OP_T, bq, bk, D, f->scale, q + i0 * D, k + j0 * D, 0.0f, s);
    for (int64_t r = 0; r < bq; r++) {
      float *sr = s + r * bk, *orow = out + (i0 + r) * D, mx = m[r], sum = 0.0f;
      int64_t n = seen(f, i0 + r, j0, bk);
      for (int64_t c = 0; c < n; c++) mx = fmaxf(mx, sr[c]);
      for (int64_t c = 0; c < n; c++) sr[c] = host_expf(sr[c] - mx);
      for (int64_t c = n; c < bk; c++) sr[c] = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < n; c++) sum += sr[c];
      float alpha = m[r] == -INFINITY ? 0.0f : host_expf(m[r] - mx); /* 0 until the row has seen a key */
      l[r] = l[r] * alpha + sum;
      m[r] = mx;
      if (j0 > 0)
        for (int64_t d = 0; d < D; d++) orow[d] *= alpha;
    }
    /* out_i (bq, D) = alpha out_i + p v_j (the first block overwrites) */
    gaaw_host_sgemm_serial(f->ctx, GAAW_OP_N, GAAW_OP_N, bq, D, bk, 1.0f, s, v + j0 * D, j0 > 0 ? 1.0f : 0.0f,
                           out + i0 * D);
  }
  for (int64_t r = 0; r < bq; r++) {
    float *orow = out + (i0 + r) * D;
    if (j0 == 0 || l[r] == 0.0f) { /* no key seen: out 0 (the GEMMs wrote 0 if they ran), lse -inf */
      for (int64_t d = 0; d < D; d++) orow[d] = 0.0f;
      lse[i0 + r] = -INFINITY;
      continue;
    }
    float inv = 1.0f / l[r];
    for (int64_t d = 0; d < D; d++) orow[d] *= inv;
    lse[i0 + r] = m[r] + logf(l[r]);
  }
}

/* q, out: (BH, Tq, D)   k, v: (BH, Tk, D)   lse: (BH, Tq) */
static void flash_forward_f32(const flash_dims *f, int64_t BH, const float *q, const float *k, const float *v,
                              float *out, float *lse)
{
  int64_t Tq = f->Tq, D = f->D, tiles = (Tq + TILE - 1) / TILE, items = BH * tiles;
#pragma omp parallel for if (items > 1 && BH * Tq * f->Tk * D > HOST_PARALLEL_MIN) schedule(dynamic, 1)
  for (int64_t it = 0; it < items; it++) {
    float s[TILE * TILE];
    int64_t h = it / tiles, i0 = (tiles - 1 - it % tiles) * TILE; /* the last tiles (most blocks) first */
    size_t oq = (size_t)(h * Tq * D), ok = (size_t)(h * f->Tk * D);
    forward_tile(f, i0, q + oq, k + ok, v + ok, out + oq, lse + h * Tq, s);
  }
}

/* ---------------------------------------------------------------- backward */

/* The block (query rows [i0, i0 + bq), keys [j0, j0 + bk)) of one head:
 * p (bq, bk) into p and ds = p (dp - delta) / sqrt(D) into ds. */
static void grad_block(const flash_dims *f, int64_t i0, int64_t bq, int64_t j0, int64_t bk, const float *q,
                       const float *k, const float *v, const float *dout, const float *lse, const float *delta,
                       float *p, float *ds)
{
  int64_t D = f->D;
  gaaw_host_sgemm_serial(f->ctx, GAAW_OP_N, GAAW_OP_T, bq, bk, D, f->scale, q + i0 * D, k + j0 * D, 0.0f, p);
  gaaw_host_sgemm_serial(f->ctx, GAAW_OP_N, GAAW_OP_T, bq, bk, D, 1.0f, dout + i0 * D, v + j0 * D, 0.0f, ds);
  for (int64_t r = 0; r < bq; r++) {
    float *pr = p + r * bk, *dsr = ds + r * bk, lr = lse[i0 + r], dr = delta[i0 + r];
    int64_t n = seen(f, i0 + r, j0, bk);
    for (int64_t c = 0; c < n; c++) pr[c] = host_expf(pr[c] - lr);
    for (int64_t c = n; c < bk; c++) pr[c] = 0.0f;
    for (int64_t c = 0; c < bk; c++) dsr[c] = pr[c] * (dsr[c] - dr) * f->scale;
  }
}

/* Key tile [j0, j0 + bk) of one head: dv_j += p^T dout_i, dk_j += ds^T q_i over the
 * query tiles i that see it. */
static void backward_key_tile(const flash_dims *f, int64_t j0, const float *q, const float *k, const float *v,
                              const float *dout, const float *lse, const float *delta, float *dk, float *dv,
                              float *p, float *ds)
{
  int64_t D = f->D, bk = min64(TILE, f->Tk - j0);
  for (int64_t i0 = 0; i0 < f->Tq; i0 += TILE) {
    int64_t bq = min64(TILE, f->Tq - i0);
    if (!block_seen(f, i0, bq, j0)) continue;
    grad_block(f, i0, bq, j0, bk, q, k, v, dout, lse, delta, p, ds);
    gaaw_host_sgemm_serial(f->ctx, GAAW_OP_T, GAAW_OP_N, bk, D, bq, 1.0f, p, dout + i0 * D, 1.0f, dv + j0 * D);
    gaaw_host_sgemm_serial(f->ctx, GAAW_OP_T, GAAW_OP_N, bk, D, bq, 1.0f, ds, q + i0 * D, 1.0f, dk + j0 * D);
  }
}

/* Query tile [i0, i0 + bq) of one head: dq_i += ds k_j over the key blocks it sees. */
static void backward_query_tile(const flash_dims *f, int64_t i0, const float *q, const float *k, const float *v,
                                const float *dout, const float *lse, const float *delta, float *dq, float *p,
                                float *ds)
{
  int64_t D = f->D, bq = min64(TILE, f->Tq - i0);
  for (int64_t j0 = 0; j0 < f->Tk && block_seen(f, i0, bq, j0); j0 += TILE) {
    int64_t bk = min64(TILE, f->Tk - j0);
    grad_block(f, i0, bq, j0, bk, q, k, v, dout, lse, delta, p, ds);
    gaaw_host_sgemm_serial(f->ctx, GAAW_OP_N, GAAW_OP_N, bq, D, bk, 1.0f, ds, k + j0 * D, 1.0f, dq + i0 * D);
  }
}

/* delta (BH Tq) = rowsum(dout * out), then the key tiles and the query tiles of every
 * head as one list of independent items. out and lse are the whole row's (after the
 * merge of every block it sees), so that p is this block's share of the softmax. */
static void flash_backward_f32(const flash_dims *f, int64_t BH, const float *dout, const float *q, const float *k,
                               const float *v, const float *out, const float *lse, float *delta, float *dq,
                               float *dk, float *dv)
{
  int64_t Tq = f->Tq, Tk = f->Tk, D = f->D, rows = BH * Tq;
  int64_t qtiles = (Tq + TILE - 1) / TILE, ktiles = (Tk + TILE - 1) / TILE, items = BH * (ktiles + qtiles);
#pragma omp parallel for if (rows * D > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    float acc = 0.0f;
    for (int64_t d = 0; d < D; d++) acc += dout[r * D + d] * out[r * D + d];
    delta[r] = acc;
  }
#pragma omp parallel for if (items > 1 && BH * Tq * Tk * D > HOST_PARALLEL_MIN) schedule(dynamic, 1)
  for (int64_t it = 0; it < items; it++) {
    float p[TILE * TILE], ds[TILE * TILE];
    int64_t key_pass = it < BH * ktiles, i = key_pass ? it : it - BH * ktiles, tiles = key_pass ? ktiles : qtiles;
    int64_t h = i / tiles, tile = i % tiles;
    size_t oq = (size_t)(h * Tq * D), ok = (size_t)(h * Tk * D);
    const float *lh = lse + h * Tq, *dh = delta + h * Tq;
    if (key_pass) /* key tile `tile`: its work grows toward the start, which goes first */
      backward_key_tile(f, tile * TILE, q + oq, k + ok, v + ok, dout + oq, lh, dh, dk + ok, dv + ok, p, ds);
    else /* query tile: its work grows toward the end, which goes first */
      backward_query_tile(f, (tiles - 1 - tile) * TILE, q + oq, k + ok, v + ok, dout + oq, lh, dh, dq + oq, p, ds);
  }
}

/* ---------------------------------------------------------------- table entries */

/* The block's sizes from q (BH, Tq, D) and k (BH, Tk, D), and the GEMMs' checks. */
static gaaw_status_t flash_dims_of(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, int64_t q_start, int64_t k_start,
                                   int causal, flash_dims *f, int64_t *BH)
{
  f->ctx = ctx;
  f->D = host_cols(q);
  f->Tq = q->ndim >= 2 ? q->shape[q->ndim - 2] : 1;
  f->Tk = k->ndim >= 2 ? k->shape[k->ndim - 2] : 1;
  f->q_start = q_start, f->k_start = k_start, f->causal = causal;
  f->scale = 1.0f / sqrtf((float)f->D);
  *BH = f->Tq ? host_rows(q) / f->Tq : 0;
  GAAW_CHECK(gaaw_host_check_gemm_sizes(ctx, f->Tq, f->D, f->Tk));
  return GAAW_SUCCESS;
}

gaaw_status_t host_attention_block_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                           int64_t q_start, int64_t k_start, int causal, gaaw_ten out, gaaw_ten lse)
{
  flash_dims f;
  int64_t BH;
  GAAW_CHECK(flash_dims_of(ctx, q, k, q_start, k_start, causal, &f, &BH));
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pq = host_in(&s, q), *pk = host_in(&s, k), *pv = host_in(&s, v);
  float *po = host_out(&s, out), *pl = host_out(&s, lse);
  if (s.status == GAAW_SUCCESS) flash_forward_f32(&f, BH, pq, pk, pv, po, pl);
  return host_stage_end(&s);
}

gaaw_status_t host_attention_block_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k,
                                            gaaw_cten v, gaaw_cten out, gaaw_cten lse, int64_t q_start,
                                            int64_t k_start, int causal, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)
{
  flash_dims f;
  int64_t BH;
  GAAW_CHECK(flash_dims_of(ctx, q, k, q_start, k_start, causal, &f, &BH));
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pdo = host_in(&s, dout), *pq = host_in(&s, q), *pk = host_in(&s, k), *pv = host_in(&s, v);
  const float *po = host_in(&s, out), *pl = host_in(&s, lse);
  float *pdq = host_inout(&s, dq), *pdk = host_inout(&s, dk), *pdv = host_inout(&s, dv);
  float *delta = host_scratch(&s, BH * f.Tq);
  if (s.status == GAAW_SUCCESS) flash_backward_f32(&f, BH, pdo, pq, pk, pv, po, pl, delta, pdq, pdk, pdv);
  return host_stage_end(&s);
}

/* out, lse <- the merge of (out, lse) and (part_out, part_lse), row by row: weights
 * exp(lse - max) of each, a row of -inf on both sides staying out 0, lse -inf. */
gaaw_status_t host_attention_merge(gaaw_context_t ctx, gaaw_ten out, gaaw_ten lse, gaaw_cten part_out,
                                   gaaw_cten part_lse)
{
  int64_t D = host_cols(out), rows = host_rows(out);
  host_stage s;
  host_stage_init(&s, ctx);
  float *po = host_inout(&s, out), *pl = host_inout(&s, lse);
  const float *qo = host_in(&s, part_out), *ql = host_in(&s, part_lse);
  if (s.status == GAAW_SUCCESS) {
#pragma omp parallel for if (rows * D > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
      float a = pl[r], b = ql[r], m = fmaxf(a, b);
      if (m == -INFINITY) continue; /* neither side has seen a key */
      float wa = host_expf(a - m), wb = host_expf(b - m), inv = 1.0f / (wa + wb);
      float *o = po + r * D;
      const float *p = qo + r * D;
      for (int64_t d = 0; d < D; d++) o[d] = (wa * o[d] + wb * p[d]) * inv;
      pl[r] = m + logf(wa + wb);
    }
  }
  return host_stage_end(&s);
}
