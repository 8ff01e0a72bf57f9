/* The one logger: stderr (or GAAW_LOG_FILE), filtered by GAAW_LOG. Never stdout. */
#ifndef GAAW_RUNTIME_LOG_H
#define GAAW_RUNTIME_LOG_H

#include "backends/runtime/error.h"

typedef enum {
  GAAW_LOG_NONE = 0,
  GAAW_LOG_ERROR = 1,
  GAAW_LOG_WARN = 2,
  GAAW_LOG_INFO = 3,
  GAAW_LOG_DEBUG = 4,
  GAAW_LOG_TRACE = 5
} gaaw_log_level;

/* Parses "none|error|warn|info|debug|trace"; -1 for anything else. */
int gaaw_log_level_parse(const char *text);
/* Sets the level, the destination file ("" = stderr) and the rank shown in each
 * line. Process-wide: called by gaaw_init. */
gaaw_status_t gaaw_log_configure(int level, const char *file, int rank);
/* 1 when messages of this level are written. */
int gaaw_log_enabled(gaaw_log_level level);
void gaaw_log(gaaw_log_level level, const char *fmt, ...) GAAW_PRINTF(2, 3);

#endif
