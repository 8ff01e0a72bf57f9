/* Failure reports: one record per context, one per thread for calls without one. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/runtime/context_impl.h"
#include "backends/runtime/error.h"
#include "backends/runtime/log.h"
#include "backends/runtime/trace.h"

static _Thread_local gaaw_error_record thread_record;

gaaw_error_record *gaaw_error_record_of(gaaw_context_t ctx)
{
  return ctx ? &ctx->error : &thread_record;
}

void gaaw_error_first_line(gaaw_context_t ctx, char *out, size_t size)
{
  const char *text = gaaw_error_record_of(ctx)->text;
  size_t n = strcspn(text, "\n");
  if (n >= size) n = size - 1;
  memcpy(out, text, n);
  out[n] = '\0';
}

static const char *base_name(const char *path)
{
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

gaaw_status_t gaaw_error_raise(gaaw_context_t ctx, gaaw_status_t status, const char *file, int line,
                               const char *func, const char *fmt, ...)
{
  gaaw_error_record *rec = gaaw_error_record_of(ctx);
  int n = snprintf(rec->text, sizeof rec->text, "%s (%s) at %s:%d %s: ", gaaw_status_name(status),
                   gaaw_status_string(status), base_name(file), line, func);
  size_t len = n < 0 ? 0 : (size_t)n < sizeof rec->text ? (size_t)n : sizeof rec->text - 1;
  va_list ap;
  va_start(ap, fmt);
  n = vsnprintf(rec->text + len, sizeof rec->text - len, fmt, ap);
  va_end(ap);
  if (n > 0) len += (size_t)n < sizeof rec->text - len ? (size_t)n : sizeof rec->text - len - 1;
  rec->len = len;
  rec->status = status;
  gaaw_log(GAAW_LOG_DEBUG, "%s", rec->text);
  gaaw_trace_flush(ctx); /* a run that fails keeps its timeline */
  return status;
}

gaaw_status_t gaaw_error_trace(gaaw_context_t ctx, gaaw_status_t status, const char *file, int line,
                               const char *func)
{
  gaaw_error_record *rec = gaaw_error_record_of(ctx);
  if (rec->status == GAAW_SUCCESS) {
    /* A status that nobody raised (a bug): still say where it surfaced. */
    return gaaw_error_raise(ctx, status, file, line, func, "failed without a report");
  }
  if (rec->len + 1 < sizeof rec->text) {
    int n = snprintf(rec->text + rec->len, sizeof rec->text - rec->len, "\n  from %s:%d %s",
                     base_name(file), line, func);
    if (n > 0)
      rec->len += (size_t)n < sizeof rec->text - rec->len ? (size_t)n : sizeof rec->text - rec->len - 1;
  }
  return status;
}

const char *gaaw_last_error(gaaw_context_t ctx)
{
  return gaaw_error_record_of(ctx)->text;
}

gaaw_status_t gaaw_last_status(gaaw_context_t ctx)
{
  return gaaw_error_record_of(ctx)->status;
}

gaaw_status_t gaaw_clear_error(gaaw_context_t ctx)
{
  gaaw_error_record *rec = gaaw_error_record_of(ctx);
  rec->status = GAAW_SUCCESS;
  rec->text[0] = '\0';
  rec->len = 0;
  return GAAW_SUCCESS;
}
