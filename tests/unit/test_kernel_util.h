/* Shared by the kernel tests: a host context, tensors filled from and read into f32
 * arrays (16-bit dtypes converted on the way), seeded random data, double-precision
 * references and central finite differences. */
#ifndef GAAW_TEST_KERNEL_UTIL_H
#define GAAW_TEST_KERNEL_UTIL_H

#include <mpi.h>
#include <stdint.h>

#include "tests/harness/test_util.h"
#include "backends/runtime/half.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static gaaw_config_t kt_cfg;

/* MPI_Init, then a context on the host backend. */
static inline gaaw_context_t kt_init(int *argc, char ***argv)
{
  gaaw_context_t ctx = NULL;
  MPI_Init(argc, argv);
  require_ok(NULL, gaaw_config_create(&kt_cfg));
  require_ok(NULL, gaaw_config_set(kt_cfg, "backend", "host"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, kt_cfg, &ctx));
  return ctx;
}

static inline int kt_finish(gaaw_context_t *ctx, const char *name)
{
  require_ok(*ctx, gaaw_finalize(ctx));
  gaaw_config_destroy(&kt_cfg);
  MPI_Finalize();
  return test_finish(name);
}

/* Per-dtype tolerances (relative, floor 1 in expect_close) of results computed in f32
 * from inputs stored in the dtype and rounded once into it, against double references
 * on the same stored inputs: f32 ~ a few ulp of f32 sums; bf16 (8 significant bits)
 * and f16 (11 bits) a few ulp of the output rounding. */
static inline double kt_tol(gaaw_dtype_t dt)
{
  return dt == GAAW_F32 ? 2e-5 : dt == GAAW_BF16 ? 2e-2 : 3e-3;
}

static const gaaw_dtype_t kt_float_dtypes[] = {GAAW_F32, GAAW_BF16, GAAW_F16};

/* A value as it is stored in dtype. */
static inline float kt_round(gaaw_dtype_t dt, float v)
{
  uint32_t tmp[1];
  gaaw_store_f32(tmp, dt, 0, v);
  return gaaw_load_f32(tmp, dt, 0);
}

/* Deterministic uniform values in [lo, hi). */
static inline void kt_random(float *v, long n, float lo, float hi, uint64_t *seed)
{
  for (long i = 0; i < n; i++) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = lo + (hi - lo) * (float)((*seed >> 40) * (1.0 / 16777216.0));
  }
}

static inline gaaw_tensor_t kt_new(gaaw_context_t ctx, gaaw_dtype_t dt, int ndim, const int64_t *shape)
{
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, dt, ndim, shape, GAAW_MEM_ACTIVATIONS, &t));
  return t;
}
#define KT_NEW(ctx, dt, ...) \
  kt_new((ctx), (dt), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* Writes v (converted to t's dtype) into t; v may then be rounded in place so that the
 * caller's reference sees exactly the stored values. */
static inline void kt_upload(gaaw_context_t ctx, gaaw_tensor_t *t, float *v)
{
  long n = gaaw_tensor_numel(t);
  size_t es = gaaw_dtype_size(t->dtype);
  char *raw = malloc(n * es + 1);
  for (long i = 0; i < n; i++) {
    gaaw_store_f32(raw, t->dtype, i, v[i]);
    v[i] = gaaw_load_f32(raw, t->dtype, i);
  }
  require_ok(ctx, gaaw_buffer_write(ctx, t->buf, t->offset, raw, n * es));
  free(raw);
}

static inline void kt_download(gaaw_context_t ctx, const gaaw_tensor_t *t, float *v)
{
  long n = gaaw_tensor_numel(t);
  size_t es = gaaw_dtype_size(t->dtype);
  char *raw = malloc(n * es + 1);
  require_ok(ctx, gaaw_buffer_read(ctx, t->buf, t->offset, raw, n * es));
  for (long i = 0; i < n; i++) v[i] = gaaw_load_f32(raw, t->dtype, i);
  free(raw);
}

/* A new tensor holding random values in [lo, hi); v (n floats) receives them as stored. */
static inline gaaw_tensor_t kt_random_tensor(gaaw_context_t ctx, gaaw_dtype_t dt, int ndim, const int64_t *shape,
                                             float lo, float hi, uint64_t *seed, float *v)
{
  gaaw_tensor_t t = kt_new(ctx, dt, ndim, shape);
  kt_random(v, gaaw_tensor_numel(&t), lo, hi, seed);
  kt_upload(ctx, &t, v);
  return t;
}

static inline void kt_free(gaaw_context_t ctx, gaaw_tensor_t *t)
{
  gaaw_buffer_free(ctx, &t->buf);
}

/* t (read back) against a double reference. */
static inline void kt_expect_at(gaaw_context_t ctx, const gaaw_tensor_t *t, const double *want, double tol,
                                const char *what, const char *file, int line)
{
  long n = gaaw_tensor_numel(t);
  float *got = malloc(sizeof(float) * (n + 1)), *w = malloc(sizeof(float) * (n + 1));
  kt_download(ctx, t, got);
  for (long i = 0; i < n; i++) w[i] = (float)want[i];
  expect_close_at(got, w, n, tol, what, file, line);
  free(got);
  free(w);
}
#define kt_expect(ctx, t, want, tol, ...)                                     \
  do {                                                                        \
    char kt_what_[160];                                                       \
    snprintf(kt_what_, sizeof kt_what_, __VA_ARGS__);                         \
    kt_expect_at((ctx), (t), (want), (tol), kt_what_, __FILE__, __LINE__);    \
  } while (0)

/* The raw bytes of t (for bit-identity checks); free the result. */
static inline void *kt_bytes(gaaw_context_t ctx, const gaaw_tensor_t *t)
{
  size_t bytes = gaaw_tensor_numel(t) * gaaw_dtype_size(t->dtype);
  void *p = malloc(bytes + 1);
  require_ok(ctx, gaaw_buffer_read(ctx, t->buf, t->offset, p, bytes));
  return p;
}

static inline double *kt_dup(const float *v, long n)
{
  double *d = malloc(sizeof(double) * (n + 1));
  for (long i = 0; i < n; i++) d[i] = v[i];
  return d;
}

/* A forward reference in double: out = f(in[0], in[1], ...). */
typedef void (*kt_fn)(const void *data, double *const *in, double *out);

/* grad[i] = d/d in[which][i] of L = sum_j dy[j] f(in)[j], by central differences. */
static inline void kt_fd(kt_fn f, const void *data, double *const *in, int which, long n_in, const double *dy,
                         long n_out, double *grad)
{
  const double h = 1e-5;
  double *out = malloc(sizeof(double) * (n_out + 1));
  for (long i = 0; i < n_in; i++) {
    double keep = in[which][i], lp = 0, lm = 0;
    in[which][i] = keep + h;
    f(data, in, out);
    for (long j = 0; j < n_out; j++) lp += dy[j] * out[j];
    in[which][i] = keep - h;
    f(data, in, out);
    for (long j = 0; j < n_out; j++) lm += dy[j] * out[j];
    in[which][i] = keep;
    grad[i] = (lp - lm) / (2 * h);
  }
  free(out);
}

/* Sets the OpenMP thread count for the next kernels (no-op without OpenMP). */
static inline void kt_threads(int n)
{
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

#endif
