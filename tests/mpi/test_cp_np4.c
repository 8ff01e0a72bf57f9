/* Context parallelism on 4 ranks: a LLaMA-class GPT (2 layers, dim 24, 4 query heads
 * of 8 over 2 kv heads, RoPE) trained 10 AdamW steps on global batches of 4 sequences
 * of 1,024 tokens, each sequence split over the cp ranks (2 x cp pieces, rank r
 * holding r and 2 cp - 1 - r), the attention a ring of blocked kernels:
 *  - cp 2 (dp 2), cp 4, cp 2 x tp 2 with sequence parallelism, cp 2 x pp 2 under
 *    1F1B, cp 2 x dp 2 at ZeRO 3 and cp 2 with full recomputation give the serial
 *    run's losses within 1e-5 relative, and its parameters after the 10 steps within
 *    1e-3 of each tensor's largest value;
 *  - cp 2 with full recomputation in bf16 gives its serial bf16 run's losses within
 *    bf16's unit roundoff of the loss (2^-8 of its largest value, as
 *    test_mixed_precision derives);
 *  - cp 4 twice gives the same losses and parameters bit for bit;
 *  - the checkpoint of cp 2 x tp 2 loads at cp 1 x dp 4, whose next step gives the
 *    serial run's eleventh loss within 1e-5;
 *  - a sequence that does not divide by 2 x cp, a sequence that differs on one cp
 *    rank, attention=matrix, a backward without an optimizer, the logits of a split
 *    sequence and 2 heads under all-to-all at cp 4 are refused with their named
 *    error on every rank; a forward alone runs.
 * Tolerances: cp changes the order of f32 sums (the ring's merges, the dp-cp
 * gradient sum). The losses differ by a few 1e-7. The data are random tokens, so
 * the loss stays near ln 1001 and hardly sees the attention; the parameters do:
 * Adam moves each element by about lr whatever its gradient's size, so a gradient
 * near eps turns on its last bits (measured: 1.5e-4 of a tensor's largest value at
 * most), while a ring that drops the other ranks' keys is off by 3e-3 to 0.8. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"

#ifdef CP_MATRIX /* make check-cp-matrix: shorter sequences, 8 ranks, a replica's 2 microbatches at dp 4 */
enum { SEQ = 256, ROWS = 8, MICRO = 2, STEPS = 10, MORE = 1, VOCAB = 1001 };
#else
enum { SEQ = 1024, ROWS = 4, MICRO = 2, STEPS = 10, MORE = 1, VOCAB = 1001 };
#endif
static int world_rank;

typedef struct {
  const char *name, *options;
  int stage, sp;
  gaaw_dtype_t dtype;   /* 0: f32 */
  int micro;            /* microbatches of a step (0: MICRO) */
} layout;

typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  MPI_Comm comm;
  int micro;
} run;

static gaaw_gpt_config_t config_of(const layout *l)
{
  gaaw_gpt_config_t g = model_tiny_llama(SEQ, 2);
  g.sequence_parallel = l->sp;
  g.dtype = l->dtype ? l->dtype : GAAW_F32;
  return g;
}

