/* Pipeline schedules against DESIGN.md section 10, without MPI: every generator for
 * pp <= 16, microbatches <= 64, virtual_stages <= 4 passes the verifier, gives the
 * bubble and the activations in flight of the formulas, and the invalid sizes are
 * refused naming the numbers; hand-made schedules that deadlock, miss a receive or
 * break a dependency are rejected naming the rank and the action. */
#include <time.h>

#include "parallel/schedule.h"
#include "test_util.h"

static const gaaw_sched_cost_t unit = {.f = 1, .b = 1, .w = 1, .p2p = 0};

static int min_i(int a, int b)
{
  return a < b ? a : b;
}

/* Whether the last error names each of the numbers (as "pp 4" or "pp (4)" or "4"). */
static int names_numbers(int p, int m, int v)
{
  const char *e = gaaw_last_error(NULL);
  char buf[32];
  int ok = 1;
  int nums[3] = {p, m, v};
  for (int i = 0; i < 3; i++) {
    snprintf(buf, sizeof buf, "%d", nums[i]);
    ok = ok && strstr(e, buf) != NULL;
  }
  return ok;
}

typedef struct {
  int valid, checked;
  int bubble_exact, peak_exact, zb_third, zb_bound;
} tally;

/* One (kind, p, m, v) of the sweep; r1f1b: 1F1B's idle time and peak for (p, m). */
static void sweep_one(int kind, int p, int m, int v, tally *t, double *idle_1f1b, int *peak_1f1b)
{
  gaaw_sched_t *s = NULL;
  gaaw_status_t want = gaaw_sched_check(NULL, kind, p, m, v);
  gaaw_status_t got = gaaw_sched_create(NULL, kind, p, m, v, &s);
  const char *name = gaaw_sched_kind_name(kind);
  if (want != GAAW_SUCCESS) {
    expect_true(got == GAAW_ERR_INVALID_ARG && s == NULL, "%s pp %d m %d v %d: refused by check, create gave %s",
                name, p, m, v, gaaw_status_name(got));
    expect_true(names_numbers(p, m, v), "%s pp %d m %d v %d: the refusal does not name the numbers: %s", name, p,
                m, v, gaaw_last_error(NULL));
    return;
  }
  t->valid++;
  if (got != GAAW_SUCCESS) {
    expect_true(0, "%s pp %d m %d v %d: create failed: %s", name, p, m, v, gaaw_last_error(NULL));
    return;
  }
  gaaw_sched_report_t rep;
  expect_status(gaaw_sched_verify(NULL, s, &unit, &rep), GAAW_SUCCESS);
  t->checked++;
  double P = p, M = m, V = v;
  switch (kind) {
  case GAAW_SCHED_GPIPE:
  case GAAW_SCHED_1F1B:
    /* bubble = (p-1)/(m+p-1) exactly: idle (m+p-1) == (p-1) p makespan, makespan 3 (m+p-1) */
    expect_true(rep.idle * (M + P - 1) == (P - 1) * P * rep.makespan && rep.makespan == 3 * (M + P - 1),
                "%s pp %d m %d: bubble %.6f (idle %g, makespan %g), formula %.6f", name, p, m, rep.bubble, rep.idle,
                rep.makespan, (P - 1) / (M + P - 1));
    t->bubble_exact++;
    for (int r = 0; r < p; r++) {
      int want_peak = kind == GAAW_SCHED_GPIPE ? m : min_i(p - r, m);
      expect_true(s->ranks[r].peak_in_flight == want_peak, "%s pp %d m %d rank %d: peak in flight %d, expected %d",
                  name, p, m, r, s->ranks[r].peak_in_flight, want_peak);
    }
    t->peak_exact++;
    if (kind == GAAW_SCHED_1F1B) {
      *idle_1f1b = rep.idle;
      *peak_1f1b = rep.peak_in_flight;
    }
    break;
  case GAAW_SCHED_INTERLEAVED:
    /* bubble = (p-1)/(v m + p-1) exactly, chunk actions of unit cost */
    expect_true(rep.idle * (V * M + P - 1) == (P - 1) * P * rep.makespan && rep.makespan == 3 * (V * M + P - 1),
                "interleaved pp %d m %d v %d: bubble %.6f (idle %g, makespan %g), formula %.6f", p, m, v, rep.bubble,
                rep.idle, rep.makespan, (P - 1) / (V * M + P - 1));
    t->bubble_exact++;
    for (int r = 0; r < p; r++) {
      int bound = (v - 1) * p + 2 * (p - 1 - r) + 1;
      expect_true(s->ranks[r].peak_in_flight <= bound, "interleaved pp %d m %d v %d rank %d: peak %d above %d", p,
                  m, v, r, s->ranks[r].peak_in_flight, bound);
      /* and it is reached (capped by the v m chunk-microbatches of the step) */
      expect_true(s->ranks[r].peak_in_flight == min_i(bound, v * m),
                  "interleaved pp %d m %d v %d rank %d: peak %d, expected min(%d, %d)", p, m, v, r,
                  s->ranks[r].peak_in_flight, bound, v * m);
    }
    t->peak_exact++;
    break;
  case GAAW_SCHED_ZB_H1:
    /* a third of 1F1B's idle time once m >= p; never more than 1F1B's */
    expect_true(rep.idle <= *idle_1f1b, "zb-h1 pp %d m %d: idle %g above 1F1B's %g", p, m, rep.idle, *idle_1f1b);
    t->zb_bound++;
    if (m >= p) {
      expect_true(3 * rep.idle == *idle_1f1b, "zb-h1 pp %d m %d: idle %g, not a third of 1F1B's %g", p, m, rep.idle,
                  *idle_1f1b);
      t->zb_third++;
    }
    /* same peak memory as 1F1B: min(p, m) on every rank, 1F1B's peak on its first stage */
    expect_true(rep.peak_in_flight == *peak_1f1b, "zb-h1 pp %d m %d: peak %d, 1F1B's %d", p, m, rep.peak_in_flight,
                *peak_1f1b);
    for (int r = 0; r < p; r++)
      expect_true(s->ranks[r].peak_in_flight == min_i(p, m), "zb-h1 pp %d m %d rank %d: peak %d, expected %d", p, m,
                  r, s->ranks[r].peak_in_flight, min_i(p, m));
    t->peak_exact++;
    break;
  }
  gaaw_sched_destroy(&s);
  expect_true(s == NULL, "destroy sets the pointer to NULL");
}

