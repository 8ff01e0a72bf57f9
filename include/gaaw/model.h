/* gaaw models: a list of layers whose parameters are registered with their global
 * shape, name and tensor-parallel split, initialised by a counter-based RNG (the
 * same logical weights under every layout), and stored as views into one flat
 * buffer per model chunk, in the model's single compute dtype, with a matching flat
 * gradient buffer. A rank has as many chunks as option virtual_stages says (1 unless
 * the interleaved schedule gives it several), and with pp > 1 a chunk holds only
 * the parameters of its own pipeline stage's layers. Ready builders: a GPT (GPT-2
 * architecture, DESIGN.md section 6a), a sequential model of layer specs for
 * surrogates, and its shortcut, an MLP (also named by a spec string).
 *
 * Tensor parallelism follows Megatron-LM: column-parallel then row-parallel linears,
 * heads split over the tp group, vocabulary split over the tp group (padded to a
 * multiple of tp; padding never enters the loss), and optionally sequence
 * parallelism (activations outside attention and MLP split over the tp group by
 * token). */
#ifndef GAAW_MODEL_H
#define GAAW_MODEL_H

#include "gaaw/comm.h"
#include "gaaw/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gaaw_model_s *gaaw_model_t;

typedef enum { GAAW_NORM_LAYERNORM = 0, GAAW_NORM_RMSNORM = 1 } gaaw_norm_t;
/* gaaw_activation_t: see gaaw/kernels.h (GELU, SwiGLU, none, ReLU, tanh, SiLU). */

/* How a GPT knows where a token is: a learned table of max_seq positions added to
 * the embedding (GPT-2, "wpe.weight"), or rotary embeddings applied to q and k
 * in every attention (RoPE, LLaMA; Hugging Face's rotate-half convention, inverse
 * frequencies theta^(-2i/head_dim); no parameters). */
typedef enum { GAAW_POSITION_LEARNED = 0, GAAW_POSITION_ROPE = 1 } gaaw_position_t;

/* How an MoE router scores experts from its logits: each row's softmax, or each
 * logit's sigmoid (DeepSeek-V3). */
typedef enum { GAAW_ROUTER_SOFTMAX = 0, GAAW_ROUTER_SIGMOID = 1 } gaaw_router_score_t;
/* Which assignments an MoE layer at capacity drops (Megatron-Core's
 * moe_token_drop_policy), first choices always placed before second ones: the
 * lowest routing weights first, or the latest tokens first. */
typedef enum { GAAW_DROP_PROBS = 0, GAAW_DROP_POSITION = 1 } gaaw_drop_policy_t;

/* The GPT: GPT-2 by default (gaaw_gpt_config_default), a LLaMA-class decoder with
 * gaaw_gpt_config_llama. Sizes must satisfy: heads % kv_heads == 0; heads % tp == 0;
 * kv_heads % tp == 0 or tp % kv_heads == 0 (then each key/value head is replicated
 * on the tp / kv_heads ranks whose query heads use it); ffn % tp == 0; head_dim
 * even with RoPE; and, with head_dim 0, dim % heads == 0. Any vocabulary at any tp
 * (padded internally to a multiple of tp; the padding never shows). A zeroed field
 * added after dtype means its default, so a config filled field by field keeps
 * working. */
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
  int kv_heads;          /* key/value heads (grouped-query attention, 1: multi-query);
                            0 = heads (multi-head) */
  int head_dim;          /* width of one head; 0 = dim / heads */
  gaaw_position_t position; /* learned (default) or RoPE */
  double rope_theta;     /* RoPE's base; 0 = 10000 */
  int no_bias;           /* 1: linears without biases (LLaMA); 0: with (GPT-2, default) */
  float norm_eps;        /* the norms' epsilon; 0 = 1e-5 */
  /* Mixture of experts (doc/moe.md): with experts > 0, the MLP of blocks 0,
   * moe_every, 2 moe_every, ... is `experts` SwiGLU experts of width moe_ffn, of
   * which a router (a linear to `experts` logits, f32) picks top_k per token. */
  int experts;           /* 0: dense MLPs only (default) */
  int top_k;             /* experts per token, 1..experts; 0 = 2 (or 1 with one expert) */
  int moe_every;         /* 0 = 1: every block */
  int moe_ffn;           /* an expert's hidden size; 0 = ffn */
  gaaw_router_score_t router_score; /* softmax (default) or sigmoid (DeepSeek-V3) */
  int moe_raw_weights;   /* 1: the chosen scores weigh the experts as they are; 0: divided by
                            their sum (Mixtral; default) */
  float aux_loss_coef;   /* load balancing, coef x experts x sum_i f_i P_i per MoE layer;
                            gaaw_gpt_config_default: 0.01 */
  float z_loss_coef;     /* router z-loss, coef x mean lse^2 per MoE layer; default 0 */
  float capacity_factor; /* 0: dropless (default); > 0: an expert takes at most
                            ceil(top_k x T x capacity_factor / experts) of a token group's T
                            tokens' assignments, the rest pass through the residual */
  gaaw_drop_policy_t drop_policy; /* which go over capacity: by weight (default) or position */
  int shared_ffn;        /* > 0: a shared SwiGLU expert of this width that every token passes
                            through besides its top_k (DeepSeek-V3, Qwen2-MoE); 0: none */
  int shared_gate;       /* 1: the shared expert's output times sigmoid(h . g) per token, g a
                            learned (dim) vector (Qwen2-MoE); 0: not scaled (DeepSeek-V3) */
} gaaw_gpt_config_t;

