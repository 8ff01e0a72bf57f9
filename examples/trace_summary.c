/* gaaw-trace summary: the time of each kernel and shape over the steps of one or
 * more ranks' timelines (option trace_kernels), per rank and step.
 *
 * A step ends with an "optimizer step" span; the summary counts what starts after
 * the first one ends up to the end of the last (the first step warms the allocator
 * and caches up), or the whole file when it holds fewer than two. The step time is
 * that window over its steps; "outside kernels" is the step time the kernels leave
 * (the framework's own work, MPI waits, the optimizer's host side). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/trace_summary.h"

enum { MAX_ROWS = 4096 };

typedef struct {
  char name[64], shape[96];
  long calls;
  double us;
} row_t;

typedef struct {
  row_t rows[MAX_ROWS];
  int nrows;
  double window_us; /* summed over files */
  long steps;       /* summed over files */
} table_t;

/* The tid that the file's metadata names `lane`, or -1. */
static int lane_tid(json_t *events, const char *lane)
{
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e)
  {
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *value = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    if (name && value && !strcmp(name, "thread_name") && !strcmp(value, lane))
      return (int)json_integer_value(json_object_get(e, "tid"));
  }
  return -1;
}

/* [*from, *to): the window of the file's steps after the first; *steps in it. */
static void step_window(json_t *events, double *from, double *to, long *steps)
{
  double first = -1, last = -1, lo = 1e300, hi = -1e300;
  long count = 0;
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e)
  {
    const char *name = json_string_value(json_object_get(e, "name"));
    double ts = json_number_value(json_object_get(e, "ts")), end = ts + json_number_value(json_object_get(e, "dur"));
    const char *ph = json_string_value(json_object_get(e, "ph"));
    if (!name || !ph || strcmp(ph, "X")) continue; /* spans only, not the lanes' names */
    if (ts < lo) lo = ts;
    if (end > hi) hi = end;
    if (strcmp(name, "optimizer step")) continue;
    if (first < 0 || end < first) first = end;
    if (end > last) last = end;
    count++;
  }
  if (count >= 2) {
    *from = first, *to = last, *steps = count - 1;
  } else {
    *from = lo, *to = hi, *steps = 1;
  }
}

static row_t *row_of(table_t *t, const char *name, const char *shape)
{
  for (int r = 0; r < t->nrows; r++)
    if (!strcmp(t->rows[r].name, name) && !strcmp(t->rows[r].shape, shape)) return &t->rows[r];
  if (t->nrows == MAX_ROWS) return NULL;
  row_t *r = &t->rows[t->nrows++];
  snprintf(r->name, sizeof r->name, "%s", name);
  snprintf(r->shape, sizeof r->shape, "%s", shape);
  return r;
}

/* Adds one file's kernels lane to t; 0 when it has none. */
static int add_file(table_t *t, const char *path, json_t *events, const char *lane)
{
  int tid = lane_tid(events, lane);
  if (tid < 0) {
    fprintf(stderr, "gaaw-trace: %s has no lane '%s' (run with trace_kernels=yes, and let the run reach "
                    "gaaw_finalize)\n", path, lane);
    return 0;
  }
  double from, to;
  long steps;
  step_window(events, &from, &to, &steps);
  t->window_us += to - from;
  t->steps += steps;
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e)
  {
    if (json_integer_value(json_object_get(e, "tid")) != tid) continue;
    double ts = json_number_value(json_object_get(e, "ts"));
    if (ts < from || ts >= to) continue;
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *shape = json_string_value(json_object_get(json_object_get(e, "args"), "shape"));
    row_t *r = row_of(t, name ? name : "?", shape ? shape : "");
    if (!r) continue;
    r->calls++;
    r->us += json_number_value(json_object_get(e, "dur"));
  }
  return 1;
}

static int by_time(const void *a, const void *b)
{
  double x = ((const row_t *)a)->us, y = ((const row_t *)b)->us;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void print_table(table_t *t, int nfiles)
{
  qsort(t->rows, (size_t)t->nrows, sizeof t->rows[0], by_time);
  double step_ms = t->window_us / 1e3 / (double)t->steps, per = 1.0 / 1e3 / (double)t->steps, in_kernels = 0;
  printf("# %d rank(s), %ld step(s) per rank after the first: %.3f ms per step; figures per rank and step\n",
         nfiles, t->steps / nfiles, step_ms);
  printf("%-26s %-26s %10s %10s %7s\n", "kernel", "shape", "calls", "ms", "share");
  for (int r = 0; r < t->nrows; r++) {
    const row_t *x = &t->rows[r];
    in_kernels += x->us * per;
    printf("%-26s %-26s %10.1f %10.3f %6.1f%%\n", x->name, x->shape, (double)x->calls / (double)t->steps,
           x->us * per, 100.0 * x->us * per / step_ms);
  }
  printf("%-26s %-26s %10s %10.3f %6.1f%%\n", "(all kernels)", "", "", in_kernels, 100.0 * in_kernels / step_ms);
  printf("%-26s %-26s %10s %10.3f %6.1f%%\n", "(outside kernels)", "", "", step_ms - in_kernels,
         100.0 * (step_ms - in_kernels) / step_ms);
}

int gaaw_trace_summary(const char *lane, char **files, int nfiles, json_t *(*load)(const char *path))
{
  table_t *t = calloc(1, sizeof *t);
  if (!t) return 1;
  int ok = 1;
  for (int k = 0; ok && k < nfiles; k++) {
    json_t *events = load(files[k]);
    ok = events && add_file(t, files[k], events, lane);
    json_decref(events);
  }
  if (ok && t->steps > 0) print_table(t, nfiles);
  free(t);
  return ok ? 0 : 1;
}
