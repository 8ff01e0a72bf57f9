/* gaaw-train's memory estimate before training, and the refusal of a job that
 * does not fit device_memory_limit.
 *
 * The rule. The estimate counts device bytes in use, as asked for; the limit
 * counts what the caching allocator holds: each block rounded up to its size
 * class (1/8 of its power-of-two octave, at least 256 bytes), blocks a
 * communication stream still reads (pending), and the cache, which the allocator
 * gives back before it refuses. So a job whose estimate exceeds the limit cannot
 * fit and is refused before training; one whose estimate plus 1/8 fits the limit
 * fits whatever the rounding (but for blocks of 256 bytes or less and pending
 * ones); one in between may or may not, and runs with a warning. The changes
 * named in a refusal are those that fit with the 1/8. */
#include "examples/train/estimate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/train/trainer.h"

static double mib(uint64_t bytes)
{
  return (double)bytes / (1024.0 * 1024.0);
}

/* What the allocator may hold for need bytes in use: need and its rounding. */
static uint64_t with_rounding(uint64_t need)
{
  return need + (need + 7) / 8;
}

/* device_memory_limit's text as bytes (gaaw_config_check took it: digits with an
 * optional K, M, G or T); 0 for none. */
static uint64_t limit_bytes(gaaw_config_t cfg)
{
  char text[64] = "";
  if (gaaw_config_get_string(cfg, "device_memory_limit", text, sizeof text) != GAAW_SUCCESS || !text[0]) return 0;
  char *end;
  uint64_t n = strtoull(text, &end, 10);
  const char *units = "KMGT", *unit = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  for (int k = unit ? (int)(unit - units) + 1 : 0; k > 0; k--) n *= 1024;
  return n;
}

/* dst: a fresh config holding every option of src. */
static gaaw_status_t copy_config(gaaw_config_t src, gaaw_config_t *dst)
{
  gaaw_status_t st = gaaw_config_create(dst);
  for (int i = 0; i < gaaw_tunable_count() && st == GAAW_SUCCESS; i++) {
    const char *name, *value, *source;
    st = gaaw_tunable_info(i, &name, NULL, NULL, NULL);
    if (st == GAAW_SUCCESS) st = gaaw_config_describe(src, name, &value, &source);
    if (st == GAAW_SUCCESS) st = gaaw_config_set(*dst, name, value);
  }
  if (st != GAAW_SUCCESS) gaaw_config_destroy(dst);
  return st;
}

/* The largest rank's estimate of the job of o on the layout of cfg (ctx's world). */
static gaaw_status_t estimate_job(gaaw_context_t ctx, const train_options *o, gaaw_config_t cfg,
                                  gaaw_memory_estimate_t *out)
{
  int64_t microbatches = 1;
  gaaw_gpt_config_t g;
  gaaw_optimizer_config_t oc;
  gaaw_estimate_options_t eo;
  gaaw_status_t st = gaaw_config_get_int(cfg, "microbatches", &microbatches);
  if (st != GAAW_SUCCESS) return st;
  train_gpt_config(o, &g);
  trainer_optimizer_config(o, (int)microbatches, &oc);
  gaaw_estimate_options_default(&eo);
  eo.batch = (int)o->batch;
  eo.seq = (int)o->seq;
  eo.rank = -1;
  return gaaw_memory_estimate(ctx, &g, cfg, &oc, &eo, out);
}

/* One change of the job, as the command line spells it. */
typedef struct {
  char flags[160];
  long zero, batch, accum, tp, pp; /* 0: unchanged */
  const char *offload_optimizer, *offload_params, *recompute; /* NULL: unchanged */
  gaaw_memory_estimate_t est;
  uint64_t need;
  int ok;
} job_change;

/* Estimates the job of o and cfg with change c applied; c->ok = 0 when the
 * changed job cannot be estimated (a layout that does not divide). */
