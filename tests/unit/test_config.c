/* Options: defaults, GAAW_* environment, typed setters/getters, key=value lists,
 * command lines, the errors for each kind of bad input, and gaaw_config_check's
 * verdict on each option's value. */
#include <mpi.h>
#include <stdlib.h>

#include "test_util.h"

static void expect_value(gaaw_config_t cfg, const char *key, const char *want_value, const char *want_source)
{
  const char *value = NULL, *source = NULL;
  expect_status(gaaw_config_describe(cfg, key, &value, &source), GAAW_SUCCESS);
  expect_true(value && strcmp(value, want_value) == 0, "%s = '%s', expected '%s'", key, value ? value : "(null)",
              want_value);
  expect_true(source && strcmp(source, want_source) == 0, "%s comes from '%s', expected '%s'", key,
              source ? source : "(null)", want_source);
}

/* key = value is refused by gaaw_config_check with status want and a message holding
 * text; the config is put back to its defaults afterwards. */
static void expect_refused(const char *key, const char *value, gaaw_status_t want, const char *text)
{
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  expect_status(gaaw_config_set(cfg, key, value), GAAW_SUCCESS);
  expect_status(gaaw_config_check(cfg), want);
  expect_true(strstr(gaaw_last_error(NULL), text) != NULL, "%s = '%s': the report does not hold \"%s\": %s", key,
              value, text, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);
}

static void expect_accepted(const char *key, const char *value)
{
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  expect_status(gaaw_config_set(cfg, key, value), GAAW_SUCCESS);
  gaaw_status_t st = gaaw_config_check(cfg);
  expect_true(st == GAAW_SUCCESS, "%s = '%s' is refused: %s", key, value, gaaw_last_error(NULL));
  gaaw_config_destroy(&cfg);
}

