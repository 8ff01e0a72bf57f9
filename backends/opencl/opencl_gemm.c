/* GEMM through CLBlast (row-major, buffer offsets in elements); bf16 and f16 through
 * f32 copies (ocl_stage). CLBlast status codes are translated here, once. */
#include "config.h"
#include "backends/opencl/opencl.h"

#ifdef GAAW_HAVE_CLBLAST
#include <clblast_c.h>

/* CLBlast's own codes (its OpenCL codes share the OpenCL names). */
static const char *clblast_name(CLBlastStatusCode st)
{
  switch (st) {
  case CLBlastNotImplemented: return "CLBlastNotImplemented";
  case CLBlastInvalidMatrixA: return "CLBlastInvalidMatrixA";
  case CLBlastInvalidMatrixB: return "CLBlastInvalidMatrixB";
  case CLBlastInvalidMatrixC: return "CLBlastInvalidMatrixC";
  case CLBlastInsufficientMemoryA: return "CLBlastInsufficientMemoryA";
  case CLBlastInsufficientMemoryB: return "CLBlastInsufficientMemoryB";
  case CLBlastInsufficientMemoryC: return "CLBlastInsufficientMemoryC";
  case CLBlastInvalidBatchCount: return "CLBlastInvalidBatchCount";
  case CLBlastInvalidLocalMemUsage: return "CLBlastInvalidLocalMemUsage";
  case CLBlastNoHalfPrecision: return "CLBlastNoHalfPrecision";
  case CLBlastUnknownError: return "CLBlastUnknownError";
  case CLBlastInsufficientMemoryTemp: return "CLBlastInsufficientMemoryTemp";
  case CLBlastDatabaseError: return "CLBlastDatabaseError";
  case CLBlastUnexpectedError: return "CLBlastUnexpectedError";
  case CLBlastInvalidOverrideKernel: return "CLBlastInvalidOverrideKernel";
  case CLBlastMissingOverrideParameter: return "CLBlastMissingOverrideParameter";
  default: return (int)st > -1024 ? gaaw_ocl_error_name((cl_int)st) : "unknown CLBlast status";
  }
}

static gaaw_status_t clblast_fail(gaaw_context_t ctx, CLBlastStatusCode st, const char *routine)
{
  GAAW_FAIL(ctx, GAAW_ERR_BACKEND, "CLBlast %s failed: %s (%d)", routine, clblast_name(st), (int)st);
}
#endif

/* c = beta c (k == 0: no products). */
static gaaw_status_t scale_only(gaaw_context_t ctx, float beta, gaaw_tensor_t *c)
{
  if (beta == 0.0f) return ocl_fill(ctx, c, 0.0f);
  if (beta != 1.0f) return ocl_scale(ctx, c, beta);
  return GAAW_SUCCESS;
}

/* The batch's matrices as one packed (batch m n) f32 view, for scale_only. */
static gaaw_tensor_t packed_view(ocl_matrices c, int64_t batch, int64_t m, int64_t n)
{
  gaaw_tensor_t v = *c.t;
  v.offset += (size_t)c.at * sizeof(float);
  v.ndim = 1;
  v.shape[0] = batch * m * n;
  return v;
}

gaaw_status_t gaaw_ocl_sgemm_strided(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t batch,
                                     int64_t m, int64_t n, int64_t k, float alpha, ocl_matrices a, ocl_matrices b,
                                     float beta, ocl_matrices c)
{
  if (batch == 0 || m == 0 || n == 0) return GAAW_SUCCESS;
  if (k == 0) {
    if (c.ld != n || c.stride != m * n)
      GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "a GEMM with k = 0 on matrices that are not packed");
    gaaw_tensor_t all = packed_view(c, batch, m, n);
    GAAW_CHECK(scale_only(ctx, beta, &all));
    return GAAW_SUCCESS;
  }