static void estimate_change(gaaw_context_t ctx, const train_options *o, gaaw_config_t cfg, uint64_t in_use,
                            job_change *c)
{
  train_options *x = malloc(sizeof *x);
  gaaw_config_t y = NULL;
  c->ok = 0;
  if (!x || copy_config(cfg, &y) != GAAW_SUCCESS) goto out;
  *x = *o;
  if (c->zero) x->zero = c->zero;
  if (c->batch) x->batch = c->batch;
  if (c->accum) x->accum = c->accum;
  int good = 1;
  if (c->offload_optimizer) good = good && gaaw_config_set(y, "offload_optimizer", c->offload_optimizer) == GAAW_SUCCESS;
  if (c->offload_params) good = good && gaaw_config_set(y, "offload_params", c->offload_params) == GAAW_SUCCESS;
  if (c->recompute) good = good && gaaw_config_set(y, "recompute", c->recompute) == GAAW_SUCCESS;
  if (c->tp || c->pp) good = good && gaaw_config_set_int(y, "dp", 0) == GAAW_SUCCESS; /* the rest of the world */
  if (c->tp) good = good && gaaw_config_set_int(y, "tp", c->tp) == GAAW_SUCCESS;
  if (c->pp) good = good && gaaw_config_set_int(y, "pp", c->pp) == GAAW_SUCCESS;
  if (good && estimate_job(ctx, x, y, &c->est) == GAAW_SUCCESS) {
    c->need = c->est.total[GAAW_SPACE_DEVICE] + in_use;
    c->ok = 1;
  }
out:
  gaaw_clear_error(ctx); /* a change that does not apply is not this job's error */
  gaaw_config_destroy(&y);
  free(x);
}

/* Appends to buf (of len bytes, holding *n). */
static void append(char *buf, size_t len, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *n, const char *fmt, ...)
{
  if (*n >= len) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *n, len - *n, fmt, ap);
  va_end(ap);
  if (k > 0) *n += (size_t)k < len - *n ? (size_t)k : len - *n - 1;
}

/* "params 0.24, grads 0.24, ... MiB": each category's own peak on the device. */
static void append_categories(char *buf, size_t len, size_t *n, const gaaw_memory_estimate_t *e, const char *sep)
{
  for (int c = 0; c < GAAW_MEM_CATEGORY_COUNT; c++)
    append(buf, len, n, "%s%s %.2f", c ? sep : "", gaaw_mem_category_name((gaaw_mem_category_t)c),
           mib(e->bytes[GAAW_SPACE_DEVICE][c]));
  append(buf, len, n, " MiB");
}

/* " (host 1.20 MiB, nvme 0.50 MiB)" when either is nonzero */
static void append_off_device(char *buf, size_t len, size_t *n, const gaaw_memory_estimate_t *e)
{
  uint64_t host = e->total[GAAW_SPACE_HOST], nvme = e->total[GAAW_SPACE_NVME];
  if (host && nvme) append(buf, len, n, " (host %.2f MiB, nvme %.2f MiB)", mib(host), mib(nvme));
  else if (host) append(buf, len, n, " (host %.2f MiB)", mib(host));
  else if (nvme) append(buf, len, n, " (nvme %.2f MiB)", mib(nvme));
}

/* c[*n], cleared, with its flags; NULL when c is full. */
static job_change *add(job_change *c, int *n, int max, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static job_change *add(job_change *c, int *n, int max, const char *fmt, ...)
{
  if (*n >= max) return NULL;
  job_change *x = &c[(*n)++];
  memset(x, 0, sizeof *x);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->flags, sizeof x->flags, fmt, ap);
  va_end(ap);
  return x;
}

/* The changes worth trying on the job of o and cfg, in the order they are
 * named; returns how many were written to c (at most max). */
