/* Grouped-query attention's heads: the QKV projection's output cut into the
 * attention core's q, k and v, key and value heads repeated over their query
 * heads, and back (include/gaaw/kernels.h; arguments checked, then the device
 * table's qkv_heads entry). */
#include <string.h>

#include "backends/kernel_check.h"
#include "backends/kernel_trace.h"

/* qkv: (B, T, Hq + 2 Hkv, D); q, k, v: (B, Hq, T, D), one dtype; Hkv divides Hq. */
static gaaw_status_t check_heads(gaaw_context_t ctx, const gaaw_tensor_t *qkv, const char *qkv_name, int64_t kv_heads,
                                 const gaaw_tensor_t *q, const gaaw_tensor_t *k, const gaaw_tensor_t *v)
{
  GAAW_ARG_CHECK(ctx, q->ndim == 4, "qkv_heads: q has shape %s; expected (B, Hq, T, D)", shape_of(q).s);
  GAAW_ARG_CHECK(ctx, k->ndim == 4 && !memcmp(k->shape, q->shape, sizeof q->shape),
                 "qkv_heads: k has shape %s; expected q's %s", shape_of(k).s, shape_of(q).s);
  GAAW_ARG_CHECK(ctx, v->ndim == 4 && !memcmp(v->shape, q->shape, sizeof q->shape),
                 "qkv_heads: v has shape %s; expected q's %s", shape_of(v).s, shape_of(q).s);
  int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], D = q->shape[3];
  GAAW_ARG_CHECK(ctx, kv_heads >= 1 && H % kv_heads == 0,
                 "qkv_heads: kv_heads (%lld) must be >= 1 and divide the %lld query heads", (long long)kv_heads,
                 (long long)H);
  GAAW_ARG_CHECK(ctx,
                 qkv->ndim == 4 && qkv->shape[0] == B && qkv->shape[1] == T && qkv->shape[2] == H + 2 * kv_heads &&
                   qkv->shape[3] == D,
                 "qkv_heads: %s has shape %s; expected (B, T, Hq + 2 Hkv, D) = (%lld, %lld, %lld, %lld)", qkv_name,
                 shape_of(qkv).s, (long long)B, (long long)T, (long long)(H + 2 * kv_heads), (long long)D);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_qkv_heads_forward(gaaw_context_t ctx, const gaaw_tensor_t *qkv, int64_t kv_heads, gaaw_tensor_t *q,
                                     gaaw_tensor_t *k, gaaw_tensor_t *v)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(qkv), NT(q), NT(k), NT(v));
  GAAW_CHECK(check_heads(ctx, qkv, "qkv", kv_heads, q, k, v));
  RUN(qkv_heads, qkv, (gaaw_tensor_t *)qkv, kv_heads, 0, q, k, v);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_qkv_heads_backward(gaaw_context_t ctx, const gaaw_tensor_t *dq, const gaaw_tensor_t *dk,
                                      const gaaw_tensor_t *dv, int64_t kv_heads, gaaw_tensor_t *dqkv)
{
  GAAW_CHECK(check_ctx(ctx));
  CHECK_FLOATS(NT(dq), NT(dk), NT(dv), NT(dqkv));
  GAAW_CHECK(check_heads(ctx, dqkv, "dqkv", kv_heads, dq, dk, dv));
  /* the device op writes the side its direction names; the others are only read */
  RUN(qkv_heads, dq, dqkv, kv_heads, 1, (gaaw_tensor_t *)dq, (gaaw_tensor_t *)dk, (gaaw_tensor_t *)dv);
  return GAAW_SUCCESS;
}
