/* The public kernel functions (include/gaaw/kernels.h): every argument is checked
 * here, once for all backends, then the call goes to the context's device table.
 *
 * Shapes: "(N, C)" in the header means any tensor whose last extent is C; N is the
 * product of the others, so (B, T, C) activations pass as (B*T, C). Likewise a
 * "(B, m, k)" batch of matrices is (..., m, k) with B the product of the leading
 * extents. The float tensors of one call share one dtype (f32, bf16 or f16), except
 * for the AdamW parameters and gradients and the cast, whose dtypes are free. */
#include <math.h>
#include <stdio.h>

#include "backends/runtime/context_impl.h"

/* ---------------------------------------------------------------- checks */

enum {
  MASK_F32 = 1u << GAAW_F32,
  MASK_I32 = 1u << GAAW_I32,
  MASK_FLOAT = (1u << GAAW_F32) | (1u << GAAW_BF16) | (1u << GAAW_F16),
  MASK_ANY = MASK_FLOAT | MASK_I32
};

static const char *mask_text(unsigned mask)
{
  switch (mask) {
  case MASK_F32: return "f32";
  case MASK_I32: return "i32";
  case MASK_FLOAT: return "f32, bf16 or f16";
  default: return "f32, bf16, f16 or i32";
  }
}

/* A tensor's shape as text, e.g. "(2, 3, 4)". */
typedef struct {
  char s[112];
} shape_text;

static shape_text shape_of(const gaaw_tensor_t *t)
{
  shape_text out;
  int len = snprintf(out.s, sizeof out.s, "(");
  for (int i = 0; i < t->ndim && i < GAAW_MAX_DIMS && len < (int)sizeof out.s; i++)
    len += snprintf(out.s + len, sizeof out.s - len, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (len < (int)sizeof out.s) snprintf(out.s + len, sizeof out.s - len, ")");
  return out;
}

/* Product of the extents before the last (rows) and before the last two (batch). */
static int64_t lead(const gaaw_tensor_t *t)
{
  int64_t r = 1;
  for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
  return r;
}
static int64_t last(const gaaw_tensor_t *t)
{
  return t->shape[t->ndim - 1];
}
static int64_t batch_of(const gaaw_tensor_t *t)
{
  int64_t r = 1;
  for (int i = 0; i < t->ndim - 2; i++) r *= t->shape[i];
  return r;
}
static int64_t second_last(const gaaw_tensor_t *t)
{
  return t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
}

static gaaw_status_t check_ctx(gaaw_context_t ctx)
{
  GAAW_ARG_NOT_NULL(NULL, ctx);
  return GAAW_SUCCESS;
}

/* t: a well-formed view, inside a buffer of ctx, with a dtype from mask. */
static gaaw_status_t check_tensor(gaaw_context_t ctx, const gaaw_tensor_t *t, const char *name, unsigned mask)
{
  GAAW_ARG_CHECK(ctx, t != NULL, "tensor %s must not be NULL", name);
  GAAW_ARG_CHECK(ctx, t->buf != NULL, "tensor %s has no buffer", name);
  GAAW_ARG_CHECK(ctx, t->buf->ctx == ctx, "tensor %s lies in a buffer of another context", name);
  GAAW_ARG_CHECK(ctx, t->ndim >= 1 && t->ndim <= GAAW_MAX_DIMS, "tensor %s has ndim %d; must be in 1..%d", name,
                 t->ndim, GAAW_MAX_DIMS);
  GAAW_ARG_CHECK(ctx, (unsigned)t->dtype < GAAW_DTYPE_COUNT && (mask >> t->dtype & 1u),
                 "tensor %s has dtype %s (%d); expected %s", name, gaaw_dtype_name(t->dtype), (int)t->dtype,
                 mask_text(mask));
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) {
    GAAW_ARG_CHECK(ctx, t->shape[i] >= 0, "tensor %s has shape %s with a negative extent", name, shape_of(t).s);
    GAAW_ARG_CHECK(ctx, t->shape[i] == 0 || n <= INT64_MAX / t->shape[i], "tensor %s: shape %s overflows", name,
                   shape_of(t).s);
    n *= t->shape[i];
  }
  size_t es = gaaw_dtype_size(t->dtype), bytes;
  GAAW_CHECK(gaaw_buffer_size(t->buf, &bytes));
  GAAW_ARG_CHECK(ctx, t->offset % es == 0, "tensor %s: offset %zu is not a multiple of the %s size %zu", name,
                 t->offset, gaaw_dtype_name(t->dtype), es);
  GAAW_ARG_CHECK(ctx, t->offset <= bytes && (uint64_t)n <= (bytes - t->offset) / es,
                 "tensor %s %s of %s at offset %zu overruns its %zu-byte buffer", name, shape_of(t).s,
                 gaaw_dtype_name(t->dtype), t->offset, bytes);
  return GAAW_SUCCESS;
}

