/* The cost model and the planner (gaaw/plan.h) against figures computed here:
 *  - the FLOPs per token a layout's TFLOP/s imply are 6 N + 12 L s h with N counted
 *    here from the block's shapes, and equal gaaw_model_flops_per_token of the GPT
 *    built at a small size;
 *  - with every cost but the pipeline's made negligible, a 1F1B layout's bubble is
 *    (p-1)/(m+p-1) of its pipeline time;
 *  - twice the device peak halves the compute time (no points, no comm, no
 *    elementwise: a fast memory);
 *  - memory per rank falls with the ZeRO stage (3 < 2 < 1 < 0) at dp > 1;
 *  - layouts that do not divide are GAAW_ERR_INVALID_ARG; so are unknown devices,
 *    NULL arguments, a cluster without links and request masks out of range;
 *  - devices of unequal speed: each replica's rows (gaaw_plan_replica_rows) and the
 *    step paced by the slowest replica for its rows;
 *  - a long sequence where cp must be chosen to fit: on a roomy device the search
 *    keeps cp 1 (dp 4 is faster), on one that no cp 1 or cp 2 layout fits (each
 *    predicted by the ledger) every layout it returns is cp 4, and fits;
 *  - a 175B GPT on 1024 H100s: the search answers with layouts that fit, in
 *    seconds (the time is printed; the claim is < 10 s here, the check < 30 s). */
#include <math.h>
#include <mpi.h>
#include <time.h>

#include "gaaw.h"
#include "test_util.h"

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void gpt_175b(gaaw_plan_request_t *r)
{
  memset(r, 0, sizeof *r);
  gaaw_gpt_config_default(&r->model);
  r->model.layers = 96;
  r->model.heads = 96;
  r->model.dim = 12288;
  r->model.max_seq = 2048;
  r->model.vocab = 51200;
  r->model.dtype = GAAW_BF16;
  r->global_batch = 1536;
}

/* gpt_175b's GPT at a smaller size. */
static void gpt_small(gaaw_plan_request_t *r, int layers, int dim, int heads, int seq)
{
  gpt_175b(r);
  r->model.layers = layers;
  r->model.dim = dim;
  r->model.heads = heads;
  r->model.max_seq = seq;
}

static void cluster_of(gaaw_context_t ctx, const char *device, int nodes, gaaw_plan_cluster_t *c)
{
  memset(c, 0, sizeof *c);
  require_ok(ctx, gaaw_plan_device_named(ctx, device, &c->device));
  c->nodes = nodes;
  c->devices_per_node = 8;
  c->intra_node_gbps = 450;
  c->inter_node_gbps = 50;
  c->intra_node_latency_us = 5;
  c->inter_node_latency_us = 10;
  c->host_update_gbps = 100;
  c->nvme_gbps = 25;
}

static gaaw_plan_layout_t layout_of(int dp, int pp, int tp, int v, int mb, int m, int kind, int zero, int rc)
{
  gaaw_plan_layout_t l;
  memset(&l, 0, sizeof l);
  l.dp = dp, l.pp = pp, l.tp = tp, l.virtual_stages = v, l.microbatch = mb, l.microbatches = m;
  l.schedule = kind, l.zero_stage = zero, l.recompute = rc;
  return l;
}

/* 6 N + 12 L s h, N of a tied GELU GPT without its position table. */
static double flops_here(const gaaw_gpt_config_t *g)
{
  double h = g->dim, f = g->ffn ? g->ffn : 4 * h;
  double block = 2 * h + 3 * h * h + 3 * h + h * h + h + 2 * h + h * f + f + f * h + h;
  double n = g->layers * block + (double)g->vocab * h + 2 * h;
  return 6 * n + 12.0 * g->layers * g->max_seq * h;
}

static double implied_flops(const gaaw_plan_request_t *r, const gaaw_plan_layout_t *l)
{
  double world = (double)l->dp * l->pp * l->tp;
  return l->tflops_per_device * 1e12 * world * l->step_seconds / ((double)r->global_batch * r->model.max_seq);
}

