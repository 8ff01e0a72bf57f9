/* The attention on the QKV projection's layout (backends/fused.h, the host backend's
 * gaaw_attention_qkv_*) is bit-identical to what the other backends run: the head
 * permutes of parallel/gpt_block.c around gaaw_attention_forward / _backward (its
 * gradients added to zeros; the qkv kernel overwrites whatever dqkv held), in
 * f32, bf16 and f16, on 1 and 3 threads, at T a multiple of the kernel's 64-row
 * blocks and not; and the same bits on 1 thread (whole heads) and 4 ((head, block)
 * items). The (BH, T, D) kernels are checked against references in
 * test_kernel_attention, so this pins the new one to them. Plus bad input. */
#include "backends/fused.h"
#include "tests/unit/test_kernel_util.h"

typedef struct {
  int64_t B, T, H, D;
} qkv_shape;

/* A (B, X, Y, D) view of a contiguous tensor. */
static gaaw_tensor_t view4(const gaaw_tensor_t *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
  gaaw_tensor_t v = *t;
  v.ndim = 4;
  v.shape[0] = a, v.shape[1] = b, v.shape[2] = c, v.shape[3] = d;
  return v;
}

/* Slice which (0 q, 1 k, 2 v) of a (3, B H, T, D) tensor as (B H, T, D). */
static gaaw_tensor_t part(const gaaw_tensor_t *t, const qkv_shape *s, int which)
{
  gaaw_tensor_t v = *t;
  v.ndim = 3;
  v.shape[0] = s->B * s->H, v.shape[1] = s->T, v.shape[2] = s->D;
  v.offset += (size_t)(which * s->B * s->H * s->T * s->D) * gaaw_dtype_size(t->dtype);
  return v;
}

/* (B, T, 3H, D) -> (3, B H, T, D), through (B, 3H, T, D) (gpt_block.c's permutes). */
static void split_heads(gaaw_context_t ctx, const qkv_shape *s, const gaaw_tensor_t *qkv, gaaw_tensor_t *heads,
                        gaaw_tensor_t *split)
{
  gaaw_tensor_t in = view4(qkv, s->B, s->T, 3 * s->H, s->D), mid = view4(heads, s->B, 3 * s->H, s->T, s->D);
  require_ok(ctx, gaaw_permute_0213(ctx, &in, &mid));
  in = view4(heads, 1, s->B, 3, s->H * s->T * s->D);
  gaaw_tensor_t out = view4(split, 1, 3, s->B, s->H * s->T * s->D);
  require_ok(ctx, gaaw_permute_0213(ctx, &in, &out));
}

/* The inverse: (3, B H, T, D) -> (B, T, 3H, D). */
static void merge_qkv(gaaw_context_t ctx, const qkv_shape *s, const gaaw_tensor_t *split, gaaw_tensor_t *heads,
                      gaaw_tensor_t *qkv)
{
  gaaw_tensor_t in = view4(split, 1, 3, s->B, s->H * s->T * s->D), mid = view4(heads, 1, s->B, 3, s->H * s->T * s->D);
  require_ok(ctx, gaaw_permute_0213(ctx, &in, &mid));
  in = view4(heads, s->B, 3 * s->H, s->T, s->D);
  gaaw_tensor_t out = view4(qkv, s->B, s->T, 3 * s->H, s->D);
  require_ok(ctx, gaaw_permute_0213(ctx, &in, &out));
}

static void expect_same_bytes(gaaw_context_t ctx, const gaaw_tensor_t *a, const gaaw_tensor_t *b, const char *what,
                              const qkv_shape *s, gaaw_dtype_t dt, int threads)
{
  size_t n = (size_t)gaaw_tensor_numel(a) * gaaw_dtype_size(a->dtype);
  void *x = kt_bytes(ctx, a), *y = kt_bytes(ctx, b);
  expect_true(memcmp(x, y, n) == 0, "attention_qkv %s (B %lld, T %lld, H %lld, D %lld) on %d threads: %s differs",
              gaaw_dtype_name(dt), (long long)s->B, (long long)s->T, (long long)s->H, (long long)s->D, threads, what);
  free(x);
  free(y);
}

static gaaw_tensor_t random4(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t a, int64_t b, int64_t c, int64_t d,
                             uint64_t *seed)
{
  int64_t shape[4] = {a, b, c, d};
  float *v = malloc(sizeof(float) * (size_t)(a * b * c * d + 1));
  gaaw_tensor_t t = kt_random_tensor(ctx, dt, 4, shape, -1, 1, seed, v);
  free(v);
  return t;
}

