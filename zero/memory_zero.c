/* ZeRO on the memory estimate's ledger: what gaaw_optimizer_create, the hooks of
 * hooks.c and gaaw_optimizer_step allocate and free, replayed on a planned
 * optimizer (no memory) at the points of the model's walk (parallel/
 * model_memory.c) where the real hooks run. Each function below names the one it
 * mirrors; a change there must show here (tests/mpi/test_memory_estimate_np4
 * compares the two). */
#include <stdlib.h>
#include <string.h>

#include "gaaw/estimate.h"
#include "zero/zero_impl.h"

typedef struct {
  gaaw_optimizer_t opt;
  gaaw_ledger *g;
  int64_t ring_bytes, scratch[2]; /* option allreduce_ring_bytes; the dp (and expert-dp) communicator's
                                     scratch so far */
  int scratch_on_device;
  int backward_passes;
  char *resident, *open, *reducing, *held; /* per bucket: whole_params, whole_grads, reduction, held */
} zero_mem;

static int64_t bucket_bytes(const zero_mem *z, int b)
{
  return gaaw_ledger_bytes(z->opt->dtype, z->opt->buckets[b].len);
}

/* Bucket k's communicator's scratch grows to the largest asked for (gaaw_mpi_scratch). */
static void comm_scratch(zero_mem *z, const zero_bucket *k, gaaw_comm_op_t op, int64_t n)
{
  if (!z->scratch_on_device) return;
  int64_t need = (int64_t)gaaw_mpi_scratch_bytes(op, n, z->opt->dtype, gaaw_zero_size(z->opt, k), z->ring_bytes);
  int64_t *have = &z->scratch[k->expert];
  if (need <= *have) return;
  gaaw_ledger_add(z->g, GAAW_MEM_COMMUNICATION, -*have);
  gaaw_ledger_add(z->g, GAAW_MEM_COMMUNICATION, need);
  *have = need;
}

/* start_gather */
static void gather(zero_mem *z, int b)
{
  if (z->resident[b]) return;
  gaaw_ledger_add(z->g, GAAW_MEM_PARAMS, bucket_bytes(z, b));
  z->resident[b] = 1;
}

/* release_bucket */
static void release(zero_mem *z, int b)
{
  if (!z->resident[b]) return;
  gaaw_ledger_add(z->g, GAAW_MEM_PARAMS, -bucket_bytes(z, b));
  z->resident[b] = 0;
}

/* open_grad_bucket */
static void open_grads(zero_mem *z, int b)
{
  if (z->open[b]) return;
  gaaw_ledger_add(z->g, GAAW_MEM_GRADS, bucket_bytes(z, b));
  z->open[b] = 1;
}

/* start_reduction (the collective's scratch is taken when it runs) */
static void start_reduction(zero_mem *z, int b)
{
  gaaw_optimizer_t opt = z->opt;
  const zero_bucket *k = &opt->buckets[b];
  if (z->reducing[b] || (opt->is.shard_grads && !z->open[b])) return;
  if (gaaw_zero_size(opt, k) > 1)
    comm_scratch(z, k, opt->is.shard_state ? GAAW_COMM_REDUCE_SCATTER : GAAW_COMM_ALLREDUCE,
                 opt->is.shard_state ? k->piece : k->len);
  z->reducing[b] = 1;
}

/* finish_reduction */
static void finish_reduction(zero_mem *z, int b)
{
  if (!z->reducing[b]) return;
  z->reducing[b] = 0;
  if (!z->opt->is.shard_grads) return;
  gaaw_ledger_add(z->g, GAAW_MEM_GRADS, -bucket_bytes(z, b));
  z->open[b] = 0;
}

static void finish_started(zero_mem *z, int skip)
{
  for (int b = 0; b < z->opt->nbuckets; b++)
    if (b != skip) finish_reduction(z, b);
}

/* close_grad_bucket */
static void close_grads(zero_mem *z, int b)
{
  gaaw_optimizer_t opt = z->opt;
  if (opt->buckets[b].tied) return;
  int last = z->backward_passes + 1 >= opt->cfg.accumulation;
  if (opt->is.shard_grads && !opt->is.shard_params && opt->model->pp_size > 1 && !last) { /* stage 2 */
    z->held[b] = 1;
    return;
  }
  z->held[b] = 0;
  if (opt->is.shard_grads)
    finish_started(z, b);
  else if (gaaw_zero_size(opt, &opt->buckets[b]) == 1 || !last)
    return;
  start_reduction(z, b);
}

