/* The cost model (plan/cost_*.c, gaaw_plan_predict) held to its closed forms on
 * small cases, each figure worked out here from the formulas of gaaw/plan.h and
 * doc/plan.md, so that a constant off by one or an operator changed in the model
 * moves a prediction away from them (a tolerance of 1e-12, rounding only):
 *  - a device without GEMM points: rate = peak x efficiency x dmin / (dmin + 64);
 *  - one rank: step = F + B + W of the two blocks (4 linears, the attention core,
 *    elementwise bytes at the memory bandwidth) and the LM head, plus AdamW over
 *    the parameters (24 + 2 e bytes each at the memory bandwidth); selective and
 *    full recompute;
 *  - dp 2 on one node at ZeRO 0..3: the exposed ring all-reduce, reduce-scatter and
 *    all-gather (alpha + B / 2 beta per pass), on a link slow enough that nothing
 *    hides and on one fast enough that backward hides all but the last bucket;
 *    ZeRO 3's gathers in each block;
 *  - tp 2 (with and without sequence parallelism; 4, 2 and 1 kv heads): the
 *    blocks' and the head's share, two all-reduces of N C forward and two (four
 *    with full recompute) backward;
 *  - cp 2 and 4, ring and a2a: a rank's share of the tokens and of the attention
 *    core, the ring's messages where its blocks do not hide them, a2a's
 *    all-to-alls, the gradients over dp x cp; seq and a2a's heads refused;
 *  - offload host and nvme: the optimizer at host_update_gbps, the gradients and
 *    parameters over the host link, the state through the node's nvme_gbps;
 *  - GEMM points that all say 3 TFLOP/s: every GEMM at that rate;
 *  - the search's memory guess (states by ZeRO stage, activations by recompute,
 *    schedule and sequence parallelism), in the reason it drops a family for;
 *  - the memory predicted at pp 2 x dp 2 is the last stage's, which a large
 *    vocabulary makes the largest;
 *  - the search's first layout is the fastest that fits of all a 4-device job has;
 *  - offload without its rates, and replica rows without a place to go, refused;
 *    the search plans no nvme offload without an nvme rate, and host offload still;
 *    with the rate it plans nvme offload. */
#include <math.h>
#include <mpi.h>

#include "gaaw.h"
#include "test_util.h"

enum { LAYERS = 2, DIM = 64, HEADS = 4, SEQ = 32, VOCAB = 256 };
static const double GB = 1e9, PEAK = 2.0, MEM_GBPS = 500, BUCKET = 16777216.0;

typedef struct {
  double f, b, w;
} work;

/* The request: a GPT of LAYERS blocks (GELU, LayerNorm, biases, tied), f32. */
static void request_of(gaaw_plan_request_t *r, int sequence_parallel, int64_t global_batch)
{
  memset(r, 0, sizeof *r);
  gaaw_gpt_config_default(&r->model);
  r->model.layers = LAYERS;
  r->model.dim = DIM;
  r->model.heads = HEADS;
  r->model.max_seq = SEQ;
  r->model.vocab = VOCAB;
  r->model.dtype = GAAW_F32;
  r->model.sequence_parallel = sequence_parallel;
  r->global_batch = global_batch;
}

/* One node of `devices` made-up devices: no GEMM points, full efficiency. */
static void cluster_of(gaaw_plan_cluster_t *c, int devices, double link_gbps, double latency_us)
{
  memset(c, 0, sizeof *c);
  snprintf(c->device.name, sizeof c->device.name, "made-up");
  c->device.peak_tflops = PEAK;
  c->device.memory_bytes = 1e12;
  c->device.memory_gbps = MEM_GBPS;
  c->device.host_link_gbps = 20;
  c->device.gemm_efficiency = 1;
  c->nodes = 1;
  c->devices_per_node = devices;
  c->intra_node_gbps = link_gbps;
  c->inter_node_gbps = link_gbps / 10;
  c->intra_node_latency_us = latency_us;
  c->inter_node_latency_us = 10 * latency_us;
  c->host_update_gbps = 40;
  c->nvme_gbps = 3;
}

static double gemm(double m, double n, double k)
{
  double dmin = fmin(m, fmin(n, k));
  return 2 * m * n * k / (PEAK * 1e12 * dmin / (dmin + 64));
}

