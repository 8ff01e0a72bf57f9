/* The kernels lane of the timeline (option trace_kernels, doc/timeline.md): every
 * call of kernels.c and fused.c is a span named after its operation, with the shape
 * that sizes its work. Include after kernel_check.h (shape_of). */
#ifndef GAAW_BACKENDS_KERNEL_TRACE_H
#define GAAW_BACKENDS_KERNEL_TRACE_H

#include "backends/kernel_check.h"
#include "backends/runtime/trace.h"

/* The call's start when the lane is on, else 0. */
static inline double kernel_start(gaaw_context_t ctx)
{
  return gaaw_trace_kernel_lane(ctx) ? gaaw_clock_seconds() : 0.0;
}

/* The span of a call started at t0, with t's shape. */
static inline void kernel_end(gaaw_context_t ctx, const char *op, double t0, const gaaw_tensor_t *t)
{
  int lane = t0 > 0 ? gaaw_trace_kernel_lane(ctx) : 0;
  if (lane) gaaw_trace_span(ctx, lane, op, t0, "\"shape\":\"%s\"", shape_of(t).s);
}

/* A gemm's span: "[batch x ]MxNxK AB", A and B each N or T. */
static inline void gemm_end(gaaw_context_t ctx, const char *op, double t0, gaaw_transpose_t ta,
                            gaaw_transpose_t tb, int64_t batch, int64_t m, int64_t n, int64_t k)
{
  int lane = t0 > 0 ? gaaw_trace_kernel_lane(ctx) : 0;
  if (!lane) return;
  char count[32] = "";
  if (batch > 1) snprintf(count, sizeof count, "%lld x ", (long long)batch);
  gaaw_trace_span(ctx, lane, op, t0, "\"shape\":\"%s%lldx%lldx%lld %c%c\"", count, (long long)m, (long long)n,
                  (long long)k, ta == GAAW_OP_N ? 'N' : 'T', tb == GAAW_OP_N ? 'N' : 'T');
}

/* The context's backend entry `op` with ctx and the arguments after t, the tensor
 * that names the call's shape on the lane (ctx must be in scope). */
#define RUN(op, t, ...)                                                                                      \
  do {                                                                                                       \
    double t0_ = kernel_start(ctx);                                                                          \
    GAAW_CHECK(ctx->device->op(ctx, __VA_ARGS__));                                                           \
    kernel_end(ctx, #op, t0_, t);                                                                            \
  } while (0)

#endif
