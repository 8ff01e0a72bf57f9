/* Sequential models (gaaw_model_create) inside the library: their layer kinds and
 * the helpers the MLP shortcut (parallel/mlp.c) shares. */
#ifndef GAAW_PARALLEL_SEQUENTIAL_H
#define GAAW_PARALLEL_SEQUENTIAL_H

#include "parallel/model_impl.h"

/* The model-kind table of sequential models and MLPs (seq_batch.c). */
extern const gaaw_model_kind_ops gaaw_seq_kind;

/* Layer kinds of parallel/seq_layers.c (the linear, gaaw_linear_ops, is in
 * seq_linear.c). */
extern const gaaw_layer_ops gaaw_activation_ops, gaaw_residual_ops, gaaw_residual_add_ops;
extern const gaaw_layer_ops gaaw_norm_ops[2]; /* by gaaw_norm_t */

/* Layer l's input: the batch's inputs for the first layer (acts[0] stays empty). */
const gaaw_tensor_t *gaaw_seq_input(const gaaw_frame *f, const gaaw_layer *l);

/* y = act(u) (SwiGLU halves the width); du += dy act'(u). */
gaaw_status_t gaaw_seq_activate(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *u, gaaw_tensor_t *y);
gaaw_status_t gaaw_seq_activate_backward(gaaw_context_t ctx, gaaw_activation_t act, const gaaw_tensor_t *dy,
                                         const gaaw_tensor_t *u, gaaw_tensor_t *du);

/* Copies specs into m (m->specs, m->nspecs, m->seq_inputs) and checks them. Local. */
gaaw_status_t gaaw_seq_adopt_specs(gaaw_model_t m, int inputs, const gaaw_layer_spec_t *specs, int nspecs);
/* Checks m->specs (m->nspecs of them, on m->seq_inputs inputs) against the rules of
 * gaaw/model.h for tp = m->tp_size, naming the first bad spec, and sets
 * m->seq_outputs. Local. */
gaaw_status_t gaaw_seq_check(gaaw_model_t m);
/* The layers and parameters of m->specs (checked), initialised from seed. Local. */
gaaw_status_t gaaw_seq_build(gaaw_model_t m, uint64_t seed);

#endif
