/* The windows of a dataset blend: the blend's tree, the on-the-fly permutation,
 * and the batches (gaaw/data.h says what they are). */
#include <math.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/runtime/error.h"
#include "data/data_impl.h"

uint64_t gaaw_data_mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* ---- the blend: a balanced binary tree of two-way splits by rounding */

/* Among the first m samples of a node, how many go to its left half (kept in
 * 0..m whatever the rounding). */
static int64_t left_of(int64_t m, double p)
{
  double left = floor((double)m * p + 0.5);
  return left <= 0 ? 0 : left >= (double)m ? m : (int64_t)left;
}

/* The left half's share of the weight of datasets [lo, hi), split at mid. */
static double left_share(const gaaw_dataset_t d, int lo, int mid, int hi)
{
  double left = 0, all = 0;
  for (int i = lo; i < hi; i++) {
    all += d->weight[i];
    if (i < mid) left += d->weight[i];
  }
  return left / all;
}

void gaaw_blend_pick(const gaaw_dataset_t d, int64_t m, int *dataset, int64_t *k)
{
  int lo = 0, hi = d->count;
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    double p = left_share(d, lo, mid, hi);
    int64_t before = left_of(m, p);
    if (left_of(m + 1, p) > before) { /* sample m is the before-th of the left half */
      hi = mid;
      m = before;
    } else {
      lo = mid;
      m -= before;
    }
  }
  *dataset = lo;
  *k = m;
}

static void counts_of(const gaaw_dataset_t d, int lo, int hi, int64_t n, int64_t *counts)
{
  if (hi - lo == 1) {
    counts[lo] = n;
    return;
  }
  int mid = (lo + hi) / 2;
  int64_t left = left_of(n, left_share(d, lo, mid, hi));
  counts_of(d, lo, mid, left, counts);
  counts_of(d, mid, hi, n - left, counts);
}

void gaaw_blend_counts(const gaaw_dataset_t d, int64_t n, int64_t *counts)
{
  counts_of(d, 0, d->count, n, counts);
}

/* ---- the permutation: a four-round Feistel network on the smallest even number
 * of bits that covers n, walking the cycle until the value falls below n (at most
 * 4 steps expected: the domain is under 4n) */

int64_t gaaw_data_permute(uint64_t key, int64_t n, int64_t i)
{
  int bits = 2;
  while (bits < 62 && ((int64_t)1 << bits) < n) bits += 2;
  int half = bits / 2;
  uint64_t mask = ((uint64_t)1 << half) - 1, x = (uint64_t)i;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; round++) {
      uint64_t next = left ^ (gaaw_data_mix(key ^ (round << 56) ^ right) & mask);
      left = right;
      right = next;
    }
    x = left << half | right;
  } while (x >= (uint64_t)n);
  return (int64_t)x;
}

