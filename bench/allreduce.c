/* gaaw_comm_allreduce on the world communicator against raw MPI_Allreduce, f32 sum,
 * both in place (gaaw: send == recv; MPI: MPI_IN_PLACE on a plain malloc'd buffer).
 * Calls alternate gaaw / MPI; the buffers are refilled before every call (as a fresh
 * gradient would be, and so sums never overflow), outside the timed region. A
 * call's time is the slowest rank's, from a barrier to its return; medians of the
 * repeats are reported. ratio = MPI time / gaaw time (speed: > 1 means gaaw is
 * faster). busbw = 2 (p-1)/p * bytes / time, algbw = bytes / time.
 *
 *   mpiexec -n 2 ./bench/allreduce [--backend NAME] [BYTES...]   (one line per size,
 *   on rank 0; default sizes 4 KiB, 64 KiB, 1, 4, 16 and 64 MiB; default backend
 *   host. With a device backend (opencl) gaaw's tensor is device memory, staged
 *   through host memory by the MPI communicator: the figure then includes the
 *   device <-> host copies, and the ratio shows their overhead against MPI on host
 *   memory.) */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"
#include "bench/bench_util.h"

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    gaaw_status_t st_ = (call);                                                                      \
    if (st_ != GAAW_SUCCESS) {                                                                       \
      fprintf(stderr, "allreduce bench: %s failed: %s\n%s\n", #call, gaaw_status_name(st_),          \
              gaaw_last_error(NULL));                                                                \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                  \
    }                                                                                                \
  } while (0)

static void fill(float *x, size_t n, int rank)
{
  for (size_t i = 0; i < n; i++) x[i] = (float)((i + (size_t)rank) % 7) * 0.25f;
}

/* A barrier that yields the core while it waits: MPICH's blocking calls spin, and
 * with more ranks than cores a spinning rank keeps the one it waits for off the
 * CPU, which would add scheduler time slices to both sides' figures. */
static void gentle_barrier(void)
{
  MPI_Request req;
  int done = 0;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  while (MPI_Test(&req, &done, MPI_STATUS_IGNORE), !done) sched_yield();
}

/* Seconds of this rank from a common barrier to the end of fn (the slowest rank's
 * figure is taken after all repeats). */
static double time_call(void (*fn)(void *), void *arg)
{
  gentle_barrier();
  double t0 = MPI_Wtime();
  fn(arg);
  return MPI_Wtime() - t0;
}

typedef struct {
  gaaw_comm_t comm;
  gaaw_tensor_t t;
  float *raw;
  int n;
} bench_case;

static void run_gaaw(void *arg)
{
  bench_case *c = arg;
  CHECK(gaaw_comm_allreduce(c->comm, &c->t, &c->t, GAAW_SUM));
}

static void run_mpi(void *arg)
{
  bench_case *c = arg;
  MPI_Allreduce(MPI_IN_PLACE, c->raw, c->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  CHECK(gaaw_config_create(&cfg));
  const char *backend = "host";
  if (argc > 2 && strcmp(argv[1], "--backend") == 0) {
    backend = argv[2];
    argc -= 2;
    argv += 2;
  }
  CHECK(gaaw_config_set(cfg, "backend", backend));
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  bench_case c;
  CHECK(gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &c.comm));
  const char *coretype = getenv("OPENBLAS_CORETYPE");
  size_t sizes[16] = {4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  size_t n_sizes = 6;
  if (argc > 1)
    for (n_sizes = 0; n_sizes < 16 && (int)n_sizes + 1 < argc; n_sizes++)
      sizes[n_sizes] = (size_t)strtoull(argv[n_sizes + 1], NULL, 0) / sizeof(float) * sizeof(float);
  enum { MAX_REPS = 200 };
  for (size_t s = 0; s < n_sizes; s++) {
    size_t bytes = sizes[s];
    c.n = (int)(bytes / sizeof(float));
    int64_t shape[1] = {c.n};
    CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, shape, GAAW_MEM_GRADS, &c.t));
    float *g = malloc(bytes);
    c.raw = malloc(bytes);
    if (!c.raw || !g) MPI_Abort(MPI_COMM_WORLD, 1);
    /* about 1 GiB moved per side and size, at least 9 repeats */
    int reps = (int)((size_t)1 << 30) / (int)bytes;
    reps = reps < 9 ? 9 : reps > MAX_REPS ? MAX_REPS : reps;
    double tg[MAX_REPS], tm[MAX_REPS];
    for (int i = -2; i < reps; i++) { /* two warm-up rounds */
      fill(g, (size_t)c.n, rank);
      CHECK(gaaw_buffer_write(ctx, c.t.buf, 0, g, bytes));
      double a = time_call(run_gaaw, &c);
      fill(c.raw, (size_t)c.n, rank);
      double b = time_call(run_mpi, &c);
      if (i >= 0) tg[i] = a, tm[i] = b;
    }
    MPI_Allreduce(MPI_IN_PLACE, tg, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, tm, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double g_t = bench_median(tg, reps), m_t = bench_median(tm, reps);
    double bus = 2.0 * (size - 1) / size * (double)bytes;
    if (rank == 0)
      printf("bench=allreduce np=%d backend=%s dtype=f32 op=sum inplace=yes bytes=%zu reps=%d OPENBLAS_CORETYPE=%s "
             "algbw_GBps=%.3f busbw_GBps=%.3f peer_busbw_GBps=%.3f value=%.1f unit=us peer=MPI_Allreduce "
             "peer_value=%.1f ratio=%.3f\n",
             size, backend, bytes, reps, coretype ? coretype : "unset", bytes / g_t * 1e-9, bus / g_t * 1e-9,
             bus / m_t * 1e-9, g_t * 1e6, m_t * 1e6, m_t / g_t);
    fflush(stdout);
    free(c.raw);
    free(g);
    CHECK(gaaw_buffer_free(ctx, &c.t.buf));
  }
  CHECK(gaaw_finalize(&ctx));
  CHECK(gaaw_config_destroy(&cfg));
  MPI_Finalize();
  return 0;
}
