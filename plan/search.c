/* The planner (gaaw_plan_create) and the plan's accessors.
 *
 * For every (dp, pp, cp, tp) of the cluster's world: tp must divide heads and ffn,
 * pp x virtual stages the layers, 2 cp the sequence, dp the global batch (else the
 * family is rejected for divisibility or batch); then every microbatch size
 * dividing the rows of a dp rank, every schedule allowed (interleaved with each
 * virtual stage count v >= 2 that divides, when pp > 1 and pp divides the
 * microbatches), recompute, ZeRO stage, offload (offload only with ZeRO >= 1) and,
 * at cp > 1, cp_kind (a2a only where cp divides a tp rank's heads).
 *
 * Three filters, cheapest first, so that a thousand-device search of a 100B GPT
 * takes a second or two:
 * 1. memory guessed (plan_memory_guess, analytic): a layout guessed at over 1.25
 *    times the device is dropped; a family all of whose layouts are is rejected for
 *    memory, naming its smallest guess;
 * 2. a lower bound of the step (plan_step_bound: a rank's busy time and the
 *    pipeline's fill, no other idle time):
 *    layouts are timed in its order and the search stops when the bound of the
 *    next exceeds the max_layouts-th best step found;
 * 3. the simulator times a layout (plan_step_time), and only one that would enter
 *    the best max_layouts is checked by the ledger (gaaw_memory_estimate, a few
 *    milliseconds per rank for a 100B model): it enters if that fits the device.
 *    At most PLAN_LEDGER_CALLS layouts are checked so. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_impl.h"

#define PLAN_LEDGER_CALLS 400
#define PLAN_SCHED_CACHE 32

struct gaaw_plan_s {
  gaaw_plan_layout_t *best; /* count of them, fastest first */
  int count, max;
  gaaw_plan_rejected_t *rejected;
  int nrejected, cap_rejected;
};

typedef struct {
  gaaw_plan_layout_t l;
  double bound;
} candidate;

typedef struct {
  candidate *items;
  size_t count, cap;
} candidate_list;

static int allowed(unsigned mask, int value)
{
  return mask == 0 || (mask >> value) & 1u;
}

static gaaw_status_t reject(gaaw_context_t ctx, gaaw_plan_t plan, const gaaw_plan_layout_t *family, const char *fmt,
                           ...) GAAW_PRINTF(4, 5);
static gaaw_status_t reject(gaaw_context_t ctx, gaaw_plan_t plan, const gaaw_plan_layout_t *family, const char *fmt,
                           ...)
{
  if (plan->nrejected == plan->cap_rejected) {
    int cap = plan->cap_rejected ? 2 * plan->cap_rejected : 32;
    gaaw_plan_rejected_t *r = realloc(plan->rejected, (size_t)cap * sizeof *r);
    if (!r) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold %d rejected families", cap);
    plan->rejected = r;
    plan->cap_rejected = cap;
  }
  gaaw_plan_rejected_t *r = &plan->rejected[plan->nrejected++];
  r->dp = family->dp;
  r->pp = family->pp;
  r->tp = family->tp;
  r->cp = family->cp;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
  va_end(ap);
  return GAAW_SUCCESS;
}

static gaaw_status_t push(gaaw_context_t ctx, candidate_list *list, const gaaw_plan_layout_t *l, double bound)
{
  if (list->count == list->cap) {
    size_t cap = list->cap ? 2 * list->cap : 1024;
    candidate *c = realloc(list->items, cap * sizeof *c);
    if (!c) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold %zu candidate layouts", cap);
    list->items = c;
    list->cap = cap;
  }
  list->items[list->count].l = *l;
  list->items[list->count++].bound = bound;
  return GAAW_SUCCESS;
}

/* The cp_kinds a layout of base may take: bit 0 ring, bit 1 a2a (the request's, a2a
 * only where cp divides a tp rank's heads); 1 at cp 1 (the kind is not read). */
