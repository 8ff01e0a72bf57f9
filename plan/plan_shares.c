/* gaaw_plan_shares: a global batch's rows split over consumers of unequal speed
 * (gaaw/plan.h), by largest remainder so that the split is proportional to the
 * speeds as far as whole rows allow. */
#include <math.h>
#include <stdlib.h>

#include "gaaw/plan.h"
#include "backends/runtime/runtime.h"

gaaw_status_t gaaw_plan_shares(gaaw_context_t ctx, int n, const double *speeds, int64_t rows, int64_t *out)
{
  GAAW_ARG_CHECK(ctx, n >= 1, "n (consumers) must be >= 1, got %d", n);
  GAAW_ARG_NOT_NULL(ctx, speeds);
  GAAW_ARG_NOT_NULL(ctx, out);
  GAAW_ARG_CHECK(ctx, rows >= n, "rows must be >= n so that each consumer gets a row, got rows = %lld, n = %d",
                 (long long)rows, n);
  double total = 0;
  for (int i = 0; i < n; i++) {
    GAAW_ARG_CHECK(ctx, isfinite(speeds[i]) && speeds[i] > 0, "speeds[%d] must be a finite number > 0, got %g", i,
                   speeds[i]);
    total += speeds[i];
  }
  double *rest = malloc((size_t)n * sizeof *rest);
  if (!rest) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d remainders", n);
  /* the floors of the exact shares (rows x speed / total: an integer share is exact),
   * then one more row each to the largest remainders, ties to the lower index */
  int64_t given = 0;
  for (int i = 0; i < n; i++) {
    double exact = (double)rows * speeds[i] / total, whole = floor(exact);
    out[i] = (int64_t)whole;
    rest[i] = exact - whole;
    given += out[i];
  }
  for (; given > rows; given--) { /* a quotient rounded up to a whole number: give one back */
    int most = 0;
    for (int j = 1; j < n; j++)
      if (out[j] > out[most]) most = j;
    out[most]--;
  }
  for (int64_t left = rows - given; left > 0; left--) {
    int best = 0;
    for (int i = 1; i < n; i++)
      if (rest[i] > rest[best]) best = i;
    out[best]++;
    rest[best] = -1; /* the remainders are < 1 each, so fewer than n rows are left */
  }
  /* a consumer too slow for a whole row still gets one, from the largest share
   * (rows >= n: that one has two or more) */
  for (int i = 0; i < n; i++) {
    if (out[i] >= 1) continue;
    int most = 0;
    for (int j = 1; j < n; j++)
      if (out[j] > out[most]) most = j;
    out[most]--;
    out[i]++;
  }
  free(rest);
  return GAAW_SUCCESS;
}
