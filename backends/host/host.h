/* The host backend: the reference every other backend is tested against.
 *
 * Each kernel is written once, in f32 on plain pointers (the *_f32 cores of the
 * host_*.c files). The table entries get those pointers from a host_stage: an f32
 * tensor is used in place; a bf16 or f16 tensor is converted into an f32 workspace
 * copy on the way in and converted back (round to nearest even) on the way out.
 * Every entry is called with tensors already checked by backends/kernels.c. */
#ifndef GAAW_HOST_HOST_H
#define GAAW_HOST_HOST_H

#include <stdint.h>

#include "backends/device.h"

/* Applies the option `threads` to OpenMP; with OpenBLAS, makes it single-threaded
 * so that the GEMMs are split over the OpenMP threads instead (host_threads.c). */
gaaw_status_t gaaw_host_threads_configure(gaaw_context_t ctx);
/* Threads one GEMM is split over: OpenMP's count once OpenBLAS was made
 * single-threaded, else 1 (the BLAS threads itself, or there is no BLAS). */
int gaaw_host_gemm_threads(void);

/* ---------------------------------------------------------------- staging (host_stage.c) */

#define HOST_STAGE_MAX 12

/* The host pointers of one kernel call. Errors (a failed workspace allocation) are
 * kept in status: later calls return NULL and host_stage_end returns the status. */
typedef struct {
  gaaw_context_t ctx;
  gaaw_status_t status;
  int count;
  struct {
    gaaw_tensor_t *dst; /* NULL for an input */
    gaaw_buffer_t tmp;  /* the f32 copy */
  } staged[HOST_STAGE_MAX];
} host_stage;

void host_stage_init(host_stage *s, gaaw_context_t ctx);
/* t's elements as f32 for reading; NULL for t == NULL. */
const float *host_in(host_stage *s, const gaaw_tensor_t *t);
/* t's elements as f32 for writing only (a 16-bit copy starts undefined). */
float *host_out(host_stage *s, gaaw_tensor_t *t);
/* t's elements as f32 for reading and writing (accumulating outputs). */
float *host_inout(host_stage *s, gaaw_tensor_t *t);
/* The raw host address of t (any dtype, e.g. i32 tokens); NULL for t == NULL. */
void *host_raw(host_stage *s, const gaaw_tensor_t *t);
/* Writes staged outputs back (if no error), frees the copies, returns the status. */
gaaw_status_t host_stage_end(host_stage *s);

/* Rounds p[0..n) to the precision of dtype (nothing for f32), as storing them in a
 * 16-bit tensor and loading them back would: fused kernels round an intermediate
 * that the unfused sequence stores, so that their results are the same bits. */
void host_round(float *p, int64_t n, gaaw_dtype_t dtype);

/* f32 scratch of n floats from the workspace cache (NULL after an error). Freed by
 * host_stage_end. */
float *host_scratch(host_stage *s, int64_t n);

/* ---------------------------------------------------------------- shared helpers */

/* Rows summed per chunk in reductions across rows: a constant, so that the order of
 * every sum (serial inside a chunk, chunks in order) is independent of the thread
 * count and results are bit-identical run to run. */
#define HOST_CHUNK_ROWS 32

/* Work (elements x inner length) below which a kernel runs on one thread. */
#define HOST_PARALLEL_MIN 32768

/* (rows, cols) of a tensor seen as a matrix: cols = last extent. */
static inline int64_t host_cols(const gaaw_tensor_t *t)
{
  return t->shape[t->ndim - 1];
}
static inline int64_t host_rows(const gaaw_tensor_t *t)
{
  int64_t r = 1;
  for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
  return r;
}

/* out[c] (+)= sum over chunks of partial[chunk][c], chunks in order. */
void host_sum_chunks(const float *partial, int64_t chunks, int64_t cols, float *out, int accumulate);

/* ---------------------------------------------------------------- f32 cores used across files */

/* One row of a residual add: out = x + (y + bias) (bias NULL: x + y), a 16-bit
 * y + bias and out rounded to dtype as the unfused kernels store them. out may be
 * x or y in f32; in a 16-bit dtype x and y are staged copies and out is not.
 * x, y, out, bias: (C)   (host_elementwise.c) */
void host_add_bias_row(int64_t C, const float *x, const float *y, const float *bias, float *out,
                       gaaw_dtype_t dtype);


/* Row-major c = alpha op(a) op(b) + beta c on contiguous f32 matrices; CBLAS when the
 * build has it, the blocked GEMM otherwise. beta == 0 ignores c's contents. */
gaaw_status_t gaaw_host_sgemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a, const float *b, float beta, float *c);
/* The same for batch independent matrices stored one after the other. */
gaaw_status_t gaaw_host_sgemm_batched(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t batch,
                                      int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                                      const float *b, float beta, float *c);
/* GAAW_ERR_UNSUPPORTED when m, n or k exceed the BLAS int range. */
gaaw_status_t gaaw_host_check_gemm_sizes(gaaw_context_t ctx, int64_t m, int64_t n, int64_t k);
/* One GEMM on the calling thread, never split over threads: for kernels that run
 * their own threads over tiles; its result depends only on m, n and k. The sizes
 * must fit (gaaw_host_check_gemm_sizes, by the caller). */
void gaaw_host_sgemm_serial(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n,
                            int64_t k, float alpha, const float *a, const float *b, float beta, float *c);
/* The same on blocks of larger matrices: row-major leading dimensions lda, ldb, ldc
 * (the stored row lengths of a, b and c). */
void gaaw_host_sgemm_serial_ld(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n,
                               int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                               float beta, float *c, int64_t ldc);
/* The cache-blocked C GEMM (OpenMP over row blocks): the fallback without CBLAS,
 * kept reachable so that it is tested in every build. */
gaaw_status_t gaaw_host_gemm_blocked(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m,
                                     int64_t n, int64_t k, float alpha, const float *a, const float *b,
                                     float beta, float *c);
/* Its serial form on blocks of larger matrices (leading dimensions as
 * gaaw_host_sgemm_serial_ld): that function's fallback without CBLAS. */
void gaaw_host_gemm_blocked_serial_ld(gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t m, int64_t n, int64_t k,
                                      float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                                      float beta, float *c, int64_t ldc);

/* ---------------------------------------------------------------- the table entries */

#define HOST_DECLARE(name, params) gaaw_status_t host_##name params;
GAAW_DEVICE_KERNEL_LIST(HOST_DECLARE)
GAAW_DEVICE_OPTIONAL_KERNEL_LIST(HOST_DECLARE)
#undef HOST_DECLARE

/* The kernels this backend implements (all, the optional ones too), as designated
 * initialisers of its table. */
#define HOST_TABLE_ENTRY(name, params) .name = host_##name,
#define GAAW_HOST_KERNEL_ENTRIES \
  GAAW_DEVICE_KERNEL_LIST(HOST_TABLE_ENTRY) GAAW_DEVICE_OPTIONAL_KERNEL_LIST(HOST_TABLE_ENTRY)

#endif
