/* Model internals: the layer interface, the model object and the model-kind
 * table, and what the files of the model core share.
 *
 * Who owns what. The core, each file calling only files below it:
 *   model_step.c     the training API: gaaw_model_forward, _backward (one
 *                    microbatch on the model's frame), _forward_backward (a step,
 *                    through the pipeline executor at every pp, 1 included)
 *   model_infer.c    gaaw_model_predict; the caller's loss (gaaw_model_forward_outputs,
 *                    gaaw_model_backward_from)
 *   pipeline.c       the pipeline executor: a schedule's actions, send/recv
 *   model_pass.c     the pass driver, the one way layers run: forward, backward
 *                    and weight passes over a layer range inside the hooks,
 *                    recomputation, sequence parallelism's partial gradients
 *   model_access.c   parameters and gradients by name, zero_grad, layer times
 *   model_batch.c    batches: checks, upload into a frame, microbatch views, the
 *                    ranks' agreement on a step's batch
 *   model_hooks.c    calling the data-parallel hooks; the work group
 *   model_build.c    the object, builders, layer list, catalog, stage plan,
 *                    per-chunk flat buffers, destroy
 *   model_frame.c    frames (a microbatch in flight)
 *   weight_grads.c   the linears' backward, fused or split into B and W
 *   model_tensors.c  activations, saved slots, scratch, tensor views
 *   model_names.c    names of the model enums
 *   normalization.c  running statistics of a model's inputs and outputs (used by
 *                    the sequential kind; model state for checkpoints)
 * Beside them, on the public API only: model_arrays.c (the bindings' shape
 * check) and model_state.c (all parameters as one vector).
 * Model kinds, which the core reaches only through the layer ops and the kind
 * table (gaaw_model_kind_ops, m->kind_ops; tests/unit/test_parallel_calls.sh
 * checks both rules on the built objects):
 *   GPT: gpt.c (builder, embedding, head, its kind table), gpt_block.c,
 *   gpt_batch.c (its batches); sequential models and MLPs: sequential.c
 *   (builder), seq_layers.c, seq_linear.c, regression_loss.c, seq_batch.c (its
 *   batches and outputs, the kind table gaaw_seq_kind), mlp.c and model_spec.c
 *   (the MLP shortcut and its spec string). */
#ifndef GAAW_PARALLEL_MODEL_IMPL_H
#define GAAW_PARALLEL_MODEL_IMPL_H

#include "backends/agree.h"
#include "backends/comm.h"
#include "backends/runtime/config_impl.h"
#include "backends/runtime/context_impl.h"
#include "gaaw/kernels.h"
#include "gaaw/model.h"
#include "parallel/params.h"
#include "parallel/schedule.h"
#include "parallel/stages.h"

typedef struct gaaw_layer gaaw_layer;
typedef struct gaaw_frame gaaw_frame;
struct gaaw_mem_walk;

/* Where a model's rank sits and how its steps run: from the context and its
 * topology (gaaw_model_build), or given (gaaw_model_plan: a model without memory
 * for the memory estimate, for any rank of any layout). */
typedef struct {
  int tp_size, tp_rank, pp_size, pp_rank, dp_size;
  int cp_size, cp_rank;        /* context parallelism (0: 1, rank 0) */
  int cp_a2a;                  /* its attention: all-to-all (1) or the ring (0), option cp_kind */
  int ep_size, ep_rank;        /* expert parallelism (0: 1, rank 0) */
  int chunks;                  /* virtual_stages */
  int pp_kind;                 /* gaaw_sched_kind_t of pp_schedule */
  int microbatches;            /* option microbatches */
  int recompute;               /* gaaw_recompute_mode */
  const char *pp_layout;       /* option pp_layout (copied) */
} gaaw_model_layout;

/* A layer maps the activation stream x to y and back, for the microbatch of frame
 * f. forward allocates *y (and whatever it saves in f for backward); backward
 * allocates *dx (unless the layer is the first, which gets dx == NULL),
 * accumulates parameter gradients, and frees what forward saved. A layer reads
 * only its arguments, its parameters and its frame, never another microbatch's.
 * Its linears' weight gradients go through gaaw_layer_linear_backward, which
 * leaves them to the W action when the frame defers them (a split backward). */
typedef struct {
  const char *kind;
  gaaw_status_t (*forward)(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *x, gaaw_tensor_t *y);
  gaaw_status_t (*backward)(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy, gaaw_tensor_t *dx);
  /* full recomputation may drop what forward saved and run forward again, from the
   * same input, before backward (the kernels are deterministic: bit-identical) */
  int recomputable;
  /* The device bytes forward (backward 0) or backward (1) allocates and frees,
   * replayed in the same order on a walk (model_memory.c), for the memory
   * estimate; beside forward and backward in the layer's file, so that a change
   * of one shows in the other. NULL: the layer kind has no estimate. */
  void (*memory)(gaaw_model_t m, const gaaw_layer *l, struct gaaw_mem_walk *w, int backward);
} gaaw_layer_ops;

#define GAAW_LAYER_MAX_PARAMS 16
#define GAAW_LAYER_MAX_SAVED 40

