/* Pipeline parallelism against the serial run:
 *  - parity: from randomised parameters (model_randomise), for layouts of the world
 *    with pp 2 and 4, every schedule (gpipe, 1f1b, interleaved with 2 chunks per
 *    rank, zb-h1), ZeRO stages 0-3, tp 1 and 2 with sequence parallelism off and
 *    on, and recompute none, selective and full, the parameters after 5 AdamW steps
 *    of M microbatches equal a serial run (one rank, MPI_COMM_SELF, stage 0) that
 *    accumulates the same dp x M microbatches one forward_backward at a time,
 *    within 1e-5 of each tensor's largest value (f32), and the losses (dp 1) within
 *    1e-5 relative;
 *  - the first case run twice is bit-identical, and with recompute full instead of
 *    none too;
 *  - zb-h1 (pp 2 and 4, ZeRO 0-3, tp 2) splits the backward: its W actions computed
 *    every linear's weight gradient (4 per block and 1 for the LM head, per
 *    microbatch, on the stage that holds them), and no other schedule's did;
 *  - ZeRO 2 at pp > 1, dp 2 moves 2 Psi over dp per step (each bucket
 *    reduce-scattered once, after its chunk's last microbatch, then the all-gather);
 *    ZeRO 3 gathers up to 2 M Psi (for each microbatch's forward and backward), or
 *    with zero_keep_gathered exactly Psi (once a step), besides its reduce-scatters;
 *  - a step's microbatches that the schedule does not take (interleaved: not a
 *    multiple of pp) and a differing count on one rank fail every rank by name;
 *  - each model chunk of a rank has flat parameter and gradient buffers of its
 *    own, holding exactly its layers' parameters, and no ZeRO bucket spans two
 *    chunks, even where the bucket size would let it (np4, 2 chunks per rank).
 * Built as test_pipeline_np4 (pp 2 x tp 2, pp 4, pp 2 x dp 2, and 2 chunks on each rank
 * at pp 1) and test_pipeline_np8
 * (pp 2 x tp 2 x dp 2, pp 4 x dp 2), whose cases sample schedules x ZeRO stages so
 * that each value appears, with the checks above; and as test_pipeline_matrix0/1_np4
 * and test_pipeline_matrix0-3_np8 (make check-pipeline-matrix, not make check),
 * which run the parity check for every schedule x ZeRO stage x recompute of each
 * (pp, tp, sp) (run_matrix). */
#include <math.h>
#include <mpi.h>

#include "parallel/model_impl.h"
#include "tests/harness/model_util.h"
#include "zero/zero_impl.h"

enum { B = 2, T = 8, STEPS = 5 };
static int world_rank, world_size;

typedef struct {
  const char *layout;   /* gaaw_init options: tp, pp, dp, schedule, virtual_stages */
  int layers, sp, stage, microbatches;
  const char *recompute;
} pipe_case;

static const pipe_case cases_np4[] = {
  {"tp=2 pp=2 pp_schedule=1f1b", 2, 0, 0, 4, "none"},
  {"tp=2 pp=2 pp_schedule=gpipe", 2, 1, 1, 2, "selective"},
  {"pp=4 pp_schedule=1f1b", 4, 0, 2, 4, "full"},
  {"pp=4 pp_schedule=zb-h1", 4, 0, 3, 4, "none"},
  {"pp=2 dp=2 pp_schedule=interleaved virtual_stages=2", 4, 0, 2, 4, "none"},
  {"tp=2 pp=2 pp_schedule=interleaved virtual_stages=2", 4, 1, 3, 2, "full"},
  {"pp=2 dp=2 pp_schedule=zb-h1 pp_layout=1:3", 4, 0, 1, 3, "selective"},
  {"tp=2 pp_schedule=interleaved virtual_stages=2", 2, 0, 2, 2, "none"}, /* 2 chunks on one rank, tied across them */
  {"tp=2 pp=2 pp_schedule=zb-h1", 2, 1, 0, 4, "selective"},
  {"pp=2 dp=2 pp_schedule=1f1b zero_keep_gathered=yes", 2, 0, 3, 4, "none"},
};
static const pipe_case cases_np8[] = {
  {"tp=2 pp=2 dp=2 pp_schedule=1f1b", 2, 1, 1, 4, "none"},
  {"pp=4 dp=2 pp_schedule=interleaved virtual_stages=2", 8, 0, 0, 4, "selective"},
  {"tp=2 pp=2 dp=2 pp_schedule=zb-h1", 2, 0, 3, 2, "full"},
  {"pp=4 dp=2 pp_schedule=gpipe", 4, 0, 2, 4, "none"},
  {"pp=4 dp=2 pp_schedule=zb-h1", 4, 0, 2, 4, "full"},
  {"tp=2 pp=4 pp_schedule=zb-h1", 4, 1, 1, 4, "none"},
};