static void check_flops(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  gpt_175b(&r);
  cluster_of(ctx, "a100-80g", 128, &c);
  gaaw_plan_layout_t l = layout_of(16, 8, 8, 1, 1, 96, GAAW_PLAN_1F1B, 1, 2);
  require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
  double want = flops_here(&r.model), got = implied_flops(&r, &l);
  expect_true(fabs(got - want) <= 1e-9 * want, "175B: %.6e FLOPs per token implied, 6N+12Lsh = %.6e", got, want);
  expect_true(fabs(l.mfu - l.tflops_per_device / 312) < 1e-12, "mfu %g is not tflops %g over 312", l.mfu,
              l.tflops_per_device);

  /* a small GPT built for real: its own count agrees */
  gaaw_plan_request_t s;
  memset(&s, 0, sizeof s);
  gaaw_gpt_config_default(&s.model);
  s.model.layers = 2;
  s.model.max_seq = 32;
  s.model.dim = 64;
  s.model.heads = 4;
  s.model.vocab = 256;
  s.global_batch = 8;
  cluster_of(ctx, "h100-80g", 1, &c);
  c.devices_per_node = 1;
  l = layout_of(1, 1, 1, 1, 2, 4, GAAW_PLAN_1F1B, 0, 0);
  require_ok(ctx, gaaw_plan_predict(ctx, &s, &c, &l));
  gaaw_model_t model;
  double built;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &s.model, &model));
  require_ok(ctx, gaaw_model_flops_per_token(model, &built));
  gaaw_model_destroy(&model);
  got = implied_flops(&s, &l);
  expect_true(fabs(got - built) <= 1e-9 * built && fabs(built - flops_here(&s.model)) <= 1e-9 * built,
              "small GPT: %.6e implied, %.6e gaaw_model_flops_per_token, %.6e here", got, built,
              flops_here(&s.model));

  /* a small LLaMA-class GPT (RoPE: no position table; grouped-query attention, no
   * biases, RMSNorm, SwiGLU, untied, head_dim != dim / heads) built for real */
  s.model.kv_heads = 2;
  s.model.head_dim = 24;
  s.model.ffn = 0;
  gaaw_gpt_config_llama(&s.model);
  l = layout_of(1, 1, 1, 1, 2, 4, GAAW_PLAN_1F1B, 0, 0);
  require_ok(ctx, gaaw_plan_predict(ctx, &s, &c, &l));
  require_ok(ctx, gaaw_model_create_gpt(ctx, &s.model, &model));
  require_ok(ctx, gaaw_model_flops_per_token(model, &built));
  gaaw_model_destroy(&model);
  got = implied_flops(&s, &l);
  expect_true(fabs(got - built) <= 1e-9 * built, "small LLaMA: %.6e implied, %.6e gaaw_model_flops_per_token", got,
              built);
}

/* The pipeline alone: links and memory so fast that messages and elementwise work
 * take no time, tp = 1, one dp rank. */
static void check_bubble(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  gpt_small(&r, 8, 1024, 8, 256);
  for (int p = 2; p <= 8; p *= 2) {
    int m = 12;
    r.global_batch = m;
    cluster_of(ctx, "a100-80g", 1, &c);
    c.devices_per_node = p;
    c.intra_node_gbps = c.inter_node_gbps = 1e12;
    c.intra_node_latency_us = c.inter_node_latency_us = 0;
    gaaw_plan_layout_t l = layout_of(1, p, 1, 1, 1, m, GAAW_PLAN_1F1B, 0, 0);
    require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
    double got = l.bubble_seconds / (l.bubble_seconds + l.compute_seconds), want = (p - 1.0) / (m + p - 1.0);
    expect_true(fabs(got - want) < 1e-6, "1f1b p %d m %d: bubble %.6f of the pipeline, (p-1)/(m+p-1) = %.6f", p, m,
                got, want);
  }
}

