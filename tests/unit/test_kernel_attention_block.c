/* The blocked attention of a block of queries against a block of keys
 * (gaaw_attention_block_*, gaaw_attention_merge) on the host, for every float dtype:
 *  - forward out and lse == a double reference for blocks at other positions:
 *    queries after the keys, queries before them (rows that see no key: out 0, lse
 *    -inf), the mask off, Tq != Tk, across tiles, positions past 65,536;
 *  - a sequence cut into uneven blocks, as ring attention cuts it: each query block's
 *    results over the key blocks it sees, merged, == gaaw_flash_attention_forward on
 *    the whole sequence, and the blocks' backward, summed, == its backward;
 *  - the merge of a row that saw nothing on one side, or on both;
 *  - bad input: a mask that is none, a negative start, k of another width. */
#include "tests/unit/test_kernel_util.h"

/* One block problem as doubles: q (BH, Tq, D) at q_start, k and v (BH, Tk, D) at
 * k_start. */
typedef struct {
  long BH, Tq, Tk, D, q_start, k_start;
  int causal;
  const double *q, *k, *v;
} block_ref;

/* out (BH, Tq, D) and lse (BH, Tq) of the block: out 0 and lse -inf for a row that
 * sees no key. */
static void ref_block(const block_ref *r, double *out, double *lse)
{
  long Tq = r->Tq, Tk = r->Tk, D = r->D;
  double scale = 1 / sqrt((double)D), *s = malloc(sizeof(double) * (size_t)(Tk + 1));
  for (long h = 0; h < r->BH; h++)
    for (long i = 0; i < Tq; i++) {
      long seen = r->causal ? r->q_start + i - r->k_start + 1 : Tk;
      seen = seen < 0 ? 0 : seen > Tk ? Tk : seen;
      double max = -INFINITY, sum = 0, *o = out + (h * Tq + i) * D;
      for (long j = 0; j < seen; j++) {
        double acc = 0;
        for (long d = 0; d < D; d++) acc += r->q[(h * Tq + i) * D + d] * r->k[(h * Tk + j) * D + d];
        s[j] = scale * acc;
        max = fmax(max, s[j]);
      }
      for (long j = 0; j < seen; j++) sum += exp(s[j] - max);
      lse[h * Tq + i] = seen ? max + log(sum) : -INFINITY;
      for (long d = 0; d < D; d++) {
        double acc = 0;
        for (long j = 0; j < seen; j++) acc += exp(s[j] - lse[h * Tq + i]) * r->v[(h * Tk + j) * D + d];
        o[d] = acc;
      }
    }
  free(s);
}

static void check_block(gaaw_context_t ctx, gaaw_dtype_t dt, long BH, long Tq, long Tk, long D, long q_start,
                        long k_start, gaaw_attention_mask_t mask, uint64_t *seed)
{
  int64_t qshape[3] = {BH, Tq, D}, kshape[3] = {BH, Tk, D}, lshape[2] = {BH, Tq};
  float *fq = malloc(sizeof(float) * (size_t)(BH * Tq * D)), *fk = malloc(sizeof(float) * (size_t)(BH * Tk * D)),
        *fv = malloc(sizeof(float) * (size_t)(BH * Tk * D));
  gaaw_tensor_t q = kt_random_tensor(ctx, dt, 3, qshape, -1.5f, 1.5f, seed, fq);
  gaaw_tensor_t k = kt_random_tensor(ctx, dt, 3, kshape, -1.5f, 1.5f, seed, fk);
  gaaw_tensor_t v = kt_random_tensor(ctx, dt, 3, kshape, -1.5f, 1.5f, seed, fv);
  gaaw_tensor_t out = kt_new(ctx, dt, 3, qshape), lse = kt_new(ctx, GAAW_F32, 2, lshape);
  double *dq = kt_dup(fq, BH * Tq * D), *dk = kt_dup(fk, BH * Tk * D), *dv = kt_dup(fv, BH * Tk * D);
  double *want = malloc(sizeof(double) * (size_t)(BH * Tq * D)), *want_lse = malloc(sizeof(double) * (size_t)(BH * Tq));
  block_ref r = {BH, Tq, Tk, D, q_start, k_start, mask == GAAW_ATTENTION_CAUSAL, dq, dk, dv};
  ref_block(&r, want, want_lse);
  require_ok(ctx, gaaw_attention_block_forward(ctx, &q, &k, &v, q_start, k_start, mask, &out, &lse));
  const char *dn = gaaw_dtype_name(dt), *mn = mask == GAAW_ATTENTION_CAUSAL ? "causal" : "full";
  kt_expect(ctx, &out, want, kt_tol(dt), "block %s %s out (Tq=%ld at %ld, Tk=%ld at %ld)", dn, mn, Tq, q_start, Tk,
            k_start);
  /* lse: -inf where the row sees nothing, else within the f32 tolerance */
  float *got = malloc(sizeof(float) * (size_t)(BH * Tq));
  kt_download(ctx, &lse, got);
  long bad = -1;
  for (long i = 0; i < BH * Tq && bad < 0; i++)
    if (isinf(want_lse[i]) ? !(isinf(got[i]) && got[i] < 0) : fabs(got[i] - want_lse[i]) > kt_tol(GAAW_F32) * 10)
      bad = i;
  expect_true(bad < 0, "block %s %s lse (Tq=%ld at %ld, Tk=%ld at %ld): row %ld is %g, want %g", dn, mn, Tq, q_start,
              Tk, k_start, bad, bad < 0 ? 0.0 : got[bad], bad < 0 ? 0.0 : want_lse[bad]);
  free(got), free(fq), free(fk), free(fv), free(dq), free(dk), free(dv), free(want), free(want_lse);
  kt_free(ctx, &q), kt_free(ctx, &k), kt_free(ctx, &v), kt_free(ctx, &out), kt_free(ctx, &lse);
}

