/* The comparison helpers of tests/harness/test_util.h can fail:
 *  - nan, inf and -inf at the first, a middle and the last element, of got and of
 *    want, fail expect_close, expect_close_scaled and expect_close_pieces, and the
 *    message names that element; a nan followed by finite elements is not forgotten;
 *  - a correct array passes, and so does one within the tolerance;
 *  - an error just above the tolerance fails, at any position;
 *  - per-tensor scales: a wrong small tensor next to a large one passes a comparison
 *    scaled by the largest value of the whole concatenation (which is why that is not
 *    enough) and fails expect_close_pieces, which names the small tensor;
 *  - a failing helper counts one failed check (test_failures), a passing one none.
 * Expected failures go through test_compare (which counts and prints nothing) or,
 * for the counting wrappers, with the failure counter saved and restored (their
 * FAIL lines are announced on stderr as expected). */
#include <math.h>

#include "tests/harness/test_util.h"

enum { N = 9 };

static void fill(float *v, long n, float base)
{
  for (long i = 0; i < n; i++) v[i] = base + 0.25f * (float)i - 0.5f * (float)(i % 3);
}

/* got = want except element at, which is value; the comparison must fail (in both
 * scalings) with a message naming the element, or pass when it should. */
static void one_case(int in_want, long at, float value, int should_pass, const char *label)
{
  float want[N], got[N];
  fill(want, N, 3.0f);
  fill(got, N, 3.0f);
  (in_want ? want : got)[at] = value;
  const test_scaling scalings[2] = {TEST_PER_ELEMENT, TEST_PER_TENSOR};
  for (int k = 0; k < 2; k++) {
    char msg[256] = "";
    int pass = test_compare(got, want, N, 1e-6, scalings[k], msg, sizeof msg);
    const char *how = k ? "per tensor" : "per element";
    if (should_pass) {
      expect_true(pass, "%s (%s) should pass: %s", label, how, msg);
      continue;
    }
    char where[32];
    snprintf(where, sizeof where, "element %ld is", at);
    expect_true(!pass, "%s (%s) passed", label, how);
    expect_true(strstr(msg, where) != NULL, "%s (%s): the message does not say '%s': %s", label, how, where, msg);
  }
}

static void nonfinite_anywhere(void)
{
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  const char *bad_name[3] = {"nan", "inf", "-inf"};
  const long at[3] = {0, N / 2, N - 1};
  for (int in_want = 0; in_want < 2; in_want++)
    for (int b = 0; b < 3; b++)
      for (int a = 0; a < 3; a++) {
        char label[96];
        snprintf(label, sizeof label, "%s at element %ld of %s", bad_name[b], at[a], in_want ? "want" : "got");
        one_case(in_want, at[a], bad[b], 0, label);
      }
  /* the same non-finite value on both sides is not a match either */
  float want[N], got[N];
  fill(want, N, 1.0f);
  fill(got, N, 1.0f);
  want[4] = got[4] = INFINITY;
  expect_true(!test_compare(got, want, N, 1e-6, TEST_PER_ELEMENT, NULL, 0), "inf == inf passed");
  want[4] = got[4] = NAN;
  expect_true(!test_compare(got, want, N, 1e-6, TEST_PER_TENSOR, NULL, 0), "nan vs nan passed");
}

static void correct_and_wrong(void)
{
  one_case(0, 0, 3.0f, 1, "a correct array");
  float want[N], got[N];
  fill(want, N, 3.0f);
  for (long i = 0; i < N; i++) got[i] = want[i] * (1 + 5e-7f * (i % 2 ? 1 : -1));
  expect_true(test_compare(got, want, N, 1e-6, TEST_PER_ELEMENT, NULL, 0), "errors of 5e-7 relative fail at 1e-6");
  expect_true(test_compare(got, want, N, 1e-6, TEST_PER_TENSOR, NULL, 0), "errors of 5e-7 fail at 1e-6 per tensor");
  /* a finite error above the tolerance at the first, middle or last element */
  const long at[3] = {0, N / 2, N - 1};
  for (int a = 0; a < 3; a++) {
    char label[64];
    fill(want, N, 3.0f);
    snprintf(label, sizeof label, "an error of 1e-3 at element %ld", at[a]);
    one_case(0, at[a], want[at[a]] * (1 + 1e-3f), 0, label);
  }
  /* all zero: per tensor, the error is absolute */
  float zeros[N] = {0}, tiny[N] = {0};
  tiny[3] = 1e-7f;
  expect_true(test_compare(tiny, zeros, N, 1e-6, TEST_PER_TENSOR, NULL, 0), "1e-7 against all zeros fails at 1e-6");
  tiny[3] = 1e-5f;
  expect_true(!test_compare(tiny, zeros, N, 1e-6, TEST_PER_TENSOR, NULL, 0), "1e-5 against all zeros passes at 1e-6");
}

