/* A GPT's batches (its part of the model-kind table, gaaw_gpt_kind in gpt.c):
 * tokens and targets of (batch, seq) i32, the positions made here, a
 * microbatch's view, the digests a tp group agrees on, and predict's arrays.
 * Shapes: tokens, targets, positions (N = batch * seq) i32; logits (N, vocab). */
#include <stdlib.h>

#include "backends/agree.h"
#include "parallel/gpt.h"

gaaw_status_t gaaw_gpt_load_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_gpt_config_t *g = &m->gpt;
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  GAAW_CHECK(gaaw_batch_check_stage_arrays(m, b->tokens, b->targets));
  GAAW_ARG_CHECK(ctx, b->seq >= 1 && b->seq <= g->max_seq, "sequence length %d is not in 1..%d (max_seq)", b->seq,
                 g->max_seq);
  int64_t n = (int64_t)b->batch * b->seq;
  GAAW_ARG_CHECK(ctx, !g->sequence_parallel || n % m->tp_size == 0,
                 "with sequence parallelism batch x seq = %lld tokens must divide by tp = %d", (long long)n,
                 m->tp_size);
  int32_t *pos = malloc((size_t)n * sizeof *pos);
  if (!pos) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld positions", (long long)n);
  int64_t counted = 0;
  gaaw_status_t st = GAAW_SUCCESS;
  for (int64_t i = 0; i < n && st == GAAW_SUCCESS; i++) {
    pos[i] = (int32_t)(i % b->seq);
    if (first && (b->tokens[i] < 0 || b->tokens[i] >= g->vocab))
      st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                            "token %lld is %d, outside the vocabulary 0..%d", (long long)i, b->tokens[i],
                            g->vocab - 1);
    else if (last && b->targets[i] >= g->vocab)
      st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                            "target %lld is %d, outside the vocabulary 0..%d", (long long)i, b->targets[i],
                            g->vocab - 1);
    if (last) counted += b->targets[i] >= 0;
  }
  /* only the first stage reads tokens (and positions), only the last targets */
  if (st == GAAW_SUCCESS && first) st = gaaw_batch_upload(m, GAAW_I32, n, 0, b->tokens, &f->tokens);
  if (st == GAAW_SUCCESS && last) st = gaaw_batch_upload(m, GAAW_I32, n, 0, b->targets, &f->targets);
  if (st == GAAW_SUCCESS && first) st = gaaw_batch_upload(m, GAAW_I32, n, 0, pos, &f->positions);
  free(pos);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  f->rows = n;
  f->counted = counted;
  return GAAW_SUCCESS;
}

void gaaw_gpt_offset_batch(gaaw_model_t m, const gaaw_batch_t *b, size_t rows, gaaw_batch_t *one)
{
  (void)m;
  size_t at = rows * (size_t)b->seq;
  if (b->tokens) one->tokens = b->tokens + at;
  if (b->targets) one->targets = b->targets + at;
}

int gaaw_gpt_batch_digests(gaaw_model_t m, const gaaw_batch_t *b, size_t rows, gaaw_field *out)
{
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1);
  size_t bytes = rows * (size_t)b->seq * sizeof(int32_t);
  out[0] = GAAW_FIELD_DIGEST("tokens", first ? gaaw_digest(b->tokens, bytes) : 0);
  out[1] = GAAW_FIELD_DIGEST("targets", last ? gaaw_digest(b->targets, bytes) : 0);
  return 2;
}

gaaw_status_t gaaw_gpt_fill_targets(gaaw_model_t m, const gaaw_batch_t *b, gaaw_batch_t *full, void **filler)
{
  gaaw_context_t ctx = m->ctx;
  if (b->targets) return GAAW_SUCCESS;
  size_t n = (size_t)b->batch * (size_t)b->seq;
  int32_t *p = calloc(n ? n : 1, 4);
  if (!p) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %zu placeholder values", n);
  for (size_t i = 0; i < n; i++) p[i] = -1; /* ignored by the loss */
  full->targets = p;
  *filler = p;
  return GAAW_SUCCESS;
}

int64_t gaaw_gpt_output_count(gaaw_model_t m, const gaaw_batch_t *b)
{
  return (int64_t)b->batch * b->seq * m->gpt.vocab;
}

void gaaw_gpt_array_shapes(gaaw_model_t m, int predict, int64_t batch, int64_t seq, int64_t in[2], int64_t out[2])
{
  in[0] = batch, in[1] = seq;
  if (predict)
    out[0] = batch * seq, out[1] = m->gpt.vocab;
  else
    out[0] = batch, out[1] = seq;
}
