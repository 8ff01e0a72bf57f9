/* Error reporting inside gaaw: record what failed, where, and why, then propagate
 * the status up with a trace of the functions it passed through.
 *
 *   GAAW_CHECK(call)                      return call's failure, adding this frame
 *   GAAW_ARG_CHECK(ctx, cond, fmt, ...)   GAAW_ERR_INVALID_ARG naming the values
 *   GAAW_FAIL(ctx, status, fmt, ...)      record and return any other failure
 *
 * Reports go to the context's record, or to a thread-local one when ctx is NULL
 * (before a context exists). */
#ifndef GAAW_RUNTIME_ERROR_H
#define GAAW_RUNTIME_ERROR_H

#include "gaaw/context.h"

#if defined(__GNUC__)
#define GAAW_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define GAAW_PRINTF(fmt_index, first_arg)
#endif

#define GAAW_ERROR_TEXT_MAX 2048

/* One failure report. */
typedef struct {
  gaaw_status_t status;
  char text[GAAW_ERROR_TEXT_MAX]; /* "file:line func: message [native]\n  from ..." */
  size_t len;
} gaaw_error_record;

/* Records a new failure (replacing the previous one) and returns status. */
gaaw_status_t gaaw_error_raise(gaaw_context_t ctx, gaaw_status_t status, const char *file, int line,
                               const char *func, const char *fmt, ...) GAAW_PRINTF(6, 7);
/* Appends "from file:line func" to the current report; returns status unchanged. */
gaaw_status_t gaaw_error_trace(gaaw_context_t ctx, gaaw_status_t status, const char *file, int line,
                               const char *func);
/* The record errors of ctx go to (the thread-local one for NULL). */
gaaw_error_record *gaaw_error_record_of(gaaw_context_t ctx);
/* The first line of ctx's report (the failure, without its trace) into out. */
void gaaw_error_first_line(gaaw_context_t ctx, char *out, size_t size);

/* The context whose record GAAW_CHECK appends to: functions name theirs by declaring
 * a variable `ctx`; everything else uses the thread-local record. */
#define GAAW_CHECK_CTX(ctx, call)                                                      \
  do {                                                                                 \
    gaaw_status_t gaaw_check_st_ = (call);                                             \
    if (gaaw_check_st_ != GAAW_SUCCESS)                                                \
      return gaaw_error_trace((ctx), gaaw_check_st_, __FILE__, __LINE__, __func__);    \
  } while (0)
#define GAAW_CHECK(call) GAAW_CHECK_CTX(ctx, call)

#define GAAW_FAIL(ctx, status, ...) \
  return gaaw_error_raise((ctx), (status), __FILE__, __LINE__, __func__, __VA_ARGS__)

#define GAAW_ARG_CHECK(ctx, cond, ...)                      \
  do {                                                      \
    if (!(cond)) GAAW_FAIL((ctx), GAAW_ERR_INVALID_ARG, __VA_ARGS__); \
  } while (0)

/* Cleanup in one place (STYLE.md): st = call; on failure, trace this frame and
 * jump to label, where every resource is released once. */
#define GAAW_CHECK_GOTO(st, call, label)                                  \
  do {                                                                    \
    (st) = (call);                                                        \
    if ((st) != GAAW_SUCCESS) {                                           \
      (st) = gaaw_error_trace(ctx, (st), __FILE__, __LINE__, __func__);   \
      goto label;                                                         \
    }                                                                     \
  } while (0)

/* A pointer argument that must not be NULL. */
#define GAAW_ARG_NOT_NULL(ctx, ptr) GAAW_ARG_CHECK((ctx), (ptr) != NULL, "%s must not be NULL", #ptr)

#endif
