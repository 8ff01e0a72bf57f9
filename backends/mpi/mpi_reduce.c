/* Local reductions of the MPI backend: dst = a op b element-wise. f32 and i32 are
 * combined natively; bf16 and f16 are widened to f32, combined, and rounded back
 * (nearest even). Sum and max are commutative bit for bit (no nan handling), so the
 * order of a and b never changes a result. */
#include "backends/mpi/mpi_impl.h"
#include "backends/runtime/half.h"

#define GAAW_SUM_OF(x, y) ((x) + (y))
#define GAAW_MAX_OF(x, y) ((x) > (y) ? (x) : (y))

/* acc[i] = acc[i] op x[i] and dst[i] = a[i] op b[i] on distinct arrays, in fixed
 * groups of 8 that gcc -O2 turns into vector code, then the tail. */
#define GAAW_DEFINE_KERNELS(T, NAME, OP)                                                  \
  static void acc_##NAME(T *restrict acc, const T *restrict x, int64_t n)                 \
  {                                                                                       \
    int64_t i = 0;                                                                        \
    for (; i + 8 <= n; i += 8)                                                            \
      for (int j = 0; j < 8; j++) acc[i + j] = OP(acc[i + j], x[i + j]);                  \
    for (; i < n; i++) acc[i] = OP(acc[i], x[i]);                                         \
  }                                                                                       \
  static void sep_##NAME(T *restrict dst, const T *restrict a, const T *restrict b, int64_t n) \
  {                                                                                       \
    int64_t i = 0;                                                                        \
    for (; i + 8 <= n; i += 8)                                                            \
      for (int j = 0; j < 8; j++) dst[i + j] = OP(a[i + j], b[i + j]);                    \
    for (; i < n; i++) dst[i] = OP(a[i], b[i]);                                           \
  }

GAAW_DEFINE_KERNELS(float, f32_sum, GAAW_SUM_OF)
GAAW_DEFINE_KERNELS(float, f32_max, GAAW_MAX_OF)
GAAW_DEFINE_KERNELS(int32_t, i32_sum, GAAW_SUM_OF)
GAAW_DEFINE_KERNELS(int32_t, i32_max, GAAW_MAX_OF)

/* 16-bit types through f32; dst may alias a or b exactly (element i is read before
 * it is written). */
#define GAAW_HALF_LOOP(LOAD, STORE)                                                       \
  do {                                                                                    \
    if (op == GAAW_SUM)                                                                   \
      for (int64_t i = 0; i < n; i++) dst[i] = STORE(LOAD(a[i]) + LOAD(b[i]));            \
    else                                                                                  \
      for (int64_t i = 0; i < n; i++) {                                                   \
        float x = LOAD(a[i]), y = LOAD(b[i]);                                             \
        dst[i] = STORE(GAAW_MAX_OF(x, y));                                                \
      }                                                                                   \
  } while (0)

static void reduce_half(gaaw_dtype_t dtype, gaaw_reduce_op_t op, uint16_t *dst, const uint16_t *a,
                        const uint16_t *b, int64_t n)
{
  if (dtype == GAAW_BF16)
    GAAW_HALF_LOOP(gaaw_bf16_to_f32, gaaw_f32_to_bf16);
  else
    GAAW_HALF_LOOP(gaaw_f16_to_f32, gaaw_f32_to_f16);
}

/* Picks the kernel pair of (T, op) and the aliasing case. */
#define GAAW_DISPATCH(T, SUM, MAX)                                                        \
  do {                                                                                    \
    T *d = dst;                                                                           \
    const T *x = a, *y = b;                                                               \
    if (d == x)                                                                           \
      op == GAAW_SUM ? acc_##SUM(d, y, n) : acc_##MAX(d, y, n);                            \
    else if (d == y)                                                                      \
      op == GAAW_SUM ? acc_##SUM(d, x, n) : acc_##MAX(d, x, n);                            \
    else                                                                                  \
      op == GAAW_SUM ? sep_##SUM(d, x, y, n) : sep_##MAX(d, x, y, n);                      \
  } while (0)

void gaaw_mpi_reduce(gaaw_dtype_t dtype, gaaw_reduce_op_t op, void *dst, const void *a, const void *b, int64_t n)
{
  switch (dtype) {
  case GAAW_F32: GAAW_DISPATCH(float, f32_sum, f32_max); break;
  case GAAW_I32: GAAW_DISPATCH(int32_t, i32_sum, i32_max); break;
  default: reduce_half(dtype, op, dst, a, b, n); break;
  }
}

void gaaw_mpi_to_f32(gaaw_dtype_t dtype, float *dst, const void *src, int64_t n)
{
  for (int64_t i = 0; i < n; i++) dst[i] = gaaw_load_f32(src, dtype, i);
}

void gaaw_mpi_from_f32(gaaw_dtype_t dtype, void *dst, const float *src, int64_t n)
{
  for (int64_t i = 0; i < n; i++) gaaw_store_f32(dst, dtype, i, src[i]);
}
