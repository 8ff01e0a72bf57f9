/* Pointwise and whole-tensor kernels: the activations (every elementwise kind and
 * SwiGLU; forward vs double reference, backward vs finite differences,
 * accumulating), bias add/backward, add (also in place), axpy, scale, cast (known
 * bit patterns), fill, sum of squares (vs double, bit-identical across thread
 * counts), check_finite. */
#include "tests/unit/test_kernel_util.h"

typedef struct {
  long N, H; /* swiglu: x (N, 2H) -> y (N, H); the others: N * H elements */
  gaaw_activation_t act;
} act_shape;

static double ref_value(gaaw_activation_t act, double v)
{
  switch (act) {
  case GAAW_ACT_GELU: return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  case GAAW_ACT_RELU: return v > 0 ? v : 0;
  case GAAW_ACT_TANH: return tanh(v);
  case GAAW_ACT_SILU: return v / (1 + exp(-v));
  default: return v;
  }
}

static void ref_act(const void *data, double *const *in, double *y)
{
  const act_shape *s = data;
  const double *x = in[0];
  if (s->act != GAAW_ACT_SWIGLU) {
    for (long i = 0; i < s->N * s->H; i++) y[i] = ref_value(s->act, x[i]);
    return;
  }
  for (long n = 0; n < s->N; n++)
    for (long h = 0; h < s->H; h++) {
      double a = x[n * 2 * s->H + h], g = x[n * 2 * s->H + s->H + h];
      y[n * s->H + h] = a / (1 + exp(-a)) * g;
    }
}

static gaaw_status_t act_forward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *x, gaaw_tensor_t *y)
{
  return act == GAAW_ACT_SWIGLU ? gaaw_swiglu_forward(ctx, x, y) : gaaw_activation_forward(ctx, act, x, y);
}

static gaaw_status_t act_backward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *dy,
                                  const gaaw_tensor_t *x, gaaw_tensor_t *dx)
{
  return act == GAAW_ACT_SWIGLU ? gaaw_swiglu_backward(ctx, dy, x, dx) : gaaw_activation_backward(ctx, act, dy, x, dx);
}

static const char *const act_names[GAAW_ACT_COUNT] = {"gelu", "swiglu", "none", "relu", "tanh", "silu"};

static void check_activation(gaaw_context_t ctx, gaaw_dtype_t dt, gaaw_activation_t act, uint64_t *seed)
{
  int swiglu = act == GAAW_ACT_SWIGLU;
  act_shape s = {6, 9, act};
  long nin = s.N * s.H * (swiglu ? 2 : 1), nout = s.N * s.H;
  const char *name = act_names[act];
  float *x = malloc(sizeof(float) * nin), *dy = malloc(sizeof(float) * nout), *dx0 = malloc(sizeof(float) * nin);
  int64_t xs[2] = {s.N, swiglu ? 2 * s.H : s.H};
  gaaw_tensor_t tx = kt_random_tensor(ctx, dt, 2, xs, -3, 3, seed, x);
  gaaw_tensor_t ty = KT_NEW(ctx, dt, s.N, s.H);
  gaaw_tensor_t tdy = kt_random_tensor(ctx, dt, 2, (int64_t[]){s.N, s.H}, -1, 1, seed, dy);
  gaaw_tensor_t tdx = kt_random_tensor(ctx, dt, 2, xs, -1, 1, seed, dx0);
  double *in[1] = {kt_dup(x, nin)}, *y = malloc(sizeof(double) * nout), *ddy = kt_dup(dy, nout);
  double *g = malloc(sizeof(double) * nin);
  expect_status_ctx(ctx, act_forward(ctx, act, &tx, &ty), GAAW_SUCCESS);
  ref_act(&s, in, y);
  kt_expect(ctx, &ty, y, kt_tol(dt), "%s forward %s", name, gaaw_dtype_name(dt));
  expect_status_ctx(ctx, act_backward(ctx, act, &tdy, &tx, &tdx), GAAW_SUCCESS);
  kt_fd(ref_act, &s, in, 0, nin, ddy, nout, g); /* no x within 1e-5 of ReLU's kink: the draw is fixed */
  for (long i = 0; i < nin; i++) g[i] += dx0[i];
  kt_expect(ctx, &tdx, g, 2 * kt_tol(dt), "%s backward %s dx (accumulated)", name, gaaw_dtype_name(dt));
  kt_free(ctx, &tx), kt_free(ctx, &ty), kt_free(ctx, &tdy), kt_free(ctx, &tdx);
  free(x), free(dy), free(dx0), free(in[0]), free(y), free(ddy), free(g);
}

