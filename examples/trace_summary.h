/* gaaw-trace summary (trace_summary.c). */
#ifndef GAAW_EXAMPLES_TRACE_SUMMARY_H
#define GAAW_EXAMPLES_TRACE_SUMMARY_H

#include <jansson.h>

/* Prints the table of lane's spans in files (one per rank), read by load; 0 on
 * success, 1 when a file cannot be read or lacks the lane. */
int gaaw_trace_summary(const char *lane, char **files, int nfiles, json_t *(*load)(const char *path));

#endif