/* A view of rows [t0, t0 + n) of every head of a (BH, T, D) f32 array, copied into a
 * new tensor; and back, added. */
static gaaw_tensor_t rows_of(gaaw_context_t ctx, const float *all, long BH, long T, long D, long t0, long n)
{
  int64_t shape[3] = {BH, n, D};
  gaaw_tensor_t t = kt_new(ctx, GAAW_F32, 3, shape);
  float *part = malloc(sizeof(float) * (size_t)(BH * n * D));
  for (long h = 0; h < BH; h++) memcpy(part + h * n * D, all + (h * T + t0) * D, sizeof(float) * (size_t)(n * D));
  kt_upload(ctx, &t, part);
  free(part);
  return t;
}

static void add_rows(gaaw_context_t ctx, const gaaw_tensor_t *t, float *all, long BH, long T, long D, long t0, long n)
{
  float *part = malloc(sizeof(float) * (size_t)(BH * n * D));
  kt_download(ctx, t, part);
  for (long h = 0; h < BH; h++)
    for (long x = 0; x < n * D; x++) all[(h * T + t0) * D + x] += part[h * n * D + x];
  free(part);
}

/* A causal sequence of T cut into nb blocks of the given lengths, as ring attention
 * cuts it: each query block's results over the key blocks it sees, merged in the
 * ring's order (its own block first), and the blocks' backward, summed, against the
 * whole sequence's blocked attention. */