/* ReLU's slope at exactly 0 is 0 (PyTorch's choice); SwiGLU and kinds outside
 * gaaw_activation_t are refused by the elementwise entries. */
static void check_activation_edges(gaaw_context_t ctx)
{
  float zero[2] = {0.0f, -0.0f}, one[2] = {1.0f, 1.0f};
  gaaw_tensor_t tx = KT_NEW(ctx, GAAW_F32, 2), tdy = KT_NEW(ctx, GAAW_F32, 2), tdx = KT_NEW(ctx, GAAW_F32, 2);
  kt_upload(ctx, &tx, zero);
  kt_upload(ctx, &tdy, one);
  require_ok(ctx, gaaw_fill(ctx, &tdx, 0.0f));
  expect_status_ctx(ctx, gaaw_activation_backward(ctx, GAAW_ACT_RELU, &tdy, &tx, &tdx), GAAW_SUCCESS);
  kt_expect(ctx, &tdx, ((double[]){0, 0}), 0, "relu slope at 0");
  expect_status_ctx(ctx, gaaw_activation_forward(ctx, GAAW_ACT_SWIGLU, &tx, &tdx), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_activation_forward(ctx, (gaaw_activation_t)GAAW_ACT_COUNT, &tx, &tdx),
                    GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_activation_backward(ctx, (gaaw_activation_t)-1, &tdy, &tx, &tdx), GAAW_ERR_INVALID_ARG);
  kt_free(ctx, &tx), kt_free(ctx, &tdy), kt_free(ctx, &tdx);
}

/* bias_add, bias_backward, add (also y = a), axpy, scale against double loops. */
static void check_elementwise(gaaw_context_t ctx, gaaw_dtype_t dt, uint64_t *seed)
{
  enum { N = 45, C = 11 };
  static float y0[N * C], b[C], dy[N * C], db0[C], a[N * C], bb[N * C], out[N * C];
  static double want[N * C];
  double tol = kt_tol(dt);
  const char *dn = gaaw_dtype_name(dt);
  gaaw_tensor_t ty = kt_random_tensor(ctx, dt, 3, (int64_t[]){5, 9, C}, -1, 1, seed, y0);
  gaaw_tensor_t tb = kt_random_tensor(ctx, dt, 1, (int64_t[]){C}, -1, 1, seed, b);
  expect_status_ctx(ctx, gaaw_bias_add(ctx, &ty, &tb), GAAW_SUCCESS);
  for (long i = 0; i < N * C; i++) want[i] = (double)y0[i] + b[i % C];
  kt_expect(ctx, &ty, want, tol, "bias_add %s", dn);

  gaaw_tensor_t tdy = kt_random_tensor(ctx, dt, 2, (int64_t[]){N, C}, -1, 1, seed, dy);
  gaaw_tensor_t tdb = kt_random_tensor(ctx, dt, 1, (int64_t[]){C}, -1, 1, seed, db0);
  expect_status_ctx(ctx, gaaw_bias_backward(ctx, &tdy, &tdb), GAAW_SUCCESS);
  for (long c = 0; c < C; c++) {
    want[c] = db0[c];
    for (long n = 0; n < N; n++) want[c] += dy[n * C + c];
  }
  kt_expect(ctx, &tdb, want, 2 * tol, "bias_backward %s (accumulated)", dn);

  gaaw_tensor_t ta = kt_random_tensor(ctx, dt, 2, (int64_t[]){N, C}, -1, 1, seed, a);
  gaaw_tensor_t tbb = kt_random_tensor(ctx, dt, 1, (int64_t[]){N * C}, -1, 1, seed, bb);
  gaaw_tensor_t tout = KT_NEW(ctx, dt, N, C);
  for (long i = 0; i < N * C; i++) want[i] = (double)a[i] + bb[i];
  expect_status_ctx(ctx, gaaw_add(ctx, &ta, &tbb, &tout), GAAW_SUCCESS);
  kt_expect(ctx, &tout, want, tol, "add %s", dn);
  expect_status_ctx(ctx, gaaw_add(ctx, &ta, &tbb, &ta), GAAW_SUCCESS); /* in place: y = a */
  kt_expect(ctx, &ta, want, tol, "add %s in place (y is a)", dn);

  kt_download(ctx, &ta, a);
  expect_status_ctx(ctx, gaaw_axpy(ctx, -0.5f, &tbb, &ta), GAAW_SUCCESS);
  for (long i = 0; i < N * C; i++) want[i] = (double)a[i] - 0.5 * bb[i];
  kt_expect(ctx, &ta, want, tol, "axpy %s", dn);
  kt_download(ctx, &ta, a);
  expect_status_ctx(ctx, gaaw_scale(ctx, &ta, 3.0f), GAAW_SUCCESS);
  for (long i = 0; i < N * C; i++) want[i] = 3.0 * a[i];
  kt_expect(ctx, &ta, want, tol, "scale %s", dn);
  (void)out;
  kt_free(ctx, &ty), kt_free(ctx, &tb), kt_free(ctx, &tdy), kt_free(ctx, &tdb);
  kt_free(ctx, &ta), kt_free(ctx, &tbb), kt_free(ctx, &tout);
}