static gaaw_optimizer_config_t adamw(int stage, int accumulation)
{
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = stage;
  oc.lr = 3e-3f;
  oc.accumulation = accumulation;
  oc.clip_norm = 1.0f;
  oc.eps = 1e-5f; /* as test_zero.c: keeps the key bias's rounding noise from becoming steps of lr */
  return oc;
}

/* The rows of step `step`: microbatch k of the step (k = dp_rank * M + i) is
 * rows [k B, (k + 1) B). */
static void step_data(int step, int count, int32_t *tokens, int32_t *targets)
{
  for (int k = 0; k < count; k++) {
    model_random_batch(B, T, 40, 5000 + 131 * (uint64_t)step + (uint64_t)k, tokens + k * B * T, targets + k * B * T);
    for (int i = 0; i < B * T; i++)
      if (targets[k * B * T + i] < 0) targets[k * B * T + i] = 0; /* every microbatch counts alike */
  }
}

typedef struct {
  float *params;
  long n;
  float losses[STEPS];
} run_result;

static gaaw_gpt_config_t case_gpt(const pipe_case *c)
{
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  g.layers = c->layers;
  g.sequence_parallel = c->sp;
  return g;
}

/* zb-h1's W actions computed the linears' weight gradients of this rank's layers
 * (4 per block, the LM head's, every microbatch of every step); with the other
 * schedules B or BW did, and no W ran any. */
static void check_weight_actions(const pipe_case *c, gaaw_model_t model)
{
  int split = strstr(c->layout, "zb-h1") != NULL;
  for (int i = 0; i < model->nlayers; i++) {
    const gaaw_layer *l = &model->layers[i];
    if (!gaaw_model_owns_layer(model, i)) continue;
    int64_t per_microbatch = l->ops == &gaaw_gpt_block_ops ? 4 : l->ops == &gaaw_gpt_head_ops ? 1 : 0;
    int64_t want = split ? per_microbatch * c->microbatches * STEPS : 0;
    expect_true(l->deferred_grads_run == want, "%s: layer %d (%s): its W actions computed %lld weight gradients, "
                "expected %lld", c->layout, i, l->ops->kind, (long long)l->deferred_grads_run, (long long)want);
  }
}

/* The pipeline run: each dp rank passes its M microbatches in one call; stages
 * that do not read tokens or targets pass NULL. */
