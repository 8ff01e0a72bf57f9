/* gaaw_plan_shares: the rows of a global batch split over consumers by speed: the
 * shares sum to the rows, each is >= 1, equal speeds split evenly where the rows
 * divide, the shares follow the speeds (within a row), ties go to the lower index,
 * and bad arguments are GAAW_ERR_INVALID_ARG naming the value. */
#include <math.h>

#include "gaaw/plan.h"
#include "tests/harness/test_util.h"

static void expect_shares(int n, const double *speeds, int64_t rows, const int64_t *want)
{
  int64_t out[8];
  expect_status(gaaw_plan_shares(NULL, n, speeds, rows, out), GAAW_SUCCESS);
  for (int i = 0; i < n; i++)
    expect_true(out[i] == want[i], "rows %lld over %d: share %d is %lld, expected %lld", (long long)rows, n, i,
                (long long)out[i], (long long)want[i]);
}

int main(void)
{
  test_deadline(20, "gaaw_plan_shares and gaaw_plan_replica_rows take microseconds");
  expect_shares(4, (double[]){1, 1, 0.5, 0.5}, 12, (int64_t[]){4, 4, 2, 2});
  expect_shares(4, (double[]){1, 1, 0.5, 0.5}, 16, (int64_t[]){5, 5, 3, 3}); /* 5.33, 5.33, 2.67, 2.67 */
  expect_shares(4, (double[]){1, 1, 1, 1}, 16, (int64_t[]){4, 4, 4, 4});
  expect_shares(3, (double[]){0.7, 0.7, 0.7}, 12, (int64_t[]){4, 4, 4});
  expect_shares(3, (double[]){1, 1, 1}, 10, (int64_t[]){4, 3, 3});        /* a tie: the lower index */
  expect_shares(4, (double[]){2, 1, 1, 2}, 9, (int64_t[]){3, 2, 1, 3});   /* 3, 1.5, 1.5, 3: the tie to index 1 */
  expect_shares(3, (double[]){1000, 1, 1}, 3, (int64_t[]){1, 1, 1});      /* every consumer a row */
  expect_shares(3, (double[]){1000, 1, 1}, 10, (int64_t[]){8, 1, 1});
  expect_shares(1, (double[]){0.25}, 7, (int64_t[]){7});
  /* many sizes: sums, >= 1, within a row of the exact share */
  double speeds[8] = {1, 0.5, 0.25, 2, 1.5, 0.75, 3, 0.1};
  for (int n = 1; n <= 8; n++)
    for (int64_t rows = n; rows <= 200; rows++) {
      int64_t out[8], sum = 0;
      double total = 0;
      for (int i = 0; i < n; i++) total += speeds[i];
      int raised = 0; /* consumers whose exact share is under a row get one, from the largest */
      for (int i = 0; i < n; i++) raised += (double)rows * speeds[i] / total < 1;
      expect_status(gaaw_plan_shares(NULL, n, speeds, rows, out), GAAW_SUCCESS);
      for (int i = 0; i < n; i++) {
        sum += out[i];
        double exact = (double)rows * speeds[i] / total;
        expect_true(out[i] >= 1 && (out[i] == 1 || fabs((double)out[i] - exact) < 1 + raised), "rows %lld over %d: share %d "
                    "is %lld, exactly %g", (long long)rows, n, i, (long long)out[i], exact);
      }
      expect_true(sum == rows, "rows %lld over %d: the shares sum to %lld", (long long)rows, n, (long long)sum);
    }
  int64_t out[4];
  expect_status(gaaw_plan_shares(NULL, 4, (double[]){1, 1, 1, 1}, 3, out), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "rows = 3, n = 4") != NULL, "%s", gaaw_last_error(NULL));
  expect_status(gaaw_plan_shares(NULL, 2, (double[]){1, 0}, 8, out), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "speeds[1]") != NULL, "%s", gaaw_last_error(NULL));
  expect_status(gaaw_plan_shares(NULL, 2, (double[]){1, NAN}, 8, out), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_plan_shares(NULL, 0, (double[]){1}, 8, out), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_plan_shares(NULL, 2, NULL, 8, out), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_plan_shares(NULL, 2, (double[]){1, 1}, 8, NULL), GAAW_ERR_INVALID_ARG);
  return test_finish("test_plan_shares");
}