static void sweep(void)
{
  clock_t t0 = clock();
  tally t = {0};
  for (int p = 1; p <= 16; p++)
    for (int m = 1; m <= 64; m++) {
      double idle_1f1b = -1;
      int peak_1f1b = -1;
      /* 1F1B before ZB-H1, which is compared with it */
      const int kinds[] = {GAAW_SCHED_GPIPE, GAAW_SCHED_1F1B, GAAW_SCHED_ZB_H1, GAAW_SCHED_INTERLEAVED};
      for (int k = 0; k < 4; k++)
        for (int v = 1; v <= 4; v++) sweep_one(kinds[k], p, m, v, &t, &idle_1f1b, &peak_1f1b);
    }
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  printf("sweep: %d valid schedules verified (%d with the bubble exact, %d with the peaks exact, zb-h1 a third of "
         "1F1B's idle in %d, below 1F1B's in %d) in %.2f s\n",
         t.checked, t.bubble_exact, t.peak_exact, t.zb_third, t.zb_bound, secs);
  expect_true(t.valid == t.checked, "%d valid, %d verified", t.valid, t.checked);
}

/* Given costs: the bubble of GPipe and 1F1B is (p-1)/(m+p-1) for any F and backward
 * costs, that of interleaved (p-1)/(v m + p-1) whenever a backward costs at least a
 * forward; a message latency d adds between 2 (p-1) d and 2 (m+p-1) d to GPipe's
 * makespan. */