/* A linear (N, out) = (N, in) (in, out): one GEMM each in F, B and W. */
static void linear(work *x, double N, double out, double in)
{
  double t = gemm(N, out, in);
  x->f += t, x->b += t, x->w += t;
}

/* A tp rank's key and value width: kv heads of D split over tp, or one head
 * replicated where tp exceeds them. */
static double kv_local(int tp, int kv)
{
  double D = (double)DIM / HEADS;
  return kv >= tp ? kv * D / tp : D;
}

/* The attention core of `rows` sequences on a rank of tp x cp: ring (a2a 0) c
 * blocks of (s/c, s/c) per head, a2a the whole (s, s) of a c-th of the heads. */
static double core_of(int tp, double rows, int cp, int a2a)
{
  double s = SEQ, D = (double)DIM / HEADS, heads = (double)HEADS / tp;
  if (cp > 1 && !a2a) return rows * heads * cp * (gemm(s / cp, s / cp, D) + gemm(s / cp, D, s / cp));
  return rows * heads / cp * (gemm(s, s, D) + gemm(s, D, s));
}

/* One block on a rank of tp x cp for `rows` sequences of SEQ tokens (SEQ / cp of
 * each here), f32, kv key and value heads; its exchanges over cp are not in it. */
static work block_at(int tp, int sp, double rows, int recompute, int kv, int cp, int a2a)
{
  double h = DIM, s = SEQ, N = rows * s / cp, e = 4, ffn = 4 * h, heads = (double)HEADS / tp;
  double qkv = h / tp + 2 * kv_local(tp, kv);
  work x = {0, 0, 0};
  linear(&x, N, qkv, h);
  linear(&x, N, h, h / tp);
  linear(&x, N, ffn / tp, h);
  linear(&x, N, h, ffn / tp);
  double core = core_of(tp, rows, cp, a2a);
  double softmax = 4 * rows * heads * s * s / cp * e;
  double columns = 2 * N * (qkv + ffn / tp) * e + 2 * N * ffn / tp * e;
  double stream = (sp ? N / tp : N) * 10 * h * e + 4 * N * h / tp * e;
  double elem = (softmax + columns + stream) / (MEM_GBPS * GB);
  x.f += core + elem;
  x.b += 2 * core + 2 * elem;
  if (recompute == 1) x.b += core + softmax / (MEM_GBPS * GB);
  if (recompute == 2) x.b += x.f;
  return x;
}

static work block(int tp, int sp, double rows, int recompute, int kv)
{
  return block_at(tp, sp, rows, recompute, kv, 1, 0);
}

/* The LM head (tied, vocabulary split over tp), the loss and the lookup, on SEQ /
 * cp tokens of each row. */
static work head_at(int tp, double rows, int cp)
{
  double h = DIM, N = rows * SEQ / cp, V = ceil((double)VOCAB / tp), e = 4;
  work x = {0, 0, 0};
  linear(&x, N, V, h);
  double elem = (2 * N * h * e + 4 * N * V * e + 3 * N * h * e) / (MEM_GBPS * GB);
  x.f += elem;
  x.b += elem;
  return x;
}

static work head(int tp, double rows)
{
  return head_at(tp, rows, 1);
}

/* A ring pass over n ranks on one node: (n-1) alpha + (n-1)/n bytes beta. */
static double ring(const gaaw_plan_cluster_t *c, int n, double bytes)
{
  return n < 2 ? 0 : (n - 1) * c->intra_node_latency_us * 1e-6 + (n - 1.0) / n * bytes / (c->intra_node_gbps * GB);
}

/* The parameters of a tp rank: the blocks' (12 h^2 + 13 h with as many kv heads
 * as heads) split over tp, the tied table split, the position table whole. */
static double rank_params(int tp, int kv)
{
  double h = DIM, qkv = h + 2.0 * kv * DIM / HEADS;
  double block = 4 * h + h * qkv + h * h + 8 * h * h + qkv + 6 * h;
  return LAYERS * block / tp + (double)VOCAB * h / tp + (double)SEQ * h;
}

static int close_to(double got, double want)
{
  return fabs(got - want) <= 1e-12 * fabs(want) + 1e-300;
}