static void check_ring(gaaw_context_t ctx, long BH, long D, int nb, const long *len, uint64_t *seed)
{
  long T = 0, start[8];
  for (int b = 0; b < nb; b++) start[b] = T, T += len[b];
  long n = BH * T * D;
  int64_t shape[3] = {BH, T, D}, lshape[2] = {BH, T};
  float *in[4], *whole[5], *ring[5];
  gaaw_tensor_t t[4];
  for (int i = 0; i < 4; i++) {
    in[i] = malloc(sizeof(float) * (size_t)n);
    t[i] = kt_random_tensor(ctx, GAAW_F32, 3, shape, -1.5f, 1.5f, seed, in[i]);
  }
  /* the whole sequence: out, dq, dk, dv (from zero), and lse */
  gaaw_tensor_t out = kt_new(ctx, GAAW_F32, 3, shape), lse = kt_new(ctx, GAAW_F32, 2, lshape), g[3];
  for (int i = 0; i < 5; i++) whole[i] = calloc((size_t)n, sizeof(float)), ring[i] = calloc((size_t)n, sizeof(float));
  for (int i = 0; i < 3; i++) g[i] = kt_new(ctx, GAAW_F32, 3, shape), kt_upload(ctx, &g[i], whole[i + 1]);
  require_ok(ctx, gaaw_flash_attention_forward(ctx, &t[0], &t[1], &t[2], &out, &lse));
  require_ok(ctx, gaaw_flash_attention_backward(ctx, &t[3], &t[0], &t[1], &t[2], &out, &lse, &g[0], &g[1], &g[2]));
  kt_download(ctx, &out, whole[0]);
  for (int i = 0; i < 3; i++) kt_download(ctx, &g[i], whole[i + 1]);
  /* the ring: query block i against its own block, then the blocks before it */
  for (int i = 0; i < nb; i++) {
    int64_t qshape[3] = {BH, len[i], D}, qlshape[2] = {BH, len[i]};
    gaaw_tensor_t qi = rows_of(ctx, in[0], BH, T, D, start[i], len[i]), doi = rows_of(ctx, in[3], BH, T, D, start[i], len[i]);
    gaaw_tensor_t acc = kt_new(ctx, GAAW_F32, 3, qshape), acc_lse = kt_new(ctx, GAAW_F32, 2, qlshape);
    gaaw_tensor_t part = kt_new(ctx, GAAW_F32, 3, qshape), part_lse = kt_new(ctx, GAAW_F32, 2, qlshape);
    for (int step = 0; step <= i; step++) {
      int j = (i - step + nb) % nb;
      gaaw_tensor_t kj = rows_of(ctx, in[1], BH, T, D, start[j], len[j]), vj = rows_of(ctx, in[2], BH, T, D, start[j], len[j]);
      require_ok(ctx, gaaw_attention_block_forward(ctx, &qi, &kj, &vj, start[i], start[j], GAAW_ATTENTION_CAUSAL,
                                                   step ? &part : &acc, step ? &part_lse : &acc_lse));
      if (step) require_ok(ctx, gaaw_attention_merge(ctx, &acc, &acc_lse, &part, &part_lse));
      kt_free(ctx, &kj), kt_free(ctx, &vj);
    }
    add_rows(ctx, &acc, ring[0], BH, T, D, start[i], len[i]);
    /* backward: each key block's share, from the merged out and lse */
    for (int j = 0; j <= i; j++) {
      int64_t kshape[3] = {BH, len[j], D};
      gaaw_tensor_t kj = rows_of(ctx, in[1], BH, T, D, start[j], len[j]), vj = rows_of(ctx, in[2], BH, T, D, start[j], len[j]);
      gaaw_tensor_t dq = kt_new(ctx, GAAW_F32, 3, qshape), dk = kt_new(ctx, GAAW_F32, 3, kshape),
                    dv = kt_new(ctx, GAAW_F32, 3, kshape);
      float *zero = calloc((size_t)(BH * (len[i] > len[j] ? len[i] : len[j]) * D), sizeof(float));
      kt_upload(ctx, &dq, zero), kt_upload(ctx, &dk, zero), kt_upload(ctx, &dv, zero);
      require_ok(ctx, gaaw_attention_block_backward(ctx, &doi, &qi, &kj, &vj, &acc, &acc_lse, start[i], start[j],
                                                    GAAW_ATTENTION_CAUSAL, &dq, &dk, &dv));
      add_rows(ctx, &dq, ring[1], BH, T, D, start[i], len[i]);
      add_rows(ctx, &dk, ring[2], BH, T, D, start[j], len[j]);
      add_rows(ctx, &dv, ring[3], BH, T, D, start[j], len[j]);
      free(zero);
      kt_free(ctx, &kj), kt_free(ctx, &vj), kt_free(ctx, &dq), kt_free(ctx, &dk), kt_free(ctx, &dv);
    }
    kt_free(ctx, &qi), kt_free(ctx, &doi), kt_free(ctx, &acc), kt_free(ctx, &acc_lse), kt_free(ctx, &part),
      kt_free(ctx, &part_lse);
  }
  static const char *names[4] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; i++) {
    char what[128];
    snprintf(what, sizeof what, "ring of %d blocks (T=%ld): %s against the whole sequence's", nb, T, names[i]);
    expect_close(ring[i], whole[i], n, 2e-5, what);
  }
  for (int i = 0; i < 4; i++) kt_free(ctx, &t[i]), free(in[i]);
  for (int i = 0; i < 3; i++) kt_free(ctx, &g[i]);
  for (int i = 0; i < 5; i++) free(whole[i]), free(ring[i]);
  kt_free(ctx, &out), kt_free(ctx, &lse);
}

/* Rows that saw nothing: a side of -inf takes the other side as it is; both -inf
 * stay out 0, lse -inf. */
static void check_merge_empty(gaaw_context_t ctx)
{
  int64_t shape[3] = {1, 3, 2}, lshape[2] = {1, 3};
  gaaw_tensor_t out = kt_new(ctx, GAAW_F32, 3, shape), lse = kt_new(ctx, GAAW_F32, 2, lshape);
  gaaw_tensor_t part = kt_new(ctx, GAAW_F32, 3, shape), part_lse = kt_new(ctx, GAAW_F32, 2, lshape);
  float o[6] = {1, 2, 0, 0, 0, 0}, l[3] = {0.5f, -INFINITY, -INFINITY};
  float p[6] = {0, 0, 3, 4, 0, 0}, pl[3] = {-INFINITY, 0.25f, -INFINITY};
  kt_upload(ctx, &out, o), kt_upload(ctx, &lse, l), kt_upload(ctx, &part, p), kt_upload(ctx, &part_lse, pl);
  require_ok(ctx, gaaw_attention_merge(ctx, &out, &lse, &part, &part_lse));
  kt_download(ctx, &out, o), kt_download(ctx, &lse, l);
  expect_true(o[0] == 1 && o[1] == 2 && l[0] == 0.5f, "merge: a row whose other side saw nothing changed");
  expect_true(o[2] == 3 && o[3] == 4 && l[1] == 0.25f, "merge: a row that saw only the other side is not it");
  expect_true(o[4] == 0 && o[5] == 0 && isinf(l[2]) && l[2] < 0, "merge: a row that saw nothing is (%g %g, %g)", o[4],
              o[5], l[2]);
  kt_free(ctx, &out), kt_free(ctx, &lse), kt_free(ctx, &part), kt_free(ctx, &part_lse);
}

