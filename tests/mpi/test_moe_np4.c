/* A LLaMA-class GPT with mixture-of-experts MLPs (8 experts, top-2, and a gated
 * shared expert, in blocks 0 and 2 of 3: block 1 stays dense) on 4 ranks, 10 AdamW
 * steps of global batches of 8 rows in 2 microbatches, load-balancing and z losses
 * on:
 *  - dp 4, pp 2 x dp 2 (the MoE layers on both stages), ZeRO 1 and 3, full
 *    recomputation, pp 2 under ZB-H1, tp 2 x dp 2 (each tp rank routing half the
 *    tokens), the same with sequence parallelism at ZeRO 3, pp 2 x tp 2 with full
 *    recomputation, and expert parallelism: ep 2 (expert-dp 2), ep 4 at ZeRO 1, ep
 *    2 at ZeRO 3, ep 2 x pp 2 with full recomputation at ZeRO 2 (E / ep experts
 *    held, rows exchanged) give the serial run's losses (aux losses included), aux
 *    and z losses and gradient norms within 1e-5 relative, and per-expert counts
 *    exactly; the steps' smallest top-2 margin is reported and must exceed 6e-8,
 *    8 f32 steps of the scores (about 1/8), far above what the layouts' rounding
 *    moves them: no near-tie;
 *  - at capacity factor 1.0, dropping by weight (dp 4; pp 2 x dp 2, ZeRO 1) and by
 *    position (dp 4, ZeRO 3), the same against the serial run at that capacity,
 *    the share of assignments dropped included (exactly: the drop is decided over
 *    the global microbatch);
 *  - pp 2 x dp 2 run twice: the same losses and parameters bit for bit;
 *  - a checkpoint saved at ZeRO 3, dp 4 loads at pp 2 x dp 2, and one saved at ep 2
 *    (ZeRO 0) loads at ep 4 (ZeRO 1): the next 2 steps give the serial run's steps
 *    11 and 12 within 1e-5;
 *  - every block an MoE one (no shared expert), exported at ep 2 in Mixtral's
 *    safetensors layout (block_sparse_moe.gate, experts.E.w1/w3/w2 and config.json's
 *    mixtral fields), imports at pp 2 x dp 2 and at ep 4 bit for bit;
 *  - bad configurations fail every rank with the same named error before
 *    training: top_k > experts on one rank only, experts at cp 2, capacity at tp
 *    2, bf16, 6 experts over ep 4, ep 2 without experts, ep 2 with tp 2.
 * The token group of an MoE layer is the global microbatch (every replica's
 * microbatch i), so each replica here trains on its share of each serial
 * microbatch (rows strided by microbatch, as a global-batch loader gives them). */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>

#include "parallel/model_impl.h"
#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"

enum { SEQ = 8, ROWS = 8, MICRO = 2, STEPS = 10, MORE = 2, E = 8, K = 2, LAYERS = 2 };
static int world_rank;

typedef struct {
  const char *name, *options;
  int stage;
  int capacity; /* capacity factor 1.0, dropping by weight (1) or position (2); 0: dropless */
  int sp;       /* sequence parallelism */
} layout;

typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  MPI_Comm comm;
} run;

/* what one step measured */
typedef struct {
  float loss, grad_norm;
  double aux, z, margin, dropped;
  int64_t counts[LAYERS * E];
} step_record;

static gaaw_gpt_config_t moe_config(int capacity)
{
  gaaw_gpt_config_t g = model_tiny_llama(SEQ, 2);
  g.layers = 3;
  g.experts = E;
  g.top_k = K;
  g.moe_every = 2;
  g.moe_ffn = 16;
  g.aux_loss_coef = 0.01f;
  g.z_loss_coef = 0.001f;
  g.shared_ffn = 8; /* and a gated shared expert (Qwen2-MoE's) */
  g.shared_gate = 1;
  g.capacity_factor = capacity ? 1.0f : 0.0f;
  g.drop_policy = capacity == 2 ? GAAW_DROP_POSITION : GAAW_DROP_PROBS;
  return g;
}

