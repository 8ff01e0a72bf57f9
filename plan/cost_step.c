/* One training step of a layout (gaaw_plan_predict):
 *
 *   step = pipeline makespan + exposed dp communication + optimizer
 *
 * - chunk costs: a chunk runs L/(p v) blocks; a block's F, B, W (cost_compute.c)
 *   plus its tp collectives (2 all-reduces of N C elements forward, 2 backward, 2
 *   more backward with full recompute, N = the rank's b s / cp tokens; with
 *   sequence parallelism all-gathers and reduce-scatters of the same time) and its
 *   cp exchanges (cost_cp.c); the LM head, loss and embedding spread over
 *   the p v chunks, as the runtime's balanced stage cut spreads them; ZeRO 3's
 *   per-block all-gathers (forward and backward) and reduce-scatter run behind the
 *   previous block's compute, so a block takes the longer of the two, and a chunk's
 *   first block waits for its gather, forward and backward; a message
 *   between stages is N C elements on the pp neighbours' link;
 * - the makespan: the schedule (gaaw_sched_create) timed by the simulator with
 *   those costs (gaaw_sched_verify); compute_seconds is the busiest rank's busy time,
 *   bubble_seconds the rest of the makespan;
 * - dp gradients (the largest stage's parameters, in the compute dtype) reduce over
 *   dp x cp (cp ranks hold the same weights, and ZeRO shards over both) while
 *   the step's last microbatch runs backward (stage 2 without a pipeline: every
 *   microbatch), all but the last bucket hidden behind that backward; stages 1 and
 *   2 all-gather the updated parameters after the step, not hidden;
 * - optimizer: AdamW over the rank's shard, 24 bytes of fp32 state and two of the
 *   compute dtype per parameter at the memory bandwidth; offload host runs it at
 *   host_update_gbps and moves the gradients down and the parameters up the host
 *   link; nvme also reads and writes the 24 bytes at the node's nvme_gbps shared by
 *   its devices.
 * A cluster with speeds: a dp replica runs at its slowest rank's speed, and the
 * planner gives it the share of each microbatch's dp x microbatch rows that
 * gaaw_plan_shares sizes by those speeds (what a job of uneven rows then passes as
 * gaaw_batch_t.batch on each replica); every compute runs at the pace of the
 * replica whose rows take longest for its speed. */
#include <math.h>
#include <stdlib.h>

#include "plan/plan_impl.h"

#define PLAN_BUCKET_BYTES 16777216.0 /* zero_bucket_bytes' default */

/* What a layout's step is made of, before the simulator. */
typedef struct {
  gaaw_sched_cost_t chunk; /* one chunk, one microbatch */
  double dp_exposed;       /* dp communication not hidden */
  double optimizer;
} step_parts;

/* How much longer than on `device` the slowest replica's compute takes: with speeds,
 * max over dp replicas of rows_r / (microbatch x speed_r), rows_r its
 * gaaw_plan_replica_rows; 1 without speeds. */
static double replica_pace(const gaaw_plan_cluster_t *c, const gaaw_plan_layout_t *l)
{
  if (!c->speeds) return 1;
  int64_t *rows = malloc(sizeof(int64_t) * (size_t)l->dp);
  double pace = 0;
  if (rows && gaaw_plan_replica_rows(NULL, c, l, rows) == GAAW_SUCCESS)
    for (int d = 0; d < l->dp; d++) pace = fmax(pace, (double)rows[d] / (l->microbatch * plan_replica_speed(c, l, d)));
  else /* no memory: the slowest rank on the even share */
    for (int i = 0; i < c->nodes * c->devices_per_node; i++) pace = fmax(pace, 1 / c->speeds[i]);
  free(rows);
  return pace;
}

/* The largest stage's parameters on one rank of its tp group. */
static double rank_params(const plan_shape *sh, const gaaw_plan_layout_t *l)
{
  return sh->L / l->pp * sh->block_params / l->tp + sh->V * sh->h / l->tp + sh->s * sh->h;
}

