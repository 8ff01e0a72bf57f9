/* The config object: one typed value per tunable, with where it came from. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/device.h"
#include "backends/runtime/config_impl.h"
#include "backends/runtime/error.h"
#include "backends/runtime/log.h"
#include "backends/runtime/tunables.h"

typedef struct {
  const char *name;
  gaaw_tunable_type_t type;
  const char *default_value;
  const char *help;
} tunable;

#define GAAW_TUNABLE_ENTRY(name, type, def, help) {#name, GAAW_TUNABLE_##type, def, help},
static const tunable tunables[] = {GAAW_TUNABLE_LIST(GAAW_TUNABLE_ENTRY)};
#undef GAAW_TUNABLE_ENTRY
enum { TUNABLE_COUNT = sizeof tunables / sizeof tunables[0] };

static const char *const source_names[] = {"default", "env", "set"};

struct gaaw_config_s {
  gaaw_config_value values[TUNABLE_COUNT];
  char describe_text[64];
};

int gaaw_tunable_count(void)
{
  return TUNABLE_COUNT;
}

gaaw_status_t gaaw_tunable_info(int index, const char **name, gaaw_tunable_type_t *type,
                                const char **default_value, const char **help)
{
  GAAW_ARG_CHECK(NULL, index >= 0 && index < TUNABLE_COUNT, "tunable index %d is not in 0..%d", index,
                 TUNABLE_COUNT - 1);
  if (name) *name = tunables[index].name;
  if (type) *type = tunables[index].type;
  if (default_value) *default_value = tunables[index].default_value;
  if (help) *help = tunables[index].help;
  return GAAW_SUCCESS;
}

/* Keys compare case-insensitively with '-' equal to '_'. */
static int key_equals(const char *key, const char *name)
{
  for (; *key && *name; key++, name++) {
    char k = *key == '-' ? '_' : (char)tolower((unsigned char)*key);
    if (k != *name) return 0;
  }
  return *key == '\0' && *name == '\0';
}

static gaaw_status_t find(const char *key, int *index)
{
  GAAW_ARG_NOT_NULL(NULL, key);
  for (int i = 0; i < TUNABLE_COUNT; i++)
    if (key_equals(key, tunables[i].name)) {
      *index = i;
      return GAAW_SUCCESS;
    }
  GAAW_FAIL(NULL, GAAW_ERR_NOT_FOUND, "no option named '%s' (gaaw-info lists them all)", key);
}

static gaaw_status_t parse_bool(const char *text, int *value)
{
  static const char *const yes[] = {"1", "yes", "true", "on"}, *const no[] = {"0", "no", "false", "off"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(text, yes[i]) == 0) return *value = 1, GAAW_SUCCESS;
    if (strcasecmp(text, no[i]) == 0) return *value = 0, GAAW_SUCCESS;
  }
  return GAAW_ERR_INVALID_ARG;
}

/* The environment variable of tunable i: GAAW_ and its name in capitals. */
static void env_name(int i, char *var, size_t len)
{
  size_t n = (size_t)snprintf(var, len, "GAAW_");
  for (const char *p = tunables[i].name; *p && n + 1 < len; p++) var[n++] = (char)toupper((unsigned char)*p);
  var[n < len ? n : len - 1] = '\0';
}

