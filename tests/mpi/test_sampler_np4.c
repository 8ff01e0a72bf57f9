/* Sample buffers (gaaw/sampler.h) on 4 ranks:
 *  - newest keeps the last capacity samples; reservoir keeps a uniform sample;
 *    every held sample is drawn; draws are reproducible and depend on the seed;
 *  - at tp 2 a push appends the tp group's samples in group rank order, and the
 *    group's ranks draw the same rows;
 *  - exchange over dp 4 gives each rank n/dp samples drawn by every rank;
 *  - bad arguments on one rank, and configs that differ, fail every rank. */
#include <mpi.h>

#include "tests/harness/test_util.h"

static int rank;

/* Sample i of world rank r: inputs (r, i, -i), output (r * 1000 + i). */
static void make_samples(int r, int n, int first, float *x, float *y)
{
  for (int i = 0; i < n; i++) {
    x[3 * i] = (float)r, x[3 * i + 1] = (float)(first + i), x[3 * i + 2] = -(float)(first + i);
    y[i] = (float)(r * 1000 + first + i);
  }
}

static gaaw_sampler_t make_sampler(gaaw_context_t ctx, int64_t capacity, gaaw_sampler_policy_t policy,
                                   uint64_t seed)
{
  gaaw_sampler_config_t c;
  gaaw_sampler_config_default(&c);
  c.inputs = 3, c.outputs = 1, c.capacity = capacity, c.policy = policy, c.seed = seed;
  gaaw_sampler_t s;
  require_ok(ctx, gaaw_sampler_create(ctx, &c, &s));
  return s;
}

/* Each drawn row is a whole sample (its parts agree). */
static int rows_consistent(const float *x, const float *y, int n)
{
  for (int i = 0; i < n; i++)
    if (x[3 * i + 2] != -x[3 * i + 1] || y[i] != x[3 * i] * 1000 + x[3 * i + 1]) return 0;
  return 1;
}