static void check_peak(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  gpt_175b(&r);
  r.global_batch = 64;
  cluster_of(ctx, "h100-80g", 1, &c);
  c.device.memory_gbps = 1e12; /* elementwise work free: compute is GEMMs alone */
  gaaw_plan_layout_t a = layout_of(1, 8, 1, 1, 1, 64, GAAW_PLAN_1F1B, 0, 2), b = a;
  require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &a));
  c.device.peak_tflops *= 2;
  require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &b));
  double ratio = b.compute_seconds / a.compute_seconds;
  expect_true(fabs(ratio - 0.5) < 1e-9, "twice the peak: compute %.6g s then %.6g s (ratio %.9f)", a.compute_seconds,
              b.compute_seconds, ratio);
}

static void check_zero_memory(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  gpt_small(&r, 8, 2048, 16, 2048);
  r.global_batch = 16;
  cluster_of(ctx, "a100-80g", 1, &c);
  double bytes[4];
  for (int z = 0; z < 4; z++) {
    gaaw_plan_layout_t l = layout_of(8, 1, 1, 1, 1, 2, GAAW_PLAN_1F1B, z, 2);
    require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
    bytes[z] = l.memory_bytes_per_rank;
  }
  expect_true(bytes[3] < bytes[2] && bytes[2] < bytes[1] && bytes[1] < bytes[0],
              "ZeRO 0..3 at dp 8: %.3g %.3g %.3g %.3g bytes per rank, not falling", bytes[0], bytes[1], bytes[2],
              bytes[3]);
}

