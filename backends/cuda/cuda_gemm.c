/* GEMM and strided-batched GEMM through cuBLASLt, f32 accumulation (tensor cores
 * for bf16 and f16; plain f32 without TF32 for f32, so that it matches the host).
 *
 * Row-major to column-major: a row-major (r x c) matrix is the column-major (c x r)
 * matrix with the same memory, so row-major C = op(A) op(B) is computed as the
 * column-major C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our b with transpose tb, its
 * "B" is our a with transpose ta, and the sizes (m, n) swap. */
#include <string.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_kernels.h"

static cudaDataType_t data_type(gaaw_dtype_t dtype)
{
  switch (dtype) {
  case GAAW_BF16: return CUDA_R_16BF;
  case GAAW_F16: return CUDA_R_16F;
  default: return CUDA_R_32F;
  }
}

/* The largest power of two (up to 256) dividing the address and the batch stride. */
static int alignment(const void *p, int64_t stride_bytes)
{
  uint64_t bits = (uint64_t)(uintptr_t)p | (uint64_t)stride_bytes | 256u;
  return (int)(bits & (~bits + 1));
}

/* A column-major layout of rows x cols (ld = rows), batched when batch > 1. */
static gaaw_status_t layout(gaaw_context_t ctx, cublasLtMatrixLayout_t *l, cudaDataType_t type, int64_t rows,
                            int64_t cols, int64_t batch, int64_t stride)
{
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatrixLayoutCreate(l, type, (uint64_t)rows, (uint64_t)cols, rows > 0 ? rows : 1));
  if (batch > 1) {
    int32_t count = (int32_t)batch;
    GAAW_CUBLAS_CHECK(ctx, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                            sizeof count));
    GAAW_CUBLAS_CHECK(ctx, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                            sizeof stride));
  }
  return GAAW_SUCCESS;
}

/* The descriptors of one call, destroyed together. */
typedef struct {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our b), B (our a), C = D */
  cublasLtMatmulPreference_t pref;
} matmul_descs;

static void destroy_descs(matmul_descs *d)
{
  if (d->pref) cublasLtMatmulPreferenceDestroy(d->pref);
  if (d->lc) cublasLtMatrixLayoutDestroy(d->lc);
  if (d->lb) cublasLtMatrixLayoutDestroy(d->lb);
  if (d->la) cublasLtMatrixLayoutDestroy(d->la);
  if (d->op) cublasLtMatmulDescDestroy(d->op);
}

static gaaw_status_t make_descs(gaaw_context_t ctx, const gaaw_cuda_gemm_key *key, matmul_descs *d)
{
  cudaDataType_t type = data_type((gaaw_dtype_t)key->dtype);
  int64_t m = key->m, n = key->n, k = key->k, batch = key->batch;
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulDescCreate(&d->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opa = key->tb == GAAW_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = key->ta == GAAW_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  /* Our b: row-major (k, n) = column-major (n, k); with tb = T row-major (n, k) = column-major (k, n). */
  GAAW_CHECK(layout(ctx, &d->la, type, key->tb == GAAW_OP_N ? n : k, key->tb == GAAW_OP_N ? k : n, batch, k * n));
  /* Our a: row-major (m, k) = column-major (k, m); with ta = T row-major (k, m) = column-major (m, k). */
  GAAW_CHECK(layout(ctx, &d->lb, type, key->ta == GAAW_OP_N ? k : m, key->ta == GAAW_OP_N ? m : k, batch, m * k));
  /* c: row-major (m, n) = column-major (n, m). */
  GAAW_CHECK(layout(ctx, &d->lc, type, n, m, batch, m * n));
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulPreferenceCreate(&d->pref));
  size_t ws = gaaw_cuda_state_of(ctx)->lt_workspace_bytes;
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                              sizeof ws));
  /* Only algorithms that work with the alignment of these pointers. */
  uint32_t align_a = (uint32_t)key->align_b, align_b = (uint32_t)key->align_a, align_c = (uint32_t)key->align_c;
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                              &align_a, sizeof align_a));
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                              &align_b, sizeof align_b));
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                              &align_c, sizeof align_c));
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                              &align_c, sizeof align_c));
  return GAAW_SUCCESS;
}

