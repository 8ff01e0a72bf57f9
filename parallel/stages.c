/* Pipeline stage layout: the explicit pp_layout, or a balanced contiguous cut. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/context_impl.h"
#include "parallel/stages.h"

/* Parses "3,3,2" (or "3:3:2", for option lists where ',' separates options) into
 * counts[0..n); returns n, or -1 on a malformed value or more than max counts. */
static int parse_counts(const char *text, int *counts, int max)
{
  int n = 0;
  const char *p = text;
  while (*p) {
    char *end;
    errno = 0;
    long c = strtol(p, &end, 10);
    if (end == p || errno || c < 1 || c > 1000000 || n == max) return -1;
    counts[n++] = (int)c;
    p = end;
    if (*p == ',' || *p == ':') p++;
    else if (*p) return -1;
  }
  return n;
}

gaaw_status_t gaaw_stages_check_text(gaaw_context_t ctx, const char *layout, int pp, int v)
{
  if (!layout || !*layout) return GAAW_SUCCESS;
  int want = pp * v;
  int *counts = malloc(sizeof(int) * (size_t)(want + 1));
  if (!counts) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d layer counts", want);
  int n = parse_counts(layout, counts, want + 1);
  free(counts);
  GAAW_ARG_CHECK(ctx, n == want,
                 "option pp_layout '%s' must list pp x virtual_stages = %d x %d = %d layer counts >= 1, "
                 "separated by ',' or ':'", layout, pp, v, want);
  return GAAW_SUCCESS;
}

/* Balanced contiguous cut of the body into S groups, each with >= 1 layer, the
 * lead's cost on the first and the tail's on the last: minimises the largest group
 * cost (dynamic programming over cut points; S and the layer count are small). */
static gaaw_status_t balance(gaaw_context_t ctx, int nbody, const double *body, double lead, double tail, int S,
                             int *counts)
{
  /* best[s][j]: the smallest max cost of the first j body layers in s groups */
  double *best = malloc(sizeof(double) * (size_t)(S + 1) * (size_t)(nbody + 1));
  int *cut = malloc(sizeof(int) * (size_t)(S + 1) * (size_t)(nbody + 1));
  double *prefix = malloc(sizeof(double) * (size_t)(nbody + 1));
  if (!best || !cut || !prefix) {
    free(best), free(cut), free(prefix);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot plan %d stages over %d layers", S, nbody);
  }
  prefix[0] = 0;
  for (int j = 0; j < nbody; j++) prefix[j + 1] = prefix[j] + body[j];
#define AT(a, s, j) a[(size_t)(s) * (size_t)(nbody + 1) + (size_t)(j)]
  for (int s = 0; s <= S; s++)
    for (int j = 0; j <= nbody; j++) AT(best, s, j) = -1;
  AT(best, 0, 0) = 0;
  for (int s = 1; s <= S; s++)
    for (int j = s; j <= nbody - (S - s); j++)
      for (int i = s - 1; i < j; i++) {
        if (AT(best, s - 1, i) < 0) continue;
        double group = prefix[j] - prefix[i] + (s == 1 ? lead : 0) + (s == S ? tail : 0);
        double worst = group > AT(best, s - 1, i) ? group : AT(best, s - 1, i);
        if (AT(best, s, j) < 0 || worst < AT(best, s, j)) {
          AT(best, s, j) = worst;
          AT(cut, s, j) = i;
        }
      }
  for (int s = S, j = nbody; s >= 1; s--) {
    int i = AT(cut, s, j);
    counts[s - 1] = j - i;
    j = i;
  }
#undef AT
  free(best), free(cut), free(prefix);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_stages_plan(gaaw_context_t ctx, int nlayers, int lead, int tail, const double *cost, int pp,
                               int v, const char *layout, gaaw_stage_layout *out)
{
  memset(out, 0, sizeof *out);
  int S = pp * v, nbody = nlayers - lead - tail;
  GAAW_ARG_CHECK(ctx, nbody >= S,
                 "the model has %d layers to cut (transformer blocks or linears), fewer than pp x virtual_stages "
                 "= %d x %d = %d stages of at least one each", nbody, pp, v, S);
  GAAW_CHECK(gaaw_stages_check_text(ctx, layout, pp, v));
  out->lo = malloc(sizeof(int) * (size_t)S);
  out->hi = malloc(sizeof(int) * (size_t)S);
  int *counts = malloc(sizeof(int) * (size_t)(S + 1));
  if (!out->lo || !out->hi || !counts) {
    free(counts);
    gaaw_stages_free(out);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the layout of %d stages", S);
  }
  gaaw_status_t st = GAAW_SUCCESS;
  if (layout && *layout) {
    parse_counts(layout, counts, S + 1);
    int sum = 0;
    for (int s = 0; s < S; s++) sum += counts[s];
    if (sum != nbody)
      st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                            "option pp_layout '%s' gives %d layers, but the model has %d to cut", layout, sum, nbody);
  } else {
    double lead_cost = 0, tail_cost = 0;
    for (int i = 0; i < lead; i++) lead_cost += cost[i];
    for (int i = nlayers - tail; i < nlayers; i++) tail_cost += cost[i];
    st = balance(ctx, nbody, cost + lead, lead_cost, tail_cost, S, counts);
  }
  if (st != GAAW_SUCCESS) {
    free(counts);
    gaaw_stages_free(out);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  int at = lead;
  for (int s = 0; s < S; s++) {
    out->lo[s] = s == 0 ? 0 : at;
    at += counts[s];
    out->hi[s] = s == S - 1 ? nlayers : at;
  }
  free(counts);
  out->pp = pp;
  out->virtual_stages = v;
  out->count = S;
  return GAAW_SUCCESS;
}

int gaaw_stages_of_layer(const gaaw_stage_layout *l, int i)
{
  for (int s = 0; s < l->count; s++)
    if (i >= l->lo[s] && i < l->hi[s]) return s;
  return -1;
}

void gaaw_stages_free(gaaw_stage_layout *l)
{
  free(l->lo);
  free(l->hi);
  memset(l, 0, sizeof *l);
}
