/* The linears' backward, split or not (ZB-H1's B and W, DESIGN.md sections 6 and 10).
 * Fused, a linear computes dW += dy^T x (and db) then dx = dy W, as it always did.
 * Split, B computes dx and keeps copies of dy (N, out) and x (N, in) in the frame,
 * one gaaw_deferred_grad per linear; W computes dW and db from them later, the
 * same kernels on the same values, so the gradients are bit-identical to the fused
 * backward's. What W covers: the linears' weights and the column-parallel biases
 * that come with them (the GPT block's QKV, attention output, fc1 and fc2, the LM
 * head, the sequential linears). Norms, embeddings and the row-parallel biases
 * the GPT block adds after its reductions stay in B: they are cheap, and with
 * sequence parallelism their gradients are partial sums that B reduces over tp. */
#include <string.h>

#include "parallel/linear.h"
#include "parallel/model_impl.h"
#include "parallel/tp.h"

/* Rows [0, rows) of parameter slot k's gradient (rows < 0: all of it). */
static gaaw_tensor_t grad_rows(gaaw_model_t m, gaaw_layer *l, int k, int64_t rows)
{
  gaaw_tensor_t *g = gaaw_layer_grad(m, l, k);
  return rows >= 0 ? gaaw_rows_view(g, 0, rows) : *g;
}

/* Block b of p's gradient (split axis 0), as a (1, count) view. */
static gaaw_tensor_t block_grad(const gaaw_param *p, int b)
{
  int64_t at, count;
  gaaw_param_block_span(p, b, &at, &count);
  gaaw_tensor_t g = gaaw_reshape(&p->grad, 2, (int64_t[]){1, p->local_numel});
  g.shape[1] = count;
  g.offset += (size_t)at * gaaw_dtype_size(g.dtype);
  return g;
}

/* Grouped-query attention with tp > kv_heads replicates the key and value blocks
 * of the QKV weight (and bias) on tp / kv_heads ranks, each of which adds the
 * gradient of its own query heads: what one linear's backward adds there is summed
 * over exactly those ranks. Before it (hold) the accumulated blocks move aside into
 * held and are zeroed; after it (sum) the increments are gathered over tp, summed
 * in rank order (the same additions on every holder, so the replicas stay bitwise
 * equal) and the held sums added back. Collective over tp; nothing to do for a
 * parameter without replicated blocks. */
