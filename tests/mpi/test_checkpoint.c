/* Checkpoints in and across layouts, on 4 and 8 ranks (test_checkpoint_np4, _np8):
 *  - same layout: a model trained 3 steps, saved, trained 5 more; a fresh model
 *    and optimizer of the same layout loaded from the save and trained the same 5
 *    steps give bit for bit the same losses and parameters;
 *  - re-layout: each of the checkpoints of {dp2 tp2 ZeRO 0, dp2 pp2 ZeRO 1, tp2
 *    pp2 ZeRO 0, dp4 ZeRO 3, dp2 pp2 interleaved ZeRO 2, dp2 tp2 bf16 ZeRO 1} loads
 *    into {serial ZeRO 0, dp4 ZeRO 1, tp4 ZeRO 0, pp4 ZB-H1 ZeRO 0}; the state
 *    saved again from there (values, exp_avg, exp_avg_sq of every tensor, read
 *    back densely) is bitwise the saved one, and the next 5 losses are within
 *    1e-5 relative of the uninterrupted run's (the same global batch of 32 rows
 *    in 4 microbatches in every layout); a bf16 checkpoint loads into the f32
 *    models with its fp32 master weights bitwise, and their losses are within
 *    1e-3 of the bf16 run's (they compute in f32 from there on);
 *  - the first source's stored runs are cut at 7 elements (test-only
 *    GAAW_TEST_CHECKPOINT_RUN_ELEMENTS; a real save cuts at 2^24), so its loads
 *    read pieces that end mid-row;
 *  - on 8 ranks: dp2 tp2 pp2 ZeRO 1 and dp2 pp4 ZeRO 2, resumed bit for bit and
 *    loaded into serial, dp8 ZeRO 3 and tp2 pp4 ZB-H1 the same way.
 * The GPT has vocabulary 42, so tp 4 pads it to 44 rows. */
#include <mpi.h>
#include <stdlib.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"

enum { SEQ = 8, GLOBAL_ROWS = 32, MICRO = 4, WARM = 3, AFTER = 5, VOCAB = 42 };
static int world_rank, world_size;
static char base[256];

typedef struct {
  const char *name, *options; /* options beside backend, microbatches */
  int ranks, stage;
  gaaw_dtype_t dtype;
} layout;

static gaaw_gpt_config_t gpt(gaaw_dtype_t dtype)
{
  gaaw_gpt_config_t g = model_tiny_gpt(SEQ, dtype);
  g.vocab = VOCAB;
  g.layers = 4;
  g.heads = 4;
  return g;
}

static gaaw_optimizer_config_t adamw(int stage)
{
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = stage;
  oc.lr = 3e-3f;
  oc.eps = 1e-5f; /* see tests/mpi/test_zero.c: the key bias's rounding noise */
  oc.accumulation = MICRO;
  oc.clip_norm = 1.0f;
  return oc;
}

typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  MPI_Comm comm;
} run;

/* A model and optimizer of layout l over comm (NULL ctx on ranks outside it). */
static run open_run(const layout *l, MPI_Comm comm)
{
  run r = {NULL, NULL, NULL, comm};
  if (comm == MPI_COMM_NULL) return r;
  char list[256];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 zero_bucket_bytes=0 microbatches=%d %s", MICRO,
           l->options);
  r.ctx = test_context(comm, list);
  gaaw_gpt_config_t g = gpt(l->dtype);
  require_ok(r.ctx, gaaw_model_create_gpt(r.ctx, &g, &r.model));
  gaaw_optimizer_config_t oc = adamw(l->stage);
  require_ok(r.ctx, gaaw_optimizer_create(r.model, &oc, &r.opt));
  return r;
}

static void close_run(run *r)
{
  if (!r->ctx) return;
  gaaw_optimizer_destroy(&r->opt);
  gaaw_model_destroy(&r->model);
  gaaw_finalize(&r->ctx);
}

/* Steps [first, first + n): step s trains on the global batch of seed s, this
 * rank's dp part of it, every target counted (so that every microbatch weighs
 * the same in every layout); losses[] the global batch's mean loss. */