static unsigned cp_kinds_of(const gaaw_plan_request_t *r, const gaaw_plan_layout_t *base)
{
  if (base->cp <= 1) return 1u;
  unsigned kinds = r->cp_kinds ? r->cp_kinds : 3u;
  if ((r->model.heads / base->tp) % base->cp) kinds &= ~2u;
  return kinds;
}

/* What enumerating one family carries from layout to layout. */
typedef struct {
  gaaw_context_t ctx;
  const gaaw_plan_request_t *r;
  const gaaw_plan_cluster_t *c;
  const plan_shape *sh;
  candidate_list *list;
  int offload_ok[3];              /* offload none, host, nvme: the cluster has its rates */
  double limit;                   /* the memory guess above which a layout is dropped */
  gaaw_plan_layout_t smallest_at; /* the layout of the smallest guess so far */
  double smallest;
} family_walk;

/* Layout l (sizes, microbatching and schedule set) with every recompute, ZeRO stage,
 * offload and cp_kind allowed: those the memory guess keeps onto the list. */
static gaaw_status_t push_options(family_walk *w, gaaw_plan_layout_t l)
{
  gaaw_context_t ctx = w->ctx;
  const gaaw_plan_request_t *r = w->r;
  unsigned kinds = cp_kinds_of(r, &l);
  for (int rc = 0; rc <= 2; rc++)
    for (int z = 0; z <= 3; z++)
      for (int off = 0; off <= 2; off++)
        for (int kind = 0; kind <= 1; kind++) {
          if (!allowed(r->recompute, rc) || !allowed(r->zero_stages, z) || !allowed(r->offload, off)) continue;
          if ((off && z == 0) || !w->offload_ok[off] || !((kinds >> kind) & 1u)) continue;
          l.recompute = rc;
          l.zero_stage = z;
          l.offload = off;
          l.cp_kind = kind;
          double guess = plan_memory_guess(r, w->sh, &l);
          if (guess < w->smallest) {
            w->smallest = guess;
            w->smallest_at = l;
          }
          if (guess > w->limit) continue;
          l.memory_bytes_per_rank = guess;
          GAAW_CHECK(push(ctx, w->list, &l, plan_step_bound(r, w->c, w->sh, &l)));
        }
  return GAAW_SUCCESS;
}

/* The layouts of one (dp, pp, cp, tp) family that the memory guess keeps, onto
 * w's list. */
static gaaw_status_t enumerate_family(family_walk *w, gaaw_plan_layout_t base)
{
  gaaw_context_t ctx = w->ctx;
  const gaaw_plan_request_t *r = w->r;
  int64_t rows = r->global_batch / base.dp;
  for (int64_t mb = 1; mb <= rows; mb++) {
    if (rows % mb) continue;
    gaaw_plan_layout_t l = base;
    l.microbatch = (int)mb;
    l.microbatches = (int)(rows / mb);
    /* without a pipeline the microbatches run one after the other whatever the
     * schedule: one layout, 1f1b (the option's default) when allowed */
    int only = -1;
    if (l.pp == 1) {
      for (int kind = 0; kind < GAAW_SCHED_KIND_COUNT && only < 0; kind++)
        if (allowed(r->schedules, kind) && kind != GAAW_SCHED_INTERLEAVED) only = kind;
      if (allowed(r->schedules, GAAW_SCHED_1F1B)) only = GAAW_SCHED_1F1B;
    }
    for (int kind = 0; kind < GAAW_SCHED_KIND_COUNT; kind++) {
      if (!allowed(r->schedules, kind) || (l.pp == 1 && kind != only)) continue;
      int interleaved = kind == GAAW_SCHED_INTERLEAVED;
      if (interleaved && (l.pp == 1 || l.microbatches % l.pp)) continue;
      for (int v = interleaved ? 2 : 1; v <= (interleaved ? r->model.layers / l.pp : 1); v++) {
        if (r->model.layers % (l.pp * v)) continue;
        if ((double)l.pp * l.microbatches * v > (double)(1 << 24)) continue;
        l.schedule = kind;
        l.virtual_stages = v;
        GAAW_CHECK(push_options(w, l));
      }
    }
  }
  return GAAW_SUCCESS;
}