static void check_bad_input(gaaw_context_t ctx)
{
  int64_t qshape[3] = {2, 4, 8}, kshape[3] = {2, 6, 8}, wide[3] = {2, 6, 16}, lshape[2] = {2, 4};
  gaaw_tensor_t q = kt_new(ctx, GAAW_F32, 3, qshape), k = kt_new(ctx, GAAW_F32, 3, kshape),
                v = kt_new(ctx, GAAW_F32, 3, kshape), kw = kt_new(ctx, GAAW_F32, 3, wide),
                out = kt_new(ctx, GAAW_F32, 3, qshape), lse = kt_new(ctx, GAAW_F32, 2, lshape);
  expect_status_ctx(ctx, gaaw_attention_block_forward(ctx, &q, &k, &v, 4, 0, (gaaw_attention_mask_t)7, &out, &lse),
                    GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "mask 7") != NULL, "a bad mask: %s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_attention_block_forward(ctx, &q, &k, &v, -1, 0, GAAW_ATTENTION_CAUSAL, &out, &lse),
                    GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_attention_block_forward(ctx, &q, &kw, &v, 0, 0, GAAW_ATTENTION_FULL, &out, &lse),
                    GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_attention_merge(ctx, &out, &lse, &k, &lse), GAAW_ERR_INVALID_ARG);
  require_ok(ctx, gaaw_attention_block_forward(ctx, &q, &k, &v, 4, 0, GAAW_ATTENTION_FULL, &out, &lse));
  int has = 0, old = 0;
  require_ok(ctx, gaaw_kernel_available(ctx, "attention_merge", &has));
  require_ok(ctx, gaaw_kernel_available(ctx, "flash_attention_backward", &old));
  expect_true(has && old, "the host has attention_merge (%d) and answers to flash_attention_backward (%d)", has, old);
  kt_free(ctx, &q), kt_free(ctx, &k), kt_free(ctx, &v), kt_free(ctx, &kw), kt_free(ctx, &out), kt_free(ctx, &lse);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 41;
  kt_threads(4);
  for (int d = 0; d < 3; d++) {
    check_block(ctx, kt_float_dtypes[d], 2, 5, 7, 4, 7, 0, GAAW_ATTENTION_CAUSAL, &seed); /* queries after the keys */
    check_block(ctx, kt_float_dtypes[d], 2, 70, 130, 8, 40, 20, GAAW_ATTENTION_CAUSAL, &seed); /* across tiles */
  }
  check_block(ctx, GAAW_F32, 3, 9, 5, 8, 0, 4, GAAW_ATTENTION_CAUSAL, &seed);   /* rows 0-3 see no key */
  check_block(ctx, GAAW_F32, 2, 66, 70, 16, 0, 100, GAAW_ATTENTION_CAUSAL, &seed); /* no row sees a key */
  check_block(ctx, GAAW_F32, 2, 70, 130, 8, 0, 500, GAAW_ATTENTION_FULL, &seed); /* the mask off */
  check_block(ctx, GAAW_BF16, 1, 3, 200, 24, 9, 0, GAAW_ATTENTION_FULL, &seed);
  /* positions past 65,536 (16-bit): a long context's late pieces, the diagonal among them */
  check_block(ctx, GAAW_F32, 2, 64, 96, 8, 70000, 69968, GAAW_ATTENTION_CAUSAL, &seed);
  check_block(ctx, GAAW_F32, 2, 40, 40, 8, 131072 + 65536, 131072 + 65536, GAAW_ATTENTION_CAUSAL, &seed);
  const long three[3] = {50, 90, 40}, four[4] = {33, 64, 65, 7};
  check_ring(ctx, 2, 8, 3, three, &seed);
  check_ring(ctx, 1, 16, 4, four, &seed);
  check_merge_empty(ctx);
  check_bad_input(ctx);
  return kt_finish(&ctx, "test_kernel_attention_block");
}
