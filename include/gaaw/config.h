/* gaaw options: one config object with typed setters, `key=value` parsing, command
 * lines and GAAW_* environment variables, so C, Fortran and job scripts use the same
 * names. Every option is a tunable declared once (name, type, default, help);
 * gaaw-info prints them all, and `gaaw-info --markdown` writes them as the page
 * doc/options.md.
 *
 * Precedence, lowest first: the tunable's default, then its GAAW_<NAME> environment
 * variable (read when the config is created), then anything set explicitly through
 * this API. Keys are case-insensitive and '-' equals '_' ("comm-timeout" is
 * "comm_timeout"). None of these functions is collective. */
#ifndef GAAW_CONFIG_H
#define GAAW_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "gaaw/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gaaw_config_s *gaaw_config_t;

typedef enum {
  GAAW_TUNABLE_INT = 0,
  GAAW_TUNABLE_DOUBLE = 1,
  GAAW_TUNABLE_STRING = 2,
  GAAW_TUNABLE_BOOL = 3
} gaaw_tunable_type_t;

/* Creates a config holding every tunable's default, overridden by its GAAW_<NAME>
 * environment variable where one is set. A malformed environment value is an
 * error naming the variable. */
gaaw_status_t gaaw_config_create(gaaw_config_t *cfg);
/* Frees *cfg and sets it to NULL; NULL or *cfg == NULL is a no-op. */
gaaw_status_t gaaw_config_destroy(gaaw_config_t *cfg);

/* Sets a tunable from text, checked against its type ("yes/no/true/false/1/0/on/off"
 * for booleans). Unknown keys are GAAW_ERR_NOT_FOUND; bad values GAAW_ERR_INVALID_ARG.
 * The typed setters check the type too: set_int takes any number option (an integer
 * one, or a real one such as comm_timeout, which gets the value as a double);
 * set_double takes real options only and refuses inf and nan. Only the type is
 * checked here, not the range: gaaw_config_check (below) or gaaw_init does that. */
gaaw_status_t gaaw_config_set(gaaw_config_t cfg, const char *key, const char *value);
gaaw_status_t gaaw_config_set_int(gaaw_config_t cfg, const char *key, int64_t value);
gaaw_status_t gaaw_config_set_double(gaaw_config_t cfg, const char *key, double value);
gaaw_status_t gaaw_config_set_string(gaaw_config_t cfg, const char *key, const char *value);
gaaw_status_t gaaw_config_set_bool(gaaw_config_t cfg, const char *key, int value);

/* Typed getters; a key of another type is GAAW_ERR_INVALID_ARG. get_string copies at
 * most len bytes including the terminating NUL and fails (GAAW_ERR_INVALID_ARG) if
 * the value does not fit. */
gaaw_status_t gaaw_config_get_int(gaaw_config_t cfg, const char *key, int64_t *value);
gaaw_status_t gaaw_config_get_double(gaaw_config_t cfg, const char *key, double *value);
gaaw_status_t gaaw_config_get_string(gaaw_config_t cfg, const char *key, char *value, size_t len);
gaaw_status_t gaaw_config_get_bool(gaaw_config_t cfg, const char *key, int *value);

/* Parses "key=value" pairs separated by commas, semicolons or white space, e.g.
 * "tp=2, comm_timeout=30". Stops at the first bad pair and names it. */
gaaw_status_t gaaw_config_parse(gaaw_config_t cfg, const char *list);

/* Takes the options that name a tunable out of a command line: `--key=value` and
 * `--key value`. Recognised arguments are removed from argv and *argc is reduced;
 * the rest stay, in order, for the program. argv[0] is never touched. */
gaaw_status_t gaaw_config_parse_args(gaaw_config_t cfg, int *argc, char **argv);

/* Checks every option's value on its own, as gaaw_init will, without MPI, a context
 * or a device, so that a program can refuse bad options before it reads its input:
 * log is a known level; backend is auto or a backend built into this gaaw
 * (GAAW_ERR_UNSUPPORTED for host, opencl or cuda when not built,
 * GAAW_ERR_INVALID_ARG for any other name); device and opencl_device >= -1;
 * threads in 0..4096; tp, pp >= 1 and dp >= 0; rank_order names tp, dp and pp once
 * each; comm_timeout, zero_bucket_bytes and allreduce_ring_bytes >= 0; microbatches
 * and virtual_stages >= 1; recompute is none, selective or full. Stops at the
 * first bad option: GAAW_ERR_INVALID_ARG with a message naming it, its value and,
 * for a GAAW_* variable, the variable. What needs the world or the node is left to
 * gaaw_init: whether tp x pp x dp fits the world size, whether the device exists,
 * whether log_file can be opened, and the pipeline options (pp_schedule's name, a
 * schedule that takes pp, microbatches and virtual_stages, pp_layout's form). Not
 * collective. */
gaaw_status_t gaaw_config_check(gaaw_config_t cfg);

/* The tunables table, for listings such as gaaw-info: count, then each entry's name,
 * type, default (as text) and help. Pointers stay valid for the program's life. */
int gaaw_tunable_count(void);
gaaw_status_t gaaw_tunable_info(int index, const char **name, gaaw_tunable_type_t *type,
                                const char **default_value, const char **help);

/* The current value of key as text and where it came from: "default", "env" or
 * "set". Pointers stay valid until the config is changed or destroyed. */
gaaw_status_t gaaw_config_describe(gaaw_config_t cfg, const char *key, const char **value,
                                   const char **source);

#ifdef __cplusplus
}
#endif
#endif
