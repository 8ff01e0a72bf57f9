/* What the CUDA backend's kernel entries share (cuda_ops.c, cuda_ops_moe.c): their
 * declarations, for the table in cuda_device.c, and the shorthands of a launch. */
#ifndef GAAW_CUDA_OPS_H
#define GAAW_CUDA_OPS_H

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_kernels.h"

#define CUDA_DECLARE(name, params) gaaw_status_t gaaw_cuda_op_##name params;
GAAW_DEVICE_KERNEL_LIST(CUDA_DECLARE)
GAAW_DEVICE_OPTIONAL_KERNEL_LIST(CUDA_DECLARE)
#undef CUDA_DECLARE

/* Shorthands: the compute stream, a tensor's address and dtype, a launch. */
#define STREAM (gaaw_cuda_state_of(ctx)->compute)
#define P(t) gaaw_cuda_ptr(t)
#define DT(t) ((gaaw_cuda_dtype)(t)->dtype)
#define LAUNCH(call)                                                                     \
  do {                                                                                   \
    cudaError_t launch_err_ = (call);                                                    \
    if (launch_err_ != cudaSuccess)                                                      \
      return gaaw_cuda_error(ctx, launch_err_, __FILE__, __LINE__, __func__, #call);     \
  } while (0)

#endif