typedef struct {
  const gaaw_tensor_t *t;
  const char *name;
} named_tensor;

/* Every tensor of the list is checked with mask; with same, all share the first's dtype. */
static gaaw_status_t check_group(gaaw_context_t ctx, unsigned mask, int same, int n, const named_tensor *list)
{
  for (int i = 0; i < n; i++) {
    GAAW_CHECK(check_tensor(ctx, list[i].t, list[i].name, mask));
    GAAW_ARG_CHECK(ctx, !same || list[i].t->dtype == list[0].t->dtype, "tensor %s is %s but %s is %s; they must match",
                   list[i].name, gaaw_dtype_name(list[i].t->dtype), list[0].name, gaaw_dtype_name(list[0].t->dtype));
  }
  return GAAW_SUCCESS;
}
#define NT(t) {(t), #t}
#define GROUP(mask, same, ...)                                                                          \
  check_group(ctx, (mask), (same), (int)(sizeof((named_tensor[]){__VA_ARGS__}) / sizeof(named_tensor)), \
              (named_tensor[]){__VA_ARGS__})
/* Float tensors of one compute dtype; f32 statistics; i32 ids; anything. */
#define CHECK_FLOATS(...) GAAW_CHECK(GROUP(MASK_FLOAT, 1, __VA_ARGS__))
#define CHECK_F32(...) GAAW_CHECK(GROUP(MASK_F32, 0, __VA_ARGS__))
#define CHECK_I32(...) GAAW_CHECK(GROUP(MASK_I32, 0, __VA_ARGS__))

/* t seen as a matrix (product of the leading extents, last extent) is (rows, cols). */
static gaaw_status_t check_mat(gaaw_context_t ctx, const gaaw_tensor_t *t, const char *name, int64_t rows,
                               int64_t cols, const char *expect)
{
  GAAW_ARG_CHECK(ctx, lead(t) == rows && last(t) == cols, "tensor %s has shape %s; expected %s = (%lld, %lld)", name,
                 shape_of(t).s, expect, (long long)rows, (long long)cols);
  return GAAW_SUCCESS;
}

/* t seen as a batch of matrices (..., rows, cols) is (batch, rows, cols). */
static gaaw_status_t check_bmat(gaaw_context_t ctx, const gaaw_tensor_t *t, const char *name, int64_t batch,
                                int64_t rows, int64_t cols, const char *expect)
{
  GAAW_ARG_CHECK(ctx, t->ndim >= 2 && batch_of(t) == batch && second_last(t) == rows && last(t) == cols,
                 "tensor %s has shape %s; expected %s = (%lld, %lld, %lld)", name, shape_of(t).s, expect,
                 (long long)batch, (long long)rows, (long long)cols);
  return GAAW_SUCCESS;
}

