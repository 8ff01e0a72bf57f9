/* gaaw_plan_calibrate: this machine's backend measured as the cost model reads it
 * (gaaw/plan.h). Every rank measures at once, after a barrier, so that cores or
 * links the ranks share are measured shared, and the figures are the mean over
 * the ranks (a cluster of world size alike devices on one node). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/agree.h"
#include "backends/runtime/error.h"
#include "backends/runtime/trace.h"
#include "gaaw/kernels.h"
#include "gaaw/plan.h"
#include "gaaw/topology.h"
#include "zero/cpu_update.h"

enum {
  CALIBRATE_REPEATS = 3,          /* timed blocks per figure; their median counts */
  CALIBRATE_STREAM_FLOATS = 1 << 22, /* 16 MiB per array: beyond the caches */
  CALIBRATE_LARGE_MESSAGE = 1 << 20, /* floats of the all-reduce that measures bandwidth */
  CALIBRATE_ELEMENTWISE_FLOATS = 1 << 20, /* 4 MiB tensors: a block's activations, roughly */
};
#define CALIBRATE_BLOCK_SECONDS 0.02 /* each timed block lasts at least this long */

typedef struct {
  gaaw_context_t ctx;
  gaaw_comm_t world;
  int nranks;
} calibration;

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The mean over the ranks of each of values[0..n) (n <= 64), in place, the same
 * bits on every rank (rank 0's sum, broadcast: a planner fed with them then chooses
 * the same layout everywhere). */
static gaaw_status_t mean_over_ranks(calibration *c, double *values, int n)
{
  gaaw_context_t ctx = c->ctx;
  if (c->nranks == 1) return GAAW_SUCCESS;
  const int64_t shape[1] = {n};
  gaaw_tensor_t t;
  float f[64];
  for (int i = 0; i < n; i++) f[i] = (float)values[i];
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, shape, GAAW_MEM_WORKSPACE, &t));
  gaaw_status_t st = gaaw_buffer_write(ctx, t.buf, t.offset, f, sizeof(float) * (size_t)n);
  if (st == GAAW_SUCCESS) st = gaaw_comm_allreduce(c->world, &t, &t, GAAW_SUM);
  if (st == GAAW_SUCCESS) st = gaaw_comm_broadcast(c->world, &t, 0);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, t.offset, f, sizeof(float) * (size_t)n);
  gaaw_buffer_free(ctx, &t.buf);
  GAAW_CHECK(st);
  for (int i = 0; i < n; i++) values[i] = (double)f[i] / c->nranks;
  return GAAW_SUCCESS;
}

/* What one timed operation does, and its state. */
typedef gaaw_status_t (*timed_op)(calibration *c, void *arg);

/* Seconds per call of op: one untimed call, then CALIBRATE_REPEATS blocks of as
 * many calls as last CALIBRATE_BLOCK_SECONDS (every rank the same count, the
 * largest any rank needs), each block started after a barrier; the median block.
 * Collective over world. */
static gaaw_status_t time_op(calibration *c, timed_op op, void *arg, double *seconds)
{
  gaaw_context_t ctx = c->ctx;
  GAAW_CHECK(op(c, arg));
  GAAW_CHECK(gaaw_synchronize(ctx));
  GAAW_CHECK(gaaw_comm_barrier(c->world));
  double t0 = gaaw_clock_seconds();
  GAAW_CHECK(op(c, arg));
  GAAW_CHECK(gaaw_synchronize(ctx));
  double once[1] = {gaaw_clock_seconds() - t0};
  GAAW_CHECK(mean_over_ranks(c, once, 1)); /* the same count on every rank */
  int calls = once[0] > 0 ? (int)ceil(CALIBRATE_BLOCK_SECONDS / once[0]) : 1;
  if (calls < 1) calls = 1;
  if (calls > 10000) calls = 10000;
  double blocks[CALIBRATE_REPEATS];
  for (int r = 0; r < CALIBRATE_REPEATS; r++) {
    GAAW_CHECK(gaaw_comm_barrier(c->world));
    t0 = gaaw_clock_seconds();
    for (int k = 0; k < calls; k++) GAAW_CHECK(op(c, arg));
    GAAW_CHECK(gaaw_synchronize(ctx));
    blocks[r] = (gaaw_clock_seconds() - t0) / calls;
  }
  qsort(blocks, CALIBRATE_REPEATS, sizeof *blocks, cmp_double);
  *seconds = blocks[CALIBRATE_REPEATS / 2];
  return GAAW_SUCCESS;
}

/* Tensors of the calibration, freed together. */
typedef struct {
  gaaw_tensor_t t[5];
  int n;
} tensor_set;