/* mixtral: every block an MoE one (Mixtral's layout in safetensors); else blocks 0
 * and 2; weights: a safetensors file imported before the optimizer, or NULL */
static run open_model(const layout *l, MPI_Comm comm, int mixtral, const char *weights)
{
  run r = {NULL, NULL, NULL, comm};
  char list[256];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 microbatches=%d %s", MICRO, l->options);
  r.ctx = test_context(comm, list);
  gaaw_gpt_config_t g = moe_config(l->capacity);
  if (mixtral) g.layers = 2, g.moe_every = 1, g.shared_ffn = 0;
  g.sequence_parallel = l->sp;
  require_ok(r.ctx, gaaw_model_create_gpt(r.ctx, &g, &r.model));
  if (weights) require_ok(r.ctx, gaaw_model_import(r.model, weights));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = l->stage;
  oc.lr = 3e-3f;
  oc.accumulation = MICRO;
  oc.clip_norm = 1.0f;
  require_ok(r.ctx, gaaw_optimizer_create(r.model, &oc, &r.opt));
  return r;
}

static run open_run(const layout *l, MPI_Comm comm)
{
  return open_model(l, comm, 0, NULL);
}

static void close_run(run *r)
{
  gaaw_optimizer_destroy(&r->opt);
  gaaw_model_destroy(&r->model);
  gaaw_finalize(&r->ctx);
}

/* Steps [first, first + n) of the global batches; rec[] the global mean loss and
 * what the MoE layers measured. Replica r's microbatch i is part r of the serial
 * run's microbatch i. */
static void train(run *r, int first, int n, step_record *rec)
{
  int dp_rank, dp, size;
  require_ok(r->ctx, gaaw_topology_group_rank(r->ctx, GAAW_GROUP_DP, &dp_rank, &dp));
  MPI_Comm_size(r->comm, &size);
  const int rows = ROWS / dp, part = rows / MICRO; /* rows of a replica, of its microbatch */
  int32_t tokens[ROWS * SEQ], targets[ROWS * SEQ], mine[2][ROWS * SEQ];
  for (int s = first; s < first + n; s++) {
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1);
    for (int i = 0; i < ROWS * SEQ; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      tokens[i] = (int32_t)((x >> 33) % 1001);
    }
    for (int i = 0; i < ROWS * SEQ; i++) targets[i] = tokens[(i + 1) % (ROWS * SEQ)];
    for (int i = 0; i < MICRO; i++) { /* serial microbatch i = rows [i ROWS / MICRO, ...) */
      size_t from = ((size_t)i * ROWS / MICRO + (size_t)dp_rank * part) * SEQ, to = (size_t)i * part * SEQ;
      memcpy(mine[0] + to, tokens + from, sizeof(int32_t) * (size_t)(part * SEQ));
      memcpy(mine[1] + to, targets + from, sizeof(int32_t) * (size_t)(part * SEQ));
    }
    gaaw_batch_t b = {.batch = part, .seq = SEQ, .microbatches = MICRO, .tokens = mine[0], .targets = mine[1]};
    float loss, sum;
    require_ok(r->ctx, gaaw_model_forward_backward(r->model, &b, &loss));
    require_ok(r->ctx, gaaw_optimizer_step(r->opt));
    MPI_Allreduce(&loss, &sum, 1, MPI_FLOAT, MPI_SUM, r->comm);
    step_record *out = &rec[s - first];
    out->loss = sum / (float)size;
    gaaw_moe_metrics_t mm;
    require_ok(r->ctx, gaaw_model_moe_metrics(r->model, &mm, out->counts, LAYERS * E));
    expect_true(mm.layers == LAYERS && mm.experts == E && mm.top_k == K && mm.tokens == ROWS * SEQ,
                "metrics: %d layers of %d experts, top %d, %lld tokens", mm.layers, mm.experts, mm.top_k,
                (long long)mm.tokens);
    out->aux = mm.aux_loss, out->z = mm.z_loss, out->margin = mm.min_margin, out->dropped = mm.drop_fraction;
    gaaw_step_stats_t stats;
    require_ok(r->ctx, gaaw_optimizer_stats(r->opt, &stats));
    out->grad_norm = stats.grad_norm;
  }
}