static void given_costs(void)
{
  const gaaw_sched_cost_t costs = {.f = 2, .b = 3, .w = 1.5, .p2p = 0};
  const gaaw_sched_cost_t slow = {.f = 1, .b = 1, .w = 1, .p2p = 0.25};
  for (int p = 1; p <= 8; p++)
    for (int m = 1; m <= 16; m++) {
      gaaw_sched_t *s = NULL;
      gaaw_sched_report_t rep;
      require_ok(NULL, gaaw_sched_create(NULL, GAAW_SCHED_GPIPE, p, m, 1, &s));
      expect_status(gaaw_sched_verify(NULL, s, &costs, &rep), GAAW_SUCCESS);
      double want = (m + p - 1) * (costs.f + costs.b + costs.w);
      expect_true(fabs(rep.makespan - want) < 1e-9 && fabs(rep.bubble - (double)(p - 1) / (m + p - 1)) < 1e-12,
                  "gpipe pp %d m %d with costs: makespan %g (expected %g), bubble %g", p, m, rep.makespan, want,
                  rep.bubble);
      expect_status(gaaw_sched_verify(NULL, s, &slow, &rep), GAAW_SUCCESS);
      /* at least the 2 (p-1) hops of the first microbatch; at most one hop per step of
       * the critical path (a receive is posted after the previous one completed) */
      double lo = 3 * (m + p - 1) + 2 * (p - 1) * slow.p2p, hi = 3 * (m + p - 1) + 2 * (m + p - 1) * slow.p2p;
      expect_true(rep.makespan >= lo - 1e-9 && rep.makespan <= hi + 1e-9,
                  "gpipe pp %d m %d with p2p %g: makespan %g, not in [%g, %g]", p, m, slow.p2p, rep.makespan, lo, hi);
      gaaw_sched_destroy(&s);
    }
  /* 1F1B with the same costs; interleaved with a backward of 1, 2 and 3 forwards */
  const gaaw_sched_cost_t icosts[] = {{.f = 1, .b = 0.5, .w = 0.5}, {.f = 1, .b = 2, .w = 0}, {.f = 2, .b = 4, .w = 2}};
  for (int p = 1; p <= 8; p++)
    for (int m = 1; m <= 32; m++) {
      gaaw_sched_t *s = NULL;
      gaaw_sched_report_t rep;
      require_ok(NULL, gaaw_sched_create(NULL, GAAW_SCHED_1F1B, p, m, 1, &s));
      expect_status(gaaw_sched_verify(NULL, s, &costs, &rep), GAAW_SUCCESS);
      expect_true(fabs(rep.bubble - (double)(p - 1) / (m + p - 1)) < 1e-12, "1f1b pp %d m %d with costs: bubble %g",
                  p, m, rep.bubble);
      gaaw_sched_destroy(&s);
      for (int v = 2; v <= 4 && m % p == 0; v++) {
        require_ok(NULL, gaaw_sched_create(NULL, GAAW_SCHED_INTERLEAVED, p, m, v, &s));
        for (int k = 0; k < 3; k++) {
          expect_status(gaaw_sched_verify(NULL, s, &icosts[k], &rep), GAAW_SUCCESS);
          expect_true(fabs(rep.bubble - (double)(p - 1) / (v * m + p - 1)) < 1e-12,
                      "interleaved pp %d m %d v %d with f %g b %g w %g: bubble %g, formula %g", p, m, v, icosts[k].f,
                      icosts[k].b, icosts[k].w, rep.bubble, (double)(p - 1) / (v * m + p - 1));
        }
        gaaw_sched_destroy(&s);
      }
    }
  /* costs are checked */
  gaaw_sched_t *s = NULL;
  require_ok(NULL, gaaw_sched_create(NULL, GAAW_SCHED_1F1B, 2, 2, 1, &s));
  const gaaw_sched_cost_t bad = {.f = -1, .b = 1, .w = 1};
  expect_status(gaaw_sched_verify(NULL, s, &bad, NULL), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "f -1") != NULL, "negative cost not named: %s", gaaw_last_error(NULL));
  gaaw_sched_destroy(&s);
}

