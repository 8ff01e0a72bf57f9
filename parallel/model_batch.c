/* Batches: the checks every model kind shares, host arrays uploaded into a frame,
 * a step's microbatches as views of the caller's arrays, and the agreement of the
 * ranks on a step's batch. What a kind's arrays hold comes from its kind table
 * (gaaw_model_kind_ops). */
#include <stdlib.h>

#include "backends/agree.h"
#include "parallel/model_impl.h"

gaaw_status_t gaaw_batch_upload(gaaw_model_t m, gaaw_dtype_t dtype, int64_t d0, int64_t d1, const void *host,
                                gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  int64_t shape[2] = {d0, d1};
  GAAW_CHECK(gaaw_tensor_alloc(ctx, dtype, d1 ? 2 : 1, shape, GAAW_MEM_ACTIVATIONS, t));
  GAAW_CHECK(gaaw_buffer_write(ctx, t->buf, t->offset, host, (size_t)gaaw_tensor_numel(t) * gaaw_dtype_size(dtype)));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_batch_check_stage_arrays(gaaw_model_t m, const void *in, const void *target)
{
  gaaw_context_t ctx = m->ctx;
  const char *model = m->kind_ops->article, *in_name = m->kind_ops->input_name;
  const char *target_name = m->kind_ops->target_name;
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  if (m->pp_size == 1)
    GAAW_ARG_CHECK(ctx, in && target, "%s batch needs %s and %s", model, in_name, target_name);
  GAAW_ARG_CHECK(ctx, !first || in, "%s batch needs %s on the first pipeline stage (pp rank %d)", model, in_name,
                 m->pp_rank);
  GAAW_ARG_CHECK(ctx, !last || target, "%s batch needs %s on the last pipeline stage (pp rank %d)", model,
                 target_name, m->pp_rank);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_batch_upload_f32(gaaw_model_t m, int64_t d0, int64_t d1, const float *host, gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  gaaw_tensor_t staged;
  GAAW_CHECK(gaaw_batch_upload(m, GAAW_F32, d0, d1, host, &staged));
  gaaw_status_t st = gaaw_act_alloc(m, GAAW_SHAPE(d0, d1), t);
  if (st == GAAW_SUCCESS) st = gaaw_cast(ctx, &staged, t);
  gaaw_act_free(m, &staged);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Checks a microbatch and uploads it into frame f. Not collective. */
gaaw_status_t gaaw_model_load_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, b);
  GAAW_ARG_CHECK(ctx, b->batch >= 1, "batch must be >= 1, got %d", b->batch);
  f->batch = b->batch;
  f->seq = b->seq; /* a GPT at cp > 1 keeps its share */
  f->pieces = 1;
  f->piece_start[0] = 0;
  GAAW_CHECK(m->kind_ops->load_batch(m, f, b));
  return GAAW_SUCCESS;
}

/* The rows of a step may differ between data-parallel replicas (sized to their
 * devices' speeds): with the data-parallel hooks, the dp mean of the gradients is
 * then the global batch's mean when each replica's backward starts from
 * dp x batch / (sum of batch over dp) times the usual seed. Exactly 1 when the rows
 * are even, so that even batches give the bits they always did. */
static float rows_weight(const int64_t *rows, int dp, int dp_rank)
{
  int64_t sum = 0;
  for (int i = 0; i < dp; i++) sum += rows[i];
  return (float)((double)dp * (double)rows[dp_rank] / (double)sum);
}

/* Every rank of the work group learns whether each one's batch was good, and that
 * they fit together: the same data over tp and over cp, the same seq and microbatches over
 * world, the same rows over a replica's tp x pp ranks (they may differ between dp
 * replicas: every rank learns each replica's rows in the same round, for
 * rows_weight). */
gaaw_status_t gaaw_model_agree_batch(gaaw_model_t m, gaaw_status_t st, const gaaw_batch_t *b, int microbatches)
{
  gaaw_context_t ctx = m->ctx;
  /* the tp group must share the data (its ranks split the work of one
   * microbatch on one pipeline stage, so they read the same arrays) */
  gaaw_field fields[6];
  int n = 0;
  if (st == GAAW_SUCCESS) {
    fields[n++] = GAAW_FIELD_INT("batch", b->batch);
    fields[n++] = GAAW_FIELD_INT("seq", b->seq);
    if (microbatches != 1) fields[n++] = GAAW_FIELD_INT("microbatches", microbatches);
  }
  size_t rows_here = st == GAAW_SUCCESS ? (size_t)microbatches * (size_t)b->batch : 0; /* b may be NULL */
  if (m->tp_size > 1)
    st = gaaw_agree(m->tp, st, "the batch of a tp group", fields,
                    st == GAAW_SUCCESS ? n + m->kind_ops->batch_digests(m, b, rows_here, fields + n) : 0);
  /* and so must the cp group, whose ranks hold pieces of the same sequences */
  if (m->cp_size > 1)
    st = gaaw_agree(m->cp, st, "the batch of a cp group", fields,
                    st == GAAW_SUCCESS ? n + m->kind_ops->batch_digests(m, b, rows_here, fields + n) : 0);
  gaaw_comm_t group = gaaw_model_work_group(m);
  m->rows_weight = 1.0f;
  if (group != m->tp) {
    int dp_rank = 0, dp_size = 1;
    gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, &dp_size);
    enum { STACK_DP = 64 };
    int64_t rows_stack[STACK_DP], *rows = dp_size <= STACK_DP ? rows_stack : malloc((size_t)dp_size * sizeof *rows);
    if (!rows && st == GAAW_SUCCESS)
      st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate the rows of %d "
                            "dp ranks", dp_size);
    gaaw_agree_slots per_replica = {"batch", "dp rank", dp_rank, dp_size, st == GAAW_SUCCESS ? b->batch : 0, rows};
    /* batch, the first field, is agreed per replica; seq and microbatches over world */
    int shared = st == GAAW_SUCCESS ? n - 1 : 0;
    st = gaaw_agree_slotted(group, st, "the batch's shape", fields + 1, shared, rows ? &per_replica : NULL);
    if (st == GAAW_SUCCESS && m->hooks.user && dp_size > 1) m->rows_weight = rows_weight(rows, dp_size, dp_rank);
    if (rows != rows_stack) free(rows);
  }
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* gaaw_model_forward, gaaw_model_predict: one microbatch (through one stage, or the
 * pipeline's stages one after the other). */
gaaw_status_t gaaw_model_check_one_microbatch(gaaw_model_t m, const gaaw_batch_t *b, const char *what)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, b);
  GAAW_ARG_CHECK(ctx, b->microbatches <= 1, "%s runs one microbatch, got microbatches = %d "
                 "(gaaw_model_forward_backward runs several)", what, b->microbatches);
  return GAAW_SUCCESS;
}

int gaaw_model_microbatches(gaaw_model_t m, const gaaw_batch_t *b)
{
  return b->microbatches > 0 ? b->microbatches : m->default_microbatches;
}

gaaw_batch_t gaaw_model_microbatch(gaaw_model_t m, const gaaw_batch_t *b, int i)
{
  gaaw_batch_t one = *b;
  one.microbatches = 1;
  m->kind_ops->offset_batch(m, b, (size_t)i * (size_t)b->batch, &one);
  return one;
}
