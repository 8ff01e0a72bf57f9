/* ZeRO internals: the gradient/parameter buckets of a model, this rank's shard of
 * each, and the optimizer state that lives in the shard. */
#ifndef GAAW_ZERO_IMPL_H
#define GAAW_ZERO_IMPL_H

#include "gaaw/optimizer.h"
#include "parallel/model_impl.h"
#include "zero/store.h"

/* Where a bucket's gradient reduction over dp stands in the step. Stages 2 and 3
 * go back to LOCAL when one finishes (the piece is added to the shard). */
typedef enum { ZERO_LOCAL = 0, ZERO_REDUCING = 1, ZERO_REDUCED = 2 } zero_reduction;

/* The parameters of consecutive layers: the flat range [lo, lo + len) of the
 * model's buffers, len a multiple of dp. Dp rank r owns the piece
 * [lo + r * piece, + piece), stored at shard_at in the shard buffers. */
typedef struct {
  int layer;             /* the first of its layers */
  int64_t lo, len, piece, shard_at;
  int last_forward;      /* the last layer (in forward order) that uses these parameters */
  int last_backward;     /* the last layer in backward order (the lowest index) */
  gaaw_buffer_t whole_params; /* stage 3: gathered while in use */
  gaaw_buffer_t whole_grads;  /* stages 2, 3: during backward */
  gaaw_comm_request_t gather; /* stage 3: the all-gather of whole_params, until waited for */
  gaaw_comm_request_t reduce; /* the reduction of the gradients over dp, until waited for */
  zero_reduction reduction;
  int tied;              /* holds a tied weight's copy (pp > 1): reduced at the step only */
  int expert;            /* an MoE layer's experts split over ep (ep > 1): reduced and
                            sharded over expert-dp instead of dp x cp */
  int held;              /* stage 2, pp > 1: its whole gradient accumulates over the step's
                            microbatches, reduce-scattered after the last */
} zero_bucket;

/* Where stage 3 keeps this rank's parameter shard (option offload_params;
 * zero/param_shard.c). */
typedef enum { ZERO_PARAMS_DEVICE = 0, ZERO_PARAMS_HOST = 1, ZERO_PARAMS_NVME = 2 } zero_params_place;
typedef struct zero_param_shard zero_param_shard;

/* A run of a bucket's piece whose gradient counts in the global norm on this rank
 * (split parameters; replicated ones on tp rank 0 only). */
typedef struct {
  int bucket;
  int64_t at, len; /* relative to the piece */
} zero_norm_segment;

/* What the ZeRO stage and the optimizer kind mean for the code, decided once
 * (gaaw_zero_flags_of) instead of comparisons repeated where they act. */
typedef struct {
  int shard_state;  /* stages 1-3: the optimizer state and the update are this rank's pieces'
                       (else stage 0: whole buckets, all-reduced) */
  int shard_grads;  /* stages 2, 3: backward fills whole-bucket gradients, reduce-scattered into
                       shard_grads (else the model's gradient buffers) */
  int shard_params; /* stage 3: parameters gathered per bucket before use, freed after (else
                       the model's whole parameter buffers) */
  int moments;      /* f32 moments per element: 2 (AdamW's m, v) or 1 (SGD's momentum) */
} zero_flags;

zero_flags gaaw_zero_flags_of(const gaaw_optimizer_config_t *cfg);