/* t has n elements. */
static gaaw_status_t check_numel(gaaw_context_t ctx, const gaaw_tensor_t *t, const char *name, int64_t n,
                                 const char *expect)
{
  GAAW_ARG_CHECK(ctx, gaaw_tensor_numel(t) == n, "tensor %s has shape %s; expected %s = %lld elements", name,
                 shape_of(t).s, expect, (long long)n);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_transpose(gaaw_context_t ctx, gaaw_transpose_t op, const char *name)
{
  GAAW_ARG_CHECK(ctx, op == GAAW_OP_N || op == GAAW_OP_T, "%s must be GAAW_OP_N or GAAW_OP_T, got %d", name, (int)op);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_positive(gaaw_context_t ctx, float v, const char *name)
{
  GAAW_ARG_CHECK(ctx, v > 0.0f && isfinite(v), "%s must be finite and > 0, got %g", name, (double)v);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_finite_arg(gaaw_context_t ctx, float v, const char *name)
{
  GAAW_ARG_CHECK(ctx, isfinite(v), "%s must be finite, got %g", name, (double)v);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_vocab_start(gaaw_context_t ctx, int64_t vocab_start)
{
  GAAW_ARG_CHECK(ctx, vocab_start >= 0, "vocab_start must be >= 0, got %lld", (long long)vocab_start);
  return GAAW_SUCCESS;
}

/* op(a) (m, k) and op(b) (k, n) against c (m, n), as matrices of one batch element. */
static gaaw_status_t check_gemm_shapes(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t ar,
                                       int64_t ac, int64_t br, int64_t bc, int64_t cr, int64_t cc,
                                       const gaaw_tensor_t *a, const gaaw_tensor_t *b, const gaaw_tensor_t *c)
{
  int64_t m = ta == GAAW_OP_N ? ar : ac, ka = ta == GAAW_OP_N ? ac : ar;
  int64_t kb = tb == GAAW_OP_N ? br : bc, n = tb == GAAW_OP_N ? bc : br;
  GAAW_ARG_CHECK(ctx, m == cr && n == cc && ka == kb,
                 "a %s (op %c), b %s (op %c) and c %s do not make op(a) (m, k) x op(b) (k, n) = c (m, n)",
                 shape_of(a).s, ta == GAAW_OP_N ? 'N' : 'T', shape_of(b).s, tb == GAAW_OP_N ? 'N' : 'T',
                 shape_of(c).s);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- GEMM */

gaaw_status_t gaaw_gemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                        const gaaw_tensor_t *a, const gaaw_tensor_t *b, float beta, gaaw_tensor_t *c)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_transpose(ctx, ta, "ta"));
  GAAW_CHECK(check_transpose(ctx, tb, "tb"));
  CHECK_FLOATS(NT(a), NT(b), NT(c));
  GAAW_CHECK(check_gemm_shapes(ctx, ta, tb, lead(a), last(a), lead(b), last(b), lead(c), last(c), a, b, c));
  GAAW_CHECK(ctx->device->gemm(ctx, ta, tb, alpha, a, b, beta, c));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_gemm_batched(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                                const gaaw_tensor_t *a, const gaaw_tensor_t *b, float beta, gaaw_tensor_t *c)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_transpose(ctx, ta, "ta"));
  GAAW_CHECK(check_transpose(ctx, tb, "tb"));
  CHECK_FLOATS(NT(a), NT(b), NT(c));
  GAAW_ARG_CHECK(ctx, a->ndim >= 2 && b->ndim >= 2 && c->ndim >= 2 && batch_of(a) == batch_of(c) &&
                          batch_of(b) == batch_of(c),
                 "a %s, b %s and c %s must be batches (..., rows, cols) of the same count", shape_of(a).s,
                 shape_of(b).s, shape_of(c).s);
  GAAW_CHECK(check_gemm_shapes(ctx, ta, tb, second_last(a), last(a), second_last(b), last(b), second_last(c),
                               last(c), a, b, c));
  GAAW_CHECK(ctx->device->gemm_batched(ctx, ta, tb, alpha, a, b, beta, c));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- norms */

gaaw_status_t gaaw_layernorm_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *w,
                                     const gaaw_tensor_t *b, float eps, gaaw_tensor_t *y, gaaw_tensor_t *mean,
                                     gaaw_tensor_t *rstd)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(w), NT(b), NT(y));
  CHECK_F32(NT(mean), NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, y, "y", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, b, "b", C, "C"));
  GAAW_CHECK(check_numel(ctx, mean, "mean", N, "N"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  GAAW_CHECK(check_positive(ctx, eps, "eps"));
  GAAW_CHECK(ctx->device->layernorm_forward(ctx, x, w, b, eps, y, mean, rstd));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layernorm_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                      const gaaw_tensor_t *w, const gaaw_tensor_t *mean, const gaaw_tensor_t *rstd,
                                      gaaw_tensor_t *dx, gaaw_tensor_t *dw, gaaw_tensor_t *db)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(x), NT(w), NT(dx), NT(dw), NT(db));
  CHECK_F32(NT(mean), NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, dy, "dy", N, C, "x's (N, C)"));
  GAAW_CHECK(check_mat(ctx, dx, "dx", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, dw, "dw", C, "C"));
  GAAW_CHECK(check_numel(ctx, db, "db", C, "C"));
  GAAW_CHECK(check_numel(ctx, mean, "mean", N, "N"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  GAAW_CHECK(ctx->device->layernorm_backward(ctx, dy, x, w, mean, rstd, dx, dw, db));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_rmsnorm_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *w, float eps,
                                   gaaw_tensor_t *y, gaaw_tensor_t *rstd)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(w), NT(y));
  CHECK_F32(NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, y, "y", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  GAAW_CHECK(check_positive(ctx, eps, "eps"));
  GAAW_CHECK(ctx->device->rmsnorm_forward(ctx, x, w, eps, y, rstd));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_rmsnorm_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                    const gaaw_tensor_t *w, const gaaw_tensor_t *rstd, gaaw_tensor_t *dx,
                                    gaaw_tensor_t *dw)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(x), NT(w), NT(dx), NT(dw));
  CHECK_F32(NT(rstd));
  int64_t N = lead(x), C = last(x);
  GAAW_CHECK(check_mat(ctx, dy, "dy", N, C, "x's (N, C)"));
  GAAW_CHECK(check_mat(ctx, dx, "dx", N, C, "x's (N, C)"));
  GAAW_CHECK(check_numel(ctx, w, "w", C, "C"));
  GAAW_CHECK(check_numel(ctx, dw, "dw", C, "C"));
  GAAW_CHECK(check_numel(ctx, rstd, "rstd", N, "N"));
  GAAW_CHECK(ctx->device->rmsnorm_backward(ctx, dy, x, w, rstd, dx, dw));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- activations */

