/* The fused kernels of backends/fused.h on the host backend: each is bit-identical
 * to the unfused sequence it replaces, in f32, bf16 and f16, on one thread and on
 * several; the unfused sequence is what a backend without the fused kernel runs
 * (here: the host table with the fused entries removed, as the CUDA table has
 * none), so this also checks that fallback. Plus bad input for each. */
#include "backends/fused.h"
#include "backends/runtime/context_impl.h"
#include "tests/unit/test_kernel_util.h"

enum { MAX_OUTS = 5 };

/* The outputs of one run, as raw bytes. */
typedef struct {
  int n;
  const char *name[MAX_OUTS];
  void *bytes[MAX_OUTS];
  size_t size[MAX_OUTS];
} outputs;

static void keep(gaaw_context_t ctx, outputs *o, const gaaw_tensor_t *t, const char *name)
{
  o->name[o->n] = name;
  o->bytes[o->n] = kt_bytes(ctx, t);
  o->size[o->n] = gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype);
  o->n++;
}

static void release(outputs *o)
{
  for (int i = 0; i < o->n; i++) free(o->bytes[i]);
  o->n = 0;
}

/* A tensor of random values in [lo, hi) from *seed. */
static gaaw_tensor_t rnd(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t rows, int64_t cols, float lo, float hi,
                         uint64_t *seed)
{
  int64_t shape[2] = {rows, cols};
  int ndim = rows ? 2 : 1;
  const int64_t *sh = rows ? shape : shape + 1;
  float *v = malloc(sizeof(float) * (size_t)((rows ? rows : 1) * cols + 1));
  gaaw_tensor_t t = kt_random_tensor(ctx, dt, ndim, sh, lo, hi, seed, v);
  free(v);
  return t;
}

/* ---------------------------------------------------------------- the three cases */

/* MLP shape: u (N, F) = x W^T before its bias. */
static void run_bias_gelu(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t N, int64_t F, outputs *o)
{
  uint64_t seed = 11;
  gaaw_tensor_t u = rnd(ctx, dt, N, F, -4, 4, &seed), b = rnd(ctx, dt, 0, F, -1, 1, &seed);
  gaaw_tensor_t a = rnd(ctx, dt, N, F, 0, 1, &seed);
  expect_status_ctx(ctx, gaaw_bias_gelu_forward(ctx, &u, &b, &a), GAAW_SUCCESS);
  keep(ctx, o, &u, "u");
  keep(ctx, o, &a, "a");
  kt_free(ctx, &u), kt_free(ctx, &b), kt_free(ctx, &a);
}

/* out = x + (y + bias), into a new tensor or in place of y. */
static void run_bias_residual_add(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t N, int64_t C, int into_y, outputs *o)
{
  uint64_t seed = 29;
  gaaw_tensor_t x = rnd(ctx, dt, N, C, -2, 3, &seed), y = rnd(ctx, dt, N, C, -1, 1, &seed);
  gaaw_tensor_t bias = rnd(ctx, dt, 0, C, -1, 1, &seed), out = rnd(ctx, dt, N, C, 0, 1, &seed);
  expect_status_ctx(ctx, gaaw_bias_residual_add(ctx, &x, &y, &bias, into_y ? &y : &out), GAAW_SUCCESS);
  keep(ctx, o, into_y ? &y : &out, "out");
  kt_free(ctx, &x), kt_free(ctx, &y), kt_free(ctx, &bias), kt_free(ctx, &out);
}

static void run_add_layernorm(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t N, int64_t C, int with_bias,
                              outputs *o)
{
  uint64_t seed = 23;
  gaaw_tensor_t x = rnd(ctx, dt, N, C, -2, 3, &seed), y = rnd(ctx, dt, N, C, -1, 1, &seed);
  gaaw_tensor_t bias = rnd(ctx, dt, 0, C, -1, 1, &seed), w = rnd(ctx, dt, 0, C, 0.5f, 1.5f, &seed);
  gaaw_tensor_t b = rnd(ctx, dt, 0, C, -1, 1, &seed), x2 = rnd(ctx, dt, N, C, 0, 1, &seed);
  gaaw_tensor_t h = rnd(ctx, dt, N, C, 0, 1, &seed), mean = rnd(ctx, GAAW_F32, 0, N, 0, 1, &seed);
  gaaw_tensor_t rstd = rnd(ctx, GAAW_F32, 0, N, 0, 1, &seed);
  expect_status_ctx(ctx,
                    gaaw_add_layernorm_forward(ctx, &x, &y, with_bias ? &bias : NULL, &w, &b, 1e-5f, &x2, &h, &mean,
                                               &rstd),
                    GAAW_SUCCESS);
  keep(ctx, o, &x2, "x2");
  keep(ctx, o, &h, "h");
  keep(ctx, o, &mean, "mean");
  keep(ctx, o, &rstd, "rstd");
  gaaw_tensor_t *all[] = {&x, &y, &bias, &w, &b, &x2, &h, &mean, &rstd};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) kt_free(ctx, all[i]);
}

