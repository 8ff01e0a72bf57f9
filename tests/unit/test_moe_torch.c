/* The mixture-of-experts MLP on one rank (parallel/moe.h) against PyTorch 1.13
 * (tests/reference/moe_reference.py, written from doc/moe.md's rules) from the same
 * weights: the output, both aux losses and every gradient (x, the router, w13,
 * w2), with softmax and sigmoid scores, with and without renormalisation, top-2 of
 * 8 experts over 32 tokens (every expert used), dropless and at capacity factor
 * 1.0 under each drop policy (probs, position: the same assignments dropped, some
 * dropped), and with a shared expert, gated (Qwen2-MoE) and not (DeepSeek-V3). Tolerance per tensor of its largest
 * |value|: both sides are f32 and differ in summation order only, 2e-5 (as the GPT
 * tests). Skips (77) when PyTorch is missing. */
#include <math.h>
#include <mpi.h>

#include "parallel/moe.h"
#include "tests/harness/torch_cases.h"

enum { T = 32, C = 16, E = 8, K = 2, F = 12, S = 10, CASES = 8 };
#define TOL 2e-5

typedef struct {
  float y[T * C], dx[T * C], dr[E * C], d13[E * 2 * F * C], d2[E * C * F];
  float ds13[2 * S * C], ds2[C * S], dsg[C];
  int32_t pos[T * K]; /* -1: dropped */
  gaaw_moe_losses losses;
} moe_run;

static gaaw_tensor_t upload(gaaw_context_t ctx, int ndim, const int64_t *shape, const float *v)
{
  gaaw_tensor_t t;
  require_ok(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, ndim, shape, GAAW_MEM_ACTIVATIONS, &t));
  require_ok(ctx, gaaw_buffer_write(ctx, t.buf, t.offset, v, sizeof(float) * (size_t)gaaw_tensor_numel(&t)));
  return t;
}

static void download(gaaw_context_t ctx, const gaaw_tensor_t *t, float *v)
{
  require_ok(ctx, gaaw_buffer_read(ctx, t->buf, t->offset, v, sizeof(float) * (size_t)gaaw_tensor_numel(t)));
}

/* got against the reference's record name: max |got - ref| <= TOL max |ref| */
static void expect_record(const tf_tensor *ref, int nref, const char *name, const float *got, long n,
                          const char *what)
{
  const tf_tensor *t = tf_find(ref, nref, name);
  expect_true(t && t->count == n, "%s: the reference has no %s of %ld values", what, name, n);
  if (!t || t->count != n) return;
  const float *r = t->data;
  double big = 0, worst = 0;
  for (long i = 0; i < n; i++) big = fmax(big, fabs(r[i]));
  for (long i = 0; i < n; i++) worst = fmax(worst, fabs(got[i] - r[i]));
  expect_true(worst <= TOL * big, "%s %s: largest difference %.3g, %.3g of the largest |value| %.3g", what, name,
              worst, big > 0 ? worst / big : 0, big);
}