/* gaaw_config_check: every option's value on its own, without MPI or a device */
static void check_values(void)
{
  gaaw_config_t cfg;
  require_ok(NULL, gaaw_config_create(&cfg));
  expect_status(gaaw_config_check(cfg), GAAW_SUCCESS); /* the defaults */
  gaaw_config_destroy(&cfg);
  expect_status(gaaw_config_check(NULL), GAAW_ERR_INVALID_ARG);

  expect_refused("backend", "bogus", GAAW_ERR_INVALID_ARG, "option backend must be auto, host, opencl or cuda");
  expect_refused("backend", "bogus", GAAW_ERR_INVALID_ARG, "got 'bogus'");
  expect_accepted("backend", "auto");
  expect_accepted("backend", "host");
  for (const char *const *b = (const char *const[]){"opencl", "cuda", NULL}; *b; b++) {
    require_ok(NULL, gaaw_config_create(&cfg));
    require_ok(NULL, gaaw_config_set(cfg, "backend", *b));
    gaaw_status_t st = gaaw_config_check(cfg);
    expect_true(st == GAAW_SUCCESS || (st == GAAW_ERR_UNSUPPORTED && strstr(gaaw_last_error(NULL), "not built")),
                "backend %s: %s %s", *b, gaaw_status_name(st), gaaw_last_error(NULL));
    gaaw_config_destroy(&cfg);
  }
  expect_refused("log", "chatty", GAAW_ERR_INVALID_ARG, "option log must be none, error, warn, info, debug or trace");
  expect_accepted("log", "TRACE");
  expect_refused("threads", "-3", GAAW_ERR_INVALID_ARG, "option threads must be in 0..4096, got -3");
  expect_refused("threads", "4097", GAAW_ERR_INVALID_ARG, "option threads must be in 0..4096, got 4097");
  expect_accepted("threads", "4096");
  expect_refused("device", "-2", GAAW_ERR_INVALID_ARG, "option device must be in -1..2147483647, got -2");
  expect_refused("device", "4294967296", GAAW_ERR_INVALID_ARG, "option device must be in -1..2147483647");
  expect_refused("opencl_device", "-2", GAAW_ERR_INVALID_ARG, "option opencl_device must be in -1..");
  expect_refused("tp", "0", GAAW_ERR_INVALID_ARG, "option tp must be in 1..2147483647, got 0");
  expect_refused("pp", "-1", GAAW_ERR_INVALID_ARG, "option pp must be in 1..");
  expect_refused("cp", "0", GAAW_ERR_INVALID_ARG, "option cp must be in 1..2147483647, got 0");
  expect_refused("cp_kind", "ulysses", GAAW_ERR_INVALID_ARG, "option cp_kind must be ring or a2a, got 'ulysses'");
  expect_accepted("cp_kind", "a2a");
  expect_refused("dp", "-1", GAAW_ERR_INVALID_ARG, "option dp must be in 0..");
  expect_refused("comm_timeout", "-5", GAAW_ERR_INVALID_ARG, "option comm_timeout must be >= 0, got -5");
  expect_accepted("comm_timeout", "0");
  expect_refused("zero_bucket_bytes", "-1", GAAW_ERR_INVALID_ARG, "option zero_bucket_bytes must be >= 0, got -1");
  expect_refused("allreduce_ring_bytes", "-1", GAAW_ERR_INVALID_ARG, "option allreduce_ring_bytes must be >= 0");
  const char *bad_orders[] = {"tp-tp-pp", "tp-dp",   "",      "tp-dp-pp-tp", "tp-dp-xx", "tpdp-pp",
                              "tp-cp-dp", "cp-tp-dp-pp-cp", "cp", NULL};
  for (const char *const *o = bad_orders; *o; o++)
    expect_refused("rank_order", *o, GAAW_ERR_INVALID_ARG, "option rank_order must name tp, cp, dp and pp once each");
  expect_accepted("rank_order", "dp,tp,pp");
  expect_accepted("rank_order", "pp-tp--dp");
  expect_accepted("rank_order", "cp-dp-tp-pp");

  /* every number option has a range, so a value far below any sensible one is
   * refused (the whole table: a new tunable needs its range in config.c) */
  for (int t = 0; t < gaaw_tunable_count(); t++) {
    const char *name;
    gaaw_tunable_type_t type;
    gaaw_tunable_info(t, &name, &type, NULL, NULL);
    if (type != GAAW_TUNABLE_INT && type != GAAW_TUNABLE_DOUBLE) continue;
    require_ok(NULL, gaaw_config_create(&cfg));
    expect_status(gaaw_config_set_int(cfg, name, -1000000000000), GAAW_SUCCESS);
    expect_status(gaaw_config_check(cfg), GAAW_ERR_INVALID_ARG);
    expect_true(strstr(gaaw_last_error(NULL), name) != NULL, "option %s: the report does not name it: %s", name,
                gaaw_last_error(NULL));
    gaaw_config_destroy(&cfg);
  }

  /* a bad value from the environment names the variable */
  setenv("GAAW_THREADS", "-3", 1);
  require_ok(NULL, gaaw_config_create(&cfg));
  unsetenv("GAAW_THREADS");
  expect_status(gaaw_config_check(cfg), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "got -3 (from GAAW_THREADS)") != NULL, "%s", gaaw_last_error(NULL));
  /* the first bad option is reported; fixed, the config passes */
  expect_status(gaaw_config_set_int(cfg, "threads", 2), GAAW_SUCCESS);
  expect_status(gaaw_config_check(cfg), GAAW_SUCCESS);
  gaaw_config_destroy(&cfg);
}

