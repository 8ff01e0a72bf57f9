/* Helpers for gaaw's tests: checks that say what differed, where and by how much.
 * A test counts failures and exits 1 if any; 77 means skipped. */
#ifndef GAAW_TEST_UTIL_H
#define GAAW_TEST_UTIL_H

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- comparisons: one implementation for every test ----
 * A comparison fails on any element that is not finite (nan, inf) in got or in want,
 * and otherwise when the worst error exceeds the tolerance; its message names the
 * element (index, got, want). */

/* The running state of one comparison: its worst finite error, and its first
 * element that is not finite. */
typedef struct {
  long worst_at; /* -1 until a finite element is seen */
  double worst, worst_got, worst_want;
  long bad_at; /* first element where got, want or the error is not finite; -1: none */
  double bad_got, bad_want;
} test_errors;

static inline test_errors test_errors_start(void)
{
  test_errors e = {-1, 0, 0, 0, -1, 0, 0};
  return e;
}

/* Element i compared: got, want and its error (computed by the caller). */
static inline void test_errors_add(test_errors *e, long i, double got, double want, double err)
{
  if (!isfinite(got) || !isfinite(want) || !isfinite(err)) {
    if (e->bad_at < 0) e->bad_at = i, e->bad_got = got, e->bad_want = want;
    return;
  }
  if (e->worst_at < 0 || err > e->worst) e->worst_at = i, e->worst = err, e->worst_got = got, e->worst_want = want;
}

static inline int test_errors_pass(const test_errors *e, double tol)
{
  return e->bad_at < 0 && (e->worst_at < 0 || e->worst <= tol);
}

/* Why e did not pass, into msg: error_kind names the error ("relative error"), and
 * error_of (may be "") follows its value (" of the largest |value| 3"). */
static inline void test_errors_describe(const test_errors *e, double tol, const char *error_kind, const char *error_of,
                                        char *msg, size_t size)
{
  if (e->bad_at >= 0)
    snprintf(msg, size, "element %ld is %.9g, expected %.9g (not finite)", e->bad_at, e->bad_got, e->bad_want);
  else
    snprintf(msg, size, "element %ld is %.9g, expected %.9g (%s %.3g%s > %.3g)", e->worst_at, e->worst_got,
             e->worst_want, error_kind, e->worst, error_of, tol);
}

/* How a comparison scales the error of element i: TEST_PER_ELEMENT by max(1, |want_i|),
 * TEST_PER_TENSOR by the largest |want_j| of the array (1 if want is all zero). */
typedef enum { TEST_PER_ELEMENT, TEST_PER_TENSOR } test_scaling;

/* Whether every element of got and want is finite and |got_i - want_i| <= tol * scale;
 * when not, why goes into msg (may be NULL). Counts nothing. */
static inline int test_compare(const float *got, const float *want, long n, double tol, test_scaling scaling,
                               char *msg, size_t size)
{
  double scale = 0;
  if (scaling == TEST_PER_TENSOR) {
    for (long i = 0; i < n; i++)
      if (fabs((double)want[i]) > scale) scale = fabs((double)want[i]); /* a nan is caught below */
    if (!(scale > 0) || !isfinite(scale)) scale = 1;
  }
  test_errors e = test_errors_start();
  for (long i = 0; i < n; i++) {
    double s = scaling == TEST_PER_TENSOR ? scale : fabs((double)want[i]) > 1 ? fabs((double)want[i]) : 1;
    test_errors_add(&e, i, got[i], want[i], fabs((double)got[i] - want[i]) / s);
  }
  int pass = test_errors_pass(&e, tol);
  if (!pass && msg) {
    char of[64] = "";
    if (scaling == TEST_PER_TENSOR) snprintf(of, sizeof of, " of the largest |value| %.3g", scale);
    test_errors_describe(&e, tol, scaling == TEST_PER_TENSOR ? "error" : "relative error", of, msg, size);
  }
  return pass;
}

/* A comparison counted as a check of the test; returns whether it passed. */
static inline int test_expect_compare(const float *got, const float *want, long n, double tol, test_scaling scaling,
                                      const char *what, const char *file, int line)
{
  char msg[256];
  test_checks++;
  if (test_compare(got, want, n, tol, scaling, msg, sizeof msg)) return 1;
  test_failures++;
  fprintf(stderr, "FAIL %s:%d: %s: %s\n", file, line, what, msg);
  return 0;
}