static void check_bad_layouts(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  gpt_175b(&r);
  cluster_of(ctx, "a100-80g", 128, &c);
  gaaw_plan_layout_t bad[] = {
    layout_of(16, 8, 8, 1, 1, 97, GAAW_PLAN_1F1B, 1, 2),       /* batch: 16 x 97 != 1536 */
    layout_of(32, 7, 8, 1, 1, 48, GAAW_PLAN_1F1B, 1, 2),       /* layers % 7, world */
    layout_of(8, 8, 16, 1, 1, 192, GAAW_PLAN_1F1B, 1, 2),      /* fine by heads: 96 % 16 = 0 ... */
    layout_of(16, 8, 8, 5, 1, 96, GAAW_PLAN_INTERLEAVED, 1, 2), /* 96 % (8 x 5) */
    layout_of(16, 8, 8, 1, 1, 96, GAAW_PLAN_1F1B, 4, 2),       /* ZeRO 4 */
  };
  bad[2] = layout_of(128, 1, 8, 1, 1, 12, GAAW_PLAN_1F1B, 1, 2);
  bad[2].tp = 7, bad[2].dp = 1024 / 7; /* heads 96 % 7 and the world */
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gaaw_status_t st = gaaw_plan_predict(ctx, &r, &c, &bad[i]);
    expect_true(st == GAAW_ERR_INVALID_ARG, "bad layout %zu: status %d, want GAAW_ERR_INVALID_ARG", i, (int)st);
    gaaw_clear_error(ctx);
  }
  gaaw_plan_device_t d;
  expect_status(gaaw_plan_device_named(NULL, "v100", &d), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_plan_device_named(NULL, NULL, &d), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_plan_apply(NULL, NULL), GAAW_ERR_INVALID_ARG);
  gaaw_plan_layout_t ok = layout_of(16, 8, 8, 1, 1, 96, GAAW_PLAN_1F1B, 1, 2), odd = ok;
  odd.recompute = 3;
  gaaw_config_t cfg;
  require_ok(ctx, gaaw_config_create(&cfg));
  expect_status(gaaw_plan_apply(&odd, cfg), GAAW_ERR_INVALID_ARG);
  gaaw_config_destroy(&cfg);

  /* NULL arguments, a cluster without links, masks out of range */
  gaaw_plan_t plan = NULL;
  expect_status_ctx(ctx, gaaw_plan_predict(ctx, NULL, &c, &ok), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_plan_predict(ctx, &r, NULL, &ok), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_plan_predict(ctx, &r, &c, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_plan_create(ctx, &r, &c, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_plan_create(ctx, NULL, &c, &plan), GAAW_ERR_INVALID_ARG);
  expect_true(plan == NULL, "a failed create leaves a plan");
  gaaw_plan_cluster_t slow = c;
  slow.inter_node_gbps = 0;
  expect_status_ctx(ctx, gaaw_plan_predict(ctx, &r, &slow, &ok), GAAW_ERR_INVALID_ARG);
  gaaw_plan_request_t masks = r;
  masks.zero_stages = 1u << 4;
  expect_status_ctx(ctx, gaaw_plan_create(ctx, &masks, &c, &plan), GAAW_ERR_INVALID_ARG);
  masks = r;
  masks.tp = -1;
  expect_status_ctx(ctx, gaaw_plan_create(ctx, &masks, &c, &plan), GAAW_ERR_INVALID_ARG);
  gaaw_clear_error(ctx);
  expect_true(gaaw_plan_count(NULL) == 0 && gaaw_plan_rejected_count(NULL) == 0, "counts of a NULL plan");
  gaaw_plan_destroy(NULL);
  gaaw_plan_destroy(&plan);
  expect_true(gaaw_plan_schedule_name(GAAW_PLAN_ZB_H1)[0] == 'z' && gaaw_plan_schedule_name(9)[0] == '?',
              "schedule names: %s, %s", gaaw_plan_schedule_name(GAAW_PLAN_ZB_H1), gaaw_plan_schedule_name(9));
}

/* Devices of unequal speed: at dp 4 with two ranks at half speed, each replica gets
 * the gaaw_plan_shares of the 16 rows of a microbatch step (5, 5, 3, 3), so the
 * compute takes max(5/4, 3/(4 x 0.5)) = 1.5 times the even cluster's, not 2 (the
 * slowest rank on the even split); all ranks at half speed take exactly 2. */
static void check_speeds(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  gpt_small(&r, 4, 256, 4, 128);
  r.global_batch = 16;
  cluster_of(ctx, "h100-80g", 1, &c);
  c.devices_per_node = 4;
  gaaw_plan_layout_t even = layout_of(4, 1, 1, 1, 4, 1, GAAW_PLAN_1F1B, 0, 0), mixed = even, half = even;
  require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &even));
  const double two_slow[4] = {1, 1, 0.5, 0.5}, all_slow[4] = {0.5, 0.5, 0.5, 0.5};
  c.speeds = two_slow;
  require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &mixed));
  c.speeds = all_slow;
  require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &half));
  double ratio = mixed.compute_seconds / even.compute_seconds, ratio_half = half.compute_seconds / even.compute_seconds;
  expect_true(fabs(ratio - 1.5) < 1e-9, "two ranks at half speed: compute %.6g of the even cluster's, want 1.5",
              ratio);
  expect_true(fabs(ratio_half - 2) < 1e-9, "every rank at half speed: compute %.6g, want 2", ratio_half);
  int64_t rows[4];
  c.speeds = two_slow;
  require_ok(ctx, gaaw_plan_replica_rows(ctx, &c, &mixed, rows));
  expect_true(rows[0] == 5 && rows[1] == 5 && rows[2] == 3 && rows[3] == 3, "replica rows %lld %lld %lld %lld",
              (long long)rows[0], (long long)rows[1], (long long)rows[2], (long long)rows[3]);
  c.speeds = NULL;
  require_ok(ctx, gaaw_plan_replica_rows(ctx, &c, &even, rows));
  expect_true(rows[0] == 4 && rows[3] == 4, "even replica rows %lld .. %lld", (long long)rows[0], (long long)rows[3]);

  /* tp 2 x dp 2: replica 0 is ranks 0 and 1, as slow as rank 1 (0.5); 8 rows of a
   * microbatch step split 0.5 : 1, 2.67 : 5.33, so 3 and 5 */
  const double one_slow[4] = {1, 0.5, 1, 1};
  gaaw_plan_layout_t tp2 = layout_of(2, 1, 2, 1, 4, 2, GAAW_PLAN_1F1B, 0, 0);
  c.speeds = one_slow;
  require_ok(ctx, gaaw_plan_replica_rows(ctx, &c, &tp2, rows));
  expect_true(rows[0] == 3 && rows[1] == 5, "tp 2 x dp 2 replica rows %lld %lld", (long long)rows[0],
              (long long)rows[1]);
  gaaw_plan_layout_t wrong = layout_of(2, 1, 1, 1, 4, 2, GAAW_PLAN_1F1B, 0, 0); /* 2 ranks of 4 */
  expect_status_ctx(ctx, gaaw_plan_replica_rows(ctx, &c, &wrong, rows), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_plan_replica_rows(ctx, &c, &tp2, NULL), GAAW_ERR_INVALID_ARG);
  gaaw_clear_error(ctx);
}

