/* hello_gaaw: the smallest gaaw program. Starts gaaw on MPI_COMM_WORLD with options
 * from the command line, prints the rank grid, then every rank all-reduces a tensor
 * holding its world rank over its tensor-parallel group and over its data-parallel
 * group and checks the sums.
 *
 *   mpiexec -n 4 ./hello_gaaw --tp 2        (world 4 = dp 2 x pp 1 x tp 2)
 *
 * Any gaaw option works as --name value or --name=value (gaaw-info lists them).
 * Exit status: 0 when every sum is right on every rank, 1 on a gaaw failure or a
 * wrong sum, 2 for a bad command line. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "gaaw.h"

#define N 4 /* elements of the tensor */

/* Prints the failed call with gaaw's report and returns its status. */
#define TRY(ctx, call)                                                                             \
  do {                                                                                             \
    gaaw_status_t st_ = (call);                                                                    \
    if (st_ != GAAW_SUCCESS) {                                                                     \
      fprintf(stderr, "hello_gaaw: rank %d: %s failed: %s\n%s\n", world_rank, #call,               \
              gaaw_status_name(st_), gaaw_last_error(ctx));                                        \
      return st_;                                                                                  \
    }                                                                                              \
  } while (0)

/* Returns a failure already reported further down. */
#define PROPAGATE(call)                 \
  do {                                  \
    gaaw_status_t st_ = (call);         \
    if (st_ != GAAW_SUCCESS) return st_; \
  } while (0)

static int world_rank = -1;

/* The world ranks in this rank's group of the given dimension: the other two
 * coordinates fixed, the third running over its extent. Their sum is what the
 * all-reduce of world ranks must give. */
static gaaw_status_t group_rank_sum(gaaw_context_t ctx, gaaw_group_t group, int *sum)
{
  int dp, pp, tp, d, p, t, extent, r;
  TRY(ctx, gaaw_topology_sizes(ctx, &dp, &pp, &tp));
  TRY(ctx, gaaw_topology_coords(ctx, &d, &p, &t));
  extent = group == GAAW_GROUP_TP ? tp : dp;
  *sum = 0;
  for (int i = 0; i < extent; i++) {
    if (group == GAAW_GROUP_TP)
      TRY(ctx, gaaw_topology_rank_of(ctx, d, p, i, &r));
    else
      TRY(ctx, gaaw_topology_rank_of(ctx, i, p, t, &r));
    *sum += r;
  }
  return GAAW_SUCCESS;
}

/* All-reduces x[i] = world_rank * (i + 1) over group; x[i] must become
 * (sum of the group's world ranks) * (i + 1). Counts wrong elements in *wrong. */
static gaaw_status_t check_group(gaaw_context_t ctx, gaaw_group_t group, int *wrong)
{
  int64_t shape[1] = {N};
  int32_t x[N], want[N];
  int sum;
  gaaw_comm_t comm;
  gaaw_tensor_t t; /* (N) i32 */
  PROPAGATE(group_rank_sum(ctx, group, &sum));
  for (int i = 0; i < N; i++) {
    x[i] = world_rank * (i + 1);
    want[i] = sum * (i + 1);
  }
  TRY(ctx, gaaw_topology_comm(ctx, group, &comm));
  TRY(ctx, gaaw_tensor_alloc(ctx, GAAW_I32, 1, shape, GAAW_MEM_COMMUNICATION, &t));
  gaaw_status_t st = gaaw_buffer_write(ctx, t.buf, t.offset, x, sizeof x);
  if (st == GAAW_SUCCESS) st = gaaw_comm_allreduce(comm, &t, &t, GAAW_SUM);
  if (st == GAAW_SUCCESS) st = gaaw_buffer_read(ctx, t.buf, t.offset, x, sizeof x);
  if (st != GAAW_SUCCESS)
    fprintf(stderr, "hello_gaaw: rank %d: all-reduce over the %s group failed: %s\n%s\n", world_rank,
            gaaw_group_name(group), gaaw_status_name(st), gaaw_last_error(ctx));
  gaaw_buffer_free(ctx, &t.buf);
  if (st != GAAW_SUCCESS) return st;
  for (int i = 0; i < N; i++)
    if (x[i] != want[i]) {
      fprintf(stderr, "hello_gaaw: rank %d: %s all-reduce element %d is %d, expected %d\n", world_rank,
              gaaw_group_name(group), i, (int)x[i], (int)want[i]);
      (*wrong)++;
    }
  return GAAW_SUCCESS;
}

/* Rank 0 prints the grid: every world rank with its coordinates. */
static gaaw_status_t print_topology(gaaw_context_t ctx)
{
  int size, dp, pp, tp, r;
  const char *backend;
  TRY(ctx, gaaw_world_size(ctx, &size));
  TRY(ctx, gaaw_topology_sizes(ctx, &dp, &pp, &tp));
  TRY(ctx, gaaw_backend_name(ctx, &backend));
  if (world_rank != 0) return GAAW_SUCCESS;
  printf("gaaw %s: world %d = dp %d x pp %d x tp %d, backend %s\n", gaaw_version(), size, dp, pp, tp, backend);
  for (int p = 0; p < pp; p++)
    for (int d = 0; d < dp; d++)
      for (int t = 0; t < tp; t++) {
        TRY(ctx, gaaw_topology_rank_of(ctx, d, p, t, &r));
        printf("  rank %d: dp %d, pp %d, tp %d\n", r, d, p, t);
      }
  return GAAW_SUCCESS;
}

static gaaw_status_t run(gaaw_context_t ctx, int *wrong)
{
  PROPAGATE(print_topology(ctx));
  PROPAGATE(check_group(ctx, GAAW_GROUP_TP, wrong));
  PROPAGATE(check_group(ctx, GAAW_GROUP_DP, wrong));
  return GAAW_SUCCESS;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);

  gaaw_config_t cfg = NULL;
  gaaw_context_t ctx = NULL;
  int code = 0;
  gaaw_status_t st = gaaw_config_create(&cfg);
  if (st == GAAW_SUCCESS) st = gaaw_config_parse_args(cfg, &argc, argv);
  if (st != GAAW_SUCCESS || argc > 1) {
    if (world_rank == 0) {
      if (st != GAAW_SUCCESS) fprintf(stderr, "hello_gaaw: %s\n", gaaw_last_error(NULL));
      else fprintf(stderr, "hello_gaaw: unknown argument '%s'\n", argv[1]);
      fprintf(stderr, "usage: mpiexec -n N hello_gaaw [--tp N] [--pp N] [--dp N] [--backend NAME] ...\n");
    }
    code = 2;
  } else if (gaaw_init(MPI_COMM_WORLD, cfg, &ctx) != GAAW_SUCCESS) {
    fprintf(stderr, "hello_gaaw: rank %d: gaaw_init failed:\n%s\n", world_rank, gaaw_last_error(NULL));
    code = 1;
  } else {
    int wrong = 0, wrong_anywhere = 0;
    int failed = run(ctx, &wrong) != GAAW_SUCCESS || wrong > 0;
    /* One verdict for all ranks. */
    MPI_Allreduce(&failed, &wrong_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (world_rank == 0)
      printf(wrong_anywhere ? "hello_gaaw: FAILED on at least one rank\n"
                            : "hello_gaaw: tp and dp all-reduce sums are right on every rank\n");
    code = wrong_anywhere ? 1 : 0;
  }
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return code;
}
