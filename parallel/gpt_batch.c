/* A GPT's batches (its part of the model-kind table, gaaw_gpt_kind in gpt.c):
 * tokens and targets of (batch, seq) i32, the positions made here, a
 * microbatch's view, the digests a tp group agrees on, and predict's arrays.
 * Shapes: tokens, targets, positions (N = batch * seq) i32; logits (N, vocab). */
#include <stdlib.h>

#include "backends/agree.h"
#include "parallel/cp_split.h"
#include "parallel/gpt.h"

/* Checks every token and target of the microbatch (at cp > 1 every cp rank is given
 * the whole sequences and checks them all, so that they fail alike) and counts the
 * targets of the loss. */
static gaaw_status_t check_batch(gaaw_model_t m, const gaaw_batch_t *b, int first, int last, int64_t *counted)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  int64_t n = (int64_t)b->batch * b->seq;
  *counted = 0;
  for (int64_t i = 0; i < n; i++) {
    if (first && (b->tokens[i] < 0 || b->tokens[i] >= g->vocab))
      GAAW_FAIL(m->ctx, GAAW_ERR_INVALID_ARG, "token %lld is %d, outside the vocabulary 0..%d", (long long)i,
                b->tokens[i], g->vocab - 1);
    if (last && b->targets[i] >= g->vocab)
      GAAW_FAIL(m->ctx, GAAW_ERR_INVALID_ARG, "target %lld is %d, outside the vocabulary 0..%d", (long long)i,
                b->targets[i], g->vocab - 1);
    if (last) *counted += b->targets[i] >= 0;
  }
  return GAAW_SUCCESS;
}

/* This rank's rows (cp_split.h: piece-major) of host array a (batch, seq) i32 into
 * out, or their positions when a is NULL. */
static void pick_rows(const gaaw_frame *f, int seq, const int32_t *a, int32_t *out)
{
  int64_t len = f->seq / f->pieces, at = 0;
  for (int i = 0; i < f->pieces; i++)
    for (int b = 0; b < f->batch; b++)
      for (int64_t t = 0; t < len; t++, at++) {
        int64_t pos = f->piece_start[i] + t;
        out[at] = a ? a[(int64_t)b * seq + pos] : (int32_t)pos;
      }
}

gaaw_status_t gaaw_gpt_load_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b)
{
  gaaw_context_t ctx = m->ctx;
  const gaaw_gpt_config_t *g = &m->gpt;
  int first = gaaw_model_owns_layer(m, 0), last = gaaw_model_owns_layer(m, m->nlayers - 1), cp = m->cp_size;
  GAAW_CHECK(gaaw_batch_check_stage_arrays(m, b->tokens, b->targets));
  GAAW_ARG_CHECK(ctx, b->seq >= 1 && b->seq <= g->max_seq, "sequence length %d is not in 1..%d (max_seq)", b->seq,
                 g->max_seq);
  GAAW_ARG_CHECK(ctx, b->seq % (2 * cp) == 0 || cp == 1,
                 "at cp = %d the sequence length %d must divide by 2 x cp = %d (each rank holds 2 pieces)", cp, b->seq,
                 2 * cp);
  f->seq = b->seq / cp;
  f->pieces = gaaw_cp_pieces(cp);
  for (int i = 0; i < f->pieces; i++) f->piece_start[i] = gaaw_cp_piece_start(b->seq, cp, m->cp_rank, i);
  int64_t n = (int64_t)b->batch * f->seq;
  GAAW_ARG_CHECK(ctx, !g->sequence_parallel || n % m->tp_size == 0,
                 "with sequence parallelism batch x seq / cp = %lld tokens must divide by tp = %d", (long long)n,
                 m->tp_size);
  GAAW_ARG_CHECK(ctx, !m->moe_layers || n % m->tp_size == 0,
                 "with MoE MLPs batch x seq / cp = %lld tokens must divide by tp = %d (each tp rank routes its share)",
                 (long long)n, m->tp_size);
  int64_t counted = 0;
  GAAW_CHECK(check_batch(m, b, first, last, &counted));
  int32_t *rows = malloc((size_t)n * sizeof *rows);
  if (!rows) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld positions", (long long)n);
  /* only the first stage reads tokens (and positions), only the last targets */
  gaaw_status_t st = GAAW_SUCCESS;
  if (first) {
    pick_rows(f, b->seq, b->tokens, rows);
    st = gaaw_batch_upload(m, GAAW_I32, n, 0, rows, &f->tokens);
    pick_rows(f, b->seq, NULL, rows);
    if (st == GAAW_SUCCESS) st = gaaw_batch_upload(m, GAAW_I32, n, 0, rows, &f->positions);
  }
  if (st == GAAW_SUCCESS && last) {
    pick_rows(f, b->seq, b->targets, rows);
    st = gaaw_batch_upload(m, GAAW_I32, n, 0, rows, &f->targets);
  }
  free(rows);
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