static void policies(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  float x[3 * 1000], y[1000], dx[3 * 400], dy[400];
  int64_t held, pushed;

  /* newest: 10 pushed into 4 slots keeps 6..9 */
  gaaw_sampler_t s = make_sampler(ctx, 4, GAAW_SAMPLER_NEWEST, 1);
  make_samples(rank, 10, 0, x, y);
  require_ok(ctx, gaaw_sampler_push(s, 6, x, y));
  require_ok(ctx, gaaw_sampler_push(s, 4, x + 18, y + 6));
  require_ok(ctx, gaaw_sampler_size(s, &held, &pushed));
  expect_true(held == 4 && pushed == 10, "newest: held %lld pushed %lld, want 4 and 10", (long long)held,
              (long long)pushed);
  require_ok(ctx, gaaw_sampler_draw(s, 400, dx, dy));
  int seen[10] = {0}, old = 0;
  for (int i = 0; i < 400; i++) {
    int k = (int)dx[3 * i + 1];
    if (k < 6) old++;
    else seen[k]++;
  }
  expect_true(old == 0, "newest: %d draws of samples older than the newest 4", old);
  for (int k = 6; k < 10; k++) expect_true(seen[k] > 50, "newest: sample %d drawn %d times of 400", k, seen[k]);
  expect_true(rows_consistent(dx, dy, 400), "newest: drawn rows mix samples");
  gaaw_sampler_destroy(&s);

  /* reservoir: 1000 pushed into 100 slots: a uniform sample; the mean index of a
   * uniform 100 of 0..999 is 499.5 with a standard deviation of about 27.5 */
  s = make_sampler(ctx, 100, GAAW_SAMPLER_RESERVOIR, 7 + (uint64_t)0);
  make_samples(rank, 1000, 0, x, y);
  for (int i = 0; i < 1000; i += 100) require_ok(ctx, gaaw_sampler_push(s, 100, x + 3 * i, y + i));
  require_ok(ctx, gaaw_sampler_size(s, &held, &pushed));
  expect_true(held == 100 && pushed == 1000, "reservoir: held %lld pushed %lld", (long long)held, (long long)pushed);
  require_ok(ctx, gaaw_sampler_draw(s, 400, dx, dy));
  double mean = 0;
  int late = 0;
  for (int i = 0; i < 400; i++) mean += dx[3 * i + 1] / 400.0, late += dx[3 * i + 1] >= 100;
  expect_true(mean > 499.5 - 5 * 27.5 && mean < 499.5 + 5 * 27.5, "reservoir: mean index drawn %.1f, want 499.5",
              mean);
  expect_true(late > 300, "reservoir: only %d of 400 draws came after the first 100 pushed", late);
  expect_true(rows_consistent(dx, dy, 400), "reservoir: drawn rows mix samples");
  gaaw_sampler_destroy(&s);

  /* reproducible: the same seed and pushes draw the same rows; another seed not */
  float a[3 * 64], ay[64], b[3 * 64], by[64], c[3 * 64], cy[64];
  gaaw_sampler_t s1 = make_sampler(ctx, 50, GAAW_SAMPLER_RESERVOIR, 11);
  gaaw_sampler_t s2 = make_sampler(ctx, 50, GAAW_SAMPLER_RESERVOIR, 11);
  gaaw_sampler_t s3 = make_sampler(ctx, 50, GAAW_SAMPLER_RESERVOIR, 12);
  require_ok(ctx, gaaw_sampler_push(s1, 200, x, y));
  require_ok(ctx, gaaw_sampler_push(s2, 200, x, y));
  require_ok(ctx, gaaw_sampler_push(s3, 200, x, y));
  require_ok(ctx, gaaw_sampler_draw(s1, 64, a, ay));
  require_ok(ctx, gaaw_sampler_draw(s2, 64, b, by));
  require_ok(ctx, gaaw_sampler_draw(s3, 64, c, cy));
  expect_true(memcmp(a, b, sizeof a) == 0 && memcmp(ay, by, sizeof ay) == 0, "the same seed drew other rows");
  expect_true(memcmp(a, c, sizeof a) != 0, "seeds 11 and 12 drew the same rows");
  /* the next draw continues the stream: it differs from the first */
  require_ok(ctx, gaaw_sampler_draw(s2, 64, b, by));
  expect_true(memcmp(a, b, sizeof a) != 0, "a second draw repeated the first");
  gaaw_sampler_destroy(&s1), gaaw_sampler_destroy(&s2), gaaw_sampler_destroy(&s3);

  /* errors: on one rank only, every rank fails; differing configs are named */
  s = make_sampler(ctx, 8, GAAW_SAMPLER_NEWEST, 1);
  expect_status_ctx(ctx, gaaw_sampler_draw(s, 4, dx, dy), GAAW_ERR_STATE);
  expect_status_ctx(ctx, gaaw_sampler_push(s, rank == 2 ? -1 : 3, x, y), GAAW_ERR_INVALID_ARG);
  expect_true(rank == 2 || strstr(gaaw_last_error(ctx), "world rank 2") != NULL, "push error does not name rank 2: %s",
              gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_sampler_push(s, 3, x, rank == 1 ? NULL : y), GAAW_ERR_INVALID_ARG);
  require_ok(ctx, gaaw_sampler_size(s, &held, NULL));
  expect_true(held == 0, "a refused push kept %lld samples", (long long)held);
  expect_status_ctx(ctx, gaaw_sampler_exchange(s, 4), GAAW_ERR_STATE); /* nothing held anywhere */
  require_ok(ctx, gaaw_sampler_push(s, 3, x, y));
  expect_status_ctx(ctx, gaaw_sampler_exchange(s, 6), GAAW_ERR_INVALID_ARG); /* not a multiple of dp 4 */
  expect_status_ctx(ctx, gaaw_sampler_exchange(s, rank == 3 ? 8 : 4), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "n: 4 on ranks 0-2, 8 on rank 3") != NULL,
              "exchange with differing n: %s", gaaw_last_error(ctx));
  gaaw_sampler_destroy(&s);
  gaaw_sampler_config_t cfg;
  gaaw_sampler_config_default(&cfg);
  gaaw_sampler_t bad = (gaaw_sampler_t)&cfg;
  /* no configuration on one rank: the named error on every rank, not a crash */
  expect_status_ctx(ctx, gaaw_sampler_create(ctx, rank == 3 ? NULL : &cfg, &bad), GAAW_ERR_INVALID_ARG);
  expect_true(bad == NULL, "a create without a configuration left a sampler");
  cfg.capacity = rank == 0 ? 10 : 20;
  bad = (gaaw_sampler_t)&cfg;
  expect_status_ctx(ctx, gaaw_sampler_create(ctx, &cfg, &bad), GAAW_ERR_INVALID_ARG);
  expect_true(bad == NULL, "a failed create left a sampler");
  expect_true(strstr(gaaw_last_error(ctx), "capacity: 10 on rank 0, 20 on ranks 1-3") != NULL,
              "differing capacity: %s", gaaw_last_error(ctx));
  cfg.capacity = 10, cfg.inputs = rank == 1 ? 0 : 1;
  expect_status_ctx(ctx, gaaw_sampler_create(ctx, &cfg, &bad), GAAW_ERR_INVALID_ARG);
  /* each field of the configuration is agreed on: rank 2 differing in it is named */
  static const char *const field[] = {"inputs: ", "outputs: ", "policy: ", "seed: "};
  for (int f = 0; f < 4; f++) {
    gaaw_sampler_config_default(&cfg);
    int odd = rank == 2;
    if (f == 0) cfg.inputs += odd;
    if (f == 1) cfg.outputs += odd;
    if (f == 2) cfg.policy = odd ? GAAW_SAMPLER_RESERVOIR : GAAW_SAMPLER_NEWEST;
    if (f == 3) cfg.seed += (uint64_t)odd;
    expect_status_ctx(ctx, gaaw_sampler_create(ctx, &cfg, &bad), GAAW_ERR_INVALID_ARG);
    const char *msg = gaaw_last_error(ctx);
    expect_true(strstr(msg, field[f]) && strstr(msg, "on rank 2"), "%sdiffering on rank 2: %s", field[f], msg);
  }
  gaaw_finalize(&ctx);
}