static void train(run *r, int first, int n, float *losses)
{
  int dp_rank, dp;
  require_ok(r->ctx, gaaw_topology_group_rank(r->ctx, GAAW_GROUP_DP, &dp_rank, &dp));
  int rows = GLOBAL_ROWS / dp;
  int32_t tokens[GLOBAL_ROWS * SEQ], targets[GLOBAL_ROWS * SEQ];
  for (int s = first; s < first + n; s++) {
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1);
    for (int i = 0; i < GLOBAL_ROWS * SEQ; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      tokens[i] = (int32_t)((x >> 33) % VOCAB);
    }
    for (int i = 0; i < GLOBAL_ROWS * SEQ; i++) targets[i] = tokens[(i + 1) % (GLOBAL_ROWS * SEQ)];
    gaaw_batch_t b = {.batch = rows / MICRO, .seq = SEQ, .microbatches = MICRO, .tokens = tokens + dp_rank * rows * SEQ,
                      .targets = targets + dp_rank * rows * SEQ};
    float loss;
    require_ok(r->ctx, gaaw_model_forward_backward(r->model, &b, &loss));
    require_ok(r->ctx, gaaw_optimizer_step(r->opt));
    /* the step's loss is this dp rank's: the mean over the ranks is the global batch's */
    float sum;
    int size;
    MPI_Allreduce(&loss, &sum, 1, MPI_FLOAT, MPI_SUM, r->comm);
    MPI_Comm_size(r->comm, &size);
    if (losses) losses[s - first] = sum / (float)size;
  }
}

static MPI_Comm comm_of(const layout *l)
{
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank < l->ranks ? 0 : MPI_UNDEFINED, world_rank, &c);
  return c;
}

/* 4 ranks */
static const layout sources4[] = {
  {"dp2 tp2 zero0", "tp=2", 4, 0, GAAW_F32},
  {"dp2 pp2 zero1", "pp=2", 4, 1, GAAW_F32},
  {"tp2 pp2 zero0", "tp=2 pp=2", 4, 0, GAAW_F32},
  {"dp4 zero3", "", 4, 3, GAAW_F32},
  {"dp2 pp2 interleaved zero2", "pp=2 virtual_stages=2 pp_schedule=interleaved", 4, 2, GAAW_F32},
  {"dp2 tp2 bf16 zero1", "tp=2", 4, 1, GAAW_BF16},
};
static const layout targets4[] = {
  {"serial", "", 1, 0, GAAW_F32},
  {"dp4 zero1", "", 4, 1, GAAW_F32},
  {"tp4", "tp=4", 4, 0, GAAW_F32},
  {"pp4 zb-h1", "pp=4 pp_schedule=zb-h1", 4, 0, GAAW_F32},
};
/* 8 ranks: the three dimensions at once, and deeper pipelines */
static const layout sources8[] = {
  {"dp2 tp2 pp2 zero1", "tp=2 pp=2", 8, 1, GAAW_F32},
  {"dp2 pp4 zero2", "pp=4", 8, 2, GAAW_F32},
};
static const layout targets8[] = {
  {"serial", "", 1, 0, GAAW_F32},
  {"dp8 zero3", "", 8, 3, GAAW_F32},
  {"tp2 pp4 zb-h1", "tp=2 pp=4 pp_schedule=zb-h1", 8, 0, GAAW_F32},
};

static void step_dir(char *out, size_t size, const char *dir, int step)
{
  snprintf(out, size, "%s/step-%08d", dir, step);
}

/* The same layout: load, then the same 5 steps bit for bit. */
static void same_layout(const layout *l, const char *dir, const float *want, const float *params_want, long n)
{
  run r = open_run(l, MPI_COMM_WORLD);
  float got[AFTER];
  expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, dir), GAAW_SUCCESS);
  gaaw_step_stats_t st;
  gaaw_optimizer_stats(r.opt, &st);
  expect_true(st.step == WARM, "%s: the loaded step is %lld, not %d", l->name, (long long)st.step, WARM);
  train(&r, WARM, AFTER, got);
  for (int i = 0; i < AFTER; i++)
    expect_true(memcmp(&got[i], &want[i], sizeof(float)) == 0, "%s resumed: loss %d is %.9g, uninterrupted %.9g",
                l->name, WARM + i, got[i], want[i]);
  long m;
  float *params = model_snapshot(r.model, 0, &m);
  expect_true(m == n && memcmp(params, params_want, sizeof(float) * (size_t)n) == 0,
              "%s resumed: the parameters after %d steps differ from the uninterrupted run's", l->name, WARM + AFTER);
  free(params);
  close_run(&r);
}

/* meta.json describes each tensor's layout for readers of the files (a load takes it
 * from the model): the fused q, k, v weight is split by rows in 3 blocks, the
 * attention's projection by columns, whatever the layout saved. */