static int by_bound(const void *a, const void *b)
{
  double x = ((const candidate *)a)->bound, y = ((const candidate *)b)->bound;
  return (x > y) - (x < y);
}

/* A schedule of (kind, p, m, v), generated once per search and reused. */
typedef struct {
  gaaw_sched_t *s[PLAN_SCHED_CACHE];
  int next;
} sched_cache;

static gaaw_status_t cached_schedule(gaaw_context_t ctx, sched_cache *cache, const gaaw_plan_layout_t *l,
                                     gaaw_sched_t **out)
{
  for (int i = 0; i < PLAN_SCHED_CACHE; i++) {
    gaaw_sched_t *s = cache->s[i];
    if (s && s->kind == l->schedule && s->pp == l->pp && s->microbatches == l->microbatches &&
        s->virtual_stages == l->virtual_stages) {
      *out = s;
      return GAAW_SUCCESS;
    }
  }
  gaaw_sched_destroy(&cache->s[cache->next]);
  GAAW_CHECK(gaaw_sched_create(ctx, l->schedule, l->pp, l->microbatches, l->virtual_stages, &cache->s[cache->next]));
  *out = cache->s[cache->next];
  cache->next = (cache->next + 1) % PLAN_SCHED_CACHE;
  return GAAW_SUCCESS;
}

/* Whether a goes before b: faster; at the same time (within 1e-9), the simpler (the
 * lower sum of ZeRO stage, recompute, offload and cp > 1), then the one using less
 * memory. */
static int better(const gaaw_plan_layout_t *a, const gaaw_plan_layout_t *b)
{
  double tol = 1e-9 * fmax(a->step_seconds, b->step_seconds);
  if (fabs(a->step_seconds - b->step_seconds) > tol) return a->step_seconds < b->step_seconds;
  int ca = a->zero_stage + a->recompute + a->offload + (a->cp > 1);
  int cb = b->zero_stage + b->recompute + b->offload + (b->cp > 1);
  if (ca != cb) return ca < cb;
  return a->memory_bytes_per_rank < b->memory_bytes_per_rank;
}

/* Inserts l among the plan's best (at most max, best first). */
static void insert_best(gaaw_plan_t plan, const gaaw_plan_layout_t *l)
{
  if (plan->count == plan->max && !better(l, &plan->best[plan->max - 1])) return;
  int i = plan->count < plan->max ? plan->count++ : plan->max - 1;
  while (i > 0 && better(l, &plan->best[i - 1])) {
    plan->best[i] = plan->best[i - 1];
    i--;
  }
  plan->best[i] = *l;
}

/* Times the candidates in the order of their bounds (filters 2 and 3). */
static gaaw_status_t choose(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c,
                            const plan_shape *sh, candidate_list *list, gaaw_plan_t plan)
{
  sched_cache cache;
  memset(&cache, 0, sizeof cache);
  gaaw_status_t st = GAAW_SUCCESS;
  int ledger = 0;
  if (list->count > 1) qsort(list->items, list->count, sizeof *list->items, by_bound); /* items is NULL when empty */
  for (size_t i = 0; i < list->count && ledger < PLAN_LEDGER_CALLS; i++) {
    gaaw_plan_layout_t *l = &list->items[i].l;
    double worst = plan->count == plan->max ? plan->best[plan->max - 1].step_seconds : INFINITY;
    if (list->items[i].bound > worst * (1 + 1e-9)) break;
    gaaw_sched_t *s = NULL;
    GAAW_CHECK_GOTO(st, cached_schedule(ctx, &cache, l, &s), out);
    GAAW_CHECK_GOTO(st, plan_step_time(ctx, r, c, sh, s, l), out);
    if (l->step_seconds > worst * (1 + 1e-9)) continue;
    ledger++;
    double bytes;
    if (plan_memory_estimate(ctx, r, l, &bytes) != GAAW_SUCCESS) {
      gaaw_clear_error(ctx); /* a layout the ledger does not take is not the search's error */
      continue;
    }
    if (bytes > c->device.memory_bytes) continue;
    l->memory_bytes_per_rank = bytes;
    insert_best(plan, l);
  }
out:
  for (int i = 0; i < PLAN_SCHED_CACHE; i++) gaaw_sched_destroy(&cache.s[i]);
  return st;
}

