/* gaaw_plan_shares: a global batch's rows split over consumers of unequal speed
 * (gaaw/plan.h), by largest remainder so that the split is proportional to the
 * speeds as far as whole rows allow; gaaw_plan_replica_rows: a layout's dp replicas
 * as such consumers. */
#include <math.h>
#include <stdlib.h>

#include "plan/plan_impl.h"
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

double plan_replica_speed(const gaaw_plan_cluster_t *c, const gaaw_plan_layout_t *l, int d)
{
  double speed = INFINITY;
  int64_t cp = l->cp > 1 ? l->cp : 1;
  for (int p = 0; p < l->pp; p++)
    for (int64_t k = 0; k < cp; k++)
      for (int t = 0; t < l->tp; t++) speed = fmin(speed, c->speeds[(((int64_t)p * l->dp + d) * cp + k) * l->tp + t]);
  return speed;
}

gaaw_status_t gaaw_plan_replica_rows(gaaw_context_t ctx, const gaaw_plan_cluster_t *cluster,
                                     const gaaw_plan_layout_t *layout, int64_t *rows)
{
  GAAW_ARG_NOT_NULL(ctx, cluster);
  GAAW_ARG_NOT_NULL(ctx, layout);
  GAAW_ARG_NOT_NULL(ctx, rows);
  const gaaw_plan_layout_t *l = layout;
  const int64_t world = (int64_t)cluster->nodes * cluster->devices_per_node;
  const int cp = l->cp > 1 ? l->cp : 1;
  GAAW_ARG_CHECK(ctx, l->dp >= 1 && l->pp >= 1 && l->tp >= 1 && (int64_t)l->dp * l->pp * cp * l->tp == world,
                 "dp %d x pp %d x cp %d x tp %d is not the cluster's %lld devices", l->dp, l->pp, cp, l->tp,
                 (long long)world);
  GAAW_ARG_CHECK(ctx, l->microbatch >= 1, "microbatch must be >= 1, got %d", l->microbatch);
  if (!cluster->speeds) {
    for (int d = 0; d < l->dp; d++) rows[d] = l->microbatch;
    return GAAW_SUCCESS;
  }
  double *speed = malloc(sizeof(double) * (size_t)l->dp);
  if (!speed) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d replica speeds", l->dp);
  for (int d = 0; d < l->dp; d++) speed[d] = plan_replica_speed(cluster, l, d);
  gaaw_status_t st = gaaw_plan_shares(ctx, l->dp, speed, (int64_t)l->dp * l->microbatch, rows);
  free(speed);
  return st;
}
