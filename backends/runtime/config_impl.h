/* Internal view of the config object, for the library's own readers. */
#ifndef GAAW_RUNTIME_CONFIG_IMPL_H
#define GAAW_RUNTIME_CONFIG_IMPL_H

#include "gaaw/config.h"

typedef enum { GAAW_SOURCE_DEFAULT = 0, GAAW_SOURCE_ENV = 1, GAAW_SOURCE_SET = 2 } gaaw_config_source;

typedef struct {
  int64_t i;
  double d;
  int b;
  char s[256];
  gaaw_config_source source;
} gaaw_config_value;

/* The values of option `recompute` (parallel/ acts on them). */
typedef enum { GAAW_RECOMPUTE_NONE = 0, GAAW_RECOMPUTE_SELECTIVE = 1, GAAW_RECOMPUTE_FULL = 2 } gaaw_recompute_mode;
/* "none", "selective", "full" (case ignored) as a gaaw_recompute_mode; -1 otherwise. */
int gaaw_recompute_parse(const char *text);
/* A byte count as options write it: digits with an optional K, M, G or T (powers of
 * 1024; "512M", "2G"); empty is 0. Returns 0 when text is none of these. */
int gaaw_bytes_parse(const char *text, size_t *bytes);

/* The axes of the rank grid, as option rank_order names them. */
typedef enum { GAAW_AXIS_TP = 0, GAAW_AXIS_CP = 1, GAAW_AXIS_DP = 2, GAAW_AXIS_PP = 3, GAAW_AXIS_COUNT = 4 } gaaw_grid_axis;
/* rank_order's text ("tp-cp-dp-pp": each axis once, fastest-varying first, separated
 * by '-' or ','; cp may be left out, and then varies right after tp) as the axes in
 * that order. Returns 0 when the text is not such a list. */
int gaaw_rank_order_parse(const char *text, int order[GAAW_AXIS_COUNT]);

/* A new config with src's values (defaults and environment when src is NULL). */
gaaw_status_t gaaw_config_copy(gaaw_config_t src, gaaw_config_t *dst);

#endif