/* A running comparison keeps its first non-finite element however many finite
 * elements, with larger errors, follow. */
static void running_errors(void)
{
  test_errors e = test_errors_start();
  test_errors_add(&e, 0, 1, 1, 0);
  test_errors_add(&e, 1, NAN, 1, NAN);
  for (long i = 2; i < 100; i++) test_errors_add(&e, i, 2, 1, 1.0 / (double)i);
  expect_true(!test_errors_pass(&e, 1.0), "a nan then finite elements passed");
  expect_true(e.bad_at == 1, "the first non-finite element is %ld, expected 1", e.bad_at);
  e = test_errors_start();
  test_errors_add(&e, 0, 1, 1, INFINITY); /* finite values, an infinite error */
  expect_true(!test_errors_pass(&e, 1e30), "an infinite error passed");
  e = test_errors_start();
  expect_true(test_errors_pass(&e, 0), "an empty comparison failed");
}

/* A wrong small tensor concatenated with a large one. */
static void per_tensor_scales(void)
{
  enum { BIG = 64, SMALL = 8 };
  float want[BIG + SMALL], got[BIG + SMALL];
  for (int i = 0; i < BIG; i++) want[i] = got[i] = 1000.0f * (float)(i % 5 + 1);
  for (int i = 0; i < SMALL; i++) {
    want[BIG + i] = 1e-3f * (float)(i + 1);
    got[BIG + i] = i == 5 ? 2 * want[BIG + i] : want[BIG + i]; /* 100% wrong */
  }
  const long offset[3] = {0, BIG, BIG + SMALL};
  const char *name[2] = {"big.weight", "small.bias"};
  expect_true(test_compare(got, want, BIG + SMALL, 1e-5, TEST_PER_TENSOR, NULL, 0),
              "(the premise) scaled by the whole concatenation, the small tensor's error is invisible");
  int failures = test_failures, checks = test_checks;
  fprintf(stderr, "test_harness: an expected failure follows (small.bias)\n");
  int pass = expect_close_pieces(got, want, 2, offset, name, 1e-5, "expected failure: concatenation");
  int counted = test_failures - failures, nchecks = test_checks - checks;
  test_failures = failures;
  expect_true(!pass && counted == 1 && nchecks == 1, "expect_close_pieces: passed %d, counted %d failures in %d checks",
              pass, counted, nchecks);
  char msg[256] = "";
  expect_true(!test_compare(got + BIG, want + BIG, SMALL, 1e-5, TEST_PER_TENSOR, msg, sizeof msg) &&
                  strstr(msg, "element 5 is") != NULL,
              "the small tensor alone: %s", msg);
  got[BIG + 5] = want[BIG + 5];
  expect_true(expect_close_pieces(got, want, 2, offset, name, 1e-5, "concatenation, corrected"),
              "the corrected concatenation failed");
}

/* The counting wrappers: a failure is one failed check, a pass none. */
static void counting(void)
{
  float want[N], got[N];
  fill(want, N, 2.0f);
  fill(got, N, 2.0f);
  got[N - 1] = NAN;
  int failures = test_failures, checks = test_checks;
  fprintf(stderr, "test_harness: three expected failures follow\n");
  int a = expect_close(got, want, N, 1e-3, "expected failure (nan in got)");
  int b = expect_close_scaled(got, want, N, 1e-3, "expected failure (nan in got)");
  test_errors e = test_errors_start();
  test_errors_add(&e, 7, NAN, 1, NAN);
  int c = expect_errors(&e, 1e-3, "error", "expected failure (nan)");
  int counted = test_failures - failures, nchecks = test_checks - checks;
  test_failures = failures;
  expect_true(!a && !b && !c && counted == 3 && nchecks == 3,
              "the wrappers returned %d %d %d and counted %d failures in %d checks", a, b, c, counted, nchecks);
  got[N - 1] = want[N - 1];
  failures = test_failures;
  expect_true(expect_close(got, want, N, 1e-6, "equal") && expect_close_scaled(got, want, N, 0, "equal") &&
                  test_failures == failures,
              "equal arrays failed");
}

int main(void)
{
  nonfinite_anywhere();
  correct_and_wrong();
  running_errors();
  per_tensor_scales();
  counting();
  return test_finish("test_harness");
}