struct gaaw_layer {
  const gaaw_layer_ops *ops;
  int index;                            /* position in the model, for names and messages */
  int64_t param_lo, param_hi;           /* the flat-buffer range of the parameters it declared:
                                           its gradient bucket, a multiple of dp elements */
  int64_t expert_lo;                    /* [expert_lo, param_hi): its parameters split over ep
                                           (an MoE layer's experts at ep > 1), a bucket of their
                                           own over expert-dp; param_hi when none (-1 while open) */
  int params[GAAW_LAYER_MAX_PARAMS];    /* indices into the model's parameter table */
  int64_t in_features, out_features;    /* widths of x and y on this rank */
  int column_parallel;                  /* linear layers: split outputs (1) or inputs (0) */
  gaaw_activation_t activation;         /* linear layers: applied after */
  float loss_delta;                     /* regression loss layers: Huber's delta */
  int gathers;                          /* column-parallel linears: gather the output over tp */
  gaaw_norm_t norm;                     /* norm layers */
  int residual_from;                    /* residual adds: the index of the group's first layer */
  int keeps_input;                      /* its input outlives its forward, inference too
                                           (a residual group's input, read at its end) */
  int moe_layer;                        /* GPT blocks: 1 + the index of its mixture-of-experts
                                           MLP among the model's; 0: a dense MLP */
  double forward_seconds, backward_seconds; /* wall time accumulated (gaaw_model_layer_times;
                                           a split backward's W counts in backward) */
  int64_t deferred_grads_run;           /* weight gradients its W actions computed (tests) */
};

typedef enum { GAAW_MODEL_GPT = 0, GAAW_MODEL_MLP = 1 } gaaw_model_kind;
typedef struct gaaw_model_kind_ops gaaw_model_kind_ops;

/* What one layer keeps from its forward for its backward, for one microbatch. */
typedef struct {
  gaaw_tensor_t t[GAAW_LAYER_MAX_SAVED];
  int n; /* slots [0, n) may be in use */
} gaaw_saved;

/* One linear's weight gradient that B left to W (a split backward): copies of its
 * output gradient and its input, and where the gradient goes. */
#define GAAW_LAYER_MAX_DEFERRED 4
typedef struct {
  gaaw_tensor_t dy, x; /* (N, out), (N, in) of the linear */
  int w_slot, b_slot;  /* parameter slots of dW and db (-1: no bias) */
  int64_t w_rows;      /* dW's rows [0, w_rows) (the LM head's real vocabulary); < 0: all */
} gaaw_deferred_grad;
typedef struct {
  gaaw_deferred_grad g[GAAW_LAYER_MAX_DEFERRED];
  int n;
} gaaw_deferred;

/* What a mixture-of-experts layer's forward measured over its token group
 * (gpt_moe.c): its aux losses (coefficients applied), the group's tokens,
 * assignments per expert and assignments dropped, and the smallest top-k margin of
 * this rank's tokens. */
typedef struct {
  double aux, z, margin;
  int64_t tokens, dropped;
  int64_t *counts; /* experts */
  int ran;         /* the layer's forward ran on this rank */
} gaaw_moe_record;

/* One microbatch in flight: its batch on the device, the input of every layer,
 * what every layer saved for backward, and its loss. Several can be alive at once
 * (a pipeline keeps up to p); nothing about a microbatch lives in the model. */
struct gaaw_frame {
  int batch, seq;              /* seq: the tokens of a sequence on this rank (seq / cp) */
  int64_t rows;                /* batch * seq (GPT) or batch (MLP) */
  /* A GPT at cp > 1: this rank's pieces of each sequence (parallel/cp_split.h), rows
   * ordered piece-major (piece, sequence, token); one piece at position 0 otherwise */
  int pieces;
  int64_t piece_start[2];
  int64_t counted;             /* targets that count in the loss (at cp > 1: of all cp ranks) */
  gaaw_tensor_t tokens, targets, positions; /* GPT: (rows) i32 */
  gaaw_tensor_t inputs, outputs;            /* MLP: (rows, sizes[0]), (rows, sizes[n-1]) */
  gaaw_tensor_t weights;       /* MLP: (rows, sizes[n-1]) f32 loss weights; no buffer: all 1 */
  double weight_sum;           /* MLP: the loss's divisor, sum of weights (counted without) */
  gaaw_tensor_t *acts;         /* acts[i]: input of layer i; acts[nlayers]: output */
  gaaw_saved *saved;           /* saved[i]: what layer i keeps */
  gaaw_deferred *deferred;     /* deferred[i]: layer i's weight gradients awaiting W */
  int defer_weights;           /* B leaves the linears' weight gradients to W (ZB-H1) */
  int have_forward;            /* its activations are held */
  int outputs_only;            /* gaaw_model_forward_outputs: no loss, backward from the caller's gradient */
  int inference;               /* gaaw_model_predict: nothing is kept for backward */
  float loss;
  gaaw_moe_record *moe;        /* per MoE layer of the model, what its forward measured
                                  (zero for those of other stages); NULL without */
};