/* The least memory of a layout at cp of the job r on c (every ZeRO stage,
 * recompute, microbatching and cp_kind the runtime takes; tp and pp 1), each by
 * gaaw_plan_predict (the ledger). */
static double least_memory_at(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c, int cp)
{
  double least = INFINITY;
  int dp = c->nodes * c->devices_per_node / cp;
  for (int mb = 1; mb <= r->global_batch / dp; mb++)
    for (int z = 0; z <= 3; z++)
      for (int rc = 0; rc <= 2; rc++)
        for (int kind = 0; kind <= (cp > 1); kind++) {
          if ((r->global_batch / dp) % mb) continue;
          gaaw_plan_layout_t l = layout_of(dp, 1, 1, 1, mb, (int)(r->global_batch / dp / mb), GAAW_PLAN_1F1B, z, rc);
          l.cp = cp, l.cp_kind = kind;
          require_ok(ctx, gaaw_plan_predict(ctx, r, c, &l));
          least = fmin(least, l.memory_bytes_per_rank);
        }
  return least;
}

/* The cp tests' job: four sequences of 8192 tokens of a small f32 GPT on one node
 * of four H100-80G, tp and pp 1. */
static void cp_job(gaaw_context_t ctx, gaaw_plan_request_t *r, gaaw_plan_cluster_t *c)
{
  gpt_small(r, 2, 64, 4, 8192);
  r->model.vocab = 256;
  r->model.dtype = GAAW_F32;
  r->global_batch = 4;
  r->tp = 1, r->pp = 1;
  cluster_of(ctx, "h100-80g", 1, c);
  c->devices_per_node = 4;
}

/* Four sequences of 8192 tokens on four devices (tp and pp 1): cp 1 x dp 4 on a
 * roomy device; cp 4 on one between the least that cp 4 needs and the least of
 * cp 2 (which is below cp 1's). */
static void check_cp_fits(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  cp_job(ctx, &r, &c);
  gaaw_plan_t plan;
  gaaw_plan_layout_t l;
  require_ok(ctx, gaaw_plan_create(ctx, &r, &c, &plan));
  require_ok(ctx, gaaw_plan_layout(plan, 0, &l));
  expect_true(l.cp <= 1 && l.dp == 4, "on 80 GB the fastest is cp 1 x dp 4, not dp %d x cp %d", l.dp, l.cp);
  gaaw_plan_destroy(&plan);
  double cp1 = least_memory_at(ctx, &r, &c, 1), cp2 = least_memory_at(ctx, &r, &c, 2);
  double cp4 = least_memory_at(ctx, &r, &c, 4);
  printf("test_plan: seq 8192, the least memory per rank at cp 1, 2, 4: %.1f, %.1f, %.1f MB\n", cp1 / 1e6, cp2 / 1e6,
         cp4 / 1e6);
  expect_true(cp4 < cp2 && cp2 < cp1, "the least memory does not fall with cp: %.0f, %.0f, %.0f", cp1, cp2, cp4);
  c.device.memory_bytes = (cp4 + cp2) / 2;
  require_ok(ctx, gaaw_plan_create(ctx, &r, &c, &plan));
  expect_true(gaaw_plan_count(plan) >= 1, "on %.1f MB nothing fits, though a cp 4 layout needs %.1f MB",
              c.device.memory_bytes / 1e6, cp4 / 1e6);
  for (int i = 0; i < gaaw_plan_count(plan); i++) {
    require_ok(ctx, gaaw_plan_layout(plan, i, &l));
    expect_true(l.cp == 4 && l.dp == 1 && l.memory_bytes_per_rank <= c.device.memory_bytes,
                "layout %d on %.1f MB: dp %d x cp %d, %.1f MB", i, c.device.memory_bytes / 1e6, l.dp, l.cp,
                l.memory_bytes_per_rank / 1e6);
    if (i == 0)
      printf("  fastest on %.1f MB: cp 4 %s, recompute %d, ZeRO %d, %.1f MB, %.3f s\n", c.device.memory_bytes / 1e6,
             l.cp_kind ? "a2a" : "ring", l.recompute, l.zero_stage, l.memory_bytes_per_rank / 1e6, l.step_seconds);
  }
  gaaw_plan_destroy(&plan);
}

