/* Helpers for gaaw's tests: checks that say what differed, where and by how much.
 * A test counts failures and exits 1 if any; 77 means skipped. */
#ifndef GAAW_TEST_UTIL_H
#define GAAW_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"

static int test_failures = 0;
static int test_checks = 0;

#define TEST_SKIP 77

/* A condition that must hold. */
#define expect_true(cond, ...)                                                \
  do {                                                                        \
    test_checks++;                                                            \
    if (!(cond)) {                                                            \
      test_failures++;                                                        \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
      fprintf(stderr, __VA_ARGS__);                                           \
      fputc('\n', stderr);                                                    \
    }                                                                         \
  } while (0)

/* A call that must return the given status (GAAW_SUCCESS for "must work"); a
 * failure prints the error report of ctx (NULL: the thread's, before a context). */
#define expect_status_ctx(ctx, call, want)                                                     \
  do {                                                                                         \
    gaaw_status_t test_st_ = (call);                                                           \
    test_checks++;                                                                             \
    if (test_st_ != (want)) {                                                                  \
      test_failures++;                                                                         \
      fprintf(stderr, "FAIL %s:%d: %s returned %s, expected %s\n  last error: %s\n", __FILE__, \
              __LINE__, #call, gaaw_status_name(test_st_), gaaw_status_name(want),              \
              gaaw_last_error(ctx));                                                           \
    }                                                                                          \
  } while (0)
#define expect_status(call, want) expect_status_ctx(NULL, call, want)

/* Stops the test at once when a setup call fails. */
#define require_ok(ctx, call)                                                                  \
  do {                                                                                         \
    gaaw_status_t test_st_ = (call);                                                           \
    if (test_st_ != GAAW_SUCCESS) {                                                            \
      fprintf(stderr, "FATAL %s:%d: %s returned %s\n  last error: %s\n", __FILE__, __LINE__,  \
              #call, gaaw_status_name(test_st_), gaaw_last_error(ctx));                        \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

/* |got - want| <= tol * max(1, |want|) element-wise; prints the worst element. */
static inline void expect_close_at(const float *got, const float *want, long n, double tol, const char *what,
                                   const char *file, int line)
{
  double worst = 0;
  long where = -1;
  for (long i = 0; i < n; i++) {
    double scale = fabs(want[i]) > 1 ? fabs(want[i]) : 1;
    double err = fabs((double)got[i] - want[i]) / scale;
    if (!(err <= worst)) { /* also catches nan */
      worst = err;
      where = i;
    }
  }
  test_checks++;
  if (where >= 0 && !(worst <= tol)) {
    test_failures++;
    fprintf(stderr, "FAIL %s:%d: %s: element %ld is %.9g, expected %.9g (relative error %.3g > %.3g)\n", file,
            line, what, where, got[where], want[where], worst, tol);
  }
}
#define expect_close(got, want, n, tol, what) expect_close_at((got), (want), (n), (tol), (what), __FILE__, __LINE__)

/* A context over comm with the options of list ("key=value" pairs, as
 * gaaw_config_parse reads them, e.g. "backend=host tp=2"). */
static inline gaaw_context_t test_context(MPI_Comm comm, const char *list)
{
  gaaw_config_t cfg;
  gaaw_context_t ctx = NULL;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_parse(cfg, list));
  require_ok(NULL, gaaw_init(comm, cfg, &ctx));
  gaaw_config_destroy(&cfg);
  return ctx;
}

/* Whether the device backend named name is built and finds a device here. */
static inline int test_backend_usable(const char *name)
{
  for (int i = 0; i < gaaw_info_backend_count(); i++) {
    const char *b;
    int devices = 0;
    if (gaaw_info_backend(i, &b, &devices) == GAAW_SUCCESS && strcmp(b, name) == 0) return devices > 0;
  }
  return 0;
}

/* The test's exit code, with a one-line summary. */
static inline int test_finish(const char *name)
{
  if (test_failures)
    fprintf(stderr, "%s: %d of %d checks failed\n", name, test_failures, test_checks);
  else
    fprintf(stderr, "%s: %d checks passed\n", name, test_checks);
  return test_failures ? 1 : 0;
}

#endif
