/* Mixture of experts: the public kernel functions of include/gaaw/kernels.h's MoE
 * section (arguments checked, then the device table's moe_ entries). */
#include "backends/kernel_check.h"
#include "backends/kernel_trace.h"

/* a, b: (T, E) f32 each (b may be NULL); lse: (T) f32 */
static gaaw_status_t check_router(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *other,
                                  const char *other_name, const gaaw_tensor_t *lse)
{
  CHECK_F32(NT(logits), NT(lse));
  GAAW_ARG_CHECK(ctx, logits->ndim == 2 && logits->shape[1] >= 1, "moe router: logits has shape %s; expected (T, E)",
                 shape_of(logits).s);
  int64_t T = logits->shape[0], E = logits->shape[1];
  if (other) {
    GAAW_CHECK(check_tensor(ctx, other, other_name, MASK_F32));
    GAAW_CHECK(check_mat(ctx, other, other_name, T, E, "(T, E)"));
  }
  return check_numel(ctx, lse, "lse", T, "(T)");
}

gaaw_status_t gaaw_moe_router_forward(gaaw_context_t ctx, const gaaw_tensor_t *logits, int sigmoid,
                                      gaaw_tensor_t *scores, gaaw_tensor_t *lse)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_router(ctx, logits, scores, "scores", lse));
  RUN(moe_router, logits, logits, sigmoid != 0, scores, lse);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_router_backward(gaaw_context_t ctx, const gaaw_tensor_t *logits, const gaaw_tensor_t *scores,
                                       const gaaw_tensor_t *lse, const gaaw_tensor_t *dscores, int sigmoid,
                                       float zscale, gaaw_tensor_t *dlogits)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_router(ctx, logits, scores, "scores", lse));
  GAAW_CHECK(check_router(ctx, logits, dscores, "dscores", lse));
  GAAW_CHECK(check_router(ctx, logits, dlogits, "dlogits", lse));
  GAAW_CHECK(check_finite_arg(ctx, zscale, "zscale"));
  RUN(moe_router_backward, logits, logits, scores, lse, dscores, sigmoid != 0, zscale, dlogits);
  return GAAW_SUCCESS;
}

/* scores (T, E) f32; idx (T, k) i32 with 1 <= k <= E; the (T, k) f32 tensors of rest */
static gaaw_status_t check_topk(gaaw_context_t ctx, const gaaw_tensor_t *scores, const gaaw_tensor_t *idx, int n,
                                const named_tensor *rest)
{
  GAAW_CHECK(check_tensor(ctx, scores, "scores", MASK_F32));
  GAAW_CHECK(check_tensor(ctx, idx, "idx", MASK_I32));
  GAAW_ARG_CHECK(ctx, scores->ndim == 2 && scores->shape[1] >= 1, "moe topk: scores has shape %s; expected (T, E)",
                 shape_of(scores).s);
  int64_t T = scores->shape[0], E = scores->shape[1];
  GAAW_ARG_CHECK(ctx, idx->ndim == 2 && idx->shape[0] == T && idx->shape[1] >= 1 && idx->shape[1] <= E,
                 "moe topk: idx has shape %s; expected (T, k) = (%lld, 1..%lld) for scores %s", shape_of(idx).s,
                 (long long)T, (long long)E, shape_of(scores).s);
  for (int i = 0; i < n; i++) {
    GAAW_CHECK(check_tensor(ctx, rest[i].t, rest[i].name, MASK_F32));
    GAAW_ARG_CHECK(ctx, rest[i].t->ndim == 2 && rest[i].t->shape[0] == T && rest[i].t->shape[1] == idx->shape[1],
                   "moe topk: %s has shape %s; expected idx's %s", rest[i].name, shape_of(rest[i].t).s,
                   shape_of(idx).s);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_topk_forward(gaaw_context_t ctx, const gaaw_tensor_t *scores, const gaaw_tensor_t *bias,
                                    int renormalize, gaaw_tensor_t *idx, gaaw_tensor_t *weights)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_topk(ctx, scores, idx, 1, (named_tensor[]){NT(weights)}));
  if (bias) {
    GAAW_CHECK(check_tensor(ctx, bias, "bias", MASK_F32));
    GAAW_CHECK(check_numel(ctx, bias, "bias", scores->shape[1], "(E)"));
  }
  RUN(moe_topk, scores, scores, bias, renormalize != 0, idx, weights);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_topk_backward(gaaw_context_t ctx, const gaaw_tensor_t *scores, const gaaw_tensor_t *idx,
                                     const gaaw_tensor_t *weights, const gaaw_tensor_t *dweights, int renormalize,
                                     gaaw_tensor_t *dscores)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_topk(ctx, scores, idx, 2, (named_tensor[]){NT(weights), NT(dweights)}));
  GAAW_CHECK(check_tensor(ctx, dscores, "dscores", MASK_F32));
  GAAW_CHECK(check_mat(ctx, dscores, "dscores", scores->shape[0], scores->shape[1], "scores' (T, E)"));
  RUN(moe_topk_backward, scores, scores, idx, weights, dweights, renormalize != 0, dscores);
  return GAAW_SUCCESS;
}

