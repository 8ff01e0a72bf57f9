/* What the stores that update on the CPU (host, nvme) share: a piece's update
 * through host staging (the gradient piece in, CPU Adam, the compute-dtype piece
 * out) and the conversions between the parameter piece and f32. */
#include "zero/zero_impl.h"

int64_t gaaw_zero_largest_piece(gaaw_optimizer_t opt)
{
  int64_t n = 1;
  for (int b = 0; b < opt->nbuckets; b++)
    if (opt->buckets[b].piece > n) n = opt->buckets[b].piece;
  return n;
}

gaaw_status_t gaaw_zero_cpu_update_piece(gaaw_optimizer_t opt, int b, const gaaw_cpu_update_args *args,
                                         const zero_cpu_piece *p)
{
  gaaw_context_t ctx = opt->ctx;
  const zero_bucket *k = &opt->buckets[b];
  size_t bytes = (size_t)k->piece * gaaw_dtype_size(opt->dtype);
  gaaw_tensor_t grad = gaaw_zero_grad_piece(opt, b);
  GAAW_CHECK(gaaw_buffer_read(ctx, grad.buf, grad.offset, p->grad, bytes));
  gaaw_cpu_update(p->simd, k->piece, p->w, p->m1, p->m2, p->grad, p->out, opt->dtype, args);
  GAAW_CHECK(gaaw_zero_shard_write(opt, b, p->out));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_zero_param_piece_to_f32(gaaw_optimizer_t opt, int b, void *staging, float *w)
{
  gaaw_context_t ctx = opt->ctx;
  GAAW_CHECK(gaaw_zero_shard_read(opt, b, staging));
  gaaw_cpu_to_f32(opt->buckets[b].piece, staging, opt->dtype, w);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_zero_param_piece_from_f32(gaaw_optimizer_t opt, int b, const float *w, void *staging)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_cpu_from_f32(opt->buckets[b].piece, w, staging, opt->dtype);
  GAAW_CHECK(gaaw_zero_shard_write(opt, b, staging));
  return GAAW_SUCCESS;
}