static run_result train_pipeline(const pipe_case *c, const char *recompute, gaaw_model_t *keep,
                                 gaaw_context_t *keep_ctx)
{
  char options[256];
  snprintf(options, sizeof options, "backend=host comm_timeout=60 zero_bucket_bytes=0 microbatches=%d recompute=%s %s",
           c->microbatches, recompute, c->layout);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  int dp_rank, dp, pp_rank, pp;
  gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &dp_rank, &dp);
  gaaw_topology_group_rank(ctx, GAAW_GROUP_PP, &pp_rank, &pp);
  gaaw_gpt_config_t g = case_gpt(c);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  model_randomise(model, 4242);
  gaaw_optimizer_config_t oc = adamw(c->stage, c->microbatches);
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int M = c->microbatches, rows = dp * M * B * T;
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)rows), *targets = malloc(sizeof(int32_t) * (size_t)rows);
  run_result r = {NULL, 0, {0}};
  for (int s = 0; s < STEPS; s++) {
    step_data(s, dp * M, tokens, targets);
    long at = (long)dp_rank * M * B * T;
    gaaw_batch_t b = {.batch = B, .seq = T, .microbatches = M,
                      .tokens = pp_rank == 0 ? tokens + at : NULL,
                      .targets = pp_rank == pp - 1 ? targets + at : NULL};
    require_ok(ctx, gaaw_model_forward_backward(model, &b, &r.losses[s]));
    require_ok(ctx, gaaw_optimizer_step(opt));
  }
  if (c->stage == 2 && dp > 1 && pp > 1) {
    /* stage 2 in a pipeline reduce-scatters each bucket once a step, after its
     * chunk's last microbatch: 2 Psi over dp (with the all-gather), not (M + 1) Psi */
    gaaw_step_stats_t st;
    size_t params, grads, state;
    require_ok(ctx, gaaw_optimizer_stats(opt, &st));
    require_ok(ctx, gaaw_optimizer_memory(opt, &params, &grads, &state));
    expect_true(st.comm_bytes == 2 * (uint64_t)params, "%s, ZeRO 2: %llu bytes over dp in a step, expected 2 Psi = %llu",
                c->layout, (unsigned long long)st.comm_bytes, (unsigned long long)(2 * params));
  }
  if (c->stage == 3 && dp > 1) {
    /* stage 3 reduce-scatters each bucket after every microbatch, a tied weight's
     * (T) once, at the step; with zero_keep_gathered it gathers each bucket once a
     * step (Psi), else for each microbatch's forward and backward (up to 2 M Psi:
     * fewer where a bucket is still resident from the previous layer's use) */
    gaaw_step_stats_t st;
    uint64_t psi = 0, tied = 0;
    for (int k = 0; k < opt->nbuckets; k++) {
      psi += (uint64_t)opt->buckets[k].len * sizeof(float);
      if (opt->buckets[k].tied) tied += (uint64_t)opt->buckets[k].len * sizeof(float);
    }
    require_ok(ctx, gaaw_optimizer_stats(opt, &st));
    uint64_t reduced = (uint64_t)M * (psi - tied) + tied, kept = psi + reduced, most = 2 * (uint64_t)M * psi + reduced;
    if (strstr(c->layout, "zero_keep_gathered=yes"))
      expect_true(st.comm_bytes == kept, "%s, ZeRO 3: %llu bytes over dp in a step, expected %llu (Psi = %llu, T = %llu)",
                  c->layout, (unsigned long long)st.comm_bytes, (unsigned long long)kept, (unsigned long long)psi,
                  (unsigned long long)tied);
    else
      expect_true(st.comm_bytes > kept && st.comm_bytes <= most, "%s, ZeRO 3: %llu bytes over dp in a step, expected "
                  "more than %llu and at most %llu (Psi = %llu, T = %llu)", c->layout,
                  (unsigned long long)st.comm_bytes, (unsigned long long)kept, (unsigned long long)most,
                  (unsigned long long)psi, (unsigned long long)tied);
  }
  check_weight_actions(c, model);
  r.params = model_snapshot(model, 0, &r.n);
  free(tokens);
  free(targets);
  gaaw_optimizer_destroy(&opt);
  if (keep) {
    *keep = model; /* with its context, for the layout (destroyed by the caller) */
    *keep_ctx = ctx;
  } else {
    gaaw_model_destroy(&model);
    gaaw_finalize(&ctx);
  }
  return r;
}

/* The serial reference: one rank, the dp x M microbatches one call each. */
static run_result train_serial(const pipe_case *c, int dp)
{
  gaaw_context_t ctx = test_context(MPI_COMM_SELF, "backend=host");
  gaaw_gpt_config_t g = case_gpt(c);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  model_randomise(model, 4242);
  int count = dp * c->microbatches;
  gaaw_optimizer_config_t oc = adamw(0, count);
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(count * B * T));
  int32_t *targets = malloc(sizeof(int32_t) * (size_t)(count * B * T));
  run_result r = {NULL, 0, {0}};
  for (int s = 0; s < STEPS; s++) {
    step_data(s, count, tokens, targets);
    double sum = 0;
    for (int k = 0; k < count; k++) {
      gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens + k * B * T, .targets = targets + k * B * T};
      float loss;
      require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
      sum += loss;
    }
    require_ok(ctx, gaaw_optimizer_step(opt));
    r.losses[s] = (float)(sum / count);
  }
  r.params = model_snapshot(model, 0, &r.n);
  free(tokens);
  free(targets);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  return r;
}