static void step_parts_of(const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c, const plan_shape *sh,
                          const gaaw_plan_layout_t *l, step_parts *out)
{
  const gaaw_plan_device_t *d = &c->device;
  double slow = replica_pace(c, l), cp = l->cp > 1 ? l->cp : 1, replicas = l->dp * cp;
  double N = (double)l->microbatch * sh->s / cp, e = sh->e, nb = sh->L / (l->pp * l->virtual_stages);
  plan_link tpl, dpl, ppl;
  plan_link_of(c, l->tp, 1, &tpl);
  plan_link_of(c, (int)replicas, l->tp, &dpl);
  plan_link_of(c, 2, (int)(l->tp * replicas), &ppl);

  plan_work blk, head;
  plan_block_work(sh, d, l, r->model.sequence_parallel, &blk);
  plan_head_work(sh, d, l, &head);
  double ar = plan_allreduce_seconds(&tpl, N * sh->h * e), cpf, cpb;
  plan_cp_exchange(sh, c, l, &cpf, &cpb);
  double f = blk.f * slow + 2 * ar + cpf, b = blk.b * slow + (l->recompute == 2 ? 4 : 2) * ar + cpb;
  double w = blk.w * slow;
  double first_gather = 0; /* ZeRO 3: the chunk's first block has no block before it to hide behind */
  if (l->zero_stage == 3) {
    double piece = sh->block_params / l->tp * e;
    double gather = plan_all_gather_seconds(&dpl, piece), scatter = plan_reduce_scatter_seconds(&dpl, piece);
    f = fmax(f, gather);
    b += fmax(0, gather + scatter - (b + w));
    first_gather = gather;
  }
  /* the head's logits all-gather nothing (vocab-parallel loss: three small all-reduces);
   * the embedding's lookup all-reduces N C elements forward */
  double spread = ((head.f + head.b + head.w) * slow + ar) / (l->pp * l->virtual_stages);
  out->chunk.f = nb * f + spread / 2 + first_gather;
  out->chunk.b = nb * b + spread / 2 + first_gather;
  out->chunk.w = nb * w;
  out->chunk.p2p = plan_p2p_seconds(&ppl, N * sh->h * e / (r->model.sequence_parallel ? l->tp : 1));

  double psi = rank_params(sh, l), grads = psi * e;
  double window = l->virtual_stages * (out->chunk.b + out->chunk.w);
  double bucket = fmin(grads, PLAN_BUCKET_BYTES);
  double exposed = 0;
  if (l->zero_stage <= 1)
    exposed = fmax(0, plan_allreduce_seconds(&dpl, grads) - window) + plan_allreduce_seconds(&dpl, bucket);
  else if (l->zero_stage == 2)
    exposed = (l->pp > 1 ? 1 : l->microbatches) * fmax(0, plan_reduce_scatter_seconds(&dpl, grads) - window) +
              plan_reduce_scatter_seconds(&dpl, bucket);
  else
    exposed = plan_reduce_scatter_seconds(&dpl, bucket);
  if (l->zero_stage == 1 || l->zero_stage == 2) exposed += plan_all_gather_seconds(&dpl, psi * e);
  out->dp_exposed = exposed;

  double shard = l->zero_stage == 0 ? psi : psi / replicas, state = 24 + 2 * e;
  if (l->offload == 0)
    out->optimizer = shard * state / (d->memory_gbps * PLAN_GB);
  else {
    double host = shard * state / (c->host_update_gbps * PLAN_GB) + shard * 2 * e / (d->host_link_gbps * PLAN_GB);
    if (l->offload == 2) host += shard * 24 / (c->nvme_gbps * PLAN_GB / c->devices_per_node);
    out->optimizer = host;
  }
}

double plan_step_bound(const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c, const plan_shape *sh,
                       const gaaw_plan_layout_t *l)
{
  step_parts sp;
  step_parts_of(r, c, sh, l, &sp);
  double busy = (double)l->microbatches * l->virtual_stages * (sp.chunk.f + sp.chunk.b + sp.chunk.w);
  /* the last stage's first forward waits for p - 1 chunk forwards upstream */
  return busy + (l->pp - 1) * sp.chunk.f + sp.dp_exposed + sp.optimizer;
}