/* A running comparison (test_errors) counted as a check; returns whether it passed. */
static inline int expect_errors_at(const test_errors *e, double tol, const char *error_kind, const char *what,
                                   const char *file, int line)
{
  char msg[256];
  test_checks++;
  if (test_errors_pass(e, tol)) return 1;
  test_failures++;
  test_errors_describe(e, tol, error_kind, "", msg, sizeof msg);
  fprintf(stderr, "FAIL %s:%d: %s: %s\n", file, line, what, msg);
  return 0;
}
#define expect_errors(e, tol, error_kind, what) expect_errors_at((e), (tol), (error_kind), (what), __FILE__, __LINE__)

/* |got - want| <= tol * max(1, |want|) element-wise, every element finite. */
static inline int expect_close_at(const float *got, const float *want, long n, double tol, const char *what,
                                  const char *file, int line)
{
  return test_expect_compare(got, want, n, tol, TEST_PER_ELEMENT, what, file, line);
}
#define expect_close(got, want, n, tol, what) expect_close_at((got), (want), (n), (tol), (what), __FILE__, __LINE__)

/* max_i |got_i - want_i| <= tol * max_i |want_i| (tol when want is all zero), every
 * element finite. */
static inline int expect_close_scaled_at(const float *got, const float *want, long n, double tol, const char *what,
                                         const char *file, int line)
{
  return test_expect_compare(got, want, n, tol, TEST_PER_TENSOR, what, file, line);
}
#define expect_close_scaled(got, want, n, tol, what) \
  expect_close_scaled_at((got), (want), (n), (tol), (what), __FILE__, __LINE__)

/* Concatenated tensors, each scaled by its own largest |value| (a small tensor next
 * to a large one is checked as tightly as if it were alone): piece k holds elements
 * offset[k] .. offset[k+1]-1 and is named name[k]. One check; returns whether every
 * piece passed, and names each piece that did not. */
static inline int expect_close_pieces_at(const float *got, const float *want, int count, const long *offset,
                                         const char *const *name, double tol, const char *what, const char *file,
                                         int line)
{
  int pass = 1;
  test_checks++;
  for (int k = 0; k < count; k++) {
    char msg[256];
    if (test_compare(got + offset[k], want + offset[k], offset[k + 1] - offset[k], tol, TEST_PER_TENSOR, msg,
                     sizeof msg))
      continue;
    if (pass) test_failures++;
    pass = 0;
    fprintf(stderr, "FAIL %s:%d: %s: %s: %s\n", file, line, what, name[k], msg);
  }
  return pass;
}
#define expect_close_pieces(got, want, count, offset, name, tol, what) \
  expect_close_pieces_at((got), (want), (count), (offset), (name), (tol), (what), __FILE__, __LINE__)

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

/* A bound the test claims on its own run time: past `seconds` the test fails with
 * what it was doing, a failure of its own rather than the harness's kill (an
 * endless loop is then a caught defect). SIGALRM; not with a test's own alarm. */
static const char *test_deadline_what = "";

static inline void test_deadline_fired(int sig)
{
  static const char head[] = "FAIL: the test's own deadline passed: ";
  (void)sig;
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, test_deadline_what, strlen(test_deadline_what));
  (void)!write(2, "\n", 1);
  _exit(1);
}

static inline void test_deadline(unsigned seconds, const char *what)
{
  test_deadline_what = what;
  signal(SIGALRM, test_deadline_fired);
  alarm(seconds);
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

/* Whether cond holds on every rank of comm. Collective over comm: a test that skips
 * for a missing component decides it through this, so every rank skips or none
 * does (tests/harness/run-test fails a test that some ranks skip and others pass). */
static inline int test_on_every_rank(MPI_Comm comm, int cond)
{
  int mine = cond != 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all;
}

static inline int test_finish(const char *name);

/* For MPI tests: finalizes MPI and returns the exit code, failing on every rank
 * when any rank failed (so that a script reading one rank's code sees it too). */
static inline int test_finish_mpi(const char *name)
{
  int failures = test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total && !failures) return 1;
  return test_finish(name);
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