/* The refusals of DESIGN.md: each names p, m and v. */
static void invalid_sizes(void)
{
  gaaw_sched_t *s = NULL;
  expect_status(gaaw_sched_create(NULL, GAAW_SCHED_INTERLEAVED, 4, 6, 2, &s), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "microbatches (6) to be a multiple of pp (4)") &&
                  strstr(gaaw_last_error(NULL), "virtual_stages 2"),
              "interleaved m %% p: %s", gaaw_last_error(NULL));
  expect_status(gaaw_sched_create(NULL, GAAW_SCHED_1F1B, 4, 8, 2, &s), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "virtual_stages 1 (got 2"), "1f1b v 2: %s", gaaw_last_error(NULL));
  expect_status(gaaw_sched_create(NULL, GAAW_SCHED_INTERLEAVED, 4, 8, 1, &s), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_sched_create(NULL, GAAW_SCHED_GPIPE, 0, 8, 1, &s), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "got pp 0, microbatches 8"), "pp 0: %s", gaaw_last_error(NULL));
  expect_status(gaaw_sched_create(NULL, GAAW_SCHED_GPIPE, 2, 0, 1, &s), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_sched_create(NULL, GAAW_SCHED_GPIPE, 2, 4, 0, &s), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_sched_create(NULL, GAAW_SCHED_GPIPE, 1 << 12, 1 << 12, 1, &s), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_sched_create(NULL, GAAW_SCHED_INTERLEAVED, 1 << 30, 1 << 30, 1 << 30, &s), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "is above") != NULL, "huge sizes: %s", gaaw_last_error(NULL));
  expect_status(gaaw_sched_create(NULL, 7, 2, 2, 1, &s), GAAW_ERR_INVALID_ARG);
  expect_true(s == NULL, "a refused schedule leaves *out NULL");
  gaaw_sched_kind_t k;
  expect_status(gaaw_sched_kind_parse(NULL, "ZB-H1", &k), GAAW_SUCCESS);
  expect_true(k == GAAW_SCHED_ZB_H1, "zb-h1 parses");
  expect_status(gaaw_sched_kind_parse(NULL, "dualpipe", &k), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "'dualpipe'") != NULL, "unknown name: %s", gaaw_last_error(NULL));
}

/* A schedule by hand from a string of "rank: op mb chunk [peer]" actions, ';' between. */
static gaaw_sched_t *by_hand(int p, int m, int v, const char *list)
{
  gaaw_sched_t *s = NULL;
  require_ok(NULL, gaaw_sched_create_empty(NULL, p, m, v, &s));
  static const char *ops[] = {"F", "B", "W", "BW", "SA", "RA", "SG", "RG"};
  const char *c = list;
  while (*c) {
    int r, mb, ch, peer = -1, n = 0;
    char op[8];
    if (sscanf(c, " %d: %7s %d %d%n", &r, op, &mb, &ch, &n) < 4) break;
    c += n;
    int k = 0;
    while (k < 8 && strcmp(ops[k], op) != 0) k++;
    if (k >= GAAW_SCHED_SEND_ACT) {
      sscanf(c, " %d%n", &peer, &n);
      c += n;
    }
    require_ok(NULL, gaaw_sched_append(NULL, s, r, k, mb, ch, peer));
    while (*c == ' ' || *c == ';') c++;
  }
  return s;
}

static void expect_rejected(gaaw_sched_t *s, const char *what, const char *text1, const char *text2)
{
  gaaw_status_t st = gaaw_sched_verify(NULL, s, NULL, NULL);
  const char *e = gaaw_last_error(NULL);
  expect_true(st == GAAW_ERR_INVALID_ARG, "%s: verify returned %s", what, gaaw_status_name(st));
  expect_true(strstr(e, text1) != NULL, "%s: message lacks '%s': %s", what, text1, e);
  expect_true(!text2 || strstr(e, text2) != NULL, "%s: message lacks '%s': %s", what, text2, e);
}

/* A list by hand that the verifier rejects with text in its message. */
static void reject_list(int p, int m, int v, const char *list, const char *text)
{
  gaaw_sched_t *s = by_hand(p, m, v, list);
  expect_rejected(s, list, text, NULL);
  gaaw_sched_destroy(&s);
}

