/* AdamW on one shard, exactly the formula of include/gaaw/kernels.h, in a loop the
 * compiler vectorizes (16 lanes on AVX-512, host_math.h): no branch inside it, and
 * sqrtf without errno (configure's NO_ERRNO_CFLAGS: with errno GCC keeps a scalar
 * call for negative arguments). Vector sqrt and division round as the scalar ones
 * do: the results are the same bits. */
#include <math.h>

#include "backends/host/host.h"
#include "backends/host/host_math.h"
#include "backends/runtime/half.h"

/* The update's per-call constants. */
typedef struct {
  float b1, b2, lr, eps, wd, gs, bc1, bc2;
} adamw_consts;

/* Elements [lo, hi) of adamw_f32; copy[i] = w[i] too, stored by STORE into a copy_t
 * (copy may be w). One function per destination type, each built for the widest
 * vector unit (HOST_VECTOR_CLONES). */
#define ADAMW_BLOCK(name, copy_t, STORE)                                                                       \
  HOST_VECTOR_CLONES static void name(int64_t lo, int64_t hi, float *w, const float *grad, float *m, float *v,  \
                                      void *copy_v, const adamw_consts *c)                                     \
  {                                                                                                            \
    float b1 = c->b1, b2 = c->b2, lr = c->lr, eps = c->eps, wd = c->wd, gs = c->gs, bc1 = c->bc1, bc2 = c->bc2; \
    copy_t *copy = copy_v;                                                                                     \
    _Pragma("omp simd") for (int64_t i = lo; i < hi; i++)                                                      \
    {                                                                                                          \
      float p = host_adamw_element(w[i], grad[i] * gs, &m[i], &v[i], b1, b2, lr, eps, wd, bc1, bc2);           \
      w[i] = p;                                                                                                \
      copy[i] = STORE(p);                                                                                      \
    }                                                                                                          \
  }
#define STORE_F32(p) (p)
ADAMW_BLOCK(adamw_block, float, STORE_F32)
ADAMW_BLOCK(adamw_block_bf16, uint16_t, gaaw_f32_to_bf16)
ADAMW_BLOCK(adamw_block_f16, uint16_t, gaaw_f32_to_f16)

/* w: the weights updated (master, or params when there is none)
 * out: where the updated weights are also written (params beside a master), in
 * out_dtype (a 16-bit params directly, rounded to nearest even as a cast would), or
 * NULL */
static void adamw_f32(int64_t n, float *w, const float *grad, float *m, float *v, void *out, gaaw_dtype_t out_dtype,
                      const gaaw_adamw_args_t *a)
{
  /* Bias corrections once per call, in double: b^step underflows gracefully. */
  adamw_consts c = {a->beta1, a->beta2, a->lr, a->eps, a->weight_decay, a->grad_scale,
                    (float)(1.0 - pow((double)a->beta1, (double)a->step)),
                    (float)(1.0 - pow((double)a->beta2, (double)a->step))};
  void *copy = out ? out : w; /* without a second destination w is stored twice: no branch */
  void (*block)(int64_t, int64_t, float *, const float *, float *, float *, void *, const adamw_consts *) =
    !out || out_dtype == GAAW_F32 ? adamw_block : out_dtype == GAAW_BF16 ? adamw_block_bf16 : adamw_block_f16;
  int64_t blocks = (n + HOST_VECTOR_BLOCK - 1) / HOST_VECTOR_BLOCK;
#pragma omp parallel for if (n > HOST_PARALLEL_MIN) schedule(static)
  for (int64_t k = 0; k < blocks; k++)
    block(k * HOST_VECTOR_BLOCK, k + 1 < blocks ? (k + 1) * HOST_VECTOR_BLOCK : n, w, grad, m, v, copy, &c);
}

gaaw_status_t host_adamw_update(gaaw_context_t ctx, gaaw_ten params, gaaw_cten grads, gaaw_ten master, gaaw_ten m,
                                gaaw_ten v, const gaaw_adamw_args_t *args)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const float *pg = host_in(&s, grads);
  float *pm = host_inout(&s, m), *pv = host_inout(&s, v);
  /* With master weights, params only receive the cast of the update, written in the
   * same pass whatever their dtype; without, params are f32 and updated. */
  float *pw = master ? host_inout(&s, master) : host_inout(&s, params);
  void *pout = master ? host_raw(&s, params) : NULL;
  if (s.status == GAAW_SUCCESS)
    adamw_f32(gaaw_tensor_numel(params), pw, pg, pm, pv, pout, params->dtype, args);
  return host_stage_end(&s);
}