static void expect_layout(const char *what, const gaaw_plan_layout_t *l, double compute, double comm, double opt)
{
  double step = compute + comm + opt;
  expect_true(close_to(l->compute_seconds, compute), "%s: compute %.15g s, the closed form %.15g s", what,
              l->compute_seconds, compute);
  expect_true(close_to(l->comm_seconds, comm), "%s: exposed communication %.15g s, the closed form %.15g s", what,
              l->comm_seconds, comm);
  expect_true(close_to(l->optimizer_seconds, opt), "%s: optimizer %.15g s, the closed form %.15g s", what,
              l->optimizer_seconds, opt);
  expect_true(close_to(l->step_seconds, step) && fabs(l->bubble_seconds) <= 1e-12 * step, "%s: step %.15g s (bubble %g), the closed "
              "form %.15g s", what, l->step_seconds, l->bubble_seconds, step);
}

static gaaw_plan_layout_t layout_of(int dp, int tp, int rows, int microbatches, int zero, int recompute, int offload)
{
  gaaw_plan_layout_t l;
  memset(&l, 0, sizeof l);
  l.dp = dp, l.pp = 1, l.tp = tp, l.virtual_stages = 1, l.microbatch = rows, l.microbatches = microbatches;
  l.schedule = GAAW_PLAN_GPIPE, l.zero_stage = zero, l.recompute = recompute, l.offload = offload;
  return l;
}

/* One rank: the step is the blocks and the head, forward and backward, and AdamW. */
static void check_one_rank(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  cluster_of(&c, 1, 100, 5);
  for (int rc = 0; rc <= 2; rc++) {
    request_of(&r, 0, 6);
    gaaw_plan_layout_t l = layout_of(1, 1, 2, 3, 0, rc, 0);
    require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
    work blk = block(1, 0, 2, rc, HEADS), hd = head(1, 2);
    double per_mb = LAYERS * (blk.f + blk.b + blk.w) + hd.f + hd.b + hd.w;
    double opt = rank_params(1, HEADS) * (24 + 2 * 4) / (MEM_GBPS * GB);
    char what[64];
    snprintf(what, sizeof what, "1 rank, recompute %d", rc);
    expect_layout(what, &l, 3 * per_mb, 0, opt);
  }
}

/* dp 2: the gradients' reduction; slow, nothing hides; fast, all but the last
 * bucket hides behind the backward. */
static void check_dp(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  request_of(&r, 0, 8);
  double psi = rank_params(1, HEADS), grads = psi * 4, bucket = fmin(grads, BUCKET);
  work blk = block(1, 0, 2, 0, HEADS), hd = head(1, 2);
  double sp = hd.f + hd.b + hd.w, f = LAYERS * blk.f + sp / 2, b = LAYERS * blk.b + sp / 2, w = LAYERS * blk.w;
  const double links[2] = {0.01, 1e6};
  for (int k = 0; k < 2; k++)
    for (int z = 0; z <= 3; z++) {
      cluster_of(&c, 2, links[k], 5);
      gaaw_plan_layout_t l = layout_of(2, 1, 2, 2, z, 0, 0);
      require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
      double window = b + w, comm = 0, cf = f, cb = b;
      if (z <= 1) comm = fmax(0, 2 * ring(&c, 2, grads) - window) + 2 * ring(&c, 2, bucket);
      if (z == 2) comm = 2 * fmax(0, ring(&c, 2, grads) - window) + ring(&c, 2, bucket);
      if (z == 3) {
        comm = ring(&c, 2, bucket);
        double piece = (12.0 * DIM * DIM + 13 * DIM) * 4, gather = ring(&c, 2, piece);
        double bf = fmax(blk.f, gather), bb = blk.b + fmax(0, 2 * gather - (blk.b + blk.w));
        cf = LAYERS * bf + sp / 2 + gather;
        cb = LAYERS * bb + sp / 2 + gather;
      }
      if (z == 1 || z == 2) comm += ring(&c, 2, grads);
      double opt = (z == 0 ? psi : psi / 2) * 32 / (MEM_GBPS * GB);
      char what[64];
      snprintf(what, sizeof what, "dp 2 ZeRO %d on a %g GB/s link", z, links[k]);
      expect_layout(what, &l, 2 * (cf + cb + w), comm, opt);
    }
}