/* GPT-2 small-ish defaults: vocab 256, max_seq 128, 4 layers, 4 heads, dim 256,
 * ffn 4*dim, layernorm, GELU, tied, no sequence parallelism, seed 1337, f32,
 * multi-head, learned positions, biases, eps 1e-5; dense (experts 0; with experts
 * set: top-2, softmax, renormalised, aux_loss_coef 0.01, no z-loss). */
void gaaw_gpt_config_default(gaaw_gpt_config_t *cfg);
/* The LLaMA architecture on the sizes cfg already holds (call it after setting
 * them, or after gaaw_gpt_config_default for its sizes): RoPE (theta 10000 unless
 * set), RMSNorm, SwiGLU, no biases, untied embeddings, and, when ffn is 0, LLaMA's
 * hidden size 8/3 x dim rounded up to a multiple of 256 (LLaMA's multiple_of), or
 * of 32 below dim 1024, where 256 would inflate it.
 * kv_heads, head_dim and norm_eps are left as they are. */
void gaaw_gpt_config_llama(gaaw_gpt_config_t *cfg);

/* Builds the GPT on this rank's share of the tp group. Collective over world: every
 * field of cfg (dtype and seed included) must be the same on every rank, since dp
 * replicas must be the same model; a difference is GAAW_ERR_INVALID_ARG on every
 * rank naming the field and each rank's value, and a config that one rank finds
 * wrong fails every rank with that rank's message. *model is NULL after a failure. */
gaaw_status_t gaaw_model_create_gpt(gaaw_context_t ctx, const gaaw_gpt_config_t *cfg, gaaw_model_t *model);

/* An MLP for surrogates, the shortcut for the sequential model (gaaw_model_create)
 * of linear(sizes[1]), activation, ..., linear(sizes[n-1]), loss: sizes[0] inputs,
 * hidden layers sizes[1..n-2] with the
 * activation (any gaaw_activation_t), sizes[n-1] outputs, and a regression loss
 * (gaaw_loss_t of gaaw/kernels.h: MSE by default, L1 or Huber), the weighted mean
 * over the batch's output elements (gaaw_batch_t.weights).
 * Hidden sizes must be divisible by tp (column-parallel then row-parallel pairs). */
#define GAAW_MLP_MAX_LAYERS 16
typedef struct {
  int nsizes;            /* 2..GAAW_MLP_MAX_LAYERS+1 */
  int sizes[GAAW_MLP_MAX_LAYERS + 1];
  gaaw_activation_t activation;
  uint64_t seed;
  gaaw_dtype_t dtype;    /* compute dtype (GAAW_F32 = 0 by default) */
  gaaw_loss_t loss;      /* GAAW_LOSS_MSE = 0 by default */
  float huber_delta;     /* Huber's delta, > 0; 0 = 1 (the default); other losses ignore it */
} gaaw_mlp_config_t;
/* Collective over world, checked like gaaw_model_create_gpt. */
gaaw_status_t gaaw_model_create_mlp(gaaw_context_t ctx, const gaaw_mlp_config_t *cfg, gaaw_model_t *model);