/* peak_tflops: a number > 0, measure (any case) or empty; nothing else */
static void check_peak_tflops(void)
{
  for (const char *const *v = (const char *const[]){"0", "-1", "fast", "1e999", "nan", "2x", NULL}; *v; v++)
    expect_refused("peak_tflops", *v, GAAW_ERR_INVALID_ARG, "option peak_tflops must be a number > 0, measure");
  expect_accepted("peak_tflops", "");
  expect_accepted("peak_tflops", "measure");
  expect_accepted("peak_tflops", "MEASURE");
  expect_accepted("peak_tflops", "989.5");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_config_t cfg;

  /* defaults, and the environment over them */
  unsetenv("GAAW_TP");
  setenv("GAAW_COMM_TIMEOUT", "12.5", 1);
  setenv("GAAW_BACKEND", "host", 1);
  require_ok(NULL, gaaw_config_create(&cfg));
  expect_value(cfg, "tp", "1", "default");
  expect_value(cfg, "comm_timeout", "12.5", "env");
  expect_value(cfg, "backend", "host", "env");
  expect_value(cfg, "allocator_cache", "yes", "default");

  /* explicit settings over the environment; keys ignore case and '-' vs '_' */
  expect_status(gaaw_config_set(cfg, "Comm-Timeout", "30"), GAAW_SUCCESS);
  expect_value(cfg, "comm_timeout", "30", "set");
  expect_status(gaaw_config_set_int(cfg, "tp", 4), GAAW_SUCCESS);
  expect_status(gaaw_config_set_double(cfg, "comm_timeout", 7.25), GAAW_SUCCESS);
  expect_status(gaaw_config_set_string(cfg, "rank_order", "dp-tp-pp"), GAAW_SUCCESS);
  expect_status(gaaw_config_set_bool(cfg, "allocator_cache", 0), GAAW_SUCCESS);
  int64_t i = 0;
  double d = 0;
  int b = -1;
  char s[64];
  expect_status(gaaw_config_get_int(cfg, "tp", &i), GAAW_SUCCESS);
  expect_true(i == 4, "tp %lld", (long long)i);
  expect_status(gaaw_config_get_double(cfg, "comm_timeout", &d), GAAW_SUCCESS);
  expect_true(d == 7.25, "comm_timeout %g", d);
  expect_status(gaaw_config_get_string(cfg, "rank_order", s, sizeof s), GAAW_SUCCESS);
  expect_true(strcmp(s, "dp-tp-pp") == 0, "rank_order %s", s);
  expect_status(gaaw_config_get_bool(cfg, "allocator_cache", &b), GAAW_SUCCESS);
  expect_true(b == 0, "allocator_cache %d", b);
  /* set_int takes any number option: a real one gets the integer as a double */
  expect_status(gaaw_config_set_int(cfg, "comm_timeout", 3), GAAW_SUCCESS);
  expect_status(gaaw_config_get_double(cfg, "comm_timeout", &d), GAAW_SUCCESS);
  expect_true(d == 3.0, "comm_timeout after set_int 3 is %g", d);
  expect_value(cfg, "comm_timeout", "3", "set");
  expect_status(gaaw_config_set_int(cfg, "comm_timeout", -(INT64_C(1) << 53)), GAAW_SUCCESS);
  expect_status(gaaw_config_get_double(cfg, "comm_timeout", &d), GAAW_SUCCESS);
  expect_true(d == -9007199254740992.0, "comm_timeout after set_int -2^53 is %.17g", d);
  expect_status(gaaw_config_set_double(cfg, "comm_timeout", 7.25), GAAW_SUCCESS);
  for (const char *const *yes = (const char *const[]){"yes", "TRUE", "on", "1", NULL}; *yes; yes++) {
    expect_status(gaaw_config_set(cfg, "allocator_cache", *yes), GAAW_SUCCESS);
    expect_status(gaaw_config_get_bool(cfg, "allocator_cache", &b), GAAW_SUCCESS);
    expect_true(b == 1, "'%s' is true", *yes);
  }
  expect_status(gaaw_config_set(cfg, "tp", "0x10"), GAAW_SUCCESS);
  expect_status(gaaw_config_get_int(cfg, "tp", &i), GAAW_SUCCESS);
  expect_true(i == 16, "tp from hex %lld", (long long)i);

  /* key=value lists */
  expect_status(gaaw_config_parse(cfg, " tp=2, pp=1;dp=0\tlog=info  "), GAAW_SUCCESS);
  expect_value(cfg, "tp", "2", "set");
  expect_value(cfg, "log", "info", "set");
  expect_status(gaaw_config_parse(cfg, ""), GAAW_SUCCESS);
  expect_status(gaaw_config_parse(cfg, "tp=3,nonsense"), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "'nonsense' is not of the form key=value") != NULL, "%s",
              gaaw_last_error(NULL));
  expect_status(gaaw_config_parse(cfg, "=3"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_parse(cfg, "tpp=3"), GAAW_ERR_NOT_FOUND);
  expect_true(strstr(gaaw_last_error(NULL), "no option named 'tpp'") != NULL, "%s", gaaw_last_error(NULL));

  /* command lines: known options are taken out, the rest stay in order */
  char *args[] = {"prog", "--tp=8", "--steps", "10", "--comm-timeout", "5", "input.txt", "--log", "debug", NULL};
  int n = 9;
  expect_status(gaaw_config_parse_args(cfg, &n, args), GAAW_SUCCESS);
  expect_true(n == 4, "argc after parsing is %d, expected 4", n);
  expect_true(n == 4 && strcmp(args[0], "prog") == 0 && strcmp(args[1], "--steps") == 0 &&
                  strcmp(args[2], "10") == 0 && strcmp(args[3], "input.txt") == 0 && args[4] == NULL,
              "remaining arguments are wrong");
  expect_value(cfg, "tp", "8", "set");
  expect_value(cfg, "comm_timeout", "5", "set");
  expect_value(cfg, "log", "debug", "set");
  char *missing[] = {"prog", "--tp", NULL};
  n = 2;
  expect_status(gaaw_config_parse_args(cfg, &n, missing), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "--tp needs a value") != NULL, "%s", gaaw_last_error(NULL));
  char *bad[] = {"prog", "--tp=two", NULL};
  n = 2;
  expect_status(gaaw_config_parse_args(cfg, &n, bad), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "tp wants an integer, got 'two'") != NULL, "%s", gaaw_last_error(NULL));
  n = 0;
  expect_status(gaaw_config_parse_args(cfg, &n, NULL), GAAW_SUCCESS);

  /* bad values, keys and types */
  expect_status(gaaw_config_set(cfg, "tp", "2.5"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set(cfg, "tp", ""), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set(cfg, "tp", "99999999999999999999999"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set(cfg, "comm_timeout", "soon"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set(cfg, "comm_timeout", "inf"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set(cfg, "allocator_cache", "maybe"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set(cfg, "no_such_option", "1"), GAAW_ERR_NOT_FOUND);
  expect_status(gaaw_config_set(cfg, NULL, "1"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set(cfg, "tp", NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set(NULL, "tp", "1"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_int(cfg, "allocator_cache", 1), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "allocator_cache is of type boolean, not integer") != NULL, "%s",
              gaaw_last_error(NULL));
  expect_status(gaaw_config_set_int(cfg, "log", 1), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_int(cfg, "no_such_option", 1), GAAW_ERR_NOT_FOUND);
  expect_status(gaaw_config_set_double(cfg, "tp", 3), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_double(cfg, "comm_timeout", 1.0 / 0.0), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_string(cfg, "tp", "3"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_bool(cfg, "tp", 1), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_int(NULL, "tp", 1), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_double(NULL, "comm_timeout", 1), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_string(NULL, "log", "x"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_set_bool(NULL, "allocator_cache", 1), GAAW_ERR_INVALID_ARG);
  char longval[400];
  memset(longval, 'a', sizeof longval - 1);
  longval[sizeof longval - 1] = '\0';
  expect_status(gaaw_config_set_string(cfg, "log_file", longval), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_int(cfg, "tp", NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_int(NULL, "tp", &i), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_int(cfg, "log", &i), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_double(cfg, "tp", &d), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_double(cfg, "comm_timeout", NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_bool(cfg, "tp", &b), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_bool(cfg, "allocator_cache", NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_string(cfg, "backend", s, 2), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_string(cfg, "backend", NULL, 10), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_get_string(cfg, "tp", s, sizeof s), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_parse(NULL, "tp=1"), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_parse(cfg, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_parse_args(NULL, &n, args), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_parse_args(cfg, NULL, args), GAAW_ERR_INVALID_ARG);
  n = 2;
  expect_status(gaaw_config_parse_args(cfg, &n, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_describe(NULL, "tp", NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_describe(cfg, "nope", NULL, NULL), GAAW_ERR_NOT_FOUND);
  expect_status(gaaw_config_create(NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_config_destroy(NULL), GAAW_SUCCESS);
  gaaw_config_destroy(&cfg);

  /* a malformed environment variable is an error naming it */
  setenv("GAAW_TP", "lots", 1);
  expect_status(gaaw_config_create(&cfg), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "GAAW_TP") != NULL, "%s", gaaw_last_error(NULL));
  expect_true(cfg == NULL, "no config after a failure");
  unsetenv("GAAW_TP");

  check_values();
  check_peak_tflops();

  /* the tunables table: every entry complete, its default parses, names unique */
  int count = gaaw_tunable_count();
  expect_true(count >= 10, "only %d tunables", count);
  require_ok(NULL, gaaw_config_create(&cfg));
  for (int t = 0; t < count; t++) {
    const char *name, *def, *help;
    gaaw_tunable_type_t type;
    expect_status(gaaw_tunable_info(t, &name, &type, &def, &help), GAAW_SUCCESS);
    expect_true(name && *name && def && help && strlen(help) > 10, "tunable %d is incomplete", t);
    expect_status(gaaw_config_set(cfg, name, def), GAAW_SUCCESS);
    for (int u = 0; u < t; u++) {
      const char *other;
      gaaw_tunable_info(u, &other, NULL, NULL, NULL);
      expect_true(strcmp(name, other) != 0, "tunable %s declared twice", name);
    }
  }
  expect_status(gaaw_tunable_info(-1, NULL, NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_tunable_info(count, NULL, NULL, NULL, NULL), GAAW_ERR_INVALID_ARG);
  gaaw_config_destroy(&cfg);

  MPI_Finalize();
  return test_finish("test_config");
}