static run open_run(const layout *l, MPI_Comm comm)
{
  run r = {NULL, NULL, NULL, comm, l->micro ? l->micro : MICRO};
  char list[256];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 microbatches=%d %s", r.micro, l->options);
  r.ctx = test_context(comm, list);
  gaaw_gpt_config_t g = config_of(l);
  require_ok(r.ctx, gaaw_model_create_gpt(r.ctx, &g, &r.model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = l->stage;
  oc.lr = 3e-3f;
  oc.accumulation = r.micro;
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

/* The global batch of step s: ROWS sequences of random tokens, each target the next token. */
static void global_batch(int s, int32_t *tokens, int32_t *targets)
{
  uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1);
  for (int i = 0; i < ROWS * SEQ; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tokens[i] = (int32_t)((x >> 33) % VOCAB);
  }
  for (int i = 0; i < ROWS * SEQ; i++) targets[i] = tokens[(i + 1) % (ROWS * SEQ)];
}

/* Steps [first, first + n); every rank of a dp replica is given its rows, whole
 * sequences (the cp ranks cut them); losses[] the global batch's mean loss; params
 * (NULL: not read) every parameter after them (gaaw_model_get_params). */
static void train(run *r, int first, int n, float *losses, float *params)
{
  int dp_rank, dp;
  require_ok(r->ctx, gaaw_topology_group_rank(r->ctx, GAAW_GROUP_DP, &dp_rank, &dp));
  int rows = ROWS / dp;
  static int32_t tokens[ROWS * SEQ], targets[ROWS * SEQ];
  for (int s = first; s < first + n; s++) {
    global_batch(s, tokens, targets);
    gaaw_batch_t b = {.batch = rows / r->micro, .seq = SEQ, .microbatches = r->micro, .tokens = tokens + dp_rank * rows * SEQ,
                      .targets = targets + dp_rank * rows * SEQ};
    float loss, sum;
    int size;
    require_ok(r->ctx, gaaw_model_forward_backward(r->model, &b, &loss));
    require_ok(r->ctx, gaaw_optimizer_step(r->opt));
    /* every rank holds its replica's loss: the mean over the world is the dp mean */
    MPI_Comm_size(r->comm, &size);
    MPI_Allreduce(&loss, &sum, 1, MPI_FLOAT, MPI_SUM, r->comm);
    losses[s - first] = sum / (float)size;
  }
  if (params) require_ok(r->ctx, gaaw_model_get_params(r->model, params));
}

/* doc/context-parallel.md's traffic, per layer of a rank's stage and microbatch,
 * with S = b (seq / cp) (heads / tp) head_dim dtype bytes (one tensor of its
 * tokens' heads) and r = 1 under full recomputation:
 *  - ring: it sends its keys and values (KV = 2 S) cp - 1 times in forward (again
 *    under r), cp - 1 times in backward, and their gradient cp times; it receives as
 *    much;
 *  - a2a: its all-to-alls' send tensors hold 4 S in forward (q, k, v there, the output
 *    back; again under r) and 8 S in backward (q, k, v; the output gradient and the
 *    output; dq, dk, dv back), and nothing is sent point to point.
 * Checked against the cp group's counters after STEPS steps. */
static void expect_cp_bytes(const run *r, const layout *l)
{
  int cp, tp, pp, dp;
  require_ok(r->ctx, gaaw_topology_cp(r->ctx, &cp, NULL));
  require_ok(r->ctx, gaaw_topology_sizes(r->ctx, &dp, &pp, &tp));
  gaaw_gpt_config_t g = config_of(l);
  int full = strstr(l->options, "recompute=full") != NULL;
  uint64_t b = (uint64_t)(ROWS / dp / r->micro), size = l->dtype == GAAW_BF16 ? 2 : 4;
  int a2a = strstr(l->options, "cp_kind=a2a") != NULL;
  uint64_t S = b * (uint64_t)(SEQ / cp) * (uint64_t)(g.heads / tp) * (uint64_t)g.head_dim * size;
  uint64_t layers = (uint64_t)(g.layers / pp) * (uint64_t)r->micro;
  uint64_t p2p = a2a ? 0 : layers * 2 * S * (uint64_t)((cp - 1) * (2 + full) + cp);
  uint64_t all = a2a ? layers * S * (uint64_t)(4 * (1 + full) + 8) : 0;
  gaaw_comm_t comm;
  require_ok(r->ctx, gaaw_topology_comm(r->ctx, GAAW_GROUP_CP, &comm));
  uint64_t sent = 0, received = 0, exchanged = 0;
  require_ok(r->ctx, gaaw_comm_stats(comm, GAAW_COMM_SEND, NULL, &sent));
  require_ok(r->ctx, gaaw_comm_stats(comm, GAAW_COMM_RECV, NULL, &received));
  require_ok(r->ctx, gaaw_comm_stats(comm, GAAW_COMM_ALLTOALL, NULL, &exchanged));
  expect_true(sent == STEPS * p2p && received == STEPS * p2p && exchanged == STEPS * all,
              "%s: the cp group sent %llu, received %llu and exchanged %llu bytes in %d steps; the formula says "
              "%llu, %llu and %llu", l->name, (unsigned long long)sent, (unsigned long long)received,
              (unsigned long long)exchanged, STEPS, (unsigned long long)(STEPS * p2p),
              (unsigned long long)(STEPS * p2p), (unsigned long long)(STEPS * all));
}

#ifndef CP_MATRIX
/* A call that every rank must fail with `want`, its message containing `says`. */
static void expect_refused(gaaw_context_t ctx, gaaw_status_t st, gaaw_status_t want, const char *says,
                           const char *what)
{
  const char *msg = gaaw_last_error(ctx);
  expect_true(st == want && strstr(msg, says), "%s: status %d (want %d), message '%s' (want '%s')", what, (int)st,
              (int)want, msg, says);
}

static void bad_input(void)
{
  const layout l = {"cp 2", "cp=2", 0, 0, 0, 0};
  run r = open_run(&l, MPI_COMM_WORLD);
  static int32_t tokens[2 * SEQ], targets[2 * SEQ];
  global_batch(0, tokens, targets);
  /* 1,022 tokens do not cut into 4 pieces of equal length */
  gaaw_batch_t b = {.batch = 1, .seq = 1022, .microbatches = 1, .tokens = tokens, .targets = targets};
  expect_refused(r.ctx, gaaw_model_forward_backward(r.model, &b, NULL), GAAW_ERR_INVALID_ARG,
                 "must divide by 2 x cp = 4", "seq 1022 at cp 2");
  /* cp rank 1 of the first replica (world rank 1) is given another sequence */
  b.seq = SEQ;
  if (world_rank == 1) b.tokens = tokens + SEQ;
  expect_refused(r.ctx, gaaw_model_forward_backward(r.model, &b, NULL), GAAW_ERR_INVALID_ARG,
                 "the batch of a cp group", "a sequence that differs on one cp rank");
  close_run(&r);

  /* attention=matrix cannot run the ring; a backward needs the optimizer's dp-cp sum */
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host cp=2 attention=matrix");
  gaaw_gpt_config_t g = config_of(&l);
  gaaw_model_t m = NULL;
  expect_refused(ctx, gaaw_model_create_gpt(ctx, &g, &m), GAAW_ERR_UNSUPPORTED, "attention=matrix at cp = 2",
                 "attention=matrix at cp 2");
  gaaw_finalize(&ctx);
  ctx = test_context(MPI_COMM_WORLD, "backend=host cp=2");
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &m));
  b.tokens = tokens;
  expect_refused(ctx, gaaw_model_forward_backward(m, &b, NULL), GAAW_ERR_UNSUPPORTED, "needs an optimizer",
                 "a backward at cp 2 without an optimizer");
  float loss = 0;
  require_ok(ctx, gaaw_model_forward(m, &b, &loss)); /* forward alone runs */
  expect_true(loss > 6.0f && loss < 8.0f, "cp 2 forward: the loss %g is not near ln 1001 = 6.9", (double)loss);
  static float logits[2 * SEQ * VOCAB];
  expect_refused(ctx, gaaw_model_get_logits(m, logits), GAAW_ERR_UNSUPPORTED, "logits of a split sequence",
                 "gaaw_model_get_logits at cp 2");
  gaaw_model_destroy(&m);
  gaaw_finalize(&ctx);

  /* all-to-all splits a rank's heads over cp: 2 heads do not split over 4 */
  ctx = test_context(MPI_COMM_WORLD, "backend=host cp=4 cp_kind=a2a");
  g.heads = 2;
  expect_refused(ctx, gaaw_model_create_gpt(ctx, &g, &m), GAAW_ERR_INVALID_ARG,
                 "cp_kind=a2a at cp = 4: the 2 heads of a tp rank (heads 2 / tp 1) must divide by cp",
                 "2 heads under all-to-all at cp 4");
  gaaw_finalize(&ctx);
}
#endif