static int is_backward(gaaw_phase phase)
{
  return phase == GAAW_PHASE_BACKWARD || phase == GAAW_PHASE_BACKWARD_INPUT || phase == GAAW_PHASE_WEIGHT;
}

static int completes_grads(gaaw_phase phase)
{
  return phase == GAAW_PHASE_BACKWARD || phase == GAAW_PHASE_WEIGHT;
}

/* before_layer, with prefetch_after */
static void mem_before_layer(gaaw_model_t m, int i, gaaw_phase phase, gaaw_ledger *g, void *user)
{
  zero_mem *z = user;
  gaaw_optimizer_t opt = z->opt;
  int used[GAAW_LAYER_MAX_PARAMS], reads = phase != GAAW_PHASE_WEIGHT;
  int n = gaaw_zero_layer_buckets(opt, i, used);
  (void)g;
  for (int q = 0; q < n; q++) {
    if (opt->is.shard_params && reads) gather(z, used[q]);
    if (is_backward(phase) && opt->is.shard_grads) open_grads(z, used[q]);
  }
  if (!opt->is.shard_params || !reads) return;
  int step = phase == GAAW_PHASE_FORWARD ? 1 : -1;
  for (int j = i + step; j >= 0 && j < m->nlayers; j += step) {
    n = gaaw_zero_layer_buckets(opt, j, used);
    for (int q = 0; q < n; q++) gather(z, used[q]);
    if (n > 0) break;
  }
}

/* after_layer */
static void mem_after_layer(gaaw_model_t m, int i, gaaw_phase phase, gaaw_ledger *g, void *user)
{
  zero_mem *z = user;
  gaaw_optimizer_t opt = z->opt;
  (void)m, (void)g;
  for (int b = 0; b < opt->nbuckets; b++) {
    const zero_bucket *k = &opt->buckets[b];
    int done = phase == GAAW_PHASE_FORWARD ? k->last_forward == i
               : is_backward(phase)        ? k->last_backward == i
                                           : gaaw_zero_layer_owns(opt, i, b);
    if (!done) continue;
    if (completes_grads(phase)) close_grads(z, b);
    if (opt->is.shard_params && phase != GAAW_PHASE_WEIGHT && !opt->keep_gathered) release(z, b);
  }
}

/* begin_pass (begin_backward) */
static void mem_begin_pass(gaaw_model_t m, gaaw_phase phase, int chunk, gaaw_ledger *g, void *user)
{
  zero_mem *z = user;
  (void)m, (void)chunk, (void)g;
  if (is_backward(phase) && z->opt->is.shard_grads) finish_started(z, -1);
}

/* end_pass */
static void mem_end_pass(gaaw_model_t m, gaaw_phase phase, int chunk, gaaw_ledger *g, void *user)
{
  zero_mem *z = user;
  (void)m, (void)g;
  if (completes_grads(phase) && chunk == 0) z->backward_passes++;
}

/* gaaw_model_create_gpt's parameters (gaaw_params_allocate), then setup's: attach
 * and the store's state. */
static void create(zero_mem *z, const zero_store_bytes *store)
{
  gaaw_optimizer_t opt = z->opt;
  gaaw_model_t m = opt->model;
  int64_t model = 0, shard = gaaw_ledger_bytes(opt->dtype, opt->shard_numel ? opt->shard_numel : 1);
  for (int c = 0; c < m->params.nchunks; c++) {
    int64_t bytes = (int64_t)gaaw_params_chunk_bytes(&m->params, c);
    gaaw_ledger_add(z->g, GAAW_MEM_PARAMS, bytes);
    model += bytes;
  }
  /* a GPT with RoPE keeps its (max_seq, head_dim) f32 table (gpt.c's upload_rope_table) */
  if (m->kind_ops->kind == GAAW_MODEL_GPT && m->gpt.position == GAAW_POSITION_ROPE)
    gaaw_ledger_add(z->g, GAAW_MEM_PARAMS, gaaw_ledger_bytes(GAAW_F32, (int64_t)m->gpt.max_seq * m->gpt.head_dim));
  /* the model's gradients come with its first backward pass (parallel/model_memory.c)
   * unless stages 2 and 3 take them over first */
  if (opt->is.shard_grads) {
    gaaw_ledger_add(z->g, GAAW_MEM_GRADS, shard);
    m->params.grads = GAAW_GRADS_TAKEN;
  }
  if (opt->is.shard_params) {
    int64_t spaces[3];
    gaaw_zero_shard_bytes(opt, spaces); /* offload_params: none on the device */
    gaaw_ledger_add(z->g, GAAW_MEM_PARAMS, spaces[GAAW_SPACE_DEVICE]);
    gaaw_ledger_add(z->g, GAAW_MEM_PARAMS, -model);
  }
  for (int i = 0; i < store->ndevice; i++) gaaw_ledger_add(z->g, GAAW_MEM_OPTIMIZER, store->device[i]);
}

