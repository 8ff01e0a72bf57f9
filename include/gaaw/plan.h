/* gaaw plan: the layout of a training job chosen before it runs.
 *
 * A cost model predicts one training step (gaaw_model_forward_backward of the
 * step's microbatches, then gaaw_optimizer_step) of a GPT on a layout (dp x pp x
 * cp x tp, virtual stages, microbatch rows, schedule, ZeRO stage, recompute,
 * offload, cp_kind)
 * on a cluster, and a planner searches the layouts of a job for the fastest ones
 * that fit the devices' memory:
 *
 * - compute: per layer, the FLOPs of its GEMMs (DESIGN.md section 10) over the
 *   device's rate for that GEMM shape (a throughput curve, calibrated on this
 *   machine's backend by gaaw_plan_calibrate or given for a named device), and its
 *   elementwise work (norms, activations, softmax, the optimizer) over the device's
 *   memory bandwidth; recompute re-runs forward work in backward;
 * - communication: an alpha-beta model per collective (ring all-reduce,
 *   reduce-scatter, all-gather, point-to-point) on the group's links, intra-node
 *   or inter-node from the rank order (tp fastest, then cp, dp, pp); context
 *   parallelism's ring sends the next K and V blocks while the current one
 *   computes (a ring step takes the longer of the two), its all-to-all (cp_kind
 *   a2a) is not hidden;
 * - the pipeline: the schedule simulator of gaaw/schedule.h fed with the per-chunk
 *   costs of F, B, W and of a send; data-parallel reductions (over dp x cp) hidden behind backward
 *   except the last bucket's, ZeRO 3 gathers behind the previous layer's compute;
 *   offload adds the optimizer's host update and its PCIe or NVMe traffic;
 * - memory: gaaw_memory_estimate (gaaw/estimate.h), the same ledger the runtime is
 *   checked against.
 *
 * A cluster may mix devices of different speeds (gaaw_plan_cluster_t.speeds): the
 * planner then gives each data-parallel rank a share of the global batch in
 * proportion to its replica's speed (gaaw_plan_shares), and the optimizer weights
 * each rank's gradient by its share of the rows, so the step is the exact mean over
 * the global batch (gaaw/model.h, gaaw_batch_t).
 *
 * Nothing here allocates device memory, and only gaaw_plan_calibrate is collective. */
#ifndef GAAW_PLAN_H
#define GAAW_PLAN_H

#include <stdint.h>
#include "gaaw/config.h"
#include "gaaw/estimate.h"
#include "gaaw/model.h"
#include "gaaw/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The pipeline schedules, as the option pp_schedule names them (gaaw/schedule.h):
 * the values and their order are the runtime's. */
typedef enum {
  GAAW_PLAN_GPIPE = 0,       /* "gpipe" */
  GAAW_PLAN_1F1B = 1,        /* "1f1b" */
  GAAW_PLAN_INTERLEAVED = 2, /* "interleaved" (virtual_stages >= 2) */
  GAAW_PLAN_ZB_H1 = 3        /* "zb-h1" */
} gaaw_plan_schedule_t;
#define GAAW_PLAN_SCHEDULE_COUNT 4

/* The pp_schedule value of a gaaw_plan_schedule_t ("1f1b"), "?" outside the list.
 * Not collective. */
const char *gaaw_plan_schedule_name(int schedule);

/* A device's GEMM throughput at one shape: C (m, n) = A (m, k) B (k, n). */
typedef struct {
  double m, n, k;
  double tflops;
} gaaw_plan_gemm_point_t;

#define GAAW_PLAN_GEMM_POINTS 16
#define GAAW_PLAN_NAME_MAX 32

/* A kind of device. The rate of a GEMM of another shape is interpolated from the
 * points (log of the FLOPs, then of the smallest dimension); without points it is
 * peak_tflops x gemm_efficiency, reached by large GEMMs and falling for small ones. */