static gaaw_status_t set_add(gaaw_context_t ctx, tensor_set *s, int ndim, const int64_t *shape, float value)
{
  gaaw_tensor_t *t = &s->t[s->n];
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, ndim, shape, GAAW_MEM_WORKSPACE, t));
  s->n++;
  return gaaw_fill(ctx, t, value);
}

static void set_free(gaaw_context_t ctx, tensor_set *s)
{
  for (int i = 0; i < s->n; i++) gaaw_buffer_free(ctx, &s->t[i].buf);
  s->n = 0;
}

/* c (m, n) = a (m, k) b (n, k)^T: a linear layer's forward, as the model runs it. */
static gaaw_status_t gemm_op(calibration *c, void *arg)
{
  tensor_set *s = arg;
  return gaaw_gemm(c->ctx, GAAW_OP_N, GAAW_OP_T, 1.0f, &s->t[0], &s->t[1], 0.0f, &s->t[2]);
}

static gaaw_status_t gemm_rate(calibration *c, gaaw_plan_gemm_point_t *p)
{
  gaaw_context_t ctx = c->ctx;
  tensor_set s = {0};
  const int64_t a[2] = {(int64_t)p->m, (int64_t)p->k}, b[2] = {(int64_t)p->n, (int64_t)p->k},
                out[2] = {(int64_t)p->m, (int64_t)p->n};
  double seconds = 0;
  gaaw_status_t st;
  GAAW_CHECK_GOTO(st, set_add(ctx, &s, 2, a, 0.01f), done);
  GAAW_CHECK_GOTO(st, set_add(ctx, &s, 2, b, 0.01f), done);
  GAAW_CHECK_GOTO(st, set_add(ctx, &s, 2, out, 0.0f), done);
  GAAW_CHECK_GOTO(st, time_op(c, gemm_op, &s, &seconds), done);
  p->tflops = 2.0 * p->m * p->n * p->k / seconds / 1e12;
done:
  set_free(ctx, &s);
  return st;
}

/* The elementwise kernels of a block, as the cost model counts their bytes (each
 * tensor read and written once): GELU on x into y (8 bytes per element), the causal
 * softmax of x seen as (B, T, T) score matrices into y (8), and the residual add
 * y = x + y (12). Their time over those bytes is the device's elementwise rate,
 * which on a CPU is set by the exp and tanh as much as by memory. */
typedef struct {
  tensor_set set;
  gaaw_tensor_t scores_in, scores_out; /* views of x and y as (B, T, T) */
} elementwise_state;

static gaaw_status_t elementwise_op(calibration *c, void *arg)
{
  elementwise_state *e = arg;
  gaaw_tensor_t *x = &e->set.t[0], *y = &e->set.t[1];
  GAAW_CHECK_CTX(c->ctx, gaaw_gelu_forward(c->ctx, x, y));
  GAAW_CHECK_CTX(c->ctx, gaaw_causal_softmax_forward(c->ctx, 0.125f, &e->scores_in, &e->scores_out));
  return gaaw_add(c->ctx, x, y, y);
}

/* Elementwise GB/s over CALIBRATE_ELEMENTWISE_FLOATS (softmax rows of seq). */
static gaaw_status_t elementwise_gbps(calibration *c, int seq, double *gbps)
{
  gaaw_context_t ctx = c->ctx;
  elementwise_state e;
  memset(&e, 0, sizeof e);
  const int64_t T = seq, B = CALIBRATE_ELEMENTWISE_FLOATS / (T * T) > 0 ? CALIBRATE_ELEMENTWISE_FLOATS / (T * T) : 1;
  const int64_t n = B * T * T, flat[1] = {n}, scores[3] = {B, T, T};
  double seconds = 0;
  gaaw_status_t st;
  GAAW_CHECK_GOTO(st, set_add(ctx, &e.set, 1, flat, 0.5f), done);
  GAAW_CHECK_GOTO(st, set_add(ctx, &e.set, 1, flat, 0.0f), done);
  GAAW_CHECK_GOTO(st, gaaw_tensor_view(e.set.t[0].buf, e.set.t[0].offset, GAAW_F32, 3, scores, &e.scores_in), done);
  GAAW_CHECK_GOTO(st, gaaw_tensor_view(e.set.t[1].buf, e.set.t[1].offset, GAAW_F32, 3, scores, &e.scores_out), done);
  GAAW_CHECK_GOTO(st, time_op(c, elementwise_op, &e, &seconds), done);
  *gbps = (8.0 + 8.0 + 12.0) * n / seconds / 1e9;
done:
  set_free(ctx, &e.set);
  return st;
}