gaaw_status_t gaaw_dataset_sample_source(gaaw_dataset_t d, uint64_t seed, int64_t n, int *dataset, int64_t *start)
{
  GAAW_ARG_NOT_NULL(NULL, d);
  GAAW_ARG_NOT_NULL(d->ctx, dataset);
  GAAW_ARG_NOT_NULL(d->ctx, start);
  GAAW_ARG_CHECK(d->ctx, n >= 0, "sample %lld must be >= 0", (long long)n);
  int64_t k;
  gaaw_blend_pick(d, n, dataset, &k);
  const gaaw_data_set *s = &d->set[*dataset];
  uint64_t epoch = (uint64_t)(k / s->windows);
  uint64_t key = gaaw_data_mix(gaaw_data_mix(gaaw_data_mix(seed) ^ (uint64_t)*dataset) ^ epoch);
  *start = gaaw_data_permute(key, s->windows, k % s->windows) * d->seq;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_dataset_blend_counts(gaaw_dataset_t d, int64_t n, int64_t *counts)
{
  GAAW_ARG_NOT_NULL(NULL, d);
  GAAW_ARG_NOT_NULL(d->ctx, counts);
  GAAW_ARG_CHECK(d->ctx, n >= 0, "n %lld must be >= 0", (long long)n);
  gaaw_blend_counts(d, n, counts);
  return GAAW_SUCCESS;
}

/* ---- reading windows */

/* Token i of dataset s's stream, as an integer (signed formats may be negative). */
static int64_t token_at(const gaaw_data_set *s, int64_t i)
{
  const unsigned char *p = s->map + s->s.data_offset + (uint64_t)i * (uint64_t)s->s.token_bytes;
  uint64_t v = 0;
  for (int b = s->s.token_bytes - 1; b >= 0; b--) v = v << 8 | p[b];
  int shift = 64 - 8 * s->s.token_bytes;
  if (s->s.is_signed && shift > 0) return (int64_t)(v << shift) >> shift;
  return (int64_t)v;
}

/* tokens = stream[at, at + seq), targets = stream[at + 1, at + seq + 1); a token
 * outside 0..vocab-1 is GAAW_ERR_CORRUPT naming the file and the byte offset. */
static gaaw_status_t read_window(const gaaw_dataset_t d, const gaaw_data_set *s, int64_t at, int32_t *tokens,
                                 int32_t *targets)
{
  for (int t = 0; t <= d->seq; t++) {
    int64_t v = token_at(s, at + t);
    if (v < 0 || v >= d->vocab)
      GAAW_FAIL(d->ctx, GAAW_ERR_CORRUPT, "%s: token %lld at byte offset %llu is outside the vocabulary of %d",
                s->path, (long long)v,
                (unsigned long long)(s->s.data_offset + (uint64_t)(at + t) * (uint64_t)s->s.token_bytes), d->vocab);
    if (t < d->seq) tokens[t] = (int32_t)v;
    if (t > 0) targets[t - 1] = (int32_t)v;
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t check_rows(gaaw_dataset_t d, int64_t first_row, int batch, int32_t *tokens, int32_t *targets)
{
  GAAW_ARG_CHECK(d->ctx, first_row >= 0 && batch >= 1, "rows %lld + %d", (long long)first_row, batch);
  GAAW_ARG_NOT_NULL(d->ctx, tokens);
  GAAW_ARG_NOT_NULL(d->ctx, targets);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_dataset_train_batch(gaaw_dataset_t d, uint64_t seed, int64_t step, int64_t global_batch,
                                       int64_t first_row, int batch, int32_t *tokens, int32_t *targets)
{
  GAAW_ARG_NOT_NULL(NULL, d);
  gaaw_status_t st = check_rows(d, first_row, batch, tokens, targets);
  if (st == GAAW_SUCCESS && (step < 0 || global_batch < first_row + batch))
    st = gaaw_error_raise(d->ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "step %lld and rows %lld..%lld of a global batch of %lld", (long long)step,
                          (long long)first_row, (long long)(first_row + batch - 1), (long long)global_batch);
  uint64_t base = gaaw_data_mix(gaaw_data_mix(seed) ^ (uint64_t)step); /* the historical bytes windows */
  for (int b = 0; st == GAAW_SUCCESS && b < batch; b++) {
    int dataset = 0;
    int64_t start;
    if (d->legacy_bytes) {
      uint64_t h = gaaw_data_mix(base ^ (uint64_t)(first_row + b));
      start = (int64_t)(h % (uint64_t)(d->set[0].train_tokens - d->seq)); /* windows of seq + 1 bytes */
    } else {
      st = gaaw_dataset_sample_source(d, seed, step * global_batch + first_row + b, &dataset, &start);
    }
    if (st == GAAW_SUCCESS)
      st = read_window(d, &d->set[dataset], start, tokens + (size_t)b * d->seq, targets + (size_t)b * d->seq);
  }
  return gaaw_agree_world(d->ctx, st, "reading a training batch", NULL, 0);
}

gaaw_status_t gaaw_dataset_val_batch(gaaw_dataset_t d, int64_t first_row, int64_t rows, int batch, int32_t *tokens,
                                     int32_t *targets)
{
  GAAW_ARG_NOT_NULL(NULL, d);
  gaaw_status_t st = check_rows(d, first_row, batch, tokens, targets);
  if (st == GAAW_SUCCESS && rows < first_row + batch)
    st = gaaw_error_raise(d->ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "rows %lld..%lld of a validation set of %lld", (long long)first_row,
                          (long long)(first_row + batch - 1), (long long)rows);
  int64_t counts[GAAW_DATA_MAX_DATASETS];
  if (st == GAAW_SUCCESS) gaaw_blend_counts(d, rows, counts);
  for (int b = 0; st == GAAW_SUCCESS && b < batch; b++) {
    int dataset;
    int64_t j;
    gaaw_blend_pick(d, first_row + b, &dataset, &j);
    const gaaw_data_set *s = &d->set[dataset];
    uint64_t last = (uint64_t)(s->val_tokens - d->seq - 1); /* the last window's start */
    int64_t r = counts[dataset];
    if (j > r - 1) j = r - 1; /* never, but a rounding must not read past the split */
    int64_t start = r > 1 ? (int64_t)((uint64_t)j * last / (uint64_t)(r - 1)) : 0;
    st = read_window(d, s, s->train_tokens + start, tokens + (size_t)b * d->seq, targets + (size_t)b * d->seq);
  }
  return gaaw_agree_world(d->ctx, st, "reading a validation batch", NULL, 0);
}

gaaw_status_t gaaw_dataset_verify(gaaw_dataset_t d, int i)
{
  GAAW_ARG_NOT_NULL(NULL, d);
  GAAW_ARG_CHECK(d->ctx, i >= 0 && i < d->count, "dataset %d of %d", i, d->count);
  const gaaw_data_set *s = &d->set[i];
  for (int64_t k = 0; k < s->s.tokens; k++) {
    int64_t v = token_at(s, k);
    if (v < 0 || v >= d->vocab)
      GAAW_FAIL(d->ctx, GAAW_ERR_CORRUPT, "%s: token %lld at byte offset %llu is outside the vocabulary of %d",
                s->path, (long long)v, (unsigned long long)(s->s.data_offset + (uint64_t)k * (uint64_t)s->s.token_bytes),
                d->vocab);
  }
  return GAAW_SUCCESS;
}
