/* Pipeline stage layout: which contiguous range of the model's layer list each
 * virtual stage runs. The list is [lead layers][body layers][tail layers] (GPT:
 * embedding, blocks, head; MLP: linears, loss); the pp x v virtual stages each get
 * at least one body layer, the first also the lead and the last also the tail.
 * Virtual stage vs lives on pipeline rank vs % pp as its chunk vs / pp (Megatron-LM's
 * interleaved layout: chunk c of rank r is virtual stage c * pp + r). Pure C, no
 * communication: every rank plans the same layout from the same numbers. */
#ifndef GAAW_PARALLEL_STAGES_H
#define GAAW_PARALLEL_STAGES_H

#include "gaaw/context.h"

typedef struct {
  int pp, virtual_stages, count; /* count = pp * virtual_stages */
  int *lo, *hi;                  /* virtual stage vs runs layers [lo[vs], hi[vs]) */
} gaaw_stage_layout;

/* Plans the layout of nlayers layers (lead + body + tail) over pp x v virtual
 * stages. layout: "" for the balanced cut, which minimises the largest sum of cost[]
 * (one entry per layer, e.g. its FLOPs per token) over the virtual stages; or body
 * layers per virtual stage, first to last, separated by ',' or ':' ("3,3,2"), which must
 * name pp x v counts >= 1 summing to the body layers. Errors name the numbers.
 * Not collective. */
gaaw_status_t gaaw_stages_plan(gaaw_context_t ctx, int nlayers, int lead, int tail, const double *cost, int pp,
                               int v, const char *layout, gaaw_stage_layout *out);
/* Checks only the syntax and count of a pp_layout value (gaaw_init's early check). */
gaaw_status_t gaaw_stages_check_text(gaaw_context_t ctx, const char *layout, int pp, int v);
/* The virtual stage that runs layer i. */
int gaaw_stages_of_layer(const gaaw_stage_layout *l, int i);
void gaaw_stages_free(gaaw_stage_layout *l);

#endif