/* cp 2 and 4, ring and a2a, without and with full recompute, on a link slow
 * enough that every ring message shows and one fast enough that only the latency
 * and the gradients' last hop do: a rank's SEQ / cp tokens through the blocks and
 * the head, and the exchanges of plan/cost_cp.c on S = rows (SEQ/cp) DIM 4 bytes:
 * the ring's c - 1 steps forward of max(0, p2p(2 S) - core/c), backward c - 1 of
 * max(0, p2p(4 S) - 2 core/c) and one p2p(2 S); a2a 4 all-to-alls of S forward
 * and 8 backward (the forward's again under full recompute); the gradients'
 * all-reduce over the dp x cp = cp ranks. */
static void check_cp(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  const double links[2] = {0.01, 1e6};
  const int cps[2] = {2, 4};
  for (int k = 0; k < 2; k++)
    for (int ci = 0; ci < 2; ci++)
      for (int a2a = 0; a2a <= 1; a2a++)
        for (int rc = 0; rc <= 2; rc += 2) {
          int cp = cps[ci];
          request_of(&r, 0, 2);
          cluster_of(&c, cp, links[k], 5);
          gaaw_plan_layout_t l = layout_of(1, 1, 2, 1, 0, rc, 0);
          l.cp = cp, l.cp_kind = a2a;
          require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
          work blk = block_at(1, 0, 2, rc, HEADS, cp, a2a), hd = head_at(1, 2, cp);
          double S = 2.0 * SEQ / cp * DIM * 4, alpha = c.intra_node_latency_us * 1e-6, bw = c.intra_node_gbps * GB;
          double xf, xb;
          if (a2a) {
            xf = 4 * ring(&c, cp, S);
            xb = 8 * ring(&c, cp, S) + (rc == 2 ? xf : 0);
          } else {
            double step = core_of(1, 2, cp, 0) / cp;
            xf = (cp - 1) * fmax(0, alpha + 2 * S / bw - step);
            xb = (cp - 1) * fmax(0, alpha + 4 * S / bw - 2 * step) + alpha + 2 * S / bw + (rc == 2 ? xf : 0);
          }
          double spread = hd.f + hd.b + hd.w, b = LAYERS * (blk.b + xb) + spread / 2, w = LAYERS * blk.w;
          double compute = LAYERS * (blk.f + xf) + spread + LAYERS * (blk.b + xb) + w;
          double grads = rank_params(1, HEADS) * 4;
          double comm = fmax(0, 2 * ring(&c, cp, grads) - (b + w)) + 2 * ring(&c, cp, fmin(grads, BUCKET));
          double opt = rank_params(1, HEADS) * 32 / (MEM_GBPS * GB);
          char what[96];
          snprintf(what, sizeof what, "cp %d %s, recompute %d, on a %g GB/s link", cp, a2a ? "a2a" : "ring", rc,
                   links[k]);
          expect_layout(what, &l, compute, comm, opt);
        }
  /* a layout the runtime refuses: seq 32 is not divisible by 2 x 32, 4 heads not by cp 8 under a2a */
  request_of(&r, 0, 2);
  cluster_of(&c, 32, 1, 5);
  gaaw_plan_layout_t bad = layout_of(1, 1, 2, 1, 0, 0, 0);
  bad.cp = 32;
  expect_status(gaaw_plan_predict(ctx, &r, &c, &bad), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "not divisible by 2 x cp = 64") != NULL, "seq at cp 32: %s",
              gaaw_last_error(ctx));
  gaaw_clear_error(ctx);
  cluster_of(&c, 8, 1, 5);
  bad.cp = 8, bad.cp_kind = 1;
  r.model.max_seq = 64;
  expect_status(gaaw_plan_predict(ctx, &r, &c, &bad), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "cp_kind a2a at cp 8: the 4 heads of a tp rank") != NULL, "a2a: %s",
              gaaw_last_error(ctx));
  gaaw_clear_error(ctx);
}

/* tp 2: each block's and the head's share, and their all-reduces of N C; with
 * grouped-query attention, 1 kv head (replicated) and 2 (split). */