/* Families the search rejects for cp by name: 2 cp not dividing the sequence (8188 =
 * 4 x 2047: cp 2 fits, cp 4 does not); a2a alone where cp does not divide a tp
 * rank's heads (2 heads: cp 2 fits, cp 4 does not). */
static void check_cp_refused(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  gaaw_plan_t plan;
  gaaw_plan_layout_t l;
  cp_job(ctx, &r, &c);
  const int seqs[2] = {8188, 8192}, heads[2] = {4, 2};
  const char *why[2] = {"seq 8188 not divisible by 2 x cp 4", "the 2 heads of a tp rank do not divide by cp 4"};
  for (int k = 0; k < 2; k++) {
    r.model.max_seq = seqs[k], r.model.heads = heads[k], r.cp_kinds = 2u; /* a2a only */
    require_ok(ctx, gaaw_plan_create(ctx, &r, &c, &plan));
    int refused = 0, other = 0;
    for (int i = 0; i < gaaw_plan_rejected_count(plan); i++) {
      gaaw_plan_rejected_t rej;
      require_ok(ctx, gaaw_plan_rejected(plan, i, &rej));
      refused += rej.cp == 4 && strstr(rej.reason, why[k]) != NULL;
      other += rej.cp == 2 && strstr(rej.reason, "divisibility") != NULL;
    }
    expect_true(refused == 1 && other == 0, "seq %d, %d heads, a2a only: cp 4 refused for '%s' %d time(s), cp 2 "
                "refused %d time(s)", seqs[k], heads[k], why[k], refused, other);
    for (int i = 0; i < gaaw_plan_count(plan); i++) {
      require_ok(ctx, gaaw_plan_layout(plan, i, &l));
      expect_true(l.cp == 1 || (l.cp == 2 && l.cp_kind == 1), "a2a alone, seq %d: layout %d is cp %d kind %d",
                  seqs[k], i, l.cp, l.cp_kind);
    }
    gaaw_plan_destroy(&plan);
  }
}