static const char *recompute_name(int rc)
{
  return rc == 2 ? "full" : rc == 1 ? "selective" : "none";
}

/* Why the family (dp, pp, cp, tp) of base cannot divide the job, into why; 0 when
 * it can. */
static int family_misfit(const gaaw_plan_request_t *r, const gaaw_plan_layout_t *base, char *why, size_t len)
{
  const gaaw_gpt_config_t *g = &r->model;
  int ffn = g->ffn > 0 ? g->ffn : 4 * g->dim, kv = g->kv_heads > 0 ? g->kv_heads : g->heads;
  int tp = base->tp, pp = base->pp, cp = base->cp;
  if (g->heads % tp || ffn % tp || (kv % tp && tp % kv))
    snprintf(why, len, "divisibility: heads %d or ffn %d not divisible by tp %d, or kv_heads %d and tp %d not "
             "dividing one another", g->heads, ffn, tp, kv, tp);
  else if (g->layers % pp)
    snprintf(why, len, "divisibility: layers %d not divisible by pp %d", g->layers, pp);
  else if (cp > 1 && g->max_seq % (2 * cp))
    snprintf(why, len, "divisibility: seq %d not divisible by 2 x cp %d", g->max_seq, cp);
  else if (cp > 1 && !cp_kinds_of(r, base))
    snprintf(why, len, "divisibility: cp_kind a2a only, and the %d heads of a tp rank do not divide by cp %d",
             g->heads / tp, cp);
  else if (r->global_batch % base->dp)
    snprintf(why, len, "batch: global batch %lld not divisible by dp %d", (long long)r->global_batch, base->dp);
  else
    return 0;
  return 1;
}