/* Vocabulary slice [40, 40 + V); targets inside, outside and ignored (-1). */
static void run_cross_entropy(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t N, int64_t V, int with_grad,
                              outputs *o)
{
  uint64_t seed = 37;
  gaaw_tensor_t logits = rnd(ctx, dt, N, V, -6, 6, &seed), dlogits = rnd(ctx, dt, N, V, -1, 1, &seed);
  gaaw_tensor_t max = rnd(ctx, GAAW_F32, 0, N, 0, 1, &seed), sumexp = rnd(ctx, GAAW_F32, 0, N, 0, 1, &seed);
  gaaw_tensor_t target = rnd(ctx, GAAW_F32, 0, N, 0, 1, &seed);
  gaaw_tensor_t tgt = KT_NEW(ctx, GAAW_I32, N);
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)N);
  for (int64_t n = 0; n < N; n++) ids[n] = n % 9 == 4 ? -1 : (int32_t)((n * 37) % (V + 80));
  require_ok(ctx, gaaw_buffer_write(ctx, tgt.buf, tgt.offset, ids, sizeof(int32_t) * (size_t)N));
  free(ids);
  expect_status_ctx(ctx,
                    gaaw_cross_entropy_forward(ctx, &logits, &tgt, 40, 0.37f, &max, &sumexp, &target,
                                               with_grad ? &dlogits : NULL),
                    GAAW_SUCCESS);
  keep(ctx, o, &max, "max");
  keep(ctx, o, &sumexp, "sumexp");
  keep(ctx, o, &target, "target");
  keep(ctx, o, &dlogits, "dlogits");
  gaaw_tensor_t *all[] = {&logits, &dlogits, &max, &sumexp, &target, &tgt};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) kt_free(ctx, all[i]);
}

/* ---------------------------------------------------------------- fused against unfused */

/* The GELU's backward into dx, whose old contents (nan here) must not matter. */
static void run_gelu_backward_set(gaaw_context_t ctx, gaaw_dtype_t dt, int64_t N, int64_t F, outputs *o)
{
  uint64_t seed = 43;
  gaaw_tensor_t dy = rnd(ctx, dt, N, F, -1, 1, &seed), x = rnd(ctx, dt, N, F, -5, 5, &seed);
  gaaw_tensor_t dx = rnd(ctx, dt, N, F, 0, 1, &seed);
  require_ok(ctx, gaaw_fill(ctx, &dx, NAN));
  expect_status_ctx(ctx, gaaw_gelu_backward_set(ctx, &dy, &x, &dx), GAAW_SUCCESS);
  keep(ctx, o, &dx, "dx");
  kt_free(ctx, &dy), kt_free(ctx, &x), kt_free(ctx, &dx);
}

static gaaw_device_ops unfused_ops; /* the host table without its fused kernels */

static void run_case(gaaw_context_t ctx, int c, gaaw_dtype_t dt, int64_t rows, int64_t cols, outputs *o)
{
  switch (c) {
  case 0: run_bias_gelu(ctx, dt, rows, cols, o); break;
  case 1: run_add_layernorm(ctx, dt, rows, cols, 1, o); break;
  case 2: run_add_layernorm(ctx, dt, rows, cols, 0, o); break;
  case 3: run_cross_entropy(ctx, dt, rows, cols, 1, o); break;
  case 4: run_cross_entropy(ctx, dt, rows, cols, 0, o); break;
  case 5: run_bias_residual_add(ctx, dt, rows, cols, 0, o); break;
  case 6: run_bias_residual_add(ctx, dt, rows, cols, 1, o); break;
  default: run_gelu_backward_set(ctx, dt, rows, cols, o); break;
  }
}
static const char *const case_names[] = {"bias_gelu",     "add_layernorm with bias",     "add_layernorm",
                                         "cross_entropy with gradient", "cross_entropy", "bias_residual_add",
                                         "bias_residual_add into y", "gelu_backward_set"};