/* rec against want: losses, aux and z within tol relative, counts exact, margins clear. */
static void compare(const char *name, const step_record *got, const step_record *want, int n)
{
  char what[200];
  float gl[STEPS + MORE], wl[STEPS + MORE], ga[STEPS + MORE], wa[STEPS + MORE], gz[STEPS + MORE], wz[STEPS + MORE];
  float gn[STEPS + MORE], wn[STEPS + MORE];
  double least = INFINITY;
  for (int s = 0; s < n; s++) {
    gl[s] = got[s].loss, wl[s] = want[s].loss, ga[s] = (float)got[s].aux, wa[s] = (float)want[s].aux;
    gz[s] = (float)got[s].z, wz[s] = (float)want[s].z, gn[s] = got[s].grad_norm, wn[s] = want[s].grad_norm;
    least = fmin(least, got[s].margin);
    expect_true(!memcmp(got[s].counts, want[s].counts, sizeof got[s].counts), "%s: step %d's per-expert counts differ",
                name, s + 1);
    expect_true(got[s].dropped == want[s].dropped, "%s: step %d dropped %g of the assignments, the serial run %g",
                name, s + 1, got[s].dropped, want[s].dropped);
  }
  snprintf(what, sizeof what, "%s: losses against the serial run's", name);
  expect_close_scaled(gl, wl, n, 1e-5, what);
  snprintf(what, sizeof what, "%s: load-balancing losses", name);
  expect_close_scaled(ga, wa, n, 1e-5, what);
  snprintf(what, sizeof what, "%s: z losses", name);
  expect_close_scaled(gz, wz, n, 1e-5, what);
  snprintf(what, sizeof what, "%s: gradient norms (before clipping)", name);
  expect_close_scaled(gn, wn, n, 1e-5, what);
  /* the scores are near 1/8, 7.5e-9 apart in f32: 6e-8 is 8 of their steps; the
   * layouts' weights differ by the rounding of the gradients' reductions (a few 1e-7
   * relative after 10 steps), which moves a logit of about 0.1 and its score by well
   * under 1e-8 */
  expect_true(least > 6e-8, "%s: the smallest top-2 margin is %g: a near-tie", name, least);
  expect_true(isinf(least) == (strstr(name, "moe_margins=no") != NULL), "%s: the margin is %g", name, least);
  if (world_rank == 0) printf("test_moe_np4: %s: smallest top-2 margin %.3g\n", name, least);
}

/* Every rank fails gaaw_model_create_gpt with want when `bad` changes the config
 * (on every rank, or on rank 1 only). */
static void expect_refused(const char *name, const char *options, void (*bad)(gaaw_gpt_config_t *), int rank1_only,
                           gaaw_status_t want)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_gpt_config_t g = moe_config(0);
  if (!rank1_only || world_rank == 1) bad(&g);
  gaaw_model_t m = NULL;
  gaaw_status_t st = gaaw_model_create_gpt(ctx, &g, &m);
  expect_true(st == want && !m, "%s: status %s, expected %s", name, gaaw_status_name(st), gaaw_status_name(want));
  if (world_rank == 0) printf("test_moe_np4: %s: %s\n", name, gaaw_last_error(ctx));
  gaaw_finalize(&ctx);
}

/* At ep > 1 each rank holds E / ep experts (rows of w13 and w2) and the rows
 * travelled over the ep communicator; at ep 1, every expert and no exchange. */