static gaaw_status_t check_elementwise_kind(gaaw_context_t ctx, gaaw_activation_t act)
{
  GAAW_ARG_CHECK(ctx, (int)act >= 0 && (int)act < GAAW_ACT_COUNT, "activation %d is not a gaaw_activation_t",
                 (int)act);
  GAAW_ARG_CHECK(ctx, act != GAAW_ACT_SWIGLU, "SwiGLU is gated, not elementwise: use gaaw_swiglu_forward/backward");
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_activation_forward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *x,
                                      gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_elementwise_kind(ctx, act));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_numel(ctx, y, "y", gaaw_tensor_numel(x), "numel(x)"));
  GAAW_CHECK(ctx->device->activation_forward(ctx, act, x, y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_activation_backward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *dy,
                                       const gaaw_tensor_t *x, gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_elementwise_kind(ctx, act));
  CHECK_FLOATS(NT(dy), NT(x), NT(dx));
  GAAW_CHECK(check_numel(ctx, dy, "dy", gaaw_tensor_numel(x), "numel(x)"));
  GAAW_CHECK(check_numel(ctx, dx, "dx", gaaw_tensor_numel(x), "numel(x)"));
  GAAW_CHECK(ctx->device->activation_backward(ctx, act, dy, x, dx));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_gelu_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  return gaaw_activation_forward(ctx, GAAW_ACT_GELU, x, y);
}

gaaw_status_t gaaw_gelu_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                 gaaw_tensor_t *dx)
{
  return gaaw_activation_backward(ctx, GAAW_ACT_GELU, dy, x, dx);
}