static gaaw_status_t allreduce_op(calibration *c, void *arg)
{
  tensor_set *s = arg;
  return gaaw_comm_allreduce(c->world, &s->t[0], &s->t[0], GAAW_SUM);
}

/* Seconds of one all-reduce of floats elements on world. */
static gaaw_status_t allreduce_seconds(calibration *c, int64_t floats, double *seconds)
{
  gaaw_context_t ctx = c->ctx;
  tensor_set s = {0};
  gaaw_status_t st;
  GAAW_CHECK_GOTO(st, set_add(ctx, &s, 1, &floats, 1.0f), done);
  GAAW_CHECK_GOTO(st, time_op(c, allreduce_op, &s, seconds), done);
done:
  set_free(ctx, &s);
  return st;
}

/* Bytes per second of the CPU optimizer (offload): AdamW on f32 state reads the
 * weights, the gradient and two moments and writes the weights, the moments and
 * the compute-dtype copy, 32 bytes per element. */
typedef struct {
  float *w, *m1, *m2, *grad, *out;
  gaaw_cpu_update_args args;
} cpu_adam_state;

static gaaw_status_t cpu_adam_op(calibration *c, void *arg)
{
  (void)c;
  cpu_adam_state *a = arg;
  a->args.adam.step++;
  gaaw_cpu_update(gaaw_cpu_simd_parse("auto"), CALIBRATE_STREAM_FLOATS, a->w, a->m1, a->m2, a->grad, a->out,
                  GAAW_F32, &a->args);
  return GAAW_SUCCESS;
}

static gaaw_status_t cpu_adam_gbps(calibration *c, double *gbps)
{
  gaaw_context_t ctx = c->ctx;
  cpu_adam_state a;
  memset(&a, 0, sizeof a);
  float **arrays[5] = {&a.w, &a.m1, &a.m2, &a.grad, &a.out};
  gaaw_status_t st = GAAW_SUCCESS;
  double seconds = 0;
  for (int i = 0; i < 5 && st == GAAW_SUCCESS; i++)
    if (!(*arrays[i] = calloc(CALIBRATE_STREAM_FLOATS, sizeof(float))))
      st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                            "cannot allocate the CPU optimizer's calibration arrays");
  a.args.kind = GAAW_ADAMW;
  a.args.adam = (gaaw_adamw_args_t){1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0};
  /* agreed first: a rank without memory must not leave the others in time_op */
  st = gaaw_agree(c->world, st, "the CPU optimizer's calibration", NULL, 0);
  if (st == GAAW_SUCCESS) st = time_op(c, cpu_adam_op, &a, &seconds);
  for (int i = 0; i < 5; i++) free(*arrays[i]);
  GAAW_CHECK(st);
  *gbps = 32.0 * CALIBRATE_STREAM_FLOATS / seconds / 1e9;
  return GAAW_SUCCESS;
}

/* The GEMM shapes of model's layers, at one row (seq tokens) and at eight, for tp 1
 * and for the largest tp this world and model allow. */
static int gemm_shapes(const gaaw_gpt_config_t *model, int nranks, gaaw_plan_gemm_point_t *p)
{
  const double h = model->dim, ffn = model->ffn > 0 ? model->ffn : 4.0 * model->dim, s = model->max_seq;
  const double hd = (double)model->dim / model->heads;
  int tpmax = 1;
  for (int t = 1; t <= nranks; t++)
    if (nranks % t == 0 && model->heads % t == 0 && ((int)ffn) % t == 0) tpmax = t;
  int n = 0;
  const int tps[2] = {1, tpmax};
  for (int r = 0; r < 2; r++) {
    const double m = r == 0 ? s : 8 * s;
    for (int i = 0; i < (tpmax > 1 ? 2 : 1); i++) {
      const double tp = tps[i];
      p[n++] = (gaaw_plan_gemm_point_t){m, 3 * h / tp, h, 0};   /* QKV */
      p[n++] = (gaaw_plan_gemm_point_t){m, h, h / tp, 0};       /* attention output */
      p[n++] = (gaaw_plan_gemm_point_t){m, ffn / tp, h, 0};     /* MLP up */
    }
    p[n++] = (gaaw_plan_gemm_point_t){m, model->vocab, h, 0};   /* LM head */
  }
  p[n++] = (gaaw_plan_gemm_point_t){s, s, hd, 0};               /* one head's scores */
  return n;
}

