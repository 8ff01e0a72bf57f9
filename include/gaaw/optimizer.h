/* gaaw optimizers with ZeRO: the data-parallel training step's second half.
 *
 * A training step is two calls in the user's loop, as in llm.c:
 *     for (micro = 0; micro < accumulation; micro++)
 *       gaaw_model_forward_backward(model, &batch[micro], &loss);
 *     gaaw_optimizer_step(opt);
 * (or one gaaw_model_forward_backward over a batch of several microbatches, which
 * the pipeline schedule runs). The optimizer owns how gradients are reduced over the
 * data-parallel (dp) group and where the optimizer state lives (ZeRO, DESIGN.md
 * section 7). A bucket is a run of consecutive layers (option zero_bucket_bytes):
 *   stage 0  all-reduce the gradients; the full optimizer state on every dp rank
 *   stage 1  optimizer state and fp32 master weights sharded over dp
 *   stage 2  gradients sharded too: each gradient bucket is reduce-scattered as
 *            soon as backward completes it, and the model's flat gradient buffers
 *            are not kept;
 *            with pp > 1 a bucket's whole gradient is kept over the step and
 *            reduce-scattered once, after its chunk's last microbatch
 *   stage 3  parameters sharded too: a layer's parameter buckets are all-gathered
 *            just before its forward and backward (the next layer's are started
 *            while it runs) and freed after their last use in the pass (with
 *            option zero_keep_gathered, at the optimizer step)
 * Gradient buckets are reduced as backward completes them (stages 0 and 1 on the
 * step's last microbatch), with the non-blocking collectives of gaaw/comm.h: on
 * CUDA with NCCL they run on the communication stream while backward continues;
 * on the MPI communicator they run by the time the next one is needed or at the
 * step. So a step is at most `accumulation` backward passes: one more is an error
 * (GAAW_ERR_STATE). Fewer are allowed (the remaining reductions run at the step).
 * Parameters are in the model's compute dtype; with bf16 or f16 the optimizer keeps
 * fp32 master weights and moments in its shard. f16 uses a dynamic loss scale
 * (initial 2^16, x2 after `loss_scale_window` clean steps in a row, halved at the
 * `hysteresis`-th overflow since the scale last changed (clean steps in between do
 * not reset that count, as in Megatron-LM); an overflowing step is skipped, and every
 * rank agrees on it). The gradient norm used for clipping is global over the dp and
 * model-parallel groups, each replicated parameter counted once. */
#ifndef GAAW_OPTIMIZER_H
#define GAAW_OPTIMIZER_H

#include "gaaw/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gaaw_optimizer_s *gaaw_optimizer_t;

typedef enum { GAAW_ADAMW = 0, GAAW_SGD = 1 } gaaw_optimizer_kind_t;

typedef struct {
  gaaw_optimizer_kind_t kind;
  int zero_stage;           /* 0..3 */
  float lr;                 /* peak learning rate */
  float min_lr;             /* the cosine decay ends here */
  int warmup_steps;         /* linear warmup from lr / warmup_steps to lr */
  int decay_steps;          /* cosine decay from lr to min_lr over steps warmup..decay_steps; 0 = constant */
  float beta1, beta2, eps;  /* AdamW */
  float weight_decay;       /* decoupled (AdamW) or L2 (SGD), on every parameter */
  float momentum;           /* SGD */
  float clip_norm;          /* clip the global gradient norm to this; 0 = off */
  int accumulation;         /* microbatches per step (gradients are averaged over them and over dp) */
  float initial_loss_scale; /* f16 only */
  int loss_scale_window;
  int hysteresis;
} gaaw_optimizer_config_t;

/* AdamW, ZeRO stage 0, lr 3e-4 constant (min_lr 0, warmup 0, decay 0), betas
 * (0.9, 0.95), eps 1e-8, weight decay 0.1, momentum 0.9, no clipping, accumulation 1,
 * loss scale 65536 with window 1000 and hysteresis 2. */
void gaaw_optimizer_config_default(gaaw_optimizer_config_t *cfg);

/* Takes over the model's parameters and gradients as the ZeRO stage says.
 * Collective over the world: every field of cfg must be the same on every rank (a
 * difference is GAAW_ERR_INVALID_ARG on every rank naming the field and each
 * rank's value). From now on the model's passes are collective over world. */
gaaw_status_t gaaw_optimizer_create(gaaw_model_t model, const gaaw_optimizer_config_t *cfg,
                                    gaaw_optimizer_t *opt);
/* Frees the optimizer's state. Destroy the optimizer before its model; after it,
 * a model whose gradients or parameters were sharded (stages 2, 3) can only be
 * destroyed. NULL is a no-op. Not collective. */
gaaw_status_t gaaw_optimizer_destroy(gaaw_optimizer_t *opt);

/* Reduces the gradients of the step's microbatches over dp, checks them for inf/nan,
 * clips, updates the parameters, gathers them where sharded, and zeroes the
 * gradients for the next step. Collective over the world. A step with no backward
 * pass since the last step (or since gaaw_model_zero_grad) is GAAW_ERR_STATE on
 * every rank and changes nothing; ranks that ran different numbers of backward
 * passes get GAAW_ERR_INVALID_ARG saying how many each ran. */
gaaw_status_t gaaw_optimizer_step(gaaw_optimizer_t opt);

/* What the last step did. */
typedef struct {
  int64_t step;           /* steps taken (skipped ones included) */
  float lr;               /* learning rate used by the last step */
  float grad_norm;        /* global norm before clipping */
  float loss_scale;       /* 1 unless f16 */
  int skipped;            /* the last step overflowed and was skipped */
  uint64_t comm_bytes;    /* bytes of the last step's gradient and parameter
                             collectives over dp (section 10's accounting) */
  int reductions_in_backward; /* gradient-bucket reductions the step's backward
                                 passes started (free to overlap backward on a
                                 backend with a communication stream) */
  int gathers_ahead;      /* stage 3: parameter-bucket gathers started one layer
                             before the layer that needs them (prefetch) */
} gaaw_step_stats_t;
gaaw_status_t gaaw_optimizer_stats(gaaw_optimizer_t opt, gaaw_step_stats_t *stats);

/* Model-state bytes held on this rank now: parameters, gradients and optimizer
 * state (fp32 master weights and moments), as the memory accounting sees them.
 * Not collective. */
gaaw_status_t gaaw_optimizer_memory(gaaw_optimizer_t opt, size_t *params, size_t *grads, size_t *state);

#ifdef __cplusplus
}
#endif
#endif