/* When a layer's parameters are used: forward, backward, or read/written through
 * gaaw_model_get/set_param. A split backward (ZB-H1) is two phases: BACKWARD_INPUT
 * (B: the input gradient, and the gradients of norms, embeddings and row-parallel
 * biases, so a layer's gradients are not complete after it) and WEIGHT (W: the
 * linears' weight gradients, without the parameters; complete after it). */
typedef enum {
  GAAW_PHASE_FORWARD = 0,
  GAAW_PHASE_BACKWARD = 1,
  GAAW_PHASE_ACCESS = 2,
  GAAW_PHASE_BACKWARD_INPUT = 3,
  GAAW_PHASE_WEIGHT = 4
} gaaw_phase;

/* Hooks a data-parallel engine (zero/) registers: before a pass starts, whether
 * it may (a local check, no communication: its verdict enters the agreement of
 * every rank before anything runs); before a layer runs in a phase (make its
 * parameters, and in backward its gradients, usable), and after (its gradients
 * are complete after backward: reduce them); and when the gradients are read
 * (reset 0) or zeroed (reset 1) through the model API (finish what is in flight on
 * them; a reset starts the step's accumulation over); and when a pass over a
 * chunk begins and ends. While hooks are installed
 * the model's passes are collective over world (gaaw_model_work_group). */
typedef struct {
  void *user;
  gaaw_status_t (*before_layer)(gaaw_model_t m, int layer, gaaw_phase phase, void *user);
  gaaw_status_t (*after_layer)(gaaw_model_t m, int layer, gaaw_phase phase, void *user);
  gaaw_status_t (*grads_access)(gaaw_model_t m, int reset, void *user);
  /* `passes` passes of the phase are about to run (a step's microbatches) */
  gaaw_status_t (*check_pass)(gaaw_model_t m, gaaw_phase phase, int passes, void *user);
  /* a forward or backward pass of microbatch `microbatch` over model chunk `chunk`
   * starts or has ended (every layer of the chunk done) */
  gaaw_status_t (*begin_pass)(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk, void *user);
  gaaw_status_t (*end_pass)(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk, void *user);
} gaaw_model_hooks;

/* One parameter of the whole model, wherever it lives (pp > 1: on another stage). */
typedef struct {
  char name[GAAW_PARAM_NAME_MAX];
  int ndim;
  int64_t shape[2];   /* global */
  int stage;          /* the pipeline rank that holds it (the first, for a tied weight) */
} gaaw_param_entry;

struct gaaw_model_s {
  gaaw_context_t ctx;
  gaaw_comm_t tp, world, pp, cp, ep;
  int tp_size, tp_rank;
  int ep_size, ep_rank;        /* expert parallelism: MoE layers' experts split over ep ranks */
  int pp_size, pp_rank;
  int cp_size, cp_rank;        /* context parallelism: the ranks that share each sequence */
  int cp_a2a;                  /* its attention core: all-to-all (1) or the ring (0) */
  gaaw_stage_layout stages;    /* every virtual stage's layer range (the whole list at pp 1) */
  int chunks;                  /* this rank's model chunks (virtual_stages) */
  int pp_kind;                 /* gaaw_sched_kind_t of option pp_schedule */
  int default_microbatches;    /* option microbatches */
  gaaw_sched_t *sched;         /* the last step's schedule, kept for the next */
  gaaw_param_entry *catalog;   /* every parameter of the model, in declaration order */
  int ncatalog;
  double pipe_idle, pipe_wall; /* the last gaaw_model_forward_backward: seconds waiting for peers, in all */
  const gaaw_model_kind_ops *kind_ops; /* what the model kind adds (its batches and outputs) */
  gaaw_dtype_t dtype;          /* compute dtype of parameters and activations */
  int dp_size;                 /* data-parallel replicas; buckets split into dp x cp equal shards */
  float loss_scale;            /* backward starts from loss_scale * d loss (f16) */
  float rows_weight;           /* and from rows_weight times that: with the data-parallel hooks, this
                                  replica's share of the step's rows, dp x batch / (sum of batch over
                                  dp), so that their mean over dp is the global batch's; 1 when even */
  gaaw_recompute_mode recompute; /* option recompute */
  gaaw_model_hooks hooks;
  gaaw_gpt_config_t gpt;
  int moe_layers;              /* the GPT's mixture-of-experts MLPs (gpt_moe.c) */
  gaaw_moe_record *moe_step;   /* what the last step's microbatches measured, per MoE layer:
                                  aux losses the mean, counts and tokens the sums, margin the least */
  gaaw_mlp_config_t mlp;
  const char *builder_name;    /* "GPT", "MLP", "sequential model" */
  gaaw_field config[GAAW_AGREE_MAX_FIELDS]; /* the builder's fields of the config (names and
                                           labels are static strings) */
  int nconfig;
  /* sequential models (and MLPs, built as one): the specs, the input and output widths */
  gaaw_layer_spec_t *specs;
  int nspecs, seq_inputs, seq_outputs;
  uint64_t seq_seed;
  /* normalisation statistics (parallel/normalization.c): inputs' features, then
   * outputs'; count 0: none yet, the data pass unchanged */
  struct {
    double count;
    double *mean, *m2;
  } norm;
  gaaw_tensor_t rope_table;     /* a GPT with RoPE: (max_seq, head_dim) f32, cos | sin (gaaw_rope_table) */
  int64_t vocab_local;         /* padded vocabulary rows per rank */
  int64_t vocab_valid_local;   /* of which real (not padding) */
  gaaw_param_table params;
  gaaw_layer *layers;
  int nlayers;
  gaaw_frame frame;             /* the microbatch of gaaw_model_forward/backward */
  char *pp_layout;              /* option pp_layout, for the stage plan */
  int planned_only;             /* gaaw_model_plan: layers and parameter offsets, no memory */
};

