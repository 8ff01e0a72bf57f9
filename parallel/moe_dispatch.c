/* Expert parallelism's token exchange (parallel/moe_dispatch.h). */
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/error.h"
#include "gaaw/kernels.h"
#include "parallel/moe_dispatch.h"

/* The gather maps between the received order (source, then local expert) and the
 * experts' order (local expert, then source), from per_pair[src El + l]. */
static gaaw_status_t build_maps(gaaw_context_t ctx, gaaw_moe_dispatch *d, const int64_t *per_pair)
{
  const int El = d->local, n = d->size;
  const int64_t rows = d->rows;
  int32_t *by_expert = malloc(sizeof(int32_t) * (size_t)(2 * rows + 1)), *by_source = by_expert + rows;
  int64_t *start = malloc(sizeof(int64_t) * (size_t)(n * El + 1)); /* each pair's first received row */
  gaaw_status_t st = by_expert && start ? GAAW_SUCCESS
                                        : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                           "cannot hold the maps of %lld rows", (long long)rows);
  for (int64_t i = 0, at = 0; st == GAAW_SUCCESS && i < (int64_t)n * El; at += per_pair[i], i++) start[i] = at;
  for (int l = 0, p = 0; st == GAAW_SUCCESS && l < El; l++)
    for (int src = 0; src < n; src++)
      for (int64_t i = 0; i < per_pair[src * El + l]; i++, p++) {
        by_expert[p] = (int32_t)(start[src * El + l] + i);
        by_source[by_expert[p]] = p;
      }
  const int64_t shape[1] = {rows > 0 ? rows : 1};
  gaaw_tensor_t *maps[2] = {&d->by_expert, &d->by_source};
  for (int m = 0; m < 2 && st == GAAW_SUCCESS; m++) {
    st = gaaw_tensor_alloc(ctx, GAAW_I32, 1, shape, GAAW_MEM_ACTIVATIONS, maps[m]);
    maps[m]->shape[0] = rows;
    if (st == GAAW_SUCCESS && rows > 0)
      st = gaaw_buffer_write(ctx, maps[m]->buf, maps[m]->offset, m ? by_source : by_expert,
                             sizeof(int32_t) * (size_t)rows);
  }
  free(start);
  free(by_expert);
  return st;
}

gaaw_status_t gaaw_moe_dispatch_plan(gaaw_context_t ctx, gaaw_comm_t ep, int experts, const int64_t *counts,
                                     gaaw_moe_dispatch *d)
{
  memset(d, 0, sizeof *d);
  d->ep = ep;
  GAAW_CHECK(gaaw_comm_size(ep, &d->size));
  GAAW_ARG_CHECK(ctx, experts % d->size == 0, "%d experts do not divide over an ep group of %d", experts, d->size);
  const int n = d->size, El = d->local = experts / n;
  int64_t *mem = calloc((size_t)(2 * n + 2 * El + n * El + 1), sizeof(int64_t));
  if (!mem) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold the counts of %d experts", experts);
  d->send_rows = mem, d->recv_rows = mem + n, d->counts = mem + 2 * n, d->offsets = d->counts + El;
  int64_t *per_pair = d->offsets + El; /* [src El + l]: the rows src sends for local expert l */
  gaaw_status_t st = gaaw_comm_alltoall_counts(ep, El, counts, per_pair);
  for (int r = 0; st == GAAW_SUCCESS && r < n; r++)
    for (int l = 0; l < El; l++) {
      d->send_rows[r] += counts[r * El + l];
      d->recv_rows[r] += per_pair[r * El + l];
      d->counts[l] += per_pair[r * El + l];
    }
  for (int l = 0; st == GAAW_SUCCESS && l < El; l++) {
    d->offsets[l] = l ? d->offsets[l - 1] + d->counts[l - 1] : 0;
    d->rows += d->counts[l];
  }
  if (st == GAAW_SUCCESS && d->rows > INT32_MAX)
    st = gaaw_error_raise(ctx, GAAW_ERR_UNSUPPORTED, __FILE__, __LINE__, __func__,
                          "%lld rows for one rank's experts exceed the i32 row maps", (long long)d->rows);
  if (st == GAAW_SUCCESS) st = build_maps(ctx, d, per_pair);
  if (st != GAAW_SUCCESS) {
    gaaw_moe_dispatch_free(ctx, d);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

/* counts (elements) = rows x C per ep rank. */
static void elements(const gaaw_moe_dispatch *d, const int64_t *rows, int64_t C, int64_t *counts)
{
  for (int r = 0; r < d->size; r++) counts[r] = rows[r] * C;
}

/* One exchange's counts, to the experts or back, and its (rows, C) message buffer
 * (one row at least, so that an empty exchange still has one). */
static gaaw_status_t message(gaaw_context_t ctx, const gaaw_moe_dispatch *d, int to_experts, const gaaw_tensor_t *like,
                             int64_t *send_counts, int64_t *recv_counts, gaaw_tensor_t *t)
{
  const int64_t C = like->shape[1], shape[2] = {d->rows > 0 ? d->rows : 1, C};
  elements(d, to_experts ? d->send_rows : d->recv_rows, C, send_counts);
  elements(d, to_experts ? d->recv_rows : d->send_rows, C, recv_counts);
  GAAW_CHECK(gaaw_tensor_alloc(ctx, like->dtype, 2, shape, GAAW_MEM_COMMUNICATION, t));
  t->shape[0] = d->rows;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_moe_dispatch_send(gaaw_context_t ctx, const gaaw_moe_dispatch *d, const gaaw_tensor_t *xp,
                                     gaaw_tensor_t *xe)
{
  int64_t sc[d->size], rc[d->size];
  gaaw_tensor_t recv = {0};
  gaaw_status_t st = message(ctx, d, 1, xp, sc, rc, &recv);
  if (st == GAAW_SUCCESS) st = gaaw_comm_alltoallv(d->ep, xp, sc, &recv, rc);
  if (st == GAAW_SUCCESS && d->rows > 0) st = gaaw_moe_permute(ctx, &recv, &d->by_expert, xe);
  if (recv.buf) gaaw_buffer_free(ctx, &recv.buf);
  return st;
}

gaaw_status_t gaaw_moe_dispatch_return(gaaw_context_t ctx, const gaaw_moe_dispatch *d, const gaaw_tensor_t *ye,
                                       gaaw_tensor_t *yp)
{
  int64_t sc[d->size], rc[d->size];
  gaaw_tensor_t back = {0};
  gaaw_status_t st = message(ctx, d, 0, yp, sc, rc, &back);
  if (st == GAAW_SUCCESS && d->rows > 0) st = gaaw_moe_permute(ctx, ye, &d->by_source, &back);
  if (st == GAAW_SUCCESS) st = gaaw_comm_alltoallv(d->ep, &back, sc, yp, rc);
  if (back.buf) gaaw_buffer_free(ctx, &back.buf);
  return st;
}

void gaaw_moe_dispatch_free(gaaw_context_t ctx, gaaw_moe_dispatch *d)
{
  gaaw_tensor_t *maps[2] = {&d->by_expert, &d->by_source};
  for (int m = 0; m < 2; m++)
    if (maps[m]->buf) gaaw_buffer_free(ctx, &maps[m]->buf);
  free(d->send_rows);
  d->send_rows = d->recv_rows = d->counts = d->offsets = NULL;
  d->rows = 0;
}
