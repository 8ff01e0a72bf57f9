/* gaaw_memory_estimate (include/gaaw/estimate.h): the layout read from its
 * options, each rank asked about planned (the GPT without memory, its ZeRO
 * buckets, its optimizer store) and walked through one step on a ledger
 * (zero/memory_zero.c), and the answer by category and space. Not collective. */
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "backends/runtime/config_impl.h"
#include "gaaw/estimate.h"
#include "parallel/gpt.h"
#include "parallel/topology_impl.h"
#include "zero/zero_impl.h"

void gaaw_estimate_options_default(gaaw_estimate_options_t *o)
{
  if (!o) return;
  o->batch = 1;
  o->seq = 0;
  o->rank = -1;
}

const char *gaaw_mem_space_name(gaaw_mem_space_t space)
{
#define GAAW_SPACE_NAME_CASE(name, value, text) \
  case value: return text;
  switch ((int)space) { GAAW_MEMORY_SPACE_LIST(GAAW_SPACE_NAME_CASE) }
#undef GAAW_SPACE_NAME_CASE
  return "invalid";
}

/* The options of the layout the estimate reads, checked. */
typedef struct {
  gaaw_config_t cfg;
  int world;
  int64_t bucket_bytes, ring_bytes;
  int keep_gathered;
  const zero_store_ops *store;
  gaaw_model_layout model; /* all but the ranks */
  char pp_layout[256], schedule[32], recompute[32], offload[32], offload_params[32];
} estimate_layout;

static gaaw_status_t read_layout(gaaw_context_t ctx, gaaw_config_t cfg, estimate_layout *L)
{
  int64_t v = 0, tp = 0, pp = 0, dp = 0, cp = 1;
  char cp_kind[8] = "";
  memset(L, 0, sizeof *L);
  L->cfg = cfg;
  gaaw_status_t st = gaaw_config_check(cfg);
  if (st != GAAW_SUCCESS) GAAW_FAIL(ctx, st, "the layout's options: %s", gaaw_last_error(NULL));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "tp", &tp));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "pp", &pp));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "dp", &dp));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "cp", &cp));
  L->world = dp > 0 ? (int)(dp * tp * cp * pp) : ctx->size;
  GAAW_CHECK_CTX(ctx, gaaw_config_get_string(cfg, "cp_kind", cp_kind, sizeof cp_kind));
  L->model.cp_a2a = strcmp(cp_kind, "a2a") == 0;
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "virtual_stages", &v));
  L->model.chunks = (int)v;
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "microbatches", &v));
  L->model.microbatches = (int)v;
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "zero_bucket_bytes", &L->bucket_bytes));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_int(cfg, "allreduce_ring_bytes", &L->ring_bytes));
  GAAW_CHECK_CTX(ctx, gaaw_config_get_bool(cfg, "zero_keep_gathered", &L->keep_gathered));
  GAAW_ARG_CHECK(ctx, gaaw_config_get_string(cfg, "pp_layout", L->pp_layout, sizeof L->pp_layout) == GAAW_SUCCESS,
                 "pp_layout is longer than %zu characters", sizeof L->pp_layout - 1);
  GAAW_ARG_CHECK(ctx, gaaw_config_get_string(cfg, "pp_schedule", L->schedule, sizeof L->schedule) == GAAW_SUCCESS,
                 "pp_schedule is not a schedule's name");
  GAAW_ARG_CHECK(ctx, gaaw_config_get_string(cfg, "recompute", L->recompute, sizeof L->recompute) == GAAW_SUCCESS,
                 "recompute is not none, selective or full");
  GAAW_ARG_CHECK(ctx, gaaw_config_get_string(cfg, "offload_optimizer", L->offload, sizeof L->offload) == GAAW_SUCCESS,
                 "offload_optimizer is too long");
  GAAW_ARG_CHECK(ctx, gaaw_config_get_string(cfg, "offload_params", L->offload_params, sizeof L->offload_params) ==
                        GAAW_SUCCESS, "offload_params is too long");
  L->store = gaaw_zero_store_find(L->offload);
  GAAW_ARG_CHECK(ctx, L->store != NULL, "option offload_optimizer: no store '%s'", L->offload);
  gaaw_sched_kind_t kind;
  GAAW_CHECK(gaaw_sched_kind_parse(ctx, L->schedule, &kind));
  L->model.pp_kind = kind;
  L->model.recompute = gaaw_recompute_parse(L->recompute);
  L->model.pp_layout = L->pp_layout;
  GAAW_CHECK(gaaw_stages_check_text(ctx, L->pp_layout, (int)pp, L->model.chunks));
  return GAAW_SUCCESS;
}