static void hand_made(void)
{
  /* 1F1B done right by hand passes (an exchange pairs SEND_ACT 1 with RECV_GRAD 0) */
  gaaw_sched_t *s = by_hand(2, 2, 1,
                            "0: F 0 0; 0: SA 0 0 1; 0: F 1 0; 0: SA 1 0 1; 0: RG 0 0 1; 0: BW 0 0; 0: RG 1 0 1; "
                            "0: BW 1 0;"
                            "1: RA 0 0 0; 1: F 0 0; 1: BW 0 0; 1: SG 0 0 0; 1: RA 1 0 0; 1: F 1 0; 1: BW 1 0; "
                            "1: SG 1 0 0");
  gaaw_sched_report_t rep;
  expect_status(gaaw_sched_verify(NULL, s, NULL, &rep), GAAW_SUCCESS);
  expect_true(rep.makespan == 9, "hand-made 1F1B pp 2 m 2: makespan %g, expected 9", rep.makespan);
  gaaw_sched_destroy(&s);

  /* each rank waits for the other: rank 0 for a gradient before it sends the activation
   * (its receive is posted, and its BW waits for the data) */
  s = by_hand(2, 1, 1,
              "0: F 0 0; 0: RG 0 0 1; 0: BW 0 0; 0: SA 0 0 1;"
              "1: RA 0 0 0; 1: F 0 0; 1: BW 0 0; 1: SG 0 0 0");
  expect_rejected(s, "cycle", "deadlock", "rank 0 waits at action 2 (BW mb 0 chunk 0)");
  expect_rejected(s, "cycle", "rank 1 waits at action 1 (F mb 0 chunk 0)", NULL);
  gaaw_sched_destroy(&s);

  /* deadlocks only without buffering: rank 0 sends activation 1 in an exchange of its
   * own while rank 1 sends gradient 0, which rank 0 receives only later. With buffered
   * sends it would run; under blocking rendezvous it cannot. */
  s = by_hand(2, 3, 1,
              "0: F 0 0; 0: SA 0 0 1; 0: F 1 0; 0: SA 1 0 1; 0: F 2 0; 0: SA 2 0 1; 0: RG 0 0 1; 0: B 0 0; "
              "0: W 0 0; 0: RG 1 0 1; 0: B 1 0; 0: W 1 0; 0: RG 2 0 1; 0: B 2 0; 0: W 2 0;"
              "1: RA 0 0 0; 1: F 0 0; 1: B 0 0; 1: SG 0 0 0; 1: W 0 0; 1: RA 1 0 0; 1: F 1 0; 1: B 1 0; "
              "1: SG 1 0 0; 1: W 1 0; 1: RA 2 0 0; 1: F 2 0; 1: B 2 0; 1: SG 2 0 0; 1: W 2 0");
  expect_rejected(s, "rendezvous", "deadlock under blocking rendezvous",
                  "rank 0 waits at action 3 (SEND_ACT mb 1 chunk 0 to rank 1)");
  expect_rejected(s, "rendezvous", "rank 1 waits at action 3 (SEND_GRAD mb 0 chunk 0 to rank 0)", NULL);
  gaaw_sched_destroy(&s);

  /* a missing receive: rank 1 never receives activation 1 */
  s = by_hand(2, 2, 1,
              "0: F 0 0; 0: SA 0 0 1; 0: F 1 0; 0: SA 1 0 1; 0: RG 0 0 1; 0: BW 0 0; 0: RG 1 0 1; 0: BW 1 0;"
              "1: RA 0 0 0; 1: F 0 0; 1: BW 0 0; 1: SG 0 0 0; 1: F 1 0; 1: BW 1 0; 1: SG 1 0 0");
  expect_rejected(s, "missing receive",
                  "rank 0 action 3 (SEND_ACT mb 1 chunk 0 to rank 1) has no matching receive on rank 1", NULL);
  gaaw_sched_destroy(&s);

  /* receives out of the order of the sends */
  s = by_hand(2, 2, 1,
              "0: F 0 0; 0: F 1 0; 0: SA 0 0 1; 0: SA 1 0 1; 0: RG 0 0 1; 0: BW 0 0; 0: RG 1 0 1; 0: BW 1 0;"
              "1: RA 1 0 0; 1: RA 0 0 0; 1: F 0 0; 1: BW 0 0; 1: SG 0 0 0; 1: F 1 0; 1: BW 1 0; 1: SG 1 0 0");
  expect_rejected(s, "order", "rank 0 action 2 (SEND_ACT mb 0 chunk 0 to rank 1)",
                  "rank 1's receive number 0 from rank 0 is action 0 (RECV_ACT mb 1 chunk 0 from rank 0)");
  gaaw_sched_destroy(&s);

  /* dependencies: a backward before its forward; W before B; chunks out of order; a
   * microbatch without backward; a wrong peer; a message to a stage that does not exist */
  reject_list(1, 1, 1, "0: BW 0 0; 0: F 0 0", "rank 0 action 0 (BW mb 0 chunk 0) comes before the forward");
  reject_list(1, 1, 1, "0: F 0 0; 0: W 0 0; 0: B 0 0", "rank 0 action 1 (W mb 0 chunk 0) comes before its B");
  reject_list(1, 1, 2, "0: F 0 1; 0: F 0 0; 0: BW 0 1; 0: BW 0 0",
              "rank 0 action 0 (F mb 0 chunk 1) comes before the forward of the previous chunk");
  reject_list(1, 2, 1, "0: F 0 0; 0: BW 0 0; 0: F 1 0", "rank 0 never runs B mb 1 chunk 0");
  reject_list(3, 1, 1, "0: F 0 0; 0: SA 0 0 2",
              "rank 0 action 1 (SEND_ACT mb 0 chunk 0 to rank 2): virtual stage 1 is on rank 1");
  reject_list(2, 1, 1, "0: RA 0 0 1", "rank 0 action 0 (RECV_ACT mb 0 chunk 0 from rank 1): virtual stage 0 has no "
                                      "neighbour -1");
  reject_list(2, 1, 1, "0: F 0 0; 0: SA 0 0 1; 0: SA 0 0 1; 1: RA 0 0 0; 1: RA 0 0 0",
              "rank 0 action 2 (SEND_ACT mb 0 chunk 0 to rank 1) sends twice");
}

