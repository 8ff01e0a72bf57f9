/* Whole-tensor utilities: cast, sum of squares, finite check, fill, synchronize. */
#include <math.h>
#include <string.h>

#include "backends/host/host.h"
#include "backends/runtime/half.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Elements per chunk of the sum of squares: a constant, for a fixed summation order. */
enum { SUMSQ_CHUNK = 4096 };

/* Bytes per block of a threaded copy. */
enum { COPY_BLOCK = 1 << 18 };

/* dst = src, n bytes: memmove where the two overlap, else blocks over the threads. */
static void copy_bytes(void *dst, const void *src, size_t n)
{
  char *d = dst;
  const char *s = src;
  if (d == s) return;
  if (d < s + n && s < d + n) {
    memmove(d, s, n);
    return;
  }
  int64_t blocks = (int64_t)((n + COPY_BLOCK - 1) / COPY_BLOCK);
#pragma omp parallel for if (blocks > 1 && (int64_t)n / 4 > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < blocks; k++) {
    size_t at = (size_t)k * COPY_BLOCK;
    memcpy(d + at, s + at, n - at < COPY_BLOCK ? n - at : COPY_BLOCK);
  }
}

gaaw_status_t host_cast(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const void *px = host_raw(&s, x);
  void *py = host_raw(&s, y);
  int64_t n = gaaw_tensor_numel(x);
  if (s.status == GAAW_SUCCESS) {
    if (x->dtype == y->dtype) {
      copy_bytes(py, px, (size_t)n * gaaw_dtype_size(x->dtype));
    } else {
      gaaw_dtype_t dx = x->dtype, dy = y->dtype;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
      for (int64_t i = 0; i < n; i++) gaaw_store_f32(py, dy, i, gaaw_load_f32(px, dx, i));
    }
  }
  return host_stage_end(&s);
}

/* Sum of x[i]^2 over [begin, end), in f32 (chunks are short). */
static float chunk_sum_squares(const void *x, gaaw_dtype_t dtype, int64_t begin, int64_t end)
{
  float s = 0.0f;
  if (dtype == GAAW_F32) {
    const float *f = x;
#pragma omp simd reduction(+ : s)
    for (int64_t i = begin; i < end; i++) s += f[i] * f[i];
  } else {
    for (int64_t i = begin; i < end; i++) {
      float v = gaaw_load_f32(x, dtype, i);
      s += v * v;
    }
  }
  return s;
}

gaaw_status_t host_sum_squares(gaaw_context_t ctx, gaaw_cten x, gaaw_ten out)
{
  int64_t n = gaaw_tensor_numel(x), chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
  host_stage s;
  host_stage_init(&s, ctx);
  const void *px = host_raw(&s, x);
  float *pout = host_out(&s, out);
  float *partial = host_scratch(&s, chunks);
  if (s.status == GAAW_SUCCESS) {
    gaaw_dtype_t dtype = x->dtype;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
    for (int64_t k = 0; k < chunks; k++)
      partial[k] = chunk_sum_squares(px, dtype, k * SUMSQ_CHUNK, k + 1 < chunks ? (k + 1) * SUMSQ_CHUNK : n);
    /* Chunk totals in double, in order: a gradient norm sums millions of elements. */
    double total = 0.0;
    for (int64_t k = 0; k < chunks; k++) total += partial[k];
    pout[0] = (float)total;
  }
  return host_stage_end(&s);
}

gaaw_status_t host_check_finite(gaaw_context_t ctx, gaaw_cten x, gaaw_ten flag)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const void *px = host_raw(&s, x);
  int32_t *pf = host_raw(&s, flag);
  int64_t n = gaaw_tensor_numel(x);
  if (s.status == GAAW_SUCCESS) {
    int bad = 0;
    if (x->dtype == GAAW_F32) {
      const uint32_t *u = px; /* all-ones exponent: inf or nan */
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) reduction(| : bad) schedule(static)
      for (int64_t i = 0; i < n; i++) bad |= (u[i] & 0x7f800000u) == 0x7f800000u;
    } else {
      const uint16_t *h = px;
      uint16_t mask = x->dtype == GAAW_BF16 ? 0x7f80u : 0x7c00u;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) reduction(| : bad) schedule(static)
      for (int64_t i = 0; i < n; i++) bad |= (h[i] & mask) == mask;
    }
    if (bad) pf[0] = 1;
  }
  return host_stage_end(&s);
}

/* Fills of at least this many bytes bypass the caches (x86-64): larger than a core's
 * L2, they would evict everything to write lines that are not read again soon (the
 * gradients zeroed after a step are next written in the next backward), and a plain
 * store first reads each line it writes. */
#define FILL_STREAM_BYTES ((int64_t)2 << 20)
enum { FILL_BLOCK = 1 << 16 };

/* u[lo, hi) = bits */
static void fill32_range(uint32_t *u, int64_t lo, int64_t hi, uint32_t bits, int stream)
{
  int64_t i = lo;
#if defined(__x86_64__)
  if (stream) {
    for (; i < hi && ((uintptr_t)(u + i) & 15); i++) u[i] = bits;
    __m128i v = _mm_set1_epi32((int)bits);
    for (; i + 4 <= hi; i += 4) _mm_stream_si128((__m128i *)(u + i), v);
  }
#else
  (void)stream;
#endif
  for (; i < hi; i++) u[i] = bits;
}

/* u: (n) = bits, in blocks over the threads */
static void fill32(uint32_t *u, int64_t n, uint32_t bits)
{
  int stream = n * 4 >= FILL_STREAM_BYTES;
  int64_t blocks = (n + FILL_BLOCK - 1) / FILL_BLOCK;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < blocks; k++) {
    fill32_range(u, k * FILL_BLOCK, k + 1 < blocks ? (k + 1) * FILL_BLOCK : n, bits, stream);
#if defined(__x86_64__)
    if (stream) _mm_sfence(); /* this thread's streaming stores are visible before the region ends */
#endif
  }
}

gaaw_status_t host_fill(gaaw_context_t ctx, gaaw_ten x, float value)
{
  host_stage s;
  host_stage_init(&s, ctx);
  void *px = host_raw(&s, x);
  int64_t n = gaaw_tensor_numel(x);
  if (s.status == GAAW_SUCCESS) {
    if (gaaw_dtype_size(x->dtype) == 4) { /* f32 or i32: one 32-bit pattern */
      uint32_t bits;
      if (x->dtype == GAAW_I32) {
        int32_t iv = (int32_t)value;
        memcpy(&bits, &iv, 4);
      } else {
        bits = gaaw_f32_bits(value);
      }
      fill32(px, n, bits);
    } else {
      uint16_t bits = x->dtype == GAAW_BF16 ? gaaw_f32_to_bf16(value) : gaaw_f32_to_f16(value);
      uint16_t *h = px;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
      for (int64_t i = 0; i < n; i++) h[i] = bits;
    }
  }
  return host_stage_end(&s);
}

gaaw_status_t host_synchronize(gaaw_context_t ctx)
{
  (void)ctx; /* host kernels run synchronously */
  return GAAW_SUCCESS;
}
