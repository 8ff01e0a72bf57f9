/* gaaw-trace merge -o OUT FILE...: joins the per-rank timelines that the option
 * `trace` writes into one Chrome trace / Perfetto file, a process row per rank
 * (and a thread row per lane, as each rank named them). The ranks' timestamps
 * are already on one clock (rank 0's); a file whose run died before
 * gaaw_finalize lacks its closing ']' and is read all the same.
 * gaaw-trace summary [--lane NAME] FILE...: the table of trace_summary.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/trace_summary.h"

#define MAX_RANKS 65536

static void usage(FILE *to)
{
  fprintf(to, "usage: gaaw-trace merge -o OUT FILE...\n"
              "       gaaw-trace summary [--lane NAME] FILE...\n"
              "merge joins the timelines written by gaaw's option trace=FILE (one per rank, %%r in FILE)\n"
              "into OUT, one process row per rank, for chrome://tracing or https://ui.perfetto.dev.\n"
              "summary prints the milliseconds per rank and step of each kernel and shape on the lane\n"
              "NAME (default kernels: run with trace_kernels=yes), over the steps after the first.\n");
}

static char *read_text(const char *path, size_t *n)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, used = 0;
  char *text = malloc(cap + 2);
  for (size_t got; text && (got = fread(text + used, 1, cap - used, f)) > 0;) {
    used += got;
    if (used == cap) {
      char *grown = realloc(text, 2 * cap + 2);
      if (!grown) free(text);
      text = grown, cap *= 2;
    }
  }
  fclose(f);
  if (text) text[used] = '\0';
  *n = used;
  return text;
}

/* The events of one file: as written, or with the ']' of an unfinished run added. */
static json_t *load_events(const char *path)
{
  size_t n;
  char *text = read_text(path, &n);
  if (!text) {
    fprintf(stderr, "gaaw-trace: cannot read %s\n", path);
    return NULL;
  }
  json_error_t err;
  json_t *events = json_loadb(text, n, 0, &err);
  if (!events) { /* cut short: drop the last partial line and close the array */
    /* every event is one line ending "},": the last whole one ends at the last such
     * line end (the last '}' alone may close an event's args, not the event) */
    char *end = NULL;
    for (char *at = strstr(text, "},\n"); at; at = strstr(at + 1, "},\n")) end = at;
    if (end) {
      end[1] = ']', end[2] = '\0';
      events = json_loads(text, 0, NULL);
    }
    if (events) fprintf(stderr, "gaaw-trace: %s was not closed (its run ended early): read up to its last event\n", path);
  }
  free(text);
  if (!events || !json_is_array(events)) {
    fprintf(stderr, "gaaw-trace: %s is not a gaaw timeline (a JSON array of events): %s at line %d\n", path,
            events ? "not an array" : err.text, events ? 0 : err.line);
    json_decref(events);
    return NULL;
  }
  return events;
}

/* The rank (pid) of a file's events: all the same, else -1 with the reason said. */
static int file_rank(const char *path, json_t *events)
{
  int rank = -1;
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e)
  {
    json_t *pid = json_object_get(e, "pid");
    if (!json_is_integer(pid) || json_integer_value(pid) < 0 || json_integer_value(pid) >= MAX_RANKS ||
        (rank >= 0 && json_integer_value(pid) != rank)) {
      fprintf(stderr, "gaaw-trace: %s: event %zu has no pid or another rank's: one file per rank\n", path, i);
      return -1;
    }
    rank = (int)json_integer_value(pid);
  }
  if (rank < 0) fprintf(stderr, "gaaw-trace: %s holds no events\n", path);
  return rank;
}

static int has_process_name(json_t *events)
{
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e)
  {
    const char *name = json_string_value(json_object_get(e, "name"));
    if (name && !strcmp(name, "process_name")) return 1;
  }
  return 0;
}

static int merge(const char *out, char **files, int nfiles)
{
  json_t *all = json_array();
  unsigned char *seen = calloc(MAX_RANKS, 1);
  int ok = all && seen;
  for (int k = 0; ok && k < nfiles; k++) {
    json_t *events = load_events(files[k]);
    int rank = events ? file_rank(files[k], events) : -1;
    if (rank >= 0 && seen[rank]) fprintf(stderr, "gaaw-trace: %s holds rank %d, as an earlier file did\n", files[k], rank);
    ok = rank >= 0 && !seen[rank];
    if (ok) {
      seen[rank] = 1;
      char label[32];
      snprintf(label, sizeof label, "rank %d", rank);
      if (!has_process_name(events))
        json_array_append_new(events, json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "pid",
                                                rank, "args", "name", label));
      json_array_extend(all, events);
    }
    json_decref(events);
  }
  json_t *doc = ok ? json_pack("{s:o, s:s}", "traceEvents", all, "displayTimeUnit", "ms") : NULL;
  if (!doc) json_decref(all);
  if (doc && json_dump_file(doc, out, JSON_COMPACT) != 0) {
    fprintf(stderr, "gaaw-trace: cannot write %s\n", out);
    ok = 0;
  }
  json_decref(doc);
  free(seen);
  return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  if (argc >= 3 && !strcmp(argv[1], "summary")) {
    int first = 2;
    const char *lane = "kernels";
    if (!strcmp(argv[2], "--lane")) lane = argc > 3 ? argv[3] : NULL, first = 4;
    if (!lane || first >= argc) {
      usage(stderr);
      return 2;
    }
    return gaaw_trace_summary(lane, argv + first, argc - first, load_events);
  }
  if (argc < 5 || strcmp(argv[1], "merge") != 0 || strcmp(argv[2], "-o") != 0) {
    usage(stderr);
    return 2;
  }
  return merge(argv[3], argv + 4, argc - 4);
}