/* The same compute order with every receive posted only right before the action
 * that needs it (sends unchanged): under blocking rendezvous a rank blocked sending to
 * a peer that is blocked sending back deadlocks interleaved 1F1B, which is why the
 * generator posts receives earlier. */
static void late_receives(int p, int m, int v)
{
  gaaw_sched_t *gen = NULL, *late = NULL;
  require_ok(NULL, gaaw_sched_create(NULL, GAAW_SCHED_INTERLEAVED, p, m, v, &gen));
  require_ok(NULL, gaaw_sched_create_empty(NULL, p, m, v, &late));
  int nv = p * v;
  for (int r = 0; r < p; r++)
    for (int i = 0; i < gen->ranks[r].count; i++) {
      const gaaw_sched_action_t *a = &gen->ranks[r].actions[i];
      int vs = a->chunk * p + r;
      if (a->op == GAAW_SCHED_RECV_ACT || a->op == GAAW_SCHED_RECV_GRAD) continue;
      if (a->op == GAAW_SCHED_F && vs > 0)
        require_ok(NULL, gaaw_sched_append(NULL, late, r, GAAW_SCHED_RECV_ACT, a->mb, a->chunk, (r - 1 + p) % p));
      if (a->op == GAAW_SCHED_BW && vs + 1 < nv)
        require_ok(NULL, gaaw_sched_append(NULL, late, r, GAAW_SCHED_RECV_GRAD, a->mb, a->chunk, (r + 1) % p));
      require_ok(NULL, gaaw_sched_append(NULL, late, r, a->op, a->mb, a->chunk, a->peer));
    }
  expect_rejected(late, "late receives", "deadlock under blocking rendezvous", NULL);
  printf("late receives, interleaved pp %d m %d v %d: %s\n", p, m, v, gaaw_last_error(NULL));
  gaaw_sched_destroy(&gen);
  gaaw_sched_destroy(&late);
}

/* Tags: the two ends of every message agree (the verifier matched them), and a
 * gradient's tag differs from an activation's. */
static void tags(void)
{
  gaaw_sched_t *s = NULL;
  require_ok(NULL, gaaw_sched_create(NULL, GAAW_SCHED_INTERLEAVED, 2, 4, 2, &s));
  gaaw_sched_action_t sa = {.op = GAAW_SCHED_SEND_ACT, .mb = 1, .chunk = 0, .peer = 1};
  gaaw_sched_action_t ra = {.op = GAAW_SCHED_RECV_ACT, .mb = 1, .chunk = 0, .peer = 0};
  gaaw_sched_action_t sg = {.op = GAAW_SCHED_SEND_GRAD, .mb = 1, .chunk = 1, .peer = 1};
  gaaw_sched_action_t rg = {.op = GAAW_SCHED_RECV_GRAD, .mb = 1, .chunk = 0, .peer = 0};
  expect_true(gaaw_sched_tag(s, 0, &sa) == gaaw_sched_tag(s, 1, &ra), "activation tags differ");
  expect_true(gaaw_sched_tag(s, 0, &sg) == gaaw_sched_tag(s, 1, &rg), "gradient tags differ");
  expect_true(gaaw_sched_tag(s, 0, &sa) != gaaw_sched_tag(s, 0, &sg), "activation and gradient share a tag");
  gaaw_sched_destroy(&s);
}