/* Every (dp, pp, cp, tp) of the world: its layouts onto list, or its rejection. */
static gaaw_status_t enumerate(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_cluster_t *c,
                               const plan_shape *sh, candidate_list *list, gaaw_plan_t plan)
{
  int world = c->nodes * c->devices_per_node;
  family_walk w = {ctx, r, c, sh, list, {1, 0, 0}, 1.25 * c->device.memory_bytes, {0}, 0};
  for (int off = 1; off <= 2; off++) {
    w.offload_ok[off] = plan_job_check(ctx, r, c, off) == GAAW_SUCCESS;
    gaaw_clear_error(ctx); /* a cluster without offload rates plans without offload */
  }
  for (int tp = 1; tp <= world; tp++)
    for (int cp = 1; cp <= world / tp; cp++)
      for (int pp = 1; pp <= world / tp / cp; pp++) {
        if (world % (tp * cp * pp)) continue;
        if ((r->tp && tp != r->tp) || (r->pp && pp != r->pp) || (r->cp && cp != r->cp)) continue;
        gaaw_plan_layout_t base;
        memset(&base, 0, sizeof base);
        base.dp = world / tp / cp / pp;
        base.pp = pp;
        base.tp = tp;
        base.cp = cp;
        base.virtual_stages = 1;
        char why[160];
        if (family_misfit(r, &base, why, sizeof why)) {
          GAAW_CHECK(reject(ctx, plan, &base, "%s", why));
          continue;
        }
        size_t before = list->count;
        w.smallest = INFINITY;
        GAAW_CHECK(enumerate_family(&w, base));
        const gaaw_plan_layout_t *small = &w.smallest_at;
        if (list->count == before && isfinite(w.smallest))
          GAAW_CHECK(reject(ctx, plan, &base,
                            "memory: %.1f GB at least (ZeRO %d, %s recompute, microbatch %d) on a %.1f GB device",
                            w.smallest / PLAN_GB, small->zero_stage, recompute_name(small->recompute),
                            small->microbatch, c->device.memory_bytes / PLAN_GB));
      }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_plan_create(gaaw_context_t ctx, const gaaw_plan_request_t *request,
                               const gaaw_plan_cluster_t *cluster, gaaw_plan_t *plan)
{
  GAAW_ARG_NOT_NULL(ctx, ctx);
  GAAW_ARG_NOT_NULL(ctx, plan);
  *plan = NULL;
  GAAW_CHECK(plan_job_check(ctx, request, cluster, 0));
  GAAW_ARG_CHECK(ctx, request->tp >= 0 && request->pp >= 0 && request->cp >= 0,
                 "request tp %d, pp %d and cp %d must be >= 0 (0: searched)", request->tp, request->pp, request->cp);
  GAAW_ARG_CHECK(ctx, request->cp_kinds < 4u, "request cp_kinds 0x%x out of range (bits 0 ring, 1 a2a)",
                 request->cp_kinds);
  GAAW_ARG_CHECK(ctx, request->max_layouts >= 0, "max_layouts must be >= 0 (0: 10), got %d", request->max_layouts);
  GAAW_ARG_CHECK(ctx, request->zero_stages < 16u && request->recompute < 8u && request->offload < 8u &&
                        request->schedules < (1u << GAAW_SCHED_KIND_COUNT),
                 "request masks out of range: zero_stages 0x%x (bits 0..3), schedules 0x%x (bits 0..%d), recompute "
                 "0x%x, offload 0x%x (bits 0..2)",
                 request->zero_stages, request->schedules, GAAW_SCHED_KIND_COUNT - 1, request->recompute,
                 request->offload);
  plan_shape sh;
  plan_shape_of(request, &sh);
  gaaw_plan_t p = calloc(1, sizeof *p);
  candidate_list list = {NULL, 0, 0};
  gaaw_status_t st = GAAW_SUCCESS;
  if (!p) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a plan");
  p->max = request->max_layouts ? request->max_layouts : 10;
  p->best = calloc((size_t)p->max, sizeof *p->best);
  if (!p->best) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot hold %d layouts", p->max);
    goto out;
  }
  GAAW_CHECK_GOTO(st, enumerate(ctx, request, cluster, &sh, &list, p), out);
  GAAW_CHECK_GOTO(st, choose(ctx, request, cluster, &sh, &list, p), out);
out:
  free(list.items);
  if (st != GAAW_SUCCESS)
    gaaw_plan_destroy(&p);
  *plan = p;
  return st;
}

int gaaw_plan_count(gaaw_plan_t plan)
{
  return plan ? plan->count : 0;
}

gaaw_status_t gaaw_plan_layout(gaaw_plan_t plan, int i, gaaw_plan_layout_t *layout)
{
  gaaw_context_t ctx = NULL;
  GAAW_ARG_NOT_NULL(ctx, plan);
  GAAW_ARG_NOT_NULL(ctx, layout);
  GAAW_ARG_CHECK(ctx, i >= 0 && i < plan->count, "layout %d of a plan of %d", i, plan->count);
  *layout = plan->best[i];
  return GAAW_SUCCESS;
}

int gaaw_plan_rejected_count(gaaw_plan_t plan)
{
  return plan ? plan->nrejected : 0;
}

gaaw_status_t gaaw_plan_rejected(gaaw_plan_t plan, int i, gaaw_plan_rejected_t *rejected)
{
  gaaw_context_t ctx = NULL;
  GAAW_ARG_NOT_NULL(ctx, plan);
  GAAW_ARG_NOT_NULL(ctx, rejected);
  GAAW_ARG_CHECK(ctx, i >= 0 && i < plan->nrejected, "rejected family %d of a plan of %d", i, plan->nrejected);
  *rejected = plan->rejected[i];
  return GAAW_SUCCESS;
}

void gaaw_plan_destroy(gaaw_plan_t *plan)
{
  if (!plan || !*plan) return;
  free((*plan)->best);
  free((*plan)->rejected);
  free(*plan);
  *plan = NULL;
}
