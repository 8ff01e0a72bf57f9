/* The attention kernels against PyTorch 1.13 (tests/reference/attention_reference.py,
 * nanoGPT's causal attention with autograd, f32) from the same q, k, v and dout, at
 * T = 64, 128 and 512 (one, two and eight of the host's 64-row tiles), B x H = 4
 * heads of D = 32: out and dq, dk, dv of the blocked kernel (gaaw_flash_attention_*)
 * and of the (T, T) matrix kernel (gaaw_attention_*), host backend.
 * Skips (77) when the reference says PyTorch is missing.
 *
 * Tolerance, per tensor, of that tensor's largest |value|: both sides are f32 and
 * differ in summation order (up to T = 512 terms: sqrt(512) x 2^-24 ~ 1.3e-6
 * relative) and in exp; 1e-5 leaves room for other BLAS blockings, while a scale
 * of 1/D instead of 1/sqrt(D), or one key too many seen, moves them by 1e-2 or more. */
#include "tests/unit/test_kernel_util.h"

#include "tests/harness/torch_cases.h"

#define TOL 1e-5
enum { BH = 4, D = 32, CASES = 3 };
static const long seqs[CASES] = {64, 128, 512};

/* max |got - want| / max |want|, for the log. */
static double scaled_error(const float *got, const float *want, long n)
{
  double err = 0, top = 0;
  for (long i = 0; i < n; i++) {
    err = fmax(err, fabs((double)got[i] - want[i]));
    top = fmax(top, fabs((double)want[i]));
  }
  return top > 0 ? err / top : err;
}

/* The four inputs of case k. */
typedef struct {
  float *q, *k, *v, *dout;
} inputs;

/* out and dq, dk, dv (from zero) of one kernel; flash: the blocked one. */
static void run_kernel(gaaw_context_t ctx, const inputs *in, long T, int flash, float *res[4])
{
  int64_t shape[3] = {BH, T, D}, lshape[2] = {BH, T}, pshape[3] = {BH, T, T};
  gaaw_tensor_t q = kt_new(ctx, GAAW_F32, 3, shape), k = kt_new(ctx, GAAW_F32, 3, shape);
  gaaw_tensor_t v = kt_new(ctx, GAAW_F32, 3, shape), dout = kt_new(ctx, GAAW_F32, 3, shape);
  gaaw_tensor_t out = kt_new(ctx, GAAW_F32, 3, shape), g[3];
  kt_upload(ctx, &q, in->q), kt_upload(ctx, &k, in->k), kt_upload(ctx, &v, in->v), kt_upload(ctx, &dout, in->dout);
  for (int i = 0; i < 3; i++) {
    g[i] = kt_new(ctx, GAAW_F32, 3, shape);
    require_ok(ctx, gaaw_fill(ctx, &g[i], 0));
  }
  if (flash) {
    gaaw_tensor_t lse = kt_new(ctx, GAAW_F32, 2, lshape);
    require_ok(ctx, gaaw_flash_attention_forward(ctx, &q, &k, &v, &out, &lse));
    require_ok(ctx, gaaw_flash_attention_backward(ctx, &dout, &q, &k, &v, &out, &lse, &g[0], &g[1], &g[2]));
    kt_free(ctx, &lse);
  } else {
    gaaw_tensor_t probs = kt_new(ctx, GAAW_F32, 3, pshape), dprobs = kt_new(ctx, GAAW_F32, 3, pshape);
    require_ok(ctx, gaaw_attention_forward(ctx, &q, &k, &v, &probs, &out));
    require_ok(ctx, gaaw_attention_backward(ctx, &dout, &q, &k, &v, &probs, &dprobs, &g[0], &g[1], &g[2]));
    kt_free(ctx, &probs), kt_free(ctx, &dprobs);
  }
  gaaw_tensor_t *t[4] = {&out, &g[0], &g[1], &g[2]};
  for (int i = 0; i < 4; i++) {
    res[i] = malloc(sizeof(float) * BH * T * D);
    kt_download(ctx, t[i], res[i]);
  }
  kt_free(ctx, &q), kt_free(ctx, &k), kt_free(ctx, &v), kt_free(ctx, &dout), kt_free(ctx, &out);
  for (int i = 0; i < 3; i++) kt_free(ctx, &g[i]);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 5;
  inputs in[CASES];
  torch_cases ref;
  torch_cases_init_script(&ref, "attn", "attention_reference.py");
  for (int c = 0; c < CASES; c++) {
    long T = seqs[c], n = BH * T * D;
    int64_t shape[3] = {BH, T, D};
    float **p[4] = {&in[c].q, &in[c].k, &in[c].v, &in[c].dout};
    static const char *names[4] = {"q", "k", "v", "dout"};
    FILE *f = torch_case_begin(&ref);
    for (int i = 0; i < 4; i++) {
      *p[i] = malloc(sizeof(float) * n);
      kt_random(*p[i], n, i < 2 ? -2.0f : -1.0f, i < 2 ? 2.0f : 1.0f, &seed);
      tf_write(f, names[i], 0, 3, shape, *p[i]);
    }
    fclose(f);
  }
  int rc = torch_cases_run(&ref);
  static const char *outs[4] = {"out", "grad.q", "grad.k", "grad.v"};
  for (int c = 0; rc == 0 && c < CASES; c++) {
    long T = seqs[c], n = BH * T * D;
    int nref;
    const tf_tensor *t = torch_case_result(&ref, c, &nref);
    for (int flash = 1; flash >= 0; flash--) {
      float *res[4];
      run_kernel(ctx, &in[c], T, flash, res);
      for (int i = 0; i < 4; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s attention T=%ld: %s against PyTorch", flash ? "blocked" : "matrix", T,
                 outs[i]);
        const tf_tensor *w = tf_find(t, nref, outs[i]);
        expect_true(w && w->count == n, "%s: the reference has no %s of %ld values", what, outs[i], n);
        if (w && w->count == n) {
          expect_close_scaled(res[i], (const float *)w->data, n, TOL, what);
          fprintf(stderr, "%s: %.2e of the largest\n", what, scaled_error(res[i], (const float *)w->data, n));
        }
        free(res[i]);
      }
    }
  }
  for (int c = 0; c < CASES; c++) free(in[c].q), free(in[c].k), free(in[c].v), free(in[c].dout);
  torch_cases_free(&ref);
  if (rc == 77) {
    fprintf(stderr, "test_attention_torch: PyTorch (python3-torch) is missing: skipped\n");
    gaaw_finalize(&ctx);
    gaaw_config_destroy(&kt_cfg);
    MPI_Finalize();
    return 77;
  }
  expect_true(rc == 0, "the PyTorch reference failed (exit status %d)", rc);
  return kt_finish(&ctx, "test_attention_torch");
}