/* One layout against the serial run: its losses, its parameters, its traffic. */
static void check_layout(const layout *l, const float *want, const float *want_params, float *got_params,
                         run *keep)
{
  char what[400];
  float got[STEPS];
  run r = open_run(l, MPI_COMM_WORLD);
  train(&r, 0, STEPS, got, got_params);
  snprintf(what, sizeof what, "%s: 10 losses against the serial run's", l->name);
  expect_close_scaled(got, want, STEPS, l->dtype == GAAW_BF16 ? 1.0 / 256 : 1e-5, what);
  snprintf(what, sizeof what, "%s: the parameters after 10 steps against the serial run's", l->name);
  if (l->dtype != GAAW_BF16) expect_close_model(r.model, got_params, want_params, 1e-3, what);
  expect_cp_bytes(&r, l);
  if (keep)
    *keep = r;
  else
    close_run(&r);
}

#ifdef CP_MATRIX
/* make check-cp-matrix (8 ranks): cp 2 and 4 x ring and all-to-all x tp 1 and 2 (with
 * sequence parallelism) x pp 1 and 2 (gpipe, 1f1b, zb-h1) x ZeRO 0-3 x recompute none
 * and full, each that fits 8 ranks and whose heads divide (all-to-all splits a
 * rank's 4 / tp heads over cp), the rest of the 8 ranks data parallel. */