gaaw_status_t plan_step_time(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c,
                             const plan_shape *sh, gaaw_sched_t *sched, gaaw_plan_layout_t *l)
{
  step_parts sp;
  step_parts_of(r, c, sh, l, &sp);
  gaaw_sched_t *own = NULL;
  gaaw_sched_report_t rep;
  if (!sched) GAAW_CHECK(gaaw_sched_create(ctx, l->schedule, l->pp, l->microbatches, l->virtual_stages, &own));
  gaaw_status_t st = gaaw_sched_verify(ctx, sched ? sched : own, &sp.chunk, &rep);
  double busy = 0;
  for (int i = 0; st == GAAW_SUCCESS && i < l->pp; i++) busy = fmax(busy, (sched ? sched : own)->ranks[i].busy);
  gaaw_sched_destroy(&own);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  l->compute_seconds = busy;
  l->bubble_seconds = rep.makespan - busy;
  l->comm_seconds = sp.dp_exposed;
  l->optimizer_seconds = sp.optimizer;
  l->step_seconds = rep.makespan + sp.dp_exposed + sp.optimizer;
  double world = (double)l->dp * l->pp * (l->cp > 1 ? l->cp : 1) * l->tp;
  l->tokens_per_s = (double)r->global_batch * sh->s / l->step_seconds;
  l->tflops_per_device = sh->flops_per_token * l->tokens_per_s / world / PLAN_TFLOP;
  l->mfu = l->tflops_per_device / c->device.peak_tflops;
  return GAAW_SUCCESS;
}

gaaw_status_t plan_layout_check(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c,
                                const gaaw_plan_layout_t *l)
{
  const gaaw_gpt_config_t *g = &r->model;
  GAAW_ARG_CHECK(ctx, l->dp >= 1 && l->pp >= 1 && l->tp >= 1 && l->virtual_stages >= 1 && l->microbatch >= 1 &&
                        l->microbatches >= 1,
                 "layout sizes must be >= 1: dp %d, pp %d, tp %d, virtual_stages %d, microbatch %d, microbatches %d",
                 l->dp, l->pp, l->tp, l->virtual_stages, l->microbatch, l->microbatches);
  GAAW_ARG_CHECK(ctx, l->cp >= 0 && l->cp_kind >= 0 && l->cp_kind <= 1,
                 "layout cp %d must be >= 0 (0 or 1: none) and cp_kind %d 0 (ring) or 1 (a2a)", l->cp, l->cp_kind);
  int cp = l->cp > 1 ? l->cp : 1;
  long long world = (long long)c->nodes * c->devices_per_node;
  GAAW_ARG_CHECK(ctx, (long long)l->dp * l->pp * cp * l->tp == world,
                 "dp %d x pp %d x cp %d x tp %d is not the cluster's %lld devices (%d nodes x %d)", l->dp, l->pp, cp,
                 l->tp, world, c->nodes, c->devices_per_node);
  GAAW_ARG_CHECK(ctx, g->max_seq % (2 * cp) == 0 || cp == 1,
                 "seq %d is not divisible by 2 x cp = %d (each cp rank holds two pieces of a sequence)", g->max_seq,
                 2 * cp);
  GAAW_ARG_CHECK(ctx, cp == 1 || l->cp_kind == 0 || (g->heads % l->tp == 0 && (g->heads / l->tp) % cp == 0),
                 "cp_kind a2a at cp %d: the %d heads of a tp rank (heads %d / tp %d) must divide by cp", cp,
                 g->heads / l->tp, g->heads, l->tp);
  GAAW_ARG_CHECK(ctx, g->heads % l->tp == 0, "heads %d are not divisible by tp %d", g->heads, l->tp);
  int kv = g->kv_heads > 0 ? g->kv_heads : g->heads;
  GAAW_ARG_CHECK(ctx, kv % l->tp == 0 || l->tp % kv == 0, "kv_heads %d and tp %d: one must divide the other", kv,
                 l->tp);
  GAAW_ARG_CHECK(ctx, (g->ffn > 0 ? g->ffn : 4 * g->dim) % l->tp == 0, "ffn %d is not divisible by tp %d",
                 g->ffn > 0 ? g->ffn : 4 * g->dim, l->tp);
  GAAW_ARG_CHECK(ctx, g->layers % (l->pp * l->virtual_stages) == 0,
                 "layers %d are not divisible by pp %d x virtual_stages %d", g->layers, l->pp, l->virtual_stages);
  GAAW_ARG_CHECK(ctx, (int64_t)l->dp * l->microbatch * l->microbatches == r->global_batch,
                 "dp %d x microbatch %d x microbatches %d is not the global batch %lld", l->dp, l->microbatch,
                 l->microbatches, (long long)r->global_batch);
  GAAW_ARG_CHECK(ctx, l->zero_stage >= 0 && l->zero_stage <= 3, "zero_stage %d must be 0..3", l->zero_stage);
  GAAW_ARG_CHECK(ctx, l->recompute >= 0 && l->recompute <= 2, "recompute %d must be 0, 1 or 2", l->recompute);
  GAAW_ARG_CHECK(ctx, l->offload >= 0 && l->offload <= 2, "offload %d must be 0, 1 or 2", l->offload);
  GAAW_CHECK(gaaw_sched_check(ctx, l->schedule, l->pp, l->microbatches, l->virtual_stages));
  return GAAW_SUCCESS;
}