static void check_tp(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  cluster_of(&c, 2, 50, 3);
  const int kvs[3] = {HEADS, 1, 2};
  for (int sp = 0; sp <= 1; sp++)
    for (int rc = 0; rc <= 2; rc += 2)
      for (int k = 0; k < 3; k++) {
        request_of(&r, sp, 4);
        r.model.kv_heads = kvs[k];
        gaaw_plan_layout_t l = layout_of(1, 2, 4, 1, 0, rc, 0);
        require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
        work blk = block(2, sp, 4, rc, kvs[k]), hd = head(2, 4);
        double ar = 2 * ring(&c, 2, 4.0 * SEQ * DIM * 4);
        double f = blk.f + 2 * ar, b = blk.b + (rc == 2 ? 4 : 2) * ar;
        double compute = LAYERS * (f + b + blk.w) + hd.f + hd.b + hd.w + ar;
        double opt = rank_params(2, kvs[k]) * 32 / (MEM_GBPS * GB);
        char what[64];
        snprintf(what, sizeof what, "tp 2, sequence parallel %d, recompute %d, kv heads %d", sp, rc, kvs[k]);
        expect_layout(what, &l, compute, 0, opt);
      }
}

/* The optimizer off the device: on the host, and its state on nvme. */
static void check_offload(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  request_of(&r, 0, 2);
  cluster_of(&c, 1, 100, 5);
  work blk = block(1, 0, 2, 0, HEADS), hd = head(1, 2);
  double compute = LAYERS * (blk.f + blk.b + blk.w) + hd.f + hd.b + hd.w, psi = rank_params(1, HEADS);
  for (int o = 1; o <= 2; o++) {
    gaaw_plan_layout_t l = layout_of(1, 1, 2, 1, 1, 0, o);
    require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
    double opt = psi * 32 / (c.host_update_gbps * GB) + psi * 8 / (c.device.host_link_gbps * GB);
    if (o == 2) opt += psi * 24 / (c.nvme_gbps * GB);
    expect_layout(o == 1 ? "offload host" : "offload nvme", &l, compute, 0, opt);
  }
}

/* A device whose GEMM points all run at 3 TFLOP/s: every GEMM's rate is their
 * weighted mean, 3 TFLOP/s, whatever its shape. */
static void check_gemm_points(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  request_of(&r, 0, 2);
  cluster_of(&c, 1, 100, 5);
  c.device.memory_gbps = 1e12; /* elementwise work free */
  c.device.gemm_points = 3;
  for (int i = 0; i < 3; i++) c.device.gemm[i] = (gaaw_plan_gemm_point_t){64.0 * (i + 1), 32, 16 << i, 3.0};
  gaaw_plan_layout_t l = layout_of(1, 1, 2, 1, 0, 0, 0);
  require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
  double h = DIM, N = 2.0 * SEQ, D = (double)DIM / HEADS, flops = 0;
  double linears = N * (3 * h * h + h * h + 4 * h * h + 4 * h * h);
  flops += LAYERS * (3 * 2 * linears + 3 * 2 * 2 * HEADS * SEQ * SEQ * D * 2.0); /* F, B, W; the core's F and 2 F */
  flops += 3 * 2 * N * VOCAB * h;
  expect_true(fabs(l.compute_seconds - flops / 3e12) <= 1e-6 * l.compute_seconds,
              "3 TFLOP/s at every point: compute %.9g s, %.9g FLOPs at that rate take %.9g s", l.compute_seconds,
              flops, flops / 3e12);
}

/* The search's memory guess (model states and activations in flight), seen in the
 * reason it gives for a family it drops: the masks leave one layout per family
 * (one row per dp rank: microbatch 1) and the device holds nothing. At cp > 1 a
 * rank holds s / cp tokens of a row and ZeRO shards over dp x cp; the blocked core
 * (cp > 1, or 512 tokens and more) keeps no scores. */
static double guess(const gaaw_gpt_config_t *g, int dp, int pp, int tp, int cp, int sp, int microbatches, int v,
                    int schedule, int zero, int rc, int offload)
{
  double h = g->dim, s = g->max_seq, e = 4, L = g->layers, heads = g->heads, V = g->vocab;
  int blocked = cp > 1 || s >= 512;
  dp *= cp;
  double block = 12 * h * h + 13 * h;
  double psi = L / pp * block / tp + V * h / tp + s * h, K = offload ? 0 : 8;
  double states = zero == 0 ? (2 * e + K) * psi
                  : zero == 1 ? 2 * e * psi + K * psi / dp
                  : zero == 2 ? e * psi + (e + K) * psi / dp
                              : (2 * e + K) * psi / dp;
  double sbh = s / cp * h * e / 2, split = sp ? tp : 1;
  double per_block = rc == 2                 ? 2 * sbh / split
                     : rc == 1 || blocked ? sbh * (10 / split + 24.0 / tp)
                                            : sbh * (10 / split + 24.0 / tp + 5 * heads * s / (h * tp));
  double blocks = schedule == GAAW_PLAN_INTERLEAVED ? ((v - 1.0) * pp + 2 * (pp - 1) + 1) * L / (pp * v)
                  : schedule == GAAW_PLAN_GPIPE     ? microbatches * L / pp
                                                    : fmin(pp, microbatches) * L / pp;
  return states + per_block * blocks;
}