/* A sequential model, built from an array of layer specs applied in order to
 * (batch, inputs) f32 inputs and ending in a regression loss against the batch's
 * outputs (batch, width of the last layer):
 *   linear      size = output features, with a bias ("fc.I.weight" (size, in) and
 *               "fc.I.bias", I counting linears from 0)
 *   activation  activation = any gaaw_activation_t; SwiGLU halves the width (after
 *               a linear: that linear's weight is (2 size, in), its output size)
 *   layernorm   over the features, with "norm.I.weight" and "norm.I.bias" (eps 1e-5)
 *   rmsnorm     the same without a bias
 *   residual    size = the number of specs after it that form a group (at least 1,
 *               no loss inside, may nest) whose output, of the group's input width,
 *               is added to its input
 *   loss        loss = a gaaw_loss_t, huber_delta (0 = 1): the last spec, once
 * Tensor parallelism: linears pair up in order: a linear directly followed by a
 * linear (an activation between them is fused into the first) is column-parallel
 * and the second row-parallel, with no communication but the row-parallel
 * all-reduce; a linear left unpaired (followed by a norm, a residual boundary, a
 * standalone activation or the loss) is column-parallel and gathers its output.
 * Column-parallel output sizes must be divisible by tp; everything else
 * (activations after a gather, norms, residual adds, the loss) is replicated, whole
 * on every rank of the tp group. */
typedef enum {
  GAAW_SPEC_LINEAR = 0,
  GAAW_SPEC_ACTIVATION = 1,
  GAAW_SPEC_LAYERNORM = 2,
  GAAW_SPEC_RMSNORM = 3,
  GAAW_SPEC_RESIDUAL = 4,
  GAAW_SPEC_LOSS = 5
} gaaw_spec_kind_t;
#define GAAW_SPEC_KIND_COUNT 6
typedef struct {
  gaaw_spec_kind_t kind;
  int size;                     /* linear: outputs; residual: specs in the group */
  gaaw_activation_t activation; /* activation */
  gaaw_loss_t loss;             /* loss */
  float huber_delta;            /* loss: Huber's delta, 0 = 1 */
} gaaw_layer_spec_t;
#define GAAW_MODEL_MAX_SPECS 64

/* Builds the sequential model of specs[0..nspecs) on (batch, inputs) inputs;
 * parameters initialised from seed (weights normal(0, 1/sqrt(in)), biases 0, norm
 * weights 1), compute dtype dtype. Collective over world, checked like
 * gaaw_model_create_gpt: every argument must be the same on every rank (the specs
 * are compared by a digest), a spec that one rank finds wrong (its index and word
 * named) fails every rank. *model is NULL after a failure. */
gaaw_status_t gaaw_model_create(gaaw_context_t ctx, int inputs, const gaaw_layer_spec_t *specs, int nspecs,
                                uint64_t seed, gaaw_dtype_t dtype, gaaw_model_t *model);

/* A model named by a spec string, as job scripts and config files write it:
 *   "mlp sizes=6,64,64,1 activation=gelu loss=mse"
 * the kind (mlp), then key=value words separated by spaces: sizes (required,
 * comma-separated, 2..GAAW_MLP_MAX_LAYERS+1 integers >= 1), activation (gelu,
 * swiglu, none, relu, tanh, silu; default gelu), loss (mse, l1, huber; default
 * mse), huber_delta (> 0, default 1), seed (0..2^63-1, default 1), dtype (f32,
 * bf16, f16; default f32); each key at most once. gaaw_mlp_config_parse fills cfg
 * (left unchanged on failure), GAAW_ERR_INVALID_ARG naming the bad word, its
 * position and what was expected; ctx may be NULL (the message is then
 * gaaw_last_error(NULL)); not collective. gaaw_model_create_from_spec parses and
 * builds, collective over world like gaaw_model_create_mlp: the spec must be the
 * same text on every rank, and one rank's parse error fails all of them. */
gaaw_status_t gaaw_mlp_config_parse(gaaw_context_t ctx, const char *spec, gaaw_mlp_config_t *cfg);
gaaw_status_t gaaw_model_create_from_spec(gaaw_context_t ctx, const char *spec, gaaw_model_t *model);

/* Frees the model; NULL is a no-op. Not collective. */
gaaw_status_t gaaw_model_destroy(gaaw_model_t *model);