/* Reductions across rows and the sum of squares: same bits for 1, 2 and 3 threads
 * (sizes above the parallel threshold); sum of squares also against double. */
static void check_reductions_threads(gaaw_context_t ctx, uint64_t *seed)
{
  const long N = 2000, C = 48, n = 300001;
  float *v = malloc(sizeof(float) * n);
  gaaw_tensor_t tdy = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){N, C}, -1, 1, seed, v);
  gaaw_tensor_t tdb = KT_NEW(ctx, GAAW_F32, C), tss = KT_NEW(ctx, GAAW_F32, 1);
  for (int d = 0; d < 2; d++) {
    gaaw_dtype_t dt = d ? GAAW_BF16 : GAAW_F32;
    gaaw_tensor_t tx = kt_random_tensor(ctx, dt, 1, (int64_t[]){n}, -2, 2, seed, v);
    double want = 0;
    for (long i = 0; i < n; i++) want += (double)v[i] * v[i];
    float db_first[48], ss_first = 0;
    for (int threads = 1; threads <= 3; threads++) {
      kt_threads(threads);
      require_ok(ctx, gaaw_fill(ctx, &tdb, 1.0f));
      require_ok(ctx, gaaw_bias_backward(ctx, &tdy, &tdb));
      require_ok(ctx, gaaw_sum_squares(ctx, &tx, &tss));
      float db[48], ss;
      kt_download(ctx, &tdb, db);
      kt_download(ctx, &tss, &ss);
      if (threads == 1) {
        memcpy(db_first, db, sizeof db);
        ss_first = ss;
        kt_expect(ctx, &tss, &want, 1e-5, "sum_squares %s of %ld elements", gaaw_dtype_name(dt), n);
      } else {
        expect_true(memcmp(db, db_first, sizeof db) == 0, "bias_backward differs between 1 and %d threads", threads);
        expect_true(memcmp(&ss, &ss_first, 4) == 0, "sum_squares %s: %.9g with 1 thread, %.9g with %d",
                    gaaw_dtype_name(dt), ss_first, ss, threads);
      }
    }
    kt_free(ctx, &tx);
  }
  kt_threads(2);
  kt_free(ctx, &tdy), kt_free(ctx, &tdb), kt_free(ctx, &tss);
  free(v);
}

/* Reads t's raw bits. */
static void raw(gaaw_context_t ctx, const gaaw_tensor_t *t, void *dst)
{
  require_ok(ctx, gaaw_buffer_read(ctx, t->buf, t->offset, dst, gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype)));
}