/* ---- the model-kind table */
struct gaaw_field_s;
/* What a model kind adds to the generic core: what its batches hold, the rows of
 * its activation stream, and what its outputs are. A builder names its kind's
 * table (gaaw_model_builder.kind_ops); the core calls a kind only through it. */
struct gaaw_model_kind_ops {
  gaaw_model_kind kind;
  const char *article;                          /* "a GPT", "an MLP": for messages */
  const char *input_name, *target_name, *output_name; /* its arrays: "tokens", "targets", "logits" */
  /* Checks microbatch b's arrays (gaaw_model_load_batch checked the shared
   * fields) and uploads what this stage reads of it into f, with f->rows and the
   * loss's count. Local. */
  gaaw_status_t (*load_batch)(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b);
  /* one: b's arrays from row `rows` of the batch on (a microbatch's view). */
  void (*offset_batch)(gaaw_model_t m, const gaaw_batch_t *b, size_t rows, gaaw_batch_t *one);
  /* Digests of what this rank reads of b's first `rows` rows; returns how many. */
  int (*batch_digests)(gaaw_model_t m, const gaaw_batch_t *b, size_t rows, struct gaaw_field_s *out);
  /* Rows of the activation stream on this rank in frame f (what crosses a stage). */
  int64_t (*stream_rows)(gaaw_model_t m, const gaaw_frame *f);
  /* Predict: the target array b lacks, filled with what counts for nothing (in
   * *filler: free it), into full; and how many layers inference runs. */
  gaaw_status_t (*fill_targets)(gaaw_model_t m, const gaaw_batch_t *b, gaaw_batch_t *full, void **filler);
  int (*inference_layers)(gaaw_model_t m);
  /* Frame f's outputs after inference in host f32, the whole of them; their count
   * for b. Collective over the tp group. */
  gaaw_status_t (*read_outputs)(gaaw_model_t m, gaaw_frame *f, float *out);
  int64_t (*output_count)(gaaw_model_t m, const gaaw_batch_t *b);
  /* The (samples, features) of a pass's input and output arrays, as C sees them. */
  void (*array_shapes)(gaaw_model_t m, int predict, int64_t batch, int64_t seq, int64_t in[2], int64_t out[2]);
  /* For gaaw_model_flops_per_token: how many parameters are only looked up (no
   * matmul), and the FLOPs per token beyond 6 per other parameter (attention). */
  void (*flops)(gaaw_model_t m, double *lookup_params, double *extra_flops);
};

/* ---- the model as built (model_build.c) */
/* What a model builder (gpt.c, mlp.c, sequential.c) tells gaaw_model_build. */
typedef struct {
  const gaaw_model_kind_ops *kind_ops;
  const char *name;                                /* "GPT": for messages */
  gaaw_dtype_t (*dtype)(const void *cfg);          /* the compute dtype the config asks for */
  gaaw_status_t (*adopt)(gaaw_model_t m, const void *cfg); /* keeps cfg in m and checks it; local */
  int (*fields)(const void *cfg, struct gaaw_field_s *out); /* what must match on every rank */
  gaaw_status_t (*build)(gaaw_model_t m);          /* layers and parameters; local */
} gaaw_model_builder;
#define GAAW_MODEL_MAX_FIELDS 32

/* Builds a model from cfg: the builder's checks on every rank, then the ranks
 * agree on its fields, then it is built; every rank fails together, and *model
 * is NULL after a failure. Collective over world. */
gaaw_status_t gaaw_model_build(gaaw_context_t ctx, const gaaw_model_builder *b, const void *cfg,
                               gaaw_model_t *model);
/* The same model as a plan for the rank and layout of `layout`, on this process
 * alone: the builder's checks, layers, parameters and their offsets in the flat
 * buffers, the stage plan; no device memory, no communication (the memory
 * estimate's model). Destroy it with gaaw_model_destroy. Not collective. */
gaaw_status_t gaaw_model_plan(gaaw_context_t ctx, const gaaw_model_builder *b, const void *cfg,
                              const gaaw_model_layout *layout, gaaw_model_t *model);
/* Appends a layer; returns it. */
gaaw_status_t gaaw_model_add_layer(gaaw_model_t m, const gaaw_layer_ops *ops, gaaw_layer **layer);
/* Declares a parameter for slot k of layer l: fused_blocks equal blocks on its
 * split axis, each split over tp; or blocks as described (parallel/params.h). */