gaaw_status_t gaaw_plan_calibrate(gaaw_context_t ctx, const gaaw_gpt_config_t *model, gaaw_plan_cluster_t *cluster)
{
  calibration c = {ctx, NULL, 1};
  gaaw_status_t st = GAAW_SUCCESS;
  GAAW_CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &c.world));
  GAAW_CHECK(gaaw_world_size(ctx, &c.nranks));
  /* checked here, agreed below: one rank's bad argument fails every rank */
  if (!model || !cluster)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "%s must not be NULL",
                          !model ? "model" : "cluster");
  else if (model->dim < 1 || model->heads < 1 || model->dim % model->heads || model->max_seq < 1 ||
           model->vocab < 1 || model->ffn < 0)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "the model to calibrate for needs dim, heads (dividing dim), max_seq and vocab >= 1 and "
                          "ffn >= 0 (dim %d, heads %d, max_seq %d, vocab %d, ffn %d)",
                          model->dim, model->heads, model->max_seq, model->vocab, model->ffn);
  const int ok = st == GAAW_SUCCESS;
  const gaaw_field fields[] = {GAAW_FIELD_INT("dim", ok ? model->dim : 0), GAAW_FIELD_INT("heads", ok ? model->heads : 0),
                               GAAW_FIELD_INT("max_seq", ok ? model->max_seq : 0),
                               GAAW_FIELD_INT("vocab", ok ? model->vocab : 0), GAAW_FIELD_INT("ffn", ok ? model->ffn : 0)};
  GAAW_CHECK(gaaw_agree(c.world, st, "gaaw_plan_calibrate's model", fields, ok ? 5 : 0));

  gaaw_plan_cluster_t out;
  memset(&out, 0, sizeof out);
  const char *backend = "?";
  gaaw_backend_name(ctx, &backend);
  snprintf(out.device.name, sizeof out.device.name, "%s (calibrated)", backend);

  /* GEMM rates; the best of them stands for the peak */
  out.device.gemm_points = gemm_shapes(model, c.nranks, out.device.gemm);
  double rates[GAAW_PLAN_GEMM_POINTS];
  for (int i = 0; i < out.device.gemm_points; i++) {
    GAAW_CHECK(gemm_rate(&c, &out.device.gemm[i]));
    rates[i] = out.device.gemm[i].tflops;
  }
  GAAW_CHECK(mean_over_ranks(&c, rates, out.device.gemm_points));
  for (int i = 0; i < out.device.gemm_points; i++) {
    out.device.gemm[i].tflops = rates[i];
    if (rates[i] > out.device.peak_tflops) out.device.peak_tflops = rates[i];
  }
  out.device.gemm_efficiency = 1.0;

  /* the elementwise rate, the CPU optimizer's bandwidth, and all-reduces */
  double figures[4];
  GAAW_CHECK(elementwise_gbps(&c, model->max_seq, &figures[0]));
  GAAW_CHECK(cpu_adam_gbps(&c, &figures[1]));
  GAAW_CHECK(allreduce_seconds(&c, 1, &figures[2]));
  GAAW_CHECK(allreduce_seconds(&c, CALIBRATE_LARGE_MESSAGE, &figures[3]));
  GAAW_CHECK(mean_over_ranks(&c, figures, 4));
  gaaw_memory_release_cached(ctx);

  out.device.memory_gbps = figures[0];
  out.device.host_link_gbps = figures[0];
  out.host_update_gbps = figures[1];
  out.nvme_gbps = 1.0; /* not measured: give the node's figure if nvme offload is planned */
  /* the ring all-reduce's alpha-beta (2 (n-1) steps of alpha, 2 (n-1)/n of the bytes
   * over the link): alpha from one float, the link from a megafloat */
  const int n = c.nranks;
  if (n > 1) {
    const double steps = 2.0 * (n - 1), share = 2.0 * (n - 1) / n;
    const double alpha = figures[2] / steps;
    const double beta_seconds = fmax(figures[3] - figures[2], 1e-9);
    out.intra_node_latency_us = alpha * 1e6;
    out.intra_node_gbps = share * 4.0 * CALIBRATE_LARGE_MESSAGE / beta_seconds / 1e9;
  } else {
    out.intra_node_latency_us = 1.0;
    out.intra_node_gbps = figures[0];
  }
  out.inter_node_latency_us = out.intra_node_latency_us;
  out.inter_node_gbps = out.intra_node_gbps;
  out.nodes = 1;
  out.devices_per_node = n;
  /* the device's memory: the node's, shared by its ranks */
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  out.device.memory_bytes = pages > 0 && page > 0 ? (double)pages * page / n : 0;
  *cluster = out;
  return GAAW_SUCCESS;
}
