/* The OpenMP wait policy, chosen by gaaw: its own small library, libgaaw_ompwait,
 * that libgaaw needs.
 *
 * libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its own constructor,
 * and never again; a library that calls into libgomp (libgaaw) is initialised after
 * it, too late to choose. This library does not need libgomp, and the dynamic loader
 * runs its constructor before libgomp's (tests/unit/test_omp_wait.sh checks that
 * libgomp saw the choice), so the setenv below is what libgomp reads.
 *
 * The choice, when the environment sets neither variable: a thread that finds no
 * work waits GAAW_OMP_SPINCOUNT spins, then sleeps (libgomp's default is 300000
 * spins, OMP_WAIT_POLICY=passive none). Between two kernels of a step the gap is a
 * few microseconds, within the spins; a rank waiting in MPI, or cores shared with a
 * solver, find the team asleep rather than spinning against them (doc/benchmarks.md
 * has the measurements). A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept. With a
 * static libgaaw the constructor runs with the program's, after libgomp's: there the
 * environment decides. */
#include <stdlib.h>

/* What the threads do when they find no work, as text for the log (host_threads.c
 * declares it, weak): gaaw's choice, or that the environment's was kept. */
const char *gaaw_omp_wait_choice(void);

#define GAAW_OMP_SPINCOUNT "10000"

static const char *choice = "";

__attribute__((constructor)) static void choose_wait_policy(void)
{
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) {
    choice = "from the environment (OMP_WAIT_POLICY or GOMP_SPINCOUNT)";
    return;
  }
  if (setenv("GOMP_SPINCOUNT", GAAW_OMP_SPINCOUNT, 0) == 0) choice = "GOMP_SPINCOUNT=" GAAW_OMP_SPINCOUNT " (chosen by gaaw)";
}

const char *gaaw_omp_wait_choice(void)
{
  return choice;
}
