/* gaaw models: a list of layers built from specs, whose parameters are registered
 * with their global shape, name and tensor-parallel split, initialised by a
 * counter-based RNG (the same logical weights under every layout), and stored as
 * views into one flat buffer per (model, dtype) with a matching flat gradient
 * buffer. Ready builders: a GPT (GPT-2 architecture, DESIGN.md section 6a) and an
 * MLP for surrogate models.
 *
 * Tensor parallelism follows Megatron-LM: column-parallel then row-parallel linears,
 * heads split over the tp group, vocabulary split over the tp group (padded to a
 * multiple of tp; padding never enters the loss), and optionally sequence
 * parallelism (activations outside attention and MLP split over the tp group by
 * token). */
#ifndef GAAW_MODEL_H
#define GAAW_MODEL_H

#include "gaaw/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gaaw_model_s *gaaw_model_t;

typedef enum { GAAW_NORM_LAYERNORM = 0, GAAW_NORM_RMSNORM = 1 } gaaw_norm_t;
typedef enum { GAAW_ACT_GELU = 0, GAAW_ACT_SWIGLU = 1, GAAW_ACT_NONE = 2 } gaaw_activation_t;

/* The GPT. Sizes must satisfy: heads % tp == 0, dim % heads == 0, ffn % tp == 0. */
typedef struct {
  int vocab;             /* token ids are 0..vocab-1 (256: bytes) */
  int max_seq;           /* positions 0..max_seq-1 */
  int layers, heads, dim;
  int ffn;               /* MLP hidden size; 0 = 4 * dim */
  gaaw_norm_t norm;
  gaaw_activation_t activation; /* GELU (tanh) or SwiGLU */
  int tied_embeddings;   /* LM head = token embedding (default 1) */
  int sequence_parallel; /* default 0 */
  uint64_t seed;         /* initialisation */
  gaaw_dtype_t dtype;    /* compute dtype of parameters and activations: f32 (default),
                            bf16 or f16 (statistics stay f32) */
} gaaw_gpt_config_t;

/* GPT-2 small-ish defaults: vocab 256, max_seq 128, 4 layers, 4 heads, dim 256,
 * ffn 4*dim, layernorm, GELU, tied, no sequence parallelism, seed 1337, f32. */
void gaaw_gpt_config_default(gaaw_gpt_config_t *cfg);

/* Builds the GPT on this rank's share of the tp group. Collective over world: every
 * field of cfg (dtype and seed included) must be the same on every rank, since dp
 * replicas must be the same model; a difference is GAAW_ERR_INVALID_ARG on every
 * rank naming the field and each rank's value, and a config that one rank finds
 * wrong fails every rank with that rank's message. *model is NULL after a failure. */
gaaw_status_t gaaw_model_create_gpt(gaaw_context_t ctx, const gaaw_gpt_config_t *cfg, gaaw_model_t *model);

/* An MLP for surrogates: sizes[0] inputs, hidden layers sizes[1..n-2] with the
 * activation, sizes[n-1] outputs, mean-squared-error loss. Hidden sizes must be
 * divisible by tp (column-parallel then row-parallel pairs). */
#define GAAW_MLP_MAX_LAYERS 16
typedef struct {
  int nsizes;            /* 2..GAAW_MLP_MAX_LAYERS+1 */
  int sizes[GAAW_MLP_MAX_LAYERS + 1];
  gaaw_activation_t activation;
  uint64_t seed;
  gaaw_dtype_t dtype;    /* compute dtype (GAAW_F32 = 0 by default) */
} gaaw_mlp_config_t;
/* Collective over world, checked like gaaw_model_create_gpt. */
gaaw_status_t gaaw_model_create_mlp(gaaw_context_t ctx, const gaaw_mlp_config_t *cfg, gaaw_model_t *model);

/* Frees the model; NULL is a no-op. Not collective. */
gaaw_status_t gaaw_model_destroy(gaaw_model_t *model);

/* One microbatch, in host memory, the same on every rank of the tp group.
 * GPT: tokens and targets, (batch, seq) i32; a negative target is ignored.
 * MLP: inputs (batch, sizes[0]) and outputs (batch, sizes[n-1]) f32. */
typedef struct {
  int batch, seq;
  const int32_t *tokens, *targets;
  const float *inputs, *outputs;
} gaaw_batch_t;

/* The model's work group: the tp group, or world once an optimizer is attached
 * (its gradient reductions, and at ZeRO stage 3 its gathers, span dp). The passes
 * below are collective over it. Each checks its arguments locally and then the
 * ranks agree before anything runs: a bad batch on one rank only (NULL, batch 0, a
 * token or target outside the vocabulary) fails every rank of the work group at
 * once with that rank's message, batch and seq must be the same on every rank of
 * it, and the ranks of a tp group must be given the same data (compared by a
 * hash). Such a failure leaves the model as it was: the next good call gives the
 * result it would have given without it. A failure after the agreement (inside a
 * layer) aborts the context (gaaw/comm.h), since the peers may be inside a
 * collective this rank will not join. */

/* Forward pass and loss (mean over counted tokens or output elements), keeping
 * the activations backward needs. Collective over the work group. */
gaaw_status_t gaaw_model_forward(gaaw_model_t model, const gaaw_batch_t *batch, float *loss);
/* Backward pass of the last forward: every parameter gradient += d loss / d p
 * (accumulates over microbatches). Collective over the work group; GAAW_ERR_STATE
 * on every rank when a rank has no forward to go back through, or when the
 * optimizer's accumulation is already complete. */
