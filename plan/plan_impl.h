/* plan/: what the files of the cost model and the planner share (gaaw/plan.h).
 *
 *   devices.c       the named devices
 *   cost_compute.c  a GPT block's and the LM head's work on one microbatch: GEMM
 *                   FLOPs over the device's rate for their shapes, elementwise bytes
 *                   over its memory bandwidth, recomputation
 *   cost_comm.c     alpha-beta times of the collectives and of a point-to-point
 *                   message on a group's links (intra- or inter-node)
 *   cost_cp.c       context parallelism's ring and all-to-all exchanges in a block
 *   cost_memory.c   the analytic memory bound the search prunes with, and the
 *                   ledger estimate (gaaw_memory_estimate) of a finalist
 *   cost_step.c     one step: the schedule simulator fed with per-chunk costs, the
 *                   dp reductions, the optimizer; gaaw_plan_predict
 *   search.c        gaaw_plan_create and the plan's accessors
 *   apply.c         gaaw_plan_apply
 *
 * Times are seconds, sizes bytes, rates bytes/s or FLOP/s inside plan/ (the public
 * structs speak GB/s, TFLOP/s and microseconds, converted at the edges). */
#ifndef GAAW_PLAN_IMPL_H
#define GAAW_PLAN_IMPL_H

#include "backends/runtime/error.h"
#include "gaaw/plan.h"
#include "parallel/schedule.h"

/* The job's sizes, derived once from a request. */
typedef struct {
  double h, s, a, f, fc1_out, V; /* dim, seq, heads, ffn, c_fc outputs (2 ffn for SwiGLU), vocab */
  double d, kv, q;               /* head width, key/value heads, query width a x d */
  double L;                      /* transformer blocks */
  double e;                      /* bytes per element of the compute dtype */
  double block_params;           /* parameters of one block (unsplit) */
  double embed_params;           /* token embedding (and untied head), position embedding, ln_f */
  double flops_per_token;        /* the model's: 6 N + 12 L s q (gaaw_model_flops_per_token) */
} plan_shape;

void plan_shape_of(const gaaw_plan_request_t *r, plan_shape *sh);

/* The work of one microbatch of `rows` sequences through one block or the head, on
 * a device of the tp group (seconds, tp communication excluded). */
typedef struct {
  double f;    /* forward */
  double b;    /* input gradient, with what recompute re-runs */
  double w;    /* weight gradient */
} plan_work;

/* The seconds of a GEMM C (m, n) = A (m, k) B (k, n), `count` times. */
double plan_gemm_seconds(const gaaw_plan_device_t *d, double m, double n, double k, double count);
/* One block on a rank of layout l (its tp, cp, cp_kind, microbatch and recompute). */
void plan_block_work(const plan_shape *sh, const gaaw_plan_device_t *d, const gaaw_plan_layout_t *l,
                     int sequence_parallel, plan_work *out);
/* The forward seconds of a block's attention core (scores and context) on a rank of l. */
double plan_core_seconds(const plan_shape *sh, const gaaw_plan_device_t *d, const gaaw_plan_layout_t *l);
/* The LM head and the loss (last stage), and the embedding lookup (first stage). */
void plan_head_work(const plan_shape *sh, const gaaw_plan_device_t *d, const gaaw_plan_layout_t *l, plan_work *out);

/* A group of n ranks, stride apart in world order, starting at world rank 0. */
typedef struct {
  int n, stride;
  double bytes_per_s, latency_s;
} plan_link;

void plan_link_of(const gaaw_plan_cluster_t *c, int n, int stride, plan_link *l);
double plan_allreduce_seconds(const plan_link *l, double bytes);
double plan_reduce_scatter_seconds(const plan_link *l, double bytes); /* bytes: the whole buffer */
double plan_all_gather_seconds(const plan_link *l, double bytes);     /* bytes: the whole buffer */
double plan_p2p_seconds(const plan_link *l, double bytes);
double plan_all_to_all_seconds(const plan_link *l, double bytes); /* bytes: each rank's send buffer */

/* The seconds context parallelism's exchanges add to one block's forward and
 * backward on a microbatch, beyond the core's compute (cost_cp.c): 0 at cp 1. */
void plan_cp_exchange(const plan_shape *sh, const gaaw_plan_cluster_t *c, const gaaw_plan_layout_t *l,
                      double *forward, double *backward);

/* Replica d's speed under cluster c's speeds (not NULL): its slowest rank's
 * (plan_shares.c). */
double plan_replica_speed(const gaaw_plan_cluster_t *c, const gaaw_plan_layout_t *l, int d);

/* Device bytes of the largest rank guessed without the ledger (cost_memory.c): the
 * model states of DESIGN.md section 10 and the activations the schedule keeps in
 * flight, without workspaces. */
double plan_memory_guess(const gaaw_plan_request_t *r, const plan_shape *sh, const gaaw_plan_layout_t *l);
/* The ledger's device peak of the largest of the first and the last stage's rank 0
 * (gaaw_memory_estimate; other ranks of a stage differ at most in the vocabulary's
 * padding). */
gaaw_status_t plan_memory_estimate(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_layout_t *l,
                                   double *bytes);
/* The layout's options on cfg (gaaw_plan_apply without its argument checks). */
gaaw_status_t plan_layout_options(const gaaw_plan_layout_t *l, gaaw_config_t cfg);

/* Whether the layout divides the model, the batch and the cluster; GAAW_ERR_INVALID_ARG
 * naming the numbers otherwise. */
gaaw_status_t plan_layout_check(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c,
                                const gaaw_plan_layout_t *l);

/* The request and the cluster, not NULL and sound (with the rates offload needs when
 * offload > 0). */
gaaw_status_t plan_job_check(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c,
                             int offload);

/* The time side of gaaw_plan_predict (every field but memory_bytes_per_rank).
 * sched: a schedule of the layout's (kind, pp, microbatches, virtual stages) to
 * time, or NULL to generate one. */
gaaw_status_t plan_step_time(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c,
                             const plan_shape *sh, gaaw_sched_t *sched, gaaw_plan_layout_t *l);
/* A lower bound of step_seconds without the simulator: a rank's busy time, plus
 * the p - 1 chunk forwards the last stage waits for before its first one, plus the
 * exposed reductions and the optimizer. */
double plan_step_bound(const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c, const plan_shape *sh,
                       const gaaw_plan_layout_t *l);

#define PLAN_GB 1e9
#define PLAN_TFLOP 1e12

#endif
