/* What the benchmark programs share: a synthetic token stream, the median of timed
 * repeats, the CPU time the process has used, the parsing of their own integer
 * options, gaaw's start from the command line, and the check that ends the job on a
 * failed gaaw call. */
#ifndef GAAW_BENCH_UTIL_H
#define GAAW_BENCH_UTIL_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "gaaw.h"

static int bench_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One byte of the benchmarks' synthetic token stream (bench/train_gpt_torch.py
 * computes the same): stream `stream` (a dp rank, a row), step `step`, position pos. */
static inline int32_t bench_stream_byte(int stream, int step, int pos)
{
  uint32_t h = (uint32_t)stream * 1000003u + (uint32_t)step * 7919u + (uint32_t)pos;
  h *= 2654435761u;
  h ^= h >> 15;
  return (int32_t)(h & 255u);
}

/* The median of v[0..n) (the mean of the middle two for even n); v is not changed. */
static inline double bench_median(const double *v, int n)
{
  double *s = malloc((size_t)n * sizeof *s);
  if (!s || n < 1) {
    free(s);
    return 0;
  }
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
  double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
  return m;
}

/* User + system CPU seconds of all threads of this process. */
static inline double bench_cpu_seconds(void)
{
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
         1e-6 * (double)u.ru_stime.tv_usec;
}

/* Ends the job (MPI_Abort) when call fails, printing the call, its status and gaaw's
 * report on ctx (the process-wide one when ctx has none). For programs that include
 * mpi.h and gaaw.h; program names the program in the message. */
#define BENCH_CHECK(program, ctx, call)                                                                  \
  do {                                                                                                 \
    gaaw_status_t st_ = (call);                                                                        \
    if (st_ != GAAW_SUCCESS) {                                                                         \
      const char *report_ = gaaw_last_error(ctx);                                                      \
      fprintf(stderr, "%s: %s failed: %s\n%s\n", program, #call, gaaw_status_name(st_),                \
              report_[0] ? report_ : gaaw_last_error(NULL));                                           \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                    \
    }                                                                                                  \
  } while (0)

/* After the program's own options are taken (below): parses the remaining
 * arguments into cfg (gaaw's options) and starts gaaw on MPI_COMM_WORLD. Returns 0,
 * or 2 after rank 0 says which argument nobody knows (the caller then ends). */
static inline int bench_gaaw_start(const char *program, gaaw_config_t cfg, int *argc, char **argv,
                                   gaaw_context_t *ctx)
{
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  BENCH_CHECK(program, NULL, gaaw_config_parse_args(cfg, argc, argv));
  if (*argc > 1) {
    if (rank == 0) fprintf(stderr, "%s: unknown argument '%s'\n", program, argv[1]);
    return 2;
  }
  BENCH_CHECK(program, NULL, gaaw_init(MPI_COMM_WORLD, cfg, ctx));
  return 0;
}

/* Takes the program's own options "--KEY VALUE" or "--KEY=VALUE" for each of the
 * nkeys names in keys, storing the non-negative integer VALUE in *slots[i], and
 * leaves the other arguments (gaaw's options) in argv, *argc updated. Returns 0
 * after printing why when a value is not a non-negative integer. */
static inline int bench_take_int_options(const char *program, int *argc, char **argv, const char *const *keys,
                                         int *const *slots, int nkeys)
{
  int out = 1;
  for (int i = 1; i < *argc; i++) {
    int matched = 0;
    for (int k = 0; k < nkeys && !matched; k++) {
      size_t len = strlen(keys[k]);
      const char *a = argv[i];
      if (strncmp(a, "--", 2) || strncmp(a + 2, keys[k], len)) continue;
      const char *value = a[2 + len] == '=' ? a + 3 + len : a[2 + len] == 0 && i + 1 < *argc ? argv[++i] : NULL;
      if (!value) continue;
      char *end;
      long v = strtol(value, &end, 10);
      if (*end || v < 0 || v > 1000000000L) {
        fprintf(stderr, "%s: bad value '%s' for --%s\n", program, value, keys[k]);
        return 0;
      }
      *slots[k] = (int)v;
      matched = 1;
    }
    if (!matched) argv[out++] = argv[i];
  }
  *argc = out;
  return 1;
}

#endif