/* A step's data, in host memory, the same on every rank of the tp group: one
 * microbatch, or `microbatches` of them consecutive in the arrays (each `batch`
 * rows; gaaw_model_forward_backward runs them through the pipeline schedule, or at
 * pp 1 accumulates over them).
 * GPT: tokens and targets, (microbatches x batch, seq) i32; a negative target is
 * ignored. MLP: inputs (microbatches x batch, sizes[0]) and outputs
 * (microbatches x batch, sizes[n-1]) f32, and optionally weights (the outputs'
 * shape) f32, finite and >= 0 (a mask: 0 leaves an element out), NULL = all 1: the
 * loss is sum(w l) / sum(w) over a microbatch's elements, so a microbatch's weights
 * must not all be 0. GPT batches and gaaw_model_predict ignore weights. With
 * pp > 1 only the first pipeline stage reads tokens or inputs and only the last
 * reads targets, outputs or weights: the others may pass NULL.
 * Uneven rows (doc/uneven.md): `batch` may differ between data-parallel replicas
 * (devices of unequal speed, shares from gaaw_plan_shares); it must be the same on
 * every rank of one replica (its tp x pp ranks), and seq and microbatches the same
 * everywhere. With an optimizer the gradient is then the mean over the global
 * batch (each replica's weighed by dp x batch / the sum of batch over dp, learned
 * in the batch agreement's own round; exactly 1 with even rows, so even batches
 * give the same bits as ever), equal to the same global batch split evenly; *loss
 * stays this replica's own mean (the global one is sum(batch x loss) / sum(batch)
 * over dp). */
typedef struct {
  int batch, seq;
  const int32_t *tokens, *targets;
  const float *inputs, *outputs;
  int microbatches;      /* 0: option microbatches (default 1); forward and predict take 1 */
  const float *weights;
} gaaw_batch_t;

/* The model's work group: the tp group, or world once an optimizer is attached
 * (its gradient reductions, and at ZeRO stage 3 its gathers, span dp) or with
 * pp > 1 (the stages exchange activations). The passes
 * below are collective over it. Each checks its arguments locally and then the
 * ranks agree before anything runs: a bad batch on one rank only (NULL, batch 0, a
 * token or target outside the vocabulary) fails every rank of the work group at
 * once with that rank's message, seq (and microbatches) must be the same on every
 * rank of it and batch on every rank of a replica (it may differ between dp
 * replicas, see gaaw_batch_t), and the ranks of a tp group must be given the same
 * data (compared by a hash). Such a failure leaves the model as it was: the next good call gives the
 * result it would have given without it. A failure after the agreement (inside a
 * layer) aborts the context (gaaw/comm.h), since the peers may be inside a
 * collective this rank will not join. */

/* Forward pass and loss (mean over counted tokens or output elements), keeping
 * the activations backward needs. Collective over the work group. With pp > 1 the
 * microbatch goes through the stages for its loss (on every rank) and nothing is
 * kept: a pipeline's backward runs in gaaw_model_forward_backward. */
gaaw_status_t gaaw_model_forward(gaaw_model_t model, const gaaw_batch_t *batch, float *loss);
/* Backward pass of the last forward: every parameter gradient += d loss / d p
 * (accumulates over microbatches). Collective over the work group; GAAW_ERR_STATE
 * on every rank when a rank has no forward to go back through (always with
 * pp > 1), or when the optimizer's accumulation is already complete. */
gaaw_status_t gaaw_model_backward(gaaw_model_t model);
/* Both, as one training step's model part, over the batch's microbatches: the
 * pipeline schedule (option pp_schedule) on this rank's stages, activations and
 * their gradients sent between stages under the comm_timeout deadline (a dead or
 * missing peer is GAAW_ERR_TIMEOUT naming the peer, the action and the
 * microbatch); at pp 1 one microbatch after the other. Gradients accumulate (each
 * microbatch is one of the optimizer's `accumulation` backward passes); *loss is
 * the mean of the microbatches' losses, on every rank. microbatches must suit the
 * schedule (interleaved: a multiple of pp), or every rank fails naming the numbers.
 * At cp > 1 (doc/context-parallel.md) every rank of a cp group is given the same
 * whole sequences, seq divisible by 2 x cp, and takes its pieces; *loss is the whole
 * sequences' (summed over cp); a backward needs an optimizer, which sums the cp
 * ranks' gradients (GAAW_ERR_UNSUPPORTED without one).
 * Collective over the work group (world when pp > 1 or cp > 1). */