static void check_experts_split(run *r, const char *name)
{
  int ep = 1, ep_rank = 0;
  uint64_t calls = 0, bytes = 0;
  gaaw_comm_t epc;
  require_ok(r->ctx, gaaw_topology_ep(r->ctx, &ep, &ep_rank));
  require_ok(r->ctx, gaaw_topology_comm(r->ctx, GAAW_GROUP_EP, &epc));
  require_ok(r->ctx, gaaw_comm_stats(epc, GAAW_COMM_ALLTOALLV, &calls, &bytes));
  int k = gaaw_params_find(&r->model->params, "h.0.mlp.experts.w13.weight");
  if (k < 0) return; /* block 0 is on another stage */
  const gaaw_param *p = &r->model->params.items[k];
  expect_true(p->local_shape[0] * ep == p->shape[0] && p->row0 == ep_rank * p->local_shape[0],
              "%s: w13 holds rows %lld.. (%lld of %lld) on ep rank %d of %d", name, (long long)p->row0,
              (long long)p->local_shape[0], (long long)p->shape[0], ep_rank, ep);
  expect_true((ep > 1) == (bytes > 0), "%s: %llu alltoallv bytes at ep %d", name, (unsigned long long)bytes, ep);
}

/* Trains STEPS steps at layout from, saves a checkpoint in base/name, loads it at
 * layout to, and holds the next steps to the serial run's (want). */
static void resume_elsewhere(const char *base, const char *name, const layout *from, const layout *to,
                             const step_record *want, step_record *got)
{
  char dir[300], what[200];
  snprintf(dir, sizeof dir, "%s/%s", base, name);
  run r = open_run(from, MPI_COMM_WORLD);
  train(&r, 0, STEPS, got);
  require_ok(r.ctx, gaaw_checkpoint_save(r.opt, dir));
  close_run(&r);
  r = open_run(to, MPI_COMM_WORLD);
  require_ok(r.ctx, gaaw_checkpoint_load(r.opt, dir));
  train(&r, STEPS, MORE, got);
  snprintf(what, sizeof what, "saved at %s, loaded at %s: steps 11 and 12", from->name, to->name);
  compare(what, got, want + STEPS, MORE);
  close_run(&r);
}

/* The text of a file (NUL-terminated; NULL when missing), or of its safetensors
 * header when header is set. */
static char *read_text(const char *path, int header)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint64_t n = 0;
  if (header && fread(&n, sizeof n, 1, f) != 1) n = 0;
  if (!header && fseek(f, 0, SEEK_END) == 0) n = (uint64_t)ftell(f), fseek(f, 0, SEEK_SET);
  char *text = calloc(n + 1, 1);
  if (text && fread(text, 1, n, f) != n) text[0] = 0;
  fclose(f);
  return text;
}

/* A Mixtral-layout model (every block MoE) exported at ep 2 (dp 4) after 3 steps:
 * its file holds Mixtral's names and shapes, config.json says mixtral with 8
 * experts of 2; imported at pp 2 x dp 2 (every expert on each rank) and at ep 4 it
 * holds the same parameters bit for bit. */