/* Rank `rank` of the layout: its model planned, its optimizer planned, its step
 * walked onto g; store receives the store's bytes. */
static gaaw_status_t estimate_rank(gaaw_context_t ctx, const gaaw_gpt_config_t *model,
                                   const gaaw_optimizer_config_t *ocfg, const estimate_layout *L,
                                   const gaaw_estimate_options_t *o, int rank, gaaw_ledger *g,
                                   zero_store_bytes *store, int64_t shard[GAAW_MEM_SPACE_COUNT], gaaw_topology *t)
{
  GAAW_CHECK(gaaw_topology_plan_from(ctx, L->cfg, L->world, rank, t));
  gaaw_model_layout ml = L->model;
  ml.tp_size = t->tp;
  ml.tp_rank = t->tp_rank;
  ml.pp_size = t->pp;
  ml.pp_rank = t->pp_rank;
  ml.dp_size = t->dp;
  ml.cp_size = t->cp;
  ml.cp_rank = t->cp_rank;
  ml.ep_size = t->ep;
  ml.ep_rank = t->ep_rank;
  gaaw_model_t m = NULL;
  GAAW_CHECK(gaaw_model_plan_gpt(ctx, model, &ml, &m));
  struct gaaw_optimizer_s opt;
  memset(&opt, 0, sizeof opt);
  opt.model = m;
  opt.ctx = ctx;
  opt.cfg = *ocfg;
  opt.is = gaaw_zero_flags_of(ocfg);
  opt.dtype = m->dtype;
  opt.dp_size = t->dp * t->cp; /* the dp-cp group, ranked dp-major */
  opt.dp_rank = t->dp_rank * t->cp + t->cp_rank;
  opt.replicas = t->dp;
  opt.replica_rank = t->dp_rank;
  opt.edp_size = t->tp * t->cp * t->dp / t->ep; /* expert-dp: a stage's ranks at one ep coordinate */
  opt.edp_rank = t->edp_rank;
  opt.bucket_bytes = L->bucket_bytes;
  opt.keep_gathered = opt.is.shard_params && L->keep_gathered;
  opt.store = L->store;
  if (opt.is.shard_params) opt.params_place = (zero_params_place)gaaw_zero_params_place_parse(L->offload_params);
  gaaw_status_t st = GAAW_SUCCESS;
  if (o->seq > model->max_seq)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "options->seq %d is longer than the model's max_seq %d", o->seq, model->max_seq);
  if (st == GAAW_SUCCESS && t->cp > 1 && o->seq % (2 * t->cp) != 0)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "at cp = %d options->seq %d must divide by 2 x cp = %d", t->cp, o->seq, 2 * t->cp);
  if (st == GAAW_SUCCESS && model->sequence_parallel && ((int64_t)o->batch * o->seq / t->cp) % t->tp != 0)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "with sequence parallelism batch x seq / cp = %lld tokens must divide by tp = %d",
                          (long long)o->batch * o->seq / t->cp, t->tp);
  if (st == GAAW_SUCCESS) st = gaaw_zero_plan(&opt);
  if (st == GAAW_SUCCESS)
    st = gaaw_zero_memory_step(&opt, L->model.microbatches, o->batch, o->seq, L->ring_bytes,
                               ctx->device->host_ptr != NULL, g, store);
  if (st == GAAW_SUCCESS) gaaw_zero_shard_bytes(&opt, shard);
  free(opt.buckets);
  free(opt.bucket_of_layer);
  free(opt.segments);
  gaaw_model_destroy(&m);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* The answer for one rank. */
