/* The mixture-of-experts MLP on one rank (parallel/moe.h) against a reference in
 * double written here from doc/moe.md's rules: the output and both aux losses, and
 * every gradient (x, router, the experts' w13 and w2) against central differences
 * of L = sum(dy y) + aux_scale (aux + z), with softmax and sigmoid scores, with and
 * without renormalisation. The data's smallest margin between the k-th and the
 * (k+1)-th score is printed and must exceed the differences' step many times over,
 * so that no difference changes the routing. Repeats are bit-identical; bf16 and
 * top_k > experts are refused by name. */
#include <math.h>

#include "parallel/moe.h"
#include "tests/unit/test_kernel_util.h"

enum { T = 12, C = 8, E = 4, K = 2, F = 6 };
enum { NX = T * C, NR = E * C, N13 = E * 2 * F * C, N2 = E * C * F };

typedef struct {
  int sigmoid, renormalize;
  double aux_coef, z_coef, aux_scale;
  const double *dy;
  double margin; /* out: the smallest k-th to (k+1)-th score gap */
} ref_args;

/* out[0] = L = sum(dy y) + aux_scale (aux + z); out[1 ..] = y (T, C), aux, z, from
 * in = {x, router, w13, w2}. */
static void moe_ref(const void *data, double *const *in, double *out)
{
  ref_args *a = (ref_args *)data;
  const double *x = in[0], *router = in[1], *w13 = in[2], *w2 = in[3];
  double colsum[E] = {0}, counts[E] = {0}, zsum = 0, L = 0;
  a->margin = INFINITY;
  for (int t = 0; t < T; t++) {
    double l[E], s[E], m = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) {
      l[e] = 0;
      for (int c = 0; c < C; c++) l[e] += x[t * C + c] * router[e * C + c];
      m = fmax(m, l[e]);
    }
    for (int e = 0; e < E; e++) sum += exp(l[e] - m);
    double lse = m + log(sum);
    zsum += lse * lse;
    for (int e = 0; e < E; e++) s[e] = a->sigmoid ? 1 / (1 + exp(-l[e])) : exp(l[e] - m) / sum, colsum[e] += s[e];
    int chosen[K], used[E] = {0};
    for (int j = 0; j <= K && j < E; j++) { /* the K largest, ties to the lower index; then the next for the margin */
      int best = -1;
      for (int e = 0; e < E; e++)
        if (!used[e] && (best < 0 || s[e] > s[best])) best = e;
      if (j == K) {
        a->margin = fmin(a->margin, s[chosen[K - 1]] - s[best]);
        break;
      }
      used[best] = 1, chosen[j] = best;
    }
    double w[K], wsum = 0;
    for (int j = 0; j < K; j++) wsum += w[j] = s[chosen[j]];
    for (int j = 0; j < K && a->renormalize; j++) w[j] /= wsum;
    for (int c = 0; c < C; c++) out[1 + t * C + c] = 0;
    for (int j = 0; j < K; j++) {
      int e = chosen[j];
      counts[e]++;
      double act[F];
      for (int f = 0; f < F; f++) {
        double g = 0, u = 0;
        for (int c = 0; c < C; c++) {
          g += x[t * C + c] * w13[(e * 2 * F + f) * C + c];
          u += x[t * C + c] * w13[(e * 2 * F + F + f) * C + c];
        }
        act[f] = g / (1 + exp(-g)) * u;
      }
      for (int c = 0; c < C; c++) {
        double yv = 0;
        for (int f = 0; f < F; f++) yv += act[f] * w2[(e * C + c) * F + f];
        out[1 + t * C + c] += w[j] * yv;
      }
    }
  }
  double aux = 0;
  for (int e = 0; e < E; e++) aux += counts[e] / (T * K) * colsum[e] / T;
  aux *= a->aux_coef * E;
  double z = a->z_coef * zsum / T;
  for (int i = 0; i < T * C; i++) L += a->dy[i] * out[1 + i];
  out[0] = L + a->aux_scale * (aux + z);
  out[1 + T * C] = aux, out[2 + T * C] = z;
}

