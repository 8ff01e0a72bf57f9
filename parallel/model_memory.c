/* Memory without memory: one training step of a planned model (gaaw_model_plan)
 * walked on a ledger of bytes, for the memory estimate (zero/memory_estimate.c).
 * The walk takes the schedule's actions of the rank as the pipeline executor
 * (pipeline.c) does and runs each pass as the pass driver (model_pass.c) does:
 * the frames' batch arrays, received activations and gradients, every layer's
 * forward and backward through its memory function (gaaw_layer_ops.memory, which
 * replays what the layer allocates), full recomputation, sequence parallelism's
 * packed partial gradients, split backward's deferred copies, and the data-
 * parallel engine's hooks at the points where the real hooks run. A send's
 * tensor is taken to be freed at the exchange that posted it (the executor frees
 * it once gaaw_comm_test says it completed: with MPI's eager sends, there).
 * Not collective; allocates host memory only. */
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "parallel/cp_split.h"
#include "parallel/model_impl.h"

void gaaw_ledger_add(gaaw_ledger *g, gaaw_mem_category_t c, int64_t bytes)
{
  g->current[c] += bytes;
  g->total += bytes;
  if (g->current[c] > g->peak[c]) g->peak[c] = g->current[c];
  if (g->total > g->total_peak) g->total_peak = g->total;
}

int64_t gaaw_ledger_bytes(gaaw_dtype_t dtype, int64_t n)
{
  int64_t bytes = n * (int64_t)gaaw_dtype_size(dtype);
  return bytes > 0 ? bytes : 1;
}

int64_t gaaw_mem_act(gaaw_model_t m, int64_t n)
{
  return gaaw_ledger_bytes(m->dtype, n);
}

int64_t gaaw_mem_stat(int64_t n)
{
  return gaaw_ledger_bytes(GAAW_F32, n);
}

struct gaaw_mem_walk {
  gaaw_model_t m;
  gaaw_ledger *g;
  const gaaw_mem_hooks *hooks;
  int microbatches, nl;      /* frames, the model's layers */
  gaaw_frame shape;          /* rows, batch, seq of every microbatch; defer_weights */
  int64_t *acts;             /* [mb][nl + 1]: bytes of acts[i] */
  int64_t *saved, *deferred; /* [mb][nl]: what layer i saved, what its B left for W */
  int64_t *dy, *dx;          /* [mb][chunks]: the pipeline slot's received gradient, B's input gradient */
  int64_t *batch;            /* [mb]: its batch arrays */
  /* the layer call in progress */
  int mb, layer;
  int64_t output, scratch;
  int64_t ring_bytes, *tp_scratch; /* option allreduce_ring_bytes; the tp communicator's scratch so far */
};

#define ACT(w, mb, i) (w)->acts[(size_t)(mb) * ((w)->nl + 1) + (i)]
#define SAVED(w, mb, i) (w)->saved[(size_t)(mb) * (w)->nl + (i)]
#define DEFERRED(w, mb, i) (w)->deferred[(size_t)(mb) * (w)->nl + (i)]
#define SLOT(arr, w, mb, c) (arr)[(size_t)(mb) * (w)->m->chunks + (c)]

static void act(gaaw_mem_walk *w, int64_t bytes)
{
  gaaw_ledger_add(w->g, GAAW_MEM_ACTIVATIONS, bytes);
}

/* Frees an activation held in *slot (0: none). */
static void drop(gaaw_mem_walk *w, int64_t *slot)
{
  act(w, -*slot);
  *slot = 0;
}

const gaaw_frame *gaaw_mem_frame(const gaaw_mem_walk *w)
{
  return &w->shape;
}

void gaaw_mem_output(gaaw_mem_walk *w, int64_t bytes)
{
  act(w, bytes);
  w->output += bytes;
}

void gaaw_mem_save(gaaw_mem_walk *w, int64_t bytes)
{
  act(w, bytes);
  SAVED(w, w->mb, w->layer) += bytes;
}

void gaaw_mem_unsave(gaaw_mem_walk *w, int64_t bytes)
{
  act(w, -bytes);
  SAVED(w, w->mb, w->layer) -= bytes;
}

void gaaw_mem_scratch(gaaw_mem_walk *w, int64_t bytes)
{
  act(w, bytes);
  w->scratch += bytes;
}

void gaaw_mem_transient(gaaw_mem_walk *w, int64_t bytes)
{
  act(w, bytes);
  act(w, -bytes);
}

void gaaw_mem_comm_transient(gaaw_mem_walk *w, int64_t bytes)
{
  gaaw_ledger_add(w->g, GAAW_MEM_COMMUNICATION, bytes);
  gaaw_ledger_add(w->g, GAAW_MEM_COMMUNICATION, -bytes);
}

