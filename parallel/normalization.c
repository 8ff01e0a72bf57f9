/* Normalisation of a sequential model's (or MLP's) inputs and outputs by running
 * statistics, so that a code passes physical units: per feature, the count, mean
 * and M2 (sum of squared deviations) of every sample given to
 * gaaw_model_normalization_update on every dp rank, combined exactly (Chan et al.'s
 * pairwise update, in f64, in dp rank order, so every rank holds the same bits).
 * Once they exist, a batch's inputs and outputs enter the model as (v - mean) / std
 * and the model's outputs leave it as y std + mean (predict, forward_outputs), a
 * caller's output gradient is scaled by std (backward_from); the loss is in
 * normalised units. std = sqrt(M2 / count) (the population's), 1 where it is 0.
 * The statistics are model state, for checkpoints to keep (DESIGN.md 7a). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/runtime/abort.h"
#include "parallel/model_impl.h"

/* One side's statistics (inputs or outputs): per feature mean and M2. */
static gaaw_status_t ensure_stats(gaaw_model_t m)
{
  gaaw_context_t ctx = m->ctx;
  if (m->norm.mean) return GAAW_SUCCESS;
  size_t n = (size_t)(m->seq_inputs + m->seq_outputs);
  m->norm.mean = calloc(n, sizeof(double));
  m->norm.m2 = calloc(n, sizeof(double));
  if (!m->norm.mean || !m->norm.m2) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %zu statistics", n);
  return GAAW_SUCCESS;
}

void gaaw_normalization_free(gaaw_model_t m)
{
  free(m->norm.mean);
  free(m->norm.m2);
  memset(&m->norm, 0, sizeof m->norm);
}

/* Feature f's std (f counts inputs first, then outputs). */
static double feature_std(const gaaw_model_t m, int f)
{
  double s = sqrt(m->norm.m2[f] / m->norm.count);
  return s > 0 && isfinite(s) ? s : 1.0;
}

gaaw_status_t gaaw_normalization_set(gaaw_model_t m, double count, const double *mean, const double *m2)
{
  gaaw_context_t ctx = m->ctx;
  if (!mean || count <= 0) {
    gaaw_normalization_free(m);
    return GAAW_SUCCESS;
  }
  GAAW_CHECK(ensure_stats(m));
  size_t n = (size_t)(m->seq_inputs + m->seq_outputs);
  memcpy(m->norm.mean, mean, n * sizeof(double));
  memcpy(m->norm.m2, m2, n * sizeof(double));
  m->norm.count = count;
  return GAAW_SUCCESS;
}

int gaaw_normalization_active(gaaw_model_t m)
{
  return m->norm.count > 0;
}

void gaaw_normalize(gaaw_model_t m, int outputs, const float *v, int64_t rows, float *out)
{
  int C = outputs ? m->seq_outputs : m->seq_inputs, base = outputs ? m->seq_inputs : 0;
  for (int c = 0; c < C; c++) {
    double mean = m->norm.mean[base + c], inv = 1.0 / feature_std(m, base + c);
    for (int64_t r = 0; r < rows; r++) out[r * C + c] = (float)((v[r * C + c] - mean) * inv);
  }
}

void gaaw_denormalize_outputs(gaaw_model_t m, int64_t rows, float *y, int gradient)
{
  int C = m->seq_outputs, base = m->seq_inputs;
  for (int c = 0; c < C; c++) {
    double mean = gradient ? 0.0 : m->norm.mean[base + c], s = feature_std(m, base + c);
    for (int64_t r = 0; r < rows; r++) y[r * C + c] = (float)(y[r * C + c] * s + mean);
  }
}

/* This rank's batch: count, then per feature mean and M2, in f64. */
static void local_stats(gaaw_model_t m, const gaaw_batch_t *b, double *out)
{
  int nin = m->seq_inputs, nout = m->seq_outputs;
  out[0] = b->batch;
  for (int f = 0; f < nin + nout; f++) {
    const float *v = f < nin ? b->inputs : b->outputs;
    int C = f < nin ? nin : nout, c = f < nin ? f : f - nin;
    double mean = 0, m2 = 0;
    for (int r = 0; r < b->batch; r++) mean += v[(int64_t)r * C + c];
    mean /= b->batch;
    for (int r = 0; r < b->batch; r++) {
      double d = v[(int64_t)r * C + c] - mean;
      m2 += d * d;
    }
    out[1 + f] = mean;
    out[1 + nin + nout + f] = m2;
  }
}

/* Merges (count nb, mean mb, M2 m2b) into the running (count, mean, m2). */
static void merge(double *count, double *mean, double *m2, double nb, double mb, double m2b)
{
  double n = *count + nb, delta = mb - *mean;
  *mean += delta * nb / n;
  *m2 += m2b + delta * delta * *count * nb / n;
  *count = n;
}