gaaw_status_t gaaw_model_add_param_blocks(gaaw_model_t m, gaaw_layer *l, int k, const char *name, int ndim,
                                          int64_t d0, int64_t d1, int split_axis, const gaaw_param_blocks *blocks,
                                          gaaw_init_kind init, float init_value);
gaaw_status_t gaaw_model_add_param(gaaw_model_t m, gaaw_layer *l, int k, const char *name, int ndim,
                                   int64_t d0, int64_t d1, int split_axis, int fused_blocks,
                                   gaaw_init_kind init, float init_value);
/* The parameters l declares from now on are its experts, split by rows over the
 * ep group (they must be its last). */
void gaaw_layer_begin_experts(gaaw_model_t m, gaaw_layer *l);
/* Splits slot k's parameter of l by rows over the ep group (declared after
 * gaaw_layer_begin_experts). */
gaaw_status_t gaaw_layer_split_experts(gaaw_model_t m, gaaw_layer *l, int k);
/* Marks slot k's parameter of l as having a partial gradient over tp (replicated, but
 * seeing only this rank's tokens: summed over tp after the layer's backward,
 * model_pass.c), when this stage holds it. */
void gaaw_layer_mark_partial(gaaw_model_t m, gaaw_layer *l, int k, int partial);
/* Allocates and initialises the parameters (after all layers are added). */
gaaw_status_t gaaw_model_finish(gaaw_model_t m, uint64_t seed);
/* The catalog's entry of the parameter named name, or NULL. */
const gaaw_param_entry *gaaw_model_catalog_find(gaaw_model_t m, const char *name);
/* The layer index of every user of parameter k, first to last; returns the count. */
int gaaw_model_param_users(gaaw_model_t m, int k, int *layers, int max);
/* Cuts the model's nlayers layers (lead + body + tail, cost[] per layer) into the
 * stages of options pp, virtual_stages and pp_layout; a builder calls it before
 * adding layers, so that only this rank's layers get parameters. */
gaaw_status_t gaaw_model_plan_stages(gaaw_model_t m, int nlayers, int lead, int tail, const double *cost);
/* Whether layer i runs on this rank; the pipeline rank that runs it. */
int gaaw_model_owns_layer(gaaw_model_t m, int i);
int gaaw_model_layer_rank(gaaw_model_t m, int i);
/* This rank's chunk c: virtual stage c * pp + pp_rank, layers [*lo, *hi). */
int gaaw_model_chunk_stage(gaaw_model_t m, int c, int *lo, int *hi);
/* The shape (rows, width) of acts[i], the input of body layer i, in frame f: what
 * crosses a stage boundary, fixed by the config and the batch shape. */
void gaaw_model_boundary_shape(gaaw_model_t m, const gaaw_frame *f, int i, int64_t shape[2]);

/* ---- frames (model_frame.c) */
/* init gives f its per-layer lists (empty), free releases everything
 * (activations, saved tensors, the batch); drop_forward frees what the frame's
 * forward left (activations, saved tensors, deferred weight gradients),
 * free_batch its batch arrays. Not collective. */
gaaw_status_t gaaw_frame_init(gaaw_model_t m, gaaw_frame *f);
/* Zeroed records of the model's MoE layers, with their counts, in one block (free
 * frees it); NULL when out of memory. */
gaaw_moe_record *gaaw_moe_records_new(gaaw_model_t m);
void gaaw_frame_free(gaaw_model_t m, gaaw_frame *f);
void gaaw_frame_drop_forward(gaaw_model_t m, gaaw_frame *f);
void gaaw_frame_free_batch(gaaw_model_t m, gaaw_frame *f);

/* ---- the data-parallel hooks (model_hooks.c) */
/* Installs (or, with NULL, removes) the data-parallel hooks. */
void gaaw_model_set_hooks(gaaw_model_t m, const gaaw_model_hooks *hooks);
/* The ranks that share the model's passes: world while a data-parallel engine is
 * attached (its reductions, and at ZeRO stage 3 its gathers, span dp), at pp > 1 or
 * at cp > 1, else the tp group. */
gaaw_comm_t gaaw_model_work_group(gaaw_model_t m);
/* A failure after the agreement: aborts the context (peers may be in a collective). */
gaaw_status_t gaaw_model_fail_together(gaaw_model_t m, gaaw_status_t st);
/* The hooks, each a no-op when none is installed. */
gaaw_status_t gaaw_model_before_layer(gaaw_model_t m, int layer, gaaw_phase phase);
gaaw_status_t gaaw_model_after_layer(gaaw_model_t m, int layer, gaaw_phase phase);
gaaw_status_t gaaw_model_grads_access(gaaw_model_t m, int reset);
gaaw_status_t gaaw_model_check_pass(gaaw_model_t m, gaaw_phase phase, int passes);
gaaw_status_t gaaw_model_begin_pass(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk);
gaaw_status_t gaaw_model_end_pass(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk);

/* ---- batches (model_batch.c) */
/* Checks microbatch b and uploads what this stage reads of it into f. Local. */
gaaw_status_t gaaw_model_load_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b);
/* What a loss layer's backward starts from, times d loss: loss_scale x rows_weight
 * (exactly loss_scale with even rows). */