struct gaaw_optimizer_s {
  gaaw_model_t model;
  gaaw_context_t ctx;
  gaaw_optimizer_config_t cfg;
  zero_flags is;                 /* from cfg (zero_stage, kind) */
  gaaw_comm_t dp, mp, world;
  /* dp: the dp-cp group, the ranks that hold the same weights (dp x cp of them):
   * gradients reduce, and shards are cut, over it */
  int dp_size, dp_rank;
  int replicas, replica_rank;    /* the data-parallel replicas (dp) and this rank's */
  gaaw_comm_t edp;               /* expert-dp (ep > 1): the ranks holding the same experts */
  int edp_size, edp_rank;
  gaaw_dtype_t dtype;            /* the model's compute dtype */
  int64_t bucket_bytes;          /* option zero_bucket_bytes */
  int keep_gathered;             /* stage 3, option zero_keep_gathered: buckets stay gathered
                                    from their first use in a step to the optimizer step */
  zero_bucket *buckets;
  int nbuckets;
  int *bucket_of_layer;          /* -1 for a layer without parameters (other than experts) */
  int *expert_bucket_of_layer;   /* the bucket of its experts at ep > 1; -1: none */
  int64_t shard_numel;           /* sum of the pieces (the whole buffer at stage 0) */
  zero_norm_segment *segments;
  int nsegments;
  gaaw_buffer_t shard_params;    /* stage 3, offload_params=none: this rank's pieces of the parameters */
  zero_params_place params_place; /* stage 3: where the shard is (option offload_params); DEVICE below */
  zero_param_shard *param_shard; /* stage 3: the shard (zero/param_shard.c); NULL below */
  gaaw_buffer_t shard_grads;     /* stages 2, 3: this rank's pieces of the reduced gradients */
  const zero_store_ops *store;   /* where the state below lives (option offload_optimizer) */
  void *store_state;             /* the store's own (host, nvme) */
  gaaw_buffer_t master;          /* device store: f32 master weights of the shard (bf16, f16 models) */
  gaaw_buffer_t moment1, moment2; /* device store: AdamW m and v (SGD: momentum in moment1) */
  /* progress */
  int backward_passes;           /* completed since the last step */
  int reductions_in_backward, gathers_ahead;           /* this step so far */
  int last_reductions_in_backward, last_gathers_ahead; /* the last step's */
  int64_t steps, updates;
  float lr, grad_norm, loss_scale;
  int skipped, good_steps, overflows_since_change;
  uint64_t comm_mark, last_comm;
  /* checkpoints (zero/checkpoint_*.c) register here: their state kept between
   * saves, the commit of a pending asynchronous save (run at the next step), and
   * how to free the state (at destroy) */
  struct gaaw_ckpt_state *ckpt;
  gaaw_status_t (*ckpt_commit)(gaaw_optimizer_t opt);
  void (*ckpt_free)(gaaw_optimizer_t opt);
};

/* "adamw", "sgd": the optimizer kind's name (messages, checkpoints). */
const char *gaaw_zero_kind_name(gaaw_optimizer_kind_t kind);

/* The dp traffic counted so far: the mark the next step's comm_bytes counts from
 * (zero/optimizer.c). */
void gaaw_zero_mark_comm(gaaw_optimizer_t opt);
/* The bytes counted on the dp x cp and expert-dp communicators so far. */
uint64_t gaaw_zero_comm_bytes(gaaw_optimizer_t opt);

/* cfg's fields are in range (GAAW_ERR_INVALID_ARG naming the first that is not). */
gaaw_status_t gaaw_zero_check_config(gaaw_context_t ctx, const gaaw_optimizer_config_t *cfg);
/* The buckets whose parameters layer i reads (its own, and a tied weight's); returns
 * how many (zero/hooks.c). */
int gaaw_zero_layer_buckets(gaaw_optimizer_t opt, int i, int *out);

/* The group bucket k's gradients reduce over and its shards are cut over: dp x cp,
 * or expert-dp for an expert bucket; this rank's index in it, and its size. */
static inline gaaw_comm_t gaaw_zero_comm(const struct gaaw_optimizer_s *opt, const zero_bucket *k)
{
  return k->expert ? opt->edp : opt->dp;
}
static inline int gaaw_zero_rank(const struct gaaw_optimizer_s *opt, const zero_bucket *k)
{
  return k->expert ? opt->edp_rank : opt->dp_rank;
}
static inline int gaaw_zero_size(const struct gaaw_optimizer_s *opt, const zero_bucket *k)
{
  return k->expert ? opt->edp_size : opt->dp_size;
}
/* Where this rank's piece of bucket k starts: in the bucket (its group rank x piece),
 * and in the model's flat table (the bucket's start at stage 0, which keeps it whole). */
static inline int64_t gaaw_zero_piece_at(const struct gaaw_optimizer_s *opt, const zero_bucket *k)
{
  return gaaw_zero_rank(opt, k) * k->piece;
}
static inline int64_t gaaw_zero_piece_lo(const struct gaaw_optimizer_s *opt, const zero_bucket *k)
{
  return k->lo + (opt->is.shard_state ? gaaw_zero_piece_at(opt, k) : 0);
}
/* The bucket holding parameter p (-1: none). */
int gaaw_zero_bucket_of_param(gaaw_optimizer_t opt, const gaaw_param *p);
/* Whether bucket b holds parameters of layer i (its own or its experts'). */
int gaaw_zero_layer_owns(gaaw_optimizer_t opt, int i, int b);