static void check_same(gaaw_context_t ctx, gaaw_dtype_t dt, qkv_shape s, int threads)
{
  uint64_t seed = 97;
  int64_t BH = s.B * s.H;
  kt_threads(threads);
  gaaw_tensor_t qkv = random4(ctx, dt, s.B, s.T, 3 * s.H, s.D, &seed);
  gaaw_tensor_t dout = random4(ctx, dt, s.B, s.T, s.H, s.D, &seed);
  gaaw_tensor_t dqkv = random4(ctx, dt, s.B, s.T, 3 * s.H, s.D, &seed); /* overwritten, not added to */
  gaaw_tensor_t dqkv_ref = KT_NEW(ctx, dt, s.B, s.T, 3 * s.H, s.D);
  require_ok(ctx, gaaw_fill(ctx, &dqkv_ref, 0.0f)); /* the permuted path adds to zeros */
  gaaw_tensor_t probs = KT_NEW(ctx, dt, BH, s.T, s.T), probs_ref = KT_NEW(ctx, dt, BH, s.T, s.T);
  gaaw_tensor_t dprobs = KT_NEW(ctx, dt, BH, s.T, s.T), dprobs_ref = KT_NEW(ctx, dt, BH, s.T, s.T);
  gaaw_tensor_t out = KT_NEW(ctx, dt, s.B, s.T, s.H, s.D), out_ref = KT_NEW(ctx, dt, s.B, s.T, s.H, s.D);

  /* the new kernels */
  require_ok(ctx, gaaw_attention_qkv_forward(ctx, &qkv, &probs, &out));
  require_ok(ctx, gaaw_attention_qkv_backward(ctx, &dout, &qkv, &probs, &dprobs, &dqkv));

  /* the permutes around the (BH, T, D) kernels */
  gaaw_tensor_t heads = KT_NEW(ctx, dt, 3 * BH * s.T * s.D), split = KT_NEW(ctx, dt, 3 * BH * s.T * s.D);
  gaaw_tensor_t dsplit = KT_NEW(ctx, dt, 3 * BH * s.T * s.D), o = KT_NEW(ctx, dt, BH, s.T, s.D);
  gaaw_tensor_t dheads = KT_NEW(ctx, dt, BH, s.T, s.D);
  split_heads(ctx, &s, &qkv, &heads, &split);
  gaaw_tensor_t q = part(&split, &s, 0), k = part(&split, &s, 1), v = part(&split, &s, 2);
  require_ok(ctx, gaaw_attention_forward(ctx, &q, &k, &v, &probs_ref, &o));
  gaaw_tensor_t o4 = view4(&o, s.B, s.H, s.T, s.D), out4 = view4(&out_ref, s.B, s.T, s.H, s.D);
  require_ok(ctx, gaaw_permute_0213(ctx, &o4, &out4));
  gaaw_tensor_t dout4 = view4(&dout, s.B, s.T, s.H, s.D), dheads4 = view4(&dheads, s.B, s.H, s.T, s.D);
  require_ok(ctx, gaaw_permute_0213(ctx, &dout4, &dheads4));
  split_heads(ctx, &s, &dqkv_ref, &heads, &dsplit);
  gaaw_tensor_t dq = part(&dsplit, &s, 0), dk = part(&dsplit, &s, 1), dv = part(&dsplit, &s, 2);
  require_ok(ctx, gaaw_attention_backward(ctx, &dheads, &q, &k, &v, &probs_ref, &dprobs_ref, &dq, &dk, &dv));
  merge_qkv(ctx, &s, &dsplit, &heads, &dqkv_ref);

  expect_same_bytes(ctx, &out, &out_ref, "out", &s, dt, threads);
  expect_same_bytes(ctx, &probs, &probs_ref, "probs", &s, dt, threads);
  expect_same_bytes(ctx, &dprobs, &dprobs_ref, "dprobs", &s, dt, threads);
  expect_same_bytes(ctx, &dqkv, &dqkv_ref, "dqkv", &s, dt, threads);
  gaaw_tensor_t *all[] = {&qkv, &dout, &dqkv, &dqkv_ref, &probs, &probs_ref, &dprobs, &dprobs_ref, &out, &out_ref,
                          &heads, &split, &dsplit, &o, &dheads};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) kt_free(ctx, all[i]);
}

/* The bits do not depend on the thread count, nor on how the host hands out the work:
 * 12 heads go out whole on 1 thread (at least 4 heads per thread) and as (head, 64-row
 * block) items on 4, and both must give the same out, probs, dprobs and dqkv. */
