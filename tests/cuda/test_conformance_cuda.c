/* The CUDA backend == the host backend (the reference), kernel by kernel, for f32,
 * bf16 and f16: every kernel of include/gaaw/kernels.h runs on the same inputs in a
 * host context and a CUDA context and the outputs are compared (f32 within 1e-4
 * relative, 16-bit types within a few ulp of their rounding; the MoE router and
 * top-k are f32 in every pass). The reductions (GEMM,
 * norm and bias gradients, embedding scatter-add, sum of squares) must also be
 * bit-identical when run twice on the device.
 *
 * Without a CUDA device the same comparisons run with a second host context in the
 * device's place (a check of this test itself), and the test exits 77 (skip): the
 * CUDA backend was not tested.
 *
 * Coverage, with or without a device: every kernel that the CUDA backend's table
 * provides (backends/device.h, both lists; all but synchronize, a wait) must have
 * been called in the device's context, as its kernel trace shows; a CUDA kernel
 * without a case here fails the test even where no GPU is. */
#include <mpi.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "backends/device.h"
#include "backends/runtime/half.h"
#include "tests/harness/test_util.h"

/* ctxs[0]: host (reference); ctxs[1]: the device under test. */
static gaaw_context_t ctxs[2];

/* One tensor of the same shape and dtype in both contexts. */
typedef struct {
  gaaw_tensor_t t[2];
} twin;

#define SHAPE_NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define MAKE(w, dt, ...) make(&(w), (dt), SHAPE_NDIM(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
/* Runs a call in both contexts: C is the context, T(w) the twin's tensor there. */
#define T(w) (&(w).t[s])
#define BOTH(call)                                          \
  for (int s = 0; s < 2; s++) {                             \
    gaaw_context_t C = ctxs[s];                             \
    expect_status_ctx(C, call, GAAW_SUCCESS);               \
  }

static void make(twin *w, gaaw_dtype_t dt, int ndim, const int64_t *shape)
{
  for (int s = 0; s < 2; s++)
    require_ok(ctxs[s], gaaw_tensor_alloc(ctxs[s], dt, ndim, shape, GAAW_MEM_ACTIVATIONS, &w->t[s]));
}

static void release(twin *w)
{
  for (int s = 0; s < 2; s++) gaaw_buffer_free(ctxs[s], &w->t[s].buf);
}

static int64_t numel(const twin *w)
{
  return gaaw_tensor_numel(&w->t[0]);
}

/* Writes values (as f32, converted to the dtype) to both copies. */
static void set_values(twin *w, const float *v)
{
  int64_t n = numel(w);
  gaaw_dtype_t dt = w->t[0].dtype;
  size_t es = gaaw_dtype_size(dt);
  char *raw = malloc((size_t)n * es + 1);
  for (int64_t i = 0; i < n; i++) gaaw_store_f32(raw, dt, i, v[i]);
  for (int s = 0; s < 2; s++) require_ok(ctxs[s], gaaw_buffer_write(ctxs[s], w->t[s].buf, w->t[s].offset, raw, n * es));
  free(raw);
}

static uint64_t seed = 0x9e3779b97f4a7c15ull;
static float uniform(float lo, float hi)
{
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (float)((seed >> 40) * (1.0 / 16777216.0));
}

static void randomize(twin *w, float lo, float hi)
{
  int64_t n = numel(w);
  float *v = malloc((size_t)n * sizeof(float) + 4);
  for (int64_t i = 0; i < n; i++) v[i] = uniform(lo, hi);
  set_values(w, v);
  free(v);
}

/* Integer values lo..hi-1 (tokens, targets). */
static void random_ints(twin *w, int lo, int hi)
{
  int64_t n = numel(w);
  float *v = malloc((size_t)n * sizeof(float) + 4);
  for (int64_t i = 0; i < n; i++) {
    int k = lo + (int)uniform(0, (float)(hi - lo));
    v[i] = (float)(k < hi ? k : hi - 1);
  }
  set_values(w, v);
  free(v);
}

/* Copy s of w as f32 (malloc'ed). */
static float *read_f32(int s, const twin *w)
{
  int64_t n = numel(w);
  gaaw_dtype_t dt = w->t[s].dtype;
  size_t es = gaaw_dtype_size(dt);
  char *raw = malloc((size_t)n * es + 4);
  float *v = malloc((size_t)n * sizeof(float) + 4);
  require_ok(ctxs[s], gaaw_buffer_read(ctxs[s], w->t[s].buf, w->t[s].offset, raw, n * es));
  for (int64_t i = 0; i < n; i++) v[i] = gaaw_load_f32(raw, dt, i);
  free(raw);
  return v;
}

/* Tolerance of a result of dtype: f32 as given; 16-bit types a few ulp of rounding. */
static double tol_of(gaaw_dtype_t dt, double f32_tol)
{
  return dt == GAAW_F32 ? f32_tol : dt == GAAW_BF16 ? 3e-2 : 5e-3;
}

/* The device copy against the host copy. */
static void compare(const twin *w, double f32_tol, const char *what)
{
  float *ref = read_f32(0, w), *got = read_f32(1, w);
  char label[160];
  snprintf(label, sizeof label, "%s (%s)", what, gaaw_dtype_name(w->t[0].dtype));
  expect_close(got, ref, (long)numel(w), tol_of(w->t[0].dtype, f32_tol), label);
  free(ref);
  free(got);
}

/* compare, for a log-sum-exp: -inf (a row that saw no key) where the host has -inf,
 * the other rows within the tolerance. */
static void compare_lse(const twin *w, double f32_tol, const char *what)
{
  float *ref = read_f32(0, w), *got = read_f32(1, w);
  long n = (long)numel(w), mismatch = -1;
  for (long i = 0; i < n; i++) {
    if (isinf(ref[i]) != isinf(got[i]) && mismatch < 0) mismatch = i;
    if (isinf(ref[i]) && isinf(got[i])) ref[i] = got[i] = 0.0f; /* equal: compared as such below */
  }
  expect_true(mismatch < 0, "%s: element %ld is %g on the device, %g on the host", what, mismatch,
              mismatch < 0 ? 0.0 : got[mismatch], mismatch < 0 ? 0.0 : ref[mismatch]);
  expect_close(got, ref, n, f32_tol, what);
  free(ref);
  free(got);
}

/* Runs `reset` then `call` twice in both contexts (so they stay in step) and expects
 * the device to produce the same bits in w both times. */