/* The serial run of the last (layers, sp, dp, microbatches) asked for, kept: the
 * matrix checks every schedule, ZeRO stage and recompute of a layout against one.
 * The caller owns (and frees) the copy of the parameters it gets. */
static run_result train_serial_kept(const pipe_case *c, int dp)
{
  static struct {
    int layers, sp, dp, microbatches;
    run_result r;
  } kept;
  if (!kept.r.params || kept.layers != c->layers || kept.sp != c->sp || kept.dp != dp ||
      kept.microbatches != c->microbatches) {
    free(kept.r.params);
    kept.r = train_serial(c, dp);
    kept.layers = c->layers, kept.sp = c->sp, kept.dp = dp, kept.microbatches = c->microbatches;
  }
  run_result copy = kept.r;
  copy.params = malloc(sizeof(float) * (size_t)kept.r.n);
  memcpy(copy.params, kept.r.params, sizeof(float) * (size_t)kept.r.n);
  return copy;
}

static int case_dp(const pipe_case *c)
{
  int tp = 1, pp = 1;
  const char *t = strstr(c->layout, "tp="), *p = strstr(c->layout, "pp=");
  if (t) tp = atoi(t + 3);
  if (p) pp = atoi(p + 3);
  return world_size / (tp * pp);
}

static void check_case(const pipe_case *c, int first)
{
  char what[320];
  snprintf(what, sizeof what, "%s, layers %d, sp %d, ZeRO %d, %d microbatches, recompute %s", c->layout, c->layers,
           c->sp, c->stage, c->microbatches, c->recompute);
  int dp = case_dp(c);
  run_result want = train_serial_kept(c, dp);
  gaaw_model_t model = NULL;
  gaaw_context_t ctx = NULL;
  run_result got = train_pipeline(c, c->recompute, &model, &ctx);
  expect_true(got.n == want.n, "%s: %ld parameters, the serial model has %ld", what, got.n, want.n);
  if (got.n == want.n) expect_close_model(model, got.params, want.params, 1e-5, what);
  if (dp == 1)
    for (int s = 0; s < STEPS; s++)
      expect_true(fabs(got.losses[s] - want.losses[s]) <= 1e-5 * fabs(want.losses[s]),
                  "%s: step %d loss %.8g, serial %.8g", what, s, got.losses[s], want.losses[s]);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  if (first) {
    /* the same layout twice, and recompute full against none: bit for bit */
    run_result again = train_pipeline(c, c->recompute, NULL, NULL);
    expect_true(again.n == got.n && memcmp(again.params, got.params, sizeof(float) * (size_t)got.n) == 0,
                "%s: a second run differs", what);
    run_result full = train_pipeline(c, "full", NULL, NULL);
    expect_true(full.n == got.n && memcmp(full.params, got.params, sizeof(float) * (size_t)got.n) == 0,
                "%s: recompute full differs from recompute %s", what, c->recompute);
    free(again.params);
    free(full.params);
  }
  if (world_rank == 0) printf("ok: %s\n", what);
  free(want.params);
  free(got.params);
}

/* The chunk of this rank that holds layer i. */
static int chunk_of_layer(gaaw_model_t m, int i)
{
  return gaaw_stages_of_layer(&m->stages, i) / m->pp_size;
}

/* Per-chunk flat buffers: pp 2 x 2 chunks, 4 blocks (a chunk: one block, with the
 * embedding on the first and the head on the last), ZeRO 1 with buckets as large
 * as the whole model; the gradients' from the first access on. */