/* tokens (T, C) and rows (P, C) of one float dtype; map: i32 of n elements */
static gaaw_status_t check_rows(gaaw_context_t ctx, const gaaw_tensor_t *tokens, const char *tname,
                                const gaaw_tensor_t *rows, const char *rname, const gaaw_tensor_t *map,
                                const char *mname, int64_t n, const char *expect)
{
  GAAW_CHECK(GROUP(MASK_FLOAT, 1, {tokens, tname}, {rows, rname}));
  GAAW_CHECK(check_tensor(ctx, map, mname, MASK_I32));
  GAAW_ARG_CHECK(ctx, tokens->ndim == 2 && rows->ndim == 2 && tokens->shape[1] == rows->shape[1],
                 "moe permute: %s %s and %s %s must be (T, C) and (P, C)", tname, shape_of(tokens).s, rname,
                 shape_of(rows).s);
  return check_numel(ctx, map, mname, n, expect);
}

/* pos: (T, k) i32 for the T rows of tokens */
static gaaw_status_t check_pos(gaaw_context_t ctx, const gaaw_tensor_t *pos, const gaaw_tensor_t *tokens)
{
  GAAW_ARG_CHECK(ctx, pos->ndim == 2 && pos->shape[0] == tokens->shape[0] && pos->shape[1] >= 1,
                 "moe permute: pos has shape %s; expected (T, k) with T = %lld", shape_of(pos).s,
                 (long long)tokens->shape[0]);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_permute(gaaw_context_t ctx, const gaaw_tensor_t *x, const gaaw_tensor_t *src,
                               gaaw_tensor_t *out)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_tensor(ctx, out, "out", MASK_FLOAT));
  GAAW_CHECK(check_rows(ctx, x, "x", out, "out", src, "src", lead(out), "out's P"));
  RUN(moe_permute, out, x, src, out);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_permute_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *pos,
                                        gaaw_tensor_t *dx)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_rows(ctx, dx, "dx", dout, "dout", pos, "pos", gaaw_tensor_numel(pos), "(T, k)"));
  GAAW_CHECK(check_pos(ctx, pos, dx));
  RUN(moe_permute_backward, dout, dout, pos, dx);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_unpermute(gaaw_context_t ctx, const gaaw_tensor_t *y, const gaaw_tensor_t *pos,
                                 const gaaw_tensor_t *weights, gaaw_tensor_t *out)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_rows(ctx, out, "out", y, "y", pos, "pos", gaaw_tensor_numel(pos), "(T, k)"));
  GAAW_CHECK(check_pos(ctx, pos, out));
  GAAW_CHECK(check_tensor(ctx, weights, "weights", MASK_F32));
  GAAW_CHECK(check_mat(ctx, weights, "weights", pos->shape[0], pos->shape[1], "pos' (T, k)"));
  RUN(moe_unpermute, out, y, pos, weights, out);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_unpermute_backward(gaaw_context_t ctx, const gaaw_tensor_t *dout, const gaaw_tensor_t *y,
                                          const gaaw_tensor_t *pos, const gaaw_tensor_t *weights, gaaw_tensor_t *dy,
                                          gaaw_tensor_t *dweights)
{
  GAAW_CHECK(check_ctx(ctx));
  GAAW_CHECK(check_rows(ctx, dout, "dout", y, "y", pos, "pos", gaaw_tensor_numel(pos), "(T, k)"));
  GAAW_CHECK(check_pos(ctx, pos, dout));
  GAAW_CHECK(check_rows(ctx, dout, "dout", dy, "dy", pos, "pos", gaaw_tensor_numel(pos), "(T, k)"));
  GAAW_ARG_CHECK(ctx, dy->shape[0] == y->shape[0], "moe unpermute: dy has shape %s; expected y's %s",
                 shape_of(dy).s, shape_of(y).s);
  GAAW_CHECK(check_tensor(ctx, weights, "weights", MASK_F32));
  GAAW_CHECK(check_mat(ctx, weights, "weights", pos->shape[0], pos->shape[1], "pos' (T, k)"));
  GAAW_CHECK(check_tensor(ctx, dweights, "dweights", MASK_F32));
  GAAW_CHECK(check_mat(ctx, dweights, "dweights", pos->shape[0], pos->shape[1], "pos' (T, k)"));
  RUN(moe_unpermute_backward, dout, dout, y, pos, weights, dy, dweights);
  return GAAW_SUCCESS;
}