gaaw_status_t gaaw_swiglu_forward(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_mat(ctx, x, "x", lead(y), 2 * last(y), "(N, 2H) for y (N, H)"));
  GAAW_CHECK(ctx->device->swiglu_forward(ctx, x, y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_swiglu_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                                   gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(x), NT(dx));
  GAAW_CHECK(check_mat(ctx, x, "x", lead(dy), 2 * last(dy), "(N, 2H) for dy (N, H)"));
  GAAW_CHECK(check_mat(ctx, dx, "dx", lead(dy), 2 * last(dy), "(N, 2H) for dy (N, H)"));
  GAAW_CHECK(ctx->device->swiglu_backward(ctx, dy, x, dx));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- elementwise */

gaaw_status_t gaaw_bias_add(gaaw_context_t ctx, gaaw_tensor_t *y, const gaaw_tensor_t *b)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(y), NT(b));
  GAAW_CHECK(check_numel(ctx, b, "b", last(y), "y's last extent C"));
  GAAW_CHECK(ctx->device->bias_add(ctx, y, b));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_bias_backward(gaaw_context_t ctx, const gaaw_tensor_t *dy, gaaw_tensor_t *db)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dy), NT(db));
  GAAW_CHECK(check_numel(ctx, db, "db", last(dy), "dy's last extent C"));
  GAAW_CHECK(ctx->device->bias_backward(ctx, dy, db));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_add(gaaw_context_t ctx, const gaaw_tensor_t *a, const gaaw_tensor_t *b, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(a), NT(b), NT(y));
  GAAW_CHECK(check_numel(ctx, b, "b", gaaw_tensor_numel(a), "numel(a)"));
  GAAW_CHECK(check_numel(ctx, y, "y", gaaw_tensor_numel(a), "numel(a)"));
  GAAW_CHECK(ctx->device->add(ctx, a, b, y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_axpy(gaaw_context_t ctx, float alpha, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_numel(ctx, y, "y", gaaw_tensor_numel(x), "numel(x)"));
  GAAW_CHECK(ctx->device->axpy(ctx, alpha, x, y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_scale(gaaw_context_t ctx, gaaw_tensor_t *x, float alpha)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x));
  GAAW_CHECK(ctx->device->scale(ctx, x, alpha));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- softmax and attention */

/* x: (..., T, T) */
static gaaw_status_t check_square(gaaw_context_t ctx, const gaaw_tensor_t *x, const char *name)
{
  GAAW_ARG_CHECK(ctx, x->ndim >= 2 && second_last(x) == last(x), "tensor %s has shape %s; expected (B, T, T)", name,
                 shape_of(x).s);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_causal_softmax_forward(gaaw_context_t ctx, float scale, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(x), NT(y));
  GAAW_CHECK(check_square(ctx, x, "x"));
  GAAW_CHECK(check_bmat(ctx, y, "y", batch_of(x), last(x), last(x), "x's (B, T, T)"));
  GAAW_CHECK(check_finite_arg(ctx, scale, "scale"));
  GAAW_CHECK(ctx->device->causal_softmax_forward(ctx, scale, x, y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_causal_softmax_backward(gaaw_context_t ctx, float scale, const gaaw_tensor_t *y,
                                           const gaaw_tensor_t *dy, gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(y), NT(dy), NT(dx));
  GAAW_CHECK(check_square(ctx, y, "y"));
  GAAW_CHECK(check_bmat(ctx, dy, "dy", batch_of(y), last(y), last(y), "y's (B, T, T)"));
  GAAW_CHECK(check_bmat(ctx, dx, "dx", batch_of(y), last(y), last(y), "y's (B, T, T)"));
  GAAW_CHECK(check_finite_arg(ctx, scale, "scale"));
  GAAW_CHECK(ctx->device->causal_softmax_backward(ctx, scale, y, dy, dx));
  return GAAW_SUCCESS;
}

/* Every tensor of list is q's (BH, T, D); probs, when not NULL, is (BH, T, T). */
static gaaw_status_t check_attention(gaaw_context_t ctx, const gaaw_tensor_t *q, int n, const named_tensor *list,
                                     const gaaw_tensor_t *probs, const char *probs_name)
{
  GAAW_ARG_CHECK(ctx, q->ndim >= 2, "tensor q has shape %s; expected (BH, T, D)", shape_of(q).s);
  int64_t BH = batch_of(q), T = second_last(q), D = last(q);
  GAAW_ARG_CHECK(ctx, D > 0, "tensor q has shape %s; the head size D must be > 0", shape_of(q).s);
  for (int i = 0; i < n; i++) GAAW_CHECK(check_bmat(ctx, list[i].t, list[i].name, BH, T, D, "q's (BH, T, D)"));
  if (probs) GAAW_CHECK(check_bmat(ctx, probs, probs_name, BH, T, T, "(BH, T, T)"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                     const gaaw_tensor_t *v, gaaw_tensor_t *probs, gaaw_tensor_t *out)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(q), NT(k), NT(v), NT(probs), NT(out));
  GAAW_CHECK(check_attention(ctx, q, 3, (named_tensor[]){NT(k), NT(v), NT(out)}, probs, "probs"));
  GAAW_CHECK(ctx->device->attention_forward(ctx, q, k, v, probs, out));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_attention_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                      const gaaw_tensor_t *k, const gaaw_tensor_t *v, const gaaw_tensor_t *probs,
                                      gaaw_tensor_t *dprobs, gaaw_tensor_t *dq, gaaw_tensor_t *dk, gaaw_tensor_t *dv)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dout), NT(q), NT(k), NT(v), NT(probs), NT(dprobs), NT(dq), NT(dk), NT(dv));
  GAAW_CHECK(check_attention(ctx, q, 6, (named_tensor[]){NT(dout), NT(k), NT(v), NT(dq), NT(dk), NT(dv)}, probs,
                             "probs"));
  GAAW_CHECK(check_bmat(ctx, dprobs, "dprobs", batch_of(probs), last(probs), last(probs), "probs' (BH, T, T)"));
  GAAW_CHECK(ctx->device->attention_backward(ctx, dout, q, k, v, probs, dprobs, dq, dk, dv));
  return GAAW_SUCCESS;
}

/* q, k, v, out: (BH, T, D)   lse: (BH, T) f32 */
static gaaw_status_t check_flash(gaaw_context_t ctx, const gaaw_tensor_t *q, int n, const named_tensor *list,
                                 const gaaw_tensor_t *lse)
{
  GAAW_CHECK(check_attention(ctx, q, n, list, NULL, NULL));
  GAAW_CHECK(check_mat(ctx, lse, "lse", batch_of(q), second_last(q), "q's (BH, T)"));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_flash_attention_forward(gaaw_context_t ctx, const gaaw_tensor_t *q, const gaaw_tensor_t *k,
                                           const gaaw_tensor_t *v, gaaw_tensor_t *out, gaaw_tensor_t *lse)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(q), NT(k), NT(v), NT(out));
  CHECK_F32(NT(lse));
  GAAW_CHECK(check_flash(ctx, q, 3, (named_tensor[]){NT(k), NT(v), NT(out)}, lse));
  GAAW_CHECK(ctx->device->flash_attention_forward(ctx, q, k, v, out, lse));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_flash_attention_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *q,
                                            const gaaw_tensor_t *k, const gaaw_tensor_t *v, const gaaw_tensor_t *out,
                                            const gaaw_tensor_t *lse, gaaw_tensor_t *dq, gaaw_tensor_t *dk,
                                            gaaw_tensor_t *dv)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dout), NT(q), NT(k), NT(v), NT(out), NT(dq), NT(dk), NT(dv));
  CHECK_F32(NT(lse));
  GAAW_CHECK(check_flash(ctx, q, 7, (named_tensor[]){NT(dout), NT(k), NT(v), NT(out), NT(dq), NT(dk), NT(dv)}, lse));
  GAAW_CHECK(ctx->device->flash_attention_backward(ctx, dout, q, k, v, out, lse, dq, dk, dv));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_kernel_available(gaaw_context_t ctx, const char *kernel, int *available)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_ARG_NOT_NULL(ctx, kernel);
  GAAW_ARG_NOT_NULL(ctx, available);
  int has = gaaw_device_provides(ctx->device, kernel);
  GAAW_ARG_CHECK(ctx, has >= 0, "kernel \"%s\" is no gaaw kernel", kernel);
  *available = has;
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- embedding */

