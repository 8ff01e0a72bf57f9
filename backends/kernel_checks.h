/* The argument checks of the public kernel functions (backends/kernels*.c): tensors
 * well-formed, in a buffer of the context, of the dtypes allowed, of the shapes
 * expected; each failure records a message naming the tensor and its shape and
 * returns GAAW_ERR_INVALID_ARG. Shapes as in backends/kernels.c. */
#ifndef GAAW_BACKENDS_KERNEL_CHECKS_H
#define GAAW_BACKENDS_KERNEL_CHECKS_H

#include <math.h>
#include <stdio.h>

#include "backends/runtime/context_impl.h"

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

static inline shape_text shape_of(const gaaw_tensor_t *t)
{
  shape_text out;
  int len = snprintf(out.s, sizeof out.s, "(");
  for (int i = 0; i < t->ndim && i < GAAW_MAX_DIMS && len < (int)sizeof out.s; i++)
    len += snprintf(out.s + len, sizeof out.s - len, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (len < (int)sizeof out.s) snprintf(out.s + len, sizeof out.s - len, ")");
  return out;
}

/* Product of the extents before the last (rows) and before the last two (batch). */
static inline int64_t lead(const gaaw_tensor_t *t)
{
  int64_t r = 1;
  for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
  return r;
}
static inline int64_t last(const gaaw_tensor_t *t)
{
  return t->shape[t->ndim - 1];
}
static inline int64_t batch_of(const gaaw_tensor_t *t)
{
  int64_t r = 1;
  for (int i = 0; i < t->ndim - 2; i++) r *= t->shape[i];
  return r;
}
static inline int64_t second_last(const gaaw_tensor_t *t)
{
  return t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
}

static inline gaaw_status_t check_ctx(gaaw_context_t ctx)
{
  GAAW_ARG_NOT_NULL(NULL, ctx);
  return GAAW_SUCCESS;
}

/* t: a well-formed view, inside a buffer of ctx, with a dtype from mask. */
static inline gaaw_status_t check_tensor(gaaw_context_t ctx, const gaaw_tensor_t *t, const char *name, unsigned mask)
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
static inline gaaw_status_t check_group(gaaw_context_t ctx, unsigned mask, int same, int n, const named_tensor *list)
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
static inline gaaw_status_t check_mat(gaaw_context_t ctx, const gaaw_tensor_t *t, const char *name, int64_t rows,
                               int64_t cols, const char *expect)
{
  GAAW_ARG_CHECK(ctx, lead(t) == rows && last(t) == cols, "tensor %s has shape %s; expected %s = (%lld, %lld)", name,
                 shape_of(t).s, expect, (long long)rows, (long long)cols);
  return GAAW_SUCCESS;
}

/* t seen as a batch of matrices (..., rows, cols) is (batch, rows, cols). */
static inline gaaw_status_t check_bmat(gaaw_context_t ctx, const gaaw_tensor_t *t, const char *name, int64_t batch,
                                int64_t rows, int64_t cols, const char *expect)
{
  GAAW_ARG_CHECK(ctx, t->ndim >= 2 && batch_of(t) == batch && second_last(t) == rows && last(t) == cols,
                 "tensor %s has shape %s; expected %s = (%lld, %lld, %lld)", name, shape_of(t).s, expect,
                 (long long)batch, (long long)rows, (long long)cols);
  return GAAW_SUCCESS;
}

/* t has n elements. */
static inline gaaw_status_t check_numel(gaaw_context_t ctx, const gaaw_tensor_t *t, const char *name, int64_t n,
                                 const char *expect)
{
  GAAW_ARG_CHECK(ctx, gaaw_tensor_numel(t) == n, "tensor %s has shape %s; expected %s = %lld elements", name,
                 shape_of(t).s, expect, (long long)n);
  return GAAW_SUCCESS;
}

static inline gaaw_status_t check_transpose(gaaw_context_t ctx, gaaw_transpose_t op, const char *name)
{
  GAAW_ARG_CHECK(ctx, op == GAAW_OP_N || op == GAAW_OP_T, "%s must be GAAW_OP_N or GAAW_OP_T, got %d", name, (int)op);
  return GAAW_SUCCESS;
}

static inline gaaw_status_t check_positive(gaaw_context_t ctx, float v, const char *name)
{
  GAAW_ARG_CHECK(ctx, v > 0.0f && isfinite(v), "%s must be finite and > 0, got %g", name, (double)v);
  return GAAW_SUCCESS;
}

static inline gaaw_status_t check_finite_arg(gaaw_context_t ctx, float v, const char *name)
{
  GAAW_ARG_CHECK(ctx, isfinite(v), "%s must be finite, got %g", name, (double)v);
  return GAAW_SUCCESS;
}

static inline gaaw_status_t check_vocab_start(gaaw_context_t ctx, int64_t vocab_start)
{
  GAAW_ARG_CHECK(ctx, vocab_start >= 0, "vocab_start must be >= 0, got %lld", (long long)vocab_start);
  return GAAW_SUCCESS;
}

#endif