static void check_mixtral_export(const char *dir)
{
  char path[400], config[400];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  snprintf(config, sizeof config, "%s/config.json", dir);
  const layout ep2 = {"ep 2", "ep=2", 1, 0}, others[2] = {{"pp 2 x dp 2", "pp=2", 0, 0}, {"ep 4", "ep=4", 3, 0}};
  step_record rec[3];
  run r = open_model(&ep2, MPI_COMM_WORLD, 1, NULL);
  train(&r, 0, 3, rec);
  require_ok(r.ctx, gaaw_model_export(r.model, path));
  long n[2];
  float *params[2];
  params[0] = model_snapshot(r.model, 0, &n[0]);
  close_run(&r);
  if (world_rank == 0) {
    char *head = read_text(path, 1), *cfg = read_text(config, 0);
    const char *names[] = {"\"model.layers.0.block_sparse_moe.gate.weight\":{\"dtype\":\"F32\",\"shape\":[8,24]",
                           "\"model.layers.1.block_sparse_moe.experts.7.w1.weight\":{\"dtype\":\"F32\",\"shape\":[16,24]",
                           "\"model.layers.1.block_sparse_moe.experts.7.w3.weight\":{\"dtype\":\"F32\",\"shape\":[16,24]",
                           "\"model.layers.0.block_sparse_moe.experts.0.w2.weight\":{\"dtype\":\"F32\",\"shape\":[24,16]"};
    for (int k = 0; k < 4; k++)
      expect_true(head && strstr(head, names[k]), "the Mixtral export's header lacks %s", names[k]);
    expect_true(cfg && strstr(cfg, "\"model_type\": \"mixtral\"") && strstr(cfg, "\"num_local_experts\": 8") &&
                  strstr(cfg, "\"num_experts_per_tok\": 2") && strstr(cfg, "\"intermediate_size\": 16"),
                "config.json is not Mixtral's with 8 experts of width 16, top-2: %s", cfg ? cfg : "(missing)");
    free(head);
    free(cfg);
  }
  for (int k = 0; k < 2; k++) {
    r = open_model(&others[k], MPI_COMM_WORLD, 1, path);
    params[1] = model_snapshot(r.model, 0, &n[1]);
    close_run(&r);
    expect_true(n[0] == n[1] && !memcmp(params[0], params[1], sizeof(float) * (size_t)n[0]),
                "the Mixtral export of ep 2 imported at %s holds other parameters", others[k].name);
    free(params[1]);
  }
  free(params[0]);
}

static void top_k_nine(gaaw_gpt_config_t *g)
{
  g->top_k = 9;
}

static void nothing(gaaw_gpt_config_t *g)
{
  (void)g;
}

static void six_experts(gaaw_gpt_config_t *g)
{
  g->experts = 6;
}

static void no_experts(gaaw_gpt_config_t *g)
{
  g->experts = 0;
}

static void capacity_one(gaaw_gpt_config_t *g)
{
  g->capacity_factor = 1.0f;
}