void gaaw_mem_linear_backward(gaaw_mem_walk *w, int64_t dy_bytes, int64_t x_bytes)
{
  if (!w->shape.defer_weights) return;
  act(w, dy_bytes + x_bytes);
  DEFERRED(w, w->mb, w->layer) += dy_bytes + x_bytes;
}

void gaaw_mem_replica_sums(gaaw_mem_walk *w, const gaaw_layer *l, int w_slot, int b_slot)
{
  gaaw_model_t m = w->m;
  const gaaw_param *p[2] = {&m->params.items[l->params[w_slot]], b_slot >= 0 ? &m->params.items[l->params[b_slot]] : NULL};
  int64_t held = 0;
  if (w->shape.defer_weights) return; /* W sums them: not walked (see the header) */
  for (int k = 0; k < 2; k++)
    if (p[k] && gaaw_param_has_replicas(p[k], m->tp_size)) held += gaaw_mem_act(m, p[k]->local_numel);
  gaaw_ledger_add(w->g, GAAW_MEM_WORKSPACE, held);
  for (int k = 0; k < 2 && held; k++)
    for (int b = 0; p[k] && b < p[k]->blocks.n; b++) {
      int64_t at, count, all;
      if (gaaw_param_block_replicas(p[k], b, m->tp_size) == 1) continue;
      gaaw_param_block_span(p[k], b, &at, &count);
      all = gaaw_mem_act(m, m->tp_size * count); /* every tp rank's increments */
      gaaw_ledger_add(w->g, GAAW_MEM_COMMUNICATION, all);
      gaaw_ledger_add(w->g, GAAW_MEM_COMMUNICATION, -all);
    }
  gaaw_ledger_add(w->g, GAAW_MEM_WORKSPACE, -held);
}

/* Layer i's forward (backward 0) or backward of microbatch mb; returns its output. */
static int64_t layer_call(gaaw_mem_walk *w, int mb, int i, int backward)
{
  const gaaw_layer *l = &w->m->layers[i];
  w->mb = mb;
  w->layer = i;
  w->output = w->scratch = 0;
  l->ops->memory(w->m, l, w, backward);
  act(w, -w->scratch);
  return w->output;
}

static void hook_layer(gaaw_mem_walk *w, int after, int i, gaaw_phase phase)
{
  const gaaw_mem_hooks *h = w->hooks;
  if (h && after && h->after_layer) h->after_layer(w->m, i, phase, w->g, h->user);
  if (h && !after && h->before_layer) h->before_layer(w->m, i, phase, w->g, h->user);
}

static void hook_pass(gaaw_mem_walk *w, int end, gaaw_phase phase, int chunk)
{
  const gaaw_mem_hooks *h = w->hooks;
  gaaw_param_table *t = &w->m->params;
  if (!end && phase != GAAW_PHASE_FORWARD && t->grads == GAAW_GRADS_LATER) { /* gaaw_params_ensure_grads */
    for (int c = 0; c < t->nchunks; c++) gaaw_ledger_add(w->g, GAAW_MEM_GRADS, (int64_t)gaaw_params_chunk_bytes(t, c));
    t->grads = GAAW_GRADS_ALLOCATED;
  }
  if (h && end && h->end_pass) h->end_pass(w->m, phase, chunk, w->g, h->user);
  if (h && !end && h->begin_pass) h->begin_pass(w->m, phase, chunk, w->g, h->user);
}

static int recomputes(gaaw_model_t m, const gaaw_layer *l)
{
  return m->recompute == GAAW_RECOMPUTE_FULL && l->ops->recomputable;
}

/* gaaw_pass_forward of microbatch mb over layers [lo, hi). */
static void pass_forward(gaaw_mem_walk *w, int mb, int chunk, int lo, int hi)
{
  hook_pass(w, 0, GAAW_PHASE_FORWARD, chunk);
  for (int i = lo; i < hi; i++) {
    hook_layer(w, 0, i, GAAW_PHASE_FORWARD);
    ACT(w, mb, i + 1) = layer_call(w, mb, i, 0);
    if (recomputes(w->m, &w->m->layers[i])) drop(w, &SAVED(w, mb, i));
    hook_layer(w, 1, i, GAAW_PHASE_FORWARD);
  }
  hook_pass(w, 1, GAAW_PHASE_FORWARD, chunk);
}

