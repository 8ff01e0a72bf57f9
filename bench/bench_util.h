/* What the benchmark programs share: the median of timed repeats, and the CPU time
 * the process has used. */
#ifndef GAAW_BENCH_UTIL_H
#define GAAW_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int bench_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
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

#endif
