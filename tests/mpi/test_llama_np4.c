/* The LLaMA-class GPT in every parallel layout, on 4 ranks: kv_heads 2 < heads 4,
 * untied, no biases, vocabulary 1,001 (padded at tp 4), ffn 8/3 x dim, head_dim
 * 8 != dim / heads = 6, trained 10 AdamW steps on global batches of 8 rows:
 *  - tp 2, tp 4 (each kv head replicated on 2 ranks), pp 2 x tp 2, ZeRO 3,
 *    sequence parallelism and recomputation (full, selective) give the serial
 *    run's losses within 1e-5 relative; and with one kv head (multi-query),
 *    pp 2 x tp 2 under ZB-H1 (the replicated head's weight gradient summed in
 *    the deferred W pass) gives its serial run's;
 *  - tp 4 twice gives the same losses and parameters bit for bit, and after its 10
 *    steps the replicas of each kv head (the k and v rows of the fused QKV weight
 *    on tp ranks 2j and 2j + 1) are bitwise equal;
 *  - its checkpoint, saved at tp 4, loads at tp 1 (dp 4) and tp 2 (dp 2), and the
 *    next 2 steps give the serial run's steps 11 and 12 within 1e-5.
 * Tolerance: the layouts change only the order of f32 sums (tp's all-reduces, dp's
 * gradient mean); measured differences are a few 1e-7. */
#include <mpi.h>
#include <stdlib.h>

#include "parallel/model_impl.h"
#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"

enum { SEQ = 8, ROWS = 8, MICRO = 2, STEPS = 10, MORE = 2 };
static int world_rank;

typedef struct {
  const char *name, *options;
  int stage, sp;
  int kv; /* key/value heads; 0: 2 */
} layout;

typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  MPI_Comm comm;
} run;

static gaaw_gpt_config_t llama(const layout *l)
{
  gaaw_gpt_config_t g = model_tiny_llama(SEQ, l->kv ? l->kv : 2);
  g.sequence_parallel = l->sp;
  return g;
}

