/* The OpenCL backend's mixture-of-experts entries (kernels/moe.cl). The router and
 * top-k read and write f32 only; the permutations load and store any float dtype. */
#include "backends/opencl/opencl.h"

gaaw_status_t ocl_moe_router(gaaw_context_t ctx, gaaw_cten logits, int sigmoid, gaaw_ten scores, gaaw_ten lse)
{
  cl_long T = logits->shape[0], E = logits->shape[1];
  cl_int sg = sigmoid;
  return OCL_RUN(ctx, OCL_K_moe_router, ocl_ew_groups(T), OCL_EW_WG, OCL_TEN(logits), OCL_VAL(sg), OCL_TEN(scores),
                 OCL_TEN(lse), OCL_VAL(T), OCL_VAL(E));
}

gaaw_status_t ocl_moe_router_backward(gaaw_context_t ctx, gaaw_cten logits, gaaw_cten scores, gaaw_cten lse,
                                      gaaw_cten dscores, int sigmoid, float zscale, gaaw_ten dlogits)
{
  cl_long T = logits->shape[0], E = logits->shape[1];
  cl_int sg = sigmoid;
  cl_float z = zscale;
  return OCL_RUN(ctx, OCL_K_moe_router_backward, ocl_ew_groups(T), OCL_EW_WG, OCL_TEN(logits), OCL_TEN(scores),
                 OCL_TEN(lse), OCL_TEN(dscores), OCL_VAL(sg), OCL_VAL(z), OCL_TEN(dlogits), OCL_VAL(T), OCL_VAL(E));
}

gaaw_status_t ocl_moe_topk(gaaw_context_t ctx, gaaw_cten scores, gaaw_cten bias, int renormalize, gaaw_ten idx,
                           gaaw_ten weights)
{
  cl_long T = scores->shape[0], E = scores->shape[1], k = idx->shape[1];
  cl_int has_bias = bias != NULL, rn = renormalize;
  gaaw_cten b = bias ? bias : scores; /* not read without a bias */
  return OCL_RUN(ctx, OCL_K_moe_topk, ocl_ew_groups(T), OCL_EW_WG, OCL_TEN(scores), OCL_TEN(b), OCL_VAL(has_bias),
                 OCL_VAL(rn), OCL_TEN(idx), OCL_TEN(weights), OCL_VAL(T), OCL_VAL(E), OCL_VAL(k));
}

gaaw_status_t ocl_moe_topk_backward(gaaw_context_t ctx, gaaw_cten scores, gaaw_cten idx, gaaw_cten weights,
                                    gaaw_cten dweights, int renormalize, gaaw_ten dscores)
{
  cl_long T = scores->shape[0], E = scores->shape[1], k = idx->shape[1];
  cl_int rn = renormalize;
  return OCL_RUN(ctx, OCL_K_moe_topk_backward, ocl_ew_groups(T), OCL_EW_WG, OCL_TEN(scores), OCL_TEN(idx),
                 OCL_TEN(weights), OCL_TEN(dweights), OCL_VAL(rn), OCL_TEN(dscores), OCL_VAL(T), OCL_VAL(E),
                 OCL_VAL(k));
}

gaaw_status_t ocl_moe_permute(gaaw_context_t ctx, gaaw_cten x, gaaw_cten src, gaaw_ten out)
{
  OCL_CHECK_F16("moe_permute", x, out);
  cl_long T = x->shape[0], C = x->shape[1], n = gaaw_tensor_numel(out);
  return OCL_RUN(ctx, OCL_K_moe_permute, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(x), OCL_TEN(src), OCL_TEN(out),
                 OCL_VAL(T), OCL_VAL(C), OCL_VAL(n));
}

/* out[t] = sum_j weights[t][j] (NULL: 1) y[pos[t][j]] */
static gaaw_status_t combine(gaaw_context_t ctx, const char *op, gaaw_cten y, gaaw_cten pos, gaaw_cten weights,
                             gaaw_ten out)
{
  OCL_CHECK_F16(op, y, out);
  cl_long P = y->shape[0], C = out->shape[1], k = pos->shape[1], n = gaaw_tensor_numel(out);
  cl_int has_weights = weights != NULL;
  gaaw_cten w = weights ? weights : pos; /* not read without weights */
  return OCL_RUN(ctx, OCL_K_moe_combine, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(y), OCL_TEN(pos), OCL_TEN(w),
                 OCL_VAL(has_weights), OCL_TEN(out), OCL_VAL(P), OCL_VAL(C), OCL_VAL(k), OCL_VAL(n));
}

gaaw_status_t ocl_moe_permute_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten pos, gaaw_ten dx)
{
  return combine(ctx, "moe_permute_backward", dout, pos, NULL, dx);
}

gaaw_status_t ocl_moe_unpermute(gaaw_context_t ctx, gaaw_cten y, gaaw_cten pos, gaaw_cten weights, gaaw_ten out)
{
  return combine(ctx, "moe_unpermute", y, pos, weights, out);
}

gaaw_status_t ocl_moe_unpermute_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten y, gaaw_cten pos,
                                         gaaw_cten weights, gaaw_ten dy, gaaw_ten dweights)
{
  OCL_CHECK_F16("moe_unpermute_backward", dout, y, dy);
  cl_long P = y->shape[0], C = dout->shape[1], k = pos->shape[1], n = gaaw_tensor_numel(pos);
  return OCL_RUN(ctx, OCL_K_moe_unpermute_backward, ocl_ew_groups(n), OCL_EW_WG, OCL_TEN(dout), OCL_TEN(y),
                 OCL_TEN(pos), OCL_TEN(weights), OCL_TEN(dy), OCL_TEN(dweights), OCL_VAL(P), OCL_VAL(C), OCL_VAL(k),
                 OCL_VAL(n));
}