static void run_case(gaaw_context_t ctx, int k, torch_cases *ref, moe_run *out)
{
  /* cases 0-3: softmax or sigmoid, renormalised or not; 4, 5: softmax, renormalised,
   * capacity 1.0, dropping by weight, then by position */
  /* 6, 7: softmax, renormalised, dropless, a shared expert gated, then not */
  int sigmoid = k < 4 && k / 2, renormalize = k >= 4 || k % 2, capacity = k == 4 || k == 5, position = k == 5;
  int shared = k >= 6, gated = k == 6;
  uint64_t state = 900 + (uint64_t)k;
  static float x[T * C], r[E * C], w13[E * 2 * F * C], w2[E * C * F], dy[T * C];
  for (int i = 0; i < T * C; i++) x[i] = (float)model_normal(&state), dy[i] = (float)model_normal(&state);
  for (int i = 0; i < E * C; i++) r[i] = (float)(0.5 * model_normal(&state));
  for (int i = 0; i < E * 2 * F * C; i++) w13[i] = (float)(0.3 * model_normal(&state));
  for (int i = 0; i < E * C * F; i++) w2[i] = (float)(0.3 * model_normal(&state));
  static float s13[2 * S * C], s2[C * S], sg[C];
  for (int i = 0; i < 2 * S * C; i++) s13[i] = (float)(0.3 * model_normal(&state));
  for (int i = 0; i < C * S; i++) s2[i] = (float)(0.3 * model_normal(&state));
  for (int i = 0; i < C; i++) sg[i] = (float)(0.3 * model_normal(&state));
  gaaw_tensor_t tx = upload(ctx, 2, (int64_t[]){T, C}, x), tr = upload(ctx, 2, (int64_t[]){E, C}, r);
  gaaw_tensor_t t13 = upload(ctx, 3, (int64_t[]){E, 2 * F, C}, w13), t2 = upload(ctx, 3, (int64_t[]){E, C, F}, w2);
  gaaw_tensor_t tdy = upload(ctx, 2, (int64_t[]){T, C}, dy), ty = upload(ctx, 2, (int64_t[]){T, C}, dy);
  gaaw_tensor_t tdx = upload(ctx, 2, (int64_t[]){T, C}, dy);
  gaaw_tensor_t dr = upload(ctx, 2, (int64_t[]){E, C}, r), d13 = upload(ctx, 3, (int64_t[]){E, 2 * F, C}, w13);
  gaaw_tensor_t d2 = upload(ctx, 3, (int64_t[]){E, C, F}, w2);
  gaaw_tensor_t t13s = upload(ctx, 2, (int64_t[]){2 * S, C}, s13), t2s = upload(ctx, 2, (int64_t[]){C, S}, s2);
  gaaw_tensor_t tsg = upload(ctx, 2, (int64_t[]){1, C}, sg), d13s = upload(ctx, 2, (int64_t[]){2 * S, C}, s13);
  gaaw_tensor_t d2s = upload(ctx, 2, (int64_t[]){C, S}, s2), dsg = upload(ctx, 2, (int64_t[]){1, C}, sg);
  gaaw_tensor_t *grads[] = {&dr, &d13, &d2, &d13s, &d2s, &dsg};
  for (int i = 0; i < 6; i++) require_ok(ctx, gaaw_fill(ctx, grads[i], 0.0f));
  gaaw_moe_spec spec = {E, K, sigmoid, renormalize, 0.01f, 0.001f, capacity ? 1.0f : 0.0f, position};
  gaaw_moe_weights w = {&tr, &t13, &t2, &dr, &d13, &d2};
  if (shared) {
    w.s13 = &t13s, w.s2 = &t2s, w.d_s13 = &d13s, w.d_s2 = &d2s;
    if (gated) w.sgate = &tsg, w.d_sgate = &dsg;
  }
  gaaw_moe_saved saved = {0};
  const float aux_scale = 0.5f;
  require_ok(ctx, gaaw_moe_forward(ctx, &spec, &w, &tx, &ty, &saved, &out->losses));
  require_ok(ctx, gaaw_moe_backward(ctx, &spec, &w, &saved, &tx, &tdy, aux_scale, &tdx));
  for (int e = 0; e < E; e++) expect_true(saved.counts[e] > 0, "case %d: expert %d got no token", k, e);
  expect_true((out->losses.dropped > 0) == capacity, "case %d: %lld assignments dropped", k,
              (long long)out->losses.dropped);
  require_ok(ctx, gaaw_buffer_read(ctx, saved.own[GAAW_MOE_POS].buf, 0, out->pos, sizeof out->pos));
  download(ctx, &ty, out->y), download(ctx, &tdx, out->dx), download(ctx, &dr, out->dr);
  download(ctx, &d13, out->d13), download(ctx, &d2, out->d2);
  download(ctx, &d13s, out->ds13), download(ctx, &d2s, out->ds2), download(ctx, &dsg, out->dsg);
  gaaw_moe_release(ctx, &saved);
  FILE *f = torch_case_begin(ref);
  int32_t cfg[6] = {sigmoid, renormalize, K, position, shared, gated};
  float coefs[4] = {spec.aux_coef, spec.z_coef, aux_scale, spec.capacity_factor};
  tf_write(f, "config", 1, 1, (int64_t[]){6}, cfg);
  tf_write(f, "coefs", 0, 1, (int64_t[]){4}, coefs);
  tf_write(f, "x", 0, 2, (int64_t[]){T, C}, x);
  tf_write(f, "router", 0, 2, (int64_t[]){E, C}, r);
  tf_write(f, "w13", 0, 3, (int64_t[]){E, 2 * F, C}, w13);
  tf_write(f, "w2", 0, 3, (int64_t[]){E, C, F}, w2);
  tf_write(f, "dy", 0, 2, (int64_t[]){T, C}, dy);
  tf_write(f, "s13", 0, 2, (int64_t[]){2 * S, C}, s13);
  tf_write(f, "s2", 0, 2, (int64_t[]){C, S}, s2);
  tf_write(f, "sgate", 0, 2, (int64_t[]){1, C}, sg);
  fclose(f);
  gaaw_tensor_t *all[] = {&tx, &tr, &t13, &t2, &tdy, &ty, &tdx, &dr, &d13, &d2, &t13s, &t2s, &tsg, &d13s, &d2s, &dsg};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gaaw_buffer_free(ctx, &all[i]->buf);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  static moe_run runs[CASES];
  torch_cases ref;
  torch_cases_init_script(&ref, "moe", "moe_reference.py");
  for (int k = 0; k < CASES; k++) run_case(ctx, k, &ref, &runs[k]);
  int rc = torch_cases_run(&ref);
  expect_true(rc != 1, "the PyTorch reference failed");
  for (int k = 0; rc == 0 && k < CASES; k++) {
    char what[64];
    if (k < 4)
      snprintf(what, sizeof what, "%s scores%s", k / 2 ? "sigmoid" : "softmax", k % 2 ? ", renormalised" : "");
    else if (k < 6)
      snprintf(what, sizeof what, "capacity 1.0, dropping by %s", k == 5 ? "position" : "weight");
    else
      snprintf(what, sizeof what, "a shared expert, %s", k == 6 ? "gated" : "not gated");
    int n;
    const tf_tensor *t = torch_case_result(&ref, k, &n);
    float aux = (float)runs[k].losses.aux, z = (float)runs[k].losses.z;
    const tf_tensor *kept = tf_find(t, n, "kept");
    int same = kept && kept->count == T * K;
    for (int i = 0; same && i < T * K; i++) same = ((const float *)kept->data)[i] == (runs[k].pos[i] >= 0);
    expect_true(same, "%s: the assignments kept differ from PyTorch's", what);
    expect_record(t, n, "y", runs[k].y, T * C, what);
    expect_record(t, n, "aux", &aux, 1, what);
    expect_record(t, n, "z", &z, 1, what);
    expect_record(t, n, "grad.x", runs[k].dx, T * C, what);
    expect_record(t, n, "grad.router", runs[k].dr, E * C, what);
    expect_record(t, n, "grad.w13", runs[k].d13, E * 2 * F * C, what);
    expect_record(t, n, "grad.w2", runs[k].d2, E * C * F, what);
    if (k >= 6) {
      expect_record(t, n, "grad.s13", runs[k].ds13, 2 * S * C, what);
      expect_record(t, n, "grad.s2", runs[k].ds2, C * S, what);
    }
    if (k == 6) expect_record(t, n, "grad.sgate", runs[k].dsg, C, what);
    const tf_tensor *ta = tf_find(t, n, "aux");
    if (ta) fprintf(stderr, "%s: aux gaaw %.8f torch %.8f\n", what, aux, ((const float *)ta->data)[0]);
  }
  torch_cases_free(&ref);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  if (rc == 77) {
    fprintf(stderr, "test_moe_torch: PyTorch (python3-torch) is missing: skipped\n");
    return 77;
  }
  return test_finish("test_moe_torch");
}
