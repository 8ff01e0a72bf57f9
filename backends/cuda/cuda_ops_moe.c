/* The CUDA backend's mixture-of-experts entries: tensors (checked by
 * backends/kernels_moe.c) to device addresses, then cuda_moe.cu's launchers on the
 * compute stream. */
#include "backends/cuda/cuda_ops.h"

#define F(t) ((float *)gaaw_cuda_ptr(t))
#define I(t) ((int32_t *)gaaw_cuda_ptr(t))

gaaw_status_t gaaw_cuda_op_moe_router(gaaw_context_t ctx, gaaw_cten logits, int sigmoid, gaaw_ten scores,
                                      gaaw_ten lse)
{
  LAUNCH(gaaw_cuda_moe_router(STREAM, logits->shape[0], logits->shape[1], F(logits), sigmoid, F(scores), F(lse)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_moe_router_backward(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten scores, gaaw_cten lse,
                                               gaaw_cten dscores, int sigmoid, float zscale, gaaw_ten dlogits)
{
  LAUNCH(gaaw_cuda_moe_router_backward(STREAM, logits->shape[0], logits->shape[1], F(logits), F(scores), F(lse),
                                       F(dscores), sigmoid, zscale, F(dlogits)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_moe_topk(gaaw_context_t ctx, gaaw_cten scores, gaaw_cten bias, int renormalize,
                                    gaaw_ten idx, gaaw_ten weights)
{
  LAUNCH(gaaw_cuda_moe_topk(STREAM, scores->shape[0], scores->shape[1], idx->shape[1], F(scores),
                            bias ? F(bias) : NULL, renormalize, I(idx), F(weights)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_moe_topk_backward(gaaw_context_t ctx, gaaw_cten scores, gaaw_cten idx, gaaw_cten weights,
                                             gaaw_cten dweights, int renormalize, gaaw_ten dscores)
{
  LAUNCH(gaaw_cuda_moe_topk_backward(STREAM, scores->shape[0], scores->shape[1], idx->shape[1], F(scores), I(idx),
                                     F(weights), F(dweights), renormalize, F(dscores)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_moe_permute(gaaw_context_t ctx, gaaw_cten x, gaaw_cten src, gaaw_ten out)
{
  LAUNCH(gaaw_cuda_moe_permute(STREAM, DT(x), x->shape[0], out->shape[0], x->shape[1], P(x), I(src), P(out)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_moe_permute_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten pos, gaaw_ten dx)
{
  LAUNCH(gaaw_cuda_moe_combine(STREAM, DT(dx), dx->shape[0], dout->shape[0], dx->shape[1], pos->shape[1], P(dout),
                               I(pos), NULL, P(dx)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_moe_unpermute(gaaw_context_t ctx, gaaw_cten y, gaaw_cten pos, gaaw_cten weights,
                                         gaaw_ten out)
{
  LAUNCH(gaaw_cuda_moe_combine(STREAM, DT(y), out->shape[0], y->shape[0], out->shape[1], pos->shape[1], P(y),
                               I(pos), F(weights), P(out)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cuda_op_moe_unpermute_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten y, gaaw_cten pos,
                                                  gaaw_cten weights, gaaw_ten dy, gaaw_ten dweights)
{
  LAUNCH(gaaw_cuda_moe_unpermute_backward(STREAM, DT(y), dout->shape[0], y->shape[0], dout->shape[1], pos->shape[1],
                                          P(dout), P(y), I(pos), F(weights), P(dy), F(dweights)));
  return GAAW_SUCCESS;
}