static run open_run(const layout *l, MPI_Comm comm)
{
  run r = {NULL, NULL, NULL, comm};
  char list[256];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 microbatches=%d %s", MICRO, l->options);
  r.ctx = test_context(comm, list);
  gaaw_gpt_config_t g = llama(l);
  require_ok(r.ctx, gaaw_model_create_gpt(r.ctx, &g, &r.model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = l->stage;
  oc.lr = 3e-3f;
  oc.accumulation = MICRO;
  oc.clip_norm = 1.0f;
  require_ok(r.ctx, gaaw_optimizer_create(r.model, &oc, &r.opt));
  return r;
}

static void close_run(run *r)
{
  gaaw_optimizer_destroy(&r->opt);
  gaaw_model_destroy(&r->model);
  gaaw_finalize(&r->ctx);
}

/* Steps [first, first + n) on the global batch of step s, this rank's dp part of
 * it; losses[] the global batch's mean loss. */
static void train(run *r, int first, int n, float *losses)
{
  int dp_rank, dp, size;
  require_ok(r->ctx, gaaw_topology_group_rank(r->ctx, GAAW_GROUP_DP, &dp_rank, &dp));
  MPI_Comm_size(r->comm, &size);
  int rows = ROWS / dp;
  int32_t tokens[ROWS * SEQ], targets[ROWS * SEQ];
  for (int s = first; s < first + n; s++) {
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1);
    for (int i = 0; i < ROWS * SEQ; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      tokens[i] = (int32_t)((x >> 33) % 1001);
    }
    for (int i = 0; i < ROWS * SEQ; i++) targets[i] = tokens[(i + 1) % (ROWS * SEQ)];
    gaaw_batch_t b = {.batch = rows / MICRO, .seq = SEQ, .microbatches = MICRO, .tokens = tokens + dp_rank * rows * SEQ,
                      .targets = targets + dp_rank * rows * SEQ};
    float loss, sum;
    require_ok(r->ctx, gaaw_model_forward_backward(r->model, &b, &loss));
    require_ok(r->ctx, gaaw_optimizer_step(r->opt));
    MPI_Allreduce(&loss, &sum, 1, MPI_FLOAT, MPI_SUM, r->comm);
    losses[s - first] = sum / (float)size;
  }
}

/* The k and v rows of every fused QKV weight here, bitwise equal on tp ranks 2j
 * and 2j + 1 (the world is the tp group at tp 4). */
static void expect_kv_replicas_equal(gaaw_model_t m)
{
  int checked = 0;
  for (int i = 0; i < m->params.count; i++) {
    const gaaw_param *p = &m->params.items[i];
    if (!gaaw_param_has_replicas(p, m->tp_size)) continue;
    for (int b = 1; b < 3; b++) {
      int64_t at, count;
      gaaw_param_block_span(p, b, &at, &count);
      float *mine = malloc(sizeof(float) * (size_t)count), *all = malloc(sizeof(float) * (size_t)count * 4);
      require_ok(m->ctx, gaaw_buffer_read(m->ctx, p->value.buf, p->value.offset + (size_t)at * sizeof(float), mine,
                                          sizeof(float) * (size_t)count));
      MPI_Allgather(mine, (int)count, MPI_FLOAT, all, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
      for (int j = 0; j < 2; j++)
        expect_true(!memcmp(all + 2 * j * count, all + (2 * j + 1) * count, sizeof(float) * (size_t)count),
                    "%s: the %s rows of kv head %d differ between tp ranks %d and %d", p->name, b == 1 ? "k" : "v", j,
                    2 * j, 2 * j + 1);
      checked++;
      free(mine);
      free(all);
    }
  }
  expect_true(checked == 4, "tp 4: %d replicated kv blocks checked, expected 2 layers x (k, v)", checked);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  float want[STEPS + MORE], want_mqa[STEPS], got[STEPS + MORE];
  const layout serial = {"serial", "", 0, 0, 0}, serial_mqa = {"serial, one kv head", "", 0, 0, 1};
  run r = open_run(&serial, MPI_COMM_SELF);
  train(&r, 0, STEPS + MORE, want);
  close_run(&r);
  r = open_run(&serial_mqa, MPI_COMM_SELF);
  train(&r, 0, STEPS, want_mqa);
  close_run(&r);

  static const layout layouts[] = {
    {"tp 2 (dp 2)", "tp=2", 0, 0},
    {"tp 4, kv heads replicated", "tp=4", 1, 0},
    {"pp 2 x tp 2", "tp=2 pp=2", 0, 0},
    {"tp 2, ZeRO 3 (dp 2)", "tp=2", 3, 0},
    {"tp 4, sequence parallel, selective recompute, ZeRO 2", "tp=4 recompute=selective", 2, 1},
    {"tp 2, full recompute (dp 2)", "tp=2 recompute=full", 0, 0},
    /* ZB-H1's deferred weight gradients sum the replicated kv head's in its W pass */
    {"pp 2 x tp 2, zb-h1, one kv head replicated", "tp=2 pp=2 pp_schedule=zb-h1", 1, 0, 1},
  };
  char what[160];
  for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
    r = open_run(&layouts[k], MPI_COMM_WORLD);
    train(&r, 0, STEPS, got);
    snprintf(what, sizeof what, "%s: 10 losses against the serial run's", layouts[k].name);
    expect_close_scaled(got, layouts[k].kv == 1 ? want_mqa : want, STEPS, 1e-5, what);
    close_run(&r);
  }

  /* tp 4 twice: bit for bit; its kv replicas equal; its checkpoint into tp 1 and 2 */
  char base[256], dir[300];
  ckpt_test_dir(base, sizeof base, "llama-ckpt-");
  snprintf(dir, sizeof dir, "%s/tp4", base);
  long n[2];
  float *params[2], again[STEPS];
  for (int k = 0; k < 2; k++) {
    r = open_run(&layouts[1], MPI_COMM_WORLD);
    train(&r, 0, STEPS, k ? again : got);
    params[k] = model_snapshot(r.model, 0, &n[k]);
    if (k == 0) {
      expect_kv_replicas_equal(r.model);
      require_ok(r.ctx, gaaw_checkpoint_save(r.opt, dir));
    }
    close_run(&r);
  }
  expect_true(!memcmp(got, again, sizeof got[0] * STEPS) && n[0] == n[1] &&
                !memcmp(params[0], params[1], sizeof(float) * (size_t)n[0]),
              "tp 4 run twice: the losses and parameters differ");
  free(params[0]);
  free(params[1]);
  static const layout targets[] = {{"tp 1 (dp 4)", "", 0, 0}, {"tp 2 (dp 2)", "tp=2", 1, 0}};
  for (int k = 0; k < 2; k++) {
    r = open_run(&targets[k], MPI_COMM_WORLD);
    require_ok(r.ctx, gaaw_checkpoint_load(r.opt, dir));
    train(&r, STEPS, MORE, got);
    snprintf(what, sizeof what, "saved at tp 4, loaded at %s: steps 11 and 12 against the serial run's",
             targets[k].name);
    expect_close_scaled(got, want + STEPS, MORE, 1e-5, what);
    close_run(&r);
  }
  ckpt_test_dir_remove(base);
  int failures = test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total && !failures) return 1;
  return test_finish("test_llama_np4");
}