static void check_chunk_buffers(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host pp=2 pp_schedule=interleaved virtual_stages=2 "
                                                    "microbatches=2 zero_bucket_bytes=1000000000");
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  g.layers = 4;
  gaaw_model_t m;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &m));
  const gaaw_param_table *t = &m->params;
  /* the gradient buffers come with the first backward or gradient access */
  expect_true(t->grads == GAAW_GRADS_LATER && !t->chunks[0].grads, "rank %d: gradient buffers at the model's creation",
              world_rank);
  require_ok(ctx, gaaw_model_zero_grad(m));
  expect_true(t->nchunks == 2, "rank %d: %d parameter chunks, expected 2", world_rank, t->nchunks);
  for (int c = 0; c < t->nchunks; c++) {
    const gaaw_param_chunk *ch = &t->chunks[c];
    expect_true(ch->lo < ch->hi && ch->values && ch->grads, "rank %d: chunk %d is [%lld, %lld)", world_rank, c,
                (long long)ch->lo, (long long)ch->hi);
    for (int d = 0; d < c; d++)
      expect_true(t->chunks[d].values != ch->values && t->chunks[d].grads != ch->grads,
                  "rank %d: chunks %d and %d share a buffer", world_rank, d, c);
  }
  for (int i = 0; i < t->count; i++) {
    const gaaw_param *p = &t->items[i];
    int c = chunk_of_layer(m, p->owner), in = gaaw_params_chunk_of(t, p->offset);
    const gaaw_param_chunk *ch = &t->chunks[c];
    expect_true(in == c && p->offset >= ch->lo && p->offset + p->local_numel <= ch->hi &&
                    p->value.buf == ch->values && p->grad.buf == ch->grads &&
                    p->value.offset == (size_t)(p->offset - ch->lo) * sizeof(float),
                "rank %d: %s (layer %d, chunk %d) is a view into chunk %d's buffers at element %lld", world_rank,
                p->name, p->owner, c, in, (long long)p->offset);
  }
  gaaw_optimizer_config_t oc = adamw(1, 2);
  gaaw_optimizer_t opt;
  require_ok(ctx, gaaw_optimizer_create(m, &oc, &opt));
  expect_true(opt->nbuckets == 2, "rank %d: %d ZeRO buckets, expected one per chunk", world_rank, opt->nbuckets);
  for (int b = 0; b < opt->nbuckets; b++) {
    const zero_bucket *k = &opt->buckets[b];
    expect_true(gaaw_params_chunk_of(t, k->lo) == gaaw_params_chunk_of(t, k->lo + k->len - 1),
                "rank %d: bucket %d [%lld, +%lld) spans two chunks", world_rank, b, (long long)k->lo,
                (long long)k->len);
  }
  int32_t tokens[2 * B * T], targets[2 * B * T];
  step_data(0, 2, tokens, targets);
  gaaw_batch_t b = {.batch = B, .seq = T, .microbatches = 2, .tokens = tokens, .targets = targets};
  float loss;
  require_ok(ctx, gaaw_model_forward_backward(m, &b, &loss));
  require_ok(ctx, gaaw_optimizer_step(opt));
  expect_true(isfinite(loss) && loss > 0, "rank %d: loss %g with per-chunk buffers", world_rank, loss);
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&m);
  gaaw_finalize(&ctx);
}

/* microbatches the schedule does not take, on every rank or on one */
static void check_refusals(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host pp=2 pp_schedule=interleaved virtual_stages=2 microbatches=2");
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  g.layers = 4;
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  int32_t tokens[4 * B * T], targets[4 * B * T];
  step_data(0, 4, tokens, targets);
  float loss;
  gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens, .targets = targets, .microbatches = 3};
  expect_status_ctx(ctx, gaaw_model_forward_backward(model, &b, &loss), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "microbatches (3) to be a multiple of pp (2)") != NULL, "rank %d: %s",
              world_rank, gaaw_last_error(ctx));
  b.microbatches = world_rank == 1 ? 4 : 2;
  expect_status_ctx(ctx, gaaw_model_forward_backward(model, &b, &loss), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "microbatches") != NULL, "rank %d: %s", world_rank, gaaw_last_error(ctx));
  /* and the model works after them */
  b.microbatches = 2;
  require_ok(ctx, gaaw_model_forward_backward(model, &b, &loss));
  expect_true(isfinite(loss) && loss > 0, "rank %d: loss %g after the refusals", world_rank, loss);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