typedef struct {
  char name[GAAW_PLAN_NAME_MAX]; /* "h100-80g", "host", ... */
  double peak_tflops;            /* dense peak at the compute dtype (the MFU's denominator) */
  double memory_bytes;           /* what one device holds */
  double memory_gbps;            /* its memory bandwidth (elementwise kernels) */
  double host_link_gbps;         /* to host memory (offload), per direction */
  double gemm_efficiency;        /* the fraction of peak that large GEMMs reach, 0..1 */
  int gemm_points;               /* 0..GAAW_PLAN_GEMM_POINTS used in gemm[] */
  gaaw_plan_gemm_point_t gemm[GAAW_PLAN_GEMM_POINTS];
} gaaw_plan_device_t;

/* The cluster a job runs on: nodes x devices_per_node ranks (world order: node
 * after node), links in GB/s per direction and latencies in microseconds. */
typedef struct {
  int nodes, devices_per_node;
  gaaw_plan_device_t device; /* every device, unless speeds says otherwise */
  double intra_node_gbps, inter_node_gbps;
  double intra_node_latency_us, inter_node_latency_us;
  double host_update_gbps;   /* the CPU optimizer's bandwidth (offload_optimizer host or nvme) */
  double nvme_gbps;          /* per node, read and write (offload nvme) */
  /* NULL: every device alike; otherwise world size entries, each rank's speed relative
   * to `device` (1 = as fast, 0.5 = half as fast: its compute takes twice as long) */
  const double *speeds;
} gaaw_plan_cluster_t;

/* One layout of a training step, and what the cost model predicts for it. */
typedef struct {
  int dp, pp, tp;
  int virtual_stages;
  int microbatch;      /* rows (sequences) per microbatch per dp rank (the even share) */
  int microbatches;    /* per step: global_batch = dp x microbatch x microbatches */
  int schedule;        /* gaaw_plan_schedule_t: the pp_schedule option's values */
  int zero_stage;      /* 0..3 */
  int recompute;       /* 0 none, 1 selective, 2 full (option recompute) */
  int offload;         /* 0 none, 1 host, 2 nvme (option offload_optimizer) */
  int cp;              /* context-parallel ranks per sequence (0 or 1: none); world = dp x pp x cp x tp */
  int cp_kind;         /* 0 ring, 1 a2a (option cp_kind); read only when cp > 1 */
  /* predictions */
  double memory_bytes_per_rank; /* the largest rank's device peak (gaaw_memory_estimate) */
  double step_seconds;
  double compute_seconds;  /* the slowest rank's busy time */
  double bubble_seconds;   /* pipeline idle time on that rank */
  double comm_seconds;     /* communication not hidden behind compute */
  double optimizer_seconds;
  double tokens_per_s, tflops_per_device, mfu;
} gaaw_plan_layout_t;

/* What the planner searches, and for which job. Lists are bit masks of the values
 * allowed (bit i set: value i allowed; 0: all). */
typedef struct {
  gaaw_gpt_config_t model;  /* max_seq is the sequence length trained */
  int64_t global_batch;     /* sequences per optimizer step */
  unsigned zero_stages;     /* bits 0..3 */
  unsigned schedules;       /* bits of gaaw_plan_schedule_t */
  unsigned recompute;       /* bits 0..2 */
  unsigned offload;         /* bits 0..2 */
  int tp, pp;               /* 0: searched; > 0: only this value */
  int max_layouts;          /* how many of the best to keep; 0 = 10 */
  int cp;                   /* 0: searched (every cp with seq divisible by 2 cp); > 0: only this value */
  unsigned cp_kinds;        /* bits 0 ring, 1 a2a; 0: both */
} gaaw_plan_request_t;

/* A family of layouts the planner rejected, with the reason. */
typedef struct {
  int dp, pp, tp, cp;
  char reason[160];
} gaaw_plan_rejected_t;

typedef struct gaaw_plan_s *gaaw_plan_t;

/* The device of a name: "a100-80g", "h100-80g", "h200" (bf16 dense peaks of 312,
 * 989 and 989 TFLOP/s, 80, 80 and 141 GB); GAAW_ERR_INVALID_ARG naming the known
 * ones otherwise. Not collective. */
gaaw_status_t gaaw_plan_device_named(gaaw_context_t ctx, const char *name, gaaw_plan_device_t *device);

/* Measures ctx's backend as the cost model needs it: GEMM rates at shapes around
 * those of model on layouts of this world, elementwise bandwidth, and the
 * alpha-beta of all-reduce and point-to-point on the world, every rank at once (so
 * that shared cores are measured shared). Fills *cluster as one node of world
 * size devices. Collective over world; a few seconds. */