static void bf16(gaaw_gpt_config_t *g)
{
  g->dtype = GAAW_BF16;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  static step_record want[STEPS + MORE], got[STEPS + MORE], again[STEPS], want_capacity[STEPS];
  const layout serial = {"serial", "", 0};
  run r = open_run(&serial, MPI_COMM_SELF);
  train(&r, 0, STEPS + MORE, want);
  close_run(&r);
  if (world_rank == 0) printf("test_moe_np4: serial: loss %.6f -> %.6f, aux %.6f, z %.6f at step 10\n", want[0].loss,
                              want[STEPS - 1].loss, want[STEPS - 1].aux, want[STEPS - 1].z);

  static const layout layouts[] = {
    {"dp 4", "", 0},
    {"pp 2 x dp 2", "pp=2", 0},
    {"ZeRO 1 (dp 4)", "", 1},
    {"ZeRO 3 (dp 4)", "", 3},
    {"full recompute (dp 4)", "recompute=full", 0},
    {"pp 2 x dp 2, zb-h1, ZeRO 2", "pp=2 pp_schedule=zb-h1", 2},
    /* each tp rank routes a tp-th of the tokens (or its sequence-parallel rows) */
    {"tp 2 x dp 2", "tp=2", 0},
    {"tp 2 x dp 2, sequence parallel, ZeRO 3", "tp=2", 3, 0, 1},
    {"pp 2 x tp 2, full recompute", "tp=2 pp=2 recompute=full", 1},
    /* expert parallelism: the experts split over ep ranks, expert-dp the rest */
    {"ep 2 (dp 4: expert-dp 2)", "ep=2", 0},
    {"ep 4 (dp 4), ZeRO 1, moe_margins=no", "ep=4 moe_margins=no", 1},
    {"ep 2, ZeRO 3", "ep=2", 3},
    {"ep 2 x pp 2 (dp 2), full recompute, ZeRO 2", "ep=2 pp=2 recompute=full", 2},
  };
  for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
    r = open_run(&layouts[k], MPI_COMM_WORLD);
    train(&r, 0, STEPS, got);
    compare(layouts[k].name, got, want, STEPS);
    check_experts_split(&r, layouts[k].name);
    close_run(&r);
  }

  /* at capacity 1.0 each policy drops the serial run's assignments (decided over the
   * global microbatch: every replica ranks the whole group's) */
  static const layout capacity[] = {
    {"capacity 1.0 by weight: dp 4", "", 0, 1},
    {"capacity 1.0 by weight: pp 2 x dp 2, ZeRO 1", "pp=2", 1, 1},
    {"capacity 1.0 by position: dp 4, ZeRO 3", "", 3, 2},
  };
  for (size_t k = 0; k < sizeof capacity / sizeof capacity[0]; k++) {
    const layout one = {"serial", "", 0, capacity[k].capacity};
    if (k != 1) {
      r = open_run(&one, MPI_COMM_SELF);
      train(&r, 0, STEPS, want_capacity);
      close_run(&r);
      expect_true(want_capacity[0].dropped > 0 && want_capacity[0].dropped < 0.5,
                  "%s: the serial run's first step dropped %g of the assignments", capacity[k].name,
                  want_capacity[0].dropped);
      if (world_rank == 0) printf("test_moe_np4: %s: the serial run dropped %.3g at step 1\n", capacity[k].name,
                                  want_capacity[0].dropped);
    }
    r = open_run(&capacity[k], MPI_COMM_WORLD);
    train(&r, 0, STEPS, got);
    compare(capacity[k].name, got, want_capacity, STEPS);
    close_run(&r);
  }

  /* pp 2 x dp 2 twice, bit for bit */
  long n[2];
  float *params[2];
  for (int k = 0; k < 2; k++) {
    r = open_run(&layouts[1], MPI_COMM_WORLD);
    train(&r, 0, STEPS, k ? again : got);
    params[k] = model_snapshot(r.model, 0, &n[k]);
    close_run(&r);
  }
  int same = n[0] == n[1] && !memcmp(params[0], params[1], sizeof(float) * (size_t)n[0]);
  for (int s = 0; s < STEPS; s++)
    same = same && got[s].loss == again[s].loss && got[s].aux == again[s].aux && got[s].z == again[s].z;
  expect_true(same, "pp 2 x dp 2 run twice: the losses, aux losses or parameters differ");
  free(params[0]);
  free(params[1]);

  /* saved at ZeRO 3, dp 4; loaded at pp 2 x dp 2. Saved at ep 2 x expert-dp 2 (ZeRO
   * 0: each expert bucket written by its group's first rank); loaded at ep 4, ZeRO 1 */
  char base[256];
  ckpt_test_dir(base, sizeof base, "moe-ckpt-");
  resume_elsewhere(base, "dp4", &layouts[3], &layouts[1], want, got);
  resume_elsewhere(base, "ep2", &layouts[9], &layouts[10], want, got);
  check_mixtral_export(base);
  ckpt_test_dir_remove(base);

  expect_refused("top_k 9 of 8 experts on rank 1 only", "backend=host", top_k_nine, 1, GAAW_ERR_INVALID_ARG);
  expect_refused("experts at cp 2", "backend=host cp=2", nothing, 0, GAAW_ERR_UNSUPPORTED);
  expect_refused("capacity at tp 2", "backend=host tp=2", capacity_one, 0, GAAW_ERR_UNSUPPORTED);
  expect_refused("experts in bf16", "backend=host", bf16, 0, GAAW_ERR_UNSUPPORTED);
  expect_refused("6 experts over ep 4", "backend=host ep=4", six_experts, 0, GAAW_ERR_INVALID_ARG);
  expect_refused("ep 2 without experts", "backend=host ep=2", no_experts, 0, GAAW_ERR_INVALID_ARG);
  expect_refused("ep 2 with tp 2", "backend=host ep=2 tp=2", nothing, 0, GAAW_ERR_UNSUPPORTED);

  int failures = test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total && !failures) return 1;
  return test_finish("test_moe_np4");
}
