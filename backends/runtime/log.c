/* The logger. Until gaaw_init configures it, it follows GAAW_LOG and GAAW_LOG_FILE
 * from the environment (default: warnings and errors to stderr). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backends/runtime/log.h"

static const char *const level_names[] = {"none", "error", "warn", "info", "debug", "trace"};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = -1; /* -1: not read from the environment yet */
static FILE *log_stream;   /* NULL: stderr */
static int log_rank = -1;

int gaaw_log_level_parse(const char *text)
{
  if (!text) return -1;
  for (int i = 0; i < (int)(sizeof level_names / sizeof level_names[0]); i++)
    if (strcasecmp(text, level_names[i]) == 0) return i;
  return -1;
}

static void open_stream(const char *file)
{
  if (log_stream) fclose(log_stream);
  log_stream = NULL;
  if (file && *file) {
    log_stream = fopen(file, "a");
    if (!log_stream) fprintf(stderr, "gaaw: cannot open log file %s; logging to stderr\n", file);
  }
}

/* Caller holds log_lock. */
static void init_from_environment(void)
{
  if (log_level >= 0) return;
  int level = gaaw_log_level_parse(getenv("GAAW_LOG"));
  log_level = level >= 0 ? level : GAAW_LOG_WARN;
  open_stream(getenv("GAAW_LOG_FILE"));
}

gaaw_status_t gaaw_log_configure(int level, const char *file, int rank)
{
  GAAW_ARG_CHECK(NULL, level >= GAAW_LOG_NONE && level <= GAAW_LOG_TRACE, "log level %d is not in 0..5", level);
  pthread_mutex_lock(&log_lock);
  log_level = level;
  open_stream(file);
  log_rank = rank;
  pthread_mutex_unlock(&log_lock);
  return GAAW_SUCCESS;
}

int gaaw_log_enabled(gaaw_log_level level)
{
  pthread_mutex_lock(&log_lock);
  init_from_environment();
  int on = (int)level <= log_level;
  pthread_mutex_unlock(&log_lock);
  return on;
}

void gaaw_log(gaaw_log_level level, const char *fmt, ...)
{
  pthread_mutex_lock(&log_lock);
  init_from_environment();
  if ((int)level <= log_level && level > GAAW_LOG_NONE) {
    FILE *out = log_stream ? log_stream : stderr;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    localtime_r(&now.tv_sec, &tm);
    char rank[24] = "";
    if (log_rank >= 0) snprintf(rank, sizeof rank, " rank %d", log_rank);
    fprintf(out, "[gaaw %02d:%02d:%02d.%03ld%s %s] ", tm.tm_hour, tm.tm_min, tm.tm_sec,
            now.tv_nsec / 1000000, rank, level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    fflush(out);
  }
  pthread_mutex_unlock(&log_lock);
}