/* The algorithm for key: remembered, or cuBLASLt's first heuristic choice. The same
 * key always gets the same algorithm, so results are reproducible. */
static gaaw_status_t find_algo(gaaw_context_t ctx, const gaaw_cuda_gemm_key *key, const matmul_descs *d,
                               cublasLtMatmulAlgo_t *algo)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  for (int i = 0; i < st->algo_count; i++)
    if (memcmp(&st->algos[i].key, key, sizeof *key) == 0) {
      *algo = st->algos[i].algo;
      return GAAW_SUCCESS;
    }
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  memset(&result, 0, sizeof result);
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmulAlgoGetHeuristic(st->lt, d->op, d->la, d->lb, d->lc, d->lc, d->pref, 1, &result,
                                                        &found));
  if (found < 1)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "cuBLASLt has no algorithm for a %s GEMM m=%lld n=%lld k=%lld batch=%lld",
              gaaw_dtype_name((gaaw_dtype_t)key->dtype), (long long)key->m, (long long)key->n, (long long)key->k,
              (long long)key->batch);
  int slot = st->algo_count < GAAW_CUDA_ALGO_CACHE ? st->algo_count++ : st->algo_next++ % GAAW_CUDA_ALGO_CACHE;
  st->algos[slot].key = *key;
  st->algos[slot].algo = result.algo;
  *algo = result.algo;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_gemm_raw(gaaw_context_t ctx, gaaw_dtype_t dtype, gaaw_transpose_t ta, gaaw_transpose_t tb,
                                 int64_t batch, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
                                 const void *b, float beta, void *c)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  if (batch == 0 || m == 0 || n == 0) return GAAW_SUCCESS;
  if (k == 0 || alpha == 0.0f) { /* c = beta c; beta == 0 ignores c's contents (nan included) */
    if (beta == 0.0f)
      GAAW_CUDA_CHECK(ctx, gaaw_cuda_fill_bits(st->compute, gaaw_dtype_size(dtype), batch * m * n, 0, c));
    else if (beta != 1.0f)
      GAAW_CUDA_CHECK(ctx, gaaw_cuda_scale(st->compute, (gaaw_cuda_dtype)dtype, batch * m * n, c, beta));
    return GAAW_SUCCESS;
  }
  if (batch > INT32_MAX)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "GEMM batch %lld exceeds cuBLASLt's int32 batch count", (long long)batch);
  size_t es = gaaw_dtype_size(dtype);
  gaaw_cuda_gemm_key key;
  memset(&key, 0, sizeof key); /* the key is compared with memcmp: no stray padding bytes */
  key.dtype = dtype;
  key.ta = ta;
  key.tb = tb;
  key.beta_zero = beta == 0.0f;
  key.batch = batch;
  key.m = m;
  key.n = n;
  key.k = k;
  key.align_a = alignment(a, batch > 1 ? m * k * (int64_t)es : 0);
  key.align_b = alignment(b, batch > 1 ? k * n * (int64_t)es : 0);
  key.align_c = alignment(c, batch > 1 ? m * n * (int64_t)es : 0);
  matmul_descs d;
  memset(&d, 0, sizeof d);
  cublasLtMatmulAlgo_t algo;
  gaaw_status_t status = make_descs(ctx, &key, &d);
  if (status == GAAW_SUCCESS) status = find_algo(ctx, &key, &d, &algo);
  if (status == GAAW_SUCCESS) {
    /* cuBLASLt's A is our b, its B our a (see the top of the file). */
    cublasStatus_t s = cublasLtMatmul(st->lt, d.op, &alpha, b, d.la, a, d.lb, &beta, c, d.lc, c, d.lc, &algo,
                                      st->lt_workspace, st->lt_workspace_bytes, st->compute);
    if (s != CUBLAS_STATUS_SUCCESS) status = gaaw_cublas_error(ctx, s, __FILE__, __LINE__, __func__, "cublasLtMatmul");
  }
  destroy_descs(&d);
  if (status != GAAW_SUCCESS) return gaaw_error_trace(ctx, status, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