static void expect_tensor_layout(const ckpt_meta *m, const char *what)
{
  int qkv = 0, proj = 0;
  for (int t = 0; t < m->ntensors; t++) {
    const ckpt_tensor *e = &m->tensors[t];
    int is_qkv = strstr(e->name, "attn.c_attn.weight") != NULL, is_proj = strstr(e->name, "attn.c_proj.weight") != NULL;
    qkv += is_qkv, proj += is_proj;
    if (is_qkv || is_proj)
      expect_true(e->split_axis == (is_qkv ? 0 : 1) && e->fused_blocks == (is_qkv ? 3 : 1),
                  "%s: meta.json gives %s split_axis %d, fused_blocks %d; want %d and %d", what, e->name,
                  e->split_axis, e->fused_blocks, is_qkv ? 0 : 1, is_qkv ? 3 : 1);
  }
  expect_true(qkv >= 1 && qkv == proj, "%s: meta.json has %d qkv and %d projection weights", what, qkv, proj);
}

/* Another layout: load, save again, compare the state; then 5 steps. */
static void relayout(const layout *s, const layout *t, const char *dir, const float *want)
{
  char again[512], what[128], a[600], b[600];
  snprintf(again, sizeof again, "%s-into-%s", dir, t->name);
  for (char *c = again + strlen(base); *c; c++)
    if (*c == ' ') *c = '_';
  snprintf(what, sizeof what, "%s into %s", s->name, t->name);
  MPI_Comm comm = comm_of(t);
  run r = open_run(t, comm);
  float got[AFTER];
  if (r.ctx) {
    expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, dir), GAAW_SUCCESS);
    expect_status_ctx(r.ctx, gaaw_checkpoint_save(r.opt, again), GAAW_SUCCESS);
    train(&r, WARM, AFTER, got);
  }
  close_run(&r);
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank != 0) return;
  step_dir(a, sizeof a, dir, WARM);
  step_dir(b, sizeof b, again, WARM);
  ckpt_dense x, y;
  if (ckpt_dense_read(a, &x) && ckpt_dense_read(b, &y)) {
    expect_same_state(&x, &y, 3, what);
    expect_tensor_layout(&x.meta, what);
    ckpt_dense_free(&y);
  } else {
    expect_true(0, "%s: a checkpoint cannot be read back", what);
  }
  ckpt_dense_free(&x);
  /* a bf16 checkpoint continues in f32 here, in bf16 in the uninterrupted run: its
   * losses differ by bf16's rounding (measured 2e-5 relative), not by the load */
  float tol = s->dtype == t->dtype ? 1e-5f : 1e-3f;
  for (int i = 0; i < AFTER; i++)
    expect_true(fabsf(got[i] - want[i]) <= tol * fabsf(want[i]), "%s: loss %d is %.9g, uninterrupted %.9g", what,
                WARM + i, got[i], want[i]);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size != 4 && world_size != 8) {
    fprintf(stderr, "test_checkpoint needs 4 or 8 ranks\n");
    MPI_Finalize();
    return TEST_SKIP;
  }
  const layout *sources = world_size == 4 ? sources4 : sources8;
  const layout *targets = world_size == 4 ? targets4 : targets8;
  size_t nsources = world_size == 4 ? sizeof sources4 / sizeof sources4[0] : sizeof sources8 / sizeof sources8[0];
  size_t ntargets = world_size == 4 ? sizeof targets4 / sizeof targets4[0] : sizeof targets8 / sizeof targets8[0];
  ckpt_test_dir(base, sizeof base, "ckpt-test-");
  for (size_t k = 0; k < nsources; k++) {
    const layout *l = &sources[k];
    char dir[300];
    snprintf(dir, sizeof dir, "%s/src%zu", base, k);
    run r = open_run(l, MPI_COMM_WORLD);
    float want[AFTER];
    train(&r, 0, WARM, NULL);
    /* the first source cuts its stored runs at 7 elements (the 64 MiB bound of a
     * stored run, scaled down): mid-row, every load below reads many pieces */
    if (k == 0) setenv("GAAW_TEST_CHECKPOINT_RUN_ELEMENTS", "7", 1);
    expect_status_ctx(r.ctx, gaaw_checkpoint_save(r.opt, dir), GAAW_SUCCESS);
    unsetenv("GAAW_TEST_CHECKPOINT_RUN_ELEMENTS");
    train(&r, WARM, AFTER, want);
    long n;
    float *params = model_snapshot(r.model, 0, &n);
    close_run(&r);
    same_layout(l, dir, want, params, n);
    free(params);
    for (size_t j = 0; j < ntargets; j++) relayout(l, &targets[j], dir, want);
  }
  ckpt_test_dir_remove(base);
  return test_finish_mpi("test_checkpoint");
}