static void check_memory_guess(gaaw_context_t ctx)
{
  static const char *rc_names[] = {"none", "selective", "full"};
  struct {
    int dp, pp, tp, cp, seq, sp, schedule, zero, rc, offload;
  } cases[] = {
    {2, 1, 1, 1, 2048, 0, GAAW_PLAN_1F1B, 0, 0, 0},  {2, 1, 1, 1, 2048, 0, GAAW_PLAN_1F1B, 1, 1, 0},
    {2, 1, 1, 1, 2048, 0, GAAW_PLAN_1F1B, 2, 2, 0},  {2, 1, 1, 1, 2048, 0, GAAW_PLAN_1F1B, 3, 0, 0},
    {2, 1, 1, 1, 2048, 0, GAAW_PLAN_1F1B, 2, 0, 1},  {1, 2, 1, 1, 2048, 0, GAAW_PLAN_GPIPE, 0, 0, 0},
    {1, 2, 1, 1, 2048, 0, GAAW_PLAN_1F1B, 1, 2, 0},  {1, 2, 1, 1, 2048, 0, GAAW_PLAN_INTERLEAVED, 0, 1, 0},
    {1, 1, 2, 1, 2048, 0, GAAW_PLAN_1F1B, 0, 0, 0},  {1, 1, 2, 1, 2048, 1, GAAW_PLAN_1F1B, 0, 1, 0},
    {1, 1, 2, 1, 2048, 1, GAAW_PLAN_1F1B, 0, 2, 0},  {2, 1, 1, 1, 256, 0, GAAW_PLAN_1F1B, 0, 0, 0},
    {1, 1, 1, 2, 2048, 0, GAAW_PLAN_1F1B, 1, 0, 0},  {2, 1, 2, 4, 2048, 1, GAAW_PLAN_1F1B, 3, 2, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    gaaw_plan_request_t r;
    gaaw_plan_cluster_t c;
    memset(&r, 0, sizeof r);
    gaaw_gpt_config_default(&r.model);
    r.model.layers = 8, r.model.dim = 4096, r.model.heads = 32, r.model.max_seq = cases[k].seq, r.model.vocab = 32000;
    r.model.dtype = GAAW_F32;
    r.model.sequence_parallel = cases[k].sp;
    /* interleaved needs microbatches divisible by pp: two rows */
    int rows = cases[k].schedule == GAAW_PLAN_INTERLEAVED ? 2 : 1;
    r.global_batch = (int64_t)cases[k].dp * rows;
    r.tp = cases[k].tp, r.pp = cases[k].pp, r.cp = cases[k].cp, r.cp_kinds = 1u; /* ring */
    r.zero_stages = 1u << cases[k].zero, r.recompute = 1u << cases[k].rc, r.offload = 1u << cases[k].offload;
    r.schedules = 1u << cases[k].schedule;
    cluster_of(&c, cases[k].dp * cases[k].pp * cases[k].cp * cases[k].tp, 100, 5);
    c.device.memory_bytes = 1;
    gaaw_plan_t plan;
    require_ok(ctx, gaaw_plan_create(ctx, &r, &c, &plan));
    /* the smallest guess of the family: with two rows, microbatch 1 and each
     * interleaved depth that divides the layers */
    double want = INFINITY;
    int best_mb = 1;
    for (int mb = 1; mb <= rows; mb++) {
      if (cases[k].schedule == GAAW_PLAN_INTERLEAVED && (rows / mb) % cases[k].pp) continue;
      for (int v = cases[k].schedule == GAAW_PLAN_INTERLEAVED ? 2 : 1; v <= r.model.layers / cases[k].pp; v++) {
        if (r.model.layers % (cases[k].pp * v) || (v > 1 && cases[k].schedule != GAAW_PLAN_INTERLEAVED)) continue;
        double g = guess(&r.model, cases[k].dp, cases[k].pp, cases[k].tp, cases[k].cp, cases[k].sp, rows / mb, v,
                         cases[k].schedule, cases[k].zero, cases[k].rc, cases[k].offload) * mb;
        if (g < want) want = g, best_mb = mb;
      }
    }
    char reason[160];
    snprintf(reason, sizeof reason, "memory: %.1f GB at least (ZeRO %d, %s recompute, microbatch %d) on a 0.0 GB device",
             want / 1e9, cases[k].zero, rc_names[cases[k].rc], best_mb);
    gaaw_plan_rejected_t rej = {0};
    int n = gaaw_plan_rejected_count(plan);
    if (n == 1) require_ok(ctx, gaaw_plan_rejected(plan, 0, &rej));
    expect_true(gaaw_plan_count(plan) == 0 && n == 1 && strcmp(rej.reason, reason) == 0,
                "case %zu: %d layouts, %d rejected families, the reason '%s', not '%s'", k, gaaw_plan_count(plan), n,
                rej.reason, reason);
    gaaw_plan_destroy(&plan);
  }
}

/* The memory a layout predicts is its largest rank's: at pp 2 x dp 2 with a large
 * vocabulary the last stage (LM head, logits; world rank 2) holds more than rank 0,
 * and the prediction is the estimate of rank 2. */
static void check_memory_last_stage(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  request_of(&r, 0, 8);
  r.model.vocab = 16384;
  r.model.tied_embeddings = 0;
  cluster_of(&c, 4, 100, 5);
  gaaw_plan_layout_t l = layout_of(2, 1, 2, 2, 0, 0, 0);
  l.pp = 2;
  require_ok(ctx, gaaw_plan_predict(ctx, &r, &c, &l));
  gaaw_config_t cfg;
  require_ok(ctx, gaaw_config_create(&cfg));
  require_ok(ctx, gaaw_config_parse(cfg, "tp=1 pp=2 dp=2 microbatches=2 pp_schedule=gpipe"));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.accumulation = 2;
  gaaw_estimate_options_t eo;
  gaaw_estimate_options_default(&eo);
  eo.batch = 2, eo.seq = SEQ;
  gaaw_memory_estimate_t first, last;
  eo.rank = 0;
  require_ok(ctx, gaaw_memory_estimate(ctx, &r.model, cfg, &oc, &eo, &first));
  eo.rank = 2;
  require_ok(ctx, gaaw_memory_estimate(ctx, &r.model, cfg, &oc, &eo, &last));
  gaaw_config_destroy(&cfg);
  double f = (double)first.total[GAAW_SPACE_DEVICE], b = (double)last.total[GAAW_SPACE_DEVICE];
  expect_true(b > f && l.memory_bytes_per_rank == b,
              "pp 2 x dp 2: the plan predicts %.0f bytes a rank; the estimate says %.0f on rank 0, %.0f on rank 2 "
              "(the last stage's first rank)", l.memory_bytes_per_rank, f, b);
}

/* The search returns the fastest layout that fits: every layout of a 4-device job
 * predicted here, one by one, finds none faster than the plan's first. */
static void check_search_finds_fastest(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  request_of(&r, 0, 8);
  r.model.layers = 4;
  cluster_of(&c, 4, 20, 5);
  c.device.memory_bytes = 2.5e6; /* some layouts do not fit */
  r.max_layouts = 3;
  gaaw_plan_t plan;
  require_ok(ctx, gaaw_plan_create(ctx, &r, &c, &plan));
  gaaw_plan_layout_t first = {0}, fastest = {0};
  expect_true(gaaw_plan_count(plan) >= 1, "the plan has no layout");
  if (gaaw_plan_count(plan) >= 1) require_ok(ctx, gaaw_plan_layout(plan, 0, &first));
  gaaw_plan_destroy(&plan);
  fastest.step_seconds = INFINITY;
  int tried = 0, fit = 0;
  for (int tp = 1; tp <= 4; tp *= 2)
    for (int pp = 1; pp <= 4 / tp; pp *= 2)
      for (int mb = 1; mb <= 8 / (4 / tp / pp); mb *= 2)
        for (int kind = 0; kind < GAAW_PLAN_SCHEDULE_COUNT; kind++)
          for (int v = 1; v <= 4; v *= 2)
            for (int z = 0; z <= 3; z++)
              for (int rc = 0; rc <= 2; rc++)
                for (int off = 0; off <= 2; off++) {
                  int dp = 4 / tp / pp;
                  gaaw_plan_layout_t l = layout_of(dp, tp, mb, 8 / dp / mb, z, rc, off);
                  l.pp = pp, l.virtual_stages = v, l.schedule = kind;
                  if ((kind == GAAW_PLAN_INTERLEAVED) != (v > 1) || (off && z == 0)) continue;
                  if (gaaw_plan_predict(ctx, &r, &c, &l) != GAAW_SUCCESS) { /* does not divide */
                    gaaw_clear_error(ctx);
                    continue;
                  }
                  tried++;
                  if (l.memory_bytes_per_rank > c.device.memory_bytes) continue;
                  fit++;
                  if (l.step_seconds < fastest.step_seconds) fastest = l;
                }
  expect_true(fit > 0 && fit < tried, "%d of %d layouts fit: the device should take some, not all", fit, tried);
  expect_true(first.step_seconds <= fastest.step_seconds * (1 + 1e-9),
              "the plan's first layout takes %.9g s; of the %d that fit, dp %d pp %d tp %d v %d mb %d %s ZeRO %d "
              "recompute %d offload %d takes %.9g s", first.step_seconds, fit, fastest.dp, fastest.pp, fastest.tp,
              fastest.virtual_stages, fastest.microbatch, gaaw_plan_schedule_name(fastest.schedule),
              fastest.zero_stage, fastest.recompute, fastest.offload, fastest.step_seconds);
}

/* What the cost model refuses: offload without its rates; the rows of replicas
 * with nowhere to put them. */
static void check_refusals(gaaw_context_t ctx)
{
  gaaw_plan_request_t r;
  gaaw_plan_cluster_t c;
  request_of(&r, 0, 2);
  cluster_of(&c, 1, 100, 5);
  c.host_update_gbps = 0;
  gaaw_plan_layout_t l = layout_of(1, 1, 2, 1, 1, 0, 1);
  expect_status_ctx(ctx, gaaw_plan_predict(ctx, &r, &c, &l), GAAW_ERR_INVALID_ARG);
  const char *why = gaaw_last_error(ctx);
  expect_true(why && strstr(why, "offload needs host_update_gbps"), "offload without a host rate: '%s'",
              why ? why : "(none)");
  cluster_of(&c, 1, 100, 5);
  c.nvme_gbps = 0;
  l = layout_of(1, 1, 2, 1, 1, 0, 2);
  expect_status_ctx(ctx, gaaw_plan_predict(ctx, &r, &c, &l), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_plan_replica_rows(ctx, &c, &l, NULL), GAAW_ERR_INVALID_ARG);
  gaaw_clear_error(ctx);
  /* the search on that cluster: no layout offloads to nvme; host offload is planned */
  for (int off = 1; off <= 2; off++) {
    gaaw_plan_t plan;
    r.offload = 1u << off;
    r.zero_stages = 1u << 2;
    require_ok(ctx, gaaw_plan_create(ctx, &r, &c, &plan));
    expect_true((gaaw_plan_count(plan) > 0) == (off == 1), "offload %s without an nvme rate: %d layouts",
                off == 1 ? "host" : "nvme", gaaw_plan_count(plan));
    gaaw_plan_destroy(&plan);
  }
  /* with its rate, nvme offload is planned */
  cluster_of(&c, 1, 100, 5);
  r.offload = 1u << 2;
  gaaw_plan_t plan;
  require_ok(ctx, gaaw_plan_create(ctx, &r, &c, &plan));
  int nvme = 0;
  for (int i = 0; i < gaaw_plan_count(plan); i++) {
    require_ok(ctx, gaaw_plan_layout(plan, i, &l));
    nvme += l.offload == 2;
  }
  expect_true(nvme > 0 && nvme == gaaw_plan_count(plan), "offload nvme with an nvme rate: %d of %d layouts", nvme,
              gaaw_plan_count(plan));
  gaaw_plan_destroy(&plan);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_SELF, "backend=host");
  check_one_rank(ctx);
  check_dp(ctx);
  check_tp(ctx);
  check_offload(ctx);
  check_gemm_points(ctx);
  check_cp(ctx);
  check_memory_guess(ctx);
  check_memory_last_stage(ctx);
  check_search_finds_fastest(ctx);
  check_refusals(ctx);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  return test_finish("test_plan_costs");
}