static void fill(gaaw_memory_estimate_t *out, int rank, const gaaw_topology *t, int stage, const gaaw_ledger *g,
                 const zero_store_bytes *store, const int64_t shard[GAAW_MEM_SPACE_COUNT])
{
  memset(out, 0, sizeof *out);
  out->rank = rank;
  out->dp = t->dp;
  out->tp = t->tp;
  out->pp = t->pp;
  out->zero_stage = stage;
  for (int c = 0; c < GAAW_MEM_CATEGORY_COUNT; c++) out->bytes[GAAW_SPACE_DEVICE][c] = (uint64_t)g->peak[c];
  out->total[GAAW_SPACE_DEVICE] = (uint64_t)g->total_peak;
  out->bytes[GAAW_SPACE_HOST][GAAW_MEM_OPTIMIZER] = (uint64_t)store->host;
  out->bytes[GAAW_SPACE_NVME][GAAW_MEM_OPTIMIZER] = (uint64_t)store->nvme;
  out->bytes[GAAW_SPACE_HOST][GAAW_MEM_PARAMS] = (uint64_t)shard[GAAW_SPACE_HOST]; /* offload_params */
  out->bytes[GAAW_SPACE_NVME][GAAW_MEM_PARAMS] = (uint64_t)shard[GAAW_SPACE_NVME];
  for (int s = GAAW_SPACE_HOST; s < GAAW_MEM_SPACE_COUNT; s++)
    for (int c = 0; c < GAAW_MEM_CATEGORY_COUNT; c++) out->total[s] += out->bytes[s][c];
}

gaaw_status_t gaaw_memory_estimate(gaaw_context_t ctx, const gaaw_gpt_config_t *model, gaaw_config_t layout,
                                   const gaaw_optimizer_config_t *optimizer, const gaaw_estimate_options_t *options,
                                   gaaw_memory_estimate_t *out)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, model);
  GAAW_ARG_NOT_NULL(ctx, optimizer);
  GAAW_ARG_NOT_NULL(ctx, options);
  GAAW_ARG_NOT_NULL(ctx, out);
  memset(out, 0, sizeof *out);
  GAAW_ARG_CHECK(ctx, options->batch >= 1, "options->batch must be >= 1, got %d", options->batch);
  GAAW_ARG_CHECK(ctx, options->seq >= 1, "options->seq must be >= 1, got %d", options->seq);
  GAAW_CHECK(gaaw_zero_check_config(ctx, optimizer));
  estimate_layout L;
  GAAW_CHECK(read_layout(ctx, layout ? layout : ctx->config, &L));
  GAAW_ARG_CHECK(ctx, options->rank >= -1 && options->rank < L.world,
                 "options->rank must be -1 (the largest) or a rank of the layout's %d, got %d", L.world,
                 options->rank);
  /* every rank of the answer's kind: the ranks of one (pp rank, tp rank) differ only
   * in their dp rank, which changes no byte, so the largest is among dp rank 0's */
  for (int rank = options->rank >= 0 ? options->rank : 0; rank < L.world; rank++) {
    gaaw_topology t;
    GAAW_CHECK(gaaw_topology_plan_from(ctx, L.cfg, L.world, rank, &t));
    if (options->rank < 0 && t.dp_rank != 0) continue;
    gaaw_ledger g;
    zero_store_bytes store;
    int64_t shard[GAAW_MEM_SPACE_COUNT];
    memset(&g, 0, sizeof g);
    GAAW_CHECK(estimate_rank(ctx, model, optimizer, &L, options, rank, &g, &store, shard, &t));
    if (options->rank >= 0 || rank == 0 || (uint64_t)g.total_peak > out->total[GAAW_SPACE_DEVICE])
      fill(out, rank, &t, optimizer->zero_stage, &g, &store, shard);
    if (options->rank >= 0) break;
  }
  return GAAW_SUCCESS;
}