gaaw_status_t gaaw_plan_calibrate(gaaw_context_t ctx, const gaaw_gpt_config_t *model, gaaw_plan_cluster_t *cluster);

/* The prediction of one layout (its dp, pp, tp, cp, cp_kind, virtual_stages,
 * microbatch, microbatches, schedule, zero_stage, recompute and offload are read;
 * the rest is filled; memory_bytes_per_rank from gaaw_memory_estimate).
 * GAAW_ERR_INVALID_ARG when the layout does not divide the model (cp: seq by 2 cp;
 * a2a: a tp rank's heads by cp), the batch (dp x microbatch x microbatches =
 * global_batch: cp ranks share their sequences) or the cluster (dp x pp x cp x tp =
 * nodes x devices_per_node). Not collective. */
gaaw_status_t gaaw_plan_predict(gaaw_context_t ctx, const gaaw_plan_request_t *request,
                                const gaaw_plan_cluster_t *cluster, gaaw_plan_layout_t *layout);

/* Searches the layouts of request on cluster: *plan holds the best that fit, fastest
 * first, and the rejected families. gaaw_memory_estimate takes milliseconds per rank
 * for a 100B model, too slow for the tens of thousands of layouts of a 1000-device
 * job, so the search prunes with an analytic guess of the memory (model states and
 * activations in flight; a layout guessed at over 1.25 times the device is dropped)
 * and a lower bound of the step, times the rest in the order of that bound with the
 * simulator, and asks gaaw_memory_estimate only about the layouts that would enter
 * the best max_layouts (at most 400 of them): every layout in *plan fits by the
 * ledger, and its memory_bytes_per_rank is the ledger's. doc/plan.md has the
 * details. Not collective. */
gaaw_status_t gaaw_plan_create(gaaw_context_t ctx, const gaaw_plan_request_t *request,
                               const gaaw_plan_cluster_t *cluster, gaaw_plan_t *plan);
int gaaw_plan_count(gaaw_plan_t plan);
gaaw_status_t gaaw_plan_layout(gaaw_plan_t plan, int i, gaaw_plan_layout_t *layout);
int gaaw_plan_rejected_count(gaaw_plan_t plan);
gaaw_status_t gaaw_plan_rejected(gaaw_plan_t plan, int i, gaaw_plan_rejected_t *rejected);
void gaaw_plan_destroy(gaaw_plan_t *plan);

/* Sets layout's options on cfg (tp, pp, dp, cp, cp_kind, virtual_stages,
 * microbatches, pp_schedule, recompute, offload_optimizer); the ZeRO stage and the rows per
 * microbatch are the caller's (gaaw_optimizer_config_t, gaaw_batch_t). */
gaaw_status_t gaaw_plan_apply(const gaaw_plan_layout_t *layout, gaaw_config_t cfg);

/* Splits rows over n consumers in proportion to speeds (each > 0): out[i] >= 1
 * rows, summing to rows, by largest remainder (ties to the lower index), so equal
 * speeds give an even split where rows divides. GAAW_ERR_INVALID_ARG when rows < n
 * or a speed is not > 0. Not collective. */
gaaw_status_t gaaw_plan_shares(gaaw_context_t ctx, int n, const double *speeds, int64_t rows, int64_t *out);

/* The rows per microbatch of each of layout's dp replicas, rows[0..dp): what a job
 * passes as gaaw_batch_t.batch on the ranks of replica d. Without cluster->speeds
 * every replica has layout->microbatch; with them, the gaaw_plan_shares of dp x
 * microbatch rows by each replica's speed (its slowest rank's, world rank = ((pp_rank
 * x dp + d) x cp + cp_rank) x tp + tp_rank), the split the cost model times.
 * GAAW_ERR_INVALID_ARG for a NULL argument, a layout whose dp x pp x cp x tp is not the cluster's world, or a
 * speed that is not > 0. Not collective. */
gaaw_status_t gaaw_plan_replica_rows(gaaw_context_t ctx, const gaaw_plan_cluster_t *cluster,
                                     const gaaw_plan_layout_t *layout, int64_t *rows);

#ifdef __cplusplus
}
#endif
#endif
