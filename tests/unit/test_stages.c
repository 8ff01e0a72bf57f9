/* Pipeline stage layouts without MPI (parallel/stages.c): the balanced cut equals a
 * brute-force search over every contiguous cut (the largest stage cost is the
 * smallest possible), for random costs, pp x v up to 4 and up to 8 body layers;
 * the lead layers go to the first stage and the tail to the last; an explicit
 * pp_layout is followed ("1,3" and "1:3" alike); and counts that do not fit are
 * errors naming the numbers. */
#include "parallel/stages.h"
#include "test_util.h"

/* The smallest largest-stage cost over every cut of body[0..n) into S groups >= 1. */
static double brute(const double *body, int n, double lead, double tail, int S, int at, int s, double worst)
{
  if (s == S) return at == n ? worst : 1e300;
  double best = 1e300, group = s == 0 ? lead : 0;
  for (int end = at + 1; end <= n - (S - s - 1); end++) {
    group += body[end - 1];
    double g = group + (s == S - 1 ? tail : 0);
    if (s == S - 1 && end != n) continue;
    double w = brute(body, n, lead, tail, S, end, s + 1, g > worst ? g : worst);
    if (w < best) best = w;
  }
  return best;
}

static double largest_stage(const gaaw_stage_layout *l, const double *cost)
{
  double worst = 0;
  for (int s = 0; s < l->count; s++) {
    double c = 0;
    for (int i = l->lo[s]; i < l->hi[s]; i++) c += cost[i];
    if (c > worst) worst = c;
  }
  return worst;
}

static void check_balanced(void)
{
  uint64_t x = 42;
  for (int trial = 0; trial < 300; trial++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int pp = 1 + (int)(x >> 60) % 2, v = 1 + (int)(x >> 56) % 2, S = pp * v, nbody = S + (int)((x >> 50) % 5);
    int lead = (int)(x >> 40) % 2, n = lead + nbody + 1;
    double cost[16];
    for (int i = 0; i < n; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      cost[i] = (double)((x >> 33) % 100);
    }
    gaaw_stage_layout l;
    expect_status(gaaw_stages_plan(NULL, n, lead, 1, cost, pp, v, "", &l), GAAW_SUCCESS);
    double lead_cost = lead ? cost[0] : 0, want = brute(cost + lead, nbody, lead_cost, cost[n - 1], S, 0, 0, 0);
    expect_true(l.count == S && l.lo[0] == 0 && l.hi[S - 1] == n, "trial %d: %d stages over [%d, %d)", trial, l.count,
                l.lo[0], l.hi[S - 1]);
    int contiguous = 1;
    for (int s = 0; s < S; s++) {
      int body_layers = (l.hi[s] < n - 1 ? l.hi[s] : n - 1) - (l.lo[s] > lead ? l.lo[s] : lead);
      contiguous &= (s == 0 || l.lo[s] == l.hi[s - 1]) && body_layers >= 1;
    }
    expect_true(contiguous, "trial %d: stages not contiguous or one without a body layer", trial);
    expect_true(largest_stage(&l, cost) == want, "trial %d (pp %d, v %d, %d body layers): the largest stage costs %g, "
                "the best cut %g", trial, pp, v, nbody, largest_stage(&l, cost), want);
    gaaw_stages_free(&l);
  }
}

int main(void)
{
  check_balanced();
  /* a heavy tail (the head) pulls the cut forward: 3 blocks, then 1 block + head */
  double gpt[6] = {0, 10, 10, 10, 10, 25};
  gaaw_stage_layout l;
  expect_status(gaaw_stages_plan(NULL, 6, 1, 1, gpt, 2, 1, "", &l), GAAW_SUCCESS);
  expect_true(l.lo[0] == 0 && l.hi[0] == 4 && l.lo[1] == 4 && l.hi[1] == 6, "heavy tail: [%d, %d) [%d, %d)", l.lo[0],
              l.hi[0], l.lo[1], l.hi[1]);
  gaaw_stages_free(&l);
  /* explicit: 1 block then 3, with either separator */
  const char *texts[2] = {"1,3", "1:3"};
  for (int k = 0; k < 2; k++) {
    expect_status(gaaw_stages_plan(NULL, 6, 1, 1, gpt, 2, 1, texts[k], &l), GAAW_SUCCESS);
    expect_true(l.hi[0] == 2 && l.lo[1] == 2 && l.hi[1] == 6, "%s: [0, %d) [%d, %d)", texts[k], l.hi[0], l.lo[1],
                l.hi[1]);
    gaaw_stages_free(&l);
  }
  /* interleaved: pp 2 x v 2 over 4 blocks, one each; virtual stage 3 holds the head */
  expect_status(gaaw_stages_plan(NULL, 6, 1, 1, gpt, 2, 2, "", &l), GAAW_SUCCESS);
  expect_true(l.count == 4 && l.hi[0] == 2 && l.hi[1] == 3 && l.hi[2] == 4 && l.hi[3] == 6 &&
                gaaw_stages_of_layer(&l, 5) == 3 && gaaw_stages_of_layer(&l, 0) == 0,
              "pp 2 x v 2: stage ends %d %d %d %d", l.hi[0], l.hi[1], l.hi[2], l.hi[3]);
  gaaw_stages_free(&l);
  /* what does not fit, by name */
  struct { const char *layout; int pp, v; const char *message; } bad[] = {
    {"1,2,3", 2, 1, "must list pp x virtual_stages = 2 x 1 = 2 layer counts"},
    {"2,3", 2, 1, "gives 5 layers, but the model has 4 to cut"},
    {"0,4", 2, 1, "layer counts >= 1"},
    {"a,b", 2, 1, "layer counts >= 1"},
    {"", 5, 1, "the model has 4 layers to cut (transformer blocks or linears), fewer than pp x virtual_stages = 5 x 1"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    expect_status(gaaw_stages_plan(NULL, 6, 1, 1, gpt, bad[k].pp, bad[k].v, bad[k].layout, &l), GAAW_ERR_INVALID_ARG);
    expect_true(strstr(gaaw_last_error(NULL), bad[k].message) != NULL, "'%s' at pp %d: %s", bad[k].layout, bad[k].pp,
                gaaw_last_error(NULL));
  }
  return test_finish("test_stages");
}