gaaw_status_t gaaw_model_forward_backward(gaaw_model_t model, const gaaw_batch_t *batch, float *loss);
/* Inference: forward without keeping activations for backward and without
 * targets, writing the model's outputs into the caller's array (f32): an MLP's
 * (batch, sizes[n-1]), a GPT's logits (batch * seq, vocab), gathered over the tp
 * group (every rank gets all of them). GPT batches need only tokens, MLP batches
 * only inputs (targets and outputs, if given, are ignored). Gradients, the
 * optimizer and a forward held for backward are left as they are.
 * GAAW_ERR_UNSUPPORTED at cp > 1. Collective over
 * the work group, with the same agreement as gaaw_model_forward. */
gaaw_status_t gaaw_model_predict(gaaw_model_t model, const gaaw_batch_t *batch, float *outputs);
/* A loss the caller computes (a physics residual, for example), for sequential
 * models and MLPs, in two collective calls:
 *   gaaw_model_forward_outputs(model, batch, outputs)   every layer but the loss,
 *       keeping what backward needs; batch needs only inputs (outputs and weights
 *       are ignored); writes the model's outputs y, (batch, outputs) f32, whole on
 *       every rank of the tp group.
 *   (the caller computes its loss L(y) and d_outputs = dL/dy, (batch, outputs) f32)
 *   gaaw_model_backward_from(model, d_outputs)           backward of that forward
 *       from d_outputs: every parameter gradient += d L / d p, accumulating like
 *       gaaw_model_backward (and scaled by the loss scale as its loss would be).
 * Both are collective over the work group with the agreement of gaaw_model_forward:
 * d_outputs must be finite and the same on every rank of the tp group (compared by
 * a digest). gaaw_model_backward after gaaw_model_forward_outputs is GAAW_ERR_STATE
 * (there is no loss); gaaw_model_backward_from after gaaw_model_forward uses the
 * caller's gradient instead of the loss's. GAAW_ERR_INVALID_ARG on every rank for a
 * GPT. */
gaaw_status_t gaaw_model_forward_outputs(gaaw_model_t model, const gaaw_batch_t *batch, float *outputs);
gaaw_status_t gaaw_model_backward_from(gaaw_model_t model, const float *d_outputs);
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
/* Normalisation of a sequential model's (or MLP's) inputs and outputs, so that a
 * code passes physical units. gaaw_model_normalization_update adds the samples of
 * batch (inputs and outputs, (batch, features) f32, finite) of every dp rank to the
 * model's running statistics, per feature: count, mean and M2, combined exactly in
 * f64 (the result is that of the serial computation over all ranks' samples, up to
 * rounding, and the same bits on every rank). Collective over world: the ranks of a
 * tp group give the same samples, dp ranks their own (any batch sizes); one rank's
 * bad batch fails all. Once statistics exist, every pass uses them: a batch enters
 * as (v - mean) / std (inputs and outputs; the loss is in these units),
 * gaaw_model_predict and gaaw_model_forward_outputs return y std + mean, and
 * gaaw_model_backward_from takes d_outputs in physical units. std = sqrt(M2 /
 * count) (the population's), 1 for a constant feature. The statistics are model
 * state (for checkpoints). gaaw_model_normalization_stats: the count, and each
 * feature's mean and std (inputs' features first, then outputs'; either array may
 * be NULL; sizes inputs + outputs), 0 and 1 before any update. Not collective. */