#define DEVICE_TWICE(w, reset, call, what)                                                      \
  do {                                                                                          \
    float *first = NULL;                                                                        \
    for (int rep = 0; rep < 2; rep++) {                                                         \
      BOTH(reset);                                                                              \
      BOTH(call);                                                                               \
      float *got = read_f32(1, &(w));                                                           \
      if (!first) {                                                                             \
        first = got;                                                                            \
        continue;                                                                               \
      }                                                                                         \
      expect_true(memcmp(first, got, (size_t)numel(&(w)) * sizeof(float)) == 0,                 \
                  "%s: two device runs differ", what);                                          \
      free(got);                                                                                \
    }                                                                                           \
    free(first);                                                                                \
  } while (0)

/* One tensor in both contexts, a view at element offset `at` of a buffer with
 * room for it (offsets 1 and 3 break 16-byte alignment). */
static void make_at(twin *w, gaaw_dtype_t dt, int ndim, const int64_t *shape, int64_t at)
{
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  size_t es = gaaw_dtype_size(dt);
  for (int s = 0; s < 2; s++) {
    gaaw_buffer_t buf;
    require_ok(ctxs[s], gaaw_buffer_alloc(ctxs[s], (size_t)(n + at) * es, GAAW_MEM_ACTIVATIONS, &buf));
    require_ok(ctxs[s], gaaw_tensor_view(buf, (size_t)at * es, dt, ndim, shape, &w->t[s]));
  }
}
#define MAKE_AT(w, dt, at, ...) make_at(&(w), (dt), SHAPE_NDIM(__VA_ARGS__), (int64_t[]){__VA_ARGS__}, (at))

/* ---------------------------------------------------------------- the kernels */

static void check_gemm(gaaw_dtype_t dt)
{
  enum { M = 37, N = 53, K = 71, B = 3 };
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      twin a, b, c;
      if (ta) MAKE(a, dt, K, M); else MAKE(a, dt, M, K);
      if (tb) MAKE(b, dt, N, K); else MAKE(b, dt, K, N);
      MAKE(c, dt, M, N);
      randomize(&a, -1, 1);
      randomize(&b, -1, 1);
      randomize(&c, -1, 1);
      BOTH(gaaw_gemm(C, (gaaw_transpose_t)ta, (gaaw_transpose_t)tb, 0.75f, T(a), T(b), 0.5f, T(c)));
      char what[64];
      snprintf(what, sizeof what, "gemm %c%c", ta ? 'T' : 'N', tb ? 'T' : 'N');
      compare(&c, 1e-4, what);
      DEVICE_TWICE(c, gaaw_fill(C, T(c), 0.0f),
                   gaaw_gemm(C, (gaaw_transpose_t)ta, (gaaw_transpose_t)tb, 1.0f, T(a), T(b), 0.0f, T(c)), what);
      release(&a), release(&b), release(&c);
    }
  twin a, b, c;
  MAKE(a, dt, B, K, M);
  MAKE(b, dt, B, K, N);
  MAKE(c, dt, B, M, N);
  randomize(&a, -1, 1);
  randomize(&b, -1, 1);
  randomize(&c, -1, 1);
  BOTH(gaaw_gemm_batched(C, GAAW_OP_T, GAAW_OP_N, 1.0f, T(a), T(b), 1.0f, T(c)));
  compare(&c, 1e-4, "gemm_batched TN");
  release(&a), release(&b), release(&c);
}

