/* AdamW, several steps == a naive loop in double: on f32 params directly, and on f32
 * master weights with bf16/f16 params that must equal the rounded master exactly. */
#include "tests/unit/test_kernel_util.h"

enum { NP = 37, STEPS = 5 };

static void check_adamw(gaaw_context_t ctx, gaaw_dtype_t pdt, int with_master, uint64_t *seed)
{
  const char *dn = gaaw_dtype_name(pdt);
  gaaw_adamw_args_t args = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                            .grad_scale = 0.5f, .step = 0};
  float p0[NP], g[NP], m0[NP], v0[NP];
  double p[NP], m[NP], v[NP];
  gaaw_tensor_t tp = KT_NEW(ctx, pdt, NP), tg = KT_NEW(ctx, pdt, NP), tmaster = KT_NEW(ctx, GAAW_F32, NP);
  gaaw_tensor_t tm = KT_NEW(ctx, GAAW_F32, NP), tv = KT_NEW(ctx, GAAW_F32, NP);
  kt_random(p0, NP, -1, 1, seed);
  kt_upload(ctx, with_master ? &tmaster : &tp, p0);
  if (with_master) require_ok(ctx, gaaw_cast(ctx, &tmaster, &tp));
  /* start from non-zero moments, as after earlier steps */
  kt_random(m0, NP, -0.1f, 0.1f, seed);
  kt_random(v0, NP, 0, 0.01f, seed);
  kt_upload(ctx, &tm, m0);
  kt_upload(ctx, &tv, v0);
  for (int i = 0; i < NP; i++) p[i] = p0[i], m[i] = m0[i], v[i] = v0[i];
  for (int step = 1; step <= STEPS; step++) {
    kt_random(g, NP, -2, 2, seed);
    kt_upload(ctx, &tg, g); /* g now holds the stored (maybe rounded) gradients */
    args.step = step;
    expect_status_ctx(ctx, gaaw_adamw_update(ctx, &tp, &tg, with_master ? &tmaster : NULL, &tm, &tv, &args),
                      GAAW_SUCCESS);
    double b1 = args.beta1, b2 = args.beta2, bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    for (int i = 0; i < NP; i++) {
      double gi = (double)g[i] * args.grad_scale;
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      p[i] -= args.lr * (m[i] / bc1 / (sqrt(v[i] / bc2) + args.eps) + args.weight_decay * p[i]);
    }
  }
  kt_expect(ctx, with_master ? &tmaster : &tp, p, 1e-5, "adamw %s%s weights after %d steps", dn,
            with_master ? " with master" : "", STEPS);
  kt_expect(ctx, &tm, m, 1e-5, "adamw %s m after %d steps", dn, STEPS);
  kt_expect(ctx, &tv, v, 1e-5, "adamw %s v after %d steps", dn, STEPS);
  if (with_master) { /* params = cast(master), exactly */
    float master[NP], params[NP];
    kt_download(ctx, &tmaster, master);
    kt_download(ctx, &tp, params);
    for (int i = 0; i < NP; i++)
      expect_true(params[i] == kt_round(pdt, master[i]), "adamw %s params[%d] = %.9g is not the cast of master %.9g",
                  dn, i, params[i], master[i]);
  }
  kt_free(ctx, &tp), kt_free(ctx, &tg), kt_free(ctx, &tmaster), kt_free(ctx, &tm), kt_free(ctx, &tv);
}

int main(int argc, char **argv)
{
  gaaw_context_t ctx = kt_init(&argc, &argv);
  uint64_t seed = 13;
  check_adamw(ctx, GAAW_F32, 0, &seed);
  for (int d = 0; d < 3; d++) check_adamw(ctx, kt_float_dtypes[d], 1, &seed);
  return kt_finish(&ctx, "test_kernel_optim");
}