static void check_thread_independent(gaaw_context_t ctx)
{
  const qkv_shape s = {2, 130, 6, 8};
  const gaaw_dtype_t F = GAAW_F32;
  int64_t BH = s.B * s.H;
  uint64_t seed = 5;
  gaaw_tensor_t qkv = random4(ctx, F, s.B, s.T, 3 * s.H, s.D, &seed), dout = random4(ctx, F, s.B, s.T, s.H, s.D, &seed);
  gaaw_tensor_t out[2], probs[2], dprobs[2], dqkv[2];
  for (int i = 0; i < 2; i++) {
    kt_threads(i == 0 ? 1 : 4);
    out[i] = KT_NEW(ctx, F, s.B, s.T, s.H, s.D), dqkv[i] = KT_NEW(ctx, F, s.B, s.T, 3 * s.H, s.D);
    probs[i] = KT_NEW(ctx, F, BH, s.T, s.T), dprobs[i] = KT_NEW(ctx, F, BH, s.T, s.T);
    require_ok(ctx, gaaw_attention_qkv_forward(ctx, &qkv, &probs[i], &out[i]));
    require_ok(ctx, gaaw_attention_qkv_backward(ctx, &dout, &qkv, &probs[i], &dprobs[i], &dqkv[i]));
  }
  expect_same_bytes(ctx, &out[0], &out[1], "out on 1 vs 4", &s, F, 4);
  expect_same_bytes(ctx, &probs[0], &probs[1], "probs on 1 vs 4", &s, F, 4);
  expect_same_bytes(ctx, &dprobs[0], &dprobs[1], "dprobs on 1 vs 4", &s, F, 4);
  expect_same_bytes(ctx, &dqkv[0], &dqkv[1], "dqkv on 1 vs 4", &s, F, 4);
  gaaw_tensor_t *all[] = {&qkv, &dout, &out[0], &out[1], &probs[0], &probs[1], &dprobs[0], &dprobs[1], &dqkv[0], &dqkv[1]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) kt_free(ctx, all[i]);
}

#define BAD(call) expect_status_ctx(ctx, (call), GAAW_ERR_INVALID_ARG)

static void check_bad_input(gaaw_context_t ctx)
{
  const gaaw_dtype_t F = GAAW_F32;
  gaaw_tensor_t qkv = KT_NEW(ctx, F, 2, 5, 6, 4), out = KT_NEW(ctx, F, 2, 5, 2, 4), probs = KT_NEW(ctx, F, 4, 5, 5);
  gaaw_tensor_t dprobs = KT_NEW(ctx, F, 4, 5, 5), dqkv = KT_NEW(ctx, F, 2, 5, 6, 4);
  gaaw_tensor_t qkv5 = KT_NEW(ctx, F, 2, 5, 5, 4), out3 = KT_NEW(ctx, F, 2, 5, 3, 4), probs6 = KT_NEW(ctx, F, 4, 6, 6);
  gaaw_tensor_t flat = KT_NEW(ctx, F, 10, 24), outh = KT_NEW(ctx, GAAW_BF16, 2, 5, 2, 4);
  gaaw_tensor_t *all[] = {&qkv, &out, &probs, &dprobs, &dqkv, &qkv5, &out3, &probs6, &flat, &outh};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) require_ok(ctx, gaaw_fill(ctx, all[i], 0.25f));
  expect_status_ctx(ctx, gaaw_attention_qkv_forward(ctx, &qkv, &probs, &out), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_attention_qkv_backward(ctx, &out, &qkv, &probs, &dprobs, &dqkv), GAAW_SUCCESS);
  expect_status(gaaw_attention_qkv_forward(NULL, &qkv, &probs, &out), GAAW_ERR_INVALID_ARG);
  BAD(gaaw_attention_qkv_forward(ctx, NULL, &probs, &out));
  BAD(gaaw_attention_qkv_forward(ctx, &qkv5, &probs, &out));  /* 3H not a multiple of 3 */
  BAD(gaaw_attention_qkv_forward(ctx, &flat, &probs, &out));  /* not (B, T, 3H, D) */
  BAD(gaaw_attention_qkv_forward(ctx, &qkv, &probs, &out3));  /* out's heads */
  BAD(gaaw_attention_qkv_forward(ctx, &qkv, &probs6, &out));  /* probs' T */
  BAD(gaaw_attention_qkv_forward(ctx, &qkv, &probs, &outh));  /* mixed dtypes */
  BAD(gaaw_attention_qkv_backward(ctx, &out3, &qkv, &probs, &dprobs, &dqkv)); /* dout */
  BAD(gaaw_attention_qkv_backward(ctx, &out, &qkv, &probs, &probs6, &dqkv)); /* dprobs */
  BAD(gaaw_attention_qkv_backward(ctx, &out, &qkv, &probs, &dprobs, &qkv5)); /* dqkv */
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) kt_free(ctx, all[i]);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  int has = 0;
  require_ok(ctx, gaaw_kernel_available(ctx, "attention_qkv_forward", &has));
  expect_true(has, "the host backend should have attention_qkv_forward");
  const qkv_shape shapes[] = {{2, 70, 3, 8}, {2, 128, 2, 16}, {1, 1, 1, 4}};
  for (size_t d = 0; d < sizeof kt_float_dtypes / sizeof *kt_float_dtypes; d++)
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
      for (int threads = 1; threads <= 3; threads += 2) check_same(ctx, kt_float_dtypes[d], shapes[i], threads);
  check_thread_independent(ctx);
  kt_threads(2);
  check_bad_input(ctx);
  return kt_finish(&ctx, "test_kernel_attention_qkv");
}