gaaw_status_t gaaw_model_backward(gaaw_model_t model);
/* Both, as one training step's model part. Collective over the work group. */
gaaw_status_t gaaw_model_forward_backward(gaaw_model_t model, const gaaw_batch_t *batch, float *loss);
/* Inference: forward without keeping activations for backward and without
 * targets, writing the model's outputs into the caller's array (f32): an MLP's
 * (batch, sizes[n-1]), a GPT's logits (batch * seq, vocab), gathered over the tp
 * group (every rank gets all of them). GPT batches need only tokens, MLP batches
 * only inputs (targets and outputs, if given, are ignored). Gradients, the
 * optimizer and a forward held for backward are left as they are. Collective over
 * the work group, with the same agreement as gaaw_model_forward. */
gaaw_status_t gaaw_model_predict(gaaw_model_t model, const gaaw_batch_t *batch, float *outputs);
/* For callers whose arrays know their extents (the Fortran module, other bindings):
 * checks the shapes of a pass's host arrays against the model before the pass, and
 * the ranks of the work group agree, so that a wrong array on one rank is
 * GAAW_ERR_INVALID_ARG on every rank, naming the array and both shapes, instead of
 * a read past its end. Shapes are (samples, features) as C sees them (row-major):
 * MLP inputs (batch, sizes[0]) and outputs (batch, sizes[n-1]); GPT tokens
 * (batch, seq) and targets (batch, seq), or with predict != 0 logits
 * (batch * seq, vocab). Collective over the work group. */
gaaw_status_t gaaw_model_check_arrays(gaaw_model_t model, int predict, const int64_t inputs[2],
                                      const int64_t outputs[2]);
/* Sets every gradient to zero (with an optimizer, starting its accumulation over).
 * Not collective, except with an optimizer at dp > 1 between a step's last
 * backward and gaaw_optimizer_step: then it first completes the gradient
 * reductions that backward started, collectively over the dp group. */
gaaw_status_t gaaw_model_zero_grad(gaaw_model_t model);

/* The parameter registry: count, and each parameter's name and global shape
 * (ndim 1 or 2). Not collective. */
gaaw_status_t gaaw_model_param_count(gaaw_model_t model, int *count);
gaaw_status_t gaaw_model_param_info(gaaw_model_t model, int index, const char **name, int *ndim,
                                    int64_t shape[2]);
/* A whole parameter (or its gradient) by name, in its global layout, f32,
 * gathered over the tp group into values (every rank gets all of it).
 * Collective over the work group (every rank names the same parameter). With an optimizer at dp > 1, reading a gradient
 * between a step's last backward and gaaw_optimizer_step first completes the
 * reductions backward started (collective over the dp group too): at ZeRO stage 0
 * the gradient is then the sum over dp, at stage 1 only this rank's shard of it is
 * reduced; at stages 2 and 3 gradients are sharded and cannot be read. */
gaaw_status_t gaaw_model_get_param(gaaw_model_t model, const char *name, float *values);
gaaw_status_t gaaw_model_get_grad(gaaw_model_t model, const char *name, float *values);
/* Sets a whole parameter from its global layout; each rank keeps its slice.
 * Not collective (every rank must pass the same values). */
gaaw_status_t gaaw_model_set_param(gaaw_model_t model, const char *name, const float *values);
/* All parameters as one vector of global_count floats (gaaw_model_num_params):
 * each parameter in its global layout, in registry order (gaaw_model_param_info),
 * one after the other. The same vector under every layout, so a model trained on
 * some ranks can be handed to others (a broadcast over the simulation's
 * communicator, then gaaw_model_set_params on a model of the same config built
 * there with its own gaaw_init). get is collective as gaaw_model_get_param; set is
 * not collective (every rank must pass the same values). */
gaaw_status_t gaaw_model_get_params(gaaw_model_t model, float *values);
gaaw_status_t gaaw_model_set_params(gaaw_model_t model, const float *values);
/* The logits of the last GPT forward, (batch * seq, vocab) gathered over the tp
 * group; they exist from gaaw_model_forward until gaaw_model_backward
 * (GAAW_ERR_STATE otherwise). Collective over the tp group. */
gaaw_status_t gaaw_model_get_logits(gaaw_model_t model, float *logits);
/* Number of parameters of the whole (unsplit) model, and of this rank's slices. */
gaaw_status_t gaaw_model_num_params(gaaw_model_t model, int64_t *global_count, int64_t *local_count);

/* Per-layer timing. Every forward and backward adds the wall time each layer took
 * on this rank (its kernels, its tp collectives, its allocations) to that layer's
 * totals, from model creation or the last gaaw_model_reset_times. Backends that
 * run asynchronously report the time to issue the work. A GPT has layers
 * "embedding", one "transformer block" per block, then "lm head and
 * cross-entropy"; an MLP one "linear" per linear and "mean squared error".
 * Not collective. */
gaaw_status_t gaaw_model_layer_count(gaaw_model_t model, int *count);
/* Layer index's kind (a static string; may be NULL) and accumulated forward and
 * backward seconds (either may be NULL). index must be in 0..count-1. */
gaaw_status_t gaaw_model_layer_times(gaaw_model_t model, int index, const char **kind, double *forward_seconds,
                                     double *backward_seconds);
/* Sets every layer's totals back to zero. */
gaaw_status_t gaaw_model_reset_times(gaaw_model_t model);

#ifdef __cplusplus
}
#endif
#endif