/* Parses text as tunable i's type into out; on failure names the option and source. */
static gaaw_status_t parse_value(int i, const char *text, const char *origin, gaaw_config_value *out)
{
  GAAW_ARG_CHECK(NULL, text != NULL, "value of option %s must not be NULL", tunables[i].name);
  char *end = NULL;
  gaaw_config_value v = *out;
  switch (tunables[i].type) {
  case GAAW_TUNABLE_INT: {
    errno = 0;
    long long x = strtoll(text, &end, 0);
    GAAW_ARG_CHECK(NULL, *text && *end == '\0' && errno == 0, "%s: option %s wants an integer, got '%s'",
                   origin, tunables[i].name, text);
    v.i = x;
    break;
  }
  case GAAW_TUNABLE_DOUBLE: {
    errno = 0;
    double x = strtod(text, &end);
    GAAW_ARG_CHECK(NULL, *text && *end == '\0' && errno == 0 && isfinite(x),
                   "%s: option %s wants a number, got '%s'", origin, tunables[i].name, text);
    v.d = x;
    break;
  }
  case GAAW_TUNABLE_BOOL:
    GAAW_ARG_CHECK(NULL, parse_bool(text, &v.b) == GAAW_SUCCESS,
                   "%s: option %s wants yes/no (true/false, on/off, 1/0), got '%s'", origin,
                   tunables[i].name, text);
    break;
  case GAAW_TUNABLE_STRING: {
    GAAW_ARG_CHECK(NULL, strlen(text) < sizeof v.s, "%s: value of option %s is longer than %zu bytes",
                   origin, tunables[i].name, sizeof v.s - 1);
    strcpy(v.s, text);
    break;
  }
  }
  *out = v;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_create(gaaw_config_t *cfg)
{
  GAAW_ARG_NOT_NULL(NULL, cfg);
  *cfg = NULL;
  gaaw_config_t c = calloc(1, sizeof *c);
  if (!c) GAAW_FAIL(NULL, GAAW_ERR_NO_MEMORY, "cannot allocate a config (%zu bytes)", sizeof *c);
  for (int i = 0; i < TUNABLE_COUNT; i++) {
    gaaw_status_t st = parse_value(i, tunables[i].default_value, "default", &c->values[i]);
    if (st != GAAW_SUCCESS) {
      free(c);
      GAAW_FAIL(NULL, GAAW_ERR_INTERNAL, "default of option %s does not parse", tunables[i].name);
    }
    char var[80];
    env_name(i, var, sizeof var);
    const char *env = getenv(var);
    if (env) {
      st = parse_value(i, env, var, &c->values[i]);
      if (st != GAAW_SUCCESS) {
        free(c);
        return gaaw_error_trace(NULL, st, __FILE__, __LINE__, __func__);
      }
      c->values[i].source = GAAW_SOURCE_ENV;
    }
  }
  *cfg = c;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_destroy(gaaw_config_t *cfg)
{
  if (cfg && *cfg) {
    free(*cfg);
    *cfg = NULL;
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_copy(gaaw_config_t src, gaaw_config_t *dst)
{
  GAAW_ARG_NOT_NULL(NULL, dst);
  GAAW_CHECK_CTX(NULL, gaaw_config_create(dst));
  if (src) memcpy((*dst)->values, src->values, sizeof src->values);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_set(gaaw_config_t cfg, const char *key, const char *value)
{
  GAAW_ARG_NOT_NULL(NULL, cfg);
  int i;
  GAAW_CHECK_CTX(NULL, find(key, &i));
  GAAW_CHECK_CTX(NULL, parse_value(i, value, "config", &cfg->values[i]));
  cfg->values[i].source = GAAW_SOURCE_SET;
  return GAAW_SUCCESS;
}

/* Finds key and checks that it has the type the typed setter or getter uses. */
static gaaw_status_t find_typed(gaaw_config_t cfg, const char *key, gaaw_tunable_type_t type, int *index)
{
  static const char *const type_names[] = {"integer", "number", "string", "boolean"};
  GAAW_ARG_NOT_NULL(NULL, cfg);
  GAAW_CHECK_CTX(NULL, find(key, index));
  GAAW_ARG_CHECK(NULL, tunables[*index].type == type, "option %s is of type %s, not %s", tunables[*index].name,
                 type_names[tunables[*index].type], type_names[type]);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_set_int(gaaw_config_t cfg, const char *key, int64_t value)
{
  int i;
  GAAW_ARG_NOT_NULL(NULL, cfg);
  GAAW_CHECK_CTX(NULL, find(key, &i));
  /* any number option: a real one takes the integer as a double */
  if (tunables[i].type == GAAW_TUNABLE_DOUBLE) {
    cfg->values[i].d = (double)value;
  } else {
    GAAW_CHECK_CTX(NULL, find_typed(cfg, key, GAAW_TUNABLE_INT, &i));
    cfg->values[i].i = value;
  }
  cfg->values[i].source = GAAW_SOURCE_SET;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_set_double(gaaw_config_t cfg, const char *key, double value)
{
  int i;
  GAAW_CHECK_CTX(NULL, find_typed(cfg, key, GAAW_TUNABLE_DOUBLE, &i));
  GAAW_ARG_CHECK(NULL, isfinite(value), "option %s must be finite, got %g", tunables[i].name, value);
  cfg->values[i].d = value;
  cfg->values[i].source = GAAW_SOURCE_SET;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_set_string(gaaw_config_t cfg, const char *key, const char *value)
{
  int i;
  GAAW_CHECK_CTX(NULL, find_typed(cfg, key, GAAW_TUNABLE_STRING, &i));
  GAAW_CHECK_CTX(NULL, parse_value(i, value, "config", &cfg->values[i]));
  cfg->values[i].source = GAAW_SOURCE_SET;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_set_bool(gaaw_config_t cfg, const char *key, int value)
{
  int i;
  GAAW_CHECK_CTX(NULL, find_typed(cfg, key, GAAW_TUNABLE_BOOL, &i));
  cfg->values[i].b = value != 0;
  cfg->values[i].source = GAAW_SOURCE_SET;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_get_int(gaaw_config_t cfg, const char *key, int64_t *value)
{
  int i;
  GAAW_ARG_NOT_NULL(NULL, value);
  GAAW_CHECK_CTX(NULL, find_typed(cfg, key, GAAW_TUNABLE_INT, &i));
  *value = cfg->values[i].i;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_get_double(gaaw_config_t cfg, const char *key, double *value)
{
  int i;
  GAAW_ARG_NOT_NULL(NULL, value);
  GAAW_CHECK_CTX(NULL, find_typed(cfg, key, GAAW_TUNABLE_DOUBLE, &i));
  *value = cfg->values[i].d;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_get_string(gaaw_config_t cfg, const char *key, char *value, size_t len)
{
  int i;
  GAAW_ARG_NOT_NULL(NULL, value);
  GAAW_CHECK_CTX(NULL, find_typed(cfg, key, GAAW_TUNABLE_STRING, &i));
  size_t n = strlen(cfg->values[i].s);
  GAAW_ARG_CHECK(NULL, n < len, "value of option %s needs %zu bytes, the buffer has %zu", tunables[i].name,
                 n + 1, len);
  memcpy(value, cfg->values[i].s, n + 1);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_get_bool(gaaw_config_t cfg, const char *key, int *value)
{
  int i;
  GAAW_ARG_NOT_NULL(NULL, value);
  GAAW_CHECK_CTX(NULL, find_typed(cfg, key, GAAW_TUNABLE_BOOL, &i));
  *value = cfg->values[i].b;
  return GAAW_SUCCESS;
}

/* Sets "key=value" given as a pair of (pointer, length) pieces. */
static gaaw_status_t set_pair(gaaw_config_t cfg, const char *pair, size_t len)
{
  char buf[sizeof(((gaaw_config_value *)0)->s) + 128];
  GAAW_ARG_CHECK(NULL, len < sizeof buf, "option '%.40s...' is too long", pair);
  memcpy(buf, pair, len);
  buf[len] = '\0';
  char *eq = strchr(buf, '=');
  GAAW_ARG_CHECK(NULL, eq != NULL && eq != buf, "'%s' is not of the form key=value", buf);
  *eq = '\0';
  GAAW_CHECK_CTX(NULL, gaaw_config_set(cfg, buf, eq + 1));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_parse(gaaw_config_t cfg, const char *list)
{
  GAAW_ARG_NOT_NULL(NULL, cfg);
  GAAW_ARG_NOT_NULL(NULL, list);
  const char *p = list;
  for (;;) {
    while (*p && (isspace((unsigned char)*p) || *p == ',' || *p == ';')) p++;
    if (!*p) break;
    const char *start = p;
    while (*p && !isspace((unsigned char)*p) && *p != ',' && *p != ';') p++;
    GAAW_CHECK_CTX(NULL, set_pair(cfg, start, (size_t)(p - start)));
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_parse_args(gaaw_config_t cfg, int *argc, char **argv)
{
  GAAW_ARG_NOT_NULL(NULL, cfg);
  GAAW_ARG_NOT_NULL(NULL, argc);
  GAAW_ARG_CHECK(NULL, *argc >= 0, "argc is %d", *argc);
  GAAW_ARG_CHECK(NULL, *argc == 0 || argv != NULL, "argv must not be NULL when argc is %d", *argc);
  int kept = *argc > 0 ? 1 : 0;
  for (int a = 1; a < *argc; a++) {
    const char *arg = argv[a];
    GAAW_ARG_CHECK(NULL, arg != NULL, "argv[%d] is NULL", a);
    int index;
    char key[80];
    const char *eq = strchr(arg, '=');
    size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
    if (arg[0] != '-' || arg[1] != '-' || klen < 3 || klen - 2 >= sizeof key) {
      argv[kept++] = argv[a];
      continue;
    }
    memcpy(key, arg + 2, klen - 2);
    key[klen - 2] = '\0';
    int known = 0;
    for (index = 0; index < TUNABLE_COUNT && !known; index++) known = key_equals(key, tunables[index].name);
    if (!known) {
      argv[kept++] = argv[a];
      continue;
    }
    if (eq) {
      GAAW_CHECK_CTX(NULL, gaaw_config_set(cfg, key, eq + 1));
    } else {
      GAAW_ARG_CHECK(NULL, a + 1 < *argc && argv[a + 1] != NULL, "option --%s needs a value", key);
      GAAW_CHECK_CTX(NULL, gaaw_config_set(cfg, key, argv[++a]));
    }
  }
  for (int a = kept; a < *argc; a++) argv[a] = NULL;
  *argc = kept;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_describe(gaaw_config_t cfg, const char *key, const char **value,
                                   const char **source)
{
  int i;
  GAAW_ARG_NOT_NULL(NULL, cfg);
  GAAW_CHECK_CTX(NULL, find(key, &i));
  const gaaw_config_value *v = &cfg->values[i];
  switch (tunables[i].type) {
  case GAAW_TUNABLE_INT: snprintf(cfg->describe_text, sizeof cfg->describe_text, "%lld", (long long)v->i); break;
  case GAAW_TUNABLE_DOUBLE: snprintf(cfg->describe_text, sizeof cfg->describe_text, "%g", v->d); break;
  case GAAW_TUNABLE_BOOL: snprintf(cfg->describe_text, sizeof cfg->describe_text, "%s", v->b ? "yes" : "no"); break;
  case GAAW_TUNABLE_STRING: break;
  }
  if (value) *value = tunables[i].type == GAAW_TUNABLE_STRING ? v->s : cfg->describe_text;
  if (source) *source = source_names[v->source];
  return GAAW_SUCCESS;
}

int gaaw_recompute_parse(const char *text)
{
  static const char *const names[] = {"none", "selective", "full"};
  for (int i = 0; i < 3; i++)
    if (text && strcasecmp(text, names[i]) == 0) return i;
  return -1;
}

/* ---------------------------------------------------------------- gaaw_config_check */

/* The accepted range of each number option. A number option missing here is not
 * checked; test_config fails for it, so add its range with the tunable. */
typedef struct {
  const char *name;
  double min, max;
} number_range;
static const number_range ranges[] = {
  {"device", -1, INT_MAX},
  {"threads", 0, 4096},
  {"compute_slowdown", 1, HUGE_VAL},
  {"opencl_device", -1, INT_MAX},
  {"tp", 1, INT_MAX},
  {"cp", 1, INT_MAX},
  {"pp", 1, INT_MAX},
  {"ep", 1, INT_MAX},
  {"dp", 0, INT_MAX},
  {"zero_bucket_bytes", 0, HUGE_VAL},
  {"comm_timeout", 0, HUGE_VAL},
  {"allreduce_ring_bytes", 0, HUGE_VAL},
  {"microbatches", 1, INT_MAX},
  {"virtual_stages", 1, INT_MAX},
  {"checkpoint_keep", 0, INT_MAX},
};

int gaaw_rank_order_parse(const char *text, int order[GAAW_AXIS_COUNT])
{
  static const char *const axes[GAAW_AXIS_COUNT] = {"tp", "cp", "dp", "pp"};
  int seen = 0, n = 0;
  for (const char *p = text; *p;) {
    size_t len = strcspn(p, "-,");
    if (len > 0) { /* empty pieces, as in "tp--dp-pp", are skipped */
      int a = 0;
      while (a < GAAW_AXIS_COUNT && !(len == strlen(axes[a]) && strncmp(p, axes[a], len) == 0)) a++;
      if (a == GAAW_AXIS_COUNT || seen & (1 << a)) return 0;
      seen |= 1 << a;
      order[n++] = a;
    }
    p += len + (p[len] != '\0');
  }
  if (seen == (1 << GAAW_AXIS_COUNT) - 1) return 1;
  if (seen != (1 << GAAW_AXIS_COUNT) - 1 - (1 << GAAW_AXIS_CP)) return 0;
  /* cp left out: right after tp */
  int at = 0;
  while (order[at] != GAAW_AXIS_TP) at++;
  for (int k = n; k > at + 1; k--) order[k] = order[k - 1];
  order[at + 1] = GAAW_AXIS_CP;
  return 1;
}

/* peak_tflops: empty, "measure", or a finite number > 0. */
static int peak_tflops_valid(const char *text)
{
  char *end;
  if (!*text || strcasecmp(text, "measure") == 0) return 1;
  errno = 0;
  double x = strtod(text, &end);
  return *end == '\0' && errno == 0 && isfinite(x) && x > 0;
}

int gaaw_bytes_parse(const char *text, size_t *bytes)
{
  static const char units[] = "KMGT";
  char *end;
  *bytes = 0;
  if (!*text) return 1;
  if (*text < '0' || *text > '9') return 0;
  errno = 0;
  unsigned long long n = strtoull(text, &end, 10);
  const char *unit = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  if (errno || (*end && (!unit || end[1] != '\0'))) return 0;
  for (int k = unit ? (int)(unit - units) + 1 : 0; k > 0; k--) {
    if (n > SIZE_MAX / 1024) return 0;
    n *= 1024;
  }
  if (n > SIZE_MAX) return 0;
  *bytes = (size_t)n;
  return 1;
}

/* The backends built into this gaaw, as "cuda, opencl, host". */
static void built_backends(char *names, size_t len)
{
  int n = 0;
  const gaaw_device_ops *const *all = gaaw_device_backends(&n);
  names[0] = '\0';
  for (int k = 0; k < n; k++) {
    strncat(names, k ? ", " : "", len - strlen(names) - 1);
    strncat(names, all[k]->name, len - strlen(names) - 1);
  }
}

/* Checks tunable i's value; origin (" (from GAAW_X)" or "") ends each message. */
static gaaw_status_t check_value(int i, const gaaw_config_value *v, const char *origin)
{
  const char *name = tunables[i].name;
  if (tunables[i].type == GAAW_TUNABLE_INT || tunables[i].type == GAAW_TUNABLE_DOUBLE) {
    int is_int = tunables[i].type == GAAW_TUNABLE_INT;
    double x = is_int ? (double)v->i : v->d;
    char got[40];
    if (is_int) snprintf(got, sizeof got, "%lld", (long long)v->i);
    else snprintf(got, sizeof got, "%g", v->d);
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
      if (strcmp(ranges[r].name, name) != 0) continue;
      if (ranges[r].max == HUGE_VAL)
        GAAW_ARG_CHECK(NULL, x >= ranges[r].min, "option %s must be >= %.15g, got %s%s", name, ranges[r].min, got,
                       origin);
      else
        GAAW_ARG_CHECK(NULL, x >= ranges[r].min && x <= ranges[r].max, "option %s must be in %.15g..%.15g, got %s%s",
                       name, ranges[r].min, ranges[r].max, got, origin);
    }
    return GAAW_SUCCESS;
  }
  if (strcmp(name, "log") == 0)
    GAAW_ARG_CHECK(NULL, gaaw_log_level_parse(v->s) >= 0,
                   "option log must be none, error, warn, info, debug or trace, got '%s'%s", v->s, origin);
  int order[GAAW_AXIS_COUNT];
  if (strcmp(name, "rank_order") == 0)
    GAAW_ARG_CHECK(NULL, gaaw_rank_order_parse(v->s, order),
                   "option rank_order must name tp, cp, dp and pp once each (cp may be left out), fastest first "
                   "(e.g. tp-cp-dp-pp), got '%s'%s", v->s, origin);
  if (strcmp(name, "recompute") == 0)
    GAAW_ARG_CHECK(NULL, gaaw_recompute_parse(v->s) >= 0, "option recompute must be none, selective or full, got '%s'%s",
                   v->s, origin);
  if (strcmp(name, "cp_kind") == 0)
    GAAW_ARG_CHECK(NULL, strcmp(v->s, "ring") == 0 || strcmp(v->s, "a2a") == 0,
                   "option cp_kind must be ring or a2a, got '%s'%s", v->s, origin);
  if (strcmp(name, "attention") == 0)
    GAAW_ARG_CHECK(NULL, strcmp(v->s, "auto") == 0 || strcmp(v->s, "blocked") == 0 || strcmp(v->s, "matrix") == 0,
                   "option attention must be auto, blocked or matrix, got '%s'%s", v->s, origin);
  if (strcmp(name, "peak_tflops") == 0)
    GAAW_ARG_CHECK(NULL, peak_tflops_valid(v->s),
                   "option peak_tflops must be a number > 0, measure, or empty (unknown), got '%s'%s", v->s, origin);
  if (strcmp(name, "offload_optimizer") == 0)
    GAAW_ARG_CHECK(NULL, strcmp(v->s, "none") == 0 || strcmp(v->s, "host") == 0 || strcmp(v->s, "nvme") == 0,
                   "option offload_optimizer must be none, host or nvme, got '%s'%s", v->s, origin);
  if (strcmp(name, "offload_params") == 0)
    GAAW_ARG_CHECK(NULL, strcmp(v->s, "none") == 0 || strcmp(v->s, "host") == 0 || strcmp(v->s, "nvme") == 0,
                   "option offload_params must be none, host or nvme, got '%s'%s", v->s, origin);
  if (strcmp(name, "cpu_simd") == 0)
    GAAW_ARG_CHECK(NULL, strcmp(v->s, "auto") == 0 || strcmp(v->s, "avx512") == 0 || strcmp(v->s, "avx2") == 0 ||
                           strcmp(v->s, "scalar") == 0,
                   "option cpu_simd must be auto, avx512, avx2 or scalar, got '%s'%s", v->s, origin);
  size_t bytes;
  if (strcmp(name, "device_memory_limit") == 0)
    GAAW_ARG_CHECK(NULL, gaaw_bytes_parse(v->s, &bytes),
                   "option device_memory_limit must be a byte count such as 1073741824, 512M or 2G (empty: none), "
                   "got '%s'%s", v->s, origin);
  if (strcmp(name, "export_shard_size") == 0)
    GAAW_ARG_CHECK(NULL, gaaw_bytes_parse(v->s, &bytes) && bytes > 0,
                   "option export_shard_size must be a byte count > 0 such as 5000000000, 512M or 2G, got '%s'%s",
                   v->s, origin);
  if (strcmp(name, "gpt2_names") == 0)
    GAAW_ARG_CHECK(NULL, strcmp(v->s, "nanogpt") == 0 || strcmp(v->s, "hf") == 0,
                   "option gpt2_names must be nanogpt or hf, got '%s'%s", v->s, origin);
  if (strcmp(name, "export_dtype") == 0)
    GAAW_ARG_CHECK(NULL, strcmp(v->s, "f32") == 0 || strcmp(v->s, "bf16") == 0 || strcmp(v->s, "f16") == 0,
                   "option export_dtype must be f32, bf16 or f16, got '%s'%s", v->s, origin);
  if (strcmp(name, "backend") == 0 && strcmp(v->s, "auto") != 0 && !gaaw_device_backend(v->s)) {
    char built[128];
    built_backends(built, sizeof built);
    if (strcmp(v->s, "host") == 0 || strcmp(v->s, "opencl") == 0 || strcmp(v->s, "cuda") == 0)
      GAAW_FAIL(NULL, GAAW_ERR_UNSUPPORTED, "option backend: '%s' is not built into this gaaw (built: %s)%s", v->s,
                built, origin);
    GAAW_FAIL(NULL, GAAW_ERR_INVALID_ARG, "option backend must be auto, host, opencl or cuda (built: %s), got '%s'%s",
              built, v->s, origin);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_config_check(gaaw_config_t cfg)
{
  GAAW_ARG_NOT_NULL(NULL, cfg);
  for (int i = 0; i < TUNABLE_COUNT; i++) {
    char origin[96] = "";
    if (cfg->values[i].source == GAAW_SOURCE_ENV) {
      char var[80];
      env_name(i, var, sizeof var);
      snprintf(origin, sizeof origin, " (from %s)", var);
    }
    GAAW_CHECK_CTX(NULL, check_value(i, &cfg->values[i], origin));
  }
  return GAAW_SUCCESS;
}