/* The request and the cluster, before any layout. */
static gaaw_status_t check_job(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c)
{
  const gaaw_gpt_config_t *g = &r->model;
  GAAW_ARG_CHECK(ctx, g->layers >= 1 && g->heads >= 1 && g->dim >= 1 && g->vocab >= 1 && g->max_seq >= 1,
                 "model sizes must be >= 1: layers %d, heads %d, dim %d, vocab %d, max_seq %d", g->layers, g->heads,
                 g->dim, g->vocab, g->max_seq);
  GAAW_ARG_CHECK(ctx, g->dim % g->heads == 0, "dim %d is not divisible by heads %d", g->dim, g->heads);
  GAAW_ARG_CHECK(ctx, r->global_batch >= 1, "global_batch must be >= 1, got %lld", (long long)r->global_batch);
  GAAW_ARG_CHECK(ctx, c->nodes >= 1 && c->devices_per_node >= 1, "nodes %d and devices_per_node %d must be >= 1",
                 c->nodes, c->devices_per_node);
  const gaaw_plan_device_t *d = &c->device;
  GAAW_ARG_CHECK(ctx, d->peak_tflops > 0 && d->memory_bytes > 0 && d->memory_gbps > 0,
                 "device '%s': peak_tflops %g, memory_bytes %g and memory_gbps %g must be > 0", d->name,
                 d->peak_tflops, d->memory_bytes, d->memory_gbps);
  GAAW_ARG_CHECK(ctx, d->gemm_points > 0 || (d->gemm_efficiency > 0 && d->gemm_efficiency <= 1),
                 "device '%s': gemm_efficiency %g must be in (0, 1] without gemm points", d->name, d->gemm_efficiency);
  GAAW_ARG_CHECK(ctx, c->intra_node_gbps > 0 && c->inter_node_gbps > 0,
                 "intra_node_gbps %g and inter_node_gbps %g must be > 0", c->intra_node_gbps, c->inter_node_gbps);
  if (c->speeds)
    for (int i = 0; i < c->nodes * c->devices_per_node; i++)
      GAAW_ARG_CHECK(ctx, c->speeds[i] > 0, "speeds[%d] = %g must be > 0", i, c->speeds[i]);
  return GAAW_SUCCESS;
}

/* Offload's rates, checked only when a layout offloads. */
static gaaw_status_t check_offload(gaaw_context_t ctx, const gaaw_plan_cluster_t *c, int offload)
{
  if (offload == 0) return GAAW_SUCCESS;
  GAAW_ARG_CHECK(ctx, c->host_update_gbps > 0 && c->device.host_link_gbps > 0,
                 "offload needs host_update_gbps %g and the device's host_link_gbps %g > 0", c->host_update_gbps,
                 c->device.host_link_gbps);
  GAAW_ARG_CHECK(ctx, offload != 2 || c->nvme_gbps > 0, "offload nvme needs nvme_gbps %g > 0", c->nvme_gbps);
  return GAAW_SUCCESS;
}

gaaw_status_t plan_job_check(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c,
                             int offload)
{
  GAAW_ARG_NOT_NULL(ctx, r);
  GAAW_ARG_NOT_NULL(ctx, c);
  GAAW_CHECK(check_job(ctx, r, c));
  GAAW_CHECK(check_offload(ctx, c, offload));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_plan_predict(gaaw_context_t ctx, const gaaw_plan_request_t *request,
                                const gaaw_plan_cluster_t *cluster, gaaw_plan_layout_t *layout)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, layout);
  GAAW_CHECK(plan_job_check(ctx, request, cluster, layout->offload));
  GAAW_CHECK(plan_layout_check(ctx, request, cluster, layout));
  plan_shape sh;
  plan_shape_of(request, &sh);
  GAAW_CHECK(plan_step_time(ctx, request, cluster, &sh, NULL, layout));
  GAAW_CHECK(plan_memory_estimate(ctx, request, layout, &layout->memory_bytes_per_rank));
  return GAAW_SUCCESS;
}