static inline float gaaw_model_seed_scale(gaaw_model_t m)
{
  return m->loss_scale * m->rows_weight;
}
/* The agreement on a step's batch (microbatches of b), joined by st; sets
 * rows_weight. Collective over the work group. */
gaaw_status_t gaaw_model_agree_batch(gaaw_model_t m, gaaw_status_t st, const gaaw_batch_t *b, int microbatches);
/* b is one microbatch (what = the calling function, for the message). Local. */
gaaw_status_t gaaw_model_check_one_microbatch(gaaw_model_t m, const gaaw_batch_t *b, const char *what);
/* The microbatches of b (b->microbatches, or option microbatches when 0). */
int gaaw_model_microbatches(gaaw_model_t m, const gaaw_batch_t *b);
/* Microbatch i of b: its rows of each array (NULL stays NULL). */
gaaw_batch_t gaaw_model_microbatch(gaaw_model_t m, const gaaw_batch_t *b, int i);
/* For the kinds' load_batch: a fresh device tensor (d0, d1) (d1 0: (d0)) of dtype
 * holding host data; host f32 data in the compute dtype; the arrays this stage
 * reads are there (the input on the first stage, the target on the last). */
gaaw_status_t gaaw_batch_upload(gaaw_model_t m, gaaw_dtype_t dtype, int64_t d0, int64_t d1, const void *host,
                                gaaw_tensor_t *t);
gaaw_status_t gaaw_batch_upload_f32(gaaw_model_t m, int64_t d0, int64_t d1, const float *host, gaaw_tensor_t *t);
gaaw_status_t gaaw_batch_check_stage_arrays(gaaw_model_t m, const void *in, const void *target);

/* ---- the pass driver (model_pass.c) */
/* Forward of frame f's microbatch `mb` over layers [lo, hi) of model chunk
 * `chunk` (its input in f->acts[lo], or the batch when lo is 0); backward over
 * [lo, hi) from dy, the gradient of f->acts[hi] (ignored when hi is the last
 * layer; taken over and freed), into *dx (when lo is 0, nothing; dx NULL: freed),
 * splitting off the weight gradients when f->defer_weights is set; the weight pass
 * of a split backward, after its backward: the weight gradients the layers
 * deferred, in backward order. Each runs inside the hooks' begin_pass and
 * end_pass, except forward in an inference frame (f->inference), which keeps
 * nothing and calls only the per-layer hooks. Collective over the tp group (and
 * the hooks' groups; the weight pass has no tp communication). */
gaaw_status_t gaaw_pass_forward(gaaw_model_t m, gaaw_frame *f, int mb, int chunk, int lo, int hi);
gaaw_status_t gaaw_pass_backward(gaaw_model_t m, gaaw_frame *f, int mb, int chunk, int lo, int hi,
                                 gaaw_tensor_t *dy, gaaw_tensor_t *dx);
gaaw_status_t gaaw_pass_weight(gaaw_model_t m, gaaw_frame *f, int mb, int chunk, int lo, int hi);
/* Monotonic wall clock in seconds, for the layer and pipeline times. */
double gaaw_pass_clock(void);
/* The replica's loss on every rank: *loss from the last stage to every rank of the
 * pp group, then summed over the cp group (each cp rank's loss is its tokens' share
 * of the mean), plus the aux losses of the MoE layers (aux: this rank's, summed over
 * the pp group); a no-op at pp 1 and cp 1 without MoE layers. Used by both drivers of a step. Collective
 * over the pp and cp groups. */
gaaw_status_t gaaw_model_share_loss(gaaw_model_t m, float *loss, double aux);
/* The MoE layers' records of a step's n frames into m->moe_step; returns this
 * rank's part of the step's aux losses (its layers' aux + z, mean over the
 * frames): what gaaw_model_share_loss adds. 0 without MoE layers. (gpt_moe.c) */
double gaaw_moe_step_record(gaaw_model_t m, const gaaw_frame *frames, int n);

/* ---- the pipeline executor (pipeline.c) */
/* The step's microbatches through this rank's actions of the schedule
 * (pp_schedule), the mean loss on every rank. Collective over world. */
gaaw_status_t gaaw_pipeline_forward_backward(gaaw_model_t m, const gaaw_batch_t *b, float *loss);
/* Inference of one microbatch through the stages into frame f (inference set,
 * batch loaded); stop: forward ends before the last layer (MLP loss). Collective
 * over the pp group. */
gaaw_status_t gaaw_pipeline_forward_only(gaaw_model_t m, gaaw_frame *f, int stop);

/* ---- layer kinds (defined by the model kinds' files) */
extern const gaaw_layer_ops gaaw_gpt_embedding_ops, gaaw_gpt_block_ops, gaaw_gpt_head_ops;
extern const gaaw_layer_ops gaaw_linear_ops;
/* The regression loss layers, by gaaw_loss_t. */
extern const gaaw_layer_ops gaaw_regression_loss_ops[GAAW_LOSS_COUNT];