#ifdef GAAW_HAVE_CLBLAST
  /* With beta == 0 CLBlast ignores c's contents (nan included), as BLAS does. */
  cl_command_queue queue = ocl_of(ctx)->queue;
  CLBlastTranspose opa = ta == GAAW_OP_N ? CLBlastTransposeNo : CLBlastTransposeYes;
  CLBlastTranspose opb = tb == GAAW_OP_N ? CLBlastTransposeNo : CLBlastTransposeYes;
  cl_mem ma = (cl_mem)a.t->buf->handle, mb = (cl_mem)b.t->buf->handle, mc = (cl_mem)c.t->buf->handle;
  size_t oa = a.t->offset / 4 + (size_t)a.at, ob = b.t->offset / 4 + (size_t)b.at, oc = c.t->offset / 4 + (size_t)c.at;
  CLBlastStatusCode st;
  if (batch == 1) {
    st = CLBlastSgemm(CLBlastLayoutRowMajor, opa, opb, (size_t)m, (size_t)n, (size_t)k, alpha, ma, oa,
                      (size_t)a.ld, mb, ob, (size_t)b.ld, beta, mc, oc, (size_t)c.ld, &queue, NULL);
    if (st != CLBlastSuccess) return clblast_fail(ctx, st, "Sgemm");
  } else {
    st = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, opa, opb, (size_t)m, (size_t)n, (size_t)k, alpha, ma, oa,
                                    (size_t)a.ld, (size_t)a.stride, mb, ob, (size_t)b.ld, (size_t)b.stride, beta, mc,
                                    oc, (size_t)c.ld, (size_t)c.stride, (size_t)batch, &queue, NULL);
    if (st != CLBlastSuccess) return clblast_fail(ctx, st, "SgemmStridedBatched");
  }
  return GAAW_SUCCESS;
#else
  (void)ta, (void)tb, (void)alpha, (void)a, (void)b;
  GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "OpenCL GEMM needs CLBlast, which this gaaw was built without");
#endif
}

gaaw_status_t gaaw_ocl_sgemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, int64_t batch,
                             int64_t m, int64_t n, int64_t k, float alpha, const gaaw_tensor_t *a,
                             const gaaw_tensor_t *b, float beta, gaaw_tensor_t *c)
{
  /* Row-major leading dimensions: the stored row lengths. */
  int64_t lda = ta == GAAW_OP_N ? k : m, ldb = tb == GAAW_OP_N ? n : k;
  return gaaw_ocl_sgemm_strided(ctx, ta, tb, batch, m, n, k, alpha, (ocl_matrices){a, 0, lda, m * k},
                                (ocl_matrices){b, 0, ldb, k * n}, beta, (ocl_matrices){c, 0, n, m * n});
}

/* (batch, rows, cols) of a tensor seen as a batch of matrices. */
static void matrix_dims(const gaaw_tensor_t *t, int64_t *batch, int64_t *rows, int64_t *cols)
{
  *cols = t->shape[t->ndim - 1];
  *rows = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
  *batch = 1;
  for (int i = 0; i < t->ndim - 2; i++) *batch *= t->shape[i];
}

/* a, b, c staged to f32, one GEMM call for batch matrices. */
static gaaw_status_t staged_gemm(gaaw_context_t ctx, const char *op, gaaw_transpose_t ta, gaaw_transpose_t tb,
                                 int64_t batch, int64_t m, int64_t n, int64_t k, float alpha, gaaw_cten a,
                                 gaaw_cten b, float beta, gaaw_ten c)
{
  OCL_CHECK_F16(op, a, b, c);
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fa, fb, fc;
  ocl_in(&s, a, &fa);
  ocl_in(&s, b, &fb);
  if (beta == 0.0f)
    ocl_out(&s, c, &fc);
  else
    ocl_inout(&s, c, &fc);
  if (s.status == GAAW_SUCCESS) s.status = gaaw_ocl_sgemm(ctx, ta, tb, batch, m, n, k, alpha, &fa, &fb, beta, &fc);
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_gemm(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha, gaaw_cten a,
                       gaaw_cten b, float beta, gaaw_ten c)
{
  int64_t m = ocl_rows(c), n = ocl_cols(c), k = ta == GAAW_OP_N ? ocl_cols(a) : ocl_rows(a);
  return staged_gemm(ctx, "gemm", ta, tb, 1, m, n, k, alpha, a, b, beta, c);
}

gaaw_status_t ocl_gemm_batched(gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,
                               gaaw_cten a, gaaw_cten b, float beta, gaaw_ten c)
{
  int64_t batch, m, n, ar, ac;
  matrix_dims(c, &batch, &m, &n);
  matrix_dims(a, &batch, &ar, &ac);
  return staged_gemm(ctx, "gemm_batched", ta, tb, batch, m, n, ta == GAAW_OP_N ? ac : ar, alpha, a, b, beta, c);
}
