/* GEMM and strided-batched GEMM through cuBLASLt, f32 accumulation (tensor cores
 * for bf16 and f16; plain f32 without TF32 for f32, so that it matches the host).
 *
 * Row-major to column-major: a row-major (r x c) matrix is the column-major (c x r)
 * matrix with the same memory, so row-major C = op(A) op(B) is computed as the
 * column-major C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our b with transpose tb, its
 * "B" is our a with transpose ta, and the sizes (m, n) swap. */
#include <stdlib.h>
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

/* The largest power of two (up to 16: cuBLASLt asks for no more) dividing the
 * address and the batch stride. A larger cap would split one shape into many keys
 * for no different algorithm. */
static int alignment(const void *p, int64_t stride_bytes)
{
  uint64_t bits = (uint64_t)(uintptr_t)p | (uint64_t)stride_bytes | 16u;
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

/* Destroys an entry's descriptors and marks it free. */
static void clear_entry(gaaw_cuda_gemm_entry *e)
{
  if (e->lc) cublasLtMatrixLayoutDestroy(e->lc);
  if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
  if (e->la) cublasLtMatrixLayoutDestroy(e->la);
  if (e->op) cublasLtMatmulDescDestroy(e->op);
  memset(e, 0, sizeof *e);
}

void gaaw_cuda_gemm_cache_free(gaaw_cuda_state *st)
{
  if (!st->gemms) return;
  for (int i = 0; i < GAAW_CUDA_GEMM_CACHE; i++)
    if (st->gemms[i].used) clear_entry(&st->gemms[i]);
  free(st->gemms);
  st->gemms = NULL;
}

void gaaw_cuda_gemm_cache_stats(gaaw_context_t ctx, uint64_t *hits, uint64_t *misses)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  *hits = st ? st->gemm_hits : 0;
  *misses = st ? st->gemm_misses : 0;
}

/* The descriptors of key, and cuBLASLt's first algorithm for them, into e (which
 * is cleared on failure). */
static gaaw_status_t fill_entry(gaaw_context_t ctx, const gaaw_cuda_gemm_key *key, gaaw_cuda_gemm_entry *e)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  cudaDataType_t type = data_type((gaaw_dtype_t)key->dtype);
  int64_t m = key->m, n = key->n, k = key->k, batch = key->batch;
  memset(e, 0, sizeof *e);
  e->key = *key;
  gaaw_status_t status = GAAW_SUCCESS;
  cublasLtMatmulPreference_t pref = NULL;
  cublasStatus_t cs = cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    status = gaaw_cublas_error(ctx, cs, __FILE__, __LINE__, __func__, "cublasLtMatmulDescCreate");
    goto out;
  }
  cublasOperation_t opa = key->tb == GAAW_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = key->ta == GAAW_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  cs = cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
  if (cs == CUBLAS_STATUS_SUCCESS) cs = cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    status = gaaw_cublas_error(ctx, cs, __FILE__, __LINE__, __func__, "cublasLtMatmulDescSetAttribute");
    goto out;
  }
  /* Our b: row-major (k, n) = column-major (n, k); with tb = T row-major (n, k) = column-major (k, n). */
  status = layout(ctx, &e->la, type, key->tb == GAAW_OP_N ? n : k, key->tb == GAAW_OP_N ? k : n, batch, k * n);
  /* Our a: row-major (m, k) = column-major (k, m); with ta = T row-major (k, m) = column-major (m, k). */
  if (status == GAAW_SUCCESS)
    status = layout(ctx, &e->lb, type, key->ta == GAAW_OP_N ? k : m, key->ta == GAAW_OP_N ? m : k, batch, m * k);
  /* c: row-major (m, n) = column-major (n, m). */
  if (status == GAAW_SUCCESS) status = layout(ctx, &e->lc, type, n, m, batch, m * n);
  if (status != GAAW_SUCCESS) goto out;
  cs = cublasLtMatmulPreferenceCreate(&pref);
  /* The workspace, and only algorithms that work with the alignment of these
   * pointers (cuBLASLt's A is our b, its B our a). */
  uint64_t ws = st->lt_workspace_bytes;
  uint32_t align_a = (uint32_t)key->align_b, align_b = (uint32_t)key->align_a, align_c = (uint32_t)key->align_c;
  const struct {
    cublasLtMatmulPreferenceAttributes_t attr;
    const void *value;
    size_t size;
  } prefs[] = {
    {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c},
  };
  for (size_t i = 0; i < sizeof prefs / sizeof prefs[0] && cs == CUBLAS_STATUS_SUCCESS; i++)
    cs = cublasLtMatmulPreferenceSetAttribute(pref, prefs[i].attr, prefs[i].value, prefs[i].size);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    status = gaaw_cublas_error(ctx, cs, __FILE__, __LINE__, __func__, "cublasLtMatmulPreference");
    goto out;
  }
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  memset(&result, 0, sizeof result);
  cs = cublasLtMatmulAlgoGetHeuristic(st->lt, e->op, e->la, e->lb, e->lc, e->lc, pref, 1, &result, &found);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    status = gaaw_cublas_error(ctx, cs, __FILE__, __LINE__, __func__, "cublasLtMatmulAlgoGetHeuristic");
    goto out;
  }
  /* A returned result is usable only when its own state says so. */
  if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
    status = gaaw_error_raise(ctx, GAAW_ERR_UNSUPPORTED, __FILE__, __LINE__, __func__,
                              "cuBLASLt has no algorithm for a %s GEMM m=%lld n=%lld k=%lld batch=%lld "
                              "(alignments %d, %d, %d bytes)%s%s",
                              gaaw_dtype_name((gaaw_dtype_t)key->dtype), (long long)key->m, (long long)key->n,
                              (long long)key->k, (long long)key->batch, key->align_a, key->align_b, key->align_c,
                              found < 1 ? "" : ": ", found < 1 ? "" : cublasLtGetStatusString(result.state));
    goto out;
  }
  e->algo = result.algo;
  e->used = 1;
out:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (status != GAAW_SUCCESS) {
    clear_entry(e);
    return gaaw_error_trace(ctx, status, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

/* FNV-1a over the key's bytes (the key has no padding: it is memset first). */
static uint32_t key_hash(const gaaw_cuda_gemm_key *key)
{
  const unsigned char *p = (const unsigned char *)key;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < sizeof *key; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

/* The entry for key: found among its probe slots, or made in the first free one,
 * or in its home slot (replacing what was there). The same key always gets the
 * same algorithm, so results are reproducible. */
static gaaw_status_t find_entry(gaaw_context_t ctx, const gaaw_cuda_gemm_key *key, gaaw_cuda_gemm_entry **out)
{
  gaaw_cuda_state *st = gaaw_cuda_state_of(ctx);
  if (!st->gemms) {
    st->gemms = calloc(GAAW_CUDA_GEMM_CACHE, sizeof *st->gemms);
    if (!st->gemms) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the GEMM cache");
  }
  uint32_t home = key_hash(key) & (GAAW_CUDA_GEMM_CACHE - 1);
  gaaw_cuda_gemm_entry *free_slot = NULL;
  for (uint32_t i = 0; i < GAAW_CUDA_GEMM_PROBES; i++) {
    gaaw_cuda_gemm_entry *e = &st->gemms[(home + i) & (GAAW_CUDA_GEMM_CACHE - 1)];
    if (!e->used) {
      if (!free_slot) free_slot = e;
      continue;
    }
    if (memcmp(&e->key, key, sizeof *key) == 0) {
      st->gemm_hits++;
      *out = e;
      return GAAW_SUCCESS;
    }
  }
  st->gemm_misses++;
  gaaw_cuda_gemm_entry *e = free_slot;
  if (!e) {
    e = &st->gemms[home];
    clear_entry(e);
    st->gemm_evictions++;
  }
  GAAW_CHECK(fill_entry(ctx, key, e));
  *out = e;
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
  memset(&key, 0, sizeof key); /* the key is hashed and compared bytewise: no stray padding bytes */
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
  gaaw_cuda_gemm_entry *e = NULL;
  GAAW_CHECK(find_entry(ctx, &key, &e));
  /* cuBLASLt's A is our b, its B our a (see the top of the file). */
  GAAW_CUBLAS_CHECK(ctx, cublasLtMatmul(st->lt, e->op, &alpha, b, e->la, a, e->lb, &beta, c, e->lc, c, e->lc, &e->algo,
                                        st->lt_workspace, st->lt_workspace_bytes, st->compute));
  return GAAW_SUCCESS;
}