/* gaaw_pass_backward of microbatch mb over [lo, hi) from dy bytes; returns dx. */
static int64_t pass_backward(gaaw_mem_walk *w, int mb, int chunk, int lo, int hi, int64_t dy, int want_dx)
{
  gaaw_model_t m = w->m;
  gaaw_phase phase = w->shape.defer_weights ? GAAW_PHASE_BACKWARD_INPUT : GAAW_PHASE_BACKWARD;
  int64_t grad = dy;
  hook_pass(w, 0, phase, chunk);
  for (int i = hi - 1; i >= lo; i--) {
    const gaaw_layer *l = &m->layers[i];
    hook_layer(w, 0, i, phase);
    if (recomputes(m, l)) act(w, -layer_call(w, mb, i, 0)); /* its output is not kept */
    int64_t n = m->tp_size > 1 ? gaaw_pass_partial_numel(m, i) : 0, partial = n ? gaaw_ledger_bytes(m->dtype, n) : 0;
    if (partial) { /* held aside, zeros to copy from */
      gaaw_ledger_add(w->g, GAAW_MEM_COMMUNICATION, partial);
      gaaw_ledger_add(w->g, GAAW_MEM_WORKSPACE, partial);
      gaaw_ledger_add(w->g, GAAW_MEM_WORKSPACE, -partial);
    }
    int64_t below = layer_call(w, mb, i, 1);
    act(w, -grad);
    drop(w, &SAVED(w, mb, i));
    drop(w, &ACT(w, mb, i + 1));
    if (partial) { /* packed, reduced (the tp communicator's scratch grows to the largest), copied back;
                    * then the held sums go */
      gaaw_ledger_add(w->g, GAAW_MEM_COMMUNICATION, partial);
      int64_t need = (int64_t)gaaw_mpi_scratch_bytes(GAAW_COMM_ALLREDUCE, n, m->dtype, m->tp_size, w->ring_bytes);
      if (need > *w->tp_scratch) gaaw_ledger_add(w->g, GAAW_MEM_COMMUNICATION, need - *w->tp_scratch), *w->tp_scratch = need;
      gaaw_ledger_add(w->g, GAAW_MEM_COMMUNICATION, -2 * partial);
    }
    hook_layer(w, 1, i, phase);
    grad = below;
  }
  if (!want_dx) {
    act(w, -grad);
    grad = 0;
  }
  hook_pass(w, 1, phase, chunk);
  return grad;
}

static void pass_weight(gaaw_mem_walk *w, int mb, int chunk, int lo, int hi)
{
  hook_pass(w, 0, GAAW_PHASE_WEIGHT, chunk);
  for (int i = hi - 1; i >= lo; i--) {
    hook_layer(w, 0, i, GAAW_PHASE_WEIGHT);
    drop(w, &DEFERRED(w, mb, i));
    hook_layer(w, 1, i, GAAW_PHASE_WEIGHT);
  }
  hook_pass(w, 1, GAAW_PHASE_WEIGHT, chunk);
}

/* Bytes of the activation stream entering layer i (gaaw_model_boundary_shape). */
static int64_t boundary(gaaw_mem_walk *w, int i)
{
  int64_t shape[2];
  gaaw_model_boundary_shape(w->m, &w->shape, i, shape);
  return gaaw_mem_act(w->m, shape[0] * shape[1]);
}

static void run_action(gaaw_mem_walk *w, const gaaw_sched_action_t *a)
{
  gaaw_model_t m = w->m;
  int lo, hi, vs = gaaw_model_chunk_stage(m, a->chunk, &lo, &hi), mb = a->mb, c = a->chunk;
  switch (a->op) {
  case GAAW_SCHED_RECV_ACT: act(w, ACT(w, mb, lo) = boundary(w, lo)); break;
  case GAAW_SCHED_RECV_GRAD: act(w, SLOT(w->dy, w, mb, c) = boundary(w, hi)); break;
  case GAAW_SCHED_SEND_ACT: drop(w, &ACT(w, mb, hi)); break;      /* at its exchange: see the header */
  case GAAW_SCHED_SEND_GRAD: drop(w, &SLOT(w->dx, w, mb, c)); break;
  case GAAW_SCHED_F: pass_forward(w, mb, c, lo, hi); break;
  case GAAW_SCHED_W: pass_weight(w, mb, c, lo, hi); break;
  case GAAW_SCHED_B:
  case GAAW_SCHED_BW: {
    int64_t dy = 0;
    if (vs + 1 < m->stages.count) {
      dy = SLOT(w->dy, w, mb, c);
      if (!dy && (vs + 1) % m->pp_size == m->pp_rank) { /* the next chunk here left it */
        dy = SLOT(w->dx, w, mb, c + 1);
        SLOT(w->dx, w, mb, c + 1) = 0;
      }
      SLOT(w->dy, w, mb, c) = 0;
    }
    SLOT(w->dx, w, mb, c) = pass_backward(w, mb, c, lo, hi, dy, vs > 0);
    if (vs > 0) drop(w, &ACT(w, mb, lo));
    break;
  }
  }
}

