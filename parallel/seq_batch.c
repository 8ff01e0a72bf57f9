/* A sequential model's (or MLP's) batches and outputs, its model-kind table
 * gaaw_seq_kind: inputs (batch, in) and outputs (batch, out) f32, normalised on
 * the way in when statistics exist, optional loss weights (batch, out); its
 * outputs are the last linear's, denormalised on the way out. */
#include <math.h>
#include <stdlib.h>

#include "backends/agree.h"
#include "parallel/sequential.h"

/* Host data (d0, d1) normalised (inputs: outputs 0; outputs: 1), then uploaded. */
static gaaw_status_t upload_normalized(gaaw_model_t m, int outputs, int64_t d0, int64_t d1, const float *host,
                                       gaaw_tensor_t *t)
{
  gaaw_context_t ctx = m->ctx;
  float *v = malloc(sizeof(float) * (size_t)(d0 * d1));
  if (!v) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld normalised values", (long long)(d0 * d1));
  gaaw_normalize(m, outputs, host, d0, v);
  gaaw_status_t st = gaaw_batch_upload_f32(m, d0, d1, v, t);
  free(v);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* The loss weights' sum, after checking each is finite and >= 0 and not all are 0. */
static gaaw_status_t weight_sum(gaaw_context_t ctx, const float *w, int64_t n, double *sum)
{
  double s = 0;
  for (int64_t i = 0; i < n; i++) {
    GAAW_ARG_CHECK(ctx, isfinite(w[i]) && w[i] >= 0.0f, "weights[%lld] is %g; loss weights must be finite and >= 0",
                   (long long)i, (double)w[i]);
    s += w[i];
  }
  GAAW_ARG_CHECK(ctx, s > 0, "the batch's loss weights are all 0: its loss (a mean over their sum) is undefined");
  *sum = s;
  return GAAW_SUCCESS;
}

static gaaw_status_t load_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  GAAW_CHECK(gaaw_batch_check_stage_arrays(m, b->inputs, b->outputs));
  int64_t nin = m->seq_inputs, nout = m->seq_outputs;
  f->counted = (int64_t)b->batch * nout;
  f->weight_sum = (double)f->counted;
  if (last && b->weights) GAAW_CHECK(weight_sum(ctx, b->weights, f->counted, &f->weight_sum));
  if (gaaw_normalization_active(m)) {
    if (first) GAAW_CHECK(upload_normalized(m, 0, b->batch, nin, b->inputs, &f->inputs));
    if (last) GAAW_CHECK(upload_normalized(m, 1, b->batch, nout, b->outputs, &f->outputs));
  } else {
    if (first) GAAW_CHECK(gaaw_batch_upload_f32(m, b->batch, nin, b->inputs, &f->inputs));
    if (last) GAAW_CHECK(gaaw_batch_upload_f32(m, b->batch, nout, b->outputs, &f->outputs));
  }
  if (last && b->weights) GAAW_CHECK(gaaw_batch_upload(m, GAAW_F32, b->batch, nout, b->weights, &f->weights));
  f->rows = b->batch;
  return GAAW_SUCCESS;
}

static void offset_batch(gaaw_model_t m, const gaaw_batch_t *b, size_t rows, gaaw_batch_t *one)
{
  if (b->inputs) one->inputs = b->inputs + rows * (size_t)m->seq_inputs;
  if (b->outputs) one->outputs = b->outputs + rows * (size_t)m->seq_outputs;
  if (b->weights) one->weights = b->weights + rows * (size_t)m->seq_outputs;
}

static int batch_digests(gaaw_model_t m, const gaaw_batch_t *b, size_t rows, gaaw_field *out)
{
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  size_t in_bytes = rows * (size_t)m->seq_inputs * sizeof(float), out_bytes = rows * (size_t)m->seq_outputs * sizeof(float);
  out[0] = GAAW_FIELD_DIGEST("inputs", first ? gaaw_digest(b->inputs, in_bytes) : 0);
  out[1] = GAAW_FIELD_DIGEST("outputs", last ? gaaw_digest(b->outputs, out_bytes) : 0);
  /* NULL weights digest as no bytes, which all-1 weights do not */
  out[2] = GAAW_FIELD_DIGEST("weights", last ? gaaw_digest(b->weights, b->weights ? out_bytes : 0) : 0);
  return 3;
}

static int64_t stream_rows(gaaw_model_t m, const gaaw_frame *f)
{
  (void)m;
  return f->rows;
}

static gaaw_status_t fill_targets(gaaw_model_t m, const gaaw_batch_t *b, gaaw_batch_t *full, void **filler)
{
  gaaw_context_t ctx = m->ctx;
  if (b->outputs) return GAAW_SUCCESS;
  size_t n = (size_t)b->batch * (size_t)m->seq_outputs;
  float *p = calloc(n ? n : 1, 4);
  if (!p) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %zu placeholder values", n);
  full->outputs = p;
  *filler = p;
  return GAAW_SUCCESS;
}

static int inference_layers(gaaw_model_t m)
{
  return m->nlayers - 1; /* all but the loss layer */
}

/* The last linear's output, whole on every rank (gathered or all-reduced). */
static gaaw_status_t read_outputs(gaaw_model_t m, gaaw_frame *f, float *out)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_tensor_t *y = &f->acts[m->nlayers - 1];
  gaaw_tensor_t host;
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, y->ndim, y->shape, GAAW_MEM_WORKSPACE, &host));
  gaaw_status_t st = gaaw_cast(ctx, y, &host);
  if (st == GAAW_SUCCESS)
    st = gaaw_buffer_read(ctx, host.buf, host.offset, out, (size_t)gaaw_tensor_numel(y) * sizeof(float));
  gaaw_buffer_free(ctx, &host.buf);
  if (st == GAAW_SUCCESS && gaaw_normalization_active(m)) gaaw_denormalize_outputs(m, f->rows, out, 0);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static int64_t output_count(gaaw_model_t m, const gaaw_batch_t *b)
{
  return (int64_t)b->batch * m->seq_outputs;
}

static void array_shapes(gaaw_model_t m, int predict, int64_t batch, int64_t seq, int64_t in[2], int64_t out[2])
{
  (void)predict, (void)seq;
  in[0] = batch, in[1] = m->seq_inputs;
  out[0] = batch, out[1] = m->seq_outputs;
}

/* every parameter is a linear's or a norm's: no lookups, no attention */
static void seq_flops(gaaw_model_t m, double *lookup_params, double *extra_flops)
{
  (void)m;
  *lookup_params = 0;
  *extra_flops = 0;
}

const gaaw_model_kind_ops gaaw_seq_kind = {
  .kind = GAAW_MODEL_MLP,
  .article = "an MLP",
  .input_name = "inputs",
  .target_name = "outputs",
  .output_name = "outputs",
  .load_batch = load_batch,
  .offset_batch = offset_batch,
  .batch_digests = batch_digests,
  .stream_rows = stream_rows,
  .fill_targets = fill_targets,
  .inference_layers = inference_layers,
  .read_outputs = read_outputs,
  .output_count = output_count,
  .array_shapes = array_shapes,
  .flops = seq_flops,
};