static gaaw_status_t check_update(gaaw_model_t m, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_CHECK(ctx, m->kind_ops->kind == GAAW_MODEL_MLP, "normalisation is for sequential models and MLPs");
  GAAW_ARG_NOT_NULL(ctx, b);
  GAAW_ARG_CHECK(ctx, b->batch >= 1, "batch must be >= 1, got %d", b->batch);
  GAAW_ARG_CHECK(ctx, b->inputs && b->outputs, "the normalisation's batch needs inputs and outputs");
  for (int64_t i = 0; i < (int64_t)b->batch * m->seq_inputs; i++)
    GAAW_ARG_CHECK(ctx, isfinite(b->inputs[i]), "inputs[%lld] is %g; it must be finite", (long long)i,
                   (double)b->inputs[i]);
  for (int64_t i = 0; i < (int64_t)b->batch * m->seq_outputs; i++)
    GAAW_ARG_CHECK(ctx, isfinite(b->outputs[i]), "outputs[%lld] is %g; it must be finite", (long long)i,
                   (double)b->outputs[i]);
  GAAW_CHECK(ensure_stats(m));
  return GAAW_SUCCESS;
}

/* Every dp rank's (count, means, M2s) gathered as raw f64 bits (an i32 tensor twice
 * as long: the gather copies bits, so nothing is rounded). */
static gaaw_status_t gather_stats(gaaw_model_t m, gaaw_comm_t dp, int dp_size, const double *mine, int64_t n,
                                  double *all)
{
  gaaw_context_t ctx = m->ctx;
  int64_t words = 2 * n, total = words * dp_size;
  gaaw_tensor_t send = {0}, recv = {0};
  gaaw_status_t st = gaaw_tensor_alloc(ctx, GAAW_I32, 1, &words, GAAW_MEM_WORKSPACE, &send);
  if (st == GAAW_SUCCESS) st = gaaw_tensor_alloc(ctx, GAAW_I32, 1, &total, GAAW_MEM_WORKSPACE, &recv);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_write(ctx, send.buf, send.offset, mine, sizeof(double) * (size_t)n);
  if (st == GAAW_SUCCESS) st = gaaw_comm_allgather(dp, &send, &recv);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, recv.buf, recv.offset, all, sizeof(double) * (size_t)(n * dp_size));
  if (send.buf) gaaw_buffer_free(ctx, &send.buf);
  if (recv.buf) gaaw_buffer_free(ctx, &recv.buf);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_normalization_update(gaaw_model_t m, const gaaw_batch_t *b)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  gaaw_comm_t dp = NULL;
  int dp_size = 1;
  gaaw_status_t st = check_update(m, b);
  if (st == GAAW_SUCCESS) st = gaaw_topology_comm(ctx, GAAW_GROUP_DP, &dp);
  if (st == GAAW_SUCCESS) st = gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, NULL, &dp_size);
  /* the ranks of a tp group hold the same samples; dp ranks their own */
  gaaw_field digest[2];
  int nd = 0;
  if (st == GAAW_SUCCESS) {
    digest[nd++] = GAAW_FIELD_DIGEST("inputs", gaaw_digest(b->inputs, sizeof(float) * (size_t)b->batch * m->seq_inputs));
    digest[nd++] =
        GAAW_FIELD_DIGEST("outputs", gaaw_digest(b->outputs, sizeof(float) * (size_t)b->batch * m->seq_outputs));
  }
  if (m->tp_size > 1) st = gaaw_agree(m->tp, st, "the normalisation batch of a tp group", digest, nd);
  st = gaaw_agree(m->world, st, "gaaw_model_normalization_update", NULL, 0);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  int64_t nf = m->seq_inputs + m->seq_outputs, n = 1 + 2 * nf;
  double *mine = malloc(sizeof(double) * (size_t)n), *all = malloc(sizeof(double) * (size_t)(n * dp_size));
  if (!mine || !all) st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "statistics");
  if (st == GAAW_SUCCESS) {
    local_stats(m, b, mine);
    st = gather_stats(m, dp, dp_size, mine, n, all);
  }
  for (int r = 0; st == GAAW_SUCCESS && r < dp_size; r++) {
    const double *s = all + r * n;
    for (int64_t f = 0; f < nf; f++) {
      double count = m->norm.count;
      merge(&count, &m->norm.mean[f], &m->norm.m2[f], s[0], s[1 + f], s[1 + nf + f]);
    }
    m->norm.count += s[0];
  }
  free(mine), free(all);
  if (st != GAAW_SUCCESS) {
    if (m->world->size > 1) gaaw_context_abort(ctx); /* after the agreement: the peers may be waiting */
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_normalization_stats(gaaw_model_t m, double *count, double *mean, double *std)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  GAAW_ARG_NOT_NULL(m->ctx, count);
  *count = m->norm.count;
  for (int f = 0; f < m->seq_inputs + m->seq_outputs; f++) {
    if (mean) mean[f] = m->norm.count > 0 ? m->norm.mean[f] : 0.0;
    if (std) std[f] = m->norm.count > 0 ? feature_std(m, f) : 1.0;
  }
  return GAAW_SUCCESS;
}