static void check_same(gaaw_context_t ctx, int c, gaaw_dtype_t dt, int64_t rows, int64_t cols, int threads)
{
  outputs fused = {0}, unfused = {0};
  const gaaw_device_ops *host_ops = ctx->device;
  kt_threads(threads);
  run_case(ctx, c, dt, rows, cols, &fused);
  ctx->device = &unfused_ops;
  run_case(ctx, c, dt, rows, cols, &unfused);
  ctx->device = host_ops;
  for (int i = 0; i < fused.n && i < unfused.n; i++) {
    size_t bad = 0, es = gaaw_dtype_size(dt), first = 0;
    int differ = memcmp(fused.bytes[i], unfused.bytes[i], fused.size[i]) != 0;
    if (differ)
      for (size_t k = 0; k < fused.size[i]; k++)
        if (((char *)fused.bytes[i])[k] != ((char *)unfused.bytes[i])[k] && !bad++) first = k / es;
    expect_true(!differ, "%s %s (%lld, %lld), %d threads: %s differs from the unfused sequence in %zu bytes, "
                "first at element %zu", case_names[c], gaaw_dtype_name(dt), (long long)rows, (long long)cols,
                threads, fused.name[i], bad, first);
  }
  release(&fused);
  release(&unfused);
}

/* ---------------------------------------------------------------- bad input */

#define BAD(call) expect_status_ctx(ctx, (call), GAAW_ERR_INVALID_ARG)

static void check_bad_input(gaaw_context_t ctx)
{
  const gaaw_dtype_t F = GAAW_F32;
  gaaw_tensor_t x = KT_NEW(ctx, F, 4, 6), y = KT_NEW(ctx, F, 4, 6), x2 = KT_NEW(ctx, F, 4, 6), h = KT_NEW(ctx, F, 4, 6);
  gaaw_tensor_t c6 = KT_NEW(ctx, F, 6), c5 = KT_NEW(ctx, F, 5), n4 = KT_NEW(ctx, F, 4), n4b = KT_NEW(ctx, F, 4);
  gaaw_tensor_t n4c = KT_NEW(ctx, F, 4), n5 = KT_NEW(ctx, F, 5), xh = KT_NEW(ctx, GAAW_BF16, 4, 6);
  gaaw_tensor_t x5 = KT_NEW(ctx, F, 4, 5), ids = KT_NEW(ctx, GAAW_I32, 4), ids5 = KT_NEW(ctx, GAAW_I32, 5);
  gaaw_tensor_t *all[] = {&x, &y, &x2, &h, &c6, &c5, &n4, &n4b, &n4c, &n5, &xh, &x5};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) require_ok(ctx, gaaw_fill(ctx, all[i], 0.5f));
  require_ok(ctx, gaaw_fill(ctx, &ids, 1));
  require_ok(ctx, gaaw_fill(ctx, &ids5, 1));

  expect_status_ctx(ctx, gaaw_bias_gelu_forward(ctx, &x, &c6, &y), GAAW_SUCCESS);
  expect_status(gaaw_bias_gelu_forward(NULL, &x, &c6, &y), GAAW_ERR_INVALID_ARG);
  BAD(gaaw_bias_gelu_forward(ctx, NULL, &c6, &y));
  BAD(gaaw_bias_gelu_forward(ctx, &x, &c5, &y));   /* bias of the wrong width */
  BAD(gaaw_bias_gelu_forward(ctx, &x, &c6, &x5));  /* a of the wrong size */
  BAD(gaaw_bias_gelu_forward(ctx, &x, &c6, &xh));  /* mixed dtypes */
  BAD(gaaw_bias_gelu_forward(ctx, &ids, &c6, &y)); /* i32 */

  expect_status_ctx(ctx, gaaw_bias_residual_add(ctx, &x, &y, &c6, &x2), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_bias_residual_add(ctx, &x, &y, &c6, &y), GAAW_SUCCESS);
  BAD(gaaw_bias_residual_add(ctx, &x, &y, NULL, &x2)); /* the bias is required */
  BAD(gaaw_bias_residual_add(ctx, &x, &y, &c5, &x2));
  BAD(gaaw_bias_residual_add(ctx, &x, &x5, &c6, &x2));
  BAD(gaaw_bias_residual_add(ctx, &x, &y, &c6, &x5));
  BAD(gaaw_bias_residual_add(ctx, &x, &y, &c6, &xh));

  expect_status_ctx(ctx, gaaw_gelu_backward_set(ctx, &x, &y, &h), GAAW_SUCCESS);
  BAD(gaaw_gelu_backward_set(ctx, &x, &y, &x5));  /* dx's size */
  BAD(gaaw_gelu_backward_set(ctx, &x5, &y, &h));  /* dy's size */
  BAD(gaaw_gelu_backward_set(ctx, &x, &y, &xh));  /* mixed dtypes */
  BAD(gaaw_gelu_backward_set(ctx, &x, NULL, &h));

  expect_status_ctx(ctx, gaaw_add_layernorm_forward(ctx, &x, &y, &c6, &c6, &c6, 1e-5f, &x2, &h, &n4, &n4b),
                    GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_add_layernorm_forward(ctx, &x, &y, NULL, &c6, &c6, 1e-5f, &x2, &h, &n4, &n4b),
                    GAAW_SUCCESS);
  BAD(gaaw_add_layernorm_forward(ctx, &x, &x5, NULL, &c6, &c6, 1e-5f, &x2, &h, &n4, &n4b)); /* y's shape */
  BAD(gaaw_add_layernorm_forward(ctx, &x, &y, &c5, &c6, &c6, 1e-5f, &x2, &h, &n4, &n4b));  /* bias */
  BAD(gaaw_add_layernorm_forward(ctx, &x, &y, NULL, &c5, &c6, 1e-5f, &x2, &h, &n4, &n4b));  /* w */
  BAD(gaaw_add_layernorm_forward(ctx, &x, &y, NULL, &c6, &c6, 1e-5f, &x5, &h, &n4, &n4b));  /* x2 */
  BAD(gaaw_add_layernorm_forward(ctx, &x, &y, NULL, &c6, &c6, 1e-5f, &x2, &x5, &n4, &n4b)); /* h */
  BAD(gaaw_add_layernorm_forward(ctx, &x, &y, NULL, &c6, &c6, 1e-5f, &x2, &h, &n5, &n4b));  /* mean */
  BAD(gaaw_add_layernorm_forward(ctx, &x, &y, NULL, &c6, &c6, 0.0f, &x2, &h, &n4, &n4b));   /* eps */
  BAD(gaaw_add_layernorm_forward(ctx, &x, &xh, NULL, &c6, &c6, 1e-5f, &x2, &h, &n4, &n4b)); /* dtype */
  BAD(gaaw_add_layernorm_forward(ctx, &x, &y, NULL, &c6, &c6, 1e-5f, &x2, &h, &ids, &n4b)); /* i32 mean */

  expect_status_ctx(ctx, gaaw_cross_entropy_forward(ctx, &x, &ids, 0, 1.0f, &n4, &n4b, &n4c, &y), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_cross_entropy_forward(ctx, &x, &ids, 0, 1.0f, &n4, &n4b, &n4c, NULL), GAAW_SUCCESS);
  BAD(gaaw_cross_entropy_forward(ctx, &x, &ids5, 0, 1.0f, &n4, &n4b, &n4c, NULL)); /* targets' count */
  BAD(gaaw_cross_entropy_forward(ctx, &x, &n4, 0, 1.0f, &n4, &n4b, &n4c, NULL));   /* f32 targets */
  BAD(gaaw_cross_entropy_forward(ctx, &x, &ids, -1, 1.0f, &n4, &n4b, &n4c, NULL)); /* vocab_start */
  BAD(gaaw_cross_entropy_forward(ctx, &x, &ids, 0, NAN, &n4, &n4b, &n4c, NULL));   /* dloss */
  BAD(gaaw_cross_entropy_forward(ctx, &x, &ids, 0, 1.0f, &n5, &n4b, &n4c, NULL));  /* max */
  BAD(gaaw_cross_entropy_forward(ctx, &x, &ids, 0, 1.0f, &n4, &n4b, &n4c, &x5));   /* dlogits */
  BAD(gaaw_cross_entropy_forward(ctx, &x, &ids, 0, 1.0f, &n4, &n4b, &n4c, &xh));   /* dlogits' dtype */
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) kt_free(ctx, all[i]);
  kt_free(ctx, &ids), kt_free(ctx, &ids5);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  unfused_ops = *ctx->device;
