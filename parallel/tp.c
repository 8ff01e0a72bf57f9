/* Tensor-parallel mappings (see tp.h). With one rank in the group each is a copy
 * or nothing, without a call into the communicator. */
#include "backends/comm.h"
#include "backends/runtime/context_impl.h"
#include "parallel/tp.h"

gaaw_status_t gaaw_tp_allreduce(gaaw_comm_t tp, gaaw_tensor_t *x)
{
  gaaw_context_t ctx = tp->ctx;
  if (tp->size > 1) GAAW_CHECK(gaaw_comm_allreduce(tp, x, x, GAAW_SUM));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_tp_gather_rows(gaaw_comm_t tp, const gaaw_tensor_t *x_local, gaaw_tensor_t *x_full)
{
  gaaw_context_t ctx = tp->ctx;
  if (tp->size > 1)
    GAAW_CHECK(gaaw_comm_allgather(tp, x_local, x_full));
  else
    GAAW_CHECK(gaaw_cast(ctx, x_local, x_full));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_tp_reduce_scatter_rows(gaaw_comm_t tp, const gaaw_tensor_t *y_full, gaaw_tensor_t *y_local)
{
  gaaw_context_t ctx = tp->ctx;
  if (tp->size > 1)
    GAAW_CHECK(gaaw_comm_reduce_scatter(tp, y_full, y_local, GAAW_SUM));
  else
    GAAW_CHECK(gaaw_cast(ctx, y_full, y_local));
  return GAAW_SUCCESS;
}

/* (rows, cols) of a tensor seen as a matrix over its last dimension. */
static void as_matrix(const gaaw_tensor_t *t, int64_t *rows, int64_t *cols)
{
  *cols = t->shape[t->ndim - 1];
  *rows = *cols ? gaaw_tensor_numel(t) / *cols : 0;
}

gaaw_status_t gaaw_tp_gather_columns(gaaw_comm_t tp, const gaaw_tensor_t *x_local, gaaw_tensor_t *workspace,
                                     gaaw_tensor_t *x_full)
{
  gaaw_context_t ctx = tp->ctx;
  if (tp->size == 1) {
    GAAW_CHECK(gaaw_cast(ctx, x_local, x_full));
    return GAAW_SUCCESS;
  }
  int64_t n, c;
  as_matrix(x_local, &n, &c);
  /* workspace (tp, N, C/tp) -> x_full viewed as (N, tp, C/tp) */
  GAAW_CHECK(gaaw_comm_allgather(tp, x_local, workspace));
  gaaw_tensor_t w = *workspace, y = *x_full;
  w.ndim = y.ndim = 4;
  int64_t ws[4] = {1, tp->size, n, c}, ys[4] = {1, n, tp->size, c};
  for (int d = 0; d < 4; d++) w.shape[d] = ws[d], y.shape[d] = ys[d];
  GAAW_CHECK(gaaw_permute_0213(ctx, &w, &y));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_tp_split_columns(gaaw_comm_t tp, const gaaw_tensor_t *dx_full, gaaw_tensor_t *dx_local)
{
  gaaw_context_t ctx = tp->ctx;
  if (tp->size == 1) {
    GAAW_CHECK(gaaw_axpy(ctx, 1.0f, dx_full, dx_local));
    return GAAW_SUCCESS;
  }
  int64_t n, c;
  as_matrix(dx_local, &n, &c);
  /* dx_full (N, tp, C/tp) -> blocks (tp, N, C/tp); this rank's block is added */
  int64_t bs[4] = {1, tp->size, n, c};
  gaaw_tensor_t blocks, x = *dx_full;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, dx_full->dtype, 4, bs, GAAW_MEM_WORKSPACE, &blocks));
  x.ndim = 4;
  int64_t xs[4] = {1, n, tp->size, c};
  for (int d = 0; d < 4; d++) x.shape[d] = xs[d];
  gaaw_status_t st = gaaw_permute_0213(ctx, &x, &blocks);
  if (st == GAAW_SUCCESS) {
    gaaw_tensor_t mine = blocks;
    mine.ndim = 2;
    mine.shape[0] = n;
    mine.shape[1] = c;
    mine.shape[2] = mine.shape[3] = 0;
    mine.offset += (size_t)(tp->rank * n * c) * gaaw_dtype_size(blocks.dtype);
    st = gaaw_axpy(ctx, 1.0f, &mine, dx_local);
  }
  gaaw_buffer_free(ctx, &blocks.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