static void check_cast_fill(gaaw_context_t ctx)
{
  /* f32 -> bf16 and f16, round to nearest even: 1 + 2^-8 is a bf16 tie (to 1), 1 + 3 * 2^-8
   * a tie to 1 + 2^-6 (both exact in f16); 1 + 2^-11 an f16 tie (to 1); 70000 overflows f16. */
  float x[6] = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-11f, -2.5f, 70000.0f};
  uint16_t want_bf16[6] = {0x3f80, 0x3f80, 0x3f82, 0x3f80, 0xc020, 0x4789};
  uint16_t want_f16[6] = {0x3c00, 0x3c04, 0x3c0c, 0x3c00, 0xc100, 0x7c00};
  gaaw_tensor_t tx = KT_NEW(ctx, GAAW_F32, 6), tb = KT_NEW(ctx, GAAW_BF16, 6), th = KT_NEW(ctx, GAAW_F16, 2, 3);
  gaaw_tensor_t ti = KT_NEW(ctx, GAAW_I32, 6), tf = KT_NEW(ctx, GAAW_F32, 6);
  require_ok(ctx, gaaw_buffer_write(ctx, tx.buf, 0, x, sizeof x));
  uint16_t h[6];
  expect_status_ctx(ctx, gaaw_cast(ctx, &tx, &tb), GAAW_SUCCESS);
  raw(ctx, &tb, h);
  for (int i = 0; i < 6; i++)
    expect_true(h[i] == want_bf16[i], "cast f32 %.9g -> bf16 gave 0x%04x, expected 0x%04x", x[i], h[i], want_bf16[i]);
  expect_status_ctx(ctx, gaaw_cast(ctx, &tx, &th), GAAW_SUCCESS);
  raw(ctx, &th, h);
  for (int i = 0; i < 6; i++)
    expect_true(h[i] == want_f16[i], "cast f32 %.9g -> f16 gave 0x%04x, expected 0x%04x", x[i], h[i], want_f16[i]);
  /* f16 -> f32 is exact; f32 -> i32 rounds toward zero; i32 -> f32 exact for small values */
  float back[6];
  expect_status_ctx(ctx, gaaw_cast(ctx, &th, &tf), GAAW_SUCCESS);
  raw(ctx, &tf, back);
  expect_true(back[4] == -2.5f && isinf(back[5]), "cast f16 -> f32 gave %g and %g", back[4], back[5]);
  int32_t iv[6];
  expect_status_ctx(ctx, gaaw_cast(ctx, &tx, &ti), GAAW_SUCCESS);
  raw(ctx, &ti, iv);
  expect_true(iv[4] == -2 && iv[5] == 70000 && iv[0] == 1, "cast f32 -> i32 gave %d %d %d", iv[0], iv[4], iv[5]);
  expect_status_ctx(ctx, gaaw_cast(ctx, &ti, &tf), GAAW_SUCCESS);
  raw(ctx, &tf, back);
  expect_true(back[4] == -2.0f && back[5] == 70000.0f, "cast i32 -> f32 gave %g %g", back[4], back[5]);

  /* fill: 1/3 in bf16 is 0x3eab (rounded up), in f16 0x3555; i32 -2.9 is -2 */
  expect_status_ctx(ctx, gaaw_fill(ctx, &tb, 1.0f / 3.0f), GAAW_SUCCESS);
  raw(ctx, &tb, h);
  expect_true(h[0] == 0x3eab && h[5] == 0x3eab, "fill bf16 1/3 gave 0x%04x", h[5]);
  expect_status_ctx(ctx, gaaw_fill(ctx, &th, 1.0f / 3.0f), GAAW_SUCCESS);
  raw(ctx, &th, h);
  expect_true(h[0] == 0x3555 && h[5] == 0x3555, "fill f16 1/3 gave 0x%04x", h[5]);
  expect_status_ctx(ctx, gaaw_fill(ctx, &ti, -2.9f), GAAW_SUCCESS);
  raw(ctx, &ti, iv);
  expect_true(iv[0] == -2 && iv[5] == -2, "fill i32 -2.9 gave %d", iv[5]);
  expect_status_ctx(ctx, gaaw_fill(ctx, &tf, -0.75f), GAAW_SUCCESS);
  raw(ctx, &tf, back);
  expect_true(back[0] == -0.75f && back[5] == -0.75f, "fill f32 -0.75 gave %g", back[5]);
  kt_free(ctx, &tx), kt_free(ctx, &tb), kt_free(ctx, &th), kt_free(ctx, &ti), kt_free(ctx, &tf);
}

/* A fill larger than the caches (the host writes it with streaming stores) of a
 * view that starts and ends off a 16-byte boundary: every element of the view set,
 * the elements around it untouched. */