/* 175B on 1024 H100-80G: the search's time and the memory of what it returns. */
static void check_search(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  gpt_175b(&r);
  cluster_of(ctx, "h100-80g", 128, &c);
  gaaw_plan_t plan;
  double t0 = now();
  require_ok(ctx, gaaw_plan_create(ctx, &r, &c, &plan));
  double dt = now() - t0;
  printf("test_plan: 175B on 1024 h100-80g searched in %.2f s: %d layouts, %d families rejected\n", dt,
         gaaw_plan_count(plan), gaaw_plan_rejected_count(plan));
  expect_true(dt < 30, "the 100B+ search took %.2f s", dt);
  expect_true(gaaw_plan_count(plan) >= 1, "no layout found");
  double prev = 0;
  for (int i = 0; i < gaaw_plan_count(plan); i++) {
    gaaw_plan_layout_t l;
    require_ok(ctx, gaaw_plan_layout(plan, i, &l));
    if (i < 3)
      printf("  dp %d pp %d cp %d tp %d v %d mb %d x %d %s ZeRO %d rc %d: %.2f s, %.1f GB, %.1f TFLOP/s, MFU %.3f\n",
             l.dp, l.pp, l.cp, l.tp, l.virtual_stages, l.microbatch, l.microbatches, gaaw_plan_schedule_name(l.schedule),
             l.zero_stage, l.recompute, l.step_seconds, l.memory_bytes_per_rank / 1e9, l.tflops_per_device, l.mfu);
    expect_true(l.memory_bytes_per_rank > 0 && l.memory_bytes_per_rank <= c.device.memory_bytes,
                "layout %d needs %.3g bytes of %.3g", i, l.memory_bytes_per_rank, c.device.memory_bytes);
    expect_true(l.step_seconds >= prev, "layout %d (%.4g s) is faster than the one before (%.4g s)", i,
                l.step_seconds, prev);
    expect_true((int64_t)l.dp * l.microbatch * l.microbatches == r.global_batch &&
                  l.dp * l.pp * (l.cp > 1 ? l.cp : 1) * l.tp == 1024,
                "layout %d does not divide", i);
    prev = l.step_seconds;
    /* the plan's prediction is gaaw_plan_predict's */
    gaaw_plan_layout_t again = l;
    require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &again));
    expect_true(fabs(again.step_seconds - l.step_seconds) <= 1e-9 * l.step_seconds &&
                  again.memory_bytes_per_rank == l.memory_bytes_per_rank,
                "layout %d: predict says %.6g s %.6g B, the plan %.6g s %.6g B", i, again.step_seconds,
                again.memory_bytes_per_rank, l.step_seconds, l.memory_bytes_per_rank);
  }
  expect_true(gaaw_plan_rejected_count(plan) >= 1, "no family rejected (tp 1024 cannot divide 96 heads)");
  gaaw_plan_rejected_t rej;
  int whole = 0, count = gaaw_plan_rejected_count(plan); /* each rejected family names sizes that fill the job */
  for (int i = 0; i < count; i++) {
    require_ok(ctx, gaaw_plan_rejected(plan, i, &rej));
    whole += (int64_t)rej.dp * rej.pp * rej.tp * (rej.cp > 1 ? rej.cp : 1) == (int64_t)c.nodes * c.devices_per_node;
  }
  expect_true(whole == count, "%d of %d rejected families name dp x pp x tp x cp = the %d devices", whole, count,
              c.nodes * c.devices_per_node);
  expect_status(gaaw_plan_rejected(plan, -1, &rej), GAAW_ERR_INVALID_ARG);
  gaaw_plan_layout_t l;
  expect_status(gaaw_plan_layout(plan, gaaw_plan_count(plan), &l), GAAW_ERR_INVALID_ARG);
  gaaw_config_t cfg;
  require_ok(ctx, gaaw_config_create(&cfg));
  require_ok(ctx, gaaw_plan_layout(plan, 0, &l));
  require_ok(ctx, gaaw_plan_apply(&l, cfg));
  int64_t tp = 0, cp = 0;
  require_ok(ctx, gaaw_config_get_int(cfg, "tp", &tp));
  require_ok(ctx, gaaw_config_get_int(cfg, "cp", &cp));
  expect_true(tp == l.tp && cp == (l.cp > 1 ? l.cp : 1), "apply: tp %lld and cp %lld, layout %d and %d",
              (long long)tp, (long long)cp, l.tp, l.cp);
  gaaw_config_destroy(&cfg);
  gaaw_plan_destroy(&plan);
  expect_true(plan == NULL, "destroy leaves the handle set");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", "host"));
  require_ok(NULL, gaaw_init(MPI_COMM_SELF, cfg, &ctx));
  check_flops(ctx);
  check_bubble(ctx);
  check_peak(ctx);
  check_zero_memory(ctx);
  check_bad_layouts(ctx);
  check_speeds(ctx);
  check_cp_fits(ctx);
  check_cp_refused(ctx);
  check_search(ctx);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return test_finish("test_plan");
}