static int list_changes(const train_options *o, gaaw_config_t cfg, int world, job_change *c, int max)
{
  char offload[32] = "none", params[32] = "none", recompute[32] = "none";
  int64_t tp = 1, pp = 1;
  gaaw_config_get_string(cfg, "offload_optimizer", offload, sizeof offload);
  gaaw_config_get_string(cfg, "offload_params", params, sizeof params);
  gaaw_config_get_string(cfg, "recompute", recompute, sizeof recompute);
  gaaw_config_get_int(cfg, "tp", &tp);
  gaaw_config_get_int(cfg, "pp", &pp);
  int n = 0, off = strcmp(offload, "none") != 0;
  job_change *x;
  for (long s = o->zero + 1; s <= 3; s++)
    if ((x = add(c, &n, max, "--zero %ld", s))) x->zero = s;
  if (!off && (x = add(c, &n, max, "--offload-optimizer host"))) x->offload_optimizer = "host";
  if (!off && o->zero < 3 && (x = add(c, &n, max, "--zero 3 --offload-optimizer host"))) {
    x->zero = 3;
    x->offload_optimizer = "host";
  }
  /* the parameters' shard too: stage 3 with the optimizer off the device */
  if (!strcmp(params, "none") && (x = add(c, &n, max, "%s%s--offload-params host", o->zero < 3 ? "--zero 3 " : "",
                                          off ? "" : "--offload-optimizer host "))) {
    x->zero = 3;
    x->offload_optimizer = off ? NULL : "host";
    x->offload_params = "host";
  }
  if (!strcmp(recompute, "none") && (x = add(c, &n, max, "--recompute selective"))) x->recompute = "selective";
  if (strcmp(recompute, "full") != 0 && (x = add(c, &n, max, "--recompute full"))) x->recompute = "full";
  /* fewer rows per microbatch, the same global batch: --batch over 2, 4, 8, ...
   * and 1 row */
  for (long d = 2;; d *= 2) {
    if (d > o->batch) d = o->batch;
    if (d < 2) break;
    if (o->batch % d == 0 && (x = add(c, &n, max, "--batch %ld --accum %ld", o->batch / d, o->accum * d))) {
      x->batch = o->batch / d;
      x->accum = o->accum * d;
    }
    if (d == o->batch) break;
  }
  /* more model parallelism on the same world (dp shrinks) */
  if (world % (2 * tp * pp) == 0) {
    if ((x = add(c, &n, max, "--tp %ld", (long)(2 * tp)))) x->tp = 2 * tp;
    if ((x = add(c, &n, max, "--pp %ld", (long)(2 * pp)))) x->pp = 2 * pp;
  }
  return n;
}

/* The refusal: the estimate, the limit, the changes that fit and the limit that
 * would do. */
static void refusal(gaaw_context_t ctx, const train_options *o, gaaw_config_t cfg, const train_estimate *e, char *err,
                    size_t len)
{
  enum { MAX_CHANGES = 32 };
  job_change *c = calloc(MAX_CHANGES, sizeof *c);
  int world = 1;
  size_t n = 0;
  gaaw_world_size(ctx, &world);
  append(err, len, &n, "the estimated device peak, %.2f MiB per rank (rank %d, the largest: ", mib(e->need), e->est.rank);
  append_categories(err, len, &n, &e->est, ", ");
  if (e->in_use) append(err, len, &n, "; %.2f MiB held before the model", mib(e->in_use));
  append(err, len, &n, "), exceeds --device-memory-limit %.2f MiB (%llu bytes): not started.", mib(e->cap),
         (unsigned long long)e->cap);
  int count = c ? list_changes(o, cfg, world, c, MAX_CHANGES) : 0, fits = 0, close = 0, batch_named = 0;
  for (int i = 0; i < count; i++) estimate_change(ctx, o, cfg, e->in_use, &c[i]);
  /* what fits with the rounding; of the smaller microbatches only the largest */
  for (int i = 0; i < count; i++) {
    if (!c[i].ok || with_rounding(c[i].need) > e->cap || (c[i].batch && batch_named++)) continue;
    append(err, len, &n, "%s\n  %s: %.2f MiB", fits++ ? "" : "\nThese fit it (estimated device peaks):", c[i].flags,
           mib(c[i].need));
    append_off_device(err, len, &n, &c[i].est);
  }
  for (int i = 0; i < count; i++) { /* under the limit, but not by the rounding's 1/8 */
    if (!c[i].ok || c[i].need > e->cap || with_rounding(c[i].need) <= e->cap || (c[i].batch && batch_named++))
      continue;
    append(err, len, &n, "%s\n  %s: %.2f MiB", close++ ? "" : "\nThese are under it, but within the 1/8 that the "
           "allocator's size classes may add, so they may still run out:", c[i].flags, mib(c[i].need));
  }
  int short_of = 0;
  for (int i = 0; i < count; i++) /* the rest, so that the reader sees what each change gives */
    if (c[i].ok && c[i].need > e->cap)
      append(err, len, &n, "%s %s (%.2f MiB)", short_of++ ? "," : "\nNot enough alone:", c[i].flags, mib(c[i].need));
  uint64_t raise = (with_rounding(e->need) + 1023) / 1024;
  append(err, len, &n, "\n%s --device-memory-limit %lluK (the estimate and 1/8 for the allocator's size classes)%s",
         fits || close ? "Or raise" : "None of the changes above fits; raise", (unsigned long long)raise,
         fits || close ? "." : ", use more ranks, or a smaller --dim, --layers, --batch or --seq.");
  free(c);
}