#define NO_FUSED(name, params) unfused_ops.name = NULL;
  GAAW_DEVICE_OPTIONAL_KERNEL_LIST(NO_FUSED)
#undef NO_FUSED
  expect_true(gaaw_device_has_bias_gelu_forward(ctx->device) && gaaw_device_has_add_layernorm_forward(ctx->device) &&
                  gaaw_device_has_cross_entropy_forward(ctx->device) && gaaw_device_has_bias_residual_add(ctx->device) &&
                  gaaw_device_has_gelu_backward_set(ctx->device),
              "the host backend should have every fused kernel");
  expect_true(!gaaw_device_has_bias_gelu_forward(&unfused_ops), "a NULL entry should count as missing");
  for (int c = 0; c < (int)(sizeof case_names / sizeof *case_names); c++)
    for (size_t d = 0; d < sizeof kt_float_dtypes / sizeof *kt_float_dtypes; d++) {
      check_same(ctx, c, kt_float_dtypes[d], 5, 37, 1);      /* one thread, short rows */
      check_same(ctx, c, kt_float_dtypes[d], 67, 771, 4);    /* threaded (above HOST_PARALLEL_MIN) */
    }
  kt_threads(2);
  check_bad_input(ctx);
  return kt_finish(&ctx, "fused kernels");
}