/* The timeline of 1F1B on 2 stages and 3 microbatches, and the public API. */
static void timeline(void)
{
  size_t need = 0;
  expect_status(gaaw_schedule_timeline("1f1b", 2, 3, 1, NULL, 0, &need), GAAW_SUCCESS);
  char *text = malloc(need);
  expect_status(gaaw_schedule_timeline("1f1b", 2, 3, 1, text, need, NULL), GAAW_SUCCESS);
  printf("%s", text);
  expect_true(strstr(text, "rank 0 |F0  F1  .   .   BW0 ~   F2  BW1 ~   .   BW2 ~\n") != NULL, "rank 0's row");
  expect_true(strstr(text, "rank 1 |.   F0  BW0 ~   F1  BW1 ~   F2  BW2 ~   .   .\n") != NULL, "rank 1's row");
  expect_true(strlen(text) + 1 == need, "needed %zu for %zu characters", need, strlen(text));
  char small[16];
  expect_status(gaaw_schedule_timeline("1f1b", 2, 3, 1, small, sizeof small, NULL), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "the buffer has 16") != NULL, "small buffer: %s", gaaw_last_error(NULL));
  expect_true(strlen(small) < sizeof small, "truncated text is terminated");
  free(text);

  expect_status(gaaw_schedule_timeline("interleaved", 2, 2, 2, NULL, 0, &need), GAAW_SUCCESS);
  text = malloc(need);
  expect_status(gaaw_schedule_timeline("interleaved", 2, 2, 2, text, need, NULL), GAAW_SUCCESS);
  printf("%s", text);
  expect_true(strstr(text, "F0.1") != NULL, "interleaved cells name the chunk");
  free(text);

  gaaw_schedule_summary_t sum;
  expect_status(gaaw_schedule_summary("zb-h1", 4, 8, 1, &sum), GAAW_SUCCESS);
  expect_true(sum.makespan == 27 && sum.idle == 12 && sum.peak_in_flight == 4 && sum.pp == 4,
              "zb-h1 pp 4 m 8: makespan %g idle %g peak %d", sum.makespan, sum.idle, sum.peak_in_flight);
  expect_status(gaaw_schedule_summary("1f1b", 4, 8, 1, &sum), GAAW_SUCCESS);
  expect_true(fabs(sum.bubble - 3.0 / 11) < 1e-12, "1f1b pp 4 m 8: bubble %g, expected 3/11", sum.bubble);
  int peak[4] = {0};
  expect_status(gaaw_schedule_peak_in_flight("1f1b", 4, 8, 1, peak, 4), GAAW_SUCCESS);
  expect_true(peak[0] == 4 && peak[1] == 3 && peak[2] == 2 && peak[3] == 1, "1f1b peaks %d %d %d %d", peak[0],
              peak[1], peak[2], peak[3]);
  expect_status(gaaw_schedule_peak_in_flight("1f1b", 4, 8, 1, peak, 3), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_schedule_summary("interleaved", 4, 6, 2, &sum), GAAW_ERR_INVALID_ARG);
  expect_true(names_numbers(4, 6, 2), "public refusal: %s", gaaw_last_error(NULL));
  expect_status(gaaw_schedule_summary("nope", 4, 8, 1, &sum), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_schedule_summary(NULL, 4, 8, 1, &sum), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_schedule_summary("1f1b", 4, 8, 1, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_schedule_timeline("1f1b", 4, 8, 1, NULL, 5, NULL), GAAW_ERR_INVALID_ARG);
}

int main(void)
{
  invalid_sizes();
  hand_made();
  late_receives(2, 4, 2);
  tags();
  given_costs();
  timeline();
  sweep();
  printf("%d checks, %d failures\n", test_checks, test_failures);
  return test_failures ? 1 : 0;
}