/* gaaw_optimizer_step: finish_reductions (with tied_grads), release_gathered, the
 * norm's two f32 values, the store's update workspace. */
static void step(zero_mem *z, const zero_store_bytes *store)
{
  gaaw_optimizer_t opt = z->opt;
  gaaw_model_t m = opt->model;
  if (opt->is.shard_grads)
    for (int b = 0; b < opt->nbuckets; b++)
      if (z->open[b] && !z->reducing[b] && !opt->buckets[b].tied && !z->held[b]) {
        gaaw_ledger_add(z->g, GAAW_MEM_GRADS, -bucket_bytes(z, b));
        z->open[b] = 0;
      }
  for (int i = 0; i < m->params.count; i++)
    if (m->params.items[i].tied_peer >= 0) {
      int64_t bytes = gaaw_ledger_bytes(opt->dtype, m->params.items[i].local_numel);
      gaaw_ledger_add(z->g, GAAW_MEM_COMMUNICATION, bytes);
      gaaw_ledger_add(z->g, GAAW_MEM_COMMUNICATION, -bytes);
    }
  for (int b = 0; b < opt->nbuckets; b++) {
    if ((!opt->is.shard_grads && gaaw_zero_size(opt, &opt->buckets[b]) > 1) || opt->buckets[b].tied || z->held[b])
      start_reduction(z, b);
    z->held[b] = 0;
    finish_reduction(z, b);
  }
  for (int b = 0; b < opt->nbuckets; b++) release(z, b);
  for (int k = 0; k < 2; k++) {
    gaaw_ledger_add(z->g, GAAW_MEM_WORKSPACE, 4);
    gaaw_ledger_add(z->g, GAAW_MEM_WORKSPACE, -4);
  }
  gaaw_ledger_add(z->g, GAAW_MEM_WORKSPACE, store->update_workspace);
  gaaw_ledger_add(z->g, GAAW_MEM_WORKSPACE, -store->update_workspace);
}

gaaw_status_t gaaw_zero_memory_step(gaaw_optimizer_t opt, int microbatches, int batch, int seq, int64_t ring_bytes,
                                    int scratch, gaaw_ledger *g, zero_store_bytes *store)
{
  gaaw_context_t ctx = opt->ctx;
  zero_mem z;
  memset(&z, 0, sizeof z);
  z.opt = opt;
  z.g = g;
  z.ring_bytes = ring_bytes;
  z.scratch_on_device = scratch;
  size_t n = (size_t)(opt->nbuckets ? opt->nbuckets : 1);
  z.resident = calloc(n, 1);
  z.open = calloc(n, 1);
  z.reducing = calloc(n, 1);
  z.held = calloc(n, 1);
  gaaw_status_t st = z.resident && z.open && z.reducing && z.held
                       ? GAAW_SUCCESS
                       : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                          "cannot allocate the state of %d buckets", opt->nbuckets);
  if (st == GAAW_SUCCESS) {
    opt->store->bytes(opt, store);
    create(&z, store);
    gaaw_mem_hooks hooks = {&z, mem_before_layer, mem_after_layer, mem_begin_pass, mem_end_pass};
    /* two steps: the second starts with what the first left (the communicator's
     * scratch), which may meet the activations' peak */
    int64_t tp_scratch = 0;
    for (int s = 0; s < 2 && st == GAAW_SUCCESS; s++) {
      z.backward_passes = 0;
      st = gaaw_model_memory_step(opt->model, microbatches, batch, seq, ring_bytes, &tp_scratch, &hooks, g);
      if (st == GAAW_SUCCESS) step(&z, store);
    }
  }
  free(z.resident);
  free(z.open);
  free(z.reducing);
  free(z.held);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