static gaaw_status_t hold_replicas(gaaw_model_t m, const gaaw_param *p, gaaw_tensor_t *held)
{
  gaaw_context_t ctx = m->ctx;
  memset(held, 0, sizeof *held);
  if (!gaaw_param_has_replicas(p, m->tp_size)) return GAAW_SUCCESS;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, p->grad.dtype, 1, &p->local_numel, GAAW_MEM_WORKSPACE, held));
  gaaw_tensor_t all = gaaw_reshape(&p->grad, 1, &p->local_numel);
  GAAW_CHECK(gaaw_cast(ctx, &all, held));
  for (int b = 0; b < p->blocks.n; b++) {
    gaaw_tensor_t g = block_grad(p, b);
    if (gaaw_param_block_replicas(p, b, m->tp_size) > 1) GAAW_CHECK(gaaw_fill(ctx, &g, 0.0f));
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t sum_replicas(gaaw_model_t m, const gaaw_param *p, const gaaw_tensor_t *held)
{
  gaaw_context_t ctx = m->ctx;
  for (int b = 0; b < p->blocks.n && held->buf; b++) {
    int rep = gaaw_param_block_replicas(p, b, m->tp_size), first = m->tp_rank / rep * rep;
    if (rep == 1) continue;
    gaaw_tensor_t g = block_grad(p, b), all, kept = block_grad(p, b);
    kept.buf = held->buf; /* the same span of held */
    kept.offset = g.offset - p->grad.offset;
    GAAW_CHECK(gaaw_tensor_alloc(ctx, g.dtype, 2, (int64_t[]){m->tp_size, g.shape[1]}, GAAW_MEM_COMMUNICATION, &all));
    gaaw_status_t st = gaaw_tp_gather_rows(m->tp, &g, &all);
    if (st == GAAW_SUCCESS) {
      gaaw_tensor_t row = gaaw_rows_view(&all, first, 1);
      st = gaaw_cast(ctx, &row, &g);
    }
    for (int r = first + 1; r < first + rep && st == GAAW_SUCCESS; r++) {
      gaaw_tensor_t row = gaaw_rows_view(&all, r, 1);
      st = gaaw_axpy(ctx, 1.0f, &row, &g);
    }
    if (st == GAAW_SUCCESS) st = gaaw_axpy(ctx, 1.0f, &kept, &g);
    gaaw_buffer_free(ctx, &all.buf);
    if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t run_one(gaaw_model_t m, gaaw_layer *l, const gaaw_tensor_t *dy, const gaaw_tensor_t *x,
                             int w_slot, int64_t w_rows, int b_slot)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_param *w = &m->params.items[l->params[w_slot]];
  const gaaw_param *b = b_slot >= 0 ? &m->params.items[l->params[b_slot]] : NULL;
  gaaw_tensor_t dw = grad_rows(m, l, w_slot, w_rows), held_w = {0}, held_b = {0};
  gaaw_status_t st = hold_replicas(m, w, &held_w);
  if (st == GAAW_SUCCESS && b) st = hold_replicas(m, b, &held_b);
  if (st == GAAW_SUCCESS)
    st = gaaw_linear_backward_weight(ctx, dy, x, &dw, b ? gaaw_layer_grad(m, l, b_slot) : NULL);
  if (st == GAAW_SUCCESS) st = sum_replicas(m, w, &held_w);
  if (st == GAAW_SUCCESS && b) st = sum_replicas(m, b, &held_b);
  gaaw_buffer_free(ctx, &held_w.buf);
  gaaw_buffer_free(ctx, &held_b.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Keeps what W needs: copies, as dy and x die with B (scratch, saved slots, the
 * layer inputs that backward frees). */
static gaaw_status_t defer(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                           const gaaw_tensor_t *x, int w_slot, int64_t w_rows, int b_slot)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_deferred *d = &f->deferred[l->index];
  if (d->n == GAAW_LAYER_MAX_DEFERRED)
    GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "layer %d (%s) defers more than %d weight gradients", l->index, l->ops->kind,
              GAAW_LAYER_MAX_DEFERRED);
  /* partial gradients (sequence parallelism) are reduced over tp right after B */
  int slots[2] = {w_slot, b_slot};
  for (int k = 0; k < 2; k++)
    if (slots[k] >= 0 && m->params.items[l->params[slots[k]]].grad_is_partial)
      GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "layer %d (%s): a partial gradient cannot wait for W", l->index,
                l->ops->kind);
  gaaw_deferred_grad *g = &d->g[d->n];
  *g = (gaaw_deferred_grad){.w_slot = w_slot, .b_slot = b_slot, .w_rows = w_rows};
  d->n++; /* from here gaaw_layer_drop_deferred frees what is there */
  GAAW_CHECK(gaaw_act_copy(m, dy, &g->dy));
  GAAW_CHECK(gaaw_act_copy(m, x, &g->x));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layer_linear_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                                         const gaaw_tensor_t *x, const gaaw_tensor_t *w, gaaw_tensor_t *dx,
                                         int w_slot, int64_t w_rows, int b_slot)
{
  gaaw_context_t ctx = m->ctx;
  if (f->defer_weights)
    GAAW_CHECK(defer(m, l, f, dy, x, w_slot, w_rows, b_slot));
  else
    GAAW_CHECK(run_one(m, l, dy, x, w_slot, w_rows, b_slot));
  GAAW_CHECK(gaaw_linear_backward_input(ctx, dy, w, dx));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_layer_run_deferred(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l)
{
  gaaw_deferred *d = &f->deferred[l->index];
  gaaw_status_t st = GAAW_SUCCESS;
  for (int k = 0; k < d->n && st == GAAW_SUCCESS; k++) {
    const gaaw_deferred_grad *g = &d->g[k];
    st = run_one(m, l, &g->dy, &g->x, g->w_slot, g->w_rows, g->b_slot);
    if (st == GAAW_SUCCESS) l->deferred_grads_run++;
  }
  gaaw_layer_drop_deferred(m, f, l);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(m->ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

void gaaw_layer_drop_deferred(gaaw_model_t m, gaaw_frame *f, const gaaw_layer *l)
{
  gaaw_deferred *d = &f->deferred[l->index];
  for (int k = 0; k < d->n; k++) {
    gaaw_act_free(m, &d->g[k].dy);
    gaaw_act_free(m, &d->g[k].x);
  }
  d->n = 0;
}