/* tp 2 x dp 2: a push gathers the tp pair's samples; the pair draws alike. */
static void tensor_parallel(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2");
  int tp_rank, tp_size;
  require_ok(ctx, gaaw_topology_group_rank(ctx, GAAW_GROUP_TP, &tp_rank, &tp_size));
  gaaw_sampler_t s = make_sampler(ctx, 64, GAAW_SAMPLER_NEWEST, 3);
  float x[3 * 8], y[8];
  int n = 2 + tp_rank; /* the pair pushes 2 and 3: 5 in all */
  make_samples(rank, n, 0, x, y);
  require_ok(ctx, gaaw_sampler_push(s, n, x, y));
  int64_t held;
  require_ok(ctx, gaaw_sampler_size(s, &held, NULL));
  expect_true(held == 5, "tp push: held %lld, want 5", (long long)held);
  /* every held row is drawn, in group order: draw many, check the multiset */
  float dx[3 * 256], dy[256];
  require_ok(ctx, gaaw_sampler_draw(s, 256, dx, dy));
  int from_first = 0, from_second = 0, pair0 = rank - tp_rank;
  for (int i = 0; i < 256; i++) {
    from_first += dx[3 * i] == (float)pair0 && dx[3 * i + 1] < 2;
    from_second += dx[3 * i] == (float)(pair0 + 1) && dx[3 * i + 1] < 3;
  }
  expect_true(from_first + from_second == 256 && from_first > 50 && from_second > 80,
              "tp draws: %d from tp rank 0, %d from tp rank 1 of 256", from_first, from_second);
  /* the pair drew the same rows */
  float other[3 * 256];
  MPI_Sendrecv(dx, 3 * 256, MPI_FLOAT, rank ^ 1, 5, other, 3 * 256, MPI_FLOAT, rank ^ 1, 5, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  expect_true(memcmp(dx, other, sizeof other) == 0, "the tp pair drew different rows");
  /* the dp replicas did not (different data and streams) */
  MPI_Sendrecv(dx, 3 * 256, MPI_FLOAT, rank ^ 2, 6, other, 3 * 256, MPI_FLOAT, rank ^ 2, 6, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  expect_true(memcmp(dx, other, sizeof other) != 0, "two dp replicas drew the same rows");
  gaaw_sampler_destroy(&s);
  gaaw_finalize(&ctx);
}

/* dp 4: an exchange of 8 gives each rank 2 samples drawn by each rank. */
static void exchange(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  gaaw_sampler_t s = make_sampler(ctx, 64, GAAW_SAMPLER_NEWEST, 9);
  float x[3 * 8], y[8];
  make_samples(rank, 8, 0, x, y);
  require_ok(ctx, gaaw_sampler_push(s, 8, x, y));
  require_ok(ctx, gaaw_sampler_exchange(s, 8));
  int64_t held, pushed;
  require_ok(ctx, gaaw_sampler_size(s, &held, &pushed));
  expect_true(held == 16 && pushed == 16, "exchange: held %lld pushed %lld, want 16", (long long)held,
              (long long)pushed);
  /* draw everything often enough to see each of the 16: per source rank, the count
   * of distinct rows received must be 2 at most, and rows are whole samples */
  float dx[3 * 512], dy[512];
  require_ok(ctx, gaaw_sampler_draw(s, 512, dx, dy));
  int per_source[4] = {0};
  for (int i = 0; i < 512; i++) per_source[(int)dx[3 * i]]++;
  /* 8 own + 2 back from itself = 10 of 16 rows from this rank, 2 of 16 from each other */
  for (int r = 0; r < 4; r++) {
    double want = 512.0 * (r == rank ? 10 : 2) / 16;
    expect_true(per_source[r] > want / 2 && per_source[r] < want * 1.6,
                "exchange: %d of 512 draws from rank %d, want about %.0f", per_source[r], r, want);
  }
  expect_true(rows_consistent(dx, dy, 512), "exchange: rows mixed");
  /* an exchange leaves the context usable: the next epoch exchanges again */
  expect_status_ctx(ctx, gaaw_sampler_exchange(s, 8), GAAW_SUCCESS);
  gaaw_sampler_destroy(&s);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  policies();
  tensor_parallel();
  exchange();
  return test_finish_mpi("test_sampler_np4");
}