gaaw_status_t gaaw_model_normalization_update(gaaw_model_t model, const gaaw_batch_t *batch);
gaaw_status_t gaaw_model_normalization_stats(gaaw_model_t model, double *count, double *mean, double *std);

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
 * reduced; at stages 2 and 3 gradients are sharded and cannot be read. With
 * pp > 1 the stage that holds the parameter reads it and every rank gets it; a
 * tied weight's gradient read before gaaw_optimizer_step is the first stage's
 * part only (the step adds the last stage's). */
gaaw_status_t gaaw_model_get_param(gaaw_model_t model, const char *name, float *values);
gaaw_status_t gaaw_model_get_grad(gaaw_model_t model, const char *name, float *values);
/* Sets a whole parameter from its global layout; each rank keeps its slice (with
 * pp > 1, nothing on a stage that does not hold it; both copies of a tied weight).
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
 * (GAAW_ERR_STATE otherwise). GAAW_ERR_UNSUPPORTED at cp > 1 (a rank holds pieces of
 * each sequence). Collective over the tp group. */
gaaw_status_t gaaw_model_get_logits(gaaw_model_t model, float *logits);

/* What the mixture-of-experts layers measured in the last gaaw_model_forward or
 * gaaw_model_forward_backward (doc/moe.md), over each layer's token group. */
typedef struct {
  int layers;          /* MoE layers of the model (0: dense; the rest is 0) */
  int experts, top_k;
  double aux_loss;     /* load balancing: summed over the MoE layers, mean over the
                          step's microbatches (coefficient applied; in the loss) */
  double z_loss;       /* the router z-loss, the same way */
  double min_margin;   /* the smallest gap between a token's k-th and (k+1)-th router
                          score, over the step's tokens and layers; +inf at top_k = experts
                          or with option moe_margins=no */
  int64_t tokens;      /* one MoE layer's tokens, summed over the step's microbatches */
  double drop_fraction; /* the share of the step's assignments dropped by capacity, all layers */
} gaaw_moe_metrics_t;
/* *out, and, when counts is not NULL, counts[layer x experts + e] (counts_len >=
 * layers x experts): the step's assignments to expert e of each MoE layer, summed
 * over its microbatches. Collective over world. */
gaaw_status_t gaaw_model_moe_metrics(gaaw_model_t model, gaaw_moe_metrics_t *out, int64_t *counts,
                                     int64_t counts_len);
/* Number of parameters of the whole (unsplit) model, and of this rank's slices. */
gaaw_status_t gaaw_model_num_params(gaaw_model_t model, int64_t *global_count, int64_t *local_count);
/* The model's training FLOPs (forward and backward) per token of a GPT at its full
 * context max_seq, or per sample of a sequential model or MLP (DESIGN.md section
 * 10): 6 N + A. N is the global parameter count less the parameters that are only
 * looked up: a GPT's position embedding, and its token embedding unless the LM
 * head is tied to it (then it is the logit matmul's weight and counts). Every
 * matmul weight costs 2 FLOPs per token forward and 4 backward; biases and norm
 * weights are counted alike (elementwise, a small part of N). A is a GPT's
 * attention, 12 layers max_seq dim (QK^T and the product with V, forward and
 * backward), 0 otherwise. Activation recomputation is not counted: these are the
 * model's FLOPs, whatever the hardware does (the numerator of an MFU). Not
 * collective. */
gaaw_status_t gaaw_model_flops_per_token(gaaw_model_t model, double *flops);

/* Per-layer timing. Every forward and backward adds the wall time each layer took
 * on this rank (its kernels, its tp collectives, its allocations) to that layer's
 * totals, from model creation or the last gaaw_model_reset_times. Backends that
 * run asynchronously report the time to issue the work. A GPT has layers
 * "embedding", one "transformer block" per block, then "lm head and
 * cross-entropy"; an MLP one "linear" per linear and its loss ("mean squared error",
 * "L1 loss" or "Huber loss"). With pp > 1 every rank lists the whole model; the
 * layers of other stages stay at zero. Not collective. */
gaaw_status_t gaaw_model_layer_count(gaaw_model_t model, int *count);
/* Layer index's kind (a static string; may be NULL) and accumulated forward and
 * backward seconds (either may be NULL; with pp_schedule zb-h1 backward is its B
 * and W together). index must be in 0..count-1. */
gaaw_status_t gaaw_model_layer_times(gaaw_model_t model, int index, const char **kind, double *forward_seconds,
                                     double *backward_seconds);
/* The last gaaw_model_forward_backward on this rank: the seconds it waited for
 * pipeline peers (the batch agreement, the sends and receives of activations and
 * gradients, and the loss broadcast from the last stage, in which a stage done
 * early waits for the others), and the
 * seconds it took in all; idle / total is this rank's measured bubble (0 at pp 1,
 * which waits for no peer). Either pointer may be NULL. Not collective. */
gaaw_status_t gaaw_model_pipeline_times(gaaw_model_t model, double *idle_seconds, double *total_seconds);
/* Sets every layer's totals back to zero. */
gaaw_status_t gaaw_model_reset_times(gaaw_model_t model);

#ifdef __cplusplus
}
#endif
#endif