/* What the step frees at its end (free_run): the frames' batch arrays. A whole
 * schedule has freed every other slot by then (sent, or consumed by a B or a W);
 * gaaw_model_memory_step checks that it has. */
static void free_walk(gaaw_mem_walk *w)
{
  for (size_t i = 0; w->batch && i < (size_t)w->microbatches; i++) drop(w, &w->batch[i]);
  free(w->acts);
  free(w->saved);
  free(w->deferred);
  free(w->dy);
  free(w->dx);
  free(w->batch);
}

gaaw_status_t gaaw_model_memory_step(gaaw_model_t m, int microbatches, int batch, int seq, int64_t ring_bytes,
                                     int64_t *tp_scratch, const gaaw_mem_hooks *hooks, gaaw_ledger *g)
{
  gaaw_context_t ctx = m->ctx;
  for (int i = 0; i < m->nlayers; i++)
    if (!m->layers[i].ops->memory)
      GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "the memory estimate does not know %s's layer '%s' (layer %d)",
                m->kind_ops->article, m->layers[i].ops->kind, i);
  GAAW_CHECK(gaaw_sched_check(ctx, m->pp_kind, m->pp_size, microbatches, m->chunks));
  gaaw_sched_t *s = NULL;
  int64_t acts_before = g->current[GAAW_MEM_ACTIVATIONS];
  GAAW_CHECK(gaaw_sched_create(ctx, m->pp_kind, m->pp_size, microbatches, m->chunks, &s));
  gaaw_mem_walk w;
  memset(&w, 0, sizeof w);
  w.m = m;
  w.g = g;
  w.hooks = hooks;
  w.microbatches = microbatches;
  w.ring_bytes = ring_bytes, w.tp_scratch = tp_scratch;
  w.nl = m->nlayers;
  w.shape.batch = batch;
  w.shape.seq = seq / m->cp_size; /* as gaaw_gpt_load_batch cuts it (cp_split.h) */
  w.shape.rows = (int64_t)batch * w.shape.seq;
  w.shape.pieces = gaaw_cp_pieces(m->cp_size);
  size_t frames = (size_t)microbatches, slots = frames * (size_t)m->chunks;
  w.acts = calloc(frames * (size_t)(w.nl + 1), sizeof *w.acts);
  w.saved = calloc(frames * (size_t)w.nl, sizeof *w.saved);
  w.deferred = calloc(frames * (size_t)w.nl, sizeof *w.deferred);
  w.dy = calloc(slots, sizeof *w.dy);
  w.dx = calloc(slots, sizeof *w.dx);
  w.batch = calloc(frames, sizeof *w.batch);
  gaaw_status_t st = w.acts && w.saved && w.deferred && w.dy && w.dx && w.batch
                       ? GAAW_SUCCESS
                       : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                          "cannot allocate the walk of %d microbatches", microbatches);
  if (st == GAAW_SUCCESS) {
    const gaaw_sched_rank_t *mine = &s->ranks[m->pp_rank];
    for (int k = 0; k < mine->count; k++) w.shape.defer_weights |= mine->actions[k].op == GAAW_SCHED_W;
    /* prepare: every microbatch's batch arrays (the first stage's tokens and
     * positions, the last stage's targets: (rows) i32 each) */
    int arrays = 2 * gaaw_model_owns_layer(m, 0) + gaaw_model_owns_layer(m, m->nlayers - 1);
    for (size_t i = 0; i < frames; i++) act(&w, w.batch[i] = arrays * gaaw_ledger_bytes(GAAW_I32, w.shape.rows));
    for (int k = 0; k < mine->count; k++) run_action(&w, &mine->actions[k]);
    if (m->pp_size > 1 || m->cp_size > 1) { /* the loss to every stage, summed over cp (with the MoE aux losses) */
      int64_t bytes = m->moe_layers ? 8 : 4;
      gaaw_ledger_add(g, GAAW_MEM_COMMUNICATION, bytes);
      gaaw_ledger_add(g, GAAW_MEM_COMMUNICATION, -bytes);
    }
  }
  free_walk(&w);
  gaaw_sched_destroy(&s);
  /* every activation the step made is gone at its end: a walk that lost count
   * would misplace every later peak */
  if (st == GAAW_SUCCESS && g->current[GAAW_MEM_ACTIVATIONS] != acts_before)
    st = gaaw_error_raise(ctx, GAAW_ERR_INTERNAL, __FILE__, __LINE__, __func__,
                          "the memory walk of pipeline rank %d ends with %lld bytes of activations, not %lld",
                          m->pp_rank, (long long)g->current[GAAW_MEM_ACTIVATIONS], (long long)acts_before);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