static void check_large_fill(gaaw_context_t ctx)
{
  enum { N = (1 << 20) + 7, SKIP = 3 }; /* 4 MiB + 28 bytes, from element 3 */
  gaaw_tensor_t all = KT_NEW(ctx, GAAW_F32, N + 2 * SKIP);
  require_ok(ctx, gaaw_fill(ctx, &all, 1.5f));
  gaaw_tensor_t part = all;
  part.offset += SKIP * sizeof(float);
  part.shape[0] = N;
  require_ok(ctx, gaaw_fill(ctx, &part, -2.25f));
  float *v = malloc((N + 2 * SKIP) * sizeof *v);
  if (!v) return;
  require_ok(ctx, gaaw_buffer_read(ctx, all.buf, all.offset, v, (N + 2 * SKIP) * sizeof *v));
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < N + 2 * SKIP; i++) {
    float want = i < SKIP || i >= N + SKIP ? 1.5f : -2.25f;
    if (v[i] != want && wrong++ == 0) first = i;
  }
  expect_true(wrong == 0, "large fill: %lld of %d elements wrong, the first at %lld", (long long)wrong,
              N + 2 * SKIP, (long long)first);

  /* a same-dtype cast that large is a copy over the threads; one between overlapping
   * views of one buffer (SKIP elements apart) is a memmove */
  for (int64_t i = 0; i < N + 2 * SKIP; i++) v[i] = (float)(i % 1000) - 500.0f;
  require_ok(ctx, gaaw_buffer_write(ctx, all.buf, all.offset, v, (N + 2 * SKIP) * sizeof *v));
  gaaw_tensor_t copy = KT_NEW(ctx, GAAW_F32, N), head = part;
  require_ok(ctx, gaaw_cast(ctx, &part, &copy));
  head.offset = all.offset; /* elements [0, N): overlaps part, which starts SKIP later */
  require_ok(ctx, gaaw_cast(ctx, &part, &head));
  float *c = malloc(N * sizeof *c), *h = malloc(N * sizeof *h);
  if (c && h) {
    require_ok(ctx, gaaw_buffer_read(ctx, copy.buf, copy.offset, c, N * sizeof *c));
    require_ok(ctx, gaaw_buffer_read(ctx, all.buf, all.offset, h, N * sizeof *h));
    int64_t bad_copy = 0, bad_move = 0;
    for (int64_t i = 0; i < N; i++) {
      float want = (float)((i + SKIP) % 1000) - 500.0f;
      bad_copy += c[i] != want;
      bad_move += h[i] != want;
    }
    expect_true(bad_copy == 0 && bad_move == 0, "large cast f32 -> f32: %lld wrong in the copy, %lld in the overlap",
                (long long)bad_copy, (long long)bad_move);
  }
  free(c);
  free(h);
  kt_free(ctx, &copy);
  free(v);
  kt_free(ctx, &all);
}

/* check_finite leaves the flag alone for finite data, sets it to 1 for inf or nan. */
static void check_finite(gaaw_context_t ctx)
{
  gaaw_tensor_t flag = KT_NEW(ctx, GAAW_I32, 1);
  for (int d = 0; d < 3; d++) {
    gaaw_dtype_t dt = kt_float_dtypes[d];
    const char *dn = gaaw_dtype_name(dt);
    float v[100];
    for (int i = 0; i < 100; i++) v[i] = (i - 50) * 650.0f; /* up to 32500, finite in f16 */
    gaaw_tensor_t x = KT_NEW(ctx, dt, 100);
    int32_t f;
    kt_upload(ctx, &x, v);
    require_ok(ctx, gaaw_fill(ctx, &flag, 7));
    expect_status_ctx(ctx, gaaw_check_finite(ctx, &x, &flag), GAAW_SUCCESS);
    raw(ctx, &flag, &f);
    expect_true(f == 7, "check_finite %s on finite data changed the flag to %d", dn, f);
    require_ok(ctx, gaaw_fill(ctx, &flag, 0));
    float special[2] = {INFINITY, NAN};
    for (int s = 0; s < 2; s++) {
      v[63] = special[s];
      kt_upload(ctx, &x, v);
      require_ok(ctx, gaaw_fill(ctx, &flag, 0));
      expect_status_ctx(ctx, gaaw_check_finite(ctx, &x, &flag), GAAW_SUCCESS);
      raw(ctx, &flag, &f);
      expect_true(f == 1, "check_finite %s missed %g (flag %d)", dn, special[s], f);
    }
    kt_free(ctx, &x);
  }
  kt_free(ctx, &flag);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 3;
  for (int d = 0; d < 3; d++) {
    for (int a = 0; a < GAAW_ACT_COUNT; a++) check_activation(ctx, kt_float_dtypes[d], (gaaw_activation_t)a, &seed);
    check_elementwise(ctx, kt_float_dtypes[d], &seed);
  }
  check_activation_edges(ctx);
  check_reductions_threads(ctx, &seed);
  check_cast_fill(ctx);
  check_large_fill(ctx);
  check_finite(ctx);
  return kt_finish(&ctx, "test_kernel_pointwise");
}