int train_estimate_check(gaaw_context_t ctx, const train_options *o, train_estimate *e, char *err, size_t len)
{
  gaaw_config_t cfg = NULL;
  size_t in_use = 0;
  memset(e, 0, sizeof *e);
  gaaw_status_t st = gaaw_context_config(ctx, &cfg);
  if (st == GAAW_SUCCESS) st = gaaw_memory_total(ctx, &in_use, NULL);
  if (st == GAAW_SUCCESS) st = estimate_job(ctx, o, cfg, &e->est);
  if (st != GAAW_SUCCESS) {
    snprintf(e->reason, sizeof e->reason, "%s: %s", gaaw_status_name(st), gaaw_last_error(ctx));
    gaaw_clear_error(ctx);
    return TRAIN_EXIT_OK;
  }
  e->ok = 1;
  e->in_use = in_use;
  e->need = e->est.total[GAAW_SPACE_DEVICE] + in_use;
  e->cap = limit_bytes(cfg);
  if (!e->cap || e->need <= e->cap) return TRAIN_EXIT_OK;
  refusal(ctx, o, cfg, e, err, len);
  return TRAIN_EXIT_USAGE;
}

void train_estimate_print(const train_estimate *e)
{
  char line[1024];
  size_t n = 0;
  if (!e->ok) {
    printf("memory: no estimate (%s)\n", e->reason);
    fflush(stdout);
    return;
  }
  append(line, sizeof line, &n, "memory: estimated device peak %.2f MiB per rank (rank %d, the largest; category peaks ",
         mib(e->need), e->est.rank);
  append_categories(line, sizeof line, &n, &e->est, " + ");
  if (e->in_use) append(line, sizeof line, &n, "; %.2f MiB held before the model", mib(e->in_use));
  append(line, sizeof line, &n, ")");
  if (e->est.total[GAAW_SPACE_HOST]) append(line, sizeof line, &n, " | host %.2f MiB", mib(e->est.total[GAAW_SPACE_HOST]));
  if (e->est.total[GAAW_SPACE_NVME]) append(line, sizeof line, &n, " | nvme %.2f MiB", mib(e->est.total[GAAW_SPACE_NVME]));
  if (e->cap) append(line, sizeof line, &n, " | limit %.2f MiB", mib(e->cap));
  printf("%s\n", line);
  fflush(stdout);
  if (e->cap && with_rounding(e->need) > e->cap)
    fprintf(stderr, "gaaw-train: warning: the estimated device peak %.2f MiB is within 1/8 of --device-memory-limit "
            "%.2f MiB: the allocator rounds blocks up to size classes (up to 1/8 more), so the run may still stop "
            "with GAAW_ERR_NO_MEMORY (exit 1)\n", mib(e->need), mib(e->cap));
}