/* ---- what layers allocate and view (model_tensors.c) */
/* An activation tensor of the given shape in the compute dtype (category activations). */
gaaw_status_t gaaw_act_alloc(gaaw_model_t m, int ndim, const int64_t *shape, gaaw_tensor_t *t);
/* The same, zero-filled (for gradients that kernels accumulate into). */
gaaw_status_t gaaw_act_zeros(gaaw_model_t m, int ndim, const int64_t *shape, gaaw_tensor_t *t);
/* A tensor with the same shape as x, holding a copy of x. */
gaaw_status_t gaaw_act_copy(gaaw_model_t m, const gaaw_tensor_t *x, gaaw_tensor_t *t);
void gaaw_act_free(gaaw_model_t m, gaaw_tensor_t *t);
/* Allocates saved slot `slot` of layer l in frame f, in the compute dtype
 * (zero-filled when zero), for backward; the frame owns it until
 * gaaw_layer_release. */
gaaw_status_t gaaw_layer_alloc(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l, int slot, int zero, int ndim,
                               const int64_t *shape, gaaw_tensor_t **t);
/* The same in another dtype (f32 scores, i32 indices). */
gaaw_status_t gaaw_layer_alloc_as(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l, int slot, gaaw_dtype_t dtype, int ndim,
                                  const int64_t *shape, gaaw_tensor_t **t);
/* The same for a per-row statistic (mean, rstd, row max...): (n) f32. */
gaaw_status_t gaaw_layer_alloc_stat(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l, int slot, int64_t n,
                                    gaaw_tensor_t **t);
/* What layer l saved in frame f (GAAW_LAYER_MAX_SAVED slots). */
gaaw_tensor_t *gaaw_layer_saved(gaaw_frame *f, const gaaw_layer *l);
/* The input activation of layer l in frame f during its forward and backward. */
const gaaw_tensor_t *gaaw_layer_input(const gaaw_frame *f, const gaaw_layer *l);

/* Temporaries of one forward or backward call, freed together (also on failure). */
#define GAAW_SCRATCH_MAX 24
typedef struct {
  gaaw_tensor_t t[GAAW_SCRATCH_MAX];
  int n;
} gaaw_scratch;
gaaw_status_t gaaw_scratch_alloc(gaaw_model_t m, gaaw_scratch *s, int zero, int ndim, const int64_t *shape,
                                 gaaw_tensor_t **t);
void gaaw_scratch_free(gaaw_model_t m, gaaw_scratch *s);
#define GAAW_SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
/* Frees everything layer l saved in frame f. */
void gaaw_layer_release(gaaw_model_t m, gaaw_frame *f, const gaaw_layer *l);
/* The view of parameter slot k of layer l (value or gradient). */
gaaw_tensor_t *gaaw_layer_param(gaaw_model_t m, gaaw_layer *l, int k);
gaaw_tensor_t *gaaw_layer_grad(gaaw_model_t m, gaaw_layer *l, int k);
/* A view of rows [row0, row0 + rows) of a 2-D tensor. */
gaaw_tensor_t gaaw_rows_view(const gaaw_tensor_t *t, int64_t row0, int64_t rows);
/* A view of the same memory with another shape (same element count). */
gaaw_tensor_t gaaw_reshape(const gaaw_tensor_t *t, int ndim, const int64_t *shape);

/* ---- the linears' backward, fused or split (weight_grads.c) */
/* Backward of one linear of layer l in frame f: dx = dy w (dx NULL: none), and
 * its weight gradient dW += dy^T x into rows [0, w_rows) (< 0: all) of the
 * gradient of parameter slot w_slot, db += sum dy into slot b_slot (-1: none):
 * at once, or, when f defers weight gradients, kept (copies of dy and x) for
 * gaaw_pass_weight. Bit-identical either way. */
gaaw_status_t gaaw_layer_linear_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *dy,
                                         const gaaw_tensor_t *x, const gaaw_tensor_t *w, gaaw_tensor_t *dx,
                                         int w_slot, int64_t w_rows, int b_slot);
/* Computes (and frees) the weight gradients layer l deferred in frame f. */
gaaw_status_t gaaw_layer_run_deferred(gaaw_model_t m, gaaw_frame *f, gaaw_layer *l);
/* Frees them uncomputed (a failed or abandoned pass). */
void gaaw_layer_drop_deferred(gaaw_model_t m, gaaw_frame *f, const gaaw_layer *l);

/* ---- memory without memory (model_memory.c): the memory estimate's walk */
/* A ledger of device bytes in use, by category and in all, now and at the peak:
 * the allocator's accounting (bytes as asked for) without memory. */
typedef struct {
  int64_t current[GAAW_MEM_CATEGORY_COUNT], peak[GAAW_MEM_CATEGORY_COUNT];
  int64_t total, total_peak;
} gaaw_ledger;
/* bytes > 0 allocated in category c, < 0 freed. */
void gaaw_ledger_add(gaaw_ledger *g, gaaw_mem_category_t c, int64_t bytes);
/* What gaaw_tensor_alloc asks for n elements of dtype (1 byte for none). */
int64_t gaaw_ledger_bytes(gaaw_dtype_t dtype, int64_t n);

