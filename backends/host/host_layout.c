/* Layout kernels: moving rows of elements without arithmetic, for any dtype. */
#include <string.h>

#include "backends/host/host.h"
#include "backends/runtime/context_impl.h"

/* y[a][c][b][:] = x[a][b][c][:]   x: (A, B, C, D)   y: (A, C, B, D) */
gaaw_status_t host_permute_0213(gaaw_context_t ctx, gaaw_cten x, gaaw_ten y)
{
  host_stage s;
  host_stage_init(&s, ctx);
  const char *src = host_raw(&s, x);
  char *dst = host_raw(&s, y);
  int64_t A = x->shape[0], B = x->shape[1], C = x->shape[2];
  size_t row = (size_t)x->shape[3] * gaaw_dtype_size(x->dtype);
  if (src && dst && row) {
#pragma omp parallel for collapse(2) if (A * B * C * (int64_t)row > 4 * HOST_PARALLEL_MIN)
    for (int64_t a = 0; a < A; a++)
      for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++)
          memcpy(dst + (((size_t)a * C + c) * B + b) * row, src + (((size_t)a * B + b) * C + c) * row, row);
  }
  return host_stage_end(&s);
}