static void check_norms(gaaw_dtype_t dt)
{
  enum { N = 67, C_ = 200 };
  twin x, w, b, y, mean, rstd, dy, dx, dw, db;
  MAKE(x, dt, N, C_), MAKE(y, dt, N, C_), MAKE(dy, dt, N, C_), MAKE(dx, dt, N, C_);
  MAKE(w, dt, C_), MAKE(b, dt, C_), MAKE(dw, dt, C_), MAKE(db, dt, C_);
  MAKE(mean, GAAW_F32, N), MAKE(rstd, GAAW_F32, N);
  randomize(&x, -2, 3), randomize(&w, 0.5f, 1.5f), randomize(&b, -1, 1), randomize(&dy, -1, 1);
  randomize(&dx, -1, 1), randomize(&dw, -1, 1), randomize(&db, -1, 1);
  BOTH(gaaw_layernorm_forward(C, T(x), T(w), T(b), 1e-5f, T(y), T(mean), T(rstd)));
  compare(&y, 1e-4, "layernorm y");
  compare(&mean, 1e-5, "layernorm mean");
  compare(&rstd, 1e-4, "layernorm rstd");
  BOTH(gaaw_layernorm_backward(C, T(dy), T(x), T(w), T(mean), T(rstd), T(dx), T(dw), T(db)));
  compare(&dx, 1e-4, "layernorm dx");
  compare(&dw, 1e-4, "layernorm dw");
  compare(&db, 1e-4, "layernorm db");
  DEVICE_TWICE(dw, gaaw_fill(C, T(dw), 0.0f),
               gaaw_layernorm_backward(C, T(dy), T(x), T(w), T(mean), T(rstd), T(dx), T(dw), T(db)),
               "layernorm dw");
  BOTH(gaaw_rmsnorm_forward(C, T(x), T(w), 1e-5f, T(y), T(rstd)));
  compare(&y, 1e-4, "rmsnorm y");
  compare(&rstd, 1e-4, "rmsnorm rstd");
  BOTH(gaaw_rmsnorm_backward(C, T(dy), T(x), T(w), T(rstd), T(dx), T(dw)));
  compare(&dx, 1e-4, "rmsnorm dx");
  compare(&dw, 1e-4, "rmsnorm dw");
  BOTH(gaaw_bias_backward(C, T(dy), T(db)));
  compare(&db, 1e-4, "bias_backward db");
  DEVICE_TWICE(db, gaaw_fill(C, T(db), 0.0f), gaaw_bias_backward(C, T(dy), T(db)), "bias_backward db");
  BOTH(gaaw_bias_add(C, T(y), T(b)));
  compare(&y, 1e-5, "bias_add");
  twin *all[] = {&x, &w, &b, &y, &mean, &rstd, &dy, &dx, &dw, &db};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

static void check_pointwise(gaaw_dtype_t dt)
{
  enum { N = 45, H = 38 };
  twin x, y, dy, dx, x2, y2, dy2, dx2;
  MAKE(x, dt, N, H), MAKE(y, dt, N, H), MAKE(dy, dt, N, H), MAKE(dx, dt, N, H);
  MAKE(x2, dt, N, 2 * H), MAKE(dx2, dt, N, 2 * H), MAKE(y2, dt, N, H), MAKE(dy2, dt, N, H);
  randomize(&x, -4, 4), randomize(&dy, -1, 1), randomize(&dx, -1, 1);
  randomize(&x2, -4, 4), randomize(&dy2, -1, 1), randomize(&dx2, -1, 1);
  static const gaaw_activation_t kinds[] = {GAAW_ACT_GELU, GAAW_ACT_RELU, GAAW_ACT_TANH, GAAW_ACT_SILU, GAAW_ACT_NONE};
  static const char *const kind_names[] = {"gelu", "relu", "tanh", "silu", "none"};
  for (int k = 0; k < 5; k++) {
    char what[32];
    BOTH(gaaw_activation_forward(C, kinds[k], T(x), T(y)));
    snprintf(what, sizeof what, "%s y", kind_names[k]);
    compare(&y, 1e-5, what);
    BOTH(gaaw_activation_backward(C, kinds[k], T(dy), T(x), T(dx)));
    snprintf(what, sizeof what, "%s dx", kind_names[k]);
    compare(&dx, 1e-5, what);
  }
  twin lw, ll;
  MAKE(lw, GAAW_F32, N, H), MAKE(ll, GAAW_F32, N, H);
  randomize(&lw, 0, 2);
  for (int k = 0; k < GAAW_LOSS_COUNT; k++) {
    char what[32];
    BOTH(gaaw_regression_loss(C, (gaaw_loss_t)k, 0.6f, T(x), T(dy), k == 1 ? NULL : T(lw), T(ll), T(dx)));
    snprintf(what, sizeof what, "regression loss %d", k);
    compare(&ll, 1e-5, what);
    snprintf(what, sizeof what, "regression grad %d", k);
    compare(&dx, 1e-5, what);
  }
  release(&lw), release(&ll);
  BOTH(gaaw_swiglu_forward(C, T(x2), T(y2)));
  compare(&y2, 1e-5, "swiglu y");
  BOTH(gaaw_swiglu_backward(C, T(dy2), T(x2), T(dx2)));
  compare(&dx2, 1e-5, "swiglu dx");
  BOTH(gaaw_add(C, T(x), T(dy), T(y)));
  compare(&y, 1e-6, "add");
  BOTH(gaaw_add(C, T(y), T(dy), T(y))); /* in place */
  compare(&y, 1e-6, "add in place");
  BOTH(gaaw_axpy(C, -0.3f, T(x), T(y)));
  compare(&y, 1e-6, "axpy");
  BOTH(gaaw_scale(C, T(y), 1.7f));
  compare(&y, 1e-6, "scale");
  BOTH(gaaw_fill(C, T(y), 0.3f));
  compare(&y, 0, "fill");
  twin *all[] = {&x, &y, &dy, &dx, &x2, &y2, &dy2, &dx2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

/* The rotary embedding at an awkward D/2 = 19 and positions from 70,000: out of place
 * on 3 of 5 heads (the others copied), in place, and its inverse. */
static void check_rope(gaaw_dtype_t dt)
{
  enum { B = 3, TT = 9, NH = 5, D = 38 };
  float table[TT * D];
  require_ok(NULL, gaaw_rope_table(TT, D, 70000, 10000.0, table));
  twin tab, x, y, dy, dx;
  MAKE(tab, GAAW_F32, TT, D), MAKE(x, dt, B, TT, NH, D), MAKE(y, dt, B, TT, NH, D);
  MAKE(dy, dt, B, TT, NH, D), MAKE(dx, dt, B, TT, NH, D);
  set_values(&tab, table);
  randomize(&x, -2, 2), randomize(&y, 0, 1), randomize(&dy, -1, 1), randomize(&dx, 0, 1);
  BOTH(gaaw_rope_forward(C, T(x), T(tab), 3, T(y)));
  compare(&y, 1e-5, "rope y");
  BOTH(gaaw_rope_backward(C, T(dy), T(tab), 3, T(dx)));
  compare(&dx, 1e-5, "rope dx");
  BOTH(gaaw_rope_forward(C, T(x), T(tab), NH, T(x)));
  compare(&x, 1e-5, "rope in place");
  BOTH(gaaw_rope_backward(C, T(dy), T(tab), 4, T(dy)));
  compare(&dy, 1e-5, "rope backward in place");
  twin *all[] = {&tab, &x, &y, &dy, &dx};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

/* Grouped-query attention's heads at B 2, T 5, 6 query heads over 2 kv heads (groups of 3)
 * and over 6 (multi-head), D 10: cut out, and summed back. */
static void check_qkv_heads(gaaw_dtype_t dt)
{
  enum { B = 2, TT = 5, H = 6, D = 10 };
  for (int kv = 2; kv <= 6; kv += 4) {
    twin qkv, q, k, v, dqkv;
    MAKE(qkv, dt, B, TT, H + 2 * kv, D), MAKE(dqkv, dt, B, TT, H + 2 * kv, D);
    MAKE(q, dt, B, H, TT, D), MAKE(k, dt, B, H, TT, D), MAKE(v, dt, B, H, TT, D);
    randomize(&qkv, -2, 2), randomize(&dqkv, 0, 1);
    randomize(&q, 0, 1), randomize(&k, 0, 1), randomize(&v, 0, 1);
    BOTH(gaaw_qkv_heads_forward(C, T(qkv), kv, T(q), T(k), T(v)));
    compare(&q, 0, "qkv_heads q"), compare(&k, 0, "qkv_heads k"), compare(&v, 0, "qkv_heads v");
    randomize(&q, -1, 1), randomize(&k, -1, 1), randomize(&v, -1, 1);
    BOTH(gaaw_qkv_heads_backward(C, T(q), T(k), T(v), kv, T(dqkv)));
    compare(&dqkv, 1e-6, "qkv_heads dqkv");
    twin *all[] = {&qkv, &q, &k, &v, &dqkv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
  }
}

/* Mixture of experts: the router (softmax and sigmoid, with the z-loss), top-k (a
 * bias, renormalised) on 37 tokens x 8 experts in f32, then the permutations of 23
 * tokens x 2 choices in dt (a counting sort here, one assignment dropped). */
static void check_moe(gaaw_dtype_t dt)
{
  enum { TT = 37, E = 8, K = 2, TP = 23, C = 40 };
  twin logits, scores, lse, ds, dl, idx, w, dw, dscores, bias;
  MAKE(logits, GAAW_F32, TT, E), MAKE(scores, GAAW_F32, TT, E), MAKE(lse, GAAW_F32, TT), MAKE(ds, GAAW_F32, TT, E);
  MAKE(dl, GAAW_F32, TT, E), MAKE(idx, GAAW_I32, TT, K), MAKE(w, GAAW_F32, TT, K), MAKE(dw, GAAW_F32, TT, K);
  MAKE(dscores, GAAW_F32, TT, E), MAKE(bias, GAAW_F32, E);
  randomize(&logits, -3, 3), randomize(&ds, -1, 1), randomize(&dw, -1, 1), randomize(&bias, -0.2f, 0.2f);
  for (int sg = 0; sg <= 1; sg++) {
    BOTH(gaaw_moe_router_forward(C, T(logits), sg, T(scores), T(lse)));
    BOTH(gaaw_moe_router_backward(C, T(logits), T(scores), T(lse), T(ds), sg, 0.1f, T(dl)));
    compare(&scores, 1e-5, sg ? "moe sigmoid scores" : "moe softmax scores");
    compare(&lse, 1e-5, "moe lse");
    compare(&dl, 1e-5, sg ? "moe sigmoid dlogits" : "moe softmax dlogits");
  }
  BOTH(gaaw_moe_topk_forward(C, T(scores), T(bias), 1, T(idx), T(w)));
  BOTH(gaaw_moe_topk_backward(C, T(scores), T(idx), T(w), T(dw), 1, T(dscores)));
  compare(&idx, 0, "moe topk idx"), compare(&w, 1e-5, "moe topk weights"), compare(&dscores, 1e-5, "moe dscores");
  float src[TP * K + 1], pos[TP * K];
  int n = 0;
  for (int e = 0; e < E; e++)
    for (int i = 0; i < TP * K; i++) {
      if ((i / K * 5 + i % K * 3) % E != e) continue;
      pos[i] = i == 9 ? -1.0f : (float)n;
      if (i != 9) src[n++] = (float)(i / K);
    }
  twin x, st, pt, pw, y, dout, xp, dx, out, dy, pdw;
  MAKE(x, dt, TP, C), MAKE(st, GAAW_I32, n), MAKE(pt, GAAW_I32, TP, K), MAKE(pw, GAAW_F32, TP, K);
  MAKE(y, dt, n, C), MAKE(dout, dt, TP, C), MAKE(xp, dt, n, C), MAKE(dx, dt, TP, C), MAKE(out, dt, TP, C);
  MAKE(dy, dt, n, C), MAKE(pdw, GAAW_F32, TP, K);
  set_values(&st, src), set_values(&pt, pos);
  randomize(&x, -2, 2), randomize(&pw, 0, 1), randomize(&y, -2, 2), randomize(&dout, -1, 1);
  BOTH(gaaw_moe_permute(C, T(x), T(st), T(xp)));
  BOTH(gaaw_moe_permute_backward(C, T(y), T(pt), T(dx)));
  BOTH(gaaw_moe_unpermute(C, T(y), T(pt), T(pw), T(out)));
  BOTH(gaaw_moe_unpermute_backward(C, T(dout), T(y), T(pt), T(pw), T(dy), T(pdw)));
  compare(&xp, 0, "moe permuted"), compare(&dx, 1e-6, "moe permute dx"), compare(&out, 1e-5, "moe unpermuted");
  compare(&dy, 1e-6, "moe unpermute dy"), compare(&pdw, 1e-5, "moe unpermute dweights");
  twin *all[] = {&logits, &scores, &lse, &ds, &dl, &idx, &w, &dw, &dscores, &bias, &x, &st, &pt, &pw, &y, &dout,
                 &xp, &dx, &out, &dy, &pdw};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

/* Every element of the device copy is finite. */
static void expect_finite(const twin *w, const char *what)
{
  float *got = read_f32(1, w);
  int64_t bad = -1;
  for (int64_t i = 0; i < numel(w) && bad < 0; i++)
    if (!isfinite(got[i])) bad = i;
  expect_true(bad < 0, "%s (%s): element %lld is %g", what, gaaw_dtype_name(w->t[1].dtype), (long long)bad,
              bad >= 0 ? got[bad] : 0.0);
  free(got);
}

/* Scores q k^T beyond f16's range (16 x 60..80 x 60..75 > 65504) whose scaled values
 * (/ sqrt(16)) are not: the host keeps scores in f32, so must the device. Every
 * row of k is the same, so each row's scores are equal and the probabilities are
 * exact (1 / (t + 1)) however the scores round; dq and dk (sums that cancel) are
 * only required to be finite. */
static void check_attention_large_scores(gaaw_dtype_t dt)
{
  enum { BH = 2, TT = 17, D = 16 };
  twin q, k, v, probs, out, dout, dprobs, dq, dk, dv;
  MAKE(q, dt, BH, TT, D), MAKE(k, dt, BH, TT, D), MAKE(v, dt, BH, TT, D), MAKE(out, dt, BH, TT, D);
  MAKE(dout, dt, BH, TT, D), MAKE(dq, dt, BH, TT, D), MAKE(dk, dt, BH, TT, D), MAKE(dv, dt, BH, TT, D);
  MAKE(probs, dt, BH, TT, TT), MAKE(dprobs, dt, BH, TT, TT);
  randomize(&q, 60, 80), randomize(&v, -1, 1), randomize(&dout, -1, 1);
  randomize(&dq, -1, 1), randomize(&dk, -1, 1), randomize(&dv, -1, 1);
  float kv[BH * TT * D];
  for (int i = 0; i < BH * TT * D; i++) kv[i] = 60.0f + (float)(i % D);
  set_values(&k, kv);
  BOTH(gaaw_attention_forward(C, T(q), T(k), T(v), T(probs), T(out)));
  compare(&probs, 1e-4, "attention probs, large scores");
  compare(&out, 1e-4, "attention out, large scores");
  BOTH(gaaw_attention_backward(C, T(dout), T(q), T(k), T(v), T(probs), T(dprobs), T(dq), T(dk), T(dv)));
  compare(&dv, 1e-4, "attention dv, large scores");
  expect_finite(&dq, "attention dq, large scores");
  expect_finite(&dk, "attention dk, large scores");
  twin *all[] = {&q, &k, &v, &probs, &out, &dout, &dprobs, &dq, &dk, &dv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

static void check_attention(gaaw_dtype_t dt)
{
  enum { BH = 3, TT = 33, D = 16 };
  twin q, k, v, probs, out, dout, dprobs, dq, dk, dv, dx;
  MAKE(q, dt, BH, TT, D), MAKE(k, dt, BH, TT, D), MAKE(v, dt, BH, TT, D), MAKE(out, dt, BH, TT, D);
  MAKE(dout, dt, BH, TT, D), MAKE(dq, dt, BH, TT, D), MAKE(dk, dt, BH, TT, D), MAKE(dv, dt, BH, TT, D);
  MAKE(probs, dt, BH, TT, TT), MAKE(dprobs, dt, BH, TT, TT), MAKE(dx, dt, BH, TT, TT);
  randomize(&q, -1, 1), randomize(&k, -1, 1), randomize(&v, -1, 1), randomize(&dout, -1, 1);
  randomize(&dq, -1, 1), randomize(&dk, -1, 1), randomize(&dv, -1, 1), randomize(&dx, -1, 1);
  BOTH(gaaw_attention_forward(C, T(q), T(k), T(v), T(probs), T(out)));
  compare(&probs, 1e-4, "attention probs");
  compare(&out, 1e-4, "attention out");
  BOTH(gaaw_attention_backward(C, T(dout), T(q), T(k), T(v), T(probs), T(dprobs), T(dq), T(dk), T(dv)));
  compare(&dq, 1e-4, "attention dq");
  compare(&dk, 1e-4, "attention dk");
  compare(&dv, 1e-4, "attention dv");
  /* The softmax alone, on new scores (dprobs was the backends' own workspace):
   * forward, then backward accumulating into dx. */
  randomize(&dprobs, -3, 3);
  BOTH(gaaw_causal_softmax_forward(C, 0.7f, T(dprobs), T(probs)));
  compare(&probs, 1e-5, "causal_softmax y");
  BOTH(gaaw_causal_softmax_backward(C, 0.7f, T(probs), T(dprobs), T(dx)));
  compare(&dx, 1e-5, "causal_softmax dx");
  twin *all[] = {&q, &k, &v, &probs, &out, &dout, &dprobs, &dq, &dk, &dv, &dx};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

/* Ring attention's kernels: 70 queries at position 80 against 300 keys at 0 (more
 * than a block of threads; every row sees some) and 30 keys at 100 (rows 0-19 see
 * none), the two merged, each block's backward from the merged out and lse (into
 * non-zero gradients); and the mask off with a head wider than the block (D 272). */
static void check_attention_block(gaaw_dtype_t dt)
{
  enum { BH = 2, TQ = 70, K0 = 300, K1 = 30, D = 16, WIDE = 272 };
  twin q, k0, v0, k1, v1, out, lse, part, part_lse, dout, dq, dk0, dv0, dk1, dv1, wq, wk, wv, wout, wlse;
  MAKE(q, dt, BH, TQ, D), MAKE(k0, dt, BH, K0, D), MAKE(v0, dt, BH, K0, D), MAKE(k1, dt, BH, K1, D);
  MAKE(v1, dt, BH, K1, D), MAKE(out, dt, BH, TQ, D), MAKE(part, dt, BH, TQ, D), MAKE(dout, dt, BH, TQ, D);
  MAKE(lse, GAAW_F32, BH, TQ), MAKE(part_lse, GAAW_F32, BH, TQ), MAKE(dq, dt, BH, TQ, D);
  MAKE(dk0, dt, BH, K0, D), MAKE(dv0, dt, BH, K0, D), MAKE(dk1, dt, BH, K1, D), MAKE(dv1, dt, BH, K1, D);
  MAKE(wq, dt, 1, 5, WIDE), MAKE(wk, dt, 1, 9, WIDE), MAKE(wv, dt, 1, 9, WIDE), MAKE(wout, dt, 1, 5, WIDE);
  MAKE(wlse, GAAW_F32, 1, 5);
  twin *rnd[] = {&q, &k0, &v0, &k1, &v1, &dout, &dq, &dk0, &dv0, &dk1, &dv1, &wq, &wk, &wv};
  for (size_t i = 0; i < sizeof rnd / sizeof rnd[0]; i++) randomize(rnd[i], -1, 1);
  BOTH(gaaw_attention_block_forward(C, T(q), T(k1), T(v1), 80, 100, GAAW_ATTENTION_CAUSAL, T(part), T(part_lse)));
  compare(&part, 1e-4, "attention_block out (rows 0-19 see no key)");
  compare_lse(&part_lse, 1e-5, "attention_block lse (-inf where a row sees no key)");
  BOTH(gaaw_attention_block_forward(C, T(q), T(k0), T(v0), 80, 0, GAAW_ATTENTION_CAUSAL, T(out), T(lse)));
  BOTH(gaaw_attention_merge(C, T(out), T(lse), T(part), T(part_lse)));
  compare(&out, 1e-4, "attention_merge out");
  compare_lse(&lse, 1e-5, "attention_merge lse");
  BOTH(gaaw_attention_block_backward(C, T(dout), T(q), T(k0), T(v0), T(out), T(lse), 80, 0, GAAW_ATTENTION_CAUSAL,
                                     T(dq), T(dk0), T(dv0)));
  BOTH(gaaw_attention_block_backward(C, T(dout), T(q), T(k1), T(v1), T(out), T(lse), 80, 100, GAAW_ATTENTION_CAUSAL,
                                     T(dq), T(dk1), T(dv1)));
  compare(&dq, 1e-4, "attention_block dq (both blocks)");
  compare(&dk0, 1e-4, "attention_block dk (the first block)");
  compare(&dv0, 1e-4, "attention_block dv (the first block)");
  compare(&dk1, 1e-4, "attention_block dk (the second block)");
  compare(&dv1, 1e-4, "attention_block dv (the second block)");
  BOTH(gaaw_attention_block_forward(C, T(wq), T(wk), T(wv), 0, 500, GAAW_ATTENTION_FULL, T(wout), T(wlse)));
  compare(&wout, 1e-4, "attention_block out, the mask off, D 272");
  compare_lse(&wlse, 1e-5, "attention_block lse, the mask off, D 272");
  twin *all[] = {&q,   &k0,  &v0,  &k1,  &v1,  &out, &lse, &part, &part_lse, &dout,
                 &dq,  &dk0, &dv0, &dk1, &dv1, &wq,  &wk,  &wv,   &wout,     &wlse};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

static void check_embedding_loss(gaaw_dtype_t dt)
{
  /* Tokens 0..69 on the slice [10, 60): repeats and tokens outside the slice. */
  enum { NT = 300, V = 50, START = 10, CC = 40 };
  twin tokens, table, y, dy, dtable;
  MAKE(tokens, GAAW_I32, NT), MAKE(table, dt, V, CC), MAKE(y, dt, NT, CC), MAKE(dy, dt, NT, CC);
  MAKE(dtable, dt, V, CC);
  random_ints(&tokens, 0, 70);
  randomize(&table, -1, 1), randomize(&dy, -1, 1), randomize(&dtable, -1, 1);
  BOTH(gaaw_embedding_forward(C, T(tokens), T(table), START, T(y)));
  compare(&y, 0, "embedding y");
  BOTH(gaaw_embedding_backward(C, T(tokens), T(dy), START, T(dtable)));
  compare(&dtable, 1e-5, "embedding dtable");
  DEVICE_TWICE(dtable, gaaw_fill(C, T(dtable), 0.0f), gaaw_embedding_backward(C, T(tokens), T(dy), START, T(dtable)),
               "embedding dtable");
  twin *emb[] = {&tokens, &table, &y, &dy, &dtable};
  for (size_t i = 0; i < sizeof emb / sizeof emb[0]; i++) release(emb[i]);

  /* One token repeated 1500 times among 2000 (padding): a run across many segments
   * of the device's accumulation, summed in parts. */
  enum { NP = 2000, VP = 64, CP = 33 };
  twin ptok, pdy, ptable;
  MAKE(ptok, GAAW_I32, NP), MAKE(pdy, dt, NP, CP), MAKE(ptable, dt, VP, CP);
  float *tv = malloc(NP * sizeof(float));
  for (int i = 0; i < NP; i++) tv[i] = i % 4 == 3 ? (float)((i * 7) % VP) : 17.0f;
  set_values(&ptok, tv);
  free(tv);
  randomize(&pdy, -1, 1), randomize(&ptable, -1, 1);
  BOTH(gaaw_embedding_backward(C, T(ptok), T(pdy), 0, T(ptable)));
  compare(&ptable, 1e-5, "embedding dtable, a token repeated 1500 times");
  DEVICE_TWICE(ptable, gaaw_fill(C, T(ptable), 0.0f), gaaw_embedding_backward(C, T(ptok), T(pdy), 0, T(ptable)),
               "embedding dtable, repeated token");
  release(&ptok), release(&pdy), release(&ptable);

  /* Cross-entropy on the slice [100, 100 + VL) with targets inside, outside and ignored. */
  enum { NL = 20, VL = 300, VSTART = 100 };
  twin logits, targets, max, sumexp, target, dlogits;
  MAKE(logits, dt, NL, VL), MAKE(dlogits, dt, NL, VL), MAKE(targets, GAAW_I32, NL);
  MAKE(max, GAAW_F32, NL), MAKE(sumexp, GAAW_F32, NL), MAKE(target, GAAW_F32, NL);
  randomize(&logits, -5, 5), randomize(&dlogits, -0.1f, 0.1f);
  random_ints(&targets, -1, 500);
  BOTH(gaaw_row_max(C, T(logits), T(max)));
  compare(&max, 0, "row_max");
  BOTH(gaaw_row_sum_exp(C, T(logits), T(max), T(sumexp)));
  compare(&sumexp, 1e-5, "row_sum_exp");
  BOTH(gaaw_target_logit(C, T(logits), T(targets), VSTART, T(target)));
  compare(&target, 0, "target_logit");
  BOTH(gaaw_cross_entropy_backward(C, T(logits), T(max), T(sumexp), T(targets), VSTART, 1.0f / NL, T(dlogits)));
  compare(&dlogits, 1e-5, "cross_entropy_backward");
  twin *all[] = {&logits, &targets, &max, &sumexp, &target, &dlogits};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

/* Awkward sizes (1, 31, 33, 257, 4097 and 4k+1..4k+3) at element offsets 0, 1
 * and 3: the tails of vectorised loops, grids of one partial block, unaligned
 * addresses (AdamW's 128-bit path must fall back), GEMM alignment keys. */
static void check_awkward(gaaw_dtype_t dt)
{
  static const int64_t sizes[] = {1, 31, 33, 257, 4097, 1025, 1026, 1027};
  static const int64_t offsets[] = {0, 1, 3};
  char what[96];
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
    for (size_t oi = 0; oi < 3; oi++) {
      int64_t n = sizes[si], at = offsets[oi];
      twin x, y, dy, dx, p, g, master, m, v, out;
      MAKE_AT(x, dt, at, n), MAKE_AT(y, dt, at, n), MAKE_AT(dy, dt, at, n), MAKE_AT(dx, dt, at, n);
      MAKE_AT(p, dt, at, n), MAKE_AT(g, dt, at, n), MAKE_AT(master, GAAW_F32, at, n);
      MAKE_AT(m, GAAW_F32, at, n), MAKE_AT(v, GAAW_F32, at, n), MAKE_AT(out, GAAW_F32, at, 1);
      randomize(&x, -3, 3), randomize(&dy, -1, 1), randomize(&dx, -1, 1), randomize(&y, -1, 1);
      snprintf(what, sizeof what, "n=%lld offset %lld", (long long)n, (long long)at);
      BOTH(gaaw_gelu_forward(C, T(x), T(y)));
      compare(&y, 1e-5, what);
      BOTH(gaaw_gelu_backward(C, T(dy), T(x), T(dx)));
      compare(&dx, 1e-5, what);
      BOTH(gaaw_add(C, T(x), T(dy), T(y)));
      compare(&y, 1e-6, what);
      BOTH(gaaw_axpy(C, 0.25f, T(x), T(y)));
      compare(&y, 1e-6, what);
      BOTH(gaaw_scale(C, T(y), -1.5f));
      compare(&y, 1e-6, what);
      BOTH(gaaw_cast(C, T(x), T(master)));
      compare(&master, 0, what);
      BOTH(gaaw_sum_squares(C, T(x), T(out)));
      compare(&out, 1e-5, what);
      randomize(&master, -1, 1), randomize(&g, -2, 2), randomize(&m, -0.1f, 0.1f), randomize(&v, 0, 0.01f);
      gaaw_adamw_args_t args = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                                .grad_scale = 1.0f, .step = 2};
      BOTH(gaaw_adamw_update(C, T(p), T(g), T(master), T(m), T(v), &args));
      compare(&master, 1e-5, what);
      compare(&p, 1e-5, what);
      BOTH(gaaw_fill(C, T(p), 0.5f));
      compare(&p, 0, what);
      twin *all[] = {&x, &y, &dy, &dx, &p, &g, &master, &m, &v, &out};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
    }
  /* rows of awkward widths: norms and the bias kernels; softmax of awkward T */
  for (size_t si = 0; si < 5; si++)
    for (size_t oi = 1; oi < 3; oi++) {
      int64_t Cn = sizes[si], at = offsets[oi], R = 37;
      twin x, w, b, y, mean, rstd, dy, dx, dw, db;
      MAKE_AT(x, dt, at, R, Cn), MAKE_AT(y, dt, at, R, Cn), MAKE_AT(dy, dt, at, R, Cn), MAKE_AT(dx, dt, at, R, Cn);
      MAKE_AT(w, dt, at, Cn), MAKE_AT(b, dt, at, Cn), MAKE_AT(dw, dt, at, Cn), MAKE_AT(db, dt, at, Cn);
      MAKE_AT(mean, GAAW_F32, at, R), MAKE_AT(rstd, GAAW_F32, at, R);
      randomize(&x, -2, 3), randomize(&w, 0.5f, 1.5f), randomize(&b, -1, 1), randomize(&dy, -1, 1);
      randomize(&dx, -1, 1), randomize(&dw, -1, 1), randomize(&db, -1, 1);
      snprintf(what, sizeof what, "norms C=%lld offset %lld", (long long)Cn, (long long)at);
      BOTH(gaaw_layernorm_forward(C, T(x), T(w), T(b), 1e-5f, T(y), T(mean), T(rstd)));
      compare(&y, 1e-4, what);
      BOTH(gaaw_layernorm_backward(C, T(dy), T(x), T(w), T(mean), T(rstd), T(dx), T(dw), T(db)));
      compare(&dx, 1e-4, what), compare(&dw, 1e-4, what), compare(&db, 1e-4, what);
      BOTH(gaaw_rmsnorm_forward(C, T(x), T(w), 1e-5f, T(y), T(rstd)));
      compare(&y, 1e-4, what);
      BOTH(gaaw_rmsnorm_backward(C, T(dy), T(x), T(w), T(rstd), T(dx), T(dw)));
      compare(&dx, 1e-4, what), compare(&dw, 1e-4, what);
      BOTH(gaaw_bias_add(C, T(y), T(b)));
      compare(&y, 1e-5, what);
      BOTH(gaaw_bias_backward(C, T(dy), T(db)));
      compare(&db, 1e-4, what);
      twin *all[] = {&x, &w, &b, &y, &mean, &rstd, &dy, &dx, &dw, &db};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
      if (Cn > 257) continue;
      twin sx, sy, sdy, sdx;
      MAKE_AT(sx, dt, at, 2, Cn, Cn), MAKE_AT(sy, dt, at, 2, Cn, Cn), MAKE_AT(sdy, dt, at, 2, Cn, Cn);
      MAKE_AT(sdx, dt, at, 2, Cn, Cn);
      randomize(&sx, -3, 3), randomize(&sdy, -1, 1), randomize(&sdx, -1, 1);
      snprintf(what, sizeof what, "causal softmax T=%lld offset %lld", (long long)Cn, (long long)at);
      BOTH(gaaw_causal_softmax_forward(C, 0.3f, T(sx), T(sy)));
      compare(&sy, 1e-5, what);
      BOTH(gaaw_causal_softmax_backward(C, 0.3f, T(sy), T(sdy), T(sdx)));
      compare(&sdx, 1e-5, what);
      release(&sx), release(&sy), release(&sdy), release(&sdx);
    }
  /* GEMMs of awkward shapes at unaligned offsets (the cache's alignment keys) */
  static const int64_t shapes[][3] = {{1, 31, 33}, {33, 257, 1}, {31, 1, 257}, {257, 33, 31}, {33, 33, 4097}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
    for (size_t oi = 0; oi < 3; oi++) {
      int64_t M = shapes[k][0], N = shapes[k][1], K = shapes[k][2], at = offsets[oi];
      twin a, b, c;
      MAKE_AT(a, dt, at, M, K), MAKE_AT(b, dt, (at + 1) % 4, K, N), MAKE_AT(c, dt, at, M, N);
      randomize(&a, -1, 1), randomize(&b, -1, 1), randomize(&c, -1, 1);
      snprintf(what, sizeof what, "gemm %lldx%lldx%lld offset %lld", (long long)M, (long long)N, (long long)K,
               (long long)at);
      BOTH(gaaw_gemm(C, GAAW_OP_N, GAAW_OP_N, 1.0f, T(a), T(b), 0.5f, T(c)));
      compare(&c, 1e-4, what);
      release(&a), release(&b), release(&c);
    }
}

/* One tensor above 2^28 elements (GAAW_CONFORMANCE_BIG=1, device only: 64-bit
 * indexing of every grid-stride loop): fill, scale, axpy and the sum of squares. */
static void check_big(gaaw_dtype_t dt)
{
  const int64_t n = ((int64_t)1 << 28) + 3;
  twin x, y, out;
  MAKE(x, dt, n), MAKE(y, dt, n), MAKE(out, GAAW_F32, 1);
  BOTH(gaaw_fill(C, T(x), 0.5f));
  BOTH(gaaw_fill(C, T(y), 1.0f));
  BOTH(gaaw_scale(C, T(x), 3.0f));
  BOTH(gaaw_axpy(C, 2.0f, T(x), T(y)));
  compare(&y, 0, "n = 2^28 + 3: fill, scale, axpy");
  BOTH(gaaw_sum_squares(C, T(y), T(out)));
  compare(&out, 1e-5, "n = 2^28 + 3: sum of squares");
  release(&x), release(&y), release(&out);
}

static void check_utilities(gaaw_dtype_t dt)
{
  enum { NA = 1003, A = 2, B = 5, CC = 3, D = 7 };
  /* AdamW with f32 master weights and params of dt. */
  twin p, g, master, m, v, x, y, out, flag, xi;
  MAKE(p, dt, NA), MAKE(g, dt, NA), MAKE(master, GAAW_F32, NA), MAKE(m, GAAW_F32, NA), MAKE(v, GAAW_F32, NA);
  randomize(&master, -1, 1), randomize(&g, -2, 2), randomize(&m, -0.1f, 0.1f), randomize(&v, 0, 0.01f);
  gaaw_adamw_args_t args = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                            .grad_scale = 0.5f, .step = 3};
  BOTH(gaaw_adamw_update(C, T(p), T(g), T(master), T(m), T(v), &args));
  BOTH(gaaw_synchronize(C));
  compare(&master, 1e-5, "adamw master");
  compare(&p, 1e-5, "adamw params");
  compare(&m, 1e-5, "adamw m");
  compare(&v, 1e-5, "adamw v");
  /* Casts both ways, and the layout permutation. */
  MAKE(x, dt, A, B, CC, D), MAKE(y, dt, A, CC, B, D), MAKE(out, GAAW_F32, 1), MAKE(flag, GAAW_I32, 1);
  MAKE(xi, GAAW_I32, A, B, CC, D);
  randomize(&x, -3, 3);
  BOTH(gaaw_permute_0213(C, T(x), T(y)));
  compare(&y, 0, "permute_0213");
  BOTH(gaaw_cast(C, T(x), T(xi)));
  compare(&xi, 0, "cast to i32");
  BOTH(gaaw_cast(C, T(xi), T(y)));
  compare(&y, 0, "cast from i32");
  BOTH(gaaw_cast(C, T(master), T(p)));
  compare(&p, 0, "cast from f32");
  BOTH(gaaw_sum_squares(C, T(g), T(out)));
  compare(&out, 1e-5, "sum_squares");
  DEVICE_TWICE(out, gaaw_fill(C, T(out), 0.0f), gaaw_sum_squares(C, T(g), T(out)), "sum_squares");
  /* The finite check: 0 for finite data, 1 once an inf is in. */
  BOTH(gaaw_fill(C, T(flag), 0.0f));
  BOTH(gaaw_check_finite(C, T(g), T(flag)));
  compare(&flag, 0, "check_finite (finite)");
  float *gv = read_f32(0, &g);
  gv[NA / 2] = INFINITY;
  set_values(&g, gv);
  free(gv);
  BOTH(gaaw_check_finite(C, T(g), T(flag)));
  compare(&flag, 0, "check_finite (inf)");
  float *fl = read_f32(1, &flag);
  expect_true(fl[0] == 1.0f, "check_finite found no inf (%s): flag %g", gaaw_dtype_name(dt), fl[0]);
  free(fl);
  twin *all[] = {&p, &g, &master, &m, &v, &x, &y, &out, &flag, &xi};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

/* trace: a file for the context's kernel trace, or NULL for none. */
static gaaw_context_t open_context(gaaw_config_t *cfg, const char *backend, const char *trace)
{
  gaaw_context_t ctx = NULL;
  require_ok(NULL, gaaw_config_create(cfg));
  require_ok(NULL, gaaw_config_set(*cfg, "backend", backend));
  if (trace) {
    require_ok(NULL, gaaw_config_set(*cfg, "trace", trace));
    require_ok(NULL, gaaw_config_set(*cfg, "trace_kernels", "yes"));
  }
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, *cfg, &ctx));
  return ctx;
}

/* The whole file at path, NUL-terminated (the caller frees it), or NULL. */
static char *read_whole(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *text = malloc(cap);
  for (size_t got; (got = fread(text + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (n + 1 == cap) text = realloc(text, cap *= 2);
  }
  fclose(f);
  text[n] = '\0';
  return text;
}

/* Every kernel the CUDA table provides appears in the device context's kernel trace
 * (a span named after the table's entry). */
static void check_coverage(const gaaw_device_ops *cuda, const char *trace_path)
{
  if (!cuda) return; /* CUDA not built: nothing to cover */
  char *trace = read_whole(trace_path);
  expect_true(trace != NULL, "cannot read the kernel trace %s", trace_path);
  if (!trace) return;
  int provided = 0;
  /* synchronize is a wait, not a kernel: it leaves no span (check_utilities calls it). */
#define COVERED(name, params)                                                                      \
  if (gaaw_device_provides(cuda, #name) == 1 && strcmp(#name, "synchronize") != 0) {               \
    provided++;                                                                                    \
    expect_true(strstr(trace, "\"name\":\"" #name "\"") != NULL,                                     \
                "the CUDA kernel %s has no conformance case here (never called in the device's "   \
                "context)", #name);                                                                \
  }
  GAAW_DEVICE_KERNEL_LIST(COVERED)
  GAAW_DEVICE_OPTIONAL_KERNEL_LIST(COVERED)
#undef COVERED
  expect_true(provided > 0, "the CUDA table provides no kernel at all");
  free(trace);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  const gaaw_device_ops *cuda = gaaw_device_backend("cuda");
  int devices = 0;
  if (cuda) cuda->device_count(&devices);
  if (devices == 0)
    fprintf(stderr, "test_conformance_cuda: %s; checking the test with host against host, then skipping\n",
            cuda ? "no CUDA device" : "the CUDA backend is not built");
  gaaw_config_t cfgs[2];
  char trace_path[4096];
  const char *tmpdir = getenv("TMPDIR");
  snprintf(trace_path, sizeof trace_path, "%s/gaaw_conformance_cuda_%d.json", tmpdir && *tmpdir ? tmpdir : "/tmp",
           (int)getpid());
  ctxs[0] = open_context(&cfgs[0], "host", NULL);
  ctxs[1] = open_context(&cfgs[1], devices > 0 ? "cuda" : "host", trace_path);
  const gaaw_dtype_t dtypes[] = {GAAW_F32, GAAW_BF16, GAAW_F16};
  for (int i = 0; i < 3; i++) {
    check_gemm(dtypes[i]);
    check_norms(dtypes[i]);
    check_pointwise(dtypes[i]);
    check_rope(dtypes[i]);
    check_qkv_heads(dtypes[i]);
    check_moe(dtypes[i]);
    check_attention(dtypes[i]);
    check_attention_large_scores(dtypes[i]);
    check_attention_block(dtypes[i]);
    check_embedding_loss(dtypes[i]);
    check_utilities(dtypes[i]);
    check_awkward(dtypes[i]);
  }
  const char *big = getenv("GAAW_CONFORMANCE_BIG");
  if (devices > 0 && big && !strcmp(big, "1")) check_big(GAAW_BF16);
  for (int s = 0; s < 2; s++) {
    require_ok(ctxs[s], gaaw_finalize(&ctxs[s]));
    gaaw_config_destroy(&cfgs[s]);
  }
  check_coverage(cuda, trace_path);
  remove(trace_path);
  MPI_Finalize();
  int rc = test_finish("test_conformance_cuda");
  return rc == 0 && devices == 0 ? TEST_SKIP : rc;
}