static void check_layer(gaaw_context_t ctx, int sigmoid, int renormalize)
{
  float xv[NX], rv[NR], w13v[N13], w2v[N2], dyv[NX];
  uint64_t seed = 41 + (uint64_t)(2 * sigmoid + renormalize);
  gaaw_tensor_t x = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){T, C}, -1, 1, &seed, xv);
  gaaw_tensor_t router = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){E, C}, -1.5f, 1.5f, &seed, rv);
  gaaw_tensor_t w13 = kt_random_tensor(ctx, GAAW_F32, 3, (int64_t[]){E, 2 * F, C}, -0.5f, 0.5f, &seed, w13v);
  gaaw_tensor_t w2 = kt_random_tensor(ctx, GAAW_F32, 3, (int64_t[]){E, C, F}, -0.5f, 0.5f, &seed, w2v);
  gaaw_tensor_t dy = kt_random_tensor(ctx, GAAW_F32, 2, (int64_t[]){T, C}, -1, 1, &seed, dyv);
  gaaw_tensor_t y = KT_NEW(ctx, GAAW_F32, T, C), dx = KT_NEW(ctx, GAAW_F32, T, C);
  gaaw_tensor_t dr = KT_NEW(ctx, GAAW_F32, E, C), d13 = KT_NEW(ctx, GAAW_F32, E, 2 * F, C);
  gaaw_tensor_t d2 = KT_NEW(ctx, GAAW_F32, E, C, F);
  gaaw_tensor_t *grads[] = {&dr, &d13, &d2};
  for (int i = 0; i < 3; i++) require_ok(ctx, gaaw_fill(ctx, grads[i], 0.0f));
  gaaw_moe_spec spec = {E, K, sigmoid, renormalize, 0.01f, 0.001f};
  gaaw_moe_weights w = {&router, &w13, &w2, &dr, &d13, &d2};
  gaaw_moe_saved saved = {0};
  gaaw_moe_losses losses = {0};
  expect_status_ctx(ctx, gaaw_moe_forward(ctx, &spec, &w, &x, &y, &saved, &losses), GAAW_SUCCESS);
  double *in[4] = {kt_dup(xv, NX), kt_dup(rv, NR), kt_dup(w13v, N13), kt_dup(w2v, N2)};
  double *dyd = kt_dup(dyv, NX), out[1 + NX + 2];
  ref_args a = {sigmoid, renormalize, 0.01, 0.001, 0.5, dyd, 0};
  moe_ref(&a, in, out);
  printf("test_moe_layer: sigmoid %d, renormalize %d: smallest top-%d margin %.3g, aux %.6g, z %.6g\n", sigmoid,
         renormalize, K, a.margin, out[1 + NX], out[2 + NX]);
  expect_true(a.margin > 1e-3, "a near-tie in the routing (margin %g): the differences below could flip it", a.margin);
  kt_expect(ctx, &y, out + 1, 2e-5, "moe y, sigmoid %d, renormalize %d", sigmoid, renormalize);
  expect_true(fabs(losses.aux - out[1 + NX]) <= 1e-6 * fabs(out[1 + NX]) &&
                fabs(losses.z - out[2 + NX]) <= 1e-6 * fabs(out[2 + NX]),
              "aux losses %.9g and %.9g, the reference's %.9g and %.9g", losses.aux, losses.z, out[1 + NX],
              out[2 + NX]);
  expect_status_ctx(ctx, gaaw_moe_backward(ctx, &spec, &w, &saved, &x, &dy, 0.5f, &dx), GAAW_SUCCESS);
  const long n[4] = {NX, NR, N13, N2};
  const gaaw_tensor_t *got[4] = {&dx, &dr, &d13, &d2};
  const char *name[4] = {"dx", "drouter", "dw13", "dw2"};
  double pick[1 + NX + 2] = {1}; /* d/d in of out[0] = L alone */
  for (int i = 0; i < 4; i++) {
    double *fd = malloc(sizeof(double) * (size_t)n[i]);
    kt_fd(moe_ref, &a, in, i, n[i], pick, 1 + NX + 2, fd);
    kt_expect(ctx, got[i], fd, 2e-4, "moe %s against central differences (sigmoid %d, renormalize %d)", name[i],
              sigmoid, renormalize);
    free(fd);
  }
  /* a second forward from the same inputs is bit-identical */
  gaaw_tensor_t y2 = KT_NEW(ctx, GAAW_F32, T, C);
  gaaw_moe_saved again = {0};
  expect_status_ctx(ctx, gaaw_moe_forward(ctx, &spec, &w, &x, &y2, &again, &losses), GAAW_SUCCESS);
  void *b1 = kt_bytes(ctx, &y), *b2 = kt_bytes(ctx, &y2);
  expect_true(memcmp(b1, b2, sizeof(float) * NX) == 0, "two forwards differ");
  free(b1), free(b2);
  gaaw_moe_release(ctx, &again);
  gaaw_moe_release(ctx, &saved);
  for (int i = 0; i < 4; i++) free(in[i]);
  free(dyd);
  gaaw_tensor_t *all[] = {&x, &router, &w13, &w2, &dy, &y, &dx, &dr, &d13, &d2, &y2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kt_free(ctx, all[i]);
}

static void check_refusals(gaaw_context_t ctx)
{
  gaaw_tensor_t x = KT_NEW(ctx, GAAW_BF16, T, C), y = KT_NEW(ctx, GAAW_BF16, T, C);
  gaaw_tensor_t router = KT_NEW(ctx, GAAW_F32, E, C), w13 = KT_NEW(ctx, GAAW_F32, E, 2 * F, C);
  gaaw_tensor_t w2 = KT_NEW(ctx, GAAW_F32, E, C, F);
  gaaw_moe_weights w = {&router, &w13, &w2, NULL, NULL, NULL};
  gaaw_moe_spec spec = {E, K, 0, 1, 0, 0};
  gaaw_moe_saved s = {0};
  gaaw_moe_losses l = {0};
  expect_status_ctx(ctx, gaaw_moe_forward(ctx, &spec, &w, &x, &y, &s, &l), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "f32 only") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_clear_error(ctx);
  gaaw_tensor_t xf = KT_NEW(ctx, GAAW_F32, T, C), yf = KT_NEW(ctx, GAAW_F32, T, C);
  spec.top_k = E + 1;
  expect_status_ctx(ctx, gaaw_moe_forward(ctx, &spec, &w, &xf, &yf, &s, &l), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "top_k 5 must be in 1..experts (4)") != NULL, "%s", gaaw_last_error(ctx));
  gaaw_clear_error(ctx);
  gaaw_tensor_t *all[] = {&x, &y, &router, &w13, &w2, &xf, &yf};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kt_free(ctx, all[i]);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  for (int sigmoid = 0; sigmoid <= 1; sigmoid++)
    for (int renormalize = 0; renormalize <= 1; renormalize++) check_layer(ctx, sigmoid, renormalize);
  check_refusals(ctx);
  return kt_finish(&ctx, "test_moe_layer");
}