static void cp_matrix(const float *want, const float *want_params, float *got_params)
{
  static const char *const schedules[] = {"gpipe", "1f1b", "zb-h1"};
  int cases = 0;
  for (int cp = 2; cp <= 4; cp *= 2)
    for (int a2a = 0; a2a < 2; a2a++)
      for (int tp = 1; tp <= 2; tp++)
        for (int pp = 1; pp <= 2; pp++)
          for (int s = 0; s < (pp > 1 ? 3 : 1); s++)
            for (int zero = 0; zero <= 3; zero++)
              for (int full = 0; full < 2; full++) {
                if (cp * tp * pp > 8 || (a2a && (4 / tp) % cp)) continue;
                char options[160], name[200];
                snprintf(options, sizeof options, "cp=%d tp=%d pp=%d pp_schedule=%s cp_kind=%s recompute=%s", cp, tp, pp,
                         schedules[pp > 1 ? s : 1], a2a ? "a2a" : "ring", full ? "full" : "none");
                snprintf(name, sizeof name, "%s, ZeRO %d", options, zero);
                layout l = {name, options, zero, tp > 1, 0, 0};
                check_layout(&l, want, want_params, got_params, NULL);
                cases++;
              }
  if (world_rank == 0) printf("check-cp-matrix: %d layouts against the serial run\n", cases);
}
#endif

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  float want[STEPS + MORE], want_bf16[STEPS];
  long count = 0;
  const layout serial = {"serial", "", 0, 0, 0};
  const layout serial_bf16 = {"serial, full recompute, bf16", "recompute=full", 0, 0, GAAW_BF16};
  /* the serial runs on rank 0 only, shared */
  float *want_params = NULL, *got_params = NULL;
  if (world_rank == 0) {
    run r = open_run(&serial, MPI_COMM_SELF);
    int64_t total;
    require_ok(r.ctx, gaaw_model_num_params(r.model, &total, NULL));
    count = (long)total;
    want_params = malloc(sizeof(float) * (size_t)count);
    train(&r, 0, STEPS, want, want_params);
    train(&r, STEPS, MORE, want + STEPS, NULL);
    close_run(&r);
#ifndef CP_MATRIX
    r = open_run(&serial_bf16, MPI_COMM_SELF);
    train(&r, 0, STEPS, want_bf16, NULL);
    close_run(&r);
#endif
  }
  MPI_Bcast(&count, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  if (world_rank) want_params = malloc(sizeof(float) * (size_t)count);
  got_params = malloc(sizeof(float) * (size_t)count);
  MPI_Bcast(want, STEPS + MORE, MPI_FLOAT, 0, MPI_COMM_WORLD);
  MPI_Bcast(want_params, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
#ifdef CP_MATRIX
  (void)serial_bf16;
  (void)want_bf16;
  cp_matrix(want, want_params, got_params);
  free(want_params);
  free(got_params);
  return test_finish_mpi("test_cp_matrix");
#else
  MPI_Bcast(want_bf16, STEPS, MPI_FLOAT, 0, MPI_COMM_WORLD);

  static const layout layouts[] = {
    {"cp 2 (dp 2)", "cp=2", 0, 0, 0},
    {"cp 4", "cp=4", 0, 0, 0},
    {"cp 2 x tp 2, sequence parallel", "cp=2 tp=2", 0, 1, 0},
    {"cp 2 x pp 2, 1F1B", "cp=2 pp=2 pp_schedule=1f1b", 0, 0, 0},
    {"cp 2 x dp 2, ZeRO 3", "cp=2", 3, 0, 0},
    {"cp 2 (dp 2), full recompute", "cp=2 recompute=full", 0, 0, 0},
    {"cp 2 (dp 2), full recompute, bf16", "cp=2 recompute=full", 0, 0, GAAW_BF16},
    {"cp 4, all-to-all", "cp=4 cp_kind=a2a", 0, 0, 0},
    {"cp 2 x tp 2, all-to-all, full recompute", "cp=2 tp=2 cp_kind=a2a recompute=full", 0, 0, 0},
    {"cp 2 x dp 2, all-to-all, ZeRO 2", "cp=2 cp_kind=a2a", 2, 0, 0},
  };
  char base[256], dir[300];
  ckpt_test_dir(base, sizeof base, "cp-ckpt-");
  snprintf(dir, sizeof dir, "%s/cp2-tp2", base);
  for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
    run kept;
    check_layout(&layouts[k], layouts[k].dtype == GAAW_BF16 ? want_bf16 : want, want_params, got_params,
                 k == 2 ? &kept : NULL);
    if (k != 2) continue;
    require_ok(kept.ctx, gaaw_checkpoint_save(kept.opt, dir)); /* cp 2 x tp 2 */
    close_run(&kept);
  }

  /* cp 4 twice: bit for bit */
  long n[2];
  float *params[2], got[STEPS], again[STEPS];
  for (int k = 0; k < 2; k++) {
    run r = open_run(&layouts[1], MPI_COMM_WORLD);
    train(&r, 0, STEPS, k ? again : got, NULL);
    params[k] = model_snapshot(r.model, 0, &n[k]);
    close_run(&r);
  }
  expect_true(!memcmp(got, again, sizeof got) && n[0] == n[1] && !memcmp(params[0], params[1], sizeof(float) * (size_t)n[0]),
              "cp 4 run twice: the losses or parameters differ");
  free(params[0]);
  free(params[1]);
  /* saved at cp 2 x tp 2, loaded at cp 1 x dp 4 (a microbatch of 1 sequence each):
   * the next step is the serial run's eleventh */
  const layout dp4 = {"cp 1 x dp 4", "", 0, 0, 0, 1};
  run r = open_run(&dp4, MPI_COMM_WORLD);
  require_ok(r.ctx, gaaw_checkpoint_load(r.opt, dir));
  train(&r, STEPS, MORE, got, NULL);
  expect_close_scaled(got, want + STEPS, MORE, 1e-5, "saved at cp 2 x tp 2, loaded at cp 1 x dp 4: step 11");
  close_run(&r);
  ckpt_test_dir_remove(base);
  free(want_params);
  free(got_params);
  bad_input();
  return test_finish_mpi("test_cp_np4");
#endif
}
