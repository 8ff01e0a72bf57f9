/* The timeline's writer: the per-rank file, its buffer, its lanes and the clock
 * offset to world rank 0 (backends/runtime/trace.h says what it records). */
#include "backends/runtime/trace.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/runtime/log.h"
#include "backends/runtime/runtime.h"

#define TRACE_BUFFER_BYTES (1 << 20) /* written out when full: the memory bound */
#define TRACE_EVENT_BYTES 1024       /* the most one event takes */
#define TRACE_LANES 32
#define CLOCK_ROUNDS 8  /* ping-pongs per rank; the one with the shortest round trip counts */
#define CLOCK_TAG 30001

struct gaaw_trace_s {
  FILE *file;
  char path[1024];
  char *buf;
  size_t used;
  double offset; /* seconds that turn this rank's clock into world rank 0's */
  double origin; /* rank 0's clock when the trace opened: time zero */
  char lanes[TRACE_LANES][32];
  int nlanes;
  int failed; /* a write failed: said once, later events dropped */
  int kernel_lane; /* option trace_kernels: the `kernels` lane; 0: off */
  pthread_mutex_t lock;
};

double gaaw_clock_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The option's path with %r replaced by the world rank (and %% by %). */
static void expand_path(const char *pattern, int rank, char *out, size_t size)
{
  size_t n = 0;
  for (const char *p = pattern; *p && n + 16 < size; p++) {
    if (p[0] == '%' && p[1] == 'r') n += (size_t)snprintf(out + n, size - n, "%d", rank), p++;
    else if (p[0] == '%' && p[1] == '%') out[n++] = '%', p++;
    else out[n++] = *p;
  }
  out[n] = '\0';
}

/* One message of the clock exchange, under the comm_timeout deadline. */
static gaaw_status_t exchange(gaaw_context_t ctx, double *value, int peer, int sending)
{
  MPI_Request req;
  if (sending) GAAW_MPI_CHECK(ctx, MPI_Isend(value, 1, MPI_DOUBLE, peer, CLOCK_TAG, ctx->control, &req));
  else GAAW_MPI_CHECK(ctx, MPI_Irecv(value, 1, MPI_DOUBLE, peer, CLOCK_TAG, ctx->control, &req));
  return gaaw_mpi_wait(ctx, &req, "measuring the trace's clock offset");
}

/* Rank 0 answers each rank's pings with its clock; each rank keeps the offset of
 * its shortest round trip (NTP's estimate: the answer came halfway through). */
static gaaw_status_t measure_offset(gaaw_context_t ctx, struct gaaw_trace_s *t)
{
  double best = INFINITY;
  if (ctx->rank == 0) t->origin = gaaw_clock_seconds();
  for (int r = 1; r < ctx->size; r++)
    for (int k = 0; k < CLOCK_ROUNDS; k++) {
      if (ctx->rank == 0) {
        double ping, answer;
        GAAW_CHECK(exchange(ctx, &ping, r, 0));
        answer = gaaw_clock_seconds();
        GAAW_CHECK(exchange(ctx, &answer, r, 1));
      } else if (ctx->rank == r) {
        double sent = gaaw_clock_seconds(), answer;
        GAAW_CHECK(exchange(ctx, &sent, 0, 1));
        GAAW_CHECK(exchange(ctx, &answer, 0, 0));
        double back = gaaw_clock_seconds();
        if (back - sent < best) best = back - sent, t->offset = answer - 0.5 * (sent + back);
      }
    }
  MPI_Request req;
  GAAW_MPI_CHECK(ctx, MPI_Ibcast(&t->origin, 1, MPI_DOUBLE, 0, ctx->control, &req));
  return gaaw_mpi_wait(ctx, &req, "sharing the trace's time zero");
}

static void close_file(struct gaaw_trace_s *t)
{
  if (t->file) fclose(t->file);
  pthread_mutex_destroy(&t->lock);
  free(t->buf);
  free(t);
}

