/* Backend conformance: every kernel x dtype runs on the host backend (the reference)
 * and on the backend under test, two contexts in one process, from the same inputs;
 * outputs must agree within per-dtype tolerances, and two runs on the backend under
 * test must be bit-identical. f16 on a device without native half support must be
 * GAAW_ERR_UNSUPPORTED, exactly.
 *
 * The backend under test: argv[1], else the one this program was built for
 * (CONFORMANCE_BACKEND, e.g. conformance_opencl), else $GAAW_BACKEND. Skips (77) when
 * that backend is not built or finds no device. */
#include "config.h"

#include <mpi.h>
#include <stdint.h>

#include "backends/fused.h"
#include "backends/runtime/context_impl.h"
#include "backends/runtime/half.h"
#include "test_util.h"
#ifdef GAAW_HAVE_OPENCL
#include "backends/opencl/opencl.h"
#endif

#ifndef CONFORMANCE_BACKEND
#define CONFORMANCE_BACKEND ""
#endif

/* Tolerances, relative (absolute below 1): f32 per case; 16-bit outputs are rounded
 * on both sides, so they may differ by one unit in the last place. */
#define TOL_BF16 2e-2
#define TOL_F16 4e-3

/* ---------------------------------------------------------------- one run of a case */

enum { MAX_OUT = 12, MAX_BUF = 16 };

typedef struct {
  gaaw_context_t ctx;
  gaaw_dtype_t dt; /* the float dtype of the case */
  int f16_ok;      /* whether the backend under test computes f16 */
  uint64_t rng;
  int nbuf;
  gaaw_buffer_t bufs[MAX_BUF];
  int nout;
  struct {
    const char *name;
    float *data;
    long n;
  } out[MAX_OUT];
} run_t;

static float uniform(run_t *r, float lo, float hi)
{
  r->rng = r->rng * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (float)((r->rng >> 40) & 0xffffff) / 16777216.0f;
}

/* A tensor of dtype dt and shape, filled from values (or uniform [lo, hi) when NULL). */
static gaaw_tensor_t make(run_t *r, gaaw_dtype_t dt, int ndim, const int64_t *shape, float lo, float hi,
                          const float *values)
{
  gaaw_tensor_t t;
  require_ok(r->ctx, gaaw_tensor_alloc(r->ctx, dt, ndim, shape, GAAW_MEM_ACTIVATIONS, &t));
  r->bufs[r->nbuf++] = t.buf;
  int64_t n = gaaw_tensor_numel(&t);
  size_t es = gaaw_dtype_size(dt);
  char *host = malloc((size_t)(n ? n : 1) * es);
  for (int64_t i = 0; i < n; i++) gaaw_store_f32(host, dt, i, values ? values[i] : uniform(r, lo, hi));
  require_ok(r->ctx, gaaw_buffer_write(r->ctx, t.buf, t.offset, host, (size_t)n * es));
  free(host);
  return t;
}
#define SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define RAND(dt, lo, hi, ...) make(r, (dt), SHAPE(__VA_ARGS__), (lo), (hi), NULL)
#define FROM(dt, values, ...) make(r, (dt), SHAPE(__VA_ARGS__), 0, 0, (values))