/* What a data-parallel engine's hooks (gaaw_model_hooks) allocate and free,
 * replayed on the ledger at the same points of the walk. */
typedef struct {
  void *user;
  void (*before_layer)(gaaw_model_t m, int layer, gaaw_phase phase, gaaw_ledger *g, void *user);
  void (*after_layer)(gaaw_model_t m, int layer, gaaw_phase phase, gaaw_ledger *g, void *user);
  void (*begin_pass)(gaaw_model_t m, gaaw_phase phase, int chunk, gaaw_ledger *g, void *user);
  void (*end_pass)(gaaw_model_t m, gaaw_phase phase, int chunk, gaaw_ledger *g, void *user);
} gaaw_mem_hooks;

typedef struct gaaw_mem_walk gaaw_mem_walk;
/* For the layers' memory functions (gaaw_layer_ops.memory), in the order their
 * forward and backward allocate: the microbatch's frame (batch, seq, rows,
 * defer_weights; no tensors); the call's output (forward's *y, backward's *dx:
 * layer 0, the embedding, has none); a saved slot, and one freed before
 * backward (selective recomputation); a scratch temporary (freed at the call's
 * end); a linear's backward (with a split backward, its copies of dy and x wait
 * for W); the bytes of n activations in the compute dtype, of n f32 statistics. */
const gaaw_frame *gaaw_mem_frame(const gaaw_mem_walk *w);
void gaaw_mem_output(gaaw_mem_walk *w, int64_t bytes);
void gaaw_mem_save(gaaw_mem_walk *w, int64_t bytes);
void gaaw_mem_unsave(gaaw_mem_walk *w, int64_t bytes);
void gaaw_mem_scratch(gaaw_mem_walk *w, int64_t bytes);
/* bytes allocated and freed again inside the call (a helper's own temporaries) */
void gaaw_mem_transient(gaaw_mem_walk *w, int64_t bytes);
/* the same of a message buffer (GAAW_MEM_COMMUNICATION) */
void gaaw_mem_comm_transient(gaaw_mem_walk *w, int64_t bytes);
void gaaw_mem_linear_backward(gaaw_mem_walk *w, int64_t dy_bytes, int64_t x_bytes);
/* After a linear's backward whose weight (slot w_slot) or bias (b_slot, -1: none)
 * has blocks replicated over tp (grouped-query attention with tp > kv_heads):
 * weight_grads.c's hold_replicas and sum_replicas. Not walked under a split
 * backward, where W runs them. */
void gaaw_mem_replica_sums(gaaw_mem_walk *w, const gaaw_layer *l, int w_slot, int b_slot);
int64_t gaaw_mem_act(gaaw_model_t m, int64_t n);
int64_t gaaw_mem_stat(int64_t n);
/* One training step's device bytes on a planned model's rank (gaaw_model_plan):
 * gaaw_model_forward_backward of `microbatches` microbatches of (batch, seq)
 * through the schedule, as pipeline.c and model_pass.c run it, onto g, with the
 * engine's hooks (NULL: none); ring_bytes: option allreduce_ring_bytes, and
 * *tp_scratch the tp communicator's scratch so far (for the partial gradients'
 * reduction; it persists from step to step: start from 0). GAAW_ERR_UNSUPPORTED for a model kind whose layers
 * have no memory function. Not collective. */
gaaw_status_t gaaw_model_memory_step(gaaw_model_t m, int microbatches, int batch, int seq, int64_t ring_bytes,
                                     int64_t *tp_scratch, const gaaw_mem_hooks *hooks, gaaw_ledger *g);
/* The elements of layer i's partial gradients (sequence parallelism, an MoE MLP at tp > 1), which its
 * backward packs and reduces over tp (model_pass.c). */
int64_t gaaw_pass_partial_numel(gaaw_model_t m, int layer);

/* ---- names (model_names.c) and normalisation (normalization.c) */
/* "layernorm", "rmsnorm"; "gelu", "swiglu", "none" ("invalid" otherwise), for messages. */
const char *gaaw_norm_name(gaaw_norm_t norm);
const char *gaaw_activation_name(gaaw_activation_t activation);
const char *gaaw_loss_name(gaaw_loss_t loss);

/* Normalisation (parallel/normalization.c): whether statistics exist; host data
 * (rows, C) of the inputs (outputs 0) or outputs (1) into (v - mean) / std; model
 * outputs (rows, C) in place back to y std + mean, or (gradient 1) a gradient of
 * them into d std; the statistics freed. */
int gaaw_normalization_active(gaaw_model_t m);
void gaaw_normalize(gaaw_model_t m, int outputs, const float *v, int64_t rows, float *out);
void gaaw_denormalize_outputs(gaaw_model_t m, int64_t rows, float *y, int gradient);
void gaaw_normalization_free(gaaw_model_t m);
/* Replaces the statistics (a checkpoint's): count, and each feature's mean and M2
 * (inputs + outputs of them); mean NULL or count 0: none. */
gaaw_status_t gaaw_normalization_set(gaaw_model_t m, double count, const double *mean, const double *m2);

#endif