gaaw_status_t gaaw_trace_open(gaaw_context_t ctx)
{
  const char *pattern = gaaw_ctx_string(ctx, "trace");
  if (!pattern[0]) return GAAW_SUCCESS;
  GAAW_ARG_CHECK(ctx, ctx->size == 1 || strstr(pattern, "%r"), "trace=%s: with %d ranks the file name needs %%r "
                 "(the world rank), or every rank writes the same file", pattern, ctx->size);
  struct gaaw_trace_s *t = calloc(1, sizeof *t);
  if (!t || !(t->buf = malloc(TRACE_BUFFER_BYTES))) {
    free(t);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the trace's buffer (%d bytes)", TRACE_BUFFER_BYTES);
  }
  pthread_mutex_init(&t->lock, NULL);
  expand_path(pattern, ctx->rank, t->path, sizeof t->path);
  t->file = fopen(t->path, "w");
  if (!t->file) {
    gaaw_status_t st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "trace: cannot open %s: %s",
                                        t->path, strerror(errno));
    close_file(t);
    return st;
  }
  t->used = (size_t)snprintf(t->buf, TRACE_BUFFER_BYTES, "[\n");
  ctx->trace = t;
  if (gaaw_ctx_bool(ctx, "trace_kernels")) t->kernel_lane = gaaw_trace_lane(ctx, "kernels");
  gaaw_log(GAAW_LOG_INFO, "trace: rank %d writes its timeline to %s", ctx->rank, t->path);
  return GAAW_SUCCESS;
}

/* Agreed before: every rank opened its file or every rank fails. */
gaaw_status_t gaaw_trace_sync_clock(gaaw_context_t ctx)
{
  if (!ctx->trace || ctx->size == 1) return GAAW_SUCCESS;
  return measure_offset(ctx, ctx->trace);
}

static void write_out(struct gaaw_trace_s *t)
{
  if (!t->used || t->failed) return;
  if (fwrite(t->buf, 1, t->used, t->file) != t->used || fflush(t->file) != 0) {
    t->failed = 1;
    gaaw_log(GAAW_LOG_WARN, "trace: cannot write %s (%s): the rest of this rank's timeline is lost", t->path,
             strerror(errno));
  }
  t->used = 0;
}

void gaaw_trace_flush(gaaw_context_t ctx)
{
  if (!gaaw_trace_on(ctx)) return;
  pthread_mutex_lock(&ctx->trace->lock);
  write_out(ctx->trace);
  pthread_mutex_unlock(&ctx->trace->lock);
}

int gaaw_trace_lane(gaaw_context_t ctx, const char *name)
{
  struct gaaw_trace_s *t = ctx->trace;
  if (!t) return 0;
  pthread_mutex_lock(&t->lock);
  int lane = 0;
  while (lane < t->nlanes && strcmp(t->lanes[lane], name) != 0) lane++;
  if (lane == t->nlanes && t->nlanes < TRACE_LANES) snprintf(t->lanes[t->nlanes++], sizeof t->lanes[0], "%s", name);
  if (lane == TRACE_LANES) lane = TRACE_LANES - 1; /* shares the last row */
  pthread_mutex_unlock(&t->lock);
  return lane + 1; /* tid 0 is often drawn apart: lanes start at 1 */
}

int gaaw_trace_kernel_lane(gaaw_context_t ctx)
{
  return ctx && ctx->trace ? ctx->trace->kernel_lane : 0;
}

void gaaw_trace_span(gaaw_context_t ctx, int lane, const char *name, double start, const char *args_fmt, ...)
{
  struct gaaw_trace_s *t = ctx ? ctx->trace : NULL;
  if (!t) return;
  double end = gaaw_clock_seconds();
  char args[TRACE_EVENT_BYTES / 2] = "";
  if (args_fmt) {
    va_list ap;
    va_start(ap, args_fmt);
    vsnprintf(args, sizeof args, args_fmt, ap);
    va_end(ap);
  }
  pthread_mutex_lock(&t->lock);
  if (t->used + TRACE_EVENT_BYTES > TRACE_BUFFER_BYTES) write_out(t);
  int n = snprintf(t->buf + t->used, TRACE_EVENT_BYTES,
                   "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{%s}},\n",
                   name, ctx->rank, lane, 1e6 * (start + t->offset - t->origin), 1e6 * (end - start), args);
  if (n > 0 && n < TRACE_EVENT_BYTES) t->used += (size_t)n;
  pthread_mutex_unlock(&t->lock);
}

void gaaw_trace_close(gaaw_context_t ctx)
{
  struct gaaw_trace_s *t = ctx ? ctx->trace : NULL;
  if (!t) return;
  ctx->trace = NULL;
  FILE *f = t->file;
  write_out(t);
  if (!t->failed) {
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n", ctx->rank,
            ctx->rank);
    fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}", ctx->rank,
            ctx->rank);
    for (int k = 0; k < t->nlanes; k++)
      fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
              ctx->rank, k + 1, t->lanes[k]);
    fprintf(f, "\n]\n");
    if (fflush(f) != 0) gaaw_log(GAAW_LOG_WARN, "trace: cannot write %s: %s", t->path, strerror(errno));
  }
  close_file(t);
}