/* Records t's elements (as f32) as output name. */
static void keep(run_t *r, const gaaw_tensor_t *t, const char *name)
{
  int64_t n = gaaw_tensor_numel(t);
  size_t es = gaaw_dtype_size(t->dtype);
  char *raw = malloc((size_t)(n ? n : 1) * es);
  require_ok(r->ctx, gaaw_buffer_read(r->ctx, t->buf, t->offset, raw, (size_t)n * es));
  float *f = malloc((size_t)(n ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) f[i] = gaaw_load_f32(raw, t->dtype, i);
  free(raw);
  r->out[r->nout].name = name;
  r->out[r->nout].data = f;
  r->out[r->nout].n = (long)n;
  r->nout++;
}

static void run_free(run_t *r)
{
  for (int i = 0; i < r->nbuf; i++) gaaw_buffer_free(r->ctx, &r->bufs[i]);
  for (int i = 0; i < r->nout; i++) free(r->out[i].data);
  r->nbuf = r->nout = 0;
}

/* Runs a kernel call; a failure ends the case with its status. */
#define CALL(call)                                  \
  do {                                              \
    gaaw_status_t call_st_ = (call);                \
    if (call_st_ != GAAW_SUCCESS) return call_st_; \
  } while (0)

/* ---------------------------------------------------------------- the cases */

#define DT r->dt
#define CTX r->ctx

static gaaw_status_t case_gemm(run_t *r, gaaw_transpose_t ta, gaaw_transpose_t tb, float beta)
{
  int64_t m = 33, n = 17, k = 45;
  gaaw_tensor_t a = ta == GAAW_OP_N ? RAND(DT, -1, 1, m, k) : RAND(DT, -1, 1, k, m);
  gaaw_tensor_t b = tb == GAAW_OP_N ? RAND(DT, -1, 1, k, n) : RAND(DT, -1, 1, n, k);
  gaaw_tensor_t c = RAND(DT, -1, 1, m, n);
  if (beta == 0.0f) CALL(gaaw_fill(CTX, &c, NAN)); /* beta == 0 ignores c, nan included */
  CALL(gaaw_gemm(CTX, ta, tb, 0.75f, &a, &b, beta, &c));
  keep(r, &c, "c");
  return GAAW_SUCCESS;
}
static gaaw_status_t case_gemm_nn(run_t *r) { return case_gemm(r, GAAW_OP_N, GAAW_OP_N, 0.0f); }
static gaaw_status_t case_gemm_nt(run_t *r) { return case_gemm(r, GAAW_OP_N, GAAW_OP_T, 1.0f); }
static gaaw_status_t case_gemm_tn(run_t *r) { return case_gemm(r, GAAW_OP_T, GAAW_OP_N, -0.5f); }
static gaaw_status_t case_gemm_tt(run_t *r) { return case_gemm(r, GAAW_OP_T, GAAW_OP_T, 0.0f); }

static gaaw_status_t case_gemm_batched(run_t *r)
{
  gaaw_tensor_t a = RAND(DT, -1, 1, 2, 3, 11, 9), b = RAND(DT, -1, 1, 2, 3, 11, 13), c = RAND(DT, -1, 1, 6, 9, 13);
  CALL(gaaw_gemm_batched(CTX, GAAW_OP_T, GAAW_OP_N, 1.0f, &a, &b, 0.5f, &c));
  keep(r, &c, "c");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_layernorm(run_t *r)
{
  int64_t N = 19, C = 150;
  gaaw_tensor_t x = RAND(DT, -2, 3, N, C), w = RAND(DT, 0.5f, 1.5f, C), b = RAND(DT, -1, 1, C), y = RAND(DT, 0, 1, N, C);
  gaaw_tensor_t mean = RAND(GAAW_F32, 0, 1, N), rstd = RAND(GAAW_F32, 0, 1, N);
  CALL(gaaw_layernorm_forward(CTX, &x, &w, &b, 1e-5f, &y, &mean, &rstd));
  keep(r, &y, "y");
  keep(r, &mean, "mean");
  keep(r, &rstd, "rstd");
  gaaw_tensor_t dy = RAND(DT, -1, 1, N, C), dx = RAND(DT, -1, 1, N, C), dw = RAND(DT, -1, 1, C), db = RAND(DT, -1, 1, C);
  CALL(gaaw_layernorm_backward(CTX, &dy, &x, &w, &mean, &rstd, &dx, &dw, &db));
  keep(r, &dx, "dx");
  keep(r, &dw, "dw");
  keep(r, &db, "db");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_rmsnorm(run_t *r)
{
  int64_t N = 23, C = 70;
  gaaw_tensor_t x = RAND(DT, -2, 3, N, C), w = RAND(DT, 0.5f, 1.5f, C), y = RAND(DT, 0, 1, N, C);
  gaaw_tensor_t rstd = RAND(GAAW_F32, 0, 1, N);
  CALL(gaaw_rmsnorm_forward(CTX, &x, &w, 1e-5f, &y, &rstd));
  keep(r, &y, "y");
  keep(r, &rstd, "rstd");
  gaaw_tensor_t dy = RAND(DT, -1, 1, N, C), dx = RAND(DT, -1, 1, N, C), dw = RAND(DT, -1, 1, C);
  CALL(gaaw_rmsnorm_backward(CTX, &dy, &x, &w, &rstd, &dx, &dw));
  keep(r, &dx, "dx");
  keep(r, &dw, "dw");
  return GAAW_SUCCESS;
}

/* An elementwise activation, forward and (accumulating) backward. */
static gaaw_status_t case_activation(run_t *r, gaaw_activation_t act)
{
  gaaw_tensor_t x = RAND(DT, -4, 4, 7, 301), y = RAND(DT, 0, 1, 7, 301);
  gaaw_tensor_t dy = RAND(DT, -1, 1, 7, 301), dx = RAND(DT, -1, 1, 7, 301);
  CALL(gaaw_activation_forward(CTX, act, &x, &y));
  CALL(gaaw_activation_backward(CTX, act, &dy, &x, &dx));
  keep(r, &y, "y");
  keep(r, &dx, "dx");
  return GAAW_SUCCESS;
}
static gaaw_status_t case_gelu(run_t *r) { return case_activation(r, GAAW_ACT_GELU); }
static gaaw_status_t case_relu(run_t *r) { return case_activation(r, GAAW_ACT_RELU); }
static gaaw_status_t case_tanh(run_t *r) { return case_activation(r, GAAW_ACT_TANH); }
static gaaw_status_t case_silu(run_t *r) { return case_activation(r, GAAW_ACT_SILU); }
static gaaw_status_t case_identity(run_t *r) { return case_activation(r, GAAW_ACT_NONE); }

/* Each regression loss, weighted (f32 weights, some 0) and not. */
static gaaw_status_t case_regression(run_t *r)
{
  static const char *const names[GAAW_LOSS_COUNT][2][2] = {
    {{"mse loss", "mse grad"}, {"mse loss weighted", "mse grad weighted"}},
    {{"l1 loss", "l1 grad"}, {"l1 loss weighted", "l1 grad weighted"}},
    {{"huber loss", "huber grad"}, {"huber loss weighted", "huber grad weighted"}}};
  gaaw_tensor_t p = RAND(DT, -2, 2, 13, 29), t = RAND(DT, -2, 2, 13, 29), w = RAND(GAAW_F32, 0, 2, 13, 29);
  for (int k = 0; k < GAAW_LOSS_COUNT; k++)
    for (int weighted = 0; weighted < 2; weighted++) {
      gaaw_tensor_t l = RAND(GAAW_F32, 0, 1, 13, 29), g = RAND(DT, 0, 1, 13, 29);
      CALL(gaaw_regression_loss(CTX, (gaaw_loss_t)k, 0.6f, &p, &t, weighted ? &w : NULL, &l, &g));
      keep(r, &l, names[k][weighted][0]);
      keep(r, &g, names[k][weighted][1]);
    }
  return GAAW_SUCCESS;
}

static gaaw_status_t case_swiglu(run_t *r)
{
  gaaw_tensor_t x = RAND(DT, -4, 4, 9, 2 * 37), y = RAND(DT, 0, 1, 9, 37);
  gaaw_tensor_t dy = RAND(DT, -1, 1, 9, 37), dx = RAND(DT, -1, 1, 9, 2 * 37);
  CALL(gaaw_swiglu_forward(CTX, &x, &y));
  CALL(gaaw_swiglu_backward(CTX, &dy, &x, &dx));
  keep(r, &y, "y");
  keep(r, &dx, "dx");
  return GAAW_SUCCESS;
}

/* The rotary embedding: out of place on 3 of 5 heads (the others copied), then in
 * place, then its inverse, at an awkward D/2 = 19 and positions from 70,000. */
static gaaw_status_t case_rope(run_t *r)
{
  enum { B = 2, T = 7, NH = 5, D = 38 };
  float table[T * D];
  CALL(gaaw_rope_table(T, D, 70000, 10000.0, table));
  gaaw_tensor_t tab = FROM(GAAW_F32, table, T, D);
  gaaw_tensor_t x = RAND(DT, -2, 2, B, T, NH, D), y = RAND(DT, 0, 1, B, T, NH, D);
  gaaw_tensor_t dy = RAND(DT, -1, 1, B, T, NH, D), dx = RAND(DT, 0, 1, B, T, NH, D);
  CALL(gaaw_rope_forward(CTX, &x, &tab, 3, &y));
  CALL(gaaw_rope_backward(CTX, &dy, &tab, 3, &dx));
  keep(r, &y, "y");
  keep(r, &dx, "dx");
  CALL(gaaw_rope_forward(CTX, &x, &tab, NH, &x));
  CALL(gaaw_rope_backward(CTX, &dy, &tab, 4, &dy));
  keep(r, &x, "x in place");
  keep(r, &dy, "dy in place");
  return GAAW_SUCCESS;
}

/* Grouped-query attention's heads: 6 query heads over 2 kv heads (groups of 3), D 10. */
static gaaw_status_t case_qkv_heads(run_t *r)
{
  enum { B = 2, T = 5, H = 6, KV = 2, D = 10 };
  gaaw_tensor_t qkv = RAND(DT, -2, 2, B, T, H + 2 * KV, D), dqkv = RAND(DT, 0, 1, B, T, H + 2 * KV, D);
  gaaw_tensor_t q = RAND(DT, 0, 1, B, H, T, D), k = RAND(DT, 0, 1, B, H, T, D), v = RAND(DT, 0, 1, B, H, T, D);
  CALL(gaaw_qkv_heads_forward(CTX, &qkv, KV, &q, &k, &v));
  keep(r, &q, "q");
  keep(r, &k, "k");
  keep(r, &v, "v");
  gaaw_tensor_t dq = RAND(DT, -1, 1, B, H, T, D), dk = RAND(DT, -1, 1, B, H, T, D), dv = RAND(DT, -1, 1, B, H, T, D);
  CALL(gaaw_qkv_heads_backward(CTX, &dq, &dk, &dv, KV, &dqkv));
  keep(r, &dqkv, "dqkv");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_elementwise(run_t *r)
{
  gaaw_tensor_t y = RAND(DT, -1, 1, 40, 33), b = RAND(DT, -1, 1, 33), a = RAND(DT, -2, 2, 40, 33);
  gaaw_tensor_t db = RAND(DT, -1, 1, 33);
  CALL(gaaw_bias_add(CTX, &y, &b));
  CALL(gaaw_add(CTX, &a, &y, &y)); /* y aliases b */
  CALL(gaaw_axpy(CTX, -0.3f, &a, &y));
  CALL(gaaw_scale(CTX, &a, 1.7f));
  CALL(gaaw_bias_backward(CTX, &y, &db));
  keep(r, &y, "y");
  keep(r, &a, "a");
  keep(r, &db, "db");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_softmax(run_t *r)
{
  gaaw_tensor_t x = RAND(DT, -3, 3, 2, 3, 70, 70), y = RAND(DT, 0, 1, 2, 3, 70, 70);
  gaaw_tensor_t dy = RAND(DT, -1, 1, 6, 70, 70), dx = RAND(DT, -1, 1, 6, 70, 70);
  CALL(gaaw_causal_softmax_forward(CTX, 0.4f, &x, &y));
  CALL(gaaw_causal_softmax_backward(CTX, 0.4f, &y, &dy, &dx));
  keep(r, &y, "y");
  keep(r, &dx, "dx");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_attention(run_t *r)
{
  int64_t BH = 3, T = 11, D = 8;
  gaaw_tensor_t q = RAND(DT, -1, 1, BH, T, D), k = RAND(DT, -1, 1, BH, T, D), v = RAND(DT, -1, 1, BH, T, D);
  gaaw_tensor_t probs = RAND(DT, 0, 1, BH, T, T), out = RAND(DT, 0, 1, BH, T, D);
  CALL(gaaw_attention_forward(CTX, &q, &k, &v, &probs, &out));
  keep(r, &probs, "probs");
  keep(r, &out, "out");
  gaaw_tensor_t dout = RAND(DT, -1, 1, BH, T, D), dprobs = RAND(DT, 0, 1, BH, T, T);
  gaaw_tensor_t dq = RAND(DT, -1, 1, BH, T, D), dk = RAND(DT, -1, 1, BH, T, D), dv = RAND(DT, -1, 1, BH, T, D);
  CALL(gaaw_attention_backward(CTX, &dout, &q, &k, &v, &probs, &dprobs, &dq, &dk, &dv));
  keep(r, &dq, "dq");
  keep(r, &dk, "dk");
  keep(r, &dv, "dv");
  return GAAW_SUCCESS;
}

/* The attention on the QKV projection's layout (backends/fused.h): T = 70 crosses the
 * host's 64-row blocks; 2 sequences of 3 heads; dprobs and dqkv start as nan (the
 * kernel overwrites both). */
static gaaw_status_t case_attention_qkv(run_t *r)
{
  int64_t B = 2, T = 70, H = 3, D = 8;
  gaaw_tensor_t qkv = RAND(DT, -1.5f, 1.5f, B, T, 3 * H, D), probs = RAND(DT, 0, 1, B * H, T, T);
  gaaw_tensor_t out = RAND(DT, 0, 1, B, T, H, D);
  CALL(gaaw_attention_qkv_forward(CTX, &qkv, &probs, &out));
  keep(r, &probs, "probs");
  keep(r, &out, "out");
  gaaw_tensor_t dout = RAND(DT, -1, 1, B, T, H, D), dprobs = RAND(DT, 0, 1, B * H, T, T);
  gaaw_tensor_t dqkv = RAND(DT, 0, 1, B, T, 3 * H, D);
  CALL(gaaw_fill(CTX, &dprobs, NAN));
  CALL(gaaw_fill(CTX, &dqkv, NAN));
  CALL(gaaw_attention_qkv_backward(CTX, &dout, &qkv, &probs, &dprobs, &dqkv));
  keep(r, &dqkv, "dqkv");
  return GAAW_SUCCESS;
}

/* The blocked attention: T = 70 crosses the host's 64-row tiles and OpenCL's 64-item
 * groups, with a partial last block; backward accumulates into non-zero gradients. */
static gaaw_status_t case_flash_attention(run_t *r)
{
  int64_t BH = 3, T = 70, D = 8;
  gaaw_tensor_t q = RAND(DT, -1.5f, 1.5f, BH, T, D), k = RAND(DT, -1.5f, 1.5f, BH, T, D);
  gaaw_tensor_t v = RAND(DT, -1, 1, BH, T, D), out = RAND(DT, 0, 1, BH, T, D), lse = RAND(GAAW_F32, 0, 1, BH, T);
  CALL(gaaw_flash_attention_forward(CTX, &q, &k, &v, &out, &lse));
  keep(r, &out, "out");
  keep(r, &lse, "lse");
  gaaw_tensor_t dout = RAND(DT, -1, 1, BH, T, D);
  gaaw_tensor_t dq = RAND(DT, -1, 1, BH, T, D), dk = RAND(DT, -1, 1, BH, T, D), dv = RAND(DT, -1, 1, BH, T, D);
  CALL(gaaw_flash_attention_backward(CTX, &dout, &q, &k, &v, &out, &lse, &dq, &dk, &dv));
  keep(r, &dq, "dq");
  keep(r, &dk, "dk");
  keep(r, &dv, "dv");
  return GAAW_SUCCESS;
}

/* Ring attention's kernels: 70 queries at position 80 against 100 keys at 0 (every
 * row sees some) and 30 keys at 100 (rows 0-19 see none), the two merged, each
 * block's backward from the merged out and lse; and the mask off. */
static gaaw_status_t case_attention_block(run_t *r)
{
  int64_t BH = 2, Tq = 70, D = 8;
  gaaw_tensor_t q = RAND(DT, -1.5f, 1.5f, BH, Tq, D), dout = RAND(DT, -1, 1, BH, Tq, D);
  gaaw_tensor_t k0 = RAND(DT, -1.5f, 1.5f, BH, 100, D), v0 = RAND(DT, -1, 1, BH, 100, D);
  gaaw_tensor_t k1 = RAND(DT, -1.5f, 1.5f, BH, 30, D), v1 = RAND(DT, -1, 1, BH, 30, D);
  gaaw_tensor_t out = RAND(DT, 0, 1, BH, Tq, D), lse = RAND(GAAW_F32, 0, 1, BH, Tq);
  gaaw_tensor_t part = RAND(DT, 0, 1, BH, Tq, D), part_lse = RAND(GAAW_F32, 0, 1, BH, Tq);
  CALL(gaaw_attention_block_forward(CTX, &q, &k1, &v1, 80, 100, GAAW_ATTENTION_CAUSAL, &part, &part_lse));
  keep(r, &part, "the second block's out");
  CALL(gaaw_attention_block_forward(CTX, &q, &k0, &v0, 80, 0, GAAW_ATTENTION_CAUSAL, &out, &lse));
  CALL(gaaw_attention_merge(CTX, &out, &lse, &part, &part_lse));
  keep(r, &out, "merged out");
  keep(r, &lse, "merged lse");
  gaaw_tensor_t dq = RAND(DT, -1, 1, BH, Tq, D), dk0 = RAND(DT, -1, 1, BH, 100, D), dv0 = RAND(DT, -1, 1, BH, 100, D);
  gaaw_tensor_t dk1 = RAND(DT, -1, 1, BH, 30, D), dv1 = RAND(DT, -1, 1, BH, 30, D);
  CALL(gaaw_attention_block_backward(CTX, &dout, &q, &k0, &v0, &out, &lse, 80, 0, GAAW_ATTENTION_CAUSAL, &dq, &dk0,
                                     &dv0));
  CALL(gaaw_attention_block_backward(CTX, &dout, &q, &k1, &v1, &out, &lse, 80, 100, GAAW_ATTENTION_CAUSAL, &dq, &dk1,
                                     &dv1));
  keep(r, &dq, "dq");
  keep(r, &dk0, "dk0");
  keep(r, &dv0, "dv0");
  keep(r, &dk1, "dk1");
  keep(r, &dv1, "dv1");
  CALL(gaaw_attention_block_forward(CTX, &q, &k1, &v1, 0, 500, GAAW_ATTENTION_FULL, &part, &part_lse));
  keep(r, &part, "the mask off: out");
  keep(r, &part_lse, "the mask off: lse");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_embedding(run_t *r)
{
  /* vocabulary slice [10, 30); tokens repeat and fall outside it */
  float tokens[25];
  for (int i = 0; i < 25; i++) tokens[i] = (float)((i * 7) % 37);
  gaaw_tensor_t tok = FROM(GAAW_I32, tokens, 25), table = RAND(DT, -1, 1, 20, 70), y = RAND(DT, 0, 1, 25, 70);
  gaaw_tensor_t dy = RAND(DT, -1, 1, 25, 70), dtable = RAND(DT, -1, 1, 20, 70);
  CALL(gaaw_embedding_forward(CTX, &tok, &table, 10, &y));
  CALL(gaaw_embedding_backward(CTX, &tok, &dy, 10, &dtable));
  keep(r, &y, "y");
  keep(r, &dtable, "dtable");
  return GAAW_SUCCESS;
}

/* The MoE router (softmax and sigmoid, with the z-loss's gradient) and top-k (a
 * bias, renormalised; a row of equal scores) on 37 tokens x 8 experts, all f32; the
 * scores then cast to the case's dtype. */
static gaaw_status_t case_moe_router(run_t *r)
{
  enum { T = 37, E = 8, K = 2 };
  gaaw_tensor_t logits = RAND(GAAW_F32, -3, 3, T, E), scores = RAND(GAAW_F32, 0, 1, T, E);
  gaaw_tensor_t lse = RAND(GAAW_F32, 0, 1, T), ds = RAND(GAAW_F32, -1, 1, T, E), dl = RAND(GAAW_F32, 0, 1, T, E);
  gaaw_tensor_t sig = RAND(GAAW_F32, 0, 1, T, E), dls = RAND(GAAW_F32, 0, 1, T, E);
  CALL(gaaw_moe_router_forward(CTX, &logits, 0, &scores, &lse));
  CALL(gaaw_moe_router_backward(CTX, &logits, &scores, &lse, &ds, 0, 0.1f, &dl));
  CALL(gaaw_moe_router_forward(CTX, &logits, 1, &sig, &lse));
  CALL(gaaw_moe_router_backward(CTX, &logits, &sig, &lse, &ds, 1, 0.1f, &dls));
  keep(r, &scores, "softmax scores");
  keep(r, &lse, "lse");
  keep(r, &dl, "softmax dlogits");
  keep(r, &sig, "sigmoid scores");
  keep(r, &dls, "sigmoid dlogits");
  float v[T * E];
  for (int i = 0; i < T * E; i++) v[i] = i / E == 5 ? 0.125f : uniform(r, 0, 1); /* row 5: all equal */
  gaaw_tensor_t bias = RAND(GAAW_F32, -0.2f, 0.2f, E), tk = FROM(GAAW_F32, v, T, E);
  gaaw_tensor_t idx = RAND(GAAW_I32, 0, 1, T, K), w = RAND(GAAW_F32, 0, 1, T, K), dw = RAND(GAAW_F32, -1, 1, T, K);
  gaaw_tensor_t dscores = RAND(GAAW_F32, 0, 1, T, E), cast = RAND(DT, 0, 1, T, E);
  CALL(gaaw_moe_topk_forward(CTX, &tk, &bias, 1, &idx, &w));
  CALL(gaaw_moe_topk_backward(CTX, &tk, &idx, &w, &dw, 1, &dscores));
  keep(r, &idx, "topk idx");
  keep(r, &w, "topk weights");
  keep(r, &dscores, "topk dscores");
  CALL(gaaw_cast(CTX, &scores, &cast));
  keep(r, &cast, "scores cast");
  return GAAW_SUCCESS;
}

/* The permutations of 23 tokens x 2 choices into 8 experts' order (a counting sort
 * here, one assignment dropped, a src outside the tokens) and back, weighted. */
static gaaw_status_t case_moe_permute(run_t *r)
{
  enum { T = 23, K = 2, E = 8, C = 40 };
  float src[T * K + 1], pos[T * K];
  int n = 0;
  for (int e = 0; e < E; e++)
    for (int i = 0; i < T * K; i++) {
      if ((i / K * 5 + i % K * 3) % E != e) continue;
      pos[i] = i == 9 ? -1.0f : (float)n;
      if (i != 9) src[n++] = (float)(i / K);
    }
  src[n] = (float)T;
  gaaw_tensor_t x = RAND(DT, -2, 2, T, C), st = FROM(GAAW_I32, src, n + 1), pt = FROM(GAAW_I32, pos, T, K);
  gaaw_tensor_t w = RAND(GAAW_F32, 0, 1, T, K), y = RAND(DT, -2, 2, n + 1, C), dout = RAND(DT, -1, 1, T, C);
  gaaw_tensor_t xp = RAND(DT, 0, 1, n + 1, C), dx = RAND(DT, 0, 1, T, C), out = RAND(DT, 0, 1, T, C);
  gaaw_tensor_t dy = RAND(DT, -1, 1, n + 1, C), dw = RAND(GAAW_F32, 0, 1, T, K);
  CALL(gaaw_moe_permute(CTX, &x, &st, &xp));
  CALL(gaaw_moe_permute_backward(CTX, &y, &pt, &dx));
  CALL(gaaw_moe_unpermute(CTX, &y, &pt, &w, &out));
  CALL(gaaw_moe_unpermute_backward(CTX, &dout, &y, &pt, &w, &dy, &dw));
  keep(r, &xp, "permuted");
  keep(r, &dx, "permute dx");
  keep(r, &out, "unpermuted");
  keep(r, &dy, "unpermute dy");
  keep(r, &dw, "unpermute dweights");
  return GAAW_SUCCESS;
}

/* Cross-entropy on the slice [50, 350) of 13 rows; targets inside, outside and
 * ignored (-1); fused: the one-pass kernel (backends/fused.h), else the four. */
static gaaw_status_t cross_entropy(run_t *r, int fused)
{
  int64_t N = 13, V = 300;
  float targets[13];
  for (int i = 0; i < 13; i++) targets[i] = i == 4 ? -1.0f : (float)(20 + i * 31);
  gaaw_tensor_t logits = RAND(DT, -5, 5, N, V), tgt = FROM(GAAW_I32, targets, N);
  gaaw_tensor_t max = RAND(GAAW_F32, 0, 1, N), sumexp = RAND(GAAW_F32, 0, 1, N), target = RAND(GAAW_F32, 0, 1, N);
  gaaw_tensor_t dlogits = RAND(DT, -1, 1, N, V);
  if (fused) {
    CALL(gaaw_cross_entropy_forward(CTX, &logits, &tgt, 50, 1.0f / 13, &max, &sumexp, &target, &dlogits));
  } else {
    CALL(gaaw_row_max(CTX, &logits, &max));
    CALL(gaaw_row_sum_exp(CTX, &logits, &max, &sumexp));
    CALL(gaaw_target_logit(CTX, &logits, &tgt, 50, &target));
    CALL(gaaw_cross_entropy_backward(CTX, &logits, &max, &sumexp, &tgt, 50, 1.0f / 13, &dlogits));
  }
  keep(r, &max, "max");
  keep(r, &sumexp, "sumexp");
  keep(r, &target, "target");
  keep(r, &dlogits, "dlogits");
  return GAAW_SUCCESS;
}
static gaaw_status_t case_cross_entropy(run_t *r) { return cross_entropy(r, 0); }
static gaaw_status_t case_cross_entropy_fused(run_t *r) { return cross_entropy(r, 1); }

/* The fused kernels (backends/fused.h; the host runs them bit-identically to the
 * unfused sequences, tests/unit/test_kernel_fused). */
static gaaw_status_t case_bias_gelu(run_t *r)
{
  gaaw_tensor_t u = RAND(DT, -4, 4, 9, 301), b = RAND(DT, -1, 1, 301), a = RAND(DT, 0, 1, 9, 301);
  CALL(gaaw_bias_gelu_forward(CTX, &u, &b, &a));
  keep(r, &u, "u");
  keep(r, &a, "a");
  return GAAW_SUCCESS;
}

/* dx starts as nan: the kernel overwrites it (the fused one and the fill + backward
 * a backend without it runs) */
static gaaw_status_t case_gelu_backward_set(run_t *r)
{
  gaaw_tensor_t dy = RAND(DT, -1, 1, 9, 301), x = RAND(DT, -4, 4, 9, 301), dx = RAND(DT, 0, 1, 9, 301);
  CALL(gaaw_fill(CTX, &dx, NAN));
  CALL(gaaw_gelu_backward_set(CTX, &dy, &x, &dx));
  keep(r, &dx, "dx");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_bias_residual_add(run_t *r)
{
  gaaw_tensor_t x = RAND(DT, -2, 2, 40, 33), y = RAND(DT, -1, 1, 40, 33), b = RAND(DT, -1, 1, 33);
  gaaw_tensor_t out = RAND(DT, 0, 1, 40, 33);
  CALL(gaaw_bias_residual_add(CTX, &x, &y, &b, &out));
  keep(r, &out, "out");
  CALL(gaaw_bias_residual_add(CTX, &x, &y, &b, &y)); /* out aliases y */
  keep(r, &y, "out = y");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_add_layernorm(run_t *r)
{
  int64_t N = 19, C = 150;
  gaaw_tensor_t x = RAND(DT, -2, 3, N, C), y = RAND(DT, -1, 1, N, C), bias = RAND(DT, -1, 1, C);
  gaaw_tensor_t w = RAND(DT, 0.5f, 1.5f, C), b = RAND(DT, -1, 1, C), x2 = RAND(DT, 0, 1, N, C);
  gaaw_tensor_t h = RAND(DT, 0, 1, N, C), mean = RAND(GAAW_F32, 0, 1, N), rstd = RAND(GAAW_F32, 0, 1, N);
  for (int with_bias = 1; with_bias >= 0; with_bias--) {
    CALL(gaaw_add_layernorm_forward(CTX, &x, &y, with_bias ? &bias : NULL, &w, &b, 1e-5f, &x2, &h, &mean, &rstd));
    keep(r, &x2, with_bias ? "x2 (bias)" : "x2");
    keep(r, &h, with_bias ? "h (bias)" : "h");
    keep(r, &mean, with_bias ? "mean (bias)" : "mean");
    keep(r, &rstd, with_bias ? "rstd (bias)" : "rstd");
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t case_adamw(run_t *r, int with_master)
{
  int64_t n = 1000;
  gaaw_adamw_args_t args = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3};
  gaaw_tensor_t params = RAND(with_master ? DT : GAAW_F32, -1, 1, n), grads = RAND(DT, -1, 1, n);
  gaaw_tensor_t master = RAND(GAAW_F32, -1, 1, n), m = RAND(GAAW_F32, -0.1f, 0.1f, n), v = RAND(GAAW_F32, 0, 0.01f, n);
  CALL(gaaw_adamw_update(CTX, &params, &grads, with_master ? &master : NULL, &m, &v, &args));
  keep(r, &params, "params");
  keep(r, &m, "m");
  keep(r, &v, "v");
  if (with_master) keep(r, &master, "master");
  return GAAW_SUCCESS;
}
static gaaw_status_t case_adamw_master(run_t *r) { return case_adamw(r, 1); }
static gaaw_status_t case_adamw_plain(run_t *r) { return case_adamw(r, 0); }

/* Casts from dt to every dtype and back from every dtype to dt (i32 with integers). */
static gaaw_status_t case_cast(run_t *r)
{
  float ints[50];
  for (int i = 0; i < 50; i++) ints[i] = (float)(i * 37 % 101 - 50);
  for (int other = 0; other < GAAW_DTYPE_COUNT; other++) {
    if (other == GAAW_F16 && !r->f16_ok) continue; /* checked by the f16 round */
    gaaw_tensor_t x = RAND(DT, -70, 70, 5, 10), y = RAND((gaaw_dtype_t)other, 0, 1, 50);
    gaaw_tensor_t xi = FROM((gaaw_dtype_t)other, ints, 50), yi = RAND(DT, 0, 1, 50);
    CALL(gaaw_cast(CTX, &x, &y));
    CALL(gaaw_cast(CTX, &xi, &yi));
    keep(r, &y, gaaw_dtype_name((gaaw_dtype_t)other));
    keep(r, &yi, "from other");
    run_t tmp = *r; /* free this round's buffers, keep the outputs */
    tmp.nout = 0;
    run_free(&tmp);
    r->nbuf = 0;
  }
  return GAAW_SUCCESS;
}

/* Permutes dt and i32 tensors (exact moves). */
static gaaw_status_t case_permute(run_t *r)
{
  gaaw_tensor_t x = RAND(DT, -1, 1, 2, 3, 5, 7), y = RAND(DT, 0, 1, 2, 5, 3, 7);
  float ints[105];
  for (int i = 0; i < 105; i++) ints[i] = (float)(i * 1000 + 7);
  gaaw_tensor_t xi = FROM(GAAW_I32, ints, 3, 5, 1, 7), yi = RAND(GAAW_I32, 0, 1, 3, 1, 5, 7);
  CALL(gaaw_permute_0213(CTX, &x, &y));
  CALL(gaaw_permute_0213(CTX, &xi, &yi));
  keep(r, &y, "y");
  keep(r, &yi, "y i32");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_sum_squares(run_t *r)
{
  gaaw_tensor_t x = RAND(DT, -1, 1, 10001), out = RAND(GAAW_F32, 0, 1, 1);
  CALL(gaaw_sum_squares(CTX, &x, &out));
  keep(r, &out, "out");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_check_finite(run_t *r)
{
  float vals[600];
  for (int i = 0; i < 600; i++) vals[i] = (float)i - 300.0f;
  gaaw_tensor_t clean = FROM(DT, vals, 600);
  vals[517] = INFINITY;
  gaaw_tensor_t inf = FROM(DT, vals, 600);
  vals[517] = 0.0f;
  vals[3] = NAN;
  gaaw_tensor_t nan = FROM(DT, vals, 600);
  float zero = 0.0f;
  gaaw_tensor_t f0 = FROM(GAAW_I32, &zero, 1), f1 = FROM(GAAW_I32, &zero, 1), f2 = FROM(GAAW_I32, &zero, 1);
  CALL(gaaw_check_finite(CTX, &clean, &f0));
  CALL(gaaw_check_finite(CTX, &inf, &f1));
  CALL(gaaw_check_finite(CTX, &nan, &f2));
  keep(r, &f0, "clean flag");
  keep(r, &f1, "inf flag");
  keep(r, &f2, "nan flag");
  return GAAW_SUCCESS;
}

static gaaw_status_t case_fill(run_t *r)
{
  gaaw_tensor_t x = RAND(DT, 0, 1, 3, 333), xi = RAND(GAAW_I32, 0, 1, 77);
  gaaw_tensor_t part = x; /* a view at an offset */
  part.offset += 10 * gaaw_dtype_size(DT);
  part.ndim = 1;
  part.shape[0] = 500;
  CALL(gaaw_fill(CTX, &part, -3.7f));
  CALL(gaaw_fill(CTX, &xi, -3.7f));
  CALL(gaaw_synchronize(CTX));
  keep(r, &x, "x");
  keep(r, &xi, "x i32");
  return GAAW_SUCCESS;
}

typedef gaaw_status_t (*case_fn)(run_t *r);
static const struct {
  const char *name;
  case_fn fn;
  double tol_f32; /* GEMM and reductions over long rows are looser */
} cases[] = {
  {"gemm NN", case_gemm_nn, 1e-5},      {"gemm NT", case_gemm_nt, 1e-5},
  {"gemm TN", case_gemm_tn, 1e-5},      {"gemm TT", case_gemm_tt, 1e-5},
  {"gemm_batched", case_gemm_batched, 1e-5}, {"layernorm", case_layernorm, 1e-4},
  {"rmsnorm", case_rmsnorm, 1e-4},      {"gelu", case_gelu, 1e-5},
  {"relu", case_relu, 1e-5},            {"tanh", case_tanh, 1e-5},
  {"silu", case_silu, 1e-5},            {"none (identity)", case_identity, 0},
  {"swiglu", case_swiglu, 1e-5},        {"elementwise", case_elementwise, 1e-5},
  {"rope", case_rope, 1e-5},
  {"qkv_heads", case_qkv_heads, 1e-6},
  {"regression losses", case_regression, 1e-5},
  {"causal_softmax", case_softmax, 1e-5}, {"attention", case_attention, 1e-5},
  {"flash_attention", case_flash_attention, 1e-5},
  {"attention_block (ring)", case_attention_block, 1e-5},
  {"embedding", case_embedding, 1e-5},  {"cross_entropy", case_cross_entropy, 1e-5},
  {"moe router and top-k", case_moe_router, 1e-5}, {"moe permutations", case_moe_permute, 1e-5},
  {"adamw master", case_adamw_master, 1e-5}, {"adamw", case_adamw_plain, 1e-5},
  {"cast", case_cast, 0},               {"permute_0213", case_permute, 0},
  {"sum_squares", case_sum_squares, 1e-5}, {"check_finite", case_check_finite, 0},
  {"fill", case_fill, 0},
  {"bias_gelu (fused)", case_bias_gelu, 1e-5}, {"gelu_backward_set (fused)", case_gelu_backward_set, 1e-5},
  {"add_layernorm (fused)", case_add_layernorm, 1e-4}, {"attention_qkv (fused)", case_attention_qkv, 1e-5},
  {"cross_entropy (fused)", case_cross_entropy_fused, 1e-5},
  {"bias_residual_add (fused)", case_bias_residual_add, 1e-5},
};

/* ---------------------------------------------------------------- driver */

static gaaw_status_t run_case(gaaw_context_t ctx, int c, gaaw_dtype_t dt, int f16_ok, run_t *r)
{
  memset(r, 0, sizeof *r);
  r->ctx = ctx;
  r->dt = dt;
  r->f16_ok = f16_ok;
  r->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(c + 1) + (uint64_t)dt;
  return cases[c].fn(r);
}

/* Whether the backend under test computes f16 (a device with native half support). */
static int target_has_f16(gaaw_context_t ctx)
{
#ifdef GAAW_HAVE_OPENCL
  if (strcmp(ctx->device->name, "opencl") == 0) return ((ocl_state *)ctx->device_state)->has_fp16;
#endif
  (void)ctx;
  return 1;
}

static void check_case(gaaw_context_t host, gaaw_context_t dev, int c, gaaw_dtype_t dt)
{
  char what[160];
  run_t ref, got, again;
  int f16_ok = target_has_f16(dev);
  require_ok(host, run_case(host, c, dt, f16_ok, &ref));
  gaaw_status_t st = run_case(dev, c, dt, f16_ok, &got);
  if (dt == GAAW_F16 && !f16_ok) {
    snprintf(what, sizeof what, "%s f16 without native half support", cases[c].name);
    expect_true(st == GAAW_ERR_UNSUPPORTED, "%s: got %s, expected GAAW_ERR_UNSUPPORTED", what,
                gaaw_status_name(st));
    expect_true(strstr(gaaw_last_error(dev), "cl_khr_fp16") || strcmp(dev->device->name, "opencl") != 0,
                "%s: the report should name cl_khr_fp16: %s", what, gaaw_last_error(dev));
  } else {
    expect_status_ctx(dev, st, GAAW_SUCCESS);
    if (st == GAAW_SUCCESS) {
      require_ok(dev, run_case(dev, c, dt, f16_ok, &again));
      double tol = dt == GAAW_BF16 ? TOL_BF16 : dt == GAAW_F16 ? TOL_F16 : cases[c].tol_f32;
      expect_true(got.nout == ref.nout, "%s %s: %d outputs, expected %d", cases[c].name, gaaw_dtype_name(dt),
                  got.nout, ref.nout);
      for (int o = 0; o < got.nout && o < ref.nout; o++) {
        snprintf(what, sizeof what, "%s %s: %s", cases[c].name, gaaw_dtype_name(dt), ref.out[o].name);
        expect_close(got.out[o].data, ref.out[o].data, ref.out[o].n, tol, what);
        expect_true(memcmp(got.out[o].data, again.out[o].data, (size_t)got.out[o].n * sizeof(float)) == 0,
                    "%s: two runs differ (not bit-identical)", what);
      }
      run_free(&again);
    }
  }
  run_free(&ref);
  run_free(&got);
}

/* Bad input on the backend under test: a tensor of another context, a missing
 * OpenCL platform or device. */
static void check_bad_input(gaaw_context_t host, gaaw_context_t dev, const char *backend)
{
  int64_t shape[1] = {8};
  gaaw_tensor_t x, y;
  require_ok(host, gaaw_tensor_alloc(host, GAAW_F32, 1, shape, GAAW_MEM_ACTIVATIONS, &x));
  require_ok(dev, gaaw_tensor_alloc(dev, GAAW_F32, 1, shape, GAAW_MEM_ACTIVATIONS, &y));
  expect_status_ctx(dev, gaaw_gelu_forward(dev, &x, &y), GAAW_ERR_INVALID_ARG);
  void *p = NULL;
  expect_status(gaaw_buffer_host_ptr(y.buf, &p), strcmp(backend, "host") ? GAAW_ERR_UNSUPPORTED : GAAW_SUCCESS);
  gaaw_buffer_free(host, &x.buf);
  gaaw_buffer_free(dev, &y.buf);
  if (strcmp(backend, "opencl") == 0) {
    const char *bad[][2] = {{"opencl_platform", "no-such-platform"}, {"opencl_device", "999"}};
    for (int i = 0; i < 2; i++) {
      gaaw_config_t cfg;
      gaaw_context_t ctx = NULL;
      require_ok(NULL, gaaw_config_create(&cfg));
      require_ok(NULL, gaaw_config_set(cfg, "backend", "opencl"));
      require_ok(NULL, gaaw_config_set(cfg, bad[i][0], bad[i][1]));
      expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
      expect_true(strstr(gaaw_last_error(NULL), bad[i][0]) != NULL, "the report should name %s: %s", bad[i][0],
                  gaaw_last_error(NULL));
      gaaw_finalize(&ctx);
      gaaw_config_destroy(&cfg);
    }
  }
}

/* On one backend, the blocked attention and the (T, T) matrix kernel agree from the
 * same inputs (not bit for bit: their sums run in other orders) within FLASH_TOL
 * (relative, absolute below 1), out and the accumulated dq, dk, dv; f32 and bf16. */
#define FLASH_TOL 2e-5
static void check_flash_vs_matrix(gaaw_context_t ctx, const char *backend)
{
  for (int dt = GAAW_F32; dt <= GAAW_BF16; dt++) {
    run_t rr = {.ctx = ctx, .dt = (gaaw_dtype_t)dt, .rng = 77}, *r = &rr;
    int64_t BH = 2, T = 100, D = 16;
    gaaw_tensor_t q = RAND(DT, -1.5f, 1.5f, BH, T, D), k = RAND(DT, -1.5f, 1.5f, BH, T, D);
    gaaw_tensor_t v = RAND(DT, -1, 1, BH, T, D), dout = RAND(DT, -1, 1, BH, T, D);
    gaaw_tensor_t out[2], g[2][3], lse = RAND(GAAW_F32, 0, 1, BH, T);
    gaaw_tensor_t probs = RAND(DT, 0, 1, BH, T, T), dprobs = RAND(DT, 0, 1, BH, T, T);
    for (int p = 0; p < 2; p++) {
      r->rng = 5; /* both paths start from the same gradients */
      out[p] = RAND(DT, 0, 1, BH, T, D);
      for (int i = 0; i < 3; i++) g[p][i] = RAND(DT, -1, 1, BH, T, D);
    }
    require_ok(ctx, gaaw_flash_attention_forward(ctx, &q, &k, &v, &out[0], &lse));
    require_ok(ctx, gaaw_flash_attention_backward(ctx, &dout, &q, &k, &v, &out[0], &lse, &g[0][0], &g[0][1],
                                                  &g[0][2]));
    require_ok(ctx, gaaw_attention_forward(ctx, &q, &k, &v, &probs, &out[1]));
    require_ok(ctx, gaaw_attention_backward(ctx, &dout, &q, &k, &v, &probs, &dprobs, &g[1][0], &g[1][1], &g[1][2]));
    for (int p = 0; p < 2; p++) {
      keep(r, &out[p], "out");
      for (int i = 0; i < 3; i++) keep(r, &g[p][i], i == 0 ? "dq" : i == 1 ? "dk" : "dv");
    }
    for (int o = 0; o < 4; o++) {
      char what[128];
      snprintf(what, sizeof what, "%s %s: blocked vs matrix attention, %s", backend, gaaw_dtype_name(DT),
               r->out[o].name);
      expect_close(r->out[o].data, r->out[o + 4].data, r->out[o].n, dt == GAAW_F32 ? FLASH_TOL : TOL_BF16, what);
    }
    run_free(r);
  }
}

static gaaw_status_t open_ctx(const char *backend, gaaw_context_t *ctx)
{
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", backend));
  gaaw_status_t st = gaaw_init(MPI_COMM_WORLD, cfg, ctx);
  gaaw_config_destroy(&cfg);
  return st;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  const char *backend = argc > 1 ? argv[1] : *CONFORMANCE_BACKEND ? CONFORMANCE_BACKEND : getenv("GAAW_BACKEND");
  if (!backend || !*backend) backend = "host";
  gaaw_context_t host = NULL, dev = NULL;
  require_ok(NULL, open_ctx("host", &host));
  gaaw_status_t st = open_ctx(backend, &dev);
  if (st == GAAW_ERR_UNSUPPORTED) {
    fprintf(stderr, "conformance: skipping backend %s: %s\n", backend, gaaw_last_error(NULL));
    gaaw_finalize(&host);
    MPI_Finalize();
    return TEST_SKIP;
  }
  require_ok(NULL, st);
  for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
    for (int dt = GAAW_F32; dt <= GAAW_F16; dt++) check_case(host, dev, c, (gaaw_dtype_t)dt);
  check_bad_input(host, dev, backend);
  check_flash_vs_matrix(host, "host");
  check_flash_vs_matrix(dev, backend);
  int has = 0;
  static const char *const blocked[] = {"attention_block_forward", "attention_block_backward", "attention_merge",
                                        "flash_attention_backward"};
  for (int i = 0; i < 4; i++) {
    require_ok(dev, gaaw_kernel_available(dev, blocked[i], &has));
    expect_true(has == 1, "%s: gaaw_kernel_available(%s) = %d", backend, blocked[i], has);
  }
  require_ok(dev, gaaw_kernel_available(dev, "gelu_backward_set", &has));
  expect_true(has == (strcmp(backend, "cuda") != 0), "%s: gaaw_kernel_available(gelu_backward_set) = %d", backend,
              has);
  require_ok(dev, gaaw_kernel_available(dev, "attention_qkv_backward", &has));
  expect_true(has == (strcmp(backend, "cuda") != 0), "%s: gaaw_kernel_available(attention_qkv_backward) = %d",
              backend, has);
  gaaw_finalize(&dev);
  gaaw_finalize(&host);
  MPI_Finalize();
  char name[64];
  snprintf(name, sizeof name, "conformance %s", backend);
  return test_finish(name);
}
