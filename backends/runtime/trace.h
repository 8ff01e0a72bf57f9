/* The timeline (option `trace=FILE`, `%r` = world rank): one Chrome trace /
 * Perfetto JSON file per rank, an array of complete events ("ph":"X") with
 * pid = world rank and one tid per activity (a lane: "compute", "pipeline",
 * "comm tp", "checkpoint", ...), timestamps in microseconds on one clock across
 * ranks (each rank's offset to world rank 0 measured when the trace opens).
 *
 * Off by default; when off every entry point returns after one test of
 * ctx->trace. When on, events go into a fixed buffer written out as it fills, at
 * gaaw_finalize (which closes the array) and whenever an error is raised, so
 * memory stays bounded and a failed run keeps its timeline (a file that was
 * never closed lacks its final ']'; gaaw-trace merge accepts it).
 *
 * Usage, as a span around work (times from gaaw_clock_seconds):
 *   double t0 = gaaw_clock_seconds();
 *   ... work ...
 *   if (gaaw_trace_on(ctx)) gaaw_trace_span(ctx, lane, "forward", t0, "\"layer\":%d", i); */
#ifndef GAAW_RUNTIME_TRACE_H
#define GAAW_RUNTIME_TRACE_H

#include "backends/runtime/context_impl.h"
#include "backends/runtime/error.h"

/* The process's monotonic clock, in seconds (the clock every span is timed on). */
double gaaw_clock_seconds(void);

static inline int gaaw_trace_on(gaaw_context_t ctx)
{
  return ctx && ctx->trace;
}

/* The lane (thread row) named name, created on first use ("comm dp"). */
int gaaw_trace_lane(gaaw_context_t ctx, const char *name);

/* One complete event on lane from start (gaaw_clock_seconds) to now; args_fmt
 * (may be NULL) formats the members of its "args" object, without braces. */
void gaaw_trace_span(gaaw_context_t ctx, int lane, const char *name, double start, const char *args_fmt, ...)
  GAAW_PRINTF(5, 6);

/* The `kernels` lane when option trace_kernels is on (and the trace), else 0. */
int gaaw_trace_kernel_lane(gaaw_context_t ctx);

/* Opens ctx's trace when the option `trace` names a file (local). */
gaaw_status_t gaaw_trace_open(gaaw_context_t ctx);
/* This rank's clock offset to world rank 0, when the trace is on. Collective over
 * world; after every rank agreed that gaaw_trace_open succeeded. */
gaaw_status_t gaaw_trace_sync_clock(gaaw_context_t ctx);
/* Writes out what is buffered. */
void gaaw_trace_flush(gaaw_context_t ctx);
/* Names the process and its lanes, closes the array and the file. */
void gaaw_trace_close(gaaw_context_t ctx);

#endif