gaaw_status_t gaaw_embedding_forward(gaaw_context_t ctx, const gaaw_tensor_t *tokens, const gaaw_tensor_t *table,
                                     int64_t vocab_start, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_I32(NT(tokens));
  CHECK_FLOATS(NT(table), NT(y));
  GAAW_CHECK(check_mat(ctx, y, "y", gaaw_tensor_numel(tokens), last(table), "(numel(tokens), C)"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  GAAW_CHECK(ctx->device->embedding_forward(ctx, tokens, table, vocab_start, y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_embedding_backward(gaaw_context_t ctx, const gaaw_tensor_t *tokens, const gaaw_tensor_t *dy,
                                      int64_t vocab_start, gaaw_tensor_t *dtable)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_I32(NT(tokens));
  CHECK_FLOATS(NT(dy), NT(dtable));
  GAAW_CHECK(check_mat(ctx, dy, "dy", gaaw_tensor_numel(tokens), last(dtable), "(numel(tokens), C)"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  GAAW_CHECK(ctx->device->embedding_backward(ctx, tokens, dy, vocab_start, dtable));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- cross-entropy */

gaaw_status_t gaaw_row_max(gaaw_context_t ctx, const gaaw_tensor_t *logits, gaaw_tensor_t *max)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits));
  CHECK_F32(NT(max));
  GAAW_CHECK(check_numel(ctx, max, "max", lead(logits), "logits' N"));
  GAAW_CHECK(ctx->device->row_max(ctx, logits, max));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_row_sum_exp(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *max,
                               gaaw_tensor_t *sumexp)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits));
  CHECK_F32(NT(max), NT(sumexp));
  GAAW_CHECK(check_numel(ctx, max, "max", lead(logits), "logits' N"));
  GAAW_CHECK(check_numel(ctx, sumexp, "sumexp", lead(logits), "logits' N"));
  GAAW_CHECK(ctx->device->row_sum_exp(ctx, logits, max, sumexp));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_target_logit(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *targets,
                                int64_t vocab_start, gaaw_tensor_t *target)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits));
  CHECK_I32(NT(targets));
  CHECK_F32(NT(target));
  GAAW_CHECK(check_numel(ctx, targets, "targets", lead(logits), "logits' N"));
  GAAW_CHECK(check_numel(ctx, target, "target", lead(logits), "logits' N"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  GAAW_CHECK(ctx->device->target_logit(ctx, logits, targets, vocab_start, target));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cross_entropy_backward(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *max,
                                          const gaaw_tensor_t *sumexp, const gaaw_tensor_t *targets,
                                          int64_t vocab_start, float dloss, gaaw_tensor_t *dlogits)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(logits), NT(dlogits));
  CHECK_F32(NT(max), NT(sumexp));
  CHECK_I32(NT(targets));
  int64_t N = lead(logits);
  GAAW_CHECK(check_mat(ctx, dlogits, "dlogits", N, last(logits), "logits' (N, V)"));
  GAAW_CHECK(check_numel(ctx, max, "max", N, "logits' N"));
  GAAW_CHECK(check_numel(ctx, sumexp, "sumexp", N, "logits' N"));
  GAAW_CHECK(check_numel(ctx, targets, "targets", N, "logits' N"));
  GAAW_CHECK(check_vocab_start(ctx, vocab_start));
  GAAW_CHECK(check_finite_arg(ctx, dloss, "dloss"));
  GAAW_CHECK(ctx->device->cross_entropy_backward(ctx, logits, max, sumexp, targets, vocab_start, dloss, dlogits));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_regression_loss(gaaw_context_t ctx, gaaw_loss_t kind, float delta, const gaaw_tensor_t *pred,
                                   const gaaw_tensor_t *target, const gaaw_tensor_t *weights, gaaw_tensor_t *loss,
                                   gaaw_tensor_t *grad)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_ARG_CHECK(ctx, (int)kind >= 0 && (int)kind < GAAW_LOSS_COUNT, "loss %d is not a gaaw_loss_t", (int)kind);
  GAAW_CHECK(check_positive(ctx, delta, "delta"));
  CHECK_FLOATS(NT(pred), NT(target), NT(grad));
  CHECK_F32(NT(loss));
  int64_t n = gaaw_tensor_numel(pred);
  GAAW_CHECK(check_numel(ctx, target, "target", n, "numel(pred)"));
  GAAW_CHECK(check_numel(ctx, grad, "grad", n, "numel(pred)"));
  GAAW_CHECK(check_numel(ctx, loss, "loss", n, "numel(pred)"));
  if (weights) {
    CHECK_F32(NT(weights));
    GAAW_CHECK(check_numel(ctx, weights, "weights", n, "numel(pred)"));
  }
  GAAW_CHECK(ctx->device->regression_loss(ctx, kind, delta, pred, target, weights, loss, grad));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- optimizer */

static gaaw_status_t check_adamw_args(gaaw_context_t ctx, const gaaw_adamw_args_t *a)
{
  GAAW_ARG_NOT_NULL(ctx, a);
  GAAW_ARG_CHECK(ctx, a->lr >= 0.0f && isfinite(a->lr), "args->lr must be finite and >= 0, got %g", (double)a->lr);
  GAAW_ARG_CHECK(ctx, a->beta1 >= 0.0f && a->beta1 < 1.0f, "args->beta1 must be in [0, 1), got %g", (double)a->beta1);
  GAAW_ARG_CHECK(ctx, a->beta2 >= 0.0f && a->beta2 < 1.0f, "args->beta2 must be in [0, 1), got %g", (double)a->beta2);
  GAAW_CHECK(check_positive(ctx, a->eps, "args->eps"));
  GAAW_ARG_CHECK(ctx, a->weight_decay >= 0.0f && isfinite(a->weight_decay),
                 "args->weight_decay must be finite and >= 0, got %g", (double)a->weight_decay);
  GAAW_CHECK(check_finite_arg(ctx, a->grad_scale, "args->grad_scale"));
  GAAW_ARG_CHECK(ctx, a->step >= 1, "args->step must be >= 1 (1 for the first update), got %lld", (long long)a->step);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_adamw_update(gaaw_context_t ctx, gaaw_tensor_t *params, const gaaw_tensor_t *grads,
                                gaaw_tensor_t *master, gaaw_tensor_t *m, gaaw_tensor_t *v,
                                const gaaw_adamw_args_t *args)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_FLOAT, 0, NT(params), NT(grads)));
  /* Without master weights the update happens on params, which must be f32. */
  GAAW_CHECK(GROUP(master ? MASK_FLOAT : MASK_F32, 0, NT(params)));
  CHECK_F32(NT(m), NT(v));
  if (master) CHECK_F32(NT(master));
  int64_t n = gaaw_tensor_numel(params);
  GAAW_CHECK(check_numel(ctx, grads, "grads", n, "numel(params)"));
  GAAW_CHECK(check_numel(ctx, m, "m", n, "numel(params)"));
  GAAW_CHECK(check_numel(ctx, v, "v", n, "numel(params)"));
  if (master) GAAW_CHECK(check_numel(ctx, master, "master", n, "numel(params)"));
  GAAW_CHECK(check_adamw_args(ctx, args));
  GAAW_CHECK(ctx->device->adamw_update(ctx, params, grads, master, m, v, args));
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- utilities */

gaaw_status_t gaaw_cast(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_ANY, 0, NT(x), NT(y)));
  GAAW_CHECK(check_numel(ctx, y, "y", gaaw_tensor_numel(x), "numel(x)"));
  GAAW_CHECK(ctx->device->cast(ctx, x, y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_permute_0213(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_ANY, 1, NT(x), NT(y)));
  GAAW_ARG_CHECK(ctx, x->ndim == 4 && y->ndim == 4 && y->shape[0] == x->shape[0] && y->shape[1] == x->shape[2] &&
                          y->shape[2] == x->shape[1] && y->shape[3] == x->shape[3],
                 "permute_0213 maps x (A, B, C, D) to y (A, C, B, D); got x %s and y %s", shape_of(x).s,
                 shape_of(y).s);
  GAAW_CHECK(ctx->device->permute_0213(ctx, x, y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_sum_squares(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *out)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_FLOAT, 0, NT(x)));
  CHECK_F32(NT(out));
  GAAW_CHECK(check_numel(ctx, out, "out", 1, "one"));
  GAAW_CHECK(ctx->device->sum_squares(ctx, x, out));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_check_finite(gaaw_context_t ctx, const gaaw_tensor_t *x, gaaw_tensor_t *flag)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_FLOAT, 0, NT(x)));
  CHECK_I32(NT(flag));
  GAAW_CHECK(check_numel(ctx, flag, "flag", 1, "one"));
  GAAW_CHECK(ctx->device->check_finite(ctx, x, flag));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_fill(gaaw_context_t ctx, gaaw_tensor_t *x, float value)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(GROUP(MASK_ANY, 0, NT(x)));
  /* i32 rounds toward zero; values outside the int32 range have no conversion. */
  GAAW_ARG_CHECK(ctx, x->dtype != GAAW_I32 || (value > -2147483904.0f && value < 2147483648.0f),
                 "value %g does not fit the i32 tensor x", (double)value);
  GAAW_CHECK(ctx->device->fill(ctx, x, value));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_synchronize(gaaw_context_t ctx)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(ctx->device->synchronize(ctx));
  return GAAW_SUCCESS;
}