/* Bucket layout and shard offsets from the model's layers (opt->bucket_bytes). */
gaaw_status_t gaaw_zero_plan(gaaw_optimizer_t opt);
/* Takes the model's buffers over as the stage says, and installs the hooks. */
gaaw_status_t gaaw_zero_attach(gaaw_optimizer_t opt);
/* Gives back what the hooks hold (at destroy). */
void gaaw_zero_detach(gaaw_optimizer_t opt);

/* Stage 3: frees every gathered bucket (zero_keep_gathered keeps them over the
 * step's passes; the update changes the shards they came from). */
gaaw_status_t gaaw_zero_release_gathered(gaaw_optimizer_t opt);

/* Views, piece by piece (count elements at element `at` of buf). */
gaaw_tensor_t gaaw_zero_view(gaaw_buffer_t buf, gaaw_dtype_t dtype, int64_t at, int64_t count);
/* This rank's gradient piece of bucket b, and where the updated parameters go. */
gaaw_tensor_t gaaw_zero_grad_piece(gaaw_optimizer_t opt, int b);
gaaw_tensor_t gaaw_zero_param_piece(gaaw_optimizer_t opt, int b);

/* zero/param_shard.c: "none", "host", "nvme" -> zero_params_place, -1 otherwise;
 * the stage 3 shard's creation there (shard_params on the device) and its end. */
int gaaw_zero_params_place_parse(const char *name);
gaaw_status_t gaaw_zero_shard_create(gaaw_optimizer_t opt);
/* What the shard takes in each space (gaaw_mem_space_t: device, host, nvme) for a
 * planned optimizer (its params_place, buckets, dtype), without allocating. */
void gaaw_zero_shard_bytes(gaaw_optimizer_t opt, int64_t bytes[3]);
void gaaw_zero_shard_destroy(gaaw_optimizer_t opt);
/* Bucket b's parameter piece (piece elements of the compute dtype), wherever it
 * lives (below stage 3: the model's buffer), to and from host memory, and to and
 * from a device tensor of the piece's size. */
gaaw_status_t gaaw_zero_shard_read(gaaw_optimizer_t opt, int b, void *dst);
gaaw_status_t gaaw_zero_shard_write(gaaw_optimizer_t opt, int b, const void *src);
gaaw_status_t gaaw_zero_shard_to_device(gaaw_optimizer_t opt, int b, gaaw_tensor_t *dst);
gaaw_status_t gaaw_zero_shard_from_device(gaaw_optimizer_t opt, int b, const gaaw_tensor_t *src);

/* Completes this step's gradient reductions over dp (zero/hooks.c): those backward
 * started are waited for, the others run now. Afterwards every bucket's gradient
 * piece holds the sum over dp. Collective over dp. */
gaaw_status_t gaaw_zero_finish_reductions(gaaw_optimizer_t opt);
/* Stages 1, 2: the updated pieces all-gathered into the whole parameter buffer
 * (zero/step.c). Collective over dp. */
gaaw_status_t gaaw_zero_gather_params(gaaw_optimizer_t opt);

/* ZeRO on the memory estimate's ledger (zero/memory_zero.c): opt is planned
 * (gaaw_zero_plan over a planned model, its store chosen; no memory). What the
 * model and gaaw_optimizer_create allocate, then one step: the model's walk
 * (gaaw_model_memory_step) with what the hooks of hooks.c allocate and free at
 * each point, then what gaaw_optimizer_step does; ring_bytes is option
 * allreduce_ring_bytes, scratch whether the MPI communicator's scratch is device
 * memory (gaaw_mpi_scratch_bytes). store receives the store's bytes. Not
 * collective. */
gaaw_status_t gaaw_zero_memory_step(gaaw_optimizer_t opt, int microbatches, int batch, int seq, int64_t ring_bytes,
                                    int scratch, gaaw_ledger *g, zero_store_bytes *store);

#endif
