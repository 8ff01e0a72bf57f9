/* Frames: one microbatch in flight (its batch on the device, every layer's input,
 * what every layer saved, the weight gradients a split backward deferred). Not
 * collective. */
#include <stdlib.h>
#include <string.h>

#include "parallel/model_impl.h"

gaaw_moe_record *gaaw_moe_records_new(gaaw_model_t m)
{
  size_t n = (size_t)m->moe_layers, E = (size_t)m->gpt.experts;
  gaaw_moe_record *r = calloc(1, n * sizeof *r + n * E * sizeof(int64_t)); /* the records, then their counts */
  int64_t *counts = r ? (int64_t *)(r + n) : NULL;
  for (size_t i = 0; r && i < n; i++) r[i].counts = counts + i * E;
  return r;
}

gaaw_status_t gaaw_frame_init(gaaw_model_t m, gaaw_frame *f)
{
  gaaw_context_t ctx = m->ctx;
  memset(f, 0, sizeof *f);
  f->acts = calloc((size_t)m->nlayers + 1, sizeof *f->acts);
  f->saved = calloc((size_t)m->nlayers, sizeof *f->saved);
  f->deferred = calloc((size_t)m->nlayers, sizeof *f->deferred);
  if (m->moe_layers) f->moe = gaaw_moe_records_new(m);
  if (!f->acts || !f->saved || !f->deferred || (m->moe_layers && !f->moe)) {
    gaaw_frame_free(m, f);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the activation lists of a microbatch");
  }
  return GAAW_SUCCESS;
}

/* Frees the activations of the frame's forward. */
void gaaw_frame_drop_forward(gaaw_model_t m, gaaw_frame *f)
{
  if (!f->acts) return;
  for (int i = 0; i < m->nlayers; i++) gaaw_layer_release(m, f, &m->layers[i]);
  for (int i = 0; f->deferred && i < m->nlayers; i++) gaaw_layer_drop_deferred(m, f, &m->layers[i]);
  for (int i = 0; i <= m->nlayers; i++) gaaw_act_free(m, &f->acts[i]);
  f->have_forward = 0;
}

void gaaw_frame_free_batch(gaaw_model_t m, gaaw_frame *f)
{
  gaaw_tensor_t *ts[] = {&f->tokens, &f->targets, &f->positions, &f->inputs, &f->outputs, &f->weights};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) gaaw_act_free(m, ts[i]);
}

void gaaw_frame_free(gaaw_model_t m, gaaw_frame *f)
{
  if (f->saved) gaaw_frame_drop_forward(m, f);
  gaaw_frame_free_batch(m, f);
  free(f->acts);
  free(f->saved);
  free(f->deferred);
  free(f->moe);
  memset(f, 0, sizeof *f);
}