/* The whole matrix: every schedule x ZeRO stage x recompute for each (pp, tp, sp)
 * this world holds with pp in {2, 4} and tp in {1, 2}: on 4 ranks pp 2 x dp 2, pp 2
 * x tp 2 (sp off and on) and pp 4; on 8 ranks pp 4 x tp 2 (sp off and on). pp x 2
 * layers (interleaved: one per chunk), 4 microbatches: 192 + 96 cases. Part k of
 * n runs the k-th of n equal runs of consecutive cases (n = 1: all), each part a
 * test of its own (test_pipeline_matrix*, make check-pipeline-matrix) to stay
 * within the time limit of a test. */
static void run_matrix(int part, int parts)
{
  static const struct { const char *grid; int pp, sp; } grids4[] = {
      {"pp=2 dp=2", 2, 0}, {"tp=2 pp=2", 2, 0}, {"tp=2 pp=2", 2, 1}, {"pp=4", 4, 0}};
  static const struct { const char *grid; int pp, sp; } grids8[] = {{"tp=2 pp=4", 4, 0}, {"tp=2 pp=4", 4, 1}};
  static const char *const schedules[] = {"gpipe", "1f1b", "interleaved virtual_stages=2", "zb-h1"};
  static const char *const recomputes[] = {"none", "selective", "full"};
  int ngrids = world_size == 8 ? 2 : 4, ncases = 0, index = 0, total = ngrids * 4 * 4 * 3;
  for (int g = 0; g < ngrids; g++)
    for (int sc = 0; sc < 4; sc++)
      for (int stage = 0; stage < 4; stage++)
        for (int rc = 0; rc < 3; rc++) {
          char layout[128];
          const char *grid = world_size == 8 ? grids8[g].grid : grids4[g].grid;
          int pp = world_size == 8 ? grids8[g].pp : grids4[g].pp, sp = world_size == 8 ? grids8[g].sp : grids4[g].sp;
          snprintf(layout, sizeof layout, "%s pp_schedule=%s", grid, schedules[sc]);
          pipe_case c = {layout, 2 * pp, sp, stage, 4, recomputes[rc]};
          int mine = index * parts / total == part;
          index++;
          if (!mine) continue;
          check_case(&c, 0);
          ncases++;
        }
  if (world_rank == 0) printf("PIPE_MATRIX: %d cases run\n", ncases);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const pipe_case *cases = world_size == 8 ? cases_np8 : cases_np4;
  int ncases = world_size == 8 ? (int)(sizeof cases_np8 / sizeof cases_np8[0])
                               : (int)(sizeof cases_np4 / sizeof cases_np4[0]);
  /* PIPE_CASE="layout;layers;sp;stage;microbatches;recompute" runs that case only (for debugging) */
  const char *only = getenv("PIPE_CASE");
  if (only) {
    static char layout[200], recompute[32];
    pipe_case c = {layout, 0, 0, 0, 0, recompute};
    if (sscanf(only, "%199[^;];%d;%d;%d;%d;%31s", layout, &c.layers, &c.sp, &c.stage, &c.microbatches, recompute) == 6)
      check_case(&c, 0);
    return test_finish_mpi("test_pipeline (PIPE_CASE)");
  }
#ifdef PIPE_MATRIX_PART
  run_matrix(PIPE_MATRIX_PART, PIPE_MATRIX_PARTS);
  return test_finish_mpi(world_size == 8 ? "test_pipeline_matrix_np8" : "test_pipeline_matrix_np4");
#endif
  if (getenv("PIPE_MATRIX")) { /* the whole matrix in one run */
    run_matrix(0, 1);
    return test_finish_mpi(world_size == 8 ? "test_pipeline_np8 (PIPE_MATRIX)" : "test_pipeline_np4 (PIPE_MATRIX)");
  }
  for (int k = 0; k < ncases; k++) check_case(&cases[k], k == 0);
  check_refusals();
  if (world_size == 4) check_chunk_buffers();
  return test_finish_mpi(world_size == 8 ? "test_pipeline_np8" : "test_pipeline_np4");
}
